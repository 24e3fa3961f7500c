//! In-process sharding: a [`Queryable`] made of N shard sources, each holding the series
//! whose label-set hash falls to it ([`shard_of`]). Selects fan out to every shard and
//! merge; query fragments ([`crate::Fragment`]) run on every shard at once, at most
//! `parallelism` at a time, through the same [`ShardEvaluator`] contract a remote
//! querier uses. The engine sees a [`ShardEvaluator`] and pushes down what its planner
//! allows, so a query uses up to `parallelism` cores.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::engine::{Engine, EngineOptions, QueryOptions};
use crate::error::QueryError;
use crate::fragment::{parallel_map, Fragment, FragmentOutput, ShardEvaluator};
use crate::model::{PlannedSelect, Queryable, ReadResult, SelectHints, SelectResult};
use tessera_model::{Labels, Matcher};

/// The shard of a series among `shards`: xxh3_64 over its labels (sorted by name) as
/// `name 0xFF value 0xFF ...`, modulo the shard count. Every series has exactly one
/// shard, which is what pushdown relies on.
pub fn shard_of(labels: &Labels, shards: usize) -> usize {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for l in labels.iter() {
        h.update(l.name.as_bytes());
        h.update(&[0xFF]);
        h.update(l.value.as_bytes());
        h.update(&[0xFF]);
    }
    (h.digest() % shards.max(1) as u64) as usize
}

/// A source split into shards (each a [`Queryable`] over its own series, which must not
/// overlap) that evaluates pushed-down fragments per shard, in parallel.
pub struct ShardedQueryable<Q> {
    shards: Vec<Q>,
    engine: Engine,
    parallelism: usize,
    fragments: AtomicU64,
}

impl<Q: Queryable> ShardedQueryable<Q> {
    /// `shards` in shard-id order; fragments are evaluated with `opts`' text limits (the
    /// grid, lookback and sample budget come with each fragment); at most `parallelism`
    /// shards work at once for one query (at least 1).
    pub fn new(shards: Vec<Q>, opts: EngineOptions, parallelism: usize) -> Self {
        ShardedQueryable {
            shards,
            engine: Engine::new(opts),
            parallelism: parallelism.max(1),
            fragments: AtomicU64::new(0),
        }
    }

    pub fn shards(&self) -> &[Q] {
        &self.shards
    }

    /// The shards, to load data into (each series into its [`shard_of`] shard).
    pub fn shards_mut(&mut self) -> &mut [Q] {
        &mut self.shards
    }

    /// How many shard fragment evaluations have run (for tests and metrics).
    pub fn fragments_evaluated(&self) -> u64 {
        self.fragments.load(Ordering::Relaxed)
    }

    fn fan_out<T: Send>(
        &self,
        f: impl Fn(&Q) -> Result<ReadResult<Vec<T>>, QueryError> + Sync,
    ) -> Result<(Vec<T>, Vec<String>), QueryError> {
        let parts = parallel_map(self.shards.len(), self.parallelism, |i| f(&self.shards[i]))?;
        let mut data = Vec::new();
        let mut warnings: Vec<String> = Vec::new();
        for p in parts {
            data.extend(p.data);
            for w in p.warnings {
                if !warnings.contains(&w) {
                    warnings.push(w);
                }
            }
        }
        Ok((data, warnings))
    }
}

impl<Q: Queryable> Queryable for ShardedQueryable<Q> {
    fn prepare(&self, selects: &[PlannedSelect], ctl: &QueryOptions) {
        for s in &self.shards {
            s.prepare(selects, ctl);
        }
    }

    fn select(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<SelectResult, QueryError> {
        let (mut data, warnings) = self.fan_out(|s| s.select(matchers, hints, ctl))?;
        data.sort_by(|a, b| a.labels.cmp(&b.labels));
        Ok(ReadResult { data, warnings })
    }

    fn series(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<Vec<Labels>>, QueryError> {
        let (mut data, warnings) = self.fan_out(|s| s.series(matchers, hints, ctl))?;
        data.sort();
        data.dedup();
        Ok(ReadResult { data, warnings })
    }

    fn label_names(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<Vec<String>>, QueryError> {
        let (data, warnings) = self.fan_out(|s| s.label_names(matchers, hints, ctl))?;
        Ok(ReadResult { data: data.into_iter().collect::<BTreeSet<_>>().into_iter().collect(), warnings })
    }

    fn label_values(
        &self,
        name: &str,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<Vec<String>>, QueryError> {
        let (data, warnings) = self.fan_out(|s| s.label_values(name, matchers, hints, ctl))?;
        Ok(ReadResult { data: data.into_iter().collect::<BTreeSet<_>>().into_iter().collect(), warnings })
    }

    fn shard_evaluator(&self) -> Option<&dyn ShardEvaluator> {
        Some(self)
    }
}

impl<Q: Queryable> ShardEvaluator for ShardedQueryable<Q> {
    fn shard_count(&self) -> usize {
        self.shards.len()
    }

    fn eval_fragment(
        &self,
        fragment: &Fragment,
        shard: usize,
        ctl: &QueryOptions,
    ) -> Result<FragmentOutput, QueryError> {
        let q = self
            .shards
            .get(shard)
            .ok_or_else(|| QueryError::bad_data(format!("shard {shard} of {} does not exist", self.shards.len())))?;
        self.fragments.fetch_add(1, Ordering::Relaxed);
        self.engine.eval_fragment(q, fragment, ctl)
    }

    fn parallelism(&self) -> usize {
        self.parallelism
    }
}

#[cfg(test)]
mod tests;

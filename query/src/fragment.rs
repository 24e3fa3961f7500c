//! The fragment API: how the engine hands a shard-local piece of a query to a shard and
//! gets partial results back. The same types serve the in-process split
//! ([`crate::ShardedQueryable`]) and, later, an `Eval` RPC to remote ingesters: every
//! type here is plain data (numbers, strings, label sets, vectors, enums) so a wire
//! format is a field-by-field mapping.
//!
//! A [`Fragment`] names its node by the **original query text plus a path of child
//! indexes** from the root (the order of [`crate::engine::children`]), never by a
//! re-printed sub-expression: the shard parses the same text into the same tree, so
//! annotation positions (`(1:6)` in warnings) and `@ start()` / `end()` mean the same
//! on both sides. Which nodes become fragments, and how their results merge, is the
//! planner's business (`engine/pushdown.rs`, rules in the crate README and
//! ARCHITECTURE.md).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::engine::QueryOptions;
use crate::error::QueryError;
use crate::functions::range::rate::RateTables;
use tessera_model::{Labels, Sample};

/// How a fragment's results combine at the querier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FragmentMode {
    /// Per-series results ([`FragmentData::Series`]); the merge concatenates them.
    Concat,
    /// An aggregation node: shards return partial aggregates ([`FragmentData::Groups`]
    /// for `sum`/`count`/`group`/`min`/`max`/`avg`/`quantile`, and for `count_values`
    /// with one group per output series and counted steps; [`FragmentData::Candidates`] for
    /// `topk`/`bottomk`); the merge finishes them as the single-node engine would.
    Partial,
}

/// One shard-local piece of a query, evaluated on a step grid.
#[derive(Debug, Clone, PartialEq)]
pub struct Fragment {
    /// The whole query text, as the user sent it.
    pub query: String,
    /// The node to evaluate: child indexes from the root, in [`crate::engine::children`] order.
    pub path: Vec<u32>,
    pub mode: FragmentMode,
    /// The grid of this node (ms): `start, start + step, ..., <= end`. A node inside a
    /// subquery or under `@` has a different grid from the query's.
    pub start: i64,
    pub end: i64,
    pub step: i64,
    /// The top-level query's start, end and step (ms; step 0 for an instant query), which
    /// `@ start()`, `@ end()` and `step()` refer to.
    pub query_start: i64,
    pub query_end: i64,
    pub query_step: i64,
    /// The engine's lookback delta (ms).
    pub lookback_delta_ms: i64,
    /// The querier's step (ms) for a subquery written without one (`x[1h:]`), so every
    /// shard evaluates it on the querier's grid; 0 (a querier that does not send it):
    /// the evaluating engine's own setting.
    pub default_subquery_step_ms: i64,
    /// Most samples the fragment's evaluation may hold at once: its share of what the
    /// query had left (divided evenly among the shards, whose outputs the querier holds
    /// together before merging).
    pub max_samples: u64,
    /// The aggregation's numeric parameter per step of the grid (`topk`/`bottomk`'s k),
    /// evaluated by the querier, since it may depend on data from every shard; empty otherwise.
    pub param: Vec<f64>,
    /// `count_values`' label name, evaluated by the querier; `None` otherwise.
    pub string_param: Option<String>,
}

/// One series of a fragment's result: points at step timestamps of the fragment's grid,
/// in time order.
#[derive(Debug, Clone, PartialEq)]
pub struct PartialSeries {
    pub labels: Labels,
    /// Prometheus 3.x delayed name removal: `__name__` is still in `labels` but goes
    /// before the final result.
    pub drop_name: bool,
    pub points: Vec<Sample>,
}

/// The running state of one aggregation group at one step, as the single-node engine
/// holds it just before finishing the step: mergeable across shards.
#[derive(Debug, Clone, PartialEq)]
pub struct StepPartial {
    /// The step's timestamp (ms).
    pub t: i64,
    /// Samples added (floats; for `count` and `group` native histograms too).
    pub count: f64,
    /// Native-histogram samples seen (not aggregated; they decide the mix rule).
    pub histograms: u64,
    /// Whether an input series at this step still carried a name to drop.
    pub drop_name: bool,
    pub state: PartialState,
}

/// The numeric part of a [`StepPartial`], per operator.
#[derive(Debug, Clone, PartialEq)]
pub enum PartialState {
    /// No float sample yet.
    Empty,
    /// `sum`: the Kahan running sum and its compensation.
    Sum {
        sum: f64,
        c: f64,
    },
    /// `avg`: Kahan sum and compensation, or (once the sum overflowed, `incremental`)
    /// the running mean with `c` as its compensation; `count` floats.
    Avg {
        sum: f64,
        c: f64,
        mean: f64,
        count: f64,
        incremental: bool,
    },
    Min(f64),
    Max(f64),
    /// `count` and `group`: nothing beyond [`StepPartial::count`].
    Counted,
    /// `quantile`: every float value of the group at this step, in arrival order (the
    /// querier sorts them all, so a quantile cannot be summarised any smaller).
    Values(Vec<f64>),
}

impl StepPartial {
    /// Values this partial holds, for the sample limit: one, or `quantile`'s values.
    pub fn held(&self) -> usize {
        match &self.state {
            PartialState::Values(v) => v.len().max(1),
            _ => 1,
        }
    }
}

/// One aggregation group's partial state over the steps where it had input.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupPartial {
    /// The group's labels (the `by` labels, or the input's without the `without` labels).
    pub labels: Labels,
    /// The labels of the first input series (in input order) that fell into this group
    /// (for `count_values`: that created this output series at its first step): the
    /// merge orders groups by it, as the single node numbers groups by first appearance.
    pub first: Labels,
    /// Steps with input, in time order.
    pub steps: Vec<StepPartial>,
}

/// What a fragment evaluation produced.
#[derive(Debug, Clone, PartialEq)]
pub enum FragmentData {
    Series(Vec<PartialSeries>),
    Groups(Vec<GroupPartial>),
    /// `topk`/`bottomk`: the shard's top k per group and step, and per group (`steps`
    /// empty) its first input series with a float value, which orders an instant
    /// query's groups as the single node orders them.
    Candidates {
        series: Vec<PartialSeries>,
        groups: Vec<GroupPartial>,
    },
}

/// A fragment's result on one shard, with the annotations its evaluation raised.
#[derive(Debug, Clone, PartialEq)]
pub struct FragmentOutput {
    pub data: FragmentData,
    pub warnings: Vec<String>,
    pub infos: Vec<String>,
}

/// A data source split into shards that can each evaluate a [`Fragment`] over their own
/// series. Every series lives in exactly one shard (sharded by a hash of its full label
/// set), which is what makes per-series results concatenable and partial aggregates
/// mergeable. Implemented in process by [`crate::ShardedQueryable`]; a querier over
/// remote ingesters implements it with an `Eval` RPC.
pub trait ShardEvaluator: Send + Sync {
    /// How many shards there are; fragments are evaluated on shards `0..shard_count()`.
    fn shard_count(&self) -> usize;

    /// Evaluates `fragment` over the series of shard `shard`. `ctl` carries the query's
    /// deadline and cancel flag.
    fn eval_fragment(
        &self,
        fragment: &Fragment,
        shard: usize,
        ctl: &QueryOptions,
    ) -> Result<FragmentOutput, QueryError>;

    /// How many shards' fragments may be evaluated at once for one query; 1 evaluates
    /// them one after the other on the caller's thread.
    fn parallelism(&self) -> usize {
        1
    }

    /// Evaluates `fragment` on every shard, at most [`ShardEvaluator::parallelism`] at a
    /// time, and returns the outputs in shard order, or the error of the lowest failing
    /// shard. Once one shard fails, shards not yet started are skipped.
    ///
    /// The fragments share their `rate`/`increase` tables: each shard holds series of
    /// every target, so each fragment would otherwise build the same ones.
    fn eval_all(&self, fragment: &Fragment, ctl: &QueryOptions) -> Result<Vec<FragmentOutput>, QueryError> {
        let (n, workers) = (self.shard_count(), self.parallelism());
        let shared;
        let ctl = if n > 1 {
            let tables = RateTables::for_evaluators(workers.min(n));
            shared = QueryOptions { rate_tables: Some(Arc::new(tables)), ..ctl.clone() };
            &shared
        } else {
            ctl
        };
        parallel_map(n, workers, |s| self.eval_fragment(fragment, s, ctl))
    }
}

/// Runs `f(0..n)` on at most `workers` scoped threads (on the caller's thread when 1)
/// and returns the results in index order, or the error of the lowest failing index.
/// Once one call fails, indexes not yet started are skipped.
pub fn parallel_map<T: Send>(
    n: usize,
    workers: usize,
    f: impl Fn(usize) -> Result<T, QueryError> + Sync,
) -> Result<Vec<T>, QueryError> {
    let workers = workers.clamp(1, n.max(1));
    if workers == 1 {
        return (0..n).map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let f = &f;
    let done: Vec<Vec<(usize, Result<T, QueryError>)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                std::thread::Builder::new()
                    // Evaluation recurses per tree level; the same stack as a query thread.
                    .stack_size(WORKER_STACK_BYTES)
                    .spawn_scoped(scope, || {
                        let mut mine = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            if i >= n || failed.load(Ordering::Relaxed) {
                                break;
                            }
                            let r = f(i);
                            if r.is_err() {
                                failed.store(true, Ordering::Relaxed);
                            }
                            mine.push((i, r));
                        }
                        mine
                    })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|_| vec![(usize::MAX, Err(QueryError::internal("a shard worker panicked")))]),
                Err(e) => vec![(usize::MAX, Err(QueryError::internal(format!("cannot start a shard worker: {e}"))))],
            })
            .collect()
    });
    let mut results: Vec<Option<T>> = (0..n).map(|_| None).collect();
    let mut first_err: Option<(usize, QueryError)> = None;
    for (i, r) in done.into_iter().flatten() {
        match r {
            Ok(v) => {
                if let Some(slot) = results.get_mut(i) {
                    *slot = Some(v);
                }
            }
            Err(e) => {
                if first_err.as_ref().is_none_or(|(fi, _)| i < *fi) {
                    first_err = Some((i, e));
                }
            }
        }
    }
    if let Some((_, e)) = first_err {
        return Err(e);
    }
    results
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.ok_or_else(|| QueryError::internal(format!("shard {i} was not evaluated"))))
        .collect()
}

/// Stack of a worker thread: evaluation recurses once per tree level, as on the server's
/// query threads (64 MiB, mostly untouched virtual memory).
const WORKER_STACK_BYTES: usize = 64 << 20;

#[cfg(test)]
mod tests;

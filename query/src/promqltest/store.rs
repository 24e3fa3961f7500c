//! The in-memory store the runner loads test data into.

use std::collections::BTreeMap;

use crate::engine::{Engine, QueryOptions};
use crate::error::QueryError;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::model::{Queryable, ReadResult, SelectHints, SelectResult, Series, SeriesStream};
use crate::value::QueryOutput;
use tessera_model::{Labels, Matcher, Sample};

/// One eval's query as the runner hands it to [`TestStore::eval`]: the script line of
/// the `eval` command, the query, and when to evaluate it (ms).
#[derive(Debug, Clone, Copy)]
pub struct EvalQuery<'a> {
    pub line: usize,
    pub query: &'a str,
    pub at: EvalAt,
}

/// When an eval runs: an instant, or a range `start..=end` every `step` (ms).
#[derive(Debug, Clone, Copy)]
pub enum EvalAt {
    Instant(i64),
    Range { start: i64, end: i64, step: i64 },
}

/// Where a script's `load` data goes and what answers its evals: [`MemStore`] here,
/// the real storage engine in the server's conformance test, and running servers
/// asked over HTTP in the cluster test.
pub trait TestStore {
    /// Drops every series (`clear`).
    fn clear(&mut self);
    /// Adds one sample; a sample at an existing timestamp replaces it.
    fn add(&mut self, labels: Labels, t: i64, v: f64);
    /// Makes every sample added so far visible to queries; called before each eval.
    fn commit(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// Answers one eval; an error is its message. In-process stores answer with
    /// [`eval_in_process`] over their data.
    fn eval(&mut self, engine: &Engine, q: EvalQuery<'_>) -> Result<QueryOutput, String>;
}

/// Answers `q` with `engine` over `data`, with default query options.
pub fn eval_in_process(engine: &Engine, data: &dyn Queryable, q: EvalQuery<'_>) -> Result<QueryOutput, String> {
    let opts = QueryOptions::default();
    match q.at {
        EvalAt::Instant(t) => engine.instant_query(data, q.query, t, &opts),
        EvalAt::Range { start, end, step } => engine.range_query(data, q.query, start, end, step, &opts),
    }
    .map_err(|e| e.message)
}

impl TestStore for MemStore {
    fn clear(&mut self) {
        MemStore::clear(self)
    }
    fn add(&mut self, labels: Labels, t: i64, v: f64) {
        MemStore::add(self, labels, t, v)
    }
    fn eval(&mut self, engine: &Engine, q: EvalQuery<'_>) -> Result<QueryOutput, String> {
        eval_in_process(engine, self, q)
    }
}

/// Series kept in label order, each with samples in time order. Selections test each
/// series with the compiled `tessera_model::Matcher`s they are given, the matchers
/// storage uses, so the only difference from storage is the absent index.
#[derive(Default)]
pub struct MemStore {
    series: BTreeMap<Labels, Vec<Sample>>,
    /// Calls of `select_stream` (the engine's series-at-a-time path), for tests that
    /// must show that path ran.
    streamed: AtomicU64,
}

impl MemStore {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn clear(&mut self) {
        self.series.clear();
    }

    /// How many selects the engine made through [`Queryable::select_stream`].
    pub fn streamed_selects(&self) -> u64 {
        self.streamed.load(Ordering::Relaxed)
    }

    /// Adds one sample; a sample at an existing timestamp replaces it.
    pub fn add(&mut self, labels: Labels, t: i64, v: f64) {
        let s = self.series.entry(labels).or_default();
        match s.binary_search_by_key(&t, |x| x.t) {
            Ok(i) => s[i].v = v,
            Err(i) => s.insert(i, Sample { t, v }),
        }
    }
}

impl Queryable for MemStore {
    fn select(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        _ctl: &crate::QueryOptions,
    ) -> Result<SelectResult, QueryError> {
        let (mint, maxt) = (hints.start, hints.end);
        Ok(SelectResult::new(self.series.iter().filter_map(|(l, s)| matching(l, s, matchers, mint, maxt)).collect()))
    }

    /// One series copied out at a time, as the local shards decode one at a time, with
    /// only the labels [`SelectHints::only_labels`] asks for, as they leave out the rest
    /// (so the conformance scripts check that the engine asks only where it may).
    fn select_stream<'a>(
        &'a self,
        matchers: &[Matcher],
        hints: &SelectHints,
        _ctl: &crate::QueryOptions,
    ) -> Result<ReadResult<SeriesStream<'a>>, QueryError> {
        self.streamed.fetch_add(1, Ordering::Relaxed);
        let matchers = matchers.to_vec();
        let (mint, maxt, only) = (hints.start, hints.end, hints.only_labels.clone());
        let stream =
            self.series.iter().filter_map(move |(l, s)| matching(l, s, &matchers, mint, maxt)).map(move |mut s| {
                if let Some(only) = &only {
                    s.labels = Labels::from_sorted(
                        s.labels
                            .into_vec()
                            .into_iter()
                            .filter(|l| only.iter().any(|n| n.as_str() == l.name.as_str()))
                            .collect(),
                    );
                }
                Ok(s)
            });
        Ok(ReadResult::new(Box::new(stream)))
    }
}

/// The series as selected when it matches every matcher (a missing label matches as the
/// empty string) and has samples in `[mint, maxt]`.
fn matching(labels: &Labels, samples: &[Sample], matchers: &[Matcher], mint: i64, maxt: i64) -> Option<Series> {
    if !matchers.iter().all(|m| m.matches(labels.get(m.name()).unwrap_or(""))) {
        return None;
    }
    let lo = samples.partition_point(|s| s.t < mint);
    let hi = samples.partition_point(|s| s.t <= maxt);
    (lo < hi).then(|| Series { labels: labels.clone(), samples: samples[lo..hi].to_vec() })
}

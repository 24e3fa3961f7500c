//! The split-versus-unsplit check: a script's data loaded once into one store and once
//! split over N shards (by [`crate::shard_of`]) behind a [`ShardedQueryable`], every eval
//! run over both, and every difference between the two answers reported. The split run
//! goes through the pushdown planner, fragments and merges; the unsplit reference
//! through the plain engine with every select materialised, and once more with the
//! series-at-a-time path on, which must give the reference bit for bit. Also the
//! comparisons a generated-query differential test uses ([`compare_outputs`],
//! [`compare_outputs_exact`]).

use super::parse::{parse_script, Cmd};
use super::run::{load, Failure, FileSummary};
use super::store::{eval_in_process, EvalQuery, MemStore, TestStore};
use crate::engine::{Engine, EngineOptions, QueryOptions};
use crate::error::QueryError;
use crate::model::Queryable;
use crate::sharded::{shard_of, ShardedQueryable};
use crate::value::{QueryOutput, Value};
use tessera_model::{Labels, STALE_NAN_BITS};

/// The relative difference allowed between a split and an unsplit value: sums and
/// averages add per-shard compensated partial sums in shard order instead of one
/// sequence (see the pushdown rules), which moves only the last bits.
pub const SPLIT_REL_TOLERANCE: f64 = 1e-9;

/// Below this absolute difference two values count as equal (a sum that cancels to
/// ~0 has no meaningful relative error).
pub const SPLIT_ABS_TOLERANCE: f64 = 1e-12;

/// One store and the same data split over shards.
struct SplitStore {
    whole: MemStore,
    split: ShardedQueryable<MemStore>,
}

impl TestStore for SplitStore {
    fn clear(&mut self) {
        self.whole.clear();
        for s in self.split.shards_mut() {
            s.clear();
        }
    }
    fn add(&mut self, labels: Labels, t: i64, v: f64) {
        let n = self.split.shards().len();
        self.split.shards_mut()[shard_of(&labels, n)].add(labels.clone(), t, v);
        self.whole.add(labels, t, v);
    }
    fn eval(&mut self, engine: &Engine, q: EvalQuery<'_>) -> Result<QueryOutput, String> {
        eval_in_process(engine, &self.whole, q)
    }
}

/// The outcome of [`compare_split`]: evals whose answers agreed (`passed`) and differed
/// (`failures`), how many shard fragments the split runs evaluated, and how many selects
/// were streamed (the series-at-a-time path) unsplit and inside the shards' fragments.
pub struct SplitSummary {
    pub file: FileSummary,
    pub fragments: u64,
    pub streamed_unsplit: u64,
    pub streamed_split: u64,
}

/// Runs every eval of `text` unsplit with every select materialised (the reference),
/// unsplit with streaming, and split over `shards` shards (fragments evaluated
/// `parallelism` at a time), and counts the evals whose answers differ as failures:
/// streaming must match the reference exactly, the split run as [`compare_outputs`] says.
pub fn compare_split(name: &str, text: &str, shards: usize, parallelism: usize) -> SplitSummary {
    let engine = Engine::new(EngineOptions::default());
    let reference = Engine::new(EngineOptions { streaming: false, ..EngineOptions::default() });
    let parts = (0..shards.max(1)).map(|_| MemStore::new()).collect();
    let mut store = SplitStore {
        whole: MemStore::new(),
        split: ShardedQueryable::new(parts, EngineOptions::default(), parallelism),
    };
    let mut fs = FileSummary { file: name.to_string(), ..Default::default() };
    for cmd in parse_script(text) {
        match cmd {
            Cmd::Clear => store.clear(),
            Cmd::Load { series, interval, .. } => load(&mut store, series, interval),
            Cmd::Eval(e) => {
                if e.error.is_some() {
                    continue;
                }
                let opts = QueryOptions::default();
                let run = |engine: &Engine, q: &dyn Queryable| match (e.instant, e.range) {
                    (Some(t), _) => Some(engine.instant_query(q, &e.query, t, &opts)),
                    (None, Some((s, en, st))) => Some(engine.range_query(q, &e.query, s, en, st, &opts)),
                    _ => None,
                };
                let (Some(want), Some(streamed), Some(got)) =
                    (run(&reference, &store.whole), run(&engine, &store.whole), run(&engine, &store.split))
                else {
                    continue;
                };
                let verdict = compare_outputs_exact(&want, &streamed)
                    .map_err(|r| format!("streamed unsplit differs: {r}"))
                    .and_then(|()| {
                        compare_outputs(&want, &got).map_err(|r| format!("split over {shards} shards differs: {r}"))
                    });
                match verdict {
                    Ok(()) => fs.passed += 1,
                    Err(reason) => {
                        fs.failed += 1;
                        fs.failures.push(Failure {
                            file: name.to_string(),
                            line: e.line,
                            query: e.query.clone(),
                            reason,
                        });
                    }
                }
            }
        }
    }
    SplitSummary {
        file: fs,
        fragments: store.split.fragments_evaluated(),
        streamed_unsplit: store.whole.streamed_selects(),
        streamed_split: store.split.shards().iter().map(MemStore::streamed_selects).sum(),
    }
}

/// Whether two answers to one query agree: the same error (kind and message), or the
/// same annotations (as sets), the same value type, the same series in the same order
/// with the same labels and timestamps, and values equal within
/// [`SPLIT_REL_TOLERANCE`] / [`SPLIT_ABS_TOLERANCE`] (NaNs equal, stale markers
/// bit-exact). `want` is the unsplit answer.
pub fn compare_outputs(
    want: &Result<QueryOutput, QueryError>,
    got: &Result<QueryOutput, QueryError>,
) -> Result<(), String> {
    compare(want, got, false)
}

/// [`compare_outputs`] without tolerance: every value bit for bit (any NaN still equals
/// any NaN but a stale marker), as two evaluations that add in the same order give.
pub fn compare_outputs_exact(
    want: &Result<QueryOutput, QueryError>,
    got: &Result<QueryOutput, QueryError>,
) -> Result<(), String> {
    compare(want, got, true)
}

fn compare(
    want: &Result<QueryOutput, QueryError>,
    got: &Result<QueryOutput, QueryError>,
    exact: bool,
) -> Result<(), String> {
    let close = |a: f64, b: f64| if exact { same(a, b) } else { close(a, b) };
    let (w, g) = match (want, got) {
        (Err(a), Err(b)) => {
            return if a.kind == b.kind && a.message == b.message {
                Ok(())
            } else {
                Err(format!("error {:?} {:?} became {:?} {:?}", a.kind, a.message, b.kind, b.message))
            }
        }
        (Err(a), Ok(_)) => return Err(format!("unsplit failed with {:?}, split succeeded", a.message)),
        (Ok(_), Err(b)) => return Err(format!("split failed with {:?}", b.message)),
        (Ok(w), Ok(g)) => (w, g),
    };
    same_set("warnings", &w.warnings, &g.warnings)?;
    same_set("infos", &w.infos, &g.infos)?;
    match (&w.value, &g.value) {
        (Value::Scalar { t: t1, v: v1 }, Value::Scalar { t: t2, v: v2 }) if t1 == t2 && close(*v1, *v2) => Ok(()),
        (Value::String { t: t1, s: s1 }, Value::String { t: t2, s: s2 }) if t1 == t2 && s1 == s2 => Ok(()),
        (Value::Vector(a), Value::Vector(b)) => {
            if a.len() != b.len() {
                return Err(format!("{} series became {}", a.len(), b.len()));
            }
            for (x, y) in a.iter().zip(b) {
                if x.labels != y.labels || x.t != y.t || !close(x.v, y.v) {
                    return Err(format!("{} {}@{} became {} {}@{}", x.labels, x.v, x.t, y.labels, y.v, y.t));
                }
            }
            Ok(())
        }
        (Value::Matrix(a), Value::Matrix(b)) => {
            if a.len() != b.len() {
                return Err(format!("{} series became {}", a.len(), b.len()));
            }
            for (x, y) in a.iter().zip(b) {
                if x.labels != y.labels || x.samples.len() != y.samples.len() {
                    return Err(format!(
                        "{} ({} points) became {} ({} points)",
                        x.labels,
                        x.samples.len(),
                        y.labels,
                        y.samples.len()
                    ));
                }
                for (p, q) in x.samples.iter().zip(&y.samples) {
                    if p.t != q.t || !close(p.v, q.v) {
                        return Err(format!("{}: {}@{} became {}@{}", x.labels, p.v, p.t, q.v, q.t));
                    }
                }
            }
            Ok(())
        }
        (a, b) => Err(format!("{a:?} became {b:?}")),
    }
}

fn same_set(what: &str, a: &[String], b: &[String]) -> Result<(), String> {
    let mut x: Vec<&String> = a.iter().collect();
    let mut y: Vec<&String> = b.iter().collect();
    x.sort();
    y.sort();
    if x == y {
        Ok(())
    } else {
        Err(format!("{what} {a:?} became {b:?}"))
    }
}

/// Bit-equal, except that any two NaNs but a stale marker are the same (the engine does
/// not promise NaN payloads).
fn same(a: f64, b: f64) -> bool {
    if a.to_bits() == STALE_NAN_BITS || b.to_bits() == STALE_NAN_BITS {
        return a.to_bits() == b.to_bits();
    }
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

fn close(a: f64, b: f64) -> bool {
    if a.to_bits() == STALE_NAN_BITS || b.to_bits() == STALE_NAN_BITS {
        return a.to_bits() == b.to_bits();
    }
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a == b {
        return true;
    }
    if a.is_infinite() || b.is_infinite() {
        return false;
    }
    let diff = (a - b).abs();
    diff <= SPLIT_ABS_TOLERANCE || diff <= SPLIT_REL_TOLERANCE * a.abs().max(b.abs())
}

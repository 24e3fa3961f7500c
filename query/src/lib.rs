//! PromQL evaluation with Prometheus 3.x semantics.
//!
//! The engine reads data only through the [`Queryable`] trait it owns; the local shards
//! and (later) remote queriers implement it. It never imports the storage crate,
//! RocksDB, or anything about networks. `engine` evaluates the AST; `functions` holds
//! the pure per-window and per-sample functions it calls; `promqltest` runs
//! Prometheus' conformance scripts against the engine.
//!
//! A source split into shards ([`ShardEvaluator`], e.g. [`ShardedQueryable`]) gets the
//! query pushed down: the planner marks the highest shard-local nodes (per-series chains
//! as CONCAT; `sum`/`count`/`group`/`min`/`max`/`avg`/`topk`/`bottomk`/`count_values` as
//! mergeable partials; vector matching only where both sides provably share a shard),
//! every shard evaluates them as [`Fragment`]s, and the engine merges the results into the
//! single node's answer (`sum`/`avg` within a relative 1e-9). The rules, with what is never
//! pushed, are in `engine/pushdown.rs` and the crate README.

pub mod engine;
mod error;
pub mod fragment;
// Crate-private so rustc's dead-code lint flags a kernel the engine stops calling: the
// engine must run the tested implementation, not a copy of it.
mod functions;
pub mod model;
pub mod promqltest;
pub mod sharded;
pub mod value;

pub use engine::{
    selector_matchers, Engine, EngineOptions, QueryOptions, QueryStats, TextLimits, DEFAULT_SUBQUERY_STEP_MS,
};
pub use error::{ErrorKind, QueryError};
pub use fragment::{
    Fragment, FragmentData, FragmentMode, FragmentOutput, GroupPartial, PartialSeries, PartialState, ShardEvaluator,
    StepPartial,
};
/// Floats as Go's `strconv` writes them (Prometheus' spelling of sample values).
pub use functions::format::{format_go_decimal, format_go_exponent};
pub use functions::range::rate::RateTables;
pub use model::{PlannedSelect, Queryable, ReadResult, SelectHints, SelectResult, Series, SeriesStream};
pub use sharded::{shard_of, ShardedQueryable};
pub use value::{QueryOutput, Value, VectorElem};

/// The kernels the micro benchmarks time on their own; not an API.
#[doc(hidden)]
pub mod bench_kernels {
    pub use crate::functions::range::rate::{extrapolate, RateWindows, ResetIndex};
    pub use crate::functions::range::{eval_range, RangeFn};
    pub use crate::functions::stats::KahanSum;
}

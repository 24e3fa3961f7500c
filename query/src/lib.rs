//! PromQL evaluation with Prometheus 3.x semantics.
//!
//! The engine reads data only through the [`Queryable`] trait it owns; the local shards
//! and (later) remote queriers implement it. It never imports the storage crate,
//! RocksDB, or anything about networks. `engine` evaluates the AST; `functions` holds
//! the pure per-window and per-sample functions it calls; `promqltest` runs
//! Prometheus' conformance scripts against the engine.

pub mod engine;
mod error;
pub mod functions;
pub mod model;
pub mod promqltest;
pub mod value;

pub use engine::{Engine, EngineOptions, QueryOptions, TextLimits};
pub use error::{ErrorKind, QueryError};
pub use model::{Label, Labels, MatchOp, Matcher, Queryable, Sample, Series};
pub use value::{QueryOutput, Value, VectorElem};

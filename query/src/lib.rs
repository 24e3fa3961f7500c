//! PromQL evaluation with Prometheus 3.x semantics.
//!
//! The engine reads data only through the [`Queryable`] trait it owns; the local shards
//! and (later) remote queriers implement it. It never imports the storage crate,
//! RocksDB, or anything about networks.

mod error;
pub mod model;
pub mod value;
pub mod functions;

pub use error::{ErrorKind, QueryError};
pub use model::{Label, Labels, MatchOp, Matcher, Queryable, Sample, Series};
pub use value::{QueryOutput, Value, VectorElem};

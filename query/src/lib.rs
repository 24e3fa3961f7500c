//! PromQL evaluation with Prometheus 3.x semantics.
//!
//! The engine reads data only through the [`Queryable`] trait it owns; the local shards
//! and (later) remote queriers implement it. It never imports the storage crate,
//! RocksDB, or anything about networks.
//!
//! Interface contract (fixed so server can build against it):
//!
//! ```ignore
//! pub struct Label { pub name: String, pub value: String }
//! pub struct Labels(Vec<Label>)            // sorted by name
//! pub struct Sample { pub t: i64, pub v: f64 }  // t in milliseconds
//! pub struct Series { pub labels: Labels, pub samples: Vec<Sample> }
//! pub enum MatchOp { Equal, NotEqual, Regex, NotRegex }
//! pub struct Matcher { pub name: String, pub op: MatchOp, pub value: String }
//! pub trait Queryable: Send + Sync {
//!     /// Samples with mint <= t <= maxt (ms), time-ordered, for every series matching all matchers.
//!     fn select(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<Series>, QueryError>;
//! }
//! ```

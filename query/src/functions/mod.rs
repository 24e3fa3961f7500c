//! Pure PromQL function kernels: one window of samples in, one value out (`range`), one
//! value in, one value out (`math`), one classic histogram's buckets in, one estimate out
//! (`histogram`), one label set in, one label set out (`labels`), the numeric helpers
//! aggregations share (`stats`), and the small pieces that must match Prometheus to the
//! byte: output orderings (`order`), float ↔ label-value text (`format`) and
//! `limit_ratio`'s hash-based sampling (`sampling`). Go regex syntax lives in
//! `tessera_model::goregex`, shared with the selector matchers
//! (`tessera_model::Matcher`).
//!
//! Nothing here knows about series selection, vectors, vector matching, the AST or the
//! lookback window: the engine selects the samples, decides which function applies and
//! hands each kernel exactly the values Prometheus' `FunctionCall` would see. Keeping the
//! kernels pure is what lets them be unit-tested against `functions.test` line by line and
//! benchmarked without a storage engine.

pub mod format;
pub mod histogram;
pub mod labels;
pub mod math;
pub mod order;
pub mod range;
pub mod sampling;
pub mod stats;

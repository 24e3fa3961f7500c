//! Pure PromQL function kernels: one window of samples in, one value out (`range`), one
//! value in, one value out (`math`), one classic histogram's buckets in, one estimate out
//! (`histogram`), one label set in, one label set out (`labels`), and the numeric helpers
//! aggregations share (`stats`).
//!
//! Nothing here knows about series selection, vectors, vector matching, the AST or the
//! lookback window: the engine selects the samples, decides which function applies and
//! hands each kernel exactly the values Prometheus' `FunctionCall` would see. Keeping the
//! kernels pure is what lets them be unit-tested against `functions.test` line by line and
//! benchmarked without a storage engine.

pub mod histogram;
pub mod labels;
pub mod math;
pub mod range;
pub mod stats;

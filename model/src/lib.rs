//! The small vocabulary every Tessera crate shares, in the role Prometheus'
//! `model/labels` and `model/value` packages play: the regex dialect of label matchers
//! and `label_replace` (Go RE2, see [`goregex`]), the float bit patterns with a meaning
//! of their own (the staleness marker and the engine's internal marker, see
//! [`canonical_float`]) and the metric-name label.
//!
//! It depends on nothing of Tessera's, so `storage` and `query` can both use it and
//! still never import each other.

mod float;
pub mod goregex;

pub use float::{canonical_float, is_stale_nan, GO_NAN_BITS, HISTOGRAM_MARKER_BITS, STALE_NAN_BITS};

/// The label holding the metric name (Prometheus' `model.MetricNameLabel`).
pub const METRIC_NAME: &str = "__name__";

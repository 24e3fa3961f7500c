//! The data model every Tessera crate shares, in the role Prometheus' `model/labels`
//! and `model/value` packages play:
//!
//! - [`Label`] and [`Labels`], a series' identity, kept sorted by name;
//! - [`Sample`], one float sample;
//! - [`MatchOp`] and the compiled [`Matcher`], with the fast paths for literals,
//!   `a|b|c` sets and `prefix.*`, and the [`Pattern`] / [`ValueScan`] an index uses to
//!   look values up;
//! - the regex dialect of matchers and `label_replace` (Go RE2, see [`goregex`]);
//! - the float bit patterns with a meaning of their own (the staleness marker and the
//!   engine's internal marker, see [`canonical_float`]) and the metric-name label;
//! - a spare sample buffer per thread ([`spare`]) that storage's reader takes and the
//!   engine gives back, so that a stream of series reuses one allocation.
//!
//! It depends on nothing of Tessera's, so `storage` and `query` both speak it and still
//! never import each other, and the server passes values between them unconverted.

mod error;
mod float;
pub mod goregex;
mod labels;
mod matcher;
mod sample;
pub mod spare;

pub use error::Error;
pub use float::{canonical_float, holds_marker, is_stale_nan, GO_NAN_BITS, HISTOGRAM_MARKER_BITS, STALE_NAN_BITS};
pub use labels::{Label, Labels};
pub use matcher::{MatchOp, Matcher, Pattern, ValueScan};
pub use sample::Sample;

/// The label holding the metric name (Prometheus' `model.MetricNameLabel`).
pub const METRIC_NAME: &str = "__name__";

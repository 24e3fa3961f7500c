//! Label-set helpers the evaluator needs (projections, signatures) and the sample
//! markers it interprets. Prometheus' number formatting and orderings live in
//! `crate::functions` (`format`, `order`), the one tested implementation.

use tessera_model::{Labels, HISTOGRAM_MARKER_BITS, METRIC_NAME};

/// Whether `v` stands for a native histogram sample: the promqltest store writes
/// [`HISTOGRAM_MARKER_BITS`] for one (the engine does not evaluate native histograms,
/// but must know one is there, e.g. to count it or skip it in float functions as
/// Prometheus does). Ingest turns a user's float with these bits into an ordinary NaN
/// (`tessera_model::canonical_float`), so real data never carries it.
pub fn is_histogram_marker(v: f64) -> bool {
    v.to_bits() == HISTOGRAM_MARKER_BITS
}

pub(crate) fn without_name(l: &Labels) -> Labels {
    if l.get(METRIC_NAME).is_none() {
        return l.clone();
    }
    Labels::from_sorted(l.iter().filter(|x| x.name != METRIC_NAME).cloned().collect())
}

/// Keeps only the labels named in `names`.
pub(crate) fn keep(l: &Labels, names: &[String]) -> Labels {
    Labels::from_sorted(l.iter().filter(|x| names.iter().any(|n| x.name == *n)).cloned().collect())
}

/// Drops the labels named in `names`.
pub(crate) fn drop(l: &Labels, names: &[String]) -> Labels {
    Labels::from_sorted(l.iter().filter(|x| !names.iter().any(|n| x.name == *n)).cloned().collect())
}

/// A byte key identifying the projection of `l` used for vector matching: with `on`
/// only the listed labels count; otherwise all labels except the listed ones and
/// `__name__` (Prometheus' `HashWithoutLabels` always ignores the name).
pub(crate) fn signature(l: &Labels, on: bool, names: &[String]) -> Vec<u8> {
    let mut key = Vec::with_capacity(64);
    for x in l.iter() {
        let listed = names.iter().any(|n| x.name == *n);
        let take = if on { listed } else { !listed && x.name != METRIC_NAME };
        if take {
            key.extend_from_slice(x.name.as_bytes());
            key.push(0xff);
            key.extend_from_slice(x.value.as_bytes());
            key.push(0xff);
        }
    }
    key
}

/// The value of a per-step scalar at step `k` (NaN if out of range, which a well-formed
/// evaluation never asks for).
pub(crate) fn at_step(v: &[f64], k: usize) -> f64 {
    v.get(k).or(v.last()).copied().unwrap_or(f64::NAN)
}

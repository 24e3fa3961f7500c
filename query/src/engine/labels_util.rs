//! Label-set helpers the evaluator needs (projections, signatures) and Prometheus'
//! number formatting.

use std::cmp::Ordering;

use crate::model::{Label, Labels};

/// The bit pattern Prometheus writes for a staleness marker.
pub const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

pub fn is_stale_nan(v: f64) -> bool {
    v.to_bits() == STALE_NAN_BITS
}

/// A NaN payload standing for "a native histogram sample" in data that has them (the
/// promqltest store): the engine does not evaluate native histograms, but it must know
/// a histogram sample is there, e.g. to count it or to skip it in float functions as
/// Prometheus does. Storage never produces it.
pub const HISTOGRAM_MARKER_BITS: u64 = 0x7ff0_0000_0000_0003;

pub fn is_histogram_marker(v: f64) -> bool {
    v.to_bits() == HISTOGRAM_MARKER_BITS
}

pub(crate) const NAME: &str = "__name__";

pub(crate) fn without_name(l: &Labels) -> Labels {
    if l.get(NAME).is_none() {
        return l.clone();
    }
    Labels::from_sorted(l.iter().filter(|x| x.name != NAME).cloned().collect())
}

/// Keeps only the labels named in `names`.
pub(crate) fn keep(l: &Labels, names: &[String]) -> Labels {
    Labels::from_sorted(l.iter().filter(|x| names.iter().any(|n| n == &x.name)).cloned().collect())
}

/// Drops the labels named in `names`.
pub(crate) fn drop(l: &Labels, names: &[String]) -> Labels {
    Labels::from_sorted(l.iter().filter(|x| !names.iter().any(|n| n == &x.name)).cloned().collect())
}

/// Sets (or, with an empty value, deletes) one label.
pub(crate) fn set(l: &Labels, name: &str, value: &str) -> Labels {
    let mut v: Vec<Label> = l.iter().filter(|x| x.name != name).cloned().collect();
    if !value.is_empty() {
        let pos = v.partition_point(|x| x.name.as_str() < name);
        v.insert(pos, Label { name: name.to_string(), value: value.to_string() });
    }
    Labels::from_sorted(v)
}

/// A byte key identifying the projection of `l` used for vector matching: with `on`
/// only the listed labels count; otherwise all labels except the listed ones and
/// `__name__` (Prometheus' `HashWithoutLabels` always ignores the name).
pub(crate) fn signature(l: &Labels, on: bool, names: &[String]) -> Vec<u8> {
    let mut key = Vec::with_capacity(64);
    for x in l.iter() {
        let listed = names.iter().any(|n| n == &x.name);
        let take = if on { listed } else { !listed && x.name != NAME };
        if take {
            key.extend_from_slice(x.name.as_bytes());
            key.push(0xff);
            key.extend_from_slice(x.value.as_bytes());
            key.push(0xff);
        }
    }
    key
}

/// Formats a float as Go's `%g` does for the values appearing in annotations.
pub(crate) fn format_go_g(v: f64) -> String {
    if v.is_nan() {
        return "NaN".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf".to_string() } else { "-Inf".to_string() };
    }
    let a = v.abs();
    if a != 0.0 && !(1e-4..1e21).contains(&a) {
        let s = format!("{v:e}");
        // Rust writes `1e-5`; Go writes `1e-05`.
        if let Some((m, e)) = s.split_once('e') {
            let (sign, digits) = if let Some(d) = e.strip_prefix('-') { ("-", d) } else { ("+", e) };
            let digits = if digits.len() < 2 { format!("0{digits}") } else { digits.to_string() };
            return format!("{m}e{sign}{digits}");
        }
        return s;
    }
    format!("{v}")
}

/// Natural ordering of strings (digit runs compare by numeric value), as the
/// `natsort` package `sort_by_label` uses.
pub(crate) fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (ab, bb) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < ab.len() && j < bb.len() {
        if ab[i].is_ascii_digit() && bb[j].is_ascii_digit() {
            let si = i;
            while i < ab.len() && ab[i].is_ascii_digit() {
                i += 1;
            }
            let sj = j;
            while j < bb.len() && bb[j].is_ascii_digit() {
                j += 1;
            }
            let na = a[si..i].trim_start_matches('0');
            let nb = b[sj..j].trim_start_matches('0');
            let c = na.len().cmp(&nb.len()).then_with(|| na.cmp(nb));
            if c != Ordering::Equal {
                return c;
            }
        } else {
            if ab[i] != bb[j] {
                return ab[i].cmp(&bb[j]);
            }
            i += 1;
            j += 1;
        }
    }
    (ab.len() - i).cmp(&(bb.len() - j))
}

/// Whether `s` is a valid label name. Prometheus 3.x accepts any UTF-8 name, but the
/// string must be valid UTF-8 and non-empty.
/// The value of a per-step scalar at step `k` (NaN if out of range, which a well-formed
/// evaluation never asks for).
pub(crate) fn at_step(v: &[f64], k: usize) -> f64 {
    v.get(k).or(v.last()).copied().unwrap_or(f64::NAN)
}

pub(crate) fn valid_label_name(s: &str) -> bool {
    !s.is_empty() && !s.contains('\u{FFFD}')
}

//! Validation of one incoming series' labels, shared by remote write 1.0 and 2.0.
//!
//! Input labels arrive as raw byte slices of the request buffer (see `tessera-proto`:
//! they are `Bytes`, not `String`), so this is also where UTF-8 is checked, once.
//! On success the labels become owned `Label`s (`validate_labels`) or one compact
//! `SeriesLabels` (`check_labels`, the remote-write path), sorted (they must arrive sorted) and
//! without empty values (an empty value means "label absent" in Prometheus' model).
//! Errors are sentences that say what is wrong, for the 400 body.

use tessera_model::{Label, METRIC_NAME};

use crate::config::{Limits, NameValidation};
use crate::shards::TENANT_LABEL;

/// Checks one series' labels (name/value byte pairs in wire order) against the
/// limits. Returns the owned, sorted label set or a sentence naming the problem.
pub fn validate_labels<'a>(
    pairs: impl ExactSizeIterator<Item = (&'a [u8], &'a [u8])> + Clone,
    limits: &Limits,
) -> Result<Vec<Label>, String> {
    check_labels(pairs.clone(), limits)?;
    // Checked above: UTF-8, so the lossy conversion never replaces anything.
    let text = |b: &[u8]| compact_str::CompactString::from_utf8_lossy(b);
    Ok(pairs.filter(|(_, v)| !v.is_empty()).map(|(n, v)| Label { name: text(n), value: text(v) }).collect())
}

/// [`validate_labels`] without building anything: `Ok` when the pairs are a valid,
/// sorted label set (the write path then builds its compact
/// [`SeriesLabels`](super::series_labels::SeriesLabels) from them).
pub fn check_labels<'a>(
    pairs: impl ExactSizeIterator<Item = (&'a [u8], &'a [u8])>,
    limits: &Limits,
) -> Result<(), String> {
    if pairs.len() == 0 {
        return Err("series has no labels".into());
    }
    if limits.max_labels_per_series > 0 && pairs.len() > limits.max_labels_per_series {
        return Err(format!(
            "series has {} labels, more than the limit of {} (limits.max_labels_per_series)",
            pairs.len(),
            limits.max_labels_per_series
        ));
    }
    // Sortedness and uniqueness are checked on raw bytes: UTF-8 byte order equals code
    // point order, which is the order the specs require, so no decoding is needed first.
    let mut prev: Option<&'a [u8]> = None;
    let mut has_name = false;
    for (name, value) in pairs {
        if name.is_empty() {
            return Err("empty label name".into());
        }
        if let Some(p) = prev {
            if name == p {
                return Err(format!("duplicate label name {:?}", lossy(name)));
            }
            if name < p {
                return Err(format!("label names are not sorted: {:?} comes after {:?}", lossy(name), lossy(p)));
            }
        }
        prev = Some(name);
        let name = std::str::from_utf8(name).map_err(|_| format!("label name {:?} is not valid UTF-8", lossy(name)))?;
        let value = std::str::from_utf8(value).map_err(|_| format!("value of label {name:?} is not valid UTF-8"))?;
        if limits.max_label_name_bytes > 0 && name.len() > limits.max_label_name_bytes {
            return Err(format!(
                "label name {:?}... is {} bytes long, more than the limit of {} (limits.max_label_name_bytes)",
                truncate(name, 64),
                name.len(),
                limits.max_label_name_bytes
            ));
        }
        if limits.max_label_value_bytes > 0 && value.len() > limits.max_label_value_bytes {
            return Err(format!(
                "value of label {name:?} is {} bytes long, more than the limit of {} (limits.max_label_value_bytes)",
                value.len(),
                limits.max_label_value_bytes
            ));
        }
        // Checked after the generic rules so that a malformed name reports as such.
        if name == TENANT_LABEL {
            return Err(format!("label name {TENANT_LABEL:?} is reserved for the tenant (set X-Scope-OrgID instead)"));
        }
        if name == METRIC_NAME {
            has_name = true;
            if !valid_metric_name(value, limits.name_validation) {
                return Err(format!("invalid metric name {value:?}"));
            }
        } else if !valid_label_name(name, limits.name_validation) {
            return Err(format!("invalid label name {name:?}"));
        }
        // An empty value is checked like any other; the builders leave the label out
        // (Prometheus treats an empty value as the label being absent).
    }
    if !has_name {
        return Err("missing metric name (label \"__name__\")".into());
    }
    Ok(())
}

/// Metric name rule: legacy `[a-zA-Z_:][a-zA-Z0-9_:]*`, or any non-empty UTF-8.
pub fn valid_metric_name(s: &str, mode: NameValidation) -> bool {
    match mode {
        NameValidation::Utf8 => !s.is_empty(),
        NameValidation::Legacy => {
            let b = s.as_bytes();
            !b.is_empty()
                && (b[0].is_ascii_alphabetic() || b[0] == b'_' || b[0] == b':')
                && b[1..].iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b':')
        }
    }
}

/// Label name rule: legacy `[a-zA-Z_][a-zA-Z0-9_]*`, or any non-empty UTF-8.
pub fn valid_label_name(s: &str, mode: NameValidation) -> bool {
    match mode {
        NameValidation::Utf8 => !s.is_empty(),
        NameValidation::Legacy => {
            let b = s.as_bytes();
            !b.is_empty()
                && (b[0].is_ascii_alphabetic() || b[0] == b'_')
                && b[1..].iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
        }
    }
}

/// Prometheus' text form of a raw label set, for error messages: `name{a="b", c="d"}`.
/// Truncated to about 300 characters so a hostile series cannot bloat the response.
pub fn describe<'a>(pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> String {
    let mut name = String::new();
    let mut rest = Vec::new();
    for (n, v) in pairs {
        if n == METRIC_NAME.as_bytes() {
            name = lossy(v);
        } else {
            rest.push(format!("{}={:?}", lossy(n), lossy(v)));
        }
    }
    let s = format!("{name}{{{}}}", rest.join(", "));
    truncate(&s, 300)
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// At most `max` bytes of `s`, cut at a character boundary, with "..." if cut.
fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

#[cfg(test)]
mod tests;

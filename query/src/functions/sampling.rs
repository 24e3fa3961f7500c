//! `limit_ratio`'s deterministic sampling and the label-set hash it depends on.
//!
//! Prometheus keeps a series in `limit_ratio(r, v)` by where its label hash falls in
//! [0, 1], so the same series are kept at every step and `limit_ratio(r)` and
//! `limit_ratio(r - 1)` are exact complements. Using Prometheus' own hash (xxhash64 of
//! `name 0xff value 0xff ...`) also makes us keep the *same* series Prometheus keeps.

use xxhash_rust::xxh64::Xxh64;

use tessera_model::Labels;

/// Prometheus' `labels.Labels.Hash()`: xxhash64 (seed 0) over each label's name, a 0xff
/// byte, its value and another 0xff byte, in label order. 0xff cannot occur in UTF-8, so
/// the encoding is unambiguous.
pub fn labels_hash(l: &Labels) -> u64 {
    let mut h = Xxh64::new(0);
    for lab in l.iter() {
        h.update(lab.name.as_bytes());
        h.update(&[0xff]);
        h.update(lab.value.as_bytes());
        h.update(&[0xff]);
    }
    h.digest()
}

/// Clamps a `limit_ratio` argument to [-1, 1]. Returns the ratio to use and whether it had
/// to be capped (Prometheus then warns "ratio value should be between -1 and 1, got X,
/// capping to Y"). NaN is left as is and keeps nothing.
pub fn clamp_ratio(r: f64) -> (f64, bool) {
    if r > 1.0 {
        (1.0, true)
    } else if r < -1.0 {
        (-1.0, true)
    } else {
        (r, false)
    }
}

/// Whether `limit_ratio(ratio, ...)` keeps the series with labels `l`: its hash offset
/// `hash / u64::MAX` must be below `ratio` for `ratio >= 0`, or at least `1 + ratio` for
/// negative ratios (the complementary slice).
pub fn limit_ratio_keeps(ratio: f64, l: &Labels) -> bool {
    let offset = labels_hash(l) as f64 / u64::MAX as f64;
    (ratio >= 0.0 && offset < ratio) || (ratio < 0.0 && offset >= 1.0 + ratio)
}

#[cfg(test)]
mod tests;

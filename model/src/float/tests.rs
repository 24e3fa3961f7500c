//! The reserved float bit patterns and `canonical_float`.

use super::*;

#[test]
fn internal_marker_becomes_an_ordinary_nan() {
    let v = canonical_float(f64::from_bits(HISTOGRAM_MARKER_BITS));
    assert!(v.is_nan());
    assert_eq!(v.to_bits(), GO_NAN_BITS);
}

#[test]
fn staleness_marker_and_other_floats_are_kept_bit_for_bit() {
    for bits in
        [STALE_NAN_BITS, GO_NAN_BITS, 0x7ff0_0000_0000_0004, 0.0f64.to_bits(), (-0.0f64).to_bits(), 1.5f64.to_bits()]
    {
        assert_eq!(canonical_float(f64::from_bits(bits)).to_bits(), bits, "{bits:#x}");
    }
    assert!(is_stale_nan(canonical_float(f64::from_bits(STALE_NAN_BITS))));
}

#[test]
fn both_markers_are_nans_so_a_series_without_a_nan_holds_neither() {
    let at = |v: f64| crate::Sample { t: 0, v };
    let plain = [at(1.0), at(f64::INFINITY), at(-0.0), at(f64::MAX)];
    assert!(!any_nan(&plain));
    for marker in [STALE_NAN_BITS, HISTOGRAM_MARKER_BITS, GO_NAN_BITS] {
        for i in 0..=plain.len() {
            let mut s = plain.to_vec();
            s.insert(i, at(f64::from_bits(marker)));
            assert!(any_nan(&s), "{marker:#x} at {i}");
        }
    }
}

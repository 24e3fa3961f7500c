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
fn a_marker_is_found_wherever_it_sits_and_only_by_its_own_bits() {
    let plain = [1.0, f64::INFINITY, -0.0, f64::MAX];
    for marker in [STALE_NAN_BITS, HISTOGRAM_MARKER_BITS] {
        assert!(!holds_marker(plain.iter().copied(), marker));
        for i in 0..=plain.len() {
            let mut v = plain.to_vec();
            v.insert(i, f64::from_bits(marker));
            assert!(holds_marker(v.iter().copied(), marker), "{marker:#x} at {i}");
            // Another NaN is not the marker.
            v[i] = f64::from_bits(GO_NAN_BITS);
            assert!(!holds_marker(v.iter().copied(), marker), "{marker:#x} at {i}");
        }
    }
}

//! Expectations from Prometheus' `histograms.test` (classic `le` buckets only).

use super::*;
use proptest::prelude::*;

fn b(pairs: &[(f64, f64)]) -> Vec<(f64, f64)> {
    pairs.to_vec()
}

const INF: f64 = f64::INFINITY;

fn positive() -> Vec<(f64, f64)> {
    // testhistogram_bucket{start="positive"} at 50m, deliberately out of order.
    b(&[(1.0, 110.), (0.1, 50.), (INF, 120.), (0.2, 70.)])
}

fn negative() -> Vec<(f64, f64)> {
    b(&[(-0.2, 10.), (-0.1, 20.), (0.3, 20.), (INF, 30.)])
}

#[test]
fn quantile_interpolates_within_the_bucket_and_starts_positive_histograms_at_zero() {
    assert_eq!(bucket_quantile(0., &mut positive()), (0., false));
    assert!((bucket_quantile(0.2, &mut positive()).0 - 0.048).abs() < 1e-12);
    assert!((bucket_quantile(0.5, &mut positive()).0 - 0.15).abs() < 1e-12);
    assert!((bucket_quantile(0.8, &mut positive()).0 - 0.72).abs() < 1e-12);
}

#[test]
fn quantile_in_a_non_positive_lowest_bucket_is_its_upper_bound() {
    assert_eq!(bucket_quantile(0., &mut negative()).0, -0.2);
    assert_eq!(bucket_quantile(0.2, &mut negative()).0, -0.2);
    assert!((bucket_quantile(0.5, &mut negative()).0 - -0.15).abs() < 1e-12);
}

#[test]
fn quantile_in_the_inf_bucket_is_the_second_highest_bound() {
    assert_eq!(bucket_quantile(0.8, &mut negative()).0, 0.3);
    assert_eq!(bucket_quantile(1., &mut positive()).0, 1.0);
}

#[test]
fn quantile_hits_bucket_middles() {
    // testhistogram2_bucket at 7m: q(1/6), q(1/2), q(5/6) are the middles of buckets.
    let h = b(&[(0., 0.), (2., 1.), (4., 2.), (6., 3.), (INF, 3.)]);
    for (q, want) in [(1. / 6., 1.), (0.5, 3.), (5. / 6., 5.)] {
        assert!((bucket_quantile(q, &mut h.clone()).0 - want).abs() < 1e-12);
    }
}

#[test]
fn non_monotonic_buckets_are_fixed_and_flagged() {
    let h = b(&[(0.1, 20.), (1., 10.), (10., 50.), (100., 40.), (1000., 90.), (INF, 80.)]);
    for (q, want) in [(0.01, 0.0045), (0.5, 8.5), (0.99, 979.75)] {
        let (v, forced) = bucket_quantile(q, &mut h.clone());
        assert!((v - want).abs() < 1e-9, "q={q}: {v}");
        assert!(forced);
    }
    let d = bucket_quantile_detailed(0.5, &mut h.clone());
    assert_eq!((d.min_bucket, d.max_bucket, d.max_diff), (1., INF, 10.));
}

#[test]
fn tiny_differences_are_precision_noise_not_non_monotonicity() {
    let h = b(&[(1., 100.), (2., 100. - 1e-11), (INF, 200.)]);
    let d = bucket_quantile_detailed(0.25, &mut h.clone());
    assert!(!d.forced_monotonic);
    assert!(d.fixed_precision);
    assert!((d.value - 0.5).abs() < 1e-12);
}

#[test]
fn quantile_special_cases() {
    assert!(bucket_quantile(f64::NAN, &mut positive()).0.is_nan());
    assert_eq!(bucket_quantile(-0.1, &mut positive()).0, f64::NEG_INFINITY);
    assert_eq!(bucket_quantile(1.1, &mut positive()).0, INF);
    // No +Inf bucket, a single bucket, no observations, no buckets: NaN.
    assert!(bucket_quantile(0.5, &mut b(&[(1., 1.), (2., 2.)])).0.is_nan());
    assert!(bucket_quantile(0.5, &mut b(&[(INF, 3.)])).0.is_nan());
    assert!(bucket_quantile(0.5, &mut b(&[(1., 0.), (INF, 0.)])).0.is_nan());
    assert!(bucket_quantile(0.5, &mut Vec::new()).0.is_nan());
}

#[test]
fn equal_bounds_are_merged() {
    // le="0.1" and le="0.10" parse to the same bound; their counts add up.
    let mut h = b(&[(0.1, 1.), (0.1, 1.), (0.2, 4.), (INF, 4.)]);
    let (v, _) = bucket_quantile(0.5, &mut h);
    assert!((v - 0.1).abs() < 1e-12);
    assert_eq!(h.len(), 3);
}

#[test]
fn fraction_examples_from_histograms_test() {
    let h2 = b(&[(0., 0.), (2., 10.), (4., 20.), (6., 30.), (INF, 30.)]);
    assert!((bucket_fraction(0., 4., &mut h2.clone()) - 0.6666666666666666).abs() < 1e-12);
    assert_eq!(bucket_fraction(0., 6., &mut h2.clone()), 1.);
    assert!((bucket_fraction(0., 3.5, &mut h2.clone()) - 0.5833333333333334).abs() < 1e-12);
    let pos = b(&[(1., 1.), (2., 3.), (3., 6.), (INF, 100.)]);
    assert!((bucket_fraction(0., 1.5, &mut pos.clone()) - 0.02).abs() < 1e-12);
    // The lowest bucket of an all-negative histogram reaches to -Inf: nothing is
    // interpolated inside it.
    let neg = b(&[(-3., 10.), (-2., 12.), (-1., 15.), (INF, 100.)]);
    assert!((bucket_fraction(-4., -2., &mut neg.clone()) - 0.02).abs() < 1e-12);
}

#[test]
fn fraction_special_cases() {
    let h2 = b(&[(0., 0.), (2., 10.), (4., 20.), (6., 30.), (INF, 30.)]);
    assert_eq!(bucket_fraction(2., 2., &mut h2.clone()), 0.);
    assert_eq!(bucket_fraction(3., 2., &mut h2.clone()), 0.);
    assert_eq!(bucket_fraction(f64::NEG_INFINITY, INF, &mut h2.clone()), 1.);
    assert!(bucket_fraction(f64::NAN, 1., &mut h2.clone()).is_nan());
    assert!(bucket_fraction(0., f64::NAN, &mut h2.clone()).is_nan());
    assert!(bucket_fraction(0., 5., &mut b(&[(1., 0.), (INF, 0.)])).is_nan());
    assert!(bucket_fraction(0., 5., &mut b(&[(1., 3.)])).is_nan());
    assert!(bucket_fraction(0., 5., &mut Vec::new()).is_nan());
}

#[test]
fn almost_equal_is_relative() {
    assert!(almost_equal(1e12, 1e12 + 0.5, 1e-12));
    assert!(!almost_equal(1., 1.001, 1e-12));
    assert!(almost_equal(f64::NAN, f64::NAN, 1e-12));
    assert!(!almost_equal(0., 1e-300, 1e-12));
}

proptest! {
    /// Any quantile of a valid histogram lies between 0 (positive buckets) and the highest
    /// finite bound, and is monotonic in φ.
    #[test]
    fn quantile_is_bounded_and_monotonic(incs in proptest::collection::vec(0u32..100, 2..12), q1 in 0.0f64..=1.0, q2 in 0.0f64..=1.0) {
        let mut cum = 0.0;
        let mut h: Vec<(f64, f64)> = incs.iter().enumerate().map(|(i, d)| { cum += *d as f64; ((i + 1) as f64, cum) }).collect();
        h.push((INF, cum + 1.0));
        let top = incs.len() as f64;
        let (lo, hi) = if q1 <= q2 { (q1, q2) } else { (q2, q1) };
        let a = bucket_quantile(lo, &mut h.clone()).0;
        let c = bucket_quantile(hi, &mut h.clone()).0;
        prop_assert!((0.0..=top).contains(&a) && (0.0..=top).contains(&c));
        prop_assert!(a <= c + 1e-9);
        let f = bucket_fraction(f64::NEG_INFINITY, a, &mut h.clone());
        prop_assert!((0.0..=1.0).contains(&f));
    }
}

#[test]
fn fraction_table_from_histograms_test() {
    let pos = || b(&[(1., 1.), (2., 3.), (3., 6.), (INF, 100.)]);
    let neg = || b(&[(-3., 10.), (-2., 12.), (-1., 15.), (INF, 100.)]);
    let ninf = f64::NEG_INFINITY;
    let cases: Vec<(&str, f64, f64, Vec<(f64, f64)>, f64)> = vec![
        ("lower_is_negative_Inf", ninf, -1.5, neg(), 0.135),
        ("all_positive", ninf, INF, pos(), 1.0),
        ("all_negative", ninf, INF, neg(), 1.0),
        ("both_in_last_bucket_positive", 4., 5., pos(), 0.0),
        ("both_in_last_bucket_negative", 0., 1., neg(), 0.0),
        ("upper_falls_in_last_bucket", 2., 5., pos(), 0.03),
        ("upper_is_positive_Inf", 400., INF, pos(), 0.94),
        ("lower_equals_upper", 2., 2., pos(), 0.0),
        ("lower_greater_than_upper", 3., 2., pos(), 0.0),
        ("single_bucket", 0., 1., b(&[(INF, 100.)]), 0.0),
        ("all_zero_counts", 0., 5., b(&[(1., 0.), (2., 0.), (3., 0.), (INF, 0.)]), f64::NAN),
        ("lower_exactly_on_bucket_boundary", 2., 3.5, pos(), 0.03),
        ("upper_exactly_on_bucket_boundary", 0.5, 2., pos(), 0.025),
        ("both_bounds_exactly_on_bucket_boundaries", 1., 3., pos(), 0.05),
        ("fractional_bucket_bounds", 0.1, 0.75, b(&[(0.5, 2.5), (1., 7.5), (INF, 100.)]), 0.045),
        ("range_crosses_zero", -1., 1., b(&[(-2., 5.), (-1., 10.), (0., 15.), (1., 20.), (INF, 100.)]), 0.1),
        ("lower_is_NaN", f64::NAN, 1., b(&[(1., 1.), (INF, 100.)]), f64::NAN),
        ("upper_is_NaN", 0., f64::NAN, b(&[(1., 1.), (INF, 100.)]), f64::NAN),
    ];
    for (name, lower, upper, mut h, want) in cases {
        let got = bucket_fraction(lower, upper, &mut h);
        if want.is_nan() {
            assert!(got.is_nan(), "{name}: {got}");
        } else {
            assert!((got - want).abs() < 1e-12, "{name}: want {want} got {got}");
        }
    }
}

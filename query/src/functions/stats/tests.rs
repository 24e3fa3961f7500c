use super::*;
use proptest::prelude::*;

#[test]
fn kahan_sum_recovers_small_terms_lost_next_to_huge_ones() {
    let mut k = KahanSum::new();
    for v in [1., 1e100, 1., -1e100] {
        k.add(v);
    }
    assert_eq!(k.value(), 2.);
}

#[test]
fn kahan_sum_keeps_infinities_instead_of_nan() {
    let mut k = KahanSum::new();
    k.add(1.5);
    k.add(f64::INFINITY);
    k.add(3.0);
    assert_eq!(k.value(), f64::INFINITY);
    let mut k = KahanSum::new();
    k.add(f64::INFINITY);
    k.add(f64::NEG_INFINITY);
    assert!(k.value().is_nan());
}

#[test]
fn quantile_special_cases() {
    assert!(quantile(0.5, &mut []).is_nan());
    assert!(quantile(f64::NAN, &mut [1., 2.]).is_nan());
    assert_eq!(quantile(-0.1, &mut [1., 2.]), f64::NEG_INFINITY);
    assert_eq!(quantile(1.1, &mut [1., 2.]), f64::INFINITY);
    assert_eq!(quantile(0.5, &mut [3., 1., 2.]), 2.);
    assert_eq!(quantile(0.75, &mut [0., 1., 2.]), 1.5);
    // 0.4·1 + 0.6·4 with Go's (and our) rounding is 2.8000000000000003.
    assert!((quantile(0.8, &mut [4., 0., 1.]) - 2.8).abs() < 1e-12);
}

#[test]
fn quantile_sorts_nan_first() {
    // As Prometheus' vectorByValueHeap: NaN below everything, so it only shows up at low φ.
    assert!(quantile(0., &mut [1., f64::NAN, 2.]).is_nan());
    assert_eq!(quantile(1., &mut [1., f64::NAN, 2.]), 2.);
}

#[test]
fn stdvar_accumulator_matches_aggregators_test() {
    // aggregators.test: stddev of {1, 2} is 0.5, stdvar 0.25.
    let mut a = StdvarAccumulator::new(1.);
    a.add(2.);
    assert_eq!(a.stddev(), 0.5);
    assert_eq!(a.stdvar(), 0.25);
    // A single finite value has no spread; NaN or Inf anywhere makes the result NaN.
    assert_eq!(StdvarAccumulator::new(1.).stdvar(), 0.);
    assert!(StdvarAccumulator::new(f64::INFINITY).stddev().is_nan());
    assert!(StdvarAccumulator::new(f64::NAN).stddev().is_nan());
    for seq in [[1., 2., f64::INFINITY], [f64::INFINITY, 1., 2.], [1., 2., f64::NAN], [f64::NAN, 1., 2.]] {
        let mut a = StdvarAccumulator::new(seq[0]);
        a.add(seq[1]);
        a.add(seq[2]);
        assert!(a.stdvar().is_nan(), "{seq:?}");
    }
}

#[test]
fn avg_accumulator_survives_overflowing_sums() {
    let mut a = AvgAccumulator::new(9.988_465_674_311_58e307);
    a.add(9.988_465_674_311_58e307);
    assert_eq!(a.value(), 9.988_465_674_311_58e307);
    let mut a = AvgAccumulator::new(1.);
    for v in [2., 3., 4., 5.] {
        a.add(v);
    }
    assert_eq!(a.value(), 3.);
    let mut a = AvgAccumulator::new(f64::INFINITY);
    a.add(1.);
    assert_eq!(a.value(), f64::INFINITY);
    let mut a = AvgAccumulator::new(f64::INFINITY);
    a.add(f64::NEG_INFINITY);
    assert!(a.value().is_nan());
}

#[test]
fn variance_over_time_example() {
    assert!((variance_over_time([0., 8., 8., 2., 3.]) - 10.56).abs() < 1e-12);
    assert!(variance_over_time([]).is_nan());
}

proptest! {
    /// Integers below 2^40 sum exactly in f64 as long as the total stays below 2^53, so
    /// the compensated sum must equal the exact integer sum.
    #[test]
    fn kahan_sum_is_exact_on_integers(values in proptest::collection::vec(-(1i64 << 40)..(1i64 << 40), 0..200)) {
        let mut k = KahanSum::new();
        for v in &values {
            k.add(*v as f64);
        }
        let exact: i64 = values.iter().sum();
        prop_assert_eq!(k.value(), exact as f64);
    }

    /// Compensation makes adding many tiny terms to a huge one accurate.
    #[test]
    fn kahan_sum_beats_naive_sum(n in 1usize..2000) {
        let mut k = KahanSum::new();
        k.add(1e16);
        for _ in 0..n {
            k.add(1.0);
        }
        prop_assert_eq!(k.value(), 1e16 + n as f64);
    }

    #[test]
    fn quantile_lies_within_min_and_max(mut values in proptest::collection::vec(-1e9f64..1e9, 1..100), q in 0.0f64..=1.0) {
        let min = values.iter().cloned().fold(f64::INFINITY, f64::min);
        let max = values.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let got = quantile(q, &mut values);
        prop_assert!(got >= min && got <= max, "{} not in [{}, {}]", got, min, max);
    }

    #[test]
    fn stdvar_accumulator_agrees_with_two_pass_variance(values in proptest::collection::vec(-1e6f64..1e6, 1..100)) {
        let mut a = StdvarAccumulator::new(values[0]);
        for v in &values[1..] {
            a.add(*v);
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        prop_assert!((a.stdvar() - var).abs() <= 1e-6 * var.max(1.0));
        prop_assert!((variance_over_time(values.iter().cloned()) - var).abs() <= 1e-6 * var.max(1.0));
    }
}

#[test]
fn avg_accumulator_cases_from_aggregators_test() {
    let big = 9.988_465_674_311_58e307;
    let inf = f64::INFINITY;
    let cases: &[(&[f64], f64)] = &[
        (&[2., 8., 1e100, -1e100], 2.5),
        (&[inf, 2.], inf),
        (&[2., inf], inf),
        (&[-inf, 2.], -inf),
        (&[inf, -inf], f64::NAN),
        (&[f64::NAN, 2.], f64::NAN),
        (&[2., f64::NAN], f64::NAN),
        (&[-inf, 0., inf], f64::NAN),
        (&[big, big, big, big], big),
        (&[-big, -big, -big, -big], -big),
        (&[-big, -big, big, big], 0.),
        (&[52.; 12], 52.),
    ];
    for (values, want) in cases {
        let mut a = AvgAccumulator::new(values[0]);
        for v in &values[1..] {
            a.add(*v);
        }
        let got = a.value();
        if want.is_nan() {
            assert!(got.is_nan(), "{values:?}: {got}");
        } else {
            assert_eq!(got, *want, "{values:?}");
        }
    }
}

#[test]
fn merged_partial_sums_agree_with_one_sequential_sum() {
    let values = [1e16, 1.0, -1e16, 3.5, 0.1, 0.2, -0.3, 7e-3, 1e8, -1e8];
    let mut whole = KahanSum::seeded(values[0]);
    for &v in &values[1..] {
        whole.add(v);
    }
    for split in 1..values.len() {
        let mut a = KahanSum::seeded(values[0]);
        for &v in &values[1..split] {
            a.add(v);
        }
        let mut b = KahanSum::seeded(values[split]);
        for &v in &values[split + 1..] {
            b.add(v);
        }
        a.merge(&b);
        let rel = (a.value() - whole.value()).abs() / whole.value().abs();
        assert!(rel <= 1e-12, "split at {split}: {} vs {}", a.value(), whole.value());
    }
}

#[test]
fn merged_partial_sums_keep_infinities_and_nan() {
    let mut a = KahanSum::seeded(f64::INFINITY);
    a.merge(&KahanSum::seeded(1.0));
    assert_eq!(a.value(), f64::INFINITY);
    a.merge(&KahanSum::seeded(f64::NEG_INFINITY));
    assert!(a.value().is_nan());
    // Signed zeros end as a sequential sum ends.
    let mut z = KahanSum::seeded(-0.0);
    z.merge(&KahanSum::seeded(-0.0));
    let mut seq = KahanSum::seeded(-0.0);
    seq.add(-0.0);
    assert_eq!(z.value().to_bits(), seq.value().to_bits());
}

/// `avg` of `values` folded in one sequence, and merged from two halves split at `at`.
fn avg_both_ways(values: &[f64], at: usize) -> (f64, f64) {
    let fold = |vs: &[f64]| {
        let mut a = AvgAccumulator::new(vs[0]);
        for &v in &vs[1..] {
            a.add(v);
        }
        a
    };
    let whole = fold(values).value();
    let mut left = fold(&values[..at]);
    left.merge(&fold(&values[at..]));
    (whole, left.value())
}

#[test]
fn merged_partial_averages_agree_with_one_sequential_average() {
    for (values, at) in [
        (vec![1.0, 2.0, 3.0, 4.0, 5.0], 2),
        (vec![1e308, 1e308, -1e308], 1),
        (vec![1e308, 1e308, 1e308, 5.0], 2),
        (vec![f64::INFINITY, 1.0, 2.0], 1),
        (vec![f64::INFINITY, f64::NEG_INFINITY], 1),
        (vec![0.1, 0.2, 0.3, f64::NAN], 3),
    ] {
        let (whole, merged) = avg_both_ways(&values, at);
        if whole.is_nan() || merged.is_nan() {
            assert!(whole.is_nan() && merged.is_nan(), "{values:?}: {whole} vs {merged}");
        } else if whole.is_infinite() {
            assert_eq!(whole, merged, "{values:?}");
        } else {
            assert!((whole - merged).abs() <= 1e-12 * whole.abs(), "{values:?}: {whole} vs {merged}");
        }
    }
}

proptest! {
    /// The quantile from the two selected ranks is the one read off the fully sorted
    /// values (NaN first), for any φ and values with NaNs, infinities and repeats.
    #[test]
    fn quantile_by_selection_equals_quantile_of_the_sorted_values(
        values in proptest::collection::vec(
            prop_oneof![
                4 => (-50i32..50).prop_map(|x| x as f64 * 0.25),
                1 => Just(f64::NAN),
                1 => Just(f64::INFINITY),
                1 => Just(f64::NEG_INFINITY),
            ],
            1..60,
        ),
        q in prop_oneof![Just(0.0), Just(1.0), Just(0.5), 0.0f64..=1.0],
    ) {
        let mut sorted = values.clone();
        sorted.sort_by(nan_first_cmp);
        let rank = q * (sorted.len() as f64 - 1.0);
        let (lower, upper) = (rank.floor() as usize, (rank.floor() as usize + 1).min(sorted.len() - 1));
        let weight = rank - rank.floor();
        let want = sorted[lower] * (1.0 - weight) + sorted[upper] * weight;
        let got = quantile(q, &mut values.clone());
        prop_assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "{} vs {}", got, want);
    }

    /// The packed fold's step is `kahan_inc`'s, bit for bit, infinities and NaNs included.
    #[test]
    fn the_branch_free_kahan_step_is_the_branchy_one(
        inc in any::<f64>(),
        sum in any::<f64>(),
        c in any::<f64>(),
        special in 0usize..6,
    ) {
        let inc = [inc, f64::INFINITY, f64::NEG_INFINITY, f64::MAX, -0.0, 1e-300][special];
        let (a, b) = (kahan_inc(inc, sum, c), kahan_inc_branch_free(inc, sum, c));
        prop_assert_eq!((a.0.to_bits(), a.1.to_bits()), (b.0.to_bits(), b.1.to_bits()));
    }
}

//! Expectations taken from Prometheus' `functions.test`, evaluated directly on the
//! kernels: the window `(start, end]` is given explicitly, the way the engine computes it
//! from the evaluation time and the range.

use super::*;
use crate::ErrorKind;

const MIN: i64 = 60_000;

/// Samples `values[i]` at `i * step_ms`, as a promqltest `load <step>` line produces.
fn load(step_ms: i64, values: &[f64]) -> Vec<Sample> {
    values.iter().enumerate().map(|(i, &v)| Sample { t: i as i64 * step_ms, v }).collect()
}

/// promqltest's `a+bxn` expansion: n+1 values a, a+b, ..., a+n·b.
fn series(start: f64, inc: f64, n: usize) -> Vec<f64> {
    (0..=n).map(|i| start + inc * i as f64).collect()
}

/// The samples of `all` inside `(end - range, end]`, as the engine would hand them over.
fn window(all: &[Sample], end: i64, range: i64) -> Vec<Sample> {
    all.iter().copied().filter(|s| s.t > end - range && s.t <= end).collect()
}

/// Evaluates `name(all[range])` at `end` with scalar `args`.
fn eval_at(name: &str, all: &[Sample], end: i64, range: i64, args: &[f64]) -> Option<f64> {
    let w = window(all, end, range);
    if w.is_empty() {
        return None;
    }
    eval_range(name, &w, end - range, end, args).expect("known function")
}

fn assert_close(got: Option<f64>, want: f64) {
    let got = got.expect("a result");
    if want.is_nan() {
        assert!(got.is_nan(), "want NaN, got {got}");
        return;
    }
    let tol = 1e-9 * want.abs().max(1.0);
    assert!((got - want).abs() <= tol, "want {want}, got {got}");
}

#[test]
fn resets_count_drops_in_left_open_window() {
    let foo = load(5 * MIN, &[1., 2., 3., 0., 1., 0., 0., 1., 2., 0.]);
    let bar = load(5 * MIN, &[1., 2., 3., 4., 5., 1., 2., 3., 4., 5.]);
    // The last sample is at 45m, so (45m, 50m] is empty and there is no result.
    assert_eq!(eval_at("resets", &foo, 50 * MIN, 5 * MIN, &[]), None);
    assert_close(eval_at("resets", &foo, 50 * MIN, 10 * MIN, &[]), 0.);
    assert_close(eval_at("resets", &foo, 50 * MIN, 20 * MIN, &[]), 1.);
    assert_close(eval_at("resets", &foo, 50 * MIN, 30 * MIN, &[]), 1.);
    assert_close(eval_at("resets", &foo, 50 * MIN, 32 * MIN, &[]), 2.);
    assert_close(eval_at("resets", &bar, 50 * MIN, 32 * MIN, &[]), 1.);
    // (0, 50m] excludes the sample at t=0.
    assert_close(eval_at("resets", &foo, 50 * MIN, 50 * MIN, &[]), 3.);
}

#[test]
fn changes_counts_value_changes_and_treats_nan_pairs_as_unchanged() {
    let foo = load(5 * MIN, &[1., 2., 3., 0., 1., 0., 0., 1., 2., 0.]);
    let biz = load(5 * MIN, &[0., 0., 0., 0., 0., 1., 1., 1., 1., 1.]);
    assert_close(eval_at("changes", &foo, 50 * MIN, 20 * MIN, &[]), 2.);
    assert_close(eval_at("changes", &foo, 50 * MIN, 30 * MIN, &[]), 3.);
    assert_close(eval_at("changes", &foo, 50 * MIN, 50 * MIN, &[]), 7.);
    assert_close(eval_at("changes", &biz, 50 * MIN, 50 * MIN, &[]), 1.);
    let all_nan = load(5 * MIN, &[f64::NAN, f64::NAN, f64::NAN]);
    let zero_nan_zero = load(5 * MIN, &[0., f64::NAN, 0.]);
    assert_close(eval_at("changes", &all_nan, 15 * MIN, 20 * MIN, &[]), 0.);
    assert_close(eval_at("changes", &zero_nan_zero, 15 * MIN, 20 * MIN, &[]), 2.);
}

#[test]
fn increase_extrapolates_but_never_below_zero_for_counters() {
    let foo = load(5 * MIN, &series(0., 10., 10));
    let bar: Vec<f64> = series(0., 18., 5).into_iter().chain(series(0., 18., 5)).collect();
    let bar = load(5 * MIN, &bar);
    let dings = load(5 * MIN, &series(10., 10., 10));
    let bumms = load(5 * MIN, &series(1., 10., 10));
    assert_close(eval_at("increase", &foo, 50 * MIN, 50 * MIN, &[]), 100.);
    assert_close(eval_at("increase", &bar, 50 * MIN, 50 * MIN, &[]), 160.);
    assert_close(eval_at("increase", &dings, 50 * MIN, 50 * MIN, &[]), 100.);
    assert_close(eval_at("increase", &bumms, 50 * MIN, 50 * MIN, &[]), 100.);
    // Window reaching far before the first sample: extrapolate by half an interval,
    // or only to where the counter would have been zero.
    assert_close(eval_at("increase", &foo, 50 * MIN, 100 * MIN, &[]), 100.);
    assert_close(eval_at("increase", &bar, 50 * MIN, 100 * MIN, &[]), 162.);
    assert_close(eval_at("increase", &dings, 50 * MIN, 100 * MIN, &[]), 105.);
    assert_close(eval_at("increase", &bumms, 50 * MIN, 100 * MIN, &[]), 101.);
}

#[test]
fn increase_adds_back_the_value_lost_at_a_counter_reset() {
    let s = load(5 * MIN, &[0., 1., 2., 3., 2., 3., 4.]);
    assert_close(eval_at("increase", &s, 30 * MIN, 30 * MIN, &[]), 7.);
}

#[test]
fn rate_handles_resets_in_the_middle_and_at_the_end() {
    let middle: Vec<f64> = series(0., 27., 4).into_iter().chain(series(0., 27., 5)).collect();
    let middle = load(5 * MIN, &middle);
    assert_close(eval_at("rate", &middle, 50 * MIN, 50 * MIN, &[]), 0.08);

    let mut end = series(0., 10., 9);
    end.extend([0., 10.]);
    let end = load(5 * MIN, &end);
    // A single sample in the window gives no rate.
    assert_eq!(eval_at("rate", &end, 50 * MIN, 5 * MIN, &[]), None);
    assert_close(eval_at("rate", &end, 50 * MIN, 6 * MIN, &[]), 0.);
}

#[test]
fn rate_is_per_second_over_the_whole_range() {
    let s = load(5 * MIN, &series(0., 80., 10));
    assert_close(eval_at("rate", &s, 50 * MIN, 50 * MIN, &[]), 0.26666666666666666);
    // `[10m] offset 5m` at 50m is the window (35m, 45m].
    let a = load(5 * MIN, &series(0., 10., 10));
    let w = window(&a, 45 * MIN, 10 * MIN);
    let got = eval_range("rate", &w, 35 * MIN, 45 * MIN, &[]).expect("rate");
    assert_close(got, 0.03333333333333333);
}

#[test]
fn rate_zero_cutoff_limits_left_extrapolation() {
    // load 4m; testcounter_zero_cutoff_total{start=...} <start>+240x10; rate([20m]) at 10m.
    let cases = [(0., 0.5), (60., 0.55), (120., 0.6), (180., 0.6), (240., 0.6), (300., 0.6)];
    for (start, want) in cases {
        let s = load(4 * MIN, &series(start, 240., 10));
        assert_close(eval_at("rate", &s, 10 * MIN, 20 * MIN, &[]), want);
        // Far from the series start the normal half-interval rule applies.
        assert_close(eval_at("rate", &s, 50 * MIN, 20 * MIN, &[]), 0.6);
    }
}

#[test]
fn delta_extrapolates_gauges_in_both_directions() {
    let up = load(5 * MIN, &[0., 50., 100., 150., 200.]);
    let down = load(5 * MIN, &[200., 150., 100., 50., 0.]);
    assert_close(eval_at("delta", &up, 20 * MIN, 20 * MIN, &[]), 200.);
    assert_close(eval_at("delta", &down, 20 * MIN, 20 * MIN, &[]), -200.);
}

#[test]
fn irate_uses_last_two_samples_and_treats_a_drop_as_reset() {
    let foo = load(5 * MIN, &series(0., 10., 10));
    let bar: Vec<f64> = series(0., 10., 5).into_iter().chain(series(0., 10., 5)).collect();
    let bar = load(5 * MIN, &bar);
    assert_close(eval_at("irate", &foo, 50 * MIN, 50 * MIN, &[]), 1. / 30.);
    assert_close(eval_at("irate", &bar, 50 * MIN, 50 * MIN, &[]), 1. / 30.);
    // At 30m the last two samples are 50 then 0: a reset, so the increase is 0.
    assert_close(eval_at("irate", &bar, 30 * MIN, 50 * MIN, &[]), 0.);
}

#[test]
fn irate_and_idelta_propagate_nan() {
    let s = load(5 * MIN, &[1., f64::NAN, f64::NAN, 5., 11.]);
    let range = 15 * MIN + 1000;
    assert_eq!(eval_at("irate", &s, 0, range, &[]), None);
    assert_close(eval_at("irate", &s, 5 * MIN, range, &[]), f64::NAN);
    assert_close(eval_at("irate", &s, 15 * MIN, range, &[]), f64::NAN);
    assert_close(eval_at("irate", &s, 20 * MIN, range, &[]), 0.02);
    assert_close(eval_at("idelta", &s, 15 * MIN, range, &[]), f64::NAN);
    assert_close(eval_at("idelta", &s, 20 * MIN, range, &[]), 6.);
}

#[test]
fn idelta_is_the_plain_difference_of_the_last_two() {
    let bar = load(5 * MIN, &[0., 50., 100., 50.]);
    assert_close(eval_at("idelta", &bar, 20 * MIN, 20 * MIN, &[]), -50.);
}

#[test]
fn deriv_matches_least_squares_slope() {
    let s = load(5 * MIN, &series(0., 80., 10));
    assert_close(eval_at("deriv", &s, 50 * MIN, 50 * MIN, &[]), 0.26666666666666666);
    let middle: Vec<f64> = series(0., 10., 4).into_iter().chain(series(0., 10., 5)).collect();
    let middle = load(5 * MIN, &middle);
    assert_close(eval_at("deriv", &middle, 50 * MIN, 100 * MIN, &[]), 0.010606060606060607);
}

#[test]
fn deriv_and_predict_linear_are_nan_with_infinities() {
    let mut v = vec![f64::NEG_INFINITY];
    v.extend(series(0., 80., 10));
    v.push(f64::INFINITY);
    let s = load(5 * MIN, &v);
    assert_close(eval_at("deriv", &s, 100 * MIN, 100 * MIN, &[]), f64::NAN);
    assert_close(eval_at("predict_linear", &s, 100 * MIN, 100 * MIN, &[6000.]), f64::NAN);
}

#[test]
fn deriv_of_constant_series_is_zero() {
    let s = load(10_000, &[1.5990505637277868; 3]);
    assert_close(eval_at("deriv", &s, 55_000, 60_000, &[]), 0.);
}

#[test]
fn predict_linear_anchors_at_evaluation_time() {
    let middle: Vec<f64> = series(0., 10., 4).into_iter().chain(series(0., 10., 5)).collect();
    let s = load(5 * MIN, &middle);
    assert_close(eval_at("predict_linear", &s, 50 * MIN, 50 * MIN, &[3600.]), 70.);
    // `[55m] @ 3000` selects (-300s, 3000s]; the regression is anchored at the evaluation
    // time, passed as args[1] in milliseconds.
    let w = window(&s, 3_000_000, 55 * MIN);
    let at = |eval_ms: i64| eval_range("predict_linear", &w, 3_000_000 - 55 * MIN, 3_000_000, &[3600., eval_ms as f64]);
    assert_close(at(50 * MIN).expect("ok"), 76.81818181818181);
    assert_close(at(10 * MIN).expect("ok"), 51.36363636363637);
    assert_close(at(70 * MIN).expect("ok"), 89.54545454545455);
}

#[test]
fn predict_linear_equals_last_value_plus_deriv_on_a_line() {
    let s = load(5 * MIN, &series(0., 80., 10));
    let p = eval_at("predict_linear", &s, 50 * MIN, 50 * MIN, &[3600.]).expect("value");
    let d = eval_at("deriv", &s, 50 * MIN, 50 * MIN, &[]).expect("value");
    assert!((p - (800. + d * 3600.)).abs() < 1e-9);
}

#[test]
fn double_exponential_smoothing_follows_linear_trends() {
    let up: Vec<f64> = series(0., 10., 1000).into_iter().chain(series(100., 30., 1000)).collect();
    let s = load(10_000, &up);
    assert_close(eval_at("double_exponential_smoothing", &s, 8_000_000, MIN, &[0.01, 0.1]), 8000.);
    let down = load(10_000, &series(0., -20., 1000));
    assert_close(eval_at("double_exponential_smoothing", &down, 8_000_000, MIN, &[0.01, 0.1]), -16000.);
}

#[test]
fn double_exponential_smoothing_rejects_out_of_range_factors() {
    let s = load(10_000, &[1., 2., 3.]);
    for (sf, tf) in [(0., 0.5), (1., 0.5), (0.5, 0.), (0.5, 1.), (-1., 0.5), (0.5, 2.)] {
        let err = eval_range("double_exponential_smoothing", &s, -1, 20_000, &[sf, tf]).expect_err("must fail");
        assert_eq!(err.kind, ErrorKind::Execution);
    }
    // One sample: valid factors, but nothing to smooth.
    let one = load(10_000, &[1.]);
    assert_eq!(eval_range("double_exponential_smoothing", &one, -1, 0, &[0.5, 0.5]).expect("ok"), None);
}

#[test]
fn avg_over_time_special_values() {
    let cases: &[(&[f64], f64)] = &[
        (&[1., 2., 3., 4., 5.], 3.),
        (&[1., 2., 3., 4., f64::INFINITY], f64::INFINITY),
        (&[1., 2., 3., 4., f64::NEG_INFINITY], f64::NEG_INFINITY),
        (&[1., 2., 3., f64::INFINITY, f64::NEG_INFINITY], f64::NAN),
        (&[f64::INFINITY, 0., f64::INFINITY], f64::INFINITY),
        (&[f64::INFINITY, f64::INFINITY, f64::INFINITY, f64::NEG_INFINITY], f64::NAN),
        (&[f64::NEG_INFINITY, 0., f64::NEG_INFINITY], f64::NEG_INFINITY),
        (&[1., 2., f64::NEG_INFINITY, f64::NEG_INFINITY, f64::INFINITY], f64::NAN),
        (&[9.988_465_674_311_58e307, 9.988_465_674_311_58e307], 9.988_465_674_311_58e307),
        (&[-9.988_465_674_311_58e307; 3], -9.988_465_674_311_58e307),
        (&[-9.988_465_674_311_58e307, 9.988_465_674_311_58e307], 0.),
        (&[1., 2., 3., f64::NAN, f64::NAN], f64::NAN),
        (&[1., 1e100, 1., -1e100], 0.5),
        (&[1e10, 1e-6, 1e-6, 1e-6, 1e-6, 1e-6], 1.6666666666666675e9),
        (&[1.78264e50, 0.76342771, 1.9592258, 2.258e220, 7.69805412, 458.90154], 3.76333333333333e219),
    ];
    for (values, want) in cases {
        let s = load(10_000, values);
        let got = eval_range("avg_over_time", &s, -1, 60_000, &[]).expect("ok");
        let got_v = got.expect("value");
        if want.is_nan() {
            assert!(got_v.is_nan(), "{values:?}: want NaN got {got_v}");
        } else if want.is_infinite() {
            assert_eq!(got_v, *want, "{values:?}");
        } else {
            let tol = 1e-12 * want.abs().max(1.0);
            assert!((got_v - want).abs() <= tol, "{values:?}: want {want} got {got_v}");
        }
    }
}

#[test]
fn avg_over_time_of_a_constant_is_exactly_that_constant() {
    let s = load(10_000, &[52.; 101]);
    for range_s in [100, 110, 120, 130] {
        assert_eq!(eval_at("avg_over_time", &s, 10 * MIN, range_s * 1000, &[]), Some(52.));
    }
}

#[test]
fn sum_over_time_is_kahan_compensated() {
    let s = load(10_000, &[1., 1e100, 1., -1e100]);
    assert_eq!(eval_at("sum_over_time", &s, MIN, 2 * MIN, &[]), Some(2.));
    let dense = load(1, &[1.; 4001]);
    for range in [1000, 1001, 1002, 1003, 2000, 3003] {
        assert_eq!(eval_at("sum_over_time", &dense, 4000, range, &[]), Some(range as f64));
    }
}

#[test]
fn stddev_and_stdvar_over_time_are_population_statistics() {
    let s = load(10_000, &[0., 8., 8., 2., 3.]);
    assert_close(eval_at("stdvar_over_time", &s, MIN, 2 * MIN, &[]), 10.56);
    let got = eval_at("stddev_over_time", &s, MIN, 2 * MIN, &[]).expect("value");
    assert!((got - 3.249615).abs() < 1e-6);
    let constant = load(10_000, &[1.5990505637277868; 3]);
    assert_eq!(eval_at("stdvar_over_time", &constant, 55_000, MIN, &[]), Some(0.));
    assert_eq!(eval_at("stddev_over_time", &constant, 55_000, MIN, &[]), Some(0.));
}

#[test]
fn quantile_over_time_interpolates_and_handles_out_of_range_phi() {
    let two = load(10_000, &[0., 1.]);
    let three = load(10_000, &[0., 1., 2.]);
    let uneven = load(10_000, &[0., 1., 4.]);
    let cases = [
        (0., [0., 0., 0.]),
        (0.5, [0.5, 1., 1.]),
        (0.75, [0.75, 1.5, 2.5]),
        (0.8, [0.8, 1.6, 2.8]),
        (1., [1., 2., 4.]),
    ];
    for (q, want) in cases {
        for (s, w) in [&two, &three, &uneven].iter().zip(want) {
            assert_close(eval_at("quantile_over_time", s, MIN, 2 * MIN, &[q]), w);
        }
    }
    assert_eq!(eval_at("quantile_over_time", &two, MIN, 2 * MIN, &[-1.]), Some(f64::NEG_INFINITY));
    assert_eq!(eval_at("quantile_over_time", &two, MIN, 2 * MIN, &[2.]), Some(f64::INFINITY));
    assert_close(eval_at("quantile_over_time", &two, MIN, 2 * MIN, &[f64::NAN]), f64::NAN);
}

#[test]
fn mad_over_time_examples() {
    let metric = load(10_000, &[4., 6., 2., 1., 999., 1., 2.]);
    assert_close(eval_at("mad_over_time", &metric, 70_000, 70_000, &[]), 1.);
    let odd = load(10_000, &[1., 2., 3., 4., 5.]);
    assert_close(eval_at("mad_over_time", &odd, 40_000, 50_000, &[]), 1.);
    let equal = load(10_000, &[7.; 5]);
    assert_close(eval_at("mad_over_time", &equal, 40_000, 50_000, &[]), 0.);
    let single = load(10_000, &[5.]);
    assert_close(eval_at("mad_over_time", &single, 0, 10_000, &[]), 0.);
    let with_nan = load(10_000, &[1., 2., f64::NAN, 4.]);
    assert_close(eval_at("mad_over_time", &with_nan, 30_000, 40_000, &[]), f64::NAN);
}

#[test]
fn min_max_over_time_ignore_nan_unless_all_nan() {
    let s = load(10_000, &[f64::NAN, 3., 1., f64::NAN, 2.]);
    assert_eq!(eval_at("min_over_time", &s, 40_000, MIN, &[]), Some(1.));
    assert_eq!(eval_at("max_over_time", &s, 40_000, MIN, &[]), Some(3.));
    let nans = load(10_000, &[f64::NAN, f64::NAN]);
    assert_close(eval_at("min_over_time", &nans, 10_000, MIN, &[]), f64::NAN);
}

#[test]
fn ts_of_min_and_max_pick_the_last_occurrence() {
    // Odd scrape interval to catch rounding bugs in the ms → s conversion.
    let s = load(7_000, &[5., 1., 9., 1., 9., 3.]);
    assert_eq!(eval_at("ts_of_min_over_time", &s, 35_000, 40_000, &[]), Some(21.));
    assert_eq!(eval_at("ts_of_max_over_time", &s, 35_000, 40_000, &[]), Some(28.));
    assert_eq!(eval_at("ts_of_last_over_time", &s, 35_000, 40_000, &[]), Some(35.));
    assert_eq!(eval_at("ts_of_first_over_time", &s, 35_000, 40_000, &[]), Some(0.));
    // The window is left-open: the sample at exactly the start is not in it.
    assert_eq!(eval_at("ts_of_first_over_time", &s, 35_000, 35_000, &[]), Some(7.));
}

#[test]
fn simple_over_time_functions() {
    let s = load(10_000, &[3., 1., 4., 1., 5.]);
    assert_eq!(eval_at("count_over_time", &s, 40_000, MIN, &[]), Some(5.));
    assert_eq!(eval_at("last_over_time", &s, 40_000, MIN, &[]), Some(5.));
    assert_eq!(eval_at("first_over_time", &s, 40_000, MIN, &[]), Some(3.));
    assert_eq!(eval_at("present_over_time", &s, 40_000, MIN, &[]), Some(1.));
    assert_eq!(eval_at("sum_over_time", &s, 40_000, MIN, &[]), Some(14.));
}

#[test]
fn unknown_function_is_bad_data_and_missing_args_are_errors() {
    let s = load(10_000, &[1., 2.]);
    let err = eval_range("holt_winters", &s, -1, 10_000, &[0.5, 0.5]).expect_err("removed in 3.x");
    assert_eq!(err.kind, ErrorKind::BadData);
    let err = eval_range("quantile_over_time", &s, -1, 10_000, &[]).expect_err("needs phi");
    assert_eq!(err.kind, ErrorKind::BadData);
    for (_, name) in RangeFn::ALL {
        assert!(is_range_fn(name));
    }
}

#[test]
fn every_function_gives_no_result_for_an_empty_window() {
    for (_, name) in RangeFn::ALL {
        let got = eval_range(name, &[], 0, 60_000, &[0.5, 0.5]).expect("known");
        assert_eq!(got, None, "{name}");
    }
}

#[test]
fn reset_index_gives_each_window_its_change() {
    let gauge = load(15_000, &[5.0, 3.0, 4.0, 1.0, 1.0, 2.0]);
    let index = rate::ResetIndex::new(&gauge);
    assert_eq!(index.change(&gauge, 0, 6), 2.0 - 5.0 + 5.0 + 4.0);
    assert_eq!(index.change(&gauge, 1, 3), 1.0);
    assert_eq!(index.change(&gauge, 2, 4), 1.0 - 4.0 + 4.0);
    assert_eq!(index.change(&gauge, 3, 6), 1.0);
    let fractions = load(15_000, &[5.5, 3.0, 4.0, 0.25]);
    let index = rate::ResetIndex::new(&fractions);
    assert_eq!(index.change(&fractions, 0, 4), 0.25 - 5.5 + 5.5 + 4.0);
    assert_eq!(index.change(&fractions, 1, 3), 1.0);
}

/// A series finds the kept table of the series with its very timestamps, also when a
/// table for other timestamps with the same count, first and last one was kept after it.
#[test]
fn kept_tables_are_found_past_others_with_the_same_ends() {
    let grid = load(15_000, &[1.0, 2.0, 3.0, 4.0, 5.0]);
    let mut moved = grid.clone();
    moved[2].t += 4_000;
    let key = (60_000, 0, None, true);
    let mut cache = rate::RateWindowCache::default();
    for s in [&grid, &moved] {
        let built = cache.windows_of(s, key, true, |w| -> Result<(), ()> {
            w.start(s[0].t - 60_000, 15_000, 60_000, true, 0);
            let (lo, hi) = (0, s.len());
            w.push(s, lo, hi, 0, s[s.len() - 1].t, || rate::counter_change(s));
            w.finish(s);
            Ok(())
        });
        assert!(matches!(built, Ok((_, false))), "built afresh and kept");
    }
    let again = grid.iter().map(|p| Sample { t: p.t, v: p.v * 2.0 }).collect::<Vec<_>>();
    assert_eq!(cache.kept(&again, key).map(|(id, _)| id), Some(0));
    assert_eq!(cache.kept(&moved, key).map(|(id, _)| id), Some(1));
    assert_eq!(cache.kept(&grid, (60_000, 1, None, true)).map(|(id, _)| id), None, "another offset");
}

/// Caches sharing one [`rate::RateTables`] (a query's fragments) find each other's
/// tables, for their own grid only; one that shares nothing does not; a cache that
/// built a table another kept meanwhile keeps that one.
#[test]
fn shared_tables_are_found_by_the_other_caches_on_the_same_grid() {
    let series = load(15_000, &[1.0, 2.0, 3.0, 4.0, 5.0]);
    let key = (60_000, 0, None, true);
    let fill = |w: &mut rate::RateWindows| {
        let s = &series;
        w.start(s[0].t - 60_000, 15_000, 60_000, true, 0);
        w.push(s, 0, s.len(), 0, s[s.len() - 1].t, || rate::counter_change(s));
        w.finish(s);
    };
    let build = |cache: &mut rate::RateWindowCache| {
        cache
            .windows_of(&series, key, true, |w| -> Result<(), ()> {
                fill(w);
                Ok(())
            })
            .map(|(_, kept)| kept)
    };
    let tables = std::sync::Arc::new(rate::RateTables::for_evaluators(2));
    let cache = |t: Option<&std::sync::Arc<rate::RateTables>>, step| {
        rate::RateWindowCache::sharing(t.cloned(), 0, 600_000, step)
    };
    let (mut first, mut second) = (cache(Some(&tables), 15_000), cache(Some(&tables), 15_000));
    let (mut alone, mut other_grid) = (cache(None, 15_000), cache(Some(&tables), 30_000));
    assert_eq!(build(&mut first), Ok(false), "built by the first");
    assert_eq!(second.kept(&series, key).map(|(id, _)| id), Some(0), "found by the second");
    assert_eq!(build(&mut second), Ok(true));
    assert!(alone.kept(&series, key).is_none() && other_grid.kept(&series, key).is_none());
    // Two building at once: the one that finishes second keeps the first one's table.
    let (mut third, mut fourth) = (cache(Some(&tables), 60_000), cache(Some(&tables), 60_000));
    let built = fourth.windows_of(&series, key, true, |w| -> Result<(), ()> {
        assert_eq!(build(&mut third), Ok(false));
        fill(w);
        Ok(())
    });
    assert!(matches!(built, Ok((_, false))));
    assert_eq!(fourth.kept(&series, key).map(|(id, _)| id), Some(0));
    assert_eq!(build(&mut fourth), Ok(true));
}

mod props {
    use super::*;
    use proptest::prelude::*;

    /// Small integers with ties, NaNs (payloads too), ±0 and ±Inf: what the extreme
    /// kernels must order exactly as Prometheus' compare walk does.
    fn extremes() -> impl Strategy<Value = Vec<f64>> {
        proptest::collection::vec(
            prop_oneof![
                4 => (-5i32..5).prop_map(f64::from),
                1 => Just(f64::NAN),
                1 => Just(f64::from_bits(0x7ff8_0000_0000_0abc)),
                1 => Just(-0.0),
                1 => Just(f64::INFINITY),
                1 => Just(f64::NEG_INFINITY),
            ],
            1..40,
        )
    }

    proptest! {
        /// For a counter without resets, increase ≥ the raw difference, and rate·range
        /// is increase.
        #[test]
        fn rate_times_range_is_increase(deltas in proptest::collection::vec(0u32..1000, 2..50), first_offset in 1i64..15_000) {
            let mut v = 0.0;
            let samples: Vec<Sample> = deltas.iter().enumerate().map(|(i, d)| { v += *d as f64; Sample { t: first_offset + i as i64 * 15_000, v } }).collect();
            let end = samples.last().map(|s| s.t).unwrap_or(0) + 7_000;
            let start = 0;
            let inc = eval_range("increase", &samples, start, end, &[]).expect("ok").expect("value");
            let rate = eval_range("rate", &samples, start, end, &[]).expect("ok").expect("value");
            let raw = samples.last().map(|s| s.v).unwrap_or(0.) - samples[0].v;
            prop_assert!(inc >= raw - 1e-9);
            prop_assert!((rate * (end - start) as f64 / 1000.0 - inc).abs() <= 1e-9 * inc.abs().max(1.0));
        }

        /// `rate`/`increase` with a series' `ResetIndex` give the scanning kernel's value
        /// bit for bit in every window: gauges that drop often, ±0, NaN, fractions and
        /// values near the exactness bound (those must add the losses one by one).
        #[test]
        fn reset_index_gives_the_scan_bit_for_bit(
            values in proptest::collection::vec(prop_oneof![
                6 => (-50i32..50).prop_map(f64::from),
                1 => Just(-0.0),
                1 => Just(f64::NAN),
                1 => -5.0f64..5.0,
                1 => Just(((1u64 << 52) / 40) as f64),
                1 => Just(1e300),
            ], 2..40),
            all_integers in any::<bool>(),
            is_rate in any::<bool>(),
        ) {
            let values: Vec<f64> = if all_integers {
                values.iter().map(|v| if v.is_nan() { 3.0 } else { v.trunc() }).collect()
            } else {
                values
            };
            let s = load(15_000, &values);
            let index = rate::ResetIndex::new(&s);
            for lo in 0..s.len() {
                for hi in lo + 1..=s.len() {
                    let (ws, we) = (s[lo].t - 7_000, s[hi - 1].t + 3_000);
                    let w = &s[lo..hi];
                    let scan = rate::extrapolated_rate(w, ws, we, true, is_rate);
                    let indexed = (w.len() >= 2).then(|| rate::extrapolate(w, ws, we, true, is_rate, index.change(&s, lo, hi)));
                    prop_assert_eq!(indexed.map(f64::to_bits), scan.map(f64::to_bits), "window {}..{} of {:?}", lo, hi, values);
                }
            }
        }

        /// The branch-free change of a counter that is never negative is the scan's bit
        /// for bit in every window: zeros (a drop to zero, a window that cancels to
        /// zero), fractions whose sums round, values near 2^53 and far beyond.
        #[test]
        fn unsigned_counter_change_gives_the_scan_bit_for_bit(
            values in proptest::collection::vec(prop_oneof![
                4 => (0i32..50).prop_map(f64::from),
                2 => Just(0.0),
                2 => 0.0f64..5.0,
                1 => Just(((1u64 << 53) - 1) as f64),
                1 => Just(1e300),
            ], 2..40),
        ) {
            let s = load(15_000, &values);
            for lo in 0..s.len() {
                for hi in lo + 2..=s.len() {
                    let (scan, branch_free) = (rate::counter_change(&s[lo..hi]), rate::unsigned_counter_change(&s[lo..hi]));
                    prop_assert_eq!(branch_free.to_bits(), scan.to_bits(), "window {}..{} of {:?}", lo, hi, values);
                }
            }
        }

        /// `RateWindows` hands back `extrapolate`'s value bit for bit, for every window:
        /// on the scrape grid and off it, with missed scrapes, at steps and ranges that
        /// are multiples of the interval and not; with counters that start near zero
        /// (their zero point shortens the extrapolation, or nearly does), NaN, ±0, ±Inf,
        /// huge and tiny values. A table built on one series' timestamps gives another
        /// series with the same timestamps its own values.
        #[test]
        fn rate_windows_give_extrapolate_bit_for_bit(
            values in proptest::collection::vec(prop_oneof![
                3 => (-50i32..50).prop_map(f64::from),
                2 => -5.0f64..5.0,
                2 => 0.0f64..0.01,
                1 => 1e-300f64..1e-290,
                1 => prop_oneof![Just(f64::NAN), Just(-0.0), Just(f64::INFINITY), Just(1e300), Just(f64::MAX)],
            ], 2..300),
            rises in proptest::collection::vec(prop_oneof![0.0f64..1.0, 1.0f64..1e6], 2..300),
            jitter in prop_oneof![Just(0i64), 0i64..4_000],
            range in prop_oneof![(1i64..25).prop_map(|m| m * 15_000), 1_000i64..400_000],
            step in prop_oneof![(1i64..5).prop_map(|m| m * 15_000), 1_000i64..60_000],
            // Every `holes`-th sample missing (a failed scrape): windows of the same span
            // then differ in their number of samples.
            holes in prop_oneof![Just(usize::MAX), 5usize..40, 60usize..300],
            is_rate in any::<bool>(),
        ) {
            let mut s = load(15_000, &values);
            for (i, p) in s.iter_mut().enumerate() {
                p.t += (i as i64 * 7_919) % (jitter + 1);
            }
            let mut i = 0;
            s.retain(|_| {
                i += 1;
                i % holes != 0 || i < 3
            });
            // A counter on the same timestamps that starts at or near zero and rises.
            let mut counter = s.clone();
            let mut c = values[0].abs().min(1.0);
            for (p, r) in counter.iter_mut().zip(rises.iter().cycle()) {
                p.v = c;
                c += r;
            }
            let mut windows = rate::RateWindows::default();
            windows.start(s[0].t - range, step, range, is_rate, 0);
            let mut want = Vec::new();
            let mut we = s[0].t;
            let mut k = 0;
            while we <= s[s.len() - 1].t + range {
                let ws = we - range;
                let (lo, hi) = (s.partition_point(|p| p.t <= ws), s.partition_point(|p| p.t <= we));
                windows.push(&s, lo, hi, k, we, || rate::counter_change(&s[lo..hi]));
                if hi >= lo + 2 {
                    want.push((k, lo, hi, ws, we));
                }
                we += step;
                k += 1;
            }
            windows.finish(&s);
            prop_assert_eq!(windows.len(), want.len());
            // The series that built the table, then another read off it.
            for (series, built) in [(&s, true), (&counter, false)] {
                let got: Vec<(usize, u64)> = if built {
                    windows.values().map(|(k, v)| (k, v.to_bits())).collect()
                } else {
                    let change = |lo, hi| rate::counter_change(&series[lo..hi]);
                    windows.counter_values(series, change).map(|(k, v)| (k, v.to_bits())).collect()
                };
                let expected: Vec<(usize, u64)> = want
                    .iter()
                    .map(|&(k, lo, hi, ws, we)| {
                        let w = &series[lo..hi];
                        (k, rate::extrapolate(w, ws, we, true, is_rate, rate::counter_change(w)).to_bits())
                    })
                    .collect();
                prop_assert_eq!(got, expected, "{:?}", series);
            }
        }

        /// `max_over_time`/`min_over_time` give Prometheus' compare walk's value bit for
        /// bit, with NaNs (payloads too), ±0, ±Inf and ties.
        #[test]
        fn min_and_max_over_time_equal_the_compare_walk(
            values in extremes(),
        ) {
            let s = load(1000, &values);
            let walk = |better: &dyn Fn(f64, f64) -> bool| {
                let mut best = s[0].v;
                for p in &s {
                    if better(p.v, best) {
                        best = p.v;
                    }
                }
                best.to_bits()
            };
            prop_assert_eq!(over_time::max(&s).map(f64::to_bits), Some(walk(&|c, b| c > b || b.is_nan())));
            prop_assert_eq!(over_time::min(&s).map(f64::to_bits), Some(walk(&|c, b| c < b || b.is_nan())));
        }

        /// A `SlidingExtreme` gives `max`/`min`'s value bit for bit in every window of a
        /// forward slide: NaNs (payloads too), ±0, ±Inf, ties, windows of every width and
        /// windows whose ends jump.
        #[test]
        fn sliding_extreme_equals_the_scan(
            values in extremes(),
            jumps in proptest::collection::vec((0usize..4, 0usize..6), 1..30),
        ) {
            let s = load(1000, &values);
            for max in [true, false] {
                let scan = |lo: usize, hi: usize| {
                    let w = &s[lo..hi];
                    if max { over_time::max(w) } else { over_time::min(w) }.map(f64::to_bits)
                };
                for width in 1..=s.len() {
                    let mut slider = over_time::SlidingExtreme::new(max);
                    for lo in 0..=s.len() - width {
                        let got = slider.slide(&s, lo, lo + width).to_bits();
                        prop_assert_eq!(Some(got), scan(lo, lo + width), "max {} window {}..{}", max, lo, lo + width);
                    }
                }
                let (mut lo, mut hi, mut slider) = (0, 1, over_time::SlidingExtreme::new(max));
                for &(dlo, dhi) in &jumps {
                    hi = (hi + dhi).min(s.len());
                    lo = (lo + dlo).min(hi - 1);
                    prop_assert_eq!(Some(slider.slide(&s, lo, hi).to_bits()), scan(lo, hi), "max {} window {}..{}", max, lo, hi);
                }
            }
        }

        /// `BlockExtremes` gives `max`/`min`'s value bit for bit in every window of a
        /// range query whose range is `span` steps: NaNs (payloads too), ±0, ±Inf, ties,
        /// gaps that leave steps with empty windows (skipped, as the engine skips them).
        #[test]
        fn block_extremes_equal_the_scan(
            values in extremes(),
            gaps in proptest::collection::vec(prop_oneof![4 => Just(1i64), 1 => 2i64..12], 40),
            step in 1i64..4,
            span in 2usize..8,
            first_step in -10i64..3,
        ) {
            let mut t = 0;
            let s: Vec<Sample> = values.iter().zip(&gaps).map(|(&v, g)| { t += g * 500; Sample { t, v } }).collect();
            let (step, range) = (step * 500, step * 500 * span as i64);
            for max in [true, false] {
                let mut blocks = over_time::BlockExtremes::new(max, span);
                for k in 0..(s.len() as i64 + 40) {
                    let r = (first_step + k) * step;
                    let (lo, hi) = (s.partition_point(|p| p.t <= r - range), s.partition_point(|p| p.t <= r));
                    if lo >= hi {
                        continue;
                    }
                    let w = &s[lo..hi];
                    let scan = if max { over_time::max(w) } else { over_time::min(w) }.map(f64::to_bits);
                    let got = blocks.window(&s, lo, hi, k as usize, r, step).to_bits();
                    prop_assert_eq!(Some(got), scan, "max {} step {} window {}..{}", max, k, lo, hi);
                }
            }
        }

        /// `ExactSums` gives `sum_over_time`/`avg_over_time`'s Kahan answer bit for bit in
        /// every window of an integer series (±0, values at the exactness bound), and is
        /// not built for fractions, NaN or values past the bound.
        #[test]
        fn exact_sums_equal_the_kahan_kernels(
            values in proptest::collection::vec(prop_oneof![
                6 => (-50i32..50).prop_map(f64::from),
                2 => Just(-0.0),
                1 => Just(((1u64 << 52) / 42) as f64),
                1 => Just(-(((1u64 << 52) / 42) as f64)),
                1 => Just(0.5),
                1 => Just(f64::NAN),
            ], 1..40),
        ) {
            let s = load(1000, &values);
            let integers = values.iter().all(|v| v.fract() == 0.0);
            let within = values.iter().fold(0.0f64, |m, v| m.max(v.abs())) * (values.len() as f64 + 2.0) <= (1u64 << 52) as f64;
            let Some(sums) = over_time::ExactSums::new(&s) else {
                prop_assert!(!(integers && within), "refused {:?}", values);
                return Ok(());
            };
            prop_assert!(integers && within);
            for lo in 0..s.len() {
                for hi in lo + 1..=s.len() {
                    let w = &s[lo..hi];
                    prop_assert_eq!(Some(sums.sum(lo, hi).to_bits()), over_time::sum(w).map(f64::to_bits), "sum {}..{} of {:?}", lo, hi, values);
                    prop_assert_eq!(Some(sums.avg(lo, hi).to_bits()), over_time::avg(w).map(f64::to_bits), "avg {}..{} of {:?}", lo, hi, values);
                }
            }
        }

        /// `PairCounts` gives `changes`/`resets` in every window, NaNs included.
        #[test]
        fn pair_counts_equal_the_walk(values in extremes()) {
            let s = load(1000, &values);
            for resets in [false, true] {
                let counts = over_time::PairCounts::new(&s, resets);
                for lo in 0..s.len() {
                    for hi in lo + 1..=s.len() {
                        let w = &s[lo..hi];
                        let walk = if resets { over_time::resets(w) } else { over_time::changes(w) };
                        prop_assert_eq!(Some(counts.count(lo, hi).to_bits()), walk.map(f64::to_bits), "resets {} window {}..{} of {:?}", resets, lo, hi, values);
                    }
                }
            }
        }

        /// The quantile of a window always lies within its min and max.
        #[test]
        fn quantile_over_time_within_min_max(values in proptest::collection::vec(-1e6f64..1e6, 1..40), q in 0.0f64..=1.0) {
            let s = load(1000, &values);
            let got = eval_range("quantile_over_time", &s, -1, 1_000_000, &[q]).expect("ok").expect("value");
            let min = values.iter().cloned().fold(f64::INFINITY, f64::min);
            let max = values.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            prop_assert!(got >= min && got <= max);
        }
    }
}

#[test]
fn range_fn_names_round_trip() {
    for (f, name) in RangeFn::ALL {
        assert_eq!(RangeFn::from_name(name), Some(f));
        assert_eq!(f.name(), name);
    }
    assert_eq!(RangeFn::from_name("rate_over_time"), None);
    assert_eq!(RangeFn::QuantileOverTime.scalar_args(), 1);
    assert_eq!(RangeFn::DoubleExponentialSmoothing.scalar_args(), 2);
}

/// A kept table is found only by a series with exactly its timestamps: a difference at
/// any position (in the blocks of eight the test compares at once, or in the rest after
/// them) or in length makes it another table.
#[test]
fn same_times_finds_any_difference() {
    use super::rate::same_times;
    let samples = load(15_000, &series(0.0, 1.0, 20));
    let times: Vec<i64> = samples.iter().map(|s| s.t).collect();
    assert!(same_times(&times, &samples));
    for at in [0, 5, 7, 8, 15, 16, 20] {
        let mut other = times.clone();
        other[at] += 1;
        assert!(!same_times(&other, &samples), "a difference at {at} missed");
    }
    assert!(!same_times(&times[..20], &samples));
    assert!(!same_times(&times, &samples[..20]));
    assert!(same_times(&[], &[]));
}

//! `rate`, `increase`, `delta` (extrapolated over the window) and `irate`, `idelta` (the
//! last two samples only), with Prometheus 3.x semantics.

use tessera_model::Sample;

/// Prometheus' `extrapolatedRate` for float samples.
///
/// The raw change between the first and last sample (plus, for counters, the value lost at
/// every reset) is extrapolated towards the window boundaries:
/// - all the way to a boundary if the nearest sample is within 1.1 × the average sample
///   interval of it, otherwise by half an average interval (the series probably starts or
///   ends inside the window);
/// - for counters, never further back than the point where the counter would have been
///   zero (counters cannot be negative);
/// - `rate` then divides by the window length in seconds.
///
/// Fewer than two samples give no result. `window_start_ms` is exclusive, as in 3.x.
pub fn extrapolated_rate(
    samples: &[Sample],
    window_start_ms: i64,
    window_end_ms: i64,
    is_counter: bool,
    is_rate: bool,
) -> Option<f64> {
    extrapolated_rate_given(samples, window_start_ms, window_end_ms, is_counter, is_rate, true)
}

/// [`extrapolated_rate`] for a caller that may know the window holds no counter reset
/// (no sample below the one before it): with `may_reset == false` the per-sample scan
/// for resets is skipped, which makes a window O(1). The result is the same bit for bit
/// when the caller is right (the scan would add nothing).
pub fn extrapolated_rate_given(
    samples: &[Sample],
    window_start_ms: i64,
    window_end_ms: i64,
    is_counter: bool,
    is_rate: bool,
    may_reset: bool,
) -> Option<f64> {
    if samples.len() < 2 {
        return None;
    }
    let first = samples[0];
    let last = samples[samples.len() - 1];
    let mut result = last.v - first.v;
    if is_counter && may_reset {
        // A drop means the counter restarted from zero; the value it had before the drop
        // was lost from `last - first` and is added back.
        for w in samples.windows(2) {
            if w[1].v < w[0].v {
                result += w[0].v;
            }
        }
    }

    let mut duration_to_start = (first.t - window_start_ms) as f64 / 1000.0;
    let mut duration_to_end = (window_end_ms - last.t) as f64 / 1000.0;
    let sampled_interval = (last.t - first.t) as f64 / 1000.0;
    let average_interval = sampled_interval / (samples.len() - 1) as f64;

    let threshold = average_interval * 1.1;
    if duration_to_start >= threshold {
        duration_to_start = average_interval / 2.0;
    }
    if is_counter {
        // Where would a straight line through the samples have hit zero? Do not
        // extrapolate to before that point.
        let mut duration_to_zero = duration_to_start;
        if result > 0.0 && first.v >= 0.0 {
            duration_to_zero = sampled_interval * (first.v / result);
        }
        if duration_to_zero < duration_to_start {
            duration_to_start = duration_to_zero;
        }
    }
    if duration_to_end >= threshold {
        duration_to_end = average_interval / 2.0;
    }

    let mut factor = (sampled_interval + duration_to_start + duration_to_end) / sampled_interval;
    if is_rate {
        factor /= (window_end_ms - window_start_ms) as f64 / 1000.0;
    }
    Some(result * factor)
}

/// Prometheus' `instantValue`: `irate` (`is_rate`) or `idelta` from the last two samples.
///
/// For `irate` a drop between the two is a counter reset, and the later value itself is
/// the increase. Two samples at the same timestamp (impossible for well-formed input) give
/// no result rather than a division by zero.
pub fn instant_value(samples: &[Sample], is_rate: bool) -> Option<f64> {
    if samples.len() < 2 {
        return None;
    }
    let prev = samples[samples.len() - 2];
    let last = samples[samples.len() - 1];
    let interval_ms = last.t - prev.t;
    if interval_ms == 0 {
        return None;
    }
    // Written as "not less than" on purpose: with a NaN on either side the difference
    // (NaN) is the answer, as in Prometheus.
    let mut result = last.v;
    if !is_rate || !(last.v < prev.v) {
        result = last.v - prev.v;
    }
    if is_rate {
        result /= interval_ms as f64 / 1000.0;
    }
    Some(result)
}

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
    extrapolated_rate_given(samples, window_start_ms, window_end_ms, is_counter, is_rate, ResetLoss::Scan)
}

/// What a window's counter resets lost (the value before each drop), as far as the
/// caller knows it without looking at the window's samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ResetLoss {
    /// The window holds no reset: nothing to add.
    None,
    /// The sum of the values lost, computed exactly.
    Exact(f64),
    /// Unknown: scan the window's samples, as Prometheus does.
    Scan,
}

/// The counter resets of one series, indexed once so that each window of
/// `rate`/`increase` learns what its resets lost in O(1) instead of scanning its samples
/// (windows overlap: at a 15 s step over `[5m]` every sample sits in 20 windows, and a
/// gauge such as a temperature drops in a third of its samples).
///
/// The sums of losses are kept only when they are exact: when every value of the series
/// is an integer and `(n + 2) · max |v| ≤ 2^52`, every partial sum, in any order, is an
/// integer below 2^53 and so exactly representable, and adding a window's losses as one
/// difference of prefix sums gives the same double, bit for bit, as Prometheus'
/// sample-by-sample loop. A series with fractions, NaN or huge values scans the windows
/// that hold a reset, as before; a series without a reset (a counter) builds no sums.
#[derive(Debug, Default)]
pub struct ResetIndex {
    /// Resets among samples `1..=i`: a drop from `i - 1` to `i` counts at `i`.
    count: Vec<u32>,
    /// `lost[i]`: the sum of the values lost at the resets counted in `count[i]`.
    lost: Option<Vec<f64>>,
}

impl ResetIndex {
    pub fn new(samples: &[Sample]) -> ResetIndex {
        let mut n = 0u32;
        let mut prev = f64::NAN;
        let count: Vec<u32> = samples
            .iter()
            .map(|s| {
                n += u32::from(s.v < prev);
                prev = s.v;
                n
            })
            .collect();
        let lost = if n > 0 { Self::exact_losses(samples) } else { None };
        ResetIndex { count, lost }
    }

    /// Prefix sums of the values lost at resets, if every sum of them is exact.
    fn exact_losses(samples: &[Sample]) -> Option<Vec<f64>> {
        const EXACT: f64 = (1u64 << 52) as f64;
        // `as` saturates and maps NaN to 0, so only integers (below 2^63) compare equal;
        // `f64::trunc` would be a libm call on baseline x86-64.
        let integral = samples.iter().all(|s| (s.v as i64) as f64 == s.v);
        let max_abs = samples.iter().fold(0.0f64, |m, s| m.max(s.v.abs()));
        if !integral || max_abs * (samples.len() as f64 + 2.0) > EXACT {
            return None;
        }
        let mut sum = 0.0;
        let mut prev = f64::NAN;
        Some(
            samples
                .iter()
                .map(|s| {
                    if s.v < prev {
                        sum += prev;
                    }
                    prev = s.v;
                    sum
                })
                .collect(),
        )
    }

    /// What the resets of window `lo..hi` (indices into the series' samples) lost.
    #[inline]
    pub fn loss(&self, lo: usize, hi: usize) -> ResetLoss {
        let last = hi - 1;
        if self.count[last] == self.count[lo] {
            return ResetLoss::None;
        }
        match &self.lost {
            Some(lost) => ResetLoss::Exact(lost[last] - lost[lo]),
            None => ResetLoss::Scan,
        }
    }
}

/// [`extrapolated_rate`] for a caller that knows what the window's counter resets lost
/// ([`ResetIndex`]): with `ResetLoss::None` or `ResetLoss::Exact` the per-sample scan is
/// skipped, which makes a window O(1). The result is the same bit for bit as the scan's
/// when the caller is right.
pub fn extrapolated_rate_given(
    samples: &[Sample],
    window_start_ms: i64,
    window_end_ms: i64,
    is_counter: bool,
    is_rate: bool,
    resets: ResetLoss,
) -> Option<f64> {
    if samples.len() < 2 {
        return None;
    }
    let first = samples[0];
    let last = samples[samples.len() - 1];
    let mut result = last.v - first.v;
    if is_counter {
        // A drop means the counter restarted from zero; the value it had before the drop
        // was lost from `last - first` and is added back.
        match resets {
            ResetLoss::None => {}
            // An exact zero could differ from the loop's in its sign: scan then.
            ResetLoss::Exact(lost) if result + lost != 0.0 => result += lost,
            ResetLoss::Exact(_) | ResetLoss::Scan => {
                for w in samples.windows(2) {
                    if w[1].v < w[0].v {
                        result += w[0].v;
                    }
                }
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

//! `rate`, `increase`, `delta` (extrapolated over the window) and `irate`, `idelta` (the
//! last two samples only), with Prometheus 3.x semantics.

use super::over_time::{is_reset, PairCounts};
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
    if samples.len() < 2 {
        return None;
    }
    let change = if is_counter { counter_change(samples) } else { samples[samples.len() - 1].v - samples[0].v };
    Some(extrapolate(samples, window_start_ms, window_end_ms, is_counter, is_rate, change))
}

/// `last - first` of a window of a counter, plus the value lost at every reset (a drop
/// means the counter restarted from zero; the value it had before the drop was lost from
/// `last - first` and is added back), summed in Prometheus' order.
fn counter_change(samples: &[Sample]) -> f64 {
    let mut change = samples[samples.len() - 1].v - samples[0].v;
    for w in samples.windows(2) {
        if is_reset(w[0].v, w[1].v) {
            change += w[0].v;
        }
    }
    change
}

/// The counter resets of one series, indexed once so that each window of
/// `rate`/`increase` gets its [`counter_change`] without scanning every sample (windows
/// overlap: at a 15 s step over `[5m]` every sample sits in 20 windows, and a gauge such
/// as a temperature drops in a third of its samples). Every answer is the scan's, bit for
/// bit:
/// - a window without a reset is `last - first`;
/// - when every sum of the series' values is exact ([`super::sums_are_exact`]), a
///   window's losses are one difference of prefix sums;
/// - otherwise the window's losses are added one by one in Prometheus' order, visiting
///   only the resets (their positions are listed), not every sample.
#[derive(Debug)]
pub struct ResetIndex {
    /// Resets among samples `1..=i`: a drop from `i - 1` to `i` counts at `i`.
    count: PairCounts,
    losses: Losses,
}

#[derive(Debug)]
enum Losses {
    /// The series has no reset.
    None,
    /// `sums[i]`: the exact sum of the values lost at the resets counted in `count[i]`.
    Exact(Vec<f64>),
    /// The position of every reset, in order.
    At(Vec<u32>),
}

impl ResetIndex {
    pub fn new(samples: &[Sample]) -> ResetIndex {
        let count = PairCounts::new(samples, true);
        let any = !samples.is_empty() && count.upto(samples.len() - 1) > 0;
        let losses = if any { Losses::of(samples, &count) } else { Losses::None };
        ResetIndex { count, losses }
    }

    /// The window `lo..hi` (indices into the series' `samples`, at least two)'s
    /// [`counter_change`].
    #[inline]
    pub fn change(&self, samples: &[Sample], lo: usize, hi: usize) -> f64 {
        let last = hi - 1;
        let change = samples[last].v - samples[lo].v;
        let (from, to) = (self.count.upto(lo) as usize, self.count.upto(last) as usize);
        if from == to {
            return change;
        }
        match &self.losses {
            // An exact zero could differ from the loop's in its sign: add one by one then.
            Losses::Exact(sums) if change + (sums[last] - sums[lo]) != 0.0 => change + (sums[last] - sums[lo]),
            Losses::Exact(_) | Losses::None => counter_change(&samples[lo..hi]),
            Losses::At(at) => at[from..to].iter().fold(change, |c, &p| c + samples[p as usize - 1].v),
        }
    }
}

impl Losses {
    /// The losses of a series with at least one reset, whose resets `count` counts.
    fn of(samples: &[Sample], count: &PairCounts) -> Losses {
        // Sample i follows a reset when the running count steps up at i.
        let reset_at = |i: usize| i > 0 && count.upto(i) > count.upto(i - 1);
        if super::sums_are_exact(samples) {
            let mut sum = 0.0;
            return Losses::Exact(
                (0..samples.len())
                    .map(|i| {
                        if reset_at(i) {
                            sum += samples[i - 1].v;
                        }
                        sum
                    })
                    .collect(),
            );
        }
        Losses::At((0..samples.len()).filter(|&i| reset_at(i)).map(|i| i as u32).collect())
    }
}

/// [`extrapolated_rate`] of a window (at least two samples) whose change is known:
/// `last - first`, plus for counters what the resets lost ([`ResetIndex::change`]).
#[inline]
pub fn extrapolate(
    samples: &[Sample],
    window_start_ms: i64,
    window_end_ms: i64,
    is_counter: bool,
    is_rate: bool,
    change: f64,
) -> f64 {
    let first = samples[0];
    let last = samples[samples.len() - 1];
    let result = change;

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
    result * factor
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

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
pub fn counter_change(samples: &[Sample]) -> f64 {
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
///
/// A series without a reset (most counters) gets no index: one scan finds that out.
#[derive(Debug)]
pub struct ResetIndex(Option<Resets>);

#[derive(Debug)]
struct Resets {
    /// Resets among samples `1..=i`: a drop from `i - 1` to `i` counts at `i`.
    count: PairCounts,
    losses: Losses,
}

#[derive(Debug)]
enum Losses {
    /// `sums[j]`: the exact sum of the values lost at the series' first `j` resets.
    Exact(Vec<f64>),
    /// The position of every reset, in order.
    At(Vec<u32>),
}

impl ResetIndex {
    pub fn new(samples: &[Sample]) -> ResetIndex {
        // A scan without branches or stores decides whether the counts are needed.
        let any = samples.windows(2).fold(false, |any, w| any | is_reset(w[0].v, w[1].v));
        if !any {
            return ResetIndex(None);
        }
        let count = PairCounts::new(samples, true);
        let resets = count.upto(samples.len() - 1) as usize;
        let losses = Losses::of(samples, &count, resets);
        ResetIndex(Some(Resets { count, losses }))
    }

    /// The window `lo..hi` (indices into the series' `samples`, at least two)'s
    /// [`counter_change`].
    #[inline]
    pub fn change(&self, samples: &[Sample], lo: usize, hi: usize) -> f64 {
        let last = hi - 1;
        let change = samples[last].v - samples[lo].v;
        let Some(Resets { count, losses }) = &self.0 else { return change };
        let (from, to) = (count.upto(lo) as usize, count.upto(last) as usize);
        if from == to {
            return change;
        }
        match losses {
            // An exact zero could differ from the loop's in its sign: add one by one then.
            Losses::Exact(sums) if change + (sums[to] - sums[from]) != 0.0 => change + (sums[to] - sums[from]),
            Losses::Exact(_) => counter_change(&samples[lo..hi]),
            Losses::At(at) => at[from..to].iter().fold(change, |c, &p| c + samples[p as usize - 1].v),
        }
    }
}

impl Losses {
    /// The losses of a series with `resets` (at least one) resets, which `count` counts.
    fn of(samples: &[Sample], count: &PairCounts, resets: usize) -> Losses {
        // Where each reset is. Every sample is written to the next free slot, which
        // moves on only past a reset: no branch on the data (a gauge drops at random).
        let mut at = vec![0u32; resets + 1];
        let mut m = 0;
        for i in 1..samples.len() {
            at[m] = i as u32;
            m += (count.upto(i) - count.upto(i - 1)) as usize;
        }
        at.truncate(resets);
        if super::sums_are_exact(samples) {
            let mut sum = 0.0;
            let lost = at.iter().map(|&p| {
                sum += samples[p as usize - 1].v;
                sum
            });
            return Losses::Exact(std::iter::once(0.0).chain(lost).collect());
        }
        Losses::At(at)
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
    let w = Window::of(samples, window_start_ms, window_end_ms, change);
    let range_s = is_rate.then(|| (window_end_ms - window_start_ms) as f64 / 1000.0);
    w.extrapolate(is_counter, range_s)
}

/// What [`extrapolate`] needs of one window, its integers already converted to `f64`
/// (exactly: every operand is far below 2^53).
#[derive(Clone, Copy, Debug, Default)]
struct Window {
    /// Milliseconds from the window's start to its first sample, from its last sample
    /// to its end, and between its first and last sample.
    to_start_ms: f64,
    to_end_ms: f64,
    sampled_ms: f64,
    /// Samples in the window minus one.
    gaps: f64,
    first_v: f64,
    change: f64,
}

impl Window {
    #[inline(always)]
    fn of(samples: &[Sample], window_start_ms: i64, window_end_ms: i64, change: f64) -> Window {
        let (first, last) = (samples[0], samples[samples.len() - 1]);
        Window {
            to_start_ms: (first.t - window_start_ms) as f64,
            to_end_ms: (window_end_ms - last.t) as f64,
            sampled_ms: (last.t - first.t) as f64,
            gaps: (samples.len() - 1) as f64,
            first_v: first.v,
            change,
        }
    }

    /// Prometheus' arithmetic, operation for operation (so bit for bit); `range_s` is
    /// the window's length in seconds for `rate`, `None` for `increase`/`delta`. Written
    /// without branches so that a loop over windows runs as straight-line code.
    #[inline(always)]
    fn extrapolate(self, is_counter: bool, range_s: Option<f64>) -> f64 {
        let result = self.change;
        let mut duration_to_start = self.to_start_ms / 1000.0;
        let mut duration_to_end = self.to_end_ms / 1000.0;
        let sampled_interval = self.sampled_ms / 1000.0;
        let average_interval = sampled_interval / self.gaps;

        let threshold = average_interval * 1.1;
        if duration_to_start >= threshold {
            duration_to_start = average_interval / 2.0;
        }
        if is_counter {
            // Where would a straight line through the samples have hit zero? Do not
            // extrapolate to before that point.
            let mut duration_to_zero = duration_to_start;
            if result > 0.0 && self.first_v >= 0.0 {
                duration_to_zero = sampled_interval * (self.first_v / result);
            }
            if duration_to_zero < duration_to_start {
                duration_to_start = duration_to_zero;
            }
        }
        if duration_to_end >= threshold {
            duration_to_end = average_interval / 2.0;
        }

        let mut factor = (sampled_interval + duration_to_start + duration_to_end) / sampled_interval;
        if let Some(range_s) = range_s {
            factor /= range_s;
        }
        result * factor
    }
}

/// Windows of one series gathered for [`extrapolate`] in batches. One window's
/// arithmetic is a chain of up to seven dependent divisions; computed one window at a
/// time, interleaved with finding the next window, the processor overlaps about two
/// windows' chains. A batch keeps each input in its own array and runs the chains of
/// [`RateBatch::LEN`] windows in one straight loop, which the compiler turns into packed
/// arithmetic (two windows per division). Every answer is [`extrapolate`]'s, bit for bit.
pub struct RateBatch {
    len: usize,
    to_start_ms: [f64; RateBatch::LEN],
    to_end_ms: [f64; RateBatch::LEN],
    sampled_ms: [f64; RateBatch::LEN],
    gaps: [f64; RateBatch::LEN],
    first_v: [f64; RateBatch::LEN],
    change: [f64; RateBatch::LEN],
    /// The caller's tag of each window (its step).
    tags: [usize; RateBatch::LEN],
    out: [f64; RateBatch::LEN],
}

impl Default for RateBatch {
    fn default() -> RateBatch {
        let zero = [0.0; RateBatch::LEN];
        RateBatch {
            len: 0,
            to_start_ms: zero,
            to_end_ms: zero,
            sampled_ms: zero,
            gaps: zero,
            first_v: zero,
            change: zero,
            tags: [0; RateBatch::LEN],
            out: zero,
        }
    }
}

impl RateBatch {
    /// Windows per batch: enough for packed divisions and overlapping chains, and small
    /// because every series zeroes a fresh batch (at 64, 3.5 % of the instructions
    /// callgrind counted for `sum(rate(...))` over 27,728 two-hour series).
    pub const LEN: usize = 16;

    /// Adds a window (at least two samples) whose change is known, tagged `tag`; true
    /// when the batch is full and must be [`finish`](RateBatch::finish)ed.
    #[inline]
    pub fn push(
        &mut self,
        samples: &[Sample],
        window_start_ms: i64,
        window_end_ms: i64,
        change: f64,
        tag: usize,
    ) -> bool {
        let w = Window::of(samples, window_start_ms, window_end_ms, change);
        let i = self.len;
        self.to_start_ms[i] = w.to_start_ms;
        self.to_end_ms[i] = w.to_end_ms;
        self.sampled_ms[i] = w.sampled_ms;
        self.gaps[i] = w.gaps;
        self.first_v[i] = w.first_v;
        self.change[i] = w.change;
        self.tags[i] = tag;
        self.len += 1;
        self.len == Self::LEN
    }

    /// Extrapolates the gathered windows (a counter's: `rate`/`increase`), hands each
    /// `(tag, value)` to `out` in the order pushed, and empties the batch. `range_ms` is
    /// the windows' length, the same for all.
    pub fn finish(&mut self, range_ms: i64, is_rate: bool, mut out: impl FnMut(usize, f64)) {
        let range_s = is_rate.then(|| range_ms as f64 / 1000.0);
        // Lanes are computed in pairs for the packed divisions, so one past `len` may be
        // (its inputs stale or zero: harmless in floating point). A partial batch (an
        // instant query has one window per series) costs its own windows, not 64.
        let n = self.len.next_multiple_of(2).min(Self::LEN);
        for i in 0..n {
            let w = Window {
                to_start_ms: self.to_start_ms[i],
                to_end_ms: self.to_end_ms[i],
                sampled_ms: self.sampled_ms[i],
                gaps: self.gaps[i],
                first_v: self.first_v[i],
                change: self.change[i],
            };
            self.out[i] = w.extrapolate(true, range_s);
        }
        for (&tag, &v) in self.tags[..self.len].iter().zip(&self.out[..self.len]) {
            out(tag, v);
        }
        self.len = 0;
    }
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

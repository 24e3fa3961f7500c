//! `rate`, `increase`, `delta` (extrapolated over the window) and `irate`, `idelta` (the
//! last two samples only), with Prometheus 3.x semantics.

use super::over_time::{is_reset, PairCounts};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

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

/// [`counter_change`] of a window none of whose values is negative, `-0.0` or NaN, without a
/// branch per sample (on a gauge read as a counter, whether a sample drops is a coin
/// toss). It adds `0.0` where the other adds nothing, which leaves every partial sum as
/// it was: none is `-0.0` (`last - first` of two values that are not negative is `+0.0`
/// when they are equal, and so is any sum that cancels to zero).
pub(super) fn unsigned_counter_change(samples: &[Sample]) -> f64 {
    let mut change = samples[samples.len() - 1].v - samples[0].v;
    for w in samples.windows(2) {
        let lost = u64::from(is_reset(w[0].v, w[1].v)).wrapping_neg();
        change += f64::from_bits(w[0].v.to_bits() & lost);
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
///   only the resets (the values they lost are listed), not every sample.
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
    /// The value lost at every reset (the one before the drop), in order.
    Each(Vec<f64>),
}

impl ResetIndex {
    pub fn new(samples: &[Sample]) -> ResetIndex {
        // A scan that stops at the first reset decides whether the counts are needed: a
        // gauge drops within its first few samples, a counter is read through once.
        if !samples.windows(2).any(|w| is_reset(w[0].v, w[1].v)) {
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
            Losses::Each(lost) => add_losses(change, &lost[from..to]),
        }
    }
}

/// `change` plus the values `lost`, one by one. Not inlined: in the caller's loop the
/// running sum was kept in memory, not a register, which doubled the chain of
/// additions. (The values are listed rather than the resets' positions: a load and an
/// addition each, where a position cost a bounds check and a second load; -3 % of
/// `dcgm_all_rate`'s instructions, BENCHMARKS.md, "Labels left undecoded".)
#[inline(never)]
fn add_losses(change: f64, lost: &[f64]) -> f64 {
    lost.iter().fold(change, |c, &l| c + l)
}

impl Losses {
    /// The losses of a series with `resets` (at least one) resets, which `count` counts.
    fn of(samples: &[Sample], count: &PairCounts, resets: usize) -> Losses {
        // What each reset lost. Every sample is written to the next free slot, which
        // moves on only past a reset: no branch on the data (a gauge drops at random).
        let mut lost = vec![0.0; resets + 1];
        let mut m = 0;
        for i in 1..samples.len() {
            lost[m] = samples[i - 1].v;
            m += (count.upto(i) - count.upto(i - 1)) as usize;
        }
        lost.truncate(resets);
        if super::sums_are_exact(samples) {
            let mut sum = 0.0;
            let sums = lost.iter().map(|&l| {
                sum += l;
                sum
            });
            return Losses::Exact(std::iter::once(0.0).chain(sums).collect());
        }
        Losses::Each(lost)
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
#[derive(Clone, Copy, Debug)]
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

/// The seconds of Prometheus' extrapolation that come from a window's timestamps alone:
/// before a counter's zero point is considered.
#[derive(Clone, Copy, Debug)]
struct Timing {
    /// From the first sample to the last.
    sampled: f64,
    /// Extrapolated towards the window's start and end: to the boundary if the nearest
    /// sample is within 1.1 × the average interval of it, else half an interval.
    to_start: f64,
    to_end: f64,
}

impl Timing {
    /// Prometheus' arithmetic, operation for operation (so bit for bit), without
    /// branches so that a loop over windows runs as straight-line code.
    #[inline(always)]
    fn of(to_start_ms: f64, to_end_ms: f64, sampled_ms: f64, gaps: f64) -> Timing {
        let mut to_start = to_start_ms / 1000.0;
        let mut to_end = to_end_ms / 1000.0;
        let sampled = sampled_ms / 1000.0;
        let average_interval = sampled / gaps;
        let threshold = average_interval * 1.1;
        if to_start >= threshold {
            to_start = average_interval / 2.0;
        }
        if to_end >= threshold {
            to_end = average_interval / 2.0;
        }
        Timing { sampled, to_start, to_end }
    }

    /// What multiplies the change, given the extrapolation towards the start;
    /// `per_second` is the window's length in seconds for `rate`, 1 otherwise (a
    /// division by 1 is exact).
    #[inline(always)]
    fn factor(self, to_start: f64, per_second: f64) -> f64 {
        (self.sampled + to_start + self.to_end) / self.sampled / per_second
    }
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
    /// the window's length in seconds for `rate`, `None` for `increase`/`delta`.
    #[inline(always)]
    fn extrapolate(self, is_counter: bool, range_s: Option<f64>) -> f64 {
        let result = self.change;
        let timing = Timing::of(self.to_start_ms, self.to_end_ms, self.sampled_ms, self.gaps);
        let mut to_start = timing.to_start;
        if is_counter {
            // Where would a straight line through the samples have hit zero? Do not
            // extrapolate to before that point.
            let mut to_zero = to_start;
            if result > 0.0 && self.first_v >= 0.0 {
                to_zero = timing.sampled * (self.first_v / result);
            }
            if to_zero < to_start {
                to_start = to_zero;
            }
        }
        result * timing.factor(to_start, range_s.unwrap_or(1.0))
    }
}

/// The windows of one series for `rate`/`increase`, with everything their
/// extrapolation takes from timestamps alone: which samples each holds, and the factor
/// that turns its change into its value. That is most of the arithmetic (five of its
/// seven divisions), and series scraped together (every series of one target carries
/// the scrape's timestamp) share it: the engine keeps the tables of a query's
/// timestamp sets and reuses one for a series with the same timestamps
/// ([`RateWindowCache`]). A series then pays per window a subtraction, a multiplication
/// and the test of a counter's zero point, decided without a division in all but the
/// windows where it may bind. Every value is [`extrapolate`]'s, bit for bit.
#[derive(Debug, Default)]
pub struct RateWindows {
    /// Per window with at least two samples, in step order.
    windows: Vec<RateWindow>,
    /// The windows' starts: `step_ms × step + first_start_ms` (exclusive).
    first_start_ms: i64,
    step_ms: i64,
    /// The windows' length, and whether it is `rate` (else `increase`).
    range_ms: i64,
    is_rate: bool,
    /// The last windows pushed, whose timings are not computed yet.
    batch: TimingBatch,
    /// The values of the windows pushed, for the series that built the table.
    values: Vec<f64>,
    /// The most samples in any window pushed, including those of fewer than two.
    most: usize,
    /// A kept table's windows by [`WindowBlock::LEN`] (empty in a table being built).
    blocks: Vec<WindowBlock>,
}

/// [`WindowBlock::LEN`] consecutive windows of a kept table, summarised for a test of
/// all of them at once ([`super::rate_sums`]): the first's first sample, the last's first
/// and last sample, and the least and greatest of their ratios (`+Inf` as the greatest
/// when one is NaN, so that the test fails).
#[derive(Clone, Copy, Debug)]
pub(super) struct WindowBlock {
    pub(super) lo: u32,
    pub(super) last_lo: u32,
    pub(super) last: u32,
    pub(super) ratio_min: f64,
    pub(super) ratio_max: f64,
}

impl WindowBlock {
    pub(super) const LEN: usize = 16;

    fn of(windows: &[RateWindow]) -> Option<WindowBlock> {
        let (first, last) = (windows.first()?, windows.last()?);
        let (mut ratio_min, mut ratio_max) = (f64::INFINITY, 0.0f64);
        for w in windows {
            ratio_min = ratio_min.min(w.ratio);
            ratio_max = if w.ratio.is_nan() { f64::INFINITY } else { ratio_max.max(w.ratio) };
        }
        Some(WindowBlock { lo: first.lo, last_lo: last.lo, last: last.hi - 1, ratio_min, ratio_max })
    }
}

/// One window of [`RateWindows`], in 32 bytes: a series reads its table once per
/// window, and a kept table is usually no longer in the nearest caches.
#[derive(Clone, Copy, Debug)]
pub(super) struct RateWindow {
    /// Its step, and its samples `lo..hi`.
    pub(super) step: u32,
    pub(super) lo: u32,
    pub(super) hi: u32,
    /// [`Timing::to_start`] over [`Timing::sampled`], for [`zero_is_farther`], and the
    /// window's value over its change unless a counter's zero point binds.
    pub(super) ratio: f64,
    pub(super) factor: f64,
}

/// The [`Window`]s of the last windows pushed, gathered so that their arithmetic (a
/// chain of up to six dependent divisions each) runs in one straight loop over arrays,
/// which the compiler turns into packed arithmetic (two windows per division); computed
/// one at a time, the processor overlaps about two windows' chains.
#[derive(Debug, Default)]
struct TimingBatch {
    len: usize,
    to_start_ms: [f64; TimingBatch::LEN],
    to_end_ms: [f64; TimingBatch::LEN],
    sampled_ms: [f64; TimingBatch::LEN],
    gaps: [f64; TimingBatch::LEN],
    change: [f64; TimingBatch::LEN],
}

impl TimingBatch {
    const LEN: usize = 16;
}

impl RateWindows {
    /// Starts an empty table: `rate` (`is_rate`, else `increase`) over windows of
    /// `range_ms`, the window of step `k` starting at `step_ms × k + first_start_ms`
    /// (exclusive); room for `capacity` windows.
    pub fn start(&mut self, first_start_ms: i64, step_ms: i64, range_ms: i64, is_rate: bool, capacity: usize) {
        self.clear();
        (self.first_start_ms, self.step_ms, self.range_ms, self.is_rate) = (first_start_ms, step_ms, range_ms, is_rate);
        self.windows.reserve(capacity);
        self.values.reserve(capacity);
    }

    /// Forgets every window.
    fn clear(&mut self) {
        self.windows.clear();
        self.values.clear();
        self.batch.len = 0;
        self.most = 0;
    }

    /// Adds the window `samples[lo..hi]` of step `step`, to `window_end_ms` (its start
    /// as [`start`](RateWindows::start) said), whose change `change` gives
    /// ([`ResetIndex::change`]); one of fewer than two samples only counts towards
    /// [`most`](RateWindows::most).
    #[inline]
    pub fn push(
        &mut self,
        samples: &[Sample],
        lo: usize,
        hi: usize,
        step: usize,
        window_end_ms: i64,
        change: impl FnOnce() -> f64,
    ) {
        self.most = self.most.max(hi - lo);
        if hi - lo < 2 {
            return;
        }
        let change = change();
        let w = Window::of(&samples[lo..hi], self.start_ms(step), window_end_ms, change);
        let (step, lo, hi) = (step as u32, lo as u32, hi as u32);
        self.windows.push(RateWindow { step, lo, hi, ratio: 0.0, factor: 0.0 });
        let b = &mut self.batch;
        let i = b.len;
        (b.to_start_ms[i], b.to_end_ms[i], b.sampled_ms[i], b.gaps[i]) =
            (w.to_start_ms, w.to_end_ms, w.sampled_ms, w.gaps);
        b.change[i] = change;
        b.len += 1;
        if b.len == TimingBatch::LEN {
            self.compute_batch(samples);
        }
    }

    /// Computes the windows pushed since the last batch; call once all are pushed.
    pub fn finish(&mut self, samples: &[Sample]) {
        self.compute_batch(samples);
    }

    fn compute_batch(&mut self, samples: &[Sample]) {
        let len = self.batch.len;
        let (mut ratio, mut factor) = ([0.0; TimingBatch::LEN], [0.0; TimingBatch::LEN]);
        let per_second = if self.is_rate { self.range_ms as f64 / 1000.0 } else { 1.0 };
        // Lanes are computed in pairs for the packed divisions, so one past `len` may be
        // (its inputs stale or zero: harmless in floating point).
        let b = &self.batch;
        for i in 0..len.next_multiple_of(2).min(TimingBatch::LEN) {
            let t = Timing::of(b.to_start_ms[i], b.to_end_ms[i], b.sampled_ms[i], b.gaps[i]);
            (ratio[i], factor[i]) = (t.to_start / t.sampled, t.factor(t.to_start, per_second));
        }
        let first = self.windows.len() - len;
        for (i, w) in self.windows[first..].iter_mut().enumerate() {
            (w.ratio, w.factor) = (ratio[i], factor[i]);
        }
        let mut values = [0.0; TimingBatch::LEN];
        for (i, w) in self.windows[first..].iter().enumerate() {
            values[i] = self.value(w, samples, self.batch.change[i]);
        }
        self.values.extend_from_slice(&values[..len]);
        self.batch.len = 0;
    }

    /// The values of the windows pushed (after [`finish`](RateWindows::finish)), with
    /// their steps.
    pub fn values(&self) -> impl Iterator<Item = (usize, f64)> + '_ {
        self.windows.iter().zip(&self.values).map(|(w, &v)| (w.step as usize, v))
    }

    /// Windows with at least two samples.
    pub fn len(&self) -> usize {
        self.windows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// The most samples in any window, for the sample limit.
    pub fn most(&self) -> usize {
        self.most
    }

    /// The start (exclusive) of the window of step `step`.
    #[inline]
    pub fn start_ms(&self, step: usize) -> i64 {
        self.step_ms * step as i64 + self.first_start_ms
    }

    /// The table to keep: the windows and their blocks, without the building series'
    /// values.
    fn table(&self) -> RateWindows {
        RateWindows {
            windows: self.windows.clone(),
            values: Vec::new(),
            batch: TimingBatch::default(),
            blocks: self.windows.chunks(WindowBlock::LEN).filter_map(WindowBlock::of).collect(),
            ..*self
        }
    }

    /// Bytes a kept copy of the table takes ([`table`](RateWindows::table) clones just
    /// its windows and adds their blocks; this one's buffers may be larger, reused from
    /// series to series).
    fn kept_bytes(&self) -> usize {
        self.windows.len() * std::mem::size_of::<RateWindow>()
            + self.windows.len().div_ceil(WindowBlock::LEN) * std::mem::size_of::<WindowBlock>()
    }

    /// A kept table's windows by [`WindowBlock::LEN`], summarised (empty in a table that
    /// was not kept).
    pub(super) fn blocks(&self) -> &[WindowBlock] {
        &self.blocks
    }

    /// The windows with at least two samples, in step order.
    pub(super) fn windows(&self) -> &[RateWindow] {
        &self.windows
    }

    /// The windows' steps and their `rate`/`increase` over another counter, `samples`,
    /// with the same timestamps as the series that built the table, given each window's
    /// change (`change(lo, hi)` of its samples `lo..hi`: [`ResetIndex::change`]).
    #[inline]
    pub fn counter_values<'s>(
        &'s self,
        samples: &'s [Sample],
        mut change: impl FnMut(usize, usize) -> f64 + 's,
    ) -> impl Iterator<Item = (usize, f64)> + 's {
        self.windows
            .iter()
            .map(move |w| (w.step as usize, self.value(w, samples, change(w.lo as usize, w.hi as usize))))
    }

    /// Window `w`'s value over another counter, `samples` (none of its values negative,
    /// `-0.0` or NaN), with the same timestamps as the series that built the table, and its
    /// change ([`unsigned_counter_change`]).
    #[inline(never)]
    pub(super) fn unsigned_value(&self, w: &RateWindow, samples: &[Sample]) -> (f64, f64) {
        let change = unsigned_counter_change(&samples[w.lo as usize..w.hi as usize]);
        (self.value(w, samples, change), change)
    }

    /// Window `w`'s value over `samples`, given its change.
    #[inline(always)]
    fn value(&self, w: &RateWindow, samples: &[Sample], change: f64) -> f64 {
        let (lo, hi) = (w.lo as usize, w.hi as usize);
        let first_v = samples[lo].v;
        // The compiler branches on each test whether written `&` or `&&`; that costs
        // nothing measurable on gauges, whose changes are positive at random (criterion
        // `*_table_kept_gauge` against `*_table_kept`; a branch-free block version was
        // 39-49 % slower, BENCHMARKS.md, "Labels checked once").
        let may_bind = (change > 0.0) & (first_v >= 0.0) & !zero_is_farther(first_v, change, w.ratio);
        if may_bind {
            let start = self.start_ms(w.step as usize);
            extrapolate_window(&samples[lo..hi], start, start + self.range_ms, self.is_rate, change)
        } else {
            change * w.factor
        }
    }
}

/// [`extrapolate`] of a counter's window, out of line:
/// the rare window of [`RateWindows`] where a counter's zero point may bind.
#[cold]
#[inline(never)]
fn extrapolate_window(window: &[Sample], start_ms: i64, end_ms: i64, is_rate: bool, change: f64) -> f64 {
    extrapolate(window, start_ms, end_ms, true, is_rate, change)
}

/// Whether a counter's zero point, `sampled × (first / change)` as Prometheus computes
/// it, is surely not before the extrapolation towards the start, `to_start` (so it does
/// not shorten it), for `first >= 0` and `change > 0`, given `ratio`, `to_start /
/// sampled` rounded once; false when unsure.
///
/// Decided without a division: `first` against `change × ratio`, with a margin of
/// 2^-40. Each of the six roundings involved (the ratio's, the product here, the
/// margin's, Prometheus' quotient and product) moves a value by at most 2^-53 of it,
/// and none is subnormal: the test requires `b` far above the subnormals, and the
/// ratio is above 2^-64 (`to_start` is at least a millisecond or half an average
/// interval, `sampled` below 2^63 ms). So when `first > b × (1 + 2^-40)`,
/// `sampled × (first / change) > to_start` holds exactly as well. An overflow to
/// infinity in Prometheus' arithmetic only pushes the zero point further out.
#[inline(always)]
pub(super) fn zero_is_farther(first: f64, change: f64, ratio: f64) -> bool {
    const MARGIN: f64 = 1.0 + 1.0 / (1u64 << 40) as f64;
    let b = change * ratio;
    (b >= 1e-290) & first.is_finite() & (first > b * MARGIN)
}

/// The [`RateWindows`] of the timestamp sets a query's `rate`/`increase` saw on one
/// evaluator's steps, found again by a series' timestamps (compared in full) and the
/// windows' parameters. A shard streams a metric's series, then the next metric's, so
/// a target's next series comes after one series of every other target: the cache
/// keeps every table until its budget is spent, then builds the rest afresh.
///
/// The fragments of one query that run side by side (one per core, each over its own
/// shards) see the same targets, since series are spread over shards by a hash of their
/// labels: with a [`RateTables`] they share what they keep, so a table built by one is
/// found by the others ([`RateWindowCache::sharing`]).
#[derive(Debug, Default)]
pub struct RateWindowCache {
    /// Tables this cache found or kept, numbered in the order they came (see
    /// [`RateWindowCache::table`]).
    kept: Vec<Kept>,
    /// The last of `kept` for each sample count, first and last timestamp (the ones
    /// before it are chained through `kept`): one lookup, no list to load. Seeded, as
    /// timestamps come from senders.
    index: HashMap<(usize, i64, i64), usize, foldhash::fast::RandomState>,
    /// Bytes the kept tables and their timestamps take (without `shared`).
    bytes: usize,
    /// The table of a series that is not kept.
    scratch: RateWindows,
    /// The query's shared tables and this cache's grid (start, end, step), which the
    /// shared tables are keyed by besides the index key.
    shared: Option<(Arc<RateTables>, Grid)>,
}

/// An evaluator's steps: start, end and step (ms).
type Grid = (i64, i64, i64);

/// A table one [`RateWindowCache`] found or kept.
#[derive(Debug)]
struct Kept {
    table: Arc<CachedWindows>,
    /// The table kept before this one with the same index key, if any.
    same_index: Option<usize>,
}

#[derive(Debug)]
struct CachedWindows {
    key: RateWindowsKey,
    times: Vec<i64>,
    windows: RateWindows,
}

impl CachedWindows {
    fn matches(&self, samples: &[Sample], key: RateWindowsKey) -> bool {
        self.key == key && same_times(&self.times, samples)
    }
}

/// `rate`/`increase` tables kept for every evaluator of one query that shares them
/// (fragments evaluated in parallel in one process), up to one budget for all of them.
/// Measured: BENCHMARKS.md, "Rate tables shared by a query's fragments".
#[derive(Debug)]
pub struct RateTables {
    inner: Mutex<SharedTables>,
    budget: usize,
}

#[derive(Debug, Default)]
struct SharedTables {
    by_key: HashMap<(Grid, (usize, i64, i64)), Vec<Arc<CachedWindows>>, foldhash::fast::RandomState>,
    bytes: usize,
}

impl SharedTables {
    /// The table kept on `grid` for series with the timestamps of `samples` and `key`.
    fn find(&self, grid: Grid, samples: &[Sample], key: RateWindowsKey) -> Option<Arc<CachedWindows>> {
        let candidates = self.by_key.get(&(grid, RateWindowCache::index_key(samples)))?;
        candidates.iter().find(|c| c.matches(samples, key)).cloned()
    }
}

impl RateTables {
    /// Tables for `evaluators` evaluators at once: each one's budget, together.
    pub fn for_evaluators(evaluators: usize) -> RateTables {
        RateTables { inner: Mutex::default(), budget: RateWindowCache::BUDGET.saturating_mul(evaluators.max(1)) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SharedTables> {
        // A panic while the lock was held left at worst a table not inserted.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What a table of [`RateWindows`] depends on besides the series' timestamps and the
/// evaluator's steps: the range, the offset, the `@` time and whether it is `rate`.
pub type RateWindowsKey = (i64, i64, Option<i64>, bool);

/// Whether `samples` have exactly the timestamps `times`. Nearly every series asked
/// about has them (it is looked up by its count, first and last timestamp), so the
/// test goes eight at a time with one branch per eight, not one per sample: the
/// per-sample compare and branch were 4-6 % of `dcgm_all_rate`'s CPU.
pub(super) fn same_times(times: &[i64], samples: &[Sample]) -> bool {
    if times.len() != samples.len() {
        return false;
    }
    let (mut ts, mut ss) = (times.chunks_exact(8), samples.chunks_exact(8));
    for (t, s) in (&mut ts).zip(&mut ss) {
        let differ = t.iter().zip(s).fold(0, |d, (&t, s)| d | (t ^ s.t));
        if differ != 0 {
            return false;
        }
    }
    ts.remainder().iter().zip(ss.remainder()).all(|(&t, s)| t == s.t)
}

impl RateWindowCache {
    /// Bytes of tables and timestamps kept: a 15 s scrape over two hours at a 15 s
    /// step takes about 27 KiB per target, so 600 targets.
    const BUDGET: usize = 16 << 20;

    /// A cache for an evaluator on the steps `start, start + step, ..., <= end` that
    /// finds and keeps tables in `tables` too, when given.
    pub fn sharing(tables: Option<Arc<RateTables>>, start: i64, end: i64, step: i64) -> RateWindowCache {
        RateWindowCache { shared: tables.map(|t| (t, (start, end, step))), ..RateWindowCache::default() }
    }

    /// The number and table kept for series with the timestamps of `samples` and `key`,
    /// if one is: this cache's, else one another evaluator of the query kept (which this
    /// cache then keeps too).
    pub fn kept(&mut self, samples: &[Sample], key: RateWindowsKey) -> Option<(usize, &RateWindows)> {
        let i = match self.kept_here(samples, key) {
            Some(i) => i,
            None => {
                let (tables, grid) = self.shared.as_ref()?;
                let found = tables.lock().find(*grid, samples, key)?;
                self.keep_here(samples, found)
            }
        };
        Some((i, &self.kept[i].table.windows))
    }

    fn kept_here(&self, samples: &[Sample], key: RateWindowsKey) -> Option<usize> {
        let mut at = self.index.get(&Self::index_key(samples)).copied();
        while let Some(i) = at {
            if self.kept[i].table.matches(samples, key) {
                return Some(i);
            }
            at = self.kept[i].same_index;
        }
        None
    }

    /// Keeps `table` (of series with the timestamps of `samples`) and returns its number.
    fn keep_here(&mut self, samples: &[Sample], table: Arc<CachedWindows>) -> usize {
        let same_index = self.index.insert(Self::index_key(samples), self.kept.len());
        self.kept.push(Kept { table, same_index });
        self.kept.len() - 1
    }

    /// Where the kept tables of series with the timestamps of `samples` are found: their
    /// sample count, first and last timestamp.
    fn index_key(samples: &[Sample]) -> (usize, i64, i64) {
        (samples.len(), samples.first().map_or(0, |s| s.t), samples.last().map_or(0, |s| s.t))
    }

    /// Kept table number `id` (as [`RateWindowCache::kept`] numbers it); tables are kept
    /// as long as the cache.
    pub fn table(&self, id: usize) -> Option<&RateWindows> {
        self.kept.get(id).map(|c| &c.table.windows)
    }

    /// The windows of `samples` for `key`: the kept table of a series with the same
    /// timestamps (true: read its values with [`RateWindows::counter_values`]), or the
    /// one `build` fills (false: `build` starts, pushes and finishes the windows, and
    /// the values are [`RateWindows::values`]); that one is kept too if `keep` and the
    /// budget allows.
    pub fn windows_of<E>(
        &mut self,
        samples: &[Sample],
        key: RateWindowsKey,
        keep: bool,
        build: impl FnOnce(&mut RateWindows) -> Result<(), E>,
    ) -> Result<(&RateWindows, bool), E> {
        if keep {
            if let Some((i, _)) = self.kept(samples, key) {
                return Ok((&self.kept[i].table.windows, true));
            }
        }
        build(&mut self.scratch)?;
        if keep {
            self.keep_built(samples, key);
        }
        Ok((&self.scratch, false))
    }

    /// Keeps the table just built in `scratch` if the budget allows: in the shared
    /// tables when there are some (unless another evaluator kept the same one
    /// meanwhile), and here.
    fn keep_built(&mut self, samples: &[Sample], key: RateWindowsKey) {
        let bytes = samples.len() * 8 + self.scratch.kept_bytes();
        let new = || {
            Arc::new(CachedWindows { key, times: samples.iter().map(|s| s.t).collect(), windows: self.scratch.table() })
        };
        let table = match &self.shared {
            None => {
                if self.bytes + bytes > Self::BUDGET {
                    return;
                }
                self.bytes += bytes;
                new()
            }
            Some((tables, grid)) => {
                let mut shared = tables.lock();
                if let Some(found) = shared.find(*grid, samples, key) {
                    drop(shared);
                    self.keep_here(samples, found);
                    return;
                }
                if shared.bytes + bytes > tables.budget {
                    return;
                }
                shared.bytes += bytes;
                let table = new();
                shared.by_key.entry((*grid, Self::index_key(samples))).or_default().push(Arc::clone(&table));
                table
            }
        };
        self.keep_here(samples, table);
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

//! The `*_over_time` aggregations and `changes`/`resets`. Every sample in the window has
//! the same weight, however irregularly spaced. All return `None` for an empty window.

use crate::functions::stats::{self, kahan_inc, KahanSum};
use tessera_model::Sample;

/// `avg_over_time`: Kahan sum divided by the count, switching to an incremental mean only
/// when the running sum would overflow (direct division is more accurate while it lasts;
/// see prometheus/prometheus#16714).
pub fn avg(samples: &[Sample]) -> Option<f64> {
    let (first, rest) = samples.split_first()?;
    let (mut sum, mut c) = (first.v, 0.0);
    let mut mean = 0.0;
    let mut count = 1.0;
    let mut incremental = false;
    for (i, s) in rest.iter().enumerate() {
        count = (i + 2) as f64;
        if !incremental {
            let (new_sum, new_c) = kahan_inc(s.v, sum, c);
            if !new_sum.is_infinite() {
                (sum, c) = (new_sum, new_c);
                continue;
            }
            incremental = true;
            mean = sum / (count - 1.0);
            c /= count - 1.0;
        }
        let q = (count - 1.0) / count;
        (mean, c) = kahan_inc(s.v / count, q * mean, q * c);
    }
    Some(if incremental { mean + c } else { sum / count + c / count })
}

/// `sum_over_time`, Kahan-compensated.
pub fn sum(samples: &[Sample]) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut k = KahanSum::new();
    for s in samples {
        k.add(s.v);
    }
    Some(k.value())
}

/// Exact prefix sums of one series' values, for `sum_over_time`/`avg_over_time` over
/// windows that overlap (`avg_over_time(x[1h])` at a 10 m step adds every sample six
/// times): a window's sum is one difference.
///
/// Built only when every sum is exact ([`super::sums_are_exact`]). Then Kahan's
/// compensation stays `+0` and [`sum`] and [`avg`] reduce to the exact sum plus `+0` (and
/// the exact sum ÷ count plus `+0`), which is what [`ExactSums::sum`] and
/// [`ExactSums::avg`] give, bit for bit, ±0 included.
#[derive(Debug)]
pub struct ExactSums(Vec<f64>);

impl ExactSums {
    /// `None` unless every sum of the series' values is exact.
    pub fn new(samples: &[Sample]) -> Option<ExactSums> {
        if !super::sums_are_exact(samples) {
            return None;
        }
        let mut sums = Vec::with_capacity(samples.len() + 1);
        let mut sum = 0.0;
        sums.push(sum);
        sums.extend(samples.iter().map(|s| {
            sum += s.v;
            sum
        }));
        Some(ExactSums(sums))
    }

    /// [`sum`] of the samples `lo..hi` (`lo < hi`).
    #[inline]
    pub fn sum(&self, lo: usize, hi: usize) -> f64 {
        (self.0[hi] - self.0[lo]) + 0.0
    }

    /// [`avg`] of the samples `lo..hi` (`lo < hi`).
    #[inline]
    pub fn avg(&self, lo: usize, hi: usize) -> f64 {
        (self.0[hi] - self.0[lo]) / (hi - lo) as f64 + 0.0
    }
}

/// `count_over_time`.
pub fn count(samples: &[Sample]) -> Option<f64> {
    (!samples.is_empty()).then_some(samples.len() as f64)
}

/// Prometheus' `compareOverTime`: walks the window keeping the sample for which
/// `better(current, best)` last held; a NaN best is always replaced, so NaN only wins when
/// every value is NaN.
fn compare_over_time(samples: &[Sample], better: impl Fn(f64, f64) -> bool) -> Option<Sample> {
    let mut best = *samples.first()?;
    for s in samples {
        if better(s.v, best.v) {
            best = *s;
        }
    }
    Some(best)
}

/// `min_over_time`: [`compare_over_time`]'s answer without its branches (see [`extreme`]).
pub fn min(samples: &[Sample]) -> Option<f64> {
    extreme(samples, f64::INFINITY, |v, m| v < m)
}

/// `max_over_time`: [`compare_over_time`]'s answer without its branches (see [`extreme`]).
pub fn max(samples: &[Sample]) -> Option<f64> {
    extreme(samples, f64::NEG_INFINITY, |v, m| v > m)
}

/// The value `compare_over_time(samples, |cur, best| beats(cur, best) || best.is_nan())`
/// gives, as a select per sample instead of a branch and a copy of the best sample: the
/// kernel's share of a `max by (Hostname) (max_over_time(x[1h]))` profile went from 22 %
/// to 11.5 % (perf, billion-sample data, 2 days). The first value that beats
/// every earlier one wins (a later equal one does not: ±0 keep the first), NaN never
/// beats a number, and a window of NaNs only gives its last NaN, bit for bit, as the scan
/// does (checked against it by a proptest).
fn extreme(samples: &[Sample], start: f64, beats: impl Fn(f64, f64) -> bool) -> Option<f64> {
    let last = samples.last()?.v;
    let (m, numbers) = scan_extreme(samples, start, beats);
    Some(if numbers { m } else { last })
}

/// `max_over_time` (or `min_over_time`) of a window that slides forward over one series,
/// for windows that overlap a lot: `max_over_time(x[10m])` at a 15 s step reads every
/// sample in 40 windows, where this keeps the window's candidates (a monotonic queue of
/// indices) and touches each sample about twice. At 6 windows per sample the plain scan
/// ([`max`]) costs the same, so the engine slides only over windows that overlap more.
///
/// The answer is [`max`]'s (hence Prometheus' compare walk's), bit for bit: among the
/// window's numbers the first one no later one beats (a later equal one does not enter
/// ahead of it, so ±0 keep the first), NaN never a candidate, and a window of NaNs gives
/// its last NaN.
#[derive(Debug)]
pub struct SlidingExtreme {
    /// `max_over_time` (else `min_over_time`).
    max: bool,
    /// Indices of the candidates, in time order; no candidate beats an earlier one.
    queue: std::collections::VecDeque<usize>,
    /// Samples below this index have been offered to the queue.
    offered: usize,
}

impl SlidingExtreme {
    pub fn new(max: bool) -> SlidingExtreme {
        SlidingExtreme { max, queue: std::collections::VecDeque::new(), offered: 0 }
    }

    /// Slides to the window `lo..hi` (indices into `samples`, `lo < hi`; neither bound
    /// moves back between calls) and gives its extreme.
    #[inline]
    pub fn slide(&mut self, samples: &[Sample], lo: usize, hi: usize) -> f64 {
        let beats = |a: f64, b: f64| if self.max { a > b } else { a < b };
        while self.offered < hi {
            let v = samples[self.offered].v;
            if !v.is_nan() {
                while self.queue.back().is_some_and(|&b| beats(v, samples[b].v)) {
                    self.queue.pop_back();
                }
                self.queue.push_back(self.offered);
            }
            self.offered += 1;
        }
        while self.queue.front().is_some_and(|&f| f < lo) {
            self.queue.pop_front();
        }
        match self.queue.front() {
            Some(&f) => samples[f].v,
            None => samples[hi - 1].v,
        }
    }
}

/// `max_over_time` (or `min_over_time`) over windows that are each `span` (2 or more)
/// consecutive steps long, i.e. a range that is a multiple of the step: every window is
/// the union of `span` step-long blocks, the last of which is new at each step. Each
/// block's extreme is found once, by the same select as [`max`], and a window's is the
/// same select over its blocks' extremes in time order. That is [`max`]'s answer bit for
/// bit: the select keeps the first value no later one beats, so over two runs of samples
/// it is the first run's unless the second's beats it. A window of NaNs gives its last
/// NaN. At a 10-minute step over `[1h]` each sample is compared once instead of six times.
#[derive(Debug)]
pub struct BlockExtremes {
    /// `max_over_time` (else `min_over_time`).
    max: bool,
    span: usize,
    /// The blocks of the last window, oldest first: (step, end index into the samples,
    /// extreme of its numbers, whether it has a number).
    blocks: std::collections::VecDeque<(i64, usize, f64, bool)>,
}

impl BlockExtremes {
    pub fn new(max: bool, span: usize) -> BlockExtremes {
        BlockExtremes { max, span, blocks: std::collections::VecDeque::with_capacity(span + 1) }
    }

    /// The extreme of the window `lo..hi` of step `k`, which ends at time `end` and is
    /// `span` × `step` long (steps in increasing order, windows not empty; a step whose
    /// window was empty may be skipped).
    #[inline]
    pub fn window(&mut self, samples: &[Sample], lo: usize, hi: usize, k: usize, end: i64, step: i64) -> f64 {
        let k = k as i64;
        let start = match self.blocks.back() {
            // The step after the last: its new block starts where that window ended.
            Some(&(j, last_end, ..)) if j + 1 == k => last_end,
            // Otherwise the window is cut into its blocks here (block `k - i` ends at
            // `end - i·step`), the last of which is new.
            _ => {
                self.blocks.clear();
                let mut from = lo;
                for i in (1..self.span as i64).rev() {
                    let to = from + samples[from..hi].partition_point(|s| s.t <= end - i * step);
                    self.push_block(samples, k - i, from, to);
                    from = to;
                }
                from
            }
        };
        while self.blocks.front().is_some_and(|&(j, ..)| j + self.span as i64 <= k) {
            self.blocks.pop_front();
        }
        self.push_block(samples, k, start, hi);
        let (mut m, mut any) = (if self.max { f64::NEG_INFINITY } else { f64::INFINITY }, false);
        for &(_, _, e, numbers) in &self.blocks {
            any |= numbers;
            let beats = if self.max { e > m } else { e < m };
            m = if beats { e } else { m };
        }
        if any {
            m
        } else {
            samples[hi - 1].v
        }
    }

    fn push_block(&mut self, samples: &[Sample], j: i64, from: usize, to: usize) {
        let (e, numbers) = if self.max {
            scan_extreme(&samples[from..to], f64::NEG_INFINITY, |v, m| v > m)
        } else {
            scan_extreme(&samples[from..to], f64::INFINITY, |v, m| v < m)
        };
        self.blocks.push_back((j, to, e, numbers));
    }
}

/// [`extreme`]'s select over `samples` from `start`: the extreme of their numbers, and
/// whether there is one.
#[inline(always)]
fn scan_extreme(samples: &[Sample], start: f64, beats: impl Fn(f64, f64) -> bool) -> (f64, bool) {
    let (mut m, mut numbers) = (start, false);
    for s in samples {
        let v = s.v;
        numbers |= !v.is_nan();
        m = if beats(v, m) { v } else { m };
    }
    (m, numbers)
}

/// `ts_of_min_over_time`: the timestamp (seconds) of the **last** sample holding the
/// minimum, hence `<=`.
pub fn ts_of_min(samples: &[Sample]) -> Option<f64> {
    compare_over_time(samples, |cur, best| cur <= best || best.is_nan()).map(|s| s.t as f64 / 1000.0)
}

/// `ts_of_max_over_time`: the timestamp (seconds) of the last sample holding the maximum.
pub fn ts_of_max(samples: &[Sample]) -> Option<f64> {
    compare_over_time(samples, |cur, best| cur >= best || best.is_nan()).map(|s| s.t as f64 / 1000.0)
}

/// `stdvar_over_time`: population variance (Kahan-compensated Welford).
pub fn stdvar(samples: &[Sample]) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    Some(stats::variance_over_time(samples.iter().map(|s| s.v)))
}

/// `stddev_over_time`: population standard deviation.
pub fn stddev(samples: &[Sample]) -> Option<f64> {
    stdvar(samples).map(f64::sqrt)
}

/// `quantile_over_time(φ, v)`. φ outside [0, 1] gives ∓Inf and NaN gives NaN; Prometheus
/// also attaches a warning annotation, which is the engine's to add.
pub fn quantile(samples: &[Sample], q: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut values: Vec<f64> = samples.iter().map(|s| s.v).collect();
    Some(stats::quantile(q, &mut values))
}

/// `mad_over_time`: the median of the absolute deviations from the median. A NaN sample
/// makes the median undefined, so the result is NaN (Prometheus 3.x; earlier versions
/// sorted the NaN away and returned a number).
pub fn mad(samples: &[Sample]) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    if samples.iter().any(|s| s.v.is_nan()) {
        return Some(f64::NAN);
    }
    let mut values: Vec<f64> = samples.iter().map(|s| s.v).collect();
    let median = stats::quantile(0.5, &mut values);
    for v in values.iter_mut() {
        *v = (*v - median).abs();
    }
    Some(stats::quantile(0.5, &mut values))
}

/// `changes`: how often the value differs from the previous sample. NaN followed by NaN is
/// not a change (both are "no number"), NaN followed by a number is.
pub fn changes(samples: &[Sample]) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    Some(samples.windows(2).filter(|w| is_change(w[0].v, w[1].v)).count() as f64)
}

/// `resets`: how often the value drops below the previous sample (a counter reset).
pub fn resets(samples: &[Sample]) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    Some(samples.windows(2).filter(|w| is_reset(w[0].v, w[1].v)).count() as f64)
}

fn is_change(prev: f64, cur: f64) -> bool {
    cur != prev && !(cur.is_nan() && prev.is_nan())
}

/// A counter reset between two consecutive samples, as `resets` and `rate` count one: a
/// drop (NaN never is one).
pub(crate) fn is_reset(prev: f64, cur: f64) -> bool {
    cur < prev
}

/// `changes` or `resets` of one series over windows that overlap: the running count of
/// changes (or resets) between consecutive samples, so that a window's count is one
/// difference instead of a walk over its samples (`changes(x[1h])` at a 1 m step walks
/// every sample 60 times). Counts are integers, so the answer is the walk's exactly.
#[derive(Debug)]
pub struct PairCounts(Vec<u32>);

impl PairCounts {
    /// For `changes` (`resets` when `resets` is set).
    pub fn new(samples: &[Sample], resets: bool) -> PairCounts {
        // Two loops, each with its test inlined (through a function pointer, a call per
        // sample: 20 % of the reset index's cost in `dcgm_all_rate`).
        if resets {
            PairCounts::counting(samples, is_reset)
        } else {
            PairCounts::counting(samples, is_change)
        }
    }

    fn counting(samples: &[Sample], event: impl Fn(f64, f64) -> bool) -> PairCounts {
        let mut n = 0u32;
        let mut counts = Vec::with_capacity(samples.len());
        counts.push(0);
        counts.extend(samples.windows(2).map(|w| {
            n += u32::from(event(w[0].v, w[1].v));
            n
        }));
        PairCounts(counts)
    }

    /// The count over the samples `lo..hi` (`lo < hi`).
    #[inline]
    pub fn count(&self, lo: usize, hi: usize) -> f64 {
        f64::from(self.upto(hi - 1) - self.upto(lo))
    }

    /// Changes (resets) among samples `1..=i`: one between `i - 1` and `i` counts at `i`.
    #[inline]
    pub fn upto(&self, i: usize) -> u32 {
        self.0[i]
    }
}

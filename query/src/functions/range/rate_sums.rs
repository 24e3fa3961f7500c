//! `sum(rate(x[r]))` and `sum(increase(x[r]))` over series that share a table of
//! windows ([`RateWindows`]: series scraped together carry the same timestamps), added
//! per sample instead of per window.
//!
//! Where no counter's zero point shortens the extrapolation, a window's `rate` is its
//! change times a factor that depends on the timestamps alone, and a window's change is
//! the sum of the series' increments inside it (`b - a` between two samples, `b` after a
//! drop: Prometheus adds the value lost at a reset back). So the sum over series of a
//! window's rates is the factor times the sum over the window of every series'
//! increments at each sample: one column of increments per table and group, added to
//! once per sample of each series, and one pass over the windows at the end. Per
//! series that is an addition per sample instead of a change, a multiplication and a
//! compensated addition per window (a 5-minute range at a 15 s step puts every sample
//! in 20 windows).
//!
//! A series joins when its values are finite and not negative. Its windows where the
//! counter's zero point may shorten the extrapolation (or where that cannot be ruled
//! out cheaply: [`surely_unbound`], tried for 16 windows at once first,
//! [`surely_unbound_block`]) are computed as the window-by-window way computes
//! them and handed to the caller, and their change (the same increments added in
//! Prometheus' grouping) is taken back out of the window's sum; any other series is
//! evaluated window by window. The answer is the same
//! sum added in another grouping: it differs from the per-series sum by rounding alone.
//! Up to [`RateSums::FOLD`] series' increments are added plainly into one column, which
//! is then added into a compensated (Kahan) sum and cleared: a sum's increments are none
//! negative, so the plain part's roundings are at most `FOLD - 1` units of the last place
//! of its total, and the compensated part's two, however many series a table has
//! (measured on the benchmark's DCGM fleet, `dcgm_all_rate`: 2.2e-16 relative; the split
//! and differential tests allow 1e-9 for sums). Adding each series with compensation
//! read and wrote twice the memory and four times the arithmetic per sample: folding
//! took 2 % off `dcgm_all_rate` (BENCHMARKS.md, "Rate tables shared by a query's
//! fragments…").

use tessera_model::Sample;

use super::rate::{zero_is_farther, RateWindow, RateWindows, WindowBlock};
use crate::functions::stats::{kahan_inc_branch_free, KahanSum};

/// The unit roundoff's double, 2^-52: a bound for one rounding of either sign, relative
/// to the value rounded.
const EPS: f64 = f64::EPSILON;

/// One group's sum of `rate`/`increase` over the series that share one table.
#[derive(Debug)]
pub struct RateSums {
    /// Per sample position: the plain sum of the increments there of the series added
    /// since the last fold.
    inc: Vec<f64>,
    /// Series added since the last fold.
    pending: usize,
    /// Per sample position: the compensated sum and its compensation of the folded
    /// columns (empty until the first fold).
    sum: Vec<f64>,
    c: Vec<f64>,
    series: usize,
    /// Per window of the table (once one is needed): the compensated sum of the changes
    /// of the series whose value there was handed over, and how many they are.
    taken_out: Vec<(KahanSum, u32)>,
}

/// A series' increments, their prefix sums and how many of them are not zero, reused
/// from series to series; its greatest value and the bound of its roundings.
#[derive(Debug, Default)]
pub struct RateScratch {
    inc: Vec<f64>,
    prefix: Vec<f64>,
    moves: Vec<u32>,
    most: f64,
    slack: f64,
}

impl RateScratch {
    /// Takes `samples`' increments, prefix sums and counts of moves; false (and nothing
    /// to use) when there is no sample or a value is negative or not finite.
    fn scan(&mut self, samples: &[Sample]) -> bool {
        let n = samples.len();
        if n == 0 {
            return false;
        }
        let RateScratch { inc, prefix, moves, .. } = self;
        inc.resize(n, 0.0);
        prefix.resize(n, 0.0);
        moves.resize(n, 0);
        let (mut p, mut z) = (0.0, 0u32);
        (inc[0], prefix[0], moves[0]) = (0.0, 0.0, 0);
        let mut bad = refused(samples[0].v);
        let mut most = samples[0].v;
        let pairs = samples.windows(2).zip(inc[1..].iter_mut()).zip(prefix[1..].iter_mut()).zip(moves[1..].iter_mut());
        for (((w, inc), prefix), moves) in pairs {
            let (a, b) = (w[0].v, w[1].v);
            bad |= refused(b);
            most = if b > most { b } else { most };
            let d = if b < a { b } else { b - a };
            p += d;
            z += u32::from(d != 0.0);
            (*inc, *prefix, *moves) = (d, p, z);
        }
        // Every window's roundings are bounded with the series' length (`surely_unbound`).
        (self.most, self.slack) = (most, (n as f64 + 2.0) * (2.0 * EPS));
        !bad
    }

    /// Calls `unsure` with the number of each window of `table` (built for the
    /// timestamps of `samples`, just [`scan`](RateScratch::scan)ned) that moved and where
    /// [`surely_unbound`] does not hold. Windows are tested a block at a time first
    /// ([`surely_unbound_block`]), then one by one in the blocks where that fails.
    fn unsure_windows(&self, table: &RateWindows, samples: &[Sample], mut unsure: impl FnMut(usize, &RateWindow)) {
        let RateScratch { prefix, moves, most, slack, .. } = self;
        let blocks = table.windows().chunks(WindowBlock::LEN).zip(table.blocks());
        for (b, (block, summary)) in blocks.enumerate() {
            let (lo, last_lo, last) = (summary.lo as usize, summary.last_lo as usize, summary.last as usize);
            let least_first = samples[lo..=last_lo].iter().fold(f64::INFINITY, |m, s| if s.v < m { s.v } else { m });
            let bounds = Bounds { least_first, most: *most, prefix_lo: prefix[lo], prefix_last: prefix[last] };
            if surely_unbound_block(bounds, *slack, summary.ratio_min, summary.ratio_max) {
                continue;
            }
            for (k, w) in block.iter().enumerate() {
                let (lo, last) = (w.lo as usize, w.hi as usize - 1);
                // No increment: Prometheus' change is exactly 0 too (a constant, or one
                // drop to 0: `(0 - a) + a`), which nothing extrapolates.
                let moved = moves[last] != moves[lo];
                if moved && !surely_unbound(samples[lo].v, samples[last].v, prefix[lo], prefix[last], *slack, w.ratio) {
                    unsure(b * WindowBlock::LEN + k, w);
                }
            }
        }
    }
}

impl RateSums {
    /// Series added plainly before their column is folded into the compensated sum.
    pub const FOLD: usize = 32;

    /// An empty sum for series of `samples` samples.
    pub fn new(samples: usize) -> RateSums {
        RateSums {
            inc: vec![0.0; samples],
            pending: 0,
            sum: Vec::new(),
            c: Vec::new(),
            series: 0,
            taken_out: Vec::new(),
        }
    }

    /// Values this sum holds (for the sample limit): counted as if folded already.
    pub fn held(&self) -> usize {
        3 * self.inc.len() + 2 * self.taken_out.len()
    }

    /// Adds `samples` (with the timestamps of the series that built `table`) and returns
    /// true, handing `exact` the step and value of each window whose value is not surely
    /// its change times its factor; returns false and adds nothing when a value is
    /// negative or not finite.
    pub fn add(
        &mut self,
        table: &RateWindows,
        samples: &[Sample],
        scratch: &mut RateScratch,
        mut exact: impl FnMut(usize, f64),
    ) -> bool {
        if samples.len() != self.inc.len() {
            return false;
        }
        // A series whose value never changes (a limit, a clock, an error counter at 0:
        // about a quarter of a DCGM fleet's series) has no increment: each window's
        // change is 0, so is its value, and adding it would add zeros to the columns.
        // Only the count of series changes.
        if let Some(first) = samples.first() {
            if samples.iter().all(|s| s.v.to_bits() == first.v.to_bits()) {
                if refused(first.v) {
                    return false;
                }
                self.series += 1;
                return true;
            }
        }
        if !scratch.scan(samples) {
            return false;
        }
        scratch.unsure_windows(table, samples, |i, w| {
            // Taken out: the window's change, the sum of the increments added, in
            // Prometheus' grouping (a rounding apart from the increments' own sum).
            let (value, change) = table.unsigned_value(w, samples);
            exact(w.step as usize, value);
            self.taken_out.resize(table.windows().len(), (KahanSum::new(), 0));
            let out = &mut self.taken_out[i];
            out.0.add(change);
            out.1 += 1;
        });
        for (sum, &d) in self.inc.iter_mut().zip(scratch.inc.iter()) {
            *sum += d;
        }
        self.pending += 1;
        if self.pending == Self::FOLD {
            self.fold();
        }
        self.series += 1;
        true
    }

    /// Adds the plain column into the compensated sum and clears it.
    fn fold(&mut self) {
        if self.sum.is_empty() {
            (self.sum, self.c) = (vec![0.0; self.inc.len()], vec![0.0; self.inc.len()]);
        }
        for ((sum, c), inc) in self.sum.iter_mut().zip(self.c.iter_mut()).zip(self.inc.iter_mut()) {
            (*sum, *c) = kahan_inc_branch_free(*inc, *sum, *c);
            *inc = 0.0;
        }
        self.pending = 0;
    }

    /// Each window's step, the sum of the values of the series added that were not
    /// handed over there, and how many those are (windows where none is are left out).
    ///
    /// A window's change is a difference of two prefix sums of the columns, kept as
    /// double-length sums (Knuth's two-sum: the rounding error of each addition is
    /// carried in a second sum), so the difference is as exact as the columns even where
    /// the prefix is much larger than one window's change.
    pub fn values<'a>(&'a self, table: &'a RateWindows) -> impl Iterator<Item = (usize, f64, f64)> + 'a {
        // Knuth's two-sum: `high` the running sum, `low` its roundings.
        let two_sum = |(high, low): (f64, f64), x: f64| {
            let s = high + x;
            let b = s - high;
            (s, low + ((high - (s - b)) + (x - b)))
        };
        let folded = |j: usize| self.sum.get(j).map_or((0.0, 0.0), |&s| (s, self.c[j]));
        let mut acc = (0.0f64, 0.0f64);
        let prefix: Vec<(f64, f64)> = (self.inc.iter().enumerate())
            .map(|(j, &inc)| {
                let (sum, c) = folded(j);
                acc = two_sum(two_sum(acc, sum), inc + c);
                acc
            })
            .collect();
        table.windows().iter().enumerate().filter_map(move |(i, w)| {
            let (out, taken) = self.taken_out.get(i).copied().unwrap_or((KahanSum::new(), 0));
            let floats = self.series - taken as usize;
            if floats == 0 {
                return None;
            }
            let ((h1, l1), (h0, l0)) = (prefix[w.hi as usize - 1], prefix[w.lo as usize]);
            let change = (h1 - h0) + ((l1 - l0) - out.value());
            Some((w.step as usize, change * w.factor, floats as f64))
        })
    }
}

/// Whether a series with value `v` is left to the window-by-window way: its bits, read
/// as an integer, are those of +Inf or above, a NaN or any negative number (also -0,
/// harmlessly).
#[inline(always)]
fn refused(v: f64) -> bool {
    v.to_bits() >= f64::INFINITY.to_bits()
}

/// Whether a window's value is surely its change times its factor: whether Prometheus'
/// change (`last - first` plus the values lost at resets, added in order) leaves the
/// counter's zero point no nearer than the extrapolation towards the start.
///
/// The change is known here as a difference of prefix sums of increments (`prefix_last`
/// minus `prefix_lo`): its roundings (prefix sums and increments, none negative, fewer than
/// the series' length n) are each at most 2^-52 of `prefix_last`. Prometheus' own
/// roundings, fewer than n too, are each at most 2^-52 of `last_v + 2 first_v + change`
/// (its partial sums never exceed that: the values lost are at most the change plus the
/// first value). `slack`, `(n + 2) × 2^-51`, times the sum of both magnitudes bounds
/// both errors; the change plus that goes to [`zero_is_farther`], whose margin covers
/// its own arithmetic and Prometheus' division and product.
#[inline(always)]
fn surely_unbound(first_v: f64, last_v: f64, prefix_lo: f64, prefix_last: f64, slack: f64, ratio: f64) -> bool {
    let change = prefix_last - prefix_lo;
    zero_is_farther(first_v, change + slack * (prefix_last + last_v + 2.0 * first_v + change), ratio)
}

/// What bounds every window of a block: the least of their first values, the series'
/// greatest value, and the prefix sums at the first window's first sample and the last
/// window's last.
#[derive(Clone, Copy)]
struct Bounds {
    least_first: f64,
    most: f64,
    prefix_lo: f64,
    prefix_last: f64,
}

/// Whether [`surely_unbound`] holds for every window of a block whose ratios lie in
/// `ratio_min..=ratio_max`, without testing each: each of its operations (additions,
/// products, a subtraction) is monotone in every argument when none is negative, as
/// here, and so is rounding, so the same expression over bounds of the arguments bounds
/// each window's. Its change is at most `prefix_last - prefix_lo` (the prefix sums
/// never fall) and at least 0; its first and last values at most `most`, its first at
/// least `least_first`. So its `change × ratio` is at most the expression over the upper
/// bounds and `ratio_max`, which `least_first` must exceed by the margin, and at least
/// `slack × 2 least_first × ratio_min`, which must not be subnormal. A NaN ratio makes
/// `ratio_max` infinite, and the block fails.
#[inline(always)]
fn surely_unbound_block(b: Bounds, slack: f64, ratio_min: f64, ratio_max: f64) -> bool {
    let change = b.prefix_last - b.prefix_lo;
    let most_change = change + slack * (b.prefix_last + b.most + 2.0 * b.most + change);
    let least_change = slack * (2.0 * b.least_first);
    zero_is_farther(b.least_first, most_change, ratio_max) && least_change * ratio_min >= 1e-290
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::functions::range::rate::RateWindowCache;
    use proptest::prelude::*;

    /// The kept table of `rate` (`is_rate`) or `increase` over `samples`' timestamps:
    /// windows of `range` ms ending every `step` ms from the first timestamp on.
    fn kept_table(cache: &mut RateWindowCache, samples: &[Sample], range: i64, step: i64, is_rate: bool) {
        let (first, last) = (samples[0].t, samples[samples.len() - 1].t);
        let built = cache.windows_of(samples, (range, 0, None, is_rate), true, |w| -> Result<(), ()> {
            w.start(first - range, step, range, is_rate, 0);
            let (mut end, mut k) = (first, 0);
            while end <= last + range {
                let start = end - range;
                let (lo, hi) = (samples.partition_point(|p| p.t <= start), samples.partition_point(|p| p.t <= end));
                w.push(samples, lo, hi, k, end, || super::super::rate::counter_change(&samples[lo..hi]));
                (end, k) = (end + step, k + 1);
            }
            w.finish(samples);
            Ok(())
        });
        assert!(built.is_ok());
    }

    /// A series whose value never changes joins every window as a float of value 0: the
    /// sums are those of the other series alone, one more series counted. A constant
    /// that is negative or NaN is refused, as any such value is.
    #[test]
    fn a_constant_series_counts_and_adds_nothing() {
        let counter: Vec<Sample> =
            (0..80).map(|i| Sample { t: 15_000 * i + (i * 7) % 11, v: (i * i % 97) as f64 * 3.5 }).collect();
        let with = |v: f64| counter.iter().map(|s| Sample { t: s.t, v }).collect::<Vec<_>>();
        let mut cache = RateWindowCache::default();
        kept_table(&mut cache, &counter, 300_000, 15_000, true);
        let table = cache.table(0).expect("kept");
        let sums_of = |series: &[Vec<Sample>]| {
            let (mut sums, mut scratch) = (RateSums::new(counter.len()), RateScratch::default());
            let mut exact = Vec::new();
            let added: Vec<bool> =
                series.iter().map(|s| sums.add(table, s, &mut scratch, |k, v| exact.push((k, v)))).collect();
            (added, sums.values(table).collect::<Vec<_>>(), exact)
        };
        let (_, alone, exact_alone) = sums_of(std::slice::from_ref(&counter));
        let (added, both, exact_both) = sums_of(&[counter.clone(), with(42.0), with(0.0)]);
        assert_eq!(added, [true, true, true]);
        assert_eq!(exact_both, exact_alone);
        // Windows where the counter's value was handed over (`exact`) had no series left
        // in the sums; now they have the two constants, at 0 (the values here are exact
        // binary fractions, so the taken-out change cancels exactly).
        let alone: std::collections::HashMap<usize, (f64, f64)> = alone.iter().map(|&(k, v, n)| (k, (v, n))).collect();
        assert!(both.len() > alone.len());
        for (k, v, n) in both {
            match alone.get(&k) {
                Some(&(v1, n1)) => assert_eq!((v.to_bits(), n), (v1.to_bits(), n1 + 2.0)),
                None => assert_eq!((v, n), (0.0, 2.0)),
            }
        }
        for refused in [-1.0, f64::NAN, f64::INFINITY] {
            let (added, values, _) = sums_of(&[counter.clone(), with(refused)]);
            assert_eq!(added, [true, false]);
            assert_eq!(values.len(), alone.len());
            assert!(values.iter().all(|&(k, v, n)| alone.get(&k) == Some(&(v, n))));
        }
    }

    /// More series than [`RateSums::FOLD`] (three folds and a plain rest): each window's
    /// sum is that of every series added, counted once each; with one series' values
    /// repeated, `n` times its own.
    #[test]
    fn series_past_a_fold_are_each_counted_once() {
        let counter: Vec<Sample> =
            (0..80).map(|i| Sample { t: 15_000 * i + (i * 7) % 11, v: 1000.0 + (i * i % 97) as f64 * 3.5 }).collect();
        let mut cache = RateWindowCache::default();
        kept_table(&mut cache, &counter, 300_000, 15_000, true);
        let table = cache.table(0).expect("kept");
        let (mut one, mut many, mut scratch) =
            (RateSums::new(counter.len()), RateSums::new(counter.len()), RateScratch::default());
        assert!(one.add(table, &counter, &mut scratch, |_, _| {}));
        let n = 3 * RateSums::FOLD + 5;
        for _ in 0..n {
            assert!(many.add(table, &counter, &mut scratch, |_, _| {}));
        }
        let (one, many): (Vec<_>, Vec<_>) = (one.values(table).collect(), many.values(table).collect());
        assert_eq!(one.len(), many.len());
        for ((k1, v1, f1), (k, v, f)) in one.into_iter().zip(many) {
            assert_eq!((k, f), (k1, f1 * n as f64));
            assert!((v - v1 * n as f64).abs() <= 1e-15 * v.abs(), "window {k}: {v} against {n} × {v1}");
        }
    }

    proptest! {
        /// Testing windows a block at a time never passes over a window the one-by-one
        /// test finds unsure: counters from near zero (whose zero point binds), gauges
        /// that drop to zero and back, fractions and large values, on jittered
        /// timestamps with missed scrapes, at several steps and ranges.
        #[test]
        fn blocks_find_every_unsure_window(
            values in proptest::collection::vec(prop_oneof![
                4 => (0u32..60).prop_map(f64::from),
                2 => Just(0.0),
                2 => 0.0f64..3.0,
                1 => 1e9f64..1e12,
            ], 3..200),
            rising in any::<bool>(),
            jitter in 0i64..3_000,
            holes in 2usize..12,
            step in prop_oneof![Just(15_000i64), Just(30_000), Just(60_000), Just(7_000)],
            range in prop_oneof![Just(60_000i64), Just(300_000), Just(900_000)],
            is_rate in any::<bool>(),
        ) {
            let mut t = 0;
            let mut total = 0.0;
            let mut samples: Vec<Sample> = values.iter().enumerate().map(|(i, &v)| {
                t += 15_000 + (i as i64 * 7_919) % (jitter + 1);
                total += v;
                Sample { t, v: if rising { total } else { v } }
            }).collect();
            let mut i = 0;
            samples.retain(|_| { i += 1; i % holes != 0 || i < 3 });
            let mut cache = RateWindowCache::default();
            kept_table(&mut cache, &samples, range, step, is_rate);
            let table = cache.table(0).expect("kept");
            let mut scratch = RateScratch::default();
            prop_assert!(scratch.scan(&samples));
            let mut found = Vec::new();
            scratch.unsure_windows(table, &samples, |i, _| found.push(i));
            let RateScratch { prefix, moves, slack, .. } = &scratch;
            let one_by_one: Vec<usize> = table.windows().iter().enumerate().filter(|(_, w)| {
                let (lo, last) = (w.lo as usize, w.hi as usize - 1);
                moves[last] != moves[lo]
                    && !surely_unbound(samples[lo].v, samples[last].v, prefix[lo], prefix[last], *slack, w.ratio)
            }).map(|(i, _)| i).collect();
            prop_assert_eq!(found, one_by_one);
        }
    }
}

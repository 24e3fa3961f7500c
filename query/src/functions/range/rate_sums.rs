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
//! out cheaply: [`surely_unbound`]) are computed as the window-by-window way computes
//! them and handed to the caller, and their change (the same increments added in
//! Prometheus' grouping) is taken back out of the window's sum; any other series is
//! evaluated window by window. The answer is the same
//! sum added in another grouping: the increments are summed with Kahan's compensation,
//! so it differs from the per-series sum by rounding alone (measured on the benchmark's
//! DCGM fleet, `dcgm_all_rate`: 2.2e-16 relative; the split and differential tests allow
//! 1e-9 for sums).

use tessera_model::Sample;

use super::rate::{zero_is_farther, RateWindows};
use crate::functions::stats::{kahan_inc_branch_free, KahanSum};

/// The unit roundoff's double, 2^-52: a bound for one rounding of either sign, relative
/// to the value rounded.
const EPS: f64 = f64::EPSILON;

/// One group's sum of `rate`/`increase` over the series that share one table.
#[derive(Debug)]
pub struct RateSums {
    /// Per sample position: the compensated sum of the series' increments there.
    inc: Vec<f64>,
    c: Vec<f64>,
    series: usize,
    /// Per window of the table (once one is needed): the increments of the series whose
    /// value there was handed over, compensated, and how many they are.
    taken_out: Vec<(KahanSum, u32)>,
}

/// A series' increments, their prefix sums and how many of them are not zero, reused
/// from series to series.
#[derive(Debug, Default)]
pub struct RateScratch {
    inc: Vec<f64>,
    prefix: Vec<f64>,
    moves: Vec<u32>,
}

impl RateSums {
    /// An empty sum for series of `samples` samples.
    pub fn new(samples: usize) -> RateSums {
        RateSums { inc: vec![0.0; samples], c: vec![0.0; samples], series: 0, taken_out: Vec::new() }
    }

    /// Values this sum holds (for the sample limit).
    pub fn held(&self) -> usize {
        2 * self.inc.len() + 2 * self.taken_out.len()
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
        let n = samples.len();
        if n != self.inc.len() || n == 0 {
            return false;
        }
        let RateScratch { inc, prefix, moves } = scratch;
        inc.resize(n, 0.0);
        prefix.resize(n, 0.0);
        moves.resize(n, 0);
        let (mut p, mut z) = (0.0, 0u32);
        (inc[0], prefix[0], moves[0]) = (0.0, 0.0, 0);
        // A value is refused when its bits, read as an integer, are those of +Inf or above:
        // a NaN or any negative number (also -0, harmlessly).
        let refused = |v: f64| v.to_bits() >= f64::INFINITY.to_bits();
        let mut bad = refused(samples[0].v);
        let pairs = samples.windows(2).zip(inc[1..].iter_mut()).zip(prefix[1..].iter_mut()).zip(moves[1..].iter_mut());
        for (((w, inc), prefix), moves) in pairs {
            let (a, b) = (w[0].v, w[1].v);
            bad |= refused(b);
            let d = if b < a { b } else { b - a };
            p += d;
            z += u32::from(d != 0.0);
            (*inc, *prefix, *moves) = (d, p, z);
        }
        if bad {
            return false;
        }
        // Every window's roundings are bounded with the series' length (`surely_unbound`).
        let slack = (n as f64 + 2.0) * (2.0 * EPS);
        let windows = table.windows();
        for (i, w) in windows.iter().enumerate() {
            let (lo, last) = (w.lo as usize, w.hi as usize - 1);
            // No increment: Prometheus' change is exactly 0 too (a constant, or one drop
            // to 0: `(0 - a) + a`), which nothing extrapolates.
            let moved = moves[last] != moves[lo];
            if moved && !surely_unbound(samples[lo].v, samples[last].v, prefix[lo], prefix[last], slack, w.ratio) {
                // Taken out: the window's change, the sum of the increments added, in
                // Prometheus' grouping (a rounding apart from the increments' own sum).
                let (value, change) = table.unsigned_value(w, samples);
                exact(w.step as usize, value);
                self.taken_out.resize(windows.len(), (KahanSum::new(), 0));
                let out = &mut self.taken_out[i];
                out.0.add(change);
                out.1 += 1;
            }
        }
        for ((sum, c), &d) in self.inc.iter_mut().zip(self.c.iter_mut()).zip(inc.iter()) {
            (*sum, *c) = kahan_inc_branch_free(d, *sum, *c);
        }
        self.series += 1;
        true
    }

    /// Each window's step, the sum of the values of the series added that were not
    /// handed over there, and how many those are (windows where none is are left out).
    ///
    /// A window's change is a difference of two prefix sums of the columns, kept as
    /// double-length sums (Knuth's two-sum: the rounding error of each addition is
    /// carried in a second sum), so the difference is as exact as the columns even where
    /// the prefix is much larger than one window's change.
    pub fn values<'a>(&'a self, table: &'a RateWindows) -> impl Iterator<Item = (usize, f64, f64)> + 'a {
        let (mut high, mut low) = (0.0f64, 0.0f64);
        let prefix: Vec<(f64, f64)> = (self.inc.iter().zip(&self.c))
            .map(|(&inc, &c)| {
                let x = inc + c;
                let s = high + x;
                let b = s - high;
                low += (high - (s - b)) + (x - b);
                high = s;
                (high, low)
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

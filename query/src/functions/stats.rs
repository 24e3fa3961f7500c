//! Numeric building blocks shared by functions and aggregations: Kahan–Neumaier summation,
//! the `quantile` used by `quantile()` / `quantile_over_time()`, and the running
//! accumulators the aggregation operators use (`avg`, `stddev`/`stdvar`).
//!
//! Each one reproduces the exact sequence of floating point operations of its Prometheus
//! counterpart, because promqltest compares results with a tight tolerance and users
//! compare dashboards digit by digit.

use std::cmp::Ordering;

/// One step of Prometheus' `kahansum.Inc`: adds `inc` to `sum`, carrying the rounding error
/// in `c` (Neumaier's variant, which also works when `inc` is larger than `sum`).
///
/// Once the running sum becomes infinite the compensation is reset to 0, so that a later
/// `sum + c` does not turn `Inf` into `NaN` (`Inf + -Inf`).
#[inline]
pub fn kahan_inc(inc: f64, sum: f64, c: f64) -> (f64, f64) {
    let t = sum + inc;
    let c = if t.is_infinite() {
        0.0
    } else if sum.abs() >= inc.abs() {
        c + ((sum - t) + inc)
    } else {
        c + ((inc - t) + sum)
    };
    (t, c)
}

/// [`kahan_inc`] with both branches computed and one chosen, for a loop the compiler
/// packs (`sum`'s columns in the streaming fold); bit for bit the same.
#[inline(always)]
pub fn kahan_inc_branch_free(inc: f64, sum: f64, c: f64) -> (f64, f64) {
    let t = sum + inc;
    let d = if sum.abs() >= inc.abs() { (sum - t) + inc } else { (inc - t) + sum };
    (t, if t.is_infinite() { 0.0 } else { c + d })
}

/// A compensated running sum, as used by `sum`, `sum_over_time`, `avg` and the regression
/// in `deriv`/`predict_linear`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct KahanSum {
    sum: f64,
    c: f64,
}

impl KahanSum {
    pub fn new() -> Self {
        KahanSum { sum: 0.0, c: 0.0 }
    }

    /// A sum that starts at `first` exactly, as Prometheus seeds a `sum` group with its
    /// first value. Its state differs from adding `first` to an empty sum only in the
    /// sign of a -0 and in a NaN's compensation; the value (`sum + c`) is the same, +0
    /// for `sum(-0)` as in Prometheus, which adds the compensation at the end.
    pub fn seeded(first: f64) -> Self {
        KahanSum { sum: first, c: 0.0 }
    }

    #[inline]
    pub fn add(&mut self, v: f64) {
        let (s, c) = kahan_inc(v, self.sum, self.c);
        self.sum = s;
        self.c = c;
    }

    /// The compensated sum. An infinite running sum is returned as is (its compensation is
    /// meaningless), exactly as `sum_over_time` does.
    #[inline]
    pub fn value(&self) -> f64 {
        if self.sum.is_infinite() {
            self.sum
        } else {
            self.sum + self.c
        }
    }

    /// The uncompensated running sum (Prometheus' `floatValue` before the final `+ c`).
    pub fn raw_sum(&self) -> f64 {
        self.sum
    }

    /// The running compensation term.
    pub fn compensation(&self) -> f64 {
        self.c
    }

    /// A sum resumed from its parts ([`KahanSum::raw_sum`], [`KahanSum::compensation`]),
    /// e.g. a shard's partial sum.
    pub fn from_parts(sum: f64, c: f64) -> Self {
        KahanSum { sum, c }
    }

    /// Adds another partial sum: its running sum as one Kahan step, then its
    /// compensation. The result equals summing both inputs in one sequence within float
    /// rounding (the compensations keep it at the last bits); an infinite running sum
    /// drops the compensation as [`kahan_inc`] does.
    pub fn merge(&mut self, other: &KahanSum) {
        self.add(other.sum);
        if !self.sum.is_infinite() {
            self.c += other.c;
        }
    }
}

/// The order Prometheus' `vectorByValueHeap` sorts by: NaN first, then ascending. (Go's
/// comparator is "NaN is less than everything"; this is the total order with that intent.)
#[inline]
pub fn nan_first_cmp(a: &f64, b: &f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => a.partial_cmp(b).unwrap_or(Ordering::Equal),
    }
}

/// Prometheus' `quantile(q, values)`: the φ-quantile by linear interpolation between the
/// two closest ranks (`rank = q·(n-1)`).
///
/// `values` is reordered in place: the two ranks are selected (NaN first, as
/// Prometheus sorts), not the whole slice sorted, which is linear instead of n log n
/// and was a tenth of `quantile by (modelName) (0.99, ...)` over 16,000 GPUs. Special
/// cases, all as Prometheus: no values or `q` NaN → NaN; `q < 0` → -Inf; `q > 1` → +Inf.
pub fn quantile(q: f64, values: &mut [f64]) -> f64 {
    if values.is_empty() || q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    let n = values.len() as f64;
    let rank = q * (n - 1.0);
    let lower = rank.floor().max(0.0);
    let upper = (lower + 1.0).min(n - 1.0);
    let weight = rank - rank.floor();
    let (_, &mut at_lower, above) = values.select_nth_unstable_by(lower as usize, nan_first_cmp);
    // The next rank is the least of the values ordered after the lower one.
    let at_upper =
        if upper > lower { above.iter().copied().min_by(nan_first_cmp).unwrap_or(at_lower) } else { at_lower };
    at_lower * (1.0 - weight) + at_upper * weight
}

/// Running state of the `avg` aggregation operator, as Prometheus computes it: a Kahan sum
/// divided by the count at the end, switching to an incremental (Kahan-compensated) mean
/// only once the sum would overflow. This keeps `avg` exact for the common case and still
/// finite for `avg(1e308, 1e308)`.
#[derive(Debug, Clone, Copy)]
pub struct AvgAccumulator {
    sum: f64,
    c: f64,
    mean: f64,
    count: f64,
    incremental: bool,
}

impl AvgAccumulator {
    /// Starts a group with its first value (Prometheus seeds the group with it).
    pub fn new(first: f64) -> Self {
        AvgAccumulator { sum: first, c: 0.0, mean: first, count: 1.0, incremental: false }
    }

    pub fn add(&mut self, f: f64) {
        self.count += 1.0;
        if !self.incremental {
            let (s, c) = kahan_inc(f, self.sum, self.c);
            if !s.is_infinite() {
                self.sum = s;
                self.c = c;
                return;
            }
            // The sum would overflow: continue with the mean of what we have so far.
            self.incremental = true;
            self.mean = self.sum / (self.count - 1.0);
            self.c /= self.count - 1.0;
        }
        // mean_n = mean_{n-1}·(n-1)/n + f/n, with the compensation scaled alike.
        let q = (self.count - 1.0) / self.count;
        (self.mean, self.c) = kahan_inc(f / self.count, q * self.mean, q * self.c);
    }

    /// The state as plain numbers `(sum, c, mean, count, incremental)`, for shipping a
    /// shard's partial average.
    pub fn parts(&self) -> (f64, f64, f64, f64, bool) {
        (self.sum, self.c, self.mean, self.count, self.incremental)
    }

    /// A state rebuilt from [`AvgAccumulator::parts`].
    pub fn from_parts(sum: f64, c: f64, mean: f64, count: f64, incremental: bool) -> Self {
        AvgAccumulator { sum, c, mean, count, incremental }
    }

    /// This state's mean and its compensation, whichever way it is kept.
    fn mean_parts(&self) -> (f64, f64) {
        if self.incremental {
            (self.mean, self.c)
        } else {
            (self.sum / self.count, self.c / self.count)
        }
    }

    /// Adds another partial average (e.g. another shard's). While the combined sum stays
    /// finite both keep summing (Kahan); once it would overflow, or when either side
    /// already switched to the incremental mean, the result is the count-weighted mean
    /// of both, compensated. Equal to one sequential accumulation within float rounding.
    pub fn merge(&mut self, o: &AvgAccumulator) {
        let n = self.count + o.count;
        if !self.incremental && !o.incremental {
            let (s, c) = kahan_inc(o.sum, self.sum, self.c);
            if !s.is_infinite() {
                self.sum = s;
                self.c = c + o.c;
                self.count = n;
                return;
            }
        }
        let (m1, c1) = self.mean_parts();
        let (m2, c2) = o.mean_parts();
        let (w1, w2) = (self.count / n, o.count / n);
        let (mean, c) = kahan_inc(m2 * w2, m1 * w1, c1 * w1);
        self.mean = mean;
        self.c = if mean.is_infinite() { 0.0 } else { c + c2 * w2 };
        self.count = n;
        self.incremental = true;
    }

    pub fn value(&self) -> f64 {
        if self.incremental {
            self.mean + self.c
        } else if self.sum.is_infinite() {
            // Only a first value of ±Inf gets here; its compensation means nothing.
            self.sum / self.count
        } else {
            (self.sum + self.c) / self.count
        }
    }
}

/// Running state of the `stddev`/`stdvar` aggregation operators: Welford's algorithm,
/// exactly as Prometheus' `aggregation()` runs it (seeded with the first value; a first
/// value that is NaN or ±Inf makes the result NaN).
///
/// `stddev_over_time`/`stdvar_over_time` use a Kahan-compensated variant instead; see
/// [`variance_over_time`].
#[derive(Debug, Clone, Copy)]
pub struct StdvarAccumulator {
    mean: f64,
    m2: f64,
    count: f64,
}

impl StdvarAccumulator {
    pub fn new(first: f64) -> Self {
        let m2 = if first.is_nan() || first.is_infinite() { f64::NAN } else { 0.0 };
        StdvarAccumulator { mean: first, m2, count: 1.0 }
    }

    pub fn add(&mut self, f: f64) {
        self.count += 1.0;
        let delta = f - self.mean;
        self.mean += delta / self.count;
        self.m2 += delta * (f - self.mean);
    }

    /// Population variance (`stdvar`).
    pub fn stdvar(&self) -> f64 {
        self.m2 / self.count
    }

    /// Population standard deviation (`stddev`).
    pub fn stddev(&self) -> f64 {
        (self.m2 / self.count).sqrt()
    }
}

/// Population variance of `values` as `stdvar_over_time` computes it: Welford's algorithm
/// with both the mean and the sum of squares Kahan-compensated. NaN for no values.
pub fn variance_over_time(values: impl IntoIterator<Item = f64>) -> f64 {
    let (mut count, mut mean, mut c_mean, mut aux, mut c_aux) = (0.0f64, 0.0, 0.0, 0.0, 0.0);
    for f in values {
        count += 1.0;
        let delta = f - (mean + c_mean);
        (mean, c_mean) = kahan_inc(delta / count, mean, c_mean);
        (aux, c_aux) = kahan_inc(delta * (f - (mean + c_mean)), aux, c_aux);
    }
    (aux + c_aux) / count
}

#[cfg(test)]
mod tests;

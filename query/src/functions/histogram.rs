//! Estimates from classic histograms: `histogram_quantile` and `histogram_fraction` over
//! one histogram's `le` buckets, given as `(upper bound, cumulative count)` pairs in any
//! order. Grouping bucket series into histograms (all labels but `le`) and parsing `le`
//! values is the engine's job.

use std::cmp::Ordering;

/// Relative difference between neighbouring cumulative counts below which
/// `histogram_quantile` treats them as equal: floating point noise from `sum(rate(..))`
/// across shards, not real observations (a trillionth, as in Prometheus).
const SMALL_DELTA_TOLERANCE: f64 = 1e-12;

/// The outcome of [`bucket_quantile_detailed`], with what was repaired along the way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantileEstimate {
    pub value: f64,
    /// Some bucket count was lower than a lower bucket's and was raised to it. Prometheus
    /// reports this as the info annotation "input to histogram_quantile needed to be fixed
    /// for monotonicity".
    pub forced_monotonic: bool,
    /// Tiny (≤ 1e-12 relative) differences were evened out; silent in Prometheus.
    pub fixed_precision: bool,
    /// Lowest and highest upper bound whose count was raised, and the largest raise; only
    /// meaningful when `forced_monotonic` (Prometheus puts them in the annotation text).
    pub min_bucket: f64,
    pub max_bucket: f64,
    pub max_diff: f64,
}

/// Prometheus' `BucketQuantile`: the φ-quantile `q` of a classic histogram, returning
/// `(estimate, forced_monotonic)`. See [`bucket_quantile_detailed`].
pub fn bucket_quantile(q: f64, buckets: &mut Vec<(f64, f64)>) -> (f64, bool) {
    let e = bucket_quantile_detailed(q, buckets);
    (e.value, e.forced_monotonic)
}

/// The φ-quantile of a classic histogram, exactly as Prometheus computes it:
///
/// - `q` NaN → NaN, `q < 0` → -Inf, `q > 1` → +Inf (before looking at the buckets);
/// - buckets are sorted by upper bound and buckets with equal bounds merged (their counts
///   added), which is what two series differing only in `le="1"` vs `le="1.0"` produce;
/// - the highest bucket must be `+Inf`, there must be at least two buckets and at least
///   one observation; otherwise NaN;
/// - tiny relative differences are evened out and decreasing counts raised to the previous
///   count (monotonicity forced);
/// - the quantile is interpolated linearly inside its bucket; the lowest bucket starts at
///   0 if its upper bound is positive (else its upper bound is the answer), and a quantile
///   in the `+Inf` bucket answers with the second-highest upper bound.
///
/// `buckets` is left sorted and coalesced.
pub fn bucket_quantile_detailed(q: f64, buckets: &mut Vec<(f64, f64)>) -> QuantileEstimate {
    let mut out = QuantileEstimate {
        value: f64::NAN,
        forced_monotonic: false,
        fixed_precision: false,
        min_bucket: 0.0,
        max_bucket: 0.0,
        max_diff: 0.0,
    };
    if q.is_nan() {
        return out;
    }
    if q < 0.0 {
        out.value = f64::NEG_INFINITY;
        return out;
    }
    if q > 1.0 {
        out.value = f64::INFINITY;
        return out;
    }
    if !sort_and_check_inf(buckets) {
        return out;
    }
    coalesce(buckets);
    let fix = ensure_monotonic(buckets);
    if buckets.len() < 2 {
        return out;
    }
    let observations = buckets[buckets.len() - 1].1;
    if observations == 0.0 {
        return out;
    }
    out.forced_monotonic = fix.forced_monotonic;
    out.fixed_precision = fix.fixed_precision;
    out.min_bucket = fix.min_bucket;
    out.max_bucket = fix.max_bucket;
    out.max_diff = fix.max_diff;

    let mut rank = q * observations;
    // The first bucket (the +Inf one excluded) whose cumulative count reaches the rank;
    // counts are monotonic now, so a binary search is valid.
    let b = buckets[..buckets.len() - 1].partition_point(|&(_, count)| count < rank);
    if b == buckets.len() - 1 {
        out.value = buckets[buckets.len() - 2].0;
        return out;
    }
    if b == 0 && buckets[0].0 <= 0.0 {
        out.value = buckets[0].0;
        return out;
    }
    let bucket_end = buckets[b].0;
    let mut count = buckets[b].1;
    let mut bucket_start = 0.0;
    if b > 0 {
        bucket_start = buckets[b - 1].0;
        count -= buckets[b - 1].1;
        rank -= buckets[b - 1].1;
    }
    out.value = bucket_start + (bucket_end - bucket_start) * (rank / count);
    out
}

/// Prometheus' `BucketFraction`: the estimated fraction of observations in
/// `(lower, upper]` for a classic histogram (`histogram_fraction`), interpolating linearly
/// inside buckets. The lowest bucket is taken to start at 0 if its upper bound is
/// positive, and at -Inf otherwise (then nothing is interpolated inside it).
///
/// NaN if there are no buckets, the highest bucket is not `+Inf`, there are no
/// observations, or either bound is NaN; 0 if `lower >= upper`. Unlike
/// `histogram_quantile`, no monotonicity repair happens here. `buckets` is left sorted
/// and coalesced.
pub fn bucket_fraction(lower: f64, upper: f64, buckets: &mut Vec<(f64, f64)>) -> f64 {
    if !sort_and_check_inf(buckets) {
        return f64::NAN;
    }
    coalesce(buckets);
    let count = buckets[buckets.len() - 1].1;
    if count == 0.0 || lower.is_nan() || upper.is_nan() {
        return f64::NAN;
    }
    if lower >= upper {
        return 0.0;
    }

    let (mut rank, mut lower_rank, mut upper_rank) = (0.0f64, 0.0f64, 0.0f64);
    let (mut lower_set, mut upper_set) = (false, false);
    let mut lower_bound = if buckets[0].0 <= 0.0 { f64::NEG_INFINITY } else { 0.0 };
    for (i, &(upper_bound, cum)) in buckets.iter().enumerate() {
        if i > 0 {
            lower_bound = buckets[i - 1].0;
        }
        // Counts are cumulative, so this bucket alone holds `cum - rank` observations.
        let interpolate = |v: f64| -> f64 {
            if lower_bound == f64::NEG_INFINITY {
                return cum;
            }
            rank + (cum - rank) * (v - lower_bound) / (upper_bound - lower_bound)
        };
        if !lower_set && lower_bound >= lower {
            lower_rank = rank;
            lower_set = true;
        }
        if !upper_set && lower_bound >= upper {
            upper_rank = rank;
            upper_set = true;
        }
        if lower_set && upper_set {
            break;
        }
        if !lower_set && lower_bound < lower && upper_bound > lower {
            lower_rank = interpolate(lower);
            lower_set = true;
        }
        if !upper_set && lower_bound < upper && upper_bound > upper {
            upper_rank = interpolate(upper);
            upper_set = true;
        }
        if lower_set && upper_set {
            break;
        }
        rank = cum;
    }
    if !lower_set || lower_rank > count {
        lower_rank = count;
    }
    if !upper_set || upper_rank > count {
        upper_rank = count;
    }
    (upper_rank - lower_rank) / count
}

/// Sorts by upper bound and reports whether the highest is `+Inf` (false for no buckets).
fn sort_and_check_inf(buckets: &mut [(f64, f64)]) -> bool {
    // Bounds come from parsed `le` values; NaN is not expected and sorts as equal.
    buckets.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(Ordering::Equal));
    matches!(buckets.last(), Some(&(ub, _)) if ub == f64::INFINITY)
}

/// Merges neighbouring buckets with the same upper bound by adding their counts.
fn coalesce(buckets: &mut Vec<(f64, f64)>) {
    buckets.dedup_by(|later, kept| {
        if later.0 == kept.0 {
            kept.1 += later.1;
            true
        } else {
            false
        }
    });
}

struct MonotonicityFix {
    forced_monotonic: bool,
    fixed_precision: bool,
    min_bucket: f64,
    max_bucket: f64,
    max_diff: f64,
}

/// Prometheus' `ensureMonotonicAndIgnoreSmallDeltas`. `prev` is deliberately not moved by
/// either correction: the envelope is measured against the last accepted count.
fn ensure_monotonic(buckets: &mut [(f64, f64)]) -> MonotonicityFix {
    let mut fix = MonotonicityFix {
        forced_monotonic: false,
        fixed_precision: false,
        min_bucket: f64::INFINITY,
        max_bucket: f64::NEG_INFINITY,
        max_diff: 0.0,
    };
    let Some(&(_, first)) = buckets.first() else {
        return fix;
    };
    let mut prev = first;
    for b in buckets.iter_mut().skip(1) {
        let curr = b.1;
        if curr == prev {
            continue;
        }
        if almost_equal(prev, curr, SMALL_DELTA_TOLERANCE) {
            b.1 = prev;
            fix.fixed_precision = true;
            continue;
        }
        if curr < prev {
            b.1 = prev;
            fix.forced_monotonic = true;
            fix.min_bucket = fix.min_bucket.min(b.0);
            fix.max_bucket = fix.max_bucket.max(b.0);
            fix.max_diff = fix.max_diff.max(prev - curr);
            continue;
        }
        prev = curr;
    }
    fix
}

/// Prometheus' `almost.Equal`: relative comparison, with an absolute fallback near zero.
pub fn almost_equal(a: f64, b: f64, epsilon: f64) -> bool {
    if a.is_nan() && b.is_nan() {
        return true;
    }
    if a == b {
        return true;
    }
    let abs_sum = a.abs() + b.abs();
    let diff = (a - b).abs();
    if a == 0.0 || b == 0.0 || abs_sum < f64::MIN_POSITIVE {
        return diff < epsilon * f64::MIN_POSITIVE;
    }
    diff / abs_sum.min(f64::MAX) < epsilon
}

#[cfg(test)]
mod tests;

//! Trend estimators for gauges: least-squares `deriv` and `predict_linear`, and
//! `double_exponential_smoothing` (Holt's linear method; `holt_winters` in Prometheus 2).

use crate::functions::stats::kahan_inc;
use crate::QueryError;
use tessera_model::Sample;

/// Simple linear regression of value over time, with time measured in seconds relative to
/// `intercept_ms`. Returns `(slope per second, value at intercept_ms)`.
///
/// Sums are Kahan-compensated, and x is taken relative to a nearby timestamp so that
/// `x²` keeps its precision (prometheus/prometheus#2674). A constant series has slope 0
/// exactly, except an infinite constant, whose regression is undefined (NaN, NaN).
pub fn linear_regression(samples: &[Sample], intercept_ms: i64) -> (f64, f64) {
    let init_y = samples.first().map(|s| s.v).unwrap_or(f64::NAN);
    let mut const_y = true;
    let (mut n, mut sum_x, mut c_x, mut sum_y, mut c_y) = (0.0f64, 0.0, 0.0, 0.0, 0.0);
    let (mut sum_xy, mut c_xy, mut sum_x2, mut c_x2) = (0.0f64, 0.0, 0.0, 0.0);
    for (i, s) in samples.iter().enumerate() {
        if const_y && i > 0 && s.v != init_y {
            const_y = false;
        }
        n += 1.0;
        let x = (s.t - intercept_ms) as f64 / 1e3;
        (sum_x, c_x) = kahan_inc(x, sum_x, c_x);
        (sum_y, c_y) = kahan_inc(s.v, sum_y, c_y);
        (sum_xy, c_xy) = kahan_inc(x * s.v, sum_xy, c_xy);
        (sum_x2, c_x2) = kahan_inc(x * x, sum_x2, c_x2);
    }
    if const_y {
        if init_y.is_infinite() {
            return (f64::NAN, f64::NAN);
        }
        return (0.0, init_y);
    }
    sum_x += c_x;
    sum_y += c_y;
    sum_xy += c_xy;
    sum_x2 += c_x2;

    let cov_xy = sum_xy - sum_x * sum_y / n;
    let var_x = sum_x2 - sum_x * sum_x / n;
    let slope = cov_xy / var_x;
    let intercept = sum_y / n - slope * sum_x / n;
    (slope, intercept)
}

/// `deriv`: the per-second slope of the least-squares line; needs two samples.
pub fn deriv(samples: &[Sample]) -> Option<f64> {
    if samples.len() < 2 {
        return None;
    }
    // Any timestamp near the data keeps the arithmetic precise; Prometheus uses the first.
    Some(linear_regression(samples, samples[0].t).0)
}

/// `predict_linear`: the least-squares line anchored at the evaluation time `at_ms`,
/// evaluated `duration_s` seconds later; needs two samples.
pub fn predict_linear(samples: &[Sample], at_ms: i64, duration_s: f64) -> Option<f64> {
    if samples.len() < 2 {
        return None;
    }
    let (slope, intercept) = linear_regression(samples, at_ms);
    Some(slope * duration_s + intercept)
}

/// `double_exponential_smoothing(v, sf, tf)`: the smoothed value at the last sample.
///
/// Both factors must lie strictly between 0 and 1; Prometheus aborts the query otherwise
/// (an `execution` error, HTTP 422), and it checks before looking at the data. A NaN
/// factor passes that check, as in Prometheus, and yields NaN. Fewer than two samples
/// give no result.
pub fn double_exponential_smoothing(samples: &[Sample], sf: f64, tf: f64) -> Result<Option<f64>, QueryError> {
    if sf <= 0.0 || sf >= 1.0 {
        return Err(QueryError::execution(format!("invalid smoothing factor. Expected: 0 < sf < 1, got: {sf:.6}")));
    }
    if tf <= 0.0 || tf >= 1.0 {
        return Err(QueryError::execution(format!("invalid trend factor. Expected: 0 < tf < 1, got: {tf:.6}")));
    }
    if samples.len() < 2 {
        return Ok(None);
    }
    // s1 is the latest smoothed value, s0 the one before; b the trend estimate.
    let mut s0 = 0.0;
    let mut s1 = samples[0].v;
    let mut b = samples[1].v - samples[0].v;
    for (i, s) in samples.iter().enumerate().skip(1) {
        let x = sf * s.v;
        // The trend at the first step is the initial difference itself.
        if i > 1 {
            b = tf * (s1 - s0) + (1.0 - tf) * b;
        }
        let y = (1.0 - sf) * (s1 + b);
        s0 = s1;
        s1 = x + y;
    }
    Ok(Some(s1))
}

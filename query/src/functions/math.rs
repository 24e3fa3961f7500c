//! Per-value function kernels: math, trigonometry, rounding, clamping and the calendar
//! functions. Each maps one float sample value (plus scalar arguments) to one value.

use chrono::{DateTime, Datelike, NaiveDate, Timelike, Utc};

/// Every name [`eval_scalar_fn`] understands.
pub const SCALAR_FUNCTIONS: &[&str] = &[
    "abs",
    "ceil",
    "floor",
    "exp",
    "sqrt",
    "ln",
    "log2",
    "log10",
    "sgn",
    "round",
    "clamp",
    "clamp_min",
    "clamp_max",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "deg",
    "rad",
    "day_of_month",
    "day_of_week",
    "day_of_year",
    "days_in_month",
    "hour",
    "minute",
    "month",
    "year",
];

/// True if `name` is a per-value function [`eval_scalar_fn`] implements. Use this to
/// reject unknown names, because `eval_scalar_fn` also returns `None` for a `clamp` whose
/// bounds leave nothing to return.
pub fn is_scalar_fn(name: &str) -> bool {
    SCALAR_FUNCTIONS.contains(&name)
}

/// Applies per-value function `name` to sample value `v`.
///
/// `args` are the scalar arguments after the vector: `round` takes `[to_nearest]`
/// (default 1), `clamp` `[min, max]`, `clamp_min` `[min]`, `clamp_max` `[max]`. The time
/// functions read `v` as Unix seconds (UTC); when called without arguments in PromQL
/// (`hour()`), the engine passes the evaluation time in seconds as `v`.
///
/// `None` means "no output element": either `name` is unknown (check with
/// [`is_scalar_fn`]), a required argument is missing, or `clamp` was called with
/// `min > max`, for which Prometheus returns an empty vector.
pub fn eval_scalar_fn(name: &str, v: f64, args: &[f64]) -> Option<f64> {
    let out = match name {
        "abs" => v.abs(),
        "ceil" => v.ceil(),
        "floor" => v.floor(),
        "exp" => v.exp(),
        "sqrt" => v.sqrt(),
        "ln" => v.ln(),
        "log2" => v.log2(),
        "log10" => v.log10(),
        "sgn" => sgn(v),
        "round" => round(v, args.first().copied().unwrap_or(1.0)),
        "clamp" => return clamp(v, *args.first()?, *args.get(1)?),
        "clamp_min" => return clamp(v, *args.first()?, f64::INFINITY),
        "clamp_max" => return clamp(v, f64::NEG_INFINITY, *args.first()?),
        "sin" => v.sin(),
        "cos" => v.cos(),
        "tan" => v.tan(),
        "asin" => v.asin(),
        "acos" => v.acos(),
        "atan" => v.atan(),
        "sinh" => v.sinh(),
        "cosh" => v.cosh(),
        "tanh" => v.tanh(),
        "asinh" => v.asinh(),
        "acosh" => v.acosh(),
        "atanh" => v.atanh(),
        // Same operation order as Prometheus, so results agree to the last bit.
        "deg" => v * 180.0 / std::f64::consts::PI,
        "rad" => v * std::f64::consts::PI / 180.0,
        "day_of_month" => calendar(v, |t| t.day() as f64),
        "day_of_week" => calendar(v, |t| t.weekday().num_days_from_sunday() as f64),
        "day_of_year" => calendar(v, |t| t.ordinal() as f64),
        "days_in_month" => calendar(v, |t| days_in_month(t.year(), t.month()) as f64),
        "hour" => calendar(v, |t| t.hour() as f64),
        "minute" => calendar(v, |t| t.minute() as f64),
        "month" => calendar(v, |t| t.month() as f64),
        "year" => calendar(v, |t| t.year() as f64),
        _ => return None,
    };
    Some(out)
}

/// `sgn`: -1, 1, or the value itself for ±0 and NaN.
fn sgn(v: f64) -> f64 {
    if v < 0.0 {
        -1.0
    } else if v > 0.0 {
        1.0
    } else {
        v
    }
}

/// `round(v, to_nearest)`: ties round up (towards +Inf). Prometheus multiplies by the
/// inverse because it loses less precision for fractional `to_nearest` like 0.1.
fn round(v: f64, to_nearest: f64) -> f64 {
    let inverse = 1.0 / to_nearest;
    (v * inverse + 0.5).floor() / inverse
}

/// `clamp`: `None` when `max < min` (Prometheus drops every element); a NaN bound makes
/// the result NaN, which Go's `math.Max`/`math.Min` do and Rust's `f64::max`/`min` do not.
fn clamp(v: f64, min: f64, max: f64) -> Option<f64> {
    if max < min {
        return None;
    }
    Some(go_max(min, go_min(max, v)))
}

/// Go's `math.Max`: NaN wins, +Inf beats everything else. Also what `max_of(a, b)` is.
pub fn go_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == 0.0 && b == 0.0 {
        // Go returns +0 for max(-0, +0).
        if a.is_sign_negative() {
            b
        } else {
            a
        }
    } else if a > b {
        a
    } else {
        b
    }
}

/// Go's `math.Min`: NaN wins, -Inf beats everything else. Also what `min_of(a, b)` is.
pub fn go_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == 0.0 && b == 0.0 {
        // Go returns -0 for min(-0, +0).
        if a.is_sign_negative() {
            a
        } else {
            b
        }
    } else if a < b {
        a
    } else {
        b
    }
}

/// Converts Unix seconds to a UTC date-time the way Prometheus does (`time.Unix(int64(v),
/// 0)`: truncation towards zero) and applies `f`. A value with no calendar date (NaN,
/// ±Inf, or beyond chrono's ±262,000 years) gives NaN; Go would print some date from its
/// integer overflow there, which is meaningless either way.
fn calendar(v: f64, f: impl Fn(&DateTime<Utc>) -> f64) -> f64 {
    if !v.is_finite() {
        return f64::NAN;
    }
    match DateTime::<Utc>::from_timestamp(v.trunc() as i64, 0) {
        Some(t) => f(&t),
        None => f64::NAN,
    }
}

/// Days in `month` (1-12) of `year`, proleptic Gregorian.
fn days_in_month(year: i32, month: u32) -> u32 {
    let (next_year, next_month) = if month == 12 { (year + 1, 1) } else { (year, month + 1) };
    match (NaiveDate::from_ymd_opt(year, month, 1), NaiveDate::from_ymd_opt(next_year, next_month, 1)) {
        (Some(a), Some(b)) => (b - a).num_days() as u32,
        // Only reachable at chrono's last representable month, which is December.
        _ => 31,
    }
}

#[cfg(test)]
mod tests;

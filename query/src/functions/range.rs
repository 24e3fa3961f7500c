//! Range-vector function kernels: everything of the form `f(v[range], scalars...)` that
//! turns the float samples of one series in one window into at most one value.
//!
//! The engine owns selection: it hands over the float samples of the left-open window
//! `(window_start_ms, window_end_ms]` in time order with stale markers removed, and never
//! calls with an empty window (Prometheus does not call its functions for series with no
//! sample in the window either). A result of `Ok(None)` means "this series contributes no
//! element at this step" (e.g. `rate` over a single sample).
//!
//! The kernels are grouped by what they compute: [`rate`] (the extrapolating
//! `rate`/`increase`/`delta` and the instant `irate`/`idelta`), [`over_time`] (the
//! `*_over_time` aggregations plus `changes`/`resets`) and [`trend`] (least-squares
//! `deriv`/`predict_linear` and `double_exponential_smoothing`).

pub mod over_time;
pub mod rate;
pub mod trend;

use crate::model::Sample;
use crate::QueryError;

/// Every name [`eval_range`] understands, so the engine can validate a call before it
/// selects any data.
pub const RANGE_FUNCTIONS: &[&str] = &[
    "rate",
    "increase",
    "delta",
    "irate",
    "idelta",
    "deriv",
    "predict_linear",
    "double_exponential_smoothing",
    "changes",
    "resets",
    "avg_over_time",
    "sum_over_time",
    "min_over_time",
    "max_over_time",
    "count_over_time",
    "stddev_over_time",
    "stdvar_over_time",
    "quantile_over_time",
    "mad_over_time",
    "last_over_time",
    "first_over_time",
    "present_over_time",
    "absent_over_time",
    "ts_of_min_over_time",
    "ts_of_max_over_time",
    "ts_of_last_over_time",
    "ts_of_first_over_time",
];

/// True if `name` is a range-vector function [`eval_range`] implements.
pub fn is_range_fn(name: &str) -> bool {
    RANGE_FUNCTIONS.contains(&name)
}

/// Evaluates range function `name` over one series' samples in the window
/// `(window_start_ms, window_end_ms]`.
///
/// `args` are the function's scalar arguments in call order, already evaluated:
/// - `quantile_over_time`: `args[0]` = φ;
/// - `predict_linear`: `args[0]` = duration in seconds, and optionally `args[1]` = the
///   evaluation timestamp in **milliseconds**. Prometheus anchors the regression at the
///   evaluation time, which differs from the window end under `offset` or `@`
///   (`predict_linear(x[55m] @ 3000, 3600)` evaluated at 10m predicts for 600s + 3600s);
///   without `args[1]` the window end is used;
/// - `double_exponential_smoothing`: `args[0]` = smoothing factor, `args[1]` = trend factor.
///
/// `absent_over_time` returns 1 for a non-empty window; building its output labels is the
/// engine's job.
///
/// Errors: an unknown name is `bad_data`; missing scalar arguments are `bad_data`;
/// out-of-range smoothing or trend factors are `execution` errors, as Prometheus reports
/// them (HTTP 422).
pub fn eval_range(
    name: &str,
    samples: &[Sample],
    window_start_ms: i64,
    window_end_ms: i64,
    args: &[f64],
) -> Result<Option<f64>, QueryError> {
    let arg = |i: usize| -> Result<f64, QueryError> {
        args.get(i)
            .copied()
            .ok_or_else(|| QueryError::bad_data(format!("{name}(): missing scalar argument {}", i + 1)))
    };
    // Argument validation happens before the empty check only for errors Prometheus raises
    // independent of the data; with no samples Prometheus never calls the function at all.
    let out = match name {
        "rate" => rate::extrapolated_rate(samples, window_start_ms, window_end_ms, true, true),
        "increase" => rate::extrapolated_rate(samples, window_start_ms, window_end_ms, true, false),
        "delta" => rate::extrapolated_rate(samples, window_start_ms, window_end_ms, false, false),
        "irate" => rate::instant_value(samples, true),
        "idelta" => rate::instant_value(samples, false),
        "deriv" => trend::deriv(samples),
        "predict_linear" => {
            let duration_s = arg(0)?;
            // The evaluation time travels as f64 milliseconds; timestamps are far below
            // 2^53 so the conversion back is exact.
            let at_ms = args.get(1).map(|t| *t as i64).unwrap_or(window_end_ms);
            trend::predict_linear(samples, at_ms, duration_s)
        }
        "double_exponential_smoothing" => {
            let (sf, tf) = (arg(0)?, arg(1)?);
            if samples.is_empty() {
                return Ok(None);
            }
            trend::double_exponential_smoothing(samples, sf, tf)?
        }
        "changes" => over_time::changes(samples),
        "resets" => over_time::resets(samples),
        "avg_over_time" => over_time::avg(samples),
        "sum_over_time" => over_time::sum(samples),
        "min_over_time" => over_time::min(samples),
        "max_over_time" => over_time::max(samples),
        "count_over_time" => over_time::count(samples),
        "stddev_over_time" => over_time::stddev(samples),
        "stdvar_over_time" => over_time::stdvar(samples),
        "quantile_over_time" => over_time::quantile(samples, arg(0)?),
        "mad_over_time" => over_time::mad(samples),
        "last_over_time" => samples.last().map(|s| s.v),
        "first_over_time" => samples.first().map(|s| s.v),
        "present_over_time" | "absent_over_time" => (!samples.is_empty()).then_some(1.0),
        "ts_of_min_over_time" => over_time::ts_of_min(samples),
        "ts_of_max_over_time" => over_time::ts_of_max(samples),
        "ts_of_last_over_time" => samples.last().map(|s| s.t as f64 / 1000.0),
        "ts_of_first_over_time" => samples.first().map(|s| s.t as f64 / 1000.0),
        _ => return Err(QueryError::bad_data(format!("unknown range function: {name}"))),
    };
    Ok(out)
}

#[cfg(test)]
mod tests;

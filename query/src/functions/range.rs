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
//! `rate`/`increase`/`delta` and the instant `irate`/`idelta`; [`rate_sums`] adds the
//! `rate` of series that share their timestamps per sample under `sum`), [`over_time`] (the
//! `*_over_time` aggregations plus `changes`/`resets`) and [`trend`] (least-squares
//! `deriv`/`predict_linear` and `double_exponential_smoothing`).

pub mod over_time;
pub mod rate;
pub mod rate_sums;
pub mod trend;

use crate::QueryError;
use tessera_model::Sample;

/// A range function resolved from its name once, so that evaluating it per window and
/// step does not repeat the string match (a query evaluates `rate` millions of times).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RangeFn {
    Rate,
    Increase,
    Delta,
    Irate,
    Idelta,
    Deriv,
    PredictLinear,
    DoubleExponentialSmoothing,
    Changes,
    Resets,
    AvgOverTime,
    SumOverTime,
    MinOverTime,
    MaxOverTime,
    CountOverTime,
    StddevOverTime,
    StdvarOverTime,
    QuantileOverTime,
    MadOverTime,
    LastOverTime,
    FirstOverTime,
    PresentOverTime,
    AbsentOverTime,
    TsOfMinOverTime,
    TsOfMaxOverTime,
    TsOfLastOverTime,
    TsOfFirstOverTime,
}

impl RangeFn {
    /// Every range function with its PromQL name.
    pub const ALL: [(RangeFn, &'static str); 27] = [
        (RangeFn::Rate, "rate"),
        (RangeFn::Increase, "increase"),
        (RangeFn::Delta, "delta"),
        (RangeFn::Irate, "irate"),
        (RangeFn::Idelta, "idelta"),
        (RangeFn::Deriv, "deriv"),
        (RangeFn::PredictLinear, "predict_linear"),
        (RangeFn::DoubleExponentialSmoothing, "double_exponential_smoothing"),
        (RangeFn::Changes, "changes"),
        (RangeFn::Resets, "resets"),
        (RangeFn::AvgOverTime, "avg_over_time"),
        (RangeFn::SumOverTime, "sum_over_time"),
        (RangeFn::MinOverTime, "min_over_time"),
        (RangeFn::MaxOverTime, "max_over_time"),
        (RangeFn::CountOverTime, "count_over_time"),
        (RangeFn::StddevOverTime, "stddev_over_time"),
        (RangeFn::StdvarOverTime, "stdvar_over_time"),
        (RangeFn::QuantileOverTime, "quantile_over_time"),
        (RangeFn::MadOverTime, "mad_over_time"),
        (RangeFn::LastOverTime, "last_over_time"),
        (RangeFn::FirstOverTime, "first_over_time"),
        (RangeFn::PresentOverTime, "present_over_time"),
        (RangeFn::AbsentOverTime, "absent_over_time"),
        (RangeFn::TsOfMinOverTime, "ts_of_min_over_time"),
        (RangeFn::TsOfMaxOverTime, "ts_of_max_over_time"),
        (RangeFn::TsOfLastOverTime, "ts_of_last_over_time"),
        (RangeFn::TsOfFirstOverTime, "ts_of_first_over_time"),
    ];

    pub fn from_name(name: &str) -> Option<RangeFn> {
        Self::ALL.iter().find(|(_, n)| *n == name).map(|(f, _)| *f)
    }

    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(f, _)| *f == self).map(|(_, n)| *n).unwrap_or("")
    }

    /// How many scalar arguments [`RangeFn::eval`] reads from `args` (at least).
    pub fn scalar_args(self) -> usize {
        match self {
            RangeFn::PredictLinear | RangeFn::QuantileOverTime => 1,
            RangeFn::DoubleExponentialSmoothing => 2,
            _ => 0,
        }
    }

    /// Evaluates the function over one window; see [`eval_range`] for the meaning of the
    /// arguments, the result and the errors.
    pub fn eval(
        self,
        samples: &[Sample],
        window_start_ms: i64,
        window_end_ms: i64,
        args: &[f64],
    ) -> Result<Option<f64>, QueryError> {
        let arg = |i: usize| -> Result<f64, QueryError> {
            args.get(i)
                .copied()
                .ok_or_else(|| QueryError::bad_data(format!("{}(): missing scalar argument {}", self.name(), i + 1)))
        };
        let out = match self {
            RangeFn::Rate => rate::extrapolated_rate(samples, window_start_ms, window_end_ms, true, true),
            RangeFn::Increase => rate::extrapolated_rate(samples, window_start_ms, window_end_ms, true, false),
            RangeFn::Delta => rate::extrapolated_rate(samples, window_start_ms, window_end_ms, false, false),
            RangeFn::Irate => rate::instant_value(samples, true),
            RangeFn::Idelta => rate::instant_value(samples, false),
            RangeFn::Deriv => trend::deriv(samples),
            RangeFn::PredictLinear => {
                let duration_s = arg(0)?;
                // The evaluation time travels as f64 milliseconds; timestamps are far
                // below 2^53 so the conversion back is exact.
                let at_ms = args.get(1).map(|t| *t as i64).unwrap_or(window_end_ms);
                trend::predict_linear(samples, at_ms, duration_s)
            }
            RangeFn::DoubleExponentialSmoothing => {
                let (sf, tf) = (arg(0)?, arg(1)?);
                // Prometheus validates the factors only when it has data to smooth: it
                // never calls a function for a series without samples in the window.
                if samples.is_empty() {
                    return Ok(None);
                }
                trend::double_exponential_smoothing(samples, sf, tf)?
            }
            RangeFn::Changes => over_time::changes(samples),
            RangeFn::Resets => over_time::resets(samples),
            RangeFn::AvgOverTime => over_time::avg(samples),
            RangeFn::SumOverTime => over_time::sum(samples),
            RangeFn::MinOverTime => over_time::min(samples),
            RangeFn::MaxOverTime => over_time::max(samples),
            RangeFn::CountOverTime => over_time::count(samples),
            RangeFn::StddevOverTime => over_time::stddev(samples),
            RangeFn::StdvarOverTime => over_time::stdvar(samples),
            RangeFn::QuantileOverTime => over_time::quantile(samples, arg(0)?),
            RangeFn::MadOverTime => over_time::mad(samples),
            RangeFn::LastOverTime => samples.last().map(|s| s.v),
            RangeFn::FirstOverTime => samples.first().map(|s| s.v),
            RangeFn::PresentOverTime | RangeFn::AbsentOverTime => (!samples.is_empty()).then_some(1.0),
            RangeFn::TsOfMinOverTime => over_time::ts_of_min(samples),
            RangeFn::TsOfMaxOverTime => over_time::ts_of_max(samples),
            RangeFn::TsOfLastOverTime => samples.last().map(|s| s.t as f64 / 1000.0),
            RangeFn::TsOfFirstOverTime => samples.first().map(|s| s.t as f64 / 1000.0),
        };
        Ok(out)
    }
}

/// Whether every sum of the series' values, in any order and over any subset, is exact:
/// every value an integer and `(n + 2) · max |v| ≤ 2^52`, so every partial sum is an
/// integer below 2^53. The helpers that answer overlapping windows from prefix sums
/// ([`over_time::ExactSums`], [`rate::ResetIndex`]) rely on it to give the walk's answer
/// bit for bit.
pub(crate) fn sums_are_exact(samples: &[Sample]) -> bool {
    const EXACT: f64 = (1u64 << 52) as f64;
    // `as` saturates and maps NaN to 0, so only integers (below 2^63) compare equal;
    // `f64::trunc` would be a libm call on baseline x86-64.
    let integral = samples.iter().all(|s| (s.v as i64) as f64 == s.v);
    let max_abs = samples.iter().fold(0.0f64, |m, s| m.max(s.v.abs()));
    integral && max_abs * (samples.len() as f64 + 2.0) <= EXACT
}

/// True if `name` is a range-vector function [`eval_range`] implements.
pub fn is_range_fn(name: &str) -> bool {
    RangeFn::from_name(name).is_some()
}

/// Evaluates range function `name` over one series' samples in the window
/// `(window_start_ms, window_end_ms]`. (Hot loops should resolve the name once with
/// [`RangeFn::from_name`] and call [`RangeFn::eval`].)
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
    match RangeFn::from_name(name) {
        Some(f) => f.eval(samples, window_start_ms, window_end_ms, args),
        None => Err(QueryError::bad_data(format!("unknown range function: {name}"))),
    }
}

#[cfg(test)]
mod tests;

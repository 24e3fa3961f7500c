//! [`Evaluator`] for the local PromQL engine of `tessera_query`.

use tessera_query::{Engine, EngineOptions, QueryError, QueryOptions, QueryOutput, Queryable};

use super::{EvalOptions, Evaluator, QueryLimits};

/// Builds the engine the API evaluates with, from the API's limits.
pub fn engine_for(limits: &QueryLimits) -> Engine {
    Engine::new(EngineOptions {
        lookback_delta_ms: limits.lookback_delta_ms(),
        default_subquery_step_ms: limits.default_subquery_step_ms(),
        max_samples: usize::try_from(limits.max_samples).unwrap_or(usize::MAX),
        // The API checks Prometheus' rule first: (end - start) / step <= 11,000 *intervals*,
        // i.e. up to 11,001 points. The engine counts points, so it gets one more; without
        // this a range Prometheus accepts would fail inside the engine.
        max_points_per_series: usize::try_from(limits.max_points_per_series).unwrap_or(usize::MAX).saturating_add(1),
        text: limits.text_limits(),
        ..EngineOptions::default()
    })
}

/// The engine's per-query options for one evaluation.
fn query_options(opts: &EvalOptions) -> QueryOptions {
    QueryOptions {
        deadline: Some(opts.control.deadline),
        cancel: Some(opts.control.cancel.clone()),
        ..Default::default()
    }
}

/// The engine to use for one query: the shared one, or a copy with the request's
/// `lookback_delta` (the engine is a small value; copying it is cheaper than the query).
fn with_lookback(engine: &Engine, opts: &EvalOptions) -> Option<Engine> {
    opts.lookback_delta_ms.map(|ms| Engine::new(EngineOptions { lookback_delta_ms: ms, ..engine.options().clone() }))
}

impl Evaluator for Engine {
    fn instant(
        &self,
        data: &dyn Queryable,
        expr: &str,
        time_ms: i64,
        opts: &EvalOptions,
    ) -> Result<QueryOutput, QueryError> {
        let custom = with_lookback(self, opts);
        custom.as_ref().unwrap_or(self).instant_query(data, expr, time_ms, &query_options(opts))
    }

    fn range(
        &self,
        data: &dyn Queryable,
        expr: &str,
        start_ms: i64,
        end_ms: i64,
        step_ms: i64,
        opts: &EvalOptions,
    ) -> Result<QueryOutput, QueryError> {
        let custom = with_lookback(self, opts);
        custom.as_ref().unwrap_or(self).range_query(data, expr, start_ms, end_ms, step_ms, &query_options(opts))
    }
}

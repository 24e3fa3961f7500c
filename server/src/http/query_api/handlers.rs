//! Handlers of the PromQL endpoints: query, query_range, query_exemplars, format_query,
//! parse_query. Parameter checks follow Prometheus 3.x' order and wording, so a malformed
//! request gets the same `bad_data` answer from us as from Prometheus.
//!
//! Query text is hostile until proven otherwise: form bodies are bounded (413), and the
//! text's length and nesting depth are checked before the parser sees it (400 naming
//! `query.max_query_bytes` / `query.max_query_depth`). Parsing, printing and evaluating
//! all run on query threads (`exec.rs`) under the query semaphore and deadline
//! (`on_pool`), never on an async worker.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{FromRequest, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use promql_parser::parser::value::ValueType;
use promql_parser::parser::Expr;
use tessera_query::{QueryOutput, TextLimits, Value};

use super::response::{cap_annotations, error_response, ApiError, JsonError};
use super::{ast_json, EvalOptions, QueryApi};
use crate::http::json::{self, ApiSuccess};
use crate::http::params::{self, invalid_param, Params, MAX_TIME_MS, MIN_TIME_MS};

/// A read request: its form values and its tenant.
pub struct ApiRequest {
    pub params: Params,
    pub tenant: String,
}

impl FromRequest<Arc<QueryApi>> for ApiRequest {
    type Rejection = JsonError;

    async fn from_request(req: Request, api: &Arc<QueryApi>) -> Result<Self, JsonError> {
        // The tenant and the bounded form body, read as for every JSON endpoint.
        let (parts, body) = req.into_parts();
        let (params, tenant) =
            params::read_request(&parts.headers, parts.uri.query(), body, api.limits.max_form_bytes()).await?;
        Ok(ApiRequest { params, tenant })
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Parses the `query` parameter, with Prometheus' error wrapping, after checking its
/// length and nesting depth against the configured limits (the parser, and dropping the
/// tree it builds, recurse once per level). Blocking and super-linear in the worst case:
/// only called off the async workers (see [`on_pool`]).
fn parse_expr(text: &str, limits: &TextLimits) -> Result<Expr, ApiError> {
    tessera_query::engine::limits::check_text(text, limits).map_err(|e| invalid_param("query", e.message))?;
    promql_parser::parser::parse(text).map_err(|e| invalid_param("query", e))
}

/// Runs `job` (parsing, formatting, evaluating) on a query thread, under the query
/// semaphore and `deadline`, never on an async worker: parsing a long query takes
/// seconds of CPU, and would stall every other request served by that worker.
async fn on_pool<T, F>(api: &QueryApi, deadline: Instant, job: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(&super::QueryControl) -> Result<T, ApiError> + Send + 'static,
{
    api.executor.run(deadline, move |ctl| Ok(job(ctl))).await?
}

/// The deadline of a query: now plus the configured timeout, shortened by `timeout=`.
fn deadline(api: &QueryApi, params: &Params) -> Result<Instant, ApiError> {
    let mut timeout = api.limits.timeout();
    if let Some(raw) = params.get("timeout") {
        let ns = params::parse_duration_ns(raw).map_err(|e| invalid_param("timeout", e))?;
        // A zero or negative timeout expires at once, as Go's context.WithDeadline does.
        timeout = timeout.min(Duration::from_nanos(ns.max(0) as u64));
    }
    Ok(Instant::now() + timeout)
}

/// The `lookback_delta=` override (Prometheus' `extractQueryOpts`).
fn lookback_delta(params: &Params) -> Result<Option<i64>, ApiError> {
    match params.get("lookback_delta") {
        None => Ok(None),
        Some(raw) => {
            let ns = params::parse_duration_ns(raw)
                .map_err(|e| ApiError::bad_data(format!("error parsing lookback delta duration: {e}")))?;
            // Zero means "use the default", as in Prometheus.
            Ok((ns > 0).then_some(ns / 1_000_000).filter(|ms| *ms > 0))
        }
    }
}

/// Cuts a vector or matrix to `limit` series; Prometheus warns when it does.
fn truncate(output: &mut QueryOutput, limit: usize) {
    if limit == 0 {
        return;
    }
    let truncated = match &mut output.value {
        Value::Vector(v) if v.len() > limit => {
            v.truncate(limit);
            true
        }
        Value::Matrix(m) if m.len() > limit => {
            m.truncate(limit);
            true
        }
        _ => false,
    };
    if truncated {
        output.warnings.push("results truncated due to limit".to_string());
    }
}

/// Truncates to `limit` and encodes the answer. Called on the query thread with the
/// evaluation: encoding a large matrix is CPU work of the same order as evaluating it.
fn encode(mut output: QueryOutput, limit: usize) -> ApiSuccess {
    truncate(&mut output, limit);
    let mut data = String::new();
    json::write_query_data(&mut data, &output.value);
    ApiSuccess {
        data_json: data,
        warnings: cap_annotations(output.warnings, "warning"),
        infos: cap_annotations(output.infos, "info"),
    }
}

/// Prometheus' name for a value type in error messages (`parser.DocumentedType`).
fn documented_type(t: ValueType) -> &'static str {
    match t {
        ValueType::Vector => "instant vector",
        ValueType::Matrix => "range vector",
        ValueType::Scalar => "scalar",
        ValueType::String => "string",
    }
}

/// `GET|POST /api/v1/query`
pub async fn query(State(api): State<Arc<QueryApi>>, req: ApiRequest) -> Response {
    match instant_query(api, req).await {
        Ok(r) => r,
        Err(e) => error_response(e),
    }
}

async fn instant_query(api: Arc<QueryApi>, req: ApiRequest) -> Result<Response, ApiError> {
    let p = &req.params;
    let limit = params::limit(p)?;
    let time = params::time_param(p, "time", now_ms())?;
    let deadline = deadline(&api, p)?;
    let lookback = lookback_delta(p)?;

    let expr = p.value("query").to_string();
    let text_limits = api.limits.text_limits();
    let data = api.data.clone();
    let evaluator = api.evaluator.clone();
    let tenant = req.tenant;
    let answer = on_pool(&api, deadline, move |ctl| {
        // Parsed here first for Prometheus' error wording; the tree is dropped on this
        // thread too, before the engine parses the text again.
        parse_expr(&expr, &text_limits)?;
        let queryable = data.queryable(&tenant)?;
        let opts = EvalOptions { control: ctl.clone(), lookback_delta_ms: lookback };
        Ok(evaluator.instant(queryable.as_ref(), &expr, time, &opts).map(|out| encode(out, limit))?)
    })
    .await?;
    Ok(answer.into_response())
}

/// `GET|POST /api/v1/query_range`
pub async fn query_range(State(api): State<Arc<QueryApi>>, req: ApiRequest) -> Response {
    match range_query(api, req).await {
        Ok(r) => r,
        Err(e) => error_response(e),
    }
}

/// Prometheus' 11,000 spelled with thousands separators, as in its error message.
fn with_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

async fn range_query(api: Arc<QueryApi>, req: ApiRequest) -> Result<Response, ApiError> {
    let p = &req.params;
    let limit = params::limit(p)?;
    let start = params::required_time(p, "start")?;
    let end = params::required_time(p, "end")?;
    if end < start {
        return Err(invalid_param("end", "end timestamp must not be before start time"));
    }
    let step_ns = params::parse_duration_ns(p.value("step")).map_err(|e| invalid_param("step", e))?;
    // Steps below a millisecond cannot be evaluated on millisecond timestamps; they would be a
    // zero step, which Prometheus rejects with this message too.
    let step_ms = step_ns / 1_000_000;
    if step_ns <= 0 || step_ms <= 0 {
        return Err(invalid_param(
            "step",
            "zero or negative query resolution step widths are not accepted. Try a positive integer",
        ));
    }
    // For safety, limit the number of returned points per series: 11,000 is a week at
    // 60 s resolution or a year at 1 h. Computed in nanoseconds like Go's Duration division.
    let span_ns = (end as i128 - start as i128) * 1_000_000;
    if span_ns / step_ns as i128 > api.limits.max_points_per_series as i128 {
        return Err(ApiError::bad_data(format!(
            "exceeded maximum resolution of {} points per timeseries. Try decreasing the query resolution (?step=XX)",
            with_thousands(api.limits.max_points_per_series)
        )));
    }
    let deadline = deadline(&api, p)?;
    let lookback = lookback_delta(p)?;

    let expr = p.value("query").to_string();
    let text_limits = api.limits.text_limits();
    let data = api.data.clone();
    let evaluator = api.evaluator.clone();
    let tenant = req.tenant;
    let answer = on_pool(&api, deadline, move |ctl| {
        let t = parse_expr(&expr, &text_limits)?.value_type();
        if t != ValueType::Vector && t != ValueType::Scalar {
            return Err(invalid_param(
                "query",
                format!(
                    "invalid expression type {:?} for range query, must be Scalar or instant Vector",
                    documented_type(t)
                ),
            ));
        }
        let queryable = data.queryable(&tenant)?;
        let opts = EvalOptions { control: ctl.clone(), lookback_delta_ms: lookback };
        Ok(evaluator.range(queryable.as_ref(), &expr, start, end, step_ms, &opts).map(|out| encode(out, limit))?)
    })
    .await?;
    Ok(answer.into_response())
}

/// `GET|POST /api/v1/query_exemplars`: Tessera stores no exemplars yet, so a valid query gets
/// a valid, empty answer (and a selector-free one gets 204, as from Prometheus).
pub async fn query_exemplars(State(api): State<Arc<QueryApi>>, req: ApiRequest) -> Response {
    let p = &req.params;
    let result = async {
        let start = params::time_param(p, "start", MIN_TIME_MS)?;
        let end = params::time_param(p, "end", MAX_TIME_MS)?;
        if end < start {
            return Err(ApiError::bad_data("end timestamp must not be before start timestamp"));
        }
        let deadline = parse_only_deadline(&api, p);
        let expr = p.value("query").to_string();
        let text_limits = api.limits.text_limits();
        on_pool(&api, deadline, move |_| {
            tessera_query::engine::limits::check_text(&expr, &text_limits)
                .map_err(|e| ApiError::bad_data(e.message))?;
            let ast = promql_parser::parser::parse(&expr).map_err(ApiError::bad_data)?;
            Ok(ast_json::has_selector(&ast))
        })
        .await
    }
    .await;
    match result {
        Ok(true) => ApiSuccess::data("[]".to_string()).into_response(),
        Ok(false) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => error_response(e),
    }
}

/// The deadline of an endpoint that only parses: Prometheus ignores `timeout=` there, so
/// a malformed one is not an error; a valid one still shortens the wait for a slot.
fn parse_only_deadline(api: &QueryApi, params: &Params) -> Instant {
    deadline(api, params).unwrap_or_else(|_| Instant::now() + api.limits.timeout())
}

/// Parses the request's query on a query thread and renders the answer's `data` with
/// `render`, also there (printing is recursive and, for the pretty printer, super-linear).
async fn render_query(api: Arc<QueryApi>, req: ApiRequest, render: fn(&Expr) -> String) -> Response {
    let result = async {
        let deadline = parse_only_deadline(&api, &req.params);
        let expr = req.params.value("query").to_string();
        let text_limits = api.limits.text_limits();
        on_pool(&api, deadline, move |_| Ok(render(&parse_expr(&expr, &text_limits)?))).await
    }
    .await;
    match result {
        Ok(data) => ApiSuccess::data(data).into_response(),
        Err(e) => error_response(e),
    }
}

/// `GET|POST /api/v1/format_query`: the expression, prettified by promql-parser's port of
/// Prometheus' printer.
pub async fn format_query(State(api): State<Arc<QueryApi>>, req: ApiRequest) -> Response {
    render_query(api, req, |expr| {
        let mut data = String::new();
        json::write_str(&mut data, &expr.prettify());
        data
    })
    .await
}

/// `GET|POST /api/v1/parse_query`: the syntax tree (see `ast_json.rs` for the subset).
pub async fn parse_query(State(api): State<Arc<QueryApi>>, req: ApiRequest) -> Response {
    render_query(api, req, |expr| {
        let mut data = String::new();
        ast_json::translate(expr).write(&mut data);
        data
    })
    .await
}

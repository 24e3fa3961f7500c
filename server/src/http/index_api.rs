//! `/api/v1/series`, `/api/v1/labels`, `/api/v1/label/{name}/values` (index reads,
//! never chunk data) and `/api/v1/metadata`, with Prometheus' parameters and JSON
//! envelope. GET reads the URL query string; POST also reads a form-encoded body.
//!
//! The handlers read through the tenant's [`Queryable`] (`series`, `label_names`,
//! `label_values`), never the shards, so a querier over remote ingesters can serve
//! them unchanged; the calls run on the blocking pool. The index reads are bounded like
//! queries: each request gets the query timeout (`[query] timeout_secs`) as a deadline
//! and a cancel flag raised when its future is dropped (client gone), both handed to
//! the source, which stops scanning and frees its storage slot when either fires (503
//! `timeout` / 499 `canceled`). A source's warnings are passed on in the envelope.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::json;
use tessera_model::Matcher;
use tessera_query::{QueryOptions, Queryable, ReadResult, SelectHints};

use super::{params, AppState};
use crate::error::{ApiError, JsonError};
use crate::ingest::validate::valid_label_name;
use crate::shards::request_controls;

/// `{"status":"success","data":...}` plus `warnings`: the source's, and one more when a
/// limit truncated the data.
fn success<T: Serialize>(data: T, mut warnings: Vec<String>, truncated: bool) -> Response {
    let mut body = json!({"status": "success", "data": data});
    if truncated {
        warnings.push("results truncated due to limit".to_owned());
    }
    if !warnings.is_empty() {
        body["warnings"] = json!(warnings);
    }
    ([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// Rendering a large answer (tens of thousands of series) is CPU work: like the reads
/// and the sort in [`read_union`], it runs on the blocking pool so the async workers stay free for
/// `/-/ready`, `/metrics` and writes while many index calls are in flight.
async fn render_off_runtime(f: impl FnOnce() -> Response + Send + 'static) -> Result<Response, JsonError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| ApiError::internal(format!("rendering task failed: {e}")).into())
}

/// Runs `read` once per selector (one empty selector when there are none) on the
/// blocking pool and merges the answers sorted and unique, with every warning once.
async fn read_union<T, F>(
    q: Arc<dyn Queryable>,
    selectors: &[Vec<Matcher>],
    read: F,
) -> Result<ReadResult<Vec<T>>, ApiError>
where
    T: Ord + Send + 'static,
    F: Fn(&dyn Queryable, &[Matcher]) -> Result<ReadResult<Vec<T>>, tessera_query::QueryError> + Send + 'static,
{
    let sets: Vec<Vec<Matcher>> = if selectors.is_empty() { vec![Vec::new()] } else { selectors.to_vec() };
    let r = tokio::task::spawn_blocking(move || -> Result<ReadResult<Vec<T>>, tessera_query::QueryError> {
        let mut out = ReadResult::new(Vec::new());
        for set in &sets {
            let r = read(&*q, set)?;
            out.data.extend(r.data);
            for w in r.warnings {
                if !out.warnings.contains(&w) {
                    out.warnings.push(w);
                }
            }
        }
        out.data.sort();
        out.data.dedup();
        Ok(out)
    })
    .await
    .map_err(|e| ApiError::internal(format!("index read task failed: {e}")))??;
    Ok(r)
}

/// The parameters every index endpoint reads, checked in the order Prometheus checks
/// them: the form and tenant first ([`IndexRequest::read`]), then, after any
/// endpoint-specific check, `match[]`, the time range and `limit` ([`IndexRequest::resolve`]).
struct IndexRequest {
    pairs: Vec<(String, String)>,
    tenant: String,
}

/// A resolved index request: what to read, from where, under which deadline.
struct IndexRead {
    selectors: Vec<Vec<Matcher>>,
    start: i64,
    end: i64,
    limit: Option<usize>,
    q: Arc<dyn Queryable>,
    ctl: QueryOptions,
    /// Raises the cancel flag in `ctl` when the handler's future is dropped.
    cancel_on_drop: crate::shards::CancelOnDrop,
}

impl IndexRequest {
    /// The form body is bounded as the query API's (413 in the JSON envelope, the rest
    /// of an oversized body read and discarded first so the client sees the answer).
    async fn read(st: &AppState, q: Option<&str>, headers: &HeaderMap, body: Body) -> Result<Self, ApiError> {
        let body = params::read_form_body(headers, body, st.config.query.max_form_bytes()).await?;
        let pairs = params::form_pairs(q, &body);
        let tenant = params::tenant(headers)?;
        Ok(IndexRequest { pairs, tenant })
    }

    /// `require_match`: refuse a request without `match[]` (the series endpoint:
    /// listing every series is never what a client means).
    async fn resolve(self, st: &AppState, require_match: bool) -> Result<IndexRead, ApiError> {
        let selectors = params::selectors_off_runtime(&self.pairs, st.config.query.text_limits()).await?;
        if require_match && selectors.is_empty() {
            return Err(ApiError::bad_data("no match[] parameter provided"));
        }
        let (start, end) = params::time_range(&self.pairs)?;
        let limit = params::limit(&self.pairs)?;
        let q = st.queryable(&self.tenant)?;
        // The request's deadline (the query timeout) and a cancel flag raised when the
        // guard, kept in the handler's future, drops.
        let (ctl, cancel_on_drop) = request_controls(std::time::Instant::now() + st.config.query.timeout());
        Ok(IndexRead { selectors, start, end, limit, q, ctl, cancel_on_drop })
    }
}

/// Truncates to `limit` and says whether anything was cut.
fn apply_limit<T>(v: &mut Vec<T>, limit: Option<usize>) -> bool {
    match limit {
        Some(n) if v.len() > n => {
            v.truncate(n);
            true
        }
        _ => false,
    }
}

pub async fn series(
    State(st): State<AppState>,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
    body: Body,
) -> Result<Response, JsonError> {
    let IndexRead { selectors, start, end, limit, q, ctl, cancel_on_drop: _guard } =
        IndexRequest::read(&st, q.as_deref(), &headers, body).await?.resolve(&st, true).await?;
    // Prometheus' hint for a read that wants label sets only.
    let hints = SelectHints { func: Some("series".into()), ..SelectHints::range(start, end) };
    // Several match[] are a union; a series matched by two selectors is listed once.
    let ReadResult { data: mut all, warnings } =
        read_union(q, &selectors, move |q, set| q.series(set, &hints, &ctl)).await?;
    render_off_runtime(move || {
        let truncated = apply_limit(&mut all, limit);
        // A BTreeMap serializes as a JSON object with sorted keys, as Prometheus prints it.
        let data: Vec<BTreeMap<String, String>> =
            all.into_iter().map(|ls| ls.into_vec().into_iter().map(|l| (l.name, l.value)).collect()).collect();
        success(data, warnings, truncated)
    })
    .await
}

pub async fn label_names(
    State(st): State<AppState>,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
    body: Body,
) -> Result<Response, JsonError> {
    let IndexRead { selectors, start, end, limit, q, ctl, cancel_on_drop: _guard } =
        IndexRequest::read(&st, q.as_deref(), &headers, body).await?.resolve(&st, false).await?;
    let hints = SelectHints::range(start, end);
    let ReadResult { data: mut names, warnings } =
        read_union(q, &selectors, move |q, set| q.label_names(set, &hints, &ctl)).await?;
    render_off_runtime(move || {
        let truncated = apply_limit(&mut names, limit);
        success(names, warnings, truncated)
    })
    .await
}

pub async fn label_values(
    State(st): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
    body: Body,
) -> Result<Response, JsonError> {
    // axum's own rejection (e.g. `%ff`, not UTF-8 once decoded) is plain text; answer in
    // the JSON envelope like every other error of this API.
    let Path(name) =
        path.map_err(|r| ApiError::bad_data(format!("invalid label name in the URL path: {}", r.body_text())))?;
    let req = IndexRequest::read(&st, q.as_deref(), &headers, body).await?;
    // The same name rules as the write path: a name we would never store cannot match.
    if !valid_label_name(&name, st.config.limits.name_validation) {
        return Err(ApiError::bad_data(format!("invalid label name: {name:?}")).into());
    }
    let IndexRead { selectors, start, end, limit, q, ctl, cancel_on_drop: _guard } = req.resolve(&st, false).await?;
    let hints = SelectHints::range(start, end);
    let ReadResult { data: mut values, warnings } =
        read_union(q, &selectors, move |q, set| q.label_values(&name, set, &hints, &ctl)).await?;
    render_off_runtime(move || {
        let truncated = apply_limit(&mut values, limit);
        success(values, warnings, truncated)
    })
    .await
}

/// `/api/v1/metadata?metric=&limit=&limit_per_metric=`, from the in-memory store.
pub async fn metadata(
    State(st): State<AppState>,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
) -> Result<Response, JsonError> {
    let pairs = params::form_pairs(q.as_deref(), &[]);
    let tenant = params::tenant(&headers)?;
    let parse_limit = |key: &str| -> Result<Option<usize>, ApiError> {
        match params::one(&pairs, key) {
            None => Ok(None),
            Some(s) => match s.parse::<i64>() {
                Ok(n) if n >= 0 => Ok(Some(n as usize)),
                // Prometheus treats a negative limit as "no limit".
                Ok(_) => Ok(None),
                Err(_) => Err(ApiError::bad_data(format!("invalid parameter {key:?}: {s:?} is not an integer"))),
            },
        }
    };
    let limit = parse_limit("limit")?;
    let per_metric = parse_limit("limit_per_metric")?;
    let data = st.metadata.query(&tenant, params::one(&pairs, "metric"), limit, per_metric);
    Ok(success(data, Vec::new(), false))
}

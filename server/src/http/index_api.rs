//! `/api/v1/series`, `/api/v1/labels`, `/api/v1/label/{name}/values` (index reads,
//! never chunk data) and `/api/v1/metadata`, with Prometheus' parameters and JSON
//! envelope. GET reads the URL query string; POST also reads a form-encoded body.
//!
//! The index reads are bounded like queries: each request gets the query timeout
//! (`[query] timeout_secs`) as a deadline and a cancel flag raised when its future is
//! dropped (client gone), both handed to storage, which stops scanning and frees its
//! storage slot when either fires (503 `timeout` / 499 `canceled`).

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::json;
use tessera_storage::Matcher;

use super::{params, AppState};
use crate::error::{ApiError, JsonError};
use crate::ingest::validate::valid_label_name;
use crate::shards::request_interrupt;

/// `{"status":"success","data":...}` plus `warnings` when a limit truncated the data.
fn success<T: Serialize>(data: T, truncated: bool) -> Response {
    let mut body = json!({"status": "success", "data": data});
    if truncated {
        body["warnings"] = json!(["results truncated due to limit"]);
    }
    ([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// Sorting, de-duplicating and rendering a large answer (tens of thousands of series)
/// is CPU work: it runs on the blocking pool so the async workers stay free for
/// `/-/ready`, `/metrics` and writes while many index calls are in flight.
async fn render_off_runtime(f: impl FnOnce() -> Response + Send + 'static) -> Result<Response, JsonError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| ApiError::internal(format!("rendering task failed: {e}")).into())
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
    body: Bytes,
) -> Result<Response, JsonError> {
    let pairs = params::form_pairs(q.as_deref(), &body);
    let tenant = params::tenant(&headers)?;
    let selectors = params::selectors_off_runtime(&pairs, st.config.query.text_limits()).await?;
    // Prometheus requires match[] here: listing every series is never what a client means.
    if selectors.is_empty() {
        return Err(ApiError::bad_data("no match[] parameter provided").into());
    }
    let (start, end) = params::time_range(&pairs)?;
    let limit = params::limit(&pairs)?;
    let shards = st.shards()?;
    let (stop, _cancel_on_drop) = request_interrupt(std::time::Instant::now() + st.config.query.timeout());
    // Several match[] are a union; a series matched by two selectors is listed once.
    let mut all = Vec::new();
    for sel in &selectors {
        all.extend(shards.series_until(&tenant, sel, start, end, stop.clone()).await?);
    }
    render_off_runtime(move || {
        all.sort();
        all.dedup();
        let truncated = apply_limit(&mut all, limit);
        // A BTreeMap serializes as a JSON object with sorted keys, as Prometheus prints it.
        let data: Vec<BTreeMap<String, String>> =
            all.into_iter().map(|ls| ls.into_iter().map(|l| (l.name, l.value)).collect()).collect();
        success(data, truncated)
    })
    .await
}

pub async fn label_names(
    State(st): State<AppState>,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
    body: Bytes,
) -> Result<Response, JsonError> {
    let pairs = params::form_pairs(q.as_deref(), &body);
    let tenant = params::tenant(&headers)?;
    let selectors = params::selectors_off_runtime(&pairs, st.config.query.text_limits()).await?;
    let (start, end) = params::time_range(&pairs)?;
    let limit = params::limit(&pairs)?;
    let shards = st.shards()?;
    let (stop, _cancel_on_drop) = request_interrupt(std::time::Instant::now() + st.config.query.timeout());
    let mut names = Vec::new();
    for sel in selectors_or_all(&selectors) {
        names.extend(shards.label_names_until(&tenant, sel, start, end, stop.clone()).await?);
    }
    render_off_runtime(move || {
        names.sort();
        names.dedup();
        let truncated = apply_limit(&mut names, limit);
        success(names, truncated)
    })
    .await
}

pub async fn label_values(
    State(st): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
    body: Bytes,
) -> Result<Response, JsonError> {
    // axum's own rejection (e.g. `%ff`, not UTF-8 once decoded) is plain text; answer in
    // the JSON envelope like every other error of this API.
    let Path(name) =
        path.map_err(|r| ApiError::bad_data(format!("invalid label name in the URL path: {}", r.body_text())))?;
    let pairs = params::form_pairs(q.as_deref(), &body);
    let tenant = params::tenant(&headers)?;
    // The same name rules as the write path: a name we would never store cannot match.
    if !valid_label_name(&name, st.config.limits.name_validation) {
        return Err(ApiError::bad_data(format!("invalid label name: {name:?}")).into());
    }
    let selectors = params::selectors_off_runtime(&pairs, st.config.query.text_limits()).await?;
    let (start, end) = params::time_range(&pairs)?;
    let limit = params::limit(&pairs)?;
    let shards = st.shards()?;
    let (stop, _cancel_on_drop) = request_interrupt(std::time::Instant::now() + st.config.query.timeout());
    let mut values = Vec::new();
    for sel in selectors_or_all(&selectors) {
        values.extend(shards.label_values_until(&tenant, &name, sel, start, end, stop.clone()).await?);
    }
    render_off_runtime(move || {
        values.sort();
        values.dedup();
        let truncated = apply_limit(&mut values, limit);
        success(values, truncated)
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
    Ok(success(data, false))
}

/// The selectors to query: the given ones, or one empty selector (no filter besides the
/// tenant) when no `match[]` was given.
fn selectors_or_all(selectors: &[Vec<Matcher>]) -> Vec<&[Matcher]> {
    if selectors.is_empty() {
        vec![&[]]
    } else {
        selectors.iter().map(|s| s.as_slice()).collect()
    }
}

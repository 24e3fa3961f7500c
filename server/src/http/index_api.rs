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
//! `partial_response` picks a cluster front end's view: by default a read that cannot
//! reach enough replicas of some shard fails (503); with `partial_response=true` it
//! answers 200 with a warning naming the shards.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use tessera_model::Matcher;
use tessera_query::{QueryOptions, Queryable, ReadResult, SelectHints};

use super::json::{self, ApiSuccess, ObjectWriter};
use super::params::{self, Params, MAX_TIME_MS, MIN_TIME_MS};
use super::AppState;
use crate::error::{ApiError, JsonError};
use crate::ingest::validate::valid_label_name;
use crate::shards::request_controls;

/// `{"status":"success","data":...}` with `data` already written by `http::json`, plus
/// `warnings`: the source's, and one more when a limit truncated the data.
fn success(data_json: String, mut warnings: Vec<String>, truncated: bool) -> Response {
    if truncated {
        warnings.push("results truncated due to limit".to_owned());
    }
    ApiSuccess { data_json, warnings, infos: Vec::new() }.into_response()
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
    params: Params,
    tenant: String,
}

/// A resolved index request: what to read, from where, under which deadline.
struct IndexRead {
    selectors: Vec<Vec<Matcher>>,
    start: i64,
    end: i64,
    /// 0: no limit.
    limit: usize,
    q: Arc<dyn Queryable>,
    ctl: QueryOptions,
    /// Raises the cancel flag in `ctl` when the handler's future is dropped.
    cancel_on_drop: crate::shards::CancelOnDrop,
}

impl IndexRequest {
    /// The tenant and the form body, read as for every JSON endpoint (the body bounded
    /// as the query API's: 413 in the JSON envelope, the rest of an oversized body read
    /// and discarded first so the client sees the answer).
    async fn read(st: &AppState, q: Option<&str>, headers: &HeaderMap, body: Body) -> Result<Self, ApiError> {
        let (params, tenant) = params::read_request(headers, q, body, st.config.query.max_form_bytes()).await?;
        Ok(IndexRequest { params, tenant })
    }

    /// `require_match`: refuse a request without `match[]` (the series endpoint:
    /// listing every series is never what a client means).
    async fn resolve(self, st: &AppState, require_match: bool) -> Result<IndexRead, ApiError> {
        let p = &self.params;
        if require_match && p.all("match[]").is_empty() {
            return Err(ApiError::bad_data("no match[] parameter provided"));
        }
        let limit = params::limit(p)?;
        let start = params::time_param(p, "start", MIN_TIME_MS)?;
        let end = params::time_param(p, "end", MAX_TIME_MS)?;
        if end < start {
            return Err(params::invalid_param("end", "end timestamp must not be before start time"));
        }
        let partial = params::partial_response(p)?;
        let selectors = params::selectors_off_runtime(p, st.config.query.text_limits()).await?;
        let q = st.queryable_partial(&self.tenant, partial)?;
        // The request's deadline (the query timeout) and a cancel flag raised when the
        // guard, kept in the handler's future, drops.
        let (ctl, cancel_on_drop) = request_controls(std::time::Instant::now() + st.config.query.timeout());
        Ok(IndexRead { selectors, start, end, limit, q, ctl, cancel_on_drop })
    }
}

/// Truncates to `limit` (0: no limit) and says whether anything was cut.
fn apply_limit<T>(v: &mut Vec<T>, limit: usize) -> bool {
    if limit > 0 && v.len() > limit {
        v.truncate(limit);
        return true;
    }
    false
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
        // Label sets are sorted by name, the order Prometheus writes them in.
        let mut data = String::from("[");
        for (i, labels) in all.iter().enumerate() {
            if i > 0 {
                data.push(',');
            }
            json::write_labels(&mut data, labels);
        }
        data.push(']');
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
        let mut data = String::new();
        json::write_str_array(&mut data, &names);
        success(data, warnings, truncated)
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
        let mut data = String::new();
        json::write_str_array(&mut data, &values);
        success(data, warnings, truncated)
    })
    .await
}

/// `/api/v1/metadata?metric=&limit=&limit_per_metric=`, from the in-memory store, with
/// Prometheus' rules: `limit` counts metric families (0 gives none), `limit_per_metric`
/// entries per family (0 or negative: all), a negative `limit` none at all. A cluster
/// front end reads the ingesters' stores instead (the metadata went there with the
/// writes), under the query timeout and with `partial_response` as the index reads.
pub async fn metadata(
    State(st): State<AppState>,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
) -> Result<Response, JsonError> {
    let p = Params::from_query(q.as_deref());
    let tenant = params::tenant(&headers)?;
    let limit = params::metadata_limit(&p, "limit")?;
    let per_metric = params::metadata_limit(&p, "limit_per_metric")?.filter(|&n| n > 0);
    let (families, warnings) = match st.remote() {
        None => (st.metadata.query(&tenant, p.get("metric"), limit, per_metric), Vec::new()),
        Some(remote) => {
            let partial = params::partial_response(&p)?;
            let remote = Arc::clone(remote);
            let metric = p.get("metric").map(str::to_owned);
            let (ctl, _cancel_on_drop) = request_controls(std::time::Instant::now() + st.config.query.timeout());
            let r = tokio::task::spawn_blocking(move || {
                let query =
                    crate::cluster::MetadataQuery { metric: metric.as_deref(), limit, limit_per_metric: per_metric };
                remote.metadata(&tenant, partial, query, &ctl)
            })
            .await
            .map_err(|e| ApiError::internal(format!("metadata read task failed: {e}")))??;
            (r.data, r.warnings)
        }
    };
    // A map in Go: keys sorted (the BTreeMap's order); each entry a struct in field order.
    let mut data = String::new();
    let mut o = ObjectWriter::new(&mut data);
    for (name, entries) in &families {
        o.raw(name, |out| {
            out.push('[');
            for (i, e) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let mut entry = ObjectWriter::new(out);
                entry.str("type", e.kind).str("help", &e.help).str("unit", &e.unit);
                entry.finish();
            }
            out.push(']');
        });
    }
    o.finish();
    Ok(success(data, warnings, false))
}

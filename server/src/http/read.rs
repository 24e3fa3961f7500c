//! `POST /api/v1/read`: Prometheus remote read with the SAMPLES response type.
//!
//! Request and response are snappy block-compressed protobuf (`prometheus.ReadRequest`
//! / `prometheus.ReadResponse`). The queries are answered by the tenant's
//! [`Queryable`] (which adds the tenant matcher, like every other read), on the
//! blocking pool with the request's deadline and a cancel flag raised when the request
//! goes away. Only the SAMPLES response type is served:
//! a client that accepts only STREAMED_XOR_CHUNKS gets a 400 saying so.
//!
//! Bounds: at most `limits.max_read_queries_per_request` queries (400), decoded memory
//! under `limits.max_decoded_bytes_per_request` (413, checked before decoding), at most
//! `limits.max_concurrent_reads` requests at once (a slot is taken after the body is
//! read, so a slow sender holds none), and one deadline per request
//! (`query.timeout_secs`, body read and slot wait included) after which no further
//! query starts, the running one stops inside storage, and the client gets 503 `timeout`.
//!
//! A cluster front end reads the URL's `partial_response` like the JSON endpoints:
//! by default a shard without enough replicas fails the read (503); with `true` it
//! answers, and each warning travels as a `Warning: 299 tessera "..."` header (the
//! protobuf response has no place for them).

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use prost::Message;
use std::sync::Arc;

use tessera_model::{MatchOp, Matcher};
use tessera_proto::prometheus::{self, label_matcher, read_request::ResponseType};
use tessera_query::{Queryable, SelectHints};

use super::body::{read_bounded, BodyLimit};
use super::{params, AppState};
use crate::error::{ApiError, ErrorKind, TextError};
use crate::ingest::decode;

/// Most samples one remote-read response may carry, so a careless query cannot make
/// the server build a response of many gigabytes.
pub const MAX_READ_SAMPLES: usize = 50_000_000;

pub async fn remote_read(
    State(st): State<AppState>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, TextError> {
    let tenant = params::tenant(&headers)?;
    let partial = params::partial_response(&params::Params::from_query(query.as_deref()))?;
    let q = st.queryable_partial(&tenant, partial)?;
    // One deadline for the whole request, waiting for a slot included: the query
    // timeout, as for PromQL queries.
    let timeout = st.config.query.timeout();
    let deadline = tokio::time::Instant::now() + timeout;
    let timed_out = || {
        ApiError::new(
            ErrorKind::Timeout,
            format!(
                "remote read did not finish within {} s (query.timeout_secs); narrow the time range or matchers",
                timeout.as_secs()
            ),
        )
    };
    // Past this point the request stops where it is when the deadline passes: the
    // future is dropped, so no further query starts and no response is built.
    match tokio::time::timeout_at(deadline, serve(&st, q, &headers, body, deadline)).await {
        Ok(r) => r.map_err(TextError),
        Err(_) => Err(TextError(timed_out())),
    }
}

async fn serve(
    st: &AppState,
    q: Arc<dyn Queryable>,
    headers: &HeaderMap,
    body: Body,
    deadline: tokio::time::Instant,
) -> Result<Response, ApiError> {
    // The body is read before taking a slot, so a client that sends it slowly (or
    // never) holds no slot, only its connection, until the deadline.
    let body = read_bounded(headers, body, &BodyLimit::request(st.config.limits.max_request_bytes)).await?;
    let _slot = tokio::time::timeout_at(deadline, st.read_slots.acquire())
        .await
        .map_err(|_| {
            let mut e = ApiError::new(
                ErrorKind::Timeout,
                format!(
                    "no remote-read slot became free before the deadline (query.timeout_secs): {} requests are \
                     being served (limits.max_concurrent_reads)",
                    st.config.limits.max_concurrent_reads
                ),
            );
            e.retry_after_secs = Some(5);
            e
        })?
        .map_err(|_| ApiError::unavailable("server is shutting down"))?;
    let limits = st.config.limits.clone();
    // Decompression and decoding are CPU work proportional to the body: off the runtime.
    let max_queries = limits.max_read_queries_per_request;
    let req = tokio::task::spawn_blocking(move || decode_request(&body, &limits))
        .await
        .map_err(|e| ApiError::internal(format!("decode task failed: {e}")))??;
    if req.queries.len() > max_queries {
        return Err(ApiError::bad_data(format!(
            "remote read request has {} queries, more than the limit of {max_queries} (limits.max_read_queries_per_request)",
            req.queries.len()
        )));
    }
    if !req.accepted_response_types.is_empty() && !req.accepted_response_types.contains(&(ResponseType::Samples as i32))
    {
        return Err(ApiError::bad_data(
            "none of the accepted response types is supported: this server answers SAMPLES only",
        ));
    }

    // Queries run one after another: each already fans out over every shard, and the
    // response must keep the request's order anyway. Reading, building and encoding the
    // response is blocking and CPU work: off the runtime, in one go. Storage stops at
    // the deadline, or when this future is dropped (the guard raises the flag).
    let (ctl, _cancel_on_drop) = crate::shards::request_controls(deadline.into_std());
    let (compressed, warnings) = tokio::task::spawn_blocking(move || -> Result<(Vec<u8>, Vec<String>), ApiError> {
        let mut results = Vec::with_capacity(req.queries.len());
        let mut warnings: Vec<String> = Vec::new();
        let mut total = 0usize;
        for rq in &req.queries {
            let matchers: Vec<Matcher> = rq.matchers.iter().map(to_matcher).collect::<Result<_, _>>()?;
            let hints = SelectHints::range(rq.start_timestamp_ms, rq.end_timestamp_ms);
            // Remote read has no warnings field: a partial answer's warnings (cluster,
            // `partial_response=true`) go into `Warning` headers.
            let read = q.select(&matchers, &hints, &ctl).map_err(ApiError::from)?;
            for w in read.warnings {
                if !warnings.contains(&w) {
                    warnings.push(w);
                }
            }
            let series = read.data;
            total += series.iter().map(|s| s.samples.len()).sum::<usize>();
            if total > MAX_READ_SAMPLES {
                return Err(ApiError::new(
                    ErrorKind::Execution,
                    format!(
                        "remote read would return more than {MAX_READ_SAMPLES} samples; narrow the time range or matchers"
                    ),
                ));
            }
            let timeseries = series
                .into_iter()
                .map(|s| prometheus::TimeSeries {
                    labels: s.labels.into_vec().into_iter().map(|l| prometheus::Label::new(l.name.into_string(), l.value.into_string())).collect(),
                    samples: s.samples.iter().map(|p| prometheus::Sample { value: p.v, timestamp: p.t }).collect(),
                    ..Default::default()
                })
                .collect();
            results.push(prometheus::QueryResult { timeseries });
        }
        let encoded = prometheus::ReadResponse { results }.encode_to_vec();
        let compressed = snap::raw::Encoder::new()
            .compress_vec(&encoded)
            .map_err(|e| ApiError::internal(format!("snappy compression of the response failed: {e}")))?;
        Ok((compressed, warnings))
    })
    .await
    .map_err(|e| ApiError::internal(format!("remote read task failed: {e}")))??;
    let mut resp = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-protobuf"), (header::CONTENT_ENCODING, "snappy")],
        Bytes::from(compressed),
    )
        .into_response();
    for w in warnings {
        if let Ok(v) = header::HeaderValue::from_str(&warning_header(&w)) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    Ok(resp)
}

/// One warning as an RFC 7234 `Warning` header value (code 299, "miscellaneous
/// persistent warning"), its text as a quoted string with control characters dropped.
pub fn warning_header(text: &str) -> String {
    let clean: String =
        text.chars().filter(|c| !c.is_control()).map(|c| if c == '"' || c == '\\' { '\'' } else { c }).collect();
    format!("299 tessera \"{clean}\"")
}

/// Decompresses and decodes a remote-read request body (a fuzz target), under the same
/// decoded-memory bound as remote write, checked before decoding.
pub fn decode_request(body: &[u8], limits: &crate::config::Limits) -> Result<prometheus::ReadRequest, ApiError> {
    let raw = decode::decompress(body, limits.max_decompressed_bytes)?;
    let not_protobuf =
        |e: &dyn std::fmt::Display| ApiError::bad_data(format!("body is not a valid prometheus.ReadRequest: {e}"));
    decode::Budget::new(limits.max_decoded_bytes_per_request)
        .charge(decode::wire_cost(&raw, decode::READ_REQUEST).map_err(|e| not_protobuf(&e))?)?;
    prometheus::ReadRequest::decode(raw).map_err(|e| not_protobuf(&e))
}

fn to_matcher(m: &prometheus::LabelMatcher) -> Result<Matcher, ApiError> {
    let op = match label_matcher::Type::try_from(m.r#type) {
        Ok(label_matcher::Type::Eq) => MatchOp::Equal,
        Ok(label_matcher::Type::Neq) => MatchOp::NotEqual,
        Ok(label_matcher::Type::Re) => MatchOp::Regex,
        Ok(label_matcher::Type::Nre) => MatchOp::NotRegex,
        Err(_) => return Err(ApiError::bad_data(format!("unknown matcher type {}", m.r#type))),
    };
    Matcher::new(&m.name, op, &m.value).map_err(ApiError::from)
}

#[cfg(test)]
mod tests;

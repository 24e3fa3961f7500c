//! `POST /api/v1/write`: remote write 1.0 and 2.0, the HTTP side only.
//!
//! The handler negotiates the message from the headers (415), refuses cheaply what needs
//! no body (a bad tenant, a server still replaying: 503), reads the body under the size
//! limit (413, after reading and discarding the rest so the sender sees it), hands it to
//! the [`Distributor`](crate::distributor::Distributor), which runs the write pipeline,
//! and answers 204 or the distributor's error mapped by `crate::error` (400 naming the
//! first offending series, 413, 429 + Retry-After, 503, 500), with the 2.0
//! `X-Prometheus-Remote-Write-*-Written` headers on success and failure alike.

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;

use super::{params, AppState};
use crate::distributor::WriteOutcome;
use crate::error::{ApiError, ErrorKind};
use crate::ingest::decode::{self, Version};

pub async fn remote_write(State(st): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let header_str = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let version = match decode::negotiate(header_str(header::CONTENT_TYPE), header_str(header::CONTENT_ENCODING)) {
        Ok(v) => v,
        Err(e) => return e.into_text_response(),
    };
    let (mut resp, written) = match write(&st, &headers, version, body).await {
        Ok(written) => (StatusCode::NO_CONTENT.into_response(), written),
        Err((e, written)) => {
            if e.kind == ErrorKind::Internal || e.kind == ErrorKind::Unavailable {
                tracing::warn!(error = %e, "remote write failed");
            }
            (e.into_text_response(), written)
        }
    };
    // 2.0 receivers MUST send these on success and failure alike; for 1.0 they would be
    // meaningless to the sender (it must not interpret them), so they are omitted.
    if version == Version::V2 {
        let h = resp.headers_mut();
        h.insert("X-Prometheus-Remote-Write-Samples-Written", HeaderValue::from(written.samples));
        h.insert("X-Prometheus-Remote-Write-Histograms-Written", HeaderValue::from(written.histograms));
        h.insert("X-Prometheus-Remote-Write-Exemplars-Written", HeaderValue::from(written.exemplars));
    }
    resp
}

/// Reads the request and calls the distributor; on failure, also what was written.
async fn write(
    st: &AppState,
    headers: &HeaderMap,
    version: Version,
    body: Body,
) -> Result<WriteOutcome, (ApiError, WriteOutcome)> {
    let nothing = |e: ApiError| (e, WriteOutcome::default());
    // Cheap refusals first: a bad tenant or a server still replaying costs no body read.
    let tenant = params::tenant(headers).map_err(nothing)?;
    let writer = st.writer().map_err(|e| nothing(e.into()))?;
    let body = read_body(headers, body, st.config.limits.max_request_bytes).await.map_err(nothing)?;
    st.distributor.push(&*writer, &tenant, version, body).await.map_err(|e| {
        let written = WriteOutcome { samples: e.written(), ..WriteOutcome::default() };
        (ApiError::from(e), written)
    })
}

/// How many bytes of an oversized body are read and discarded before the 413 is sent,
/// as a multiple of the limit, and for how long at most. A client that is still sending
/// when the server answers and closes gets a connection reset instead of the 413
/// (Prometheus then retries the request forever); reading the rest first lets the
/// answer reach it. Beyond these bounds the server answers and closes anyway.
const DRAIN_LIMIT_FACTOR: u64 = 4;
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(10);

/// Reads the body, refusing more than `max` bytes with 413. An oversized body is read
/// and discarded (up to [`DRAIN_LIMIT_FACTOR`] × `max`, within [`DRAIN_TIME`]) before
/// answering, unless the client waits for `100 Continue` (then it has sent nothing).
pub(super) async fn read_body(headers: &HeaderMap, mut body: Body, max: usize) -> Result<bytes::Bytes, ApiError> {
    let too_large = |n: String| {
        ApiError::new(
            ErrorKind::TooLarge,
            format!("request body {n}is larger than the limit of {max} bytes (limits.max_request_bytes)"),
        )
    };
    let drain_limit = (max as u64).saturating_mul(DRAIN_LIMIT_FACTOR);
    if let Some(len) =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok())
    {
        if len > max as u64 {
            let expects_continue =
                headers.get(header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
            if !expects_continue && len <= drain_limit {
                drain(body, drain_limit).await;
            }
            return Err(too_large(format!("of {len} bytes ")));
        }
    }
    let mut out = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::bad_data(format!("cannot read request body: {e}")))?;
        let Ok(data) = frame.into_data() else { continue };
        if out.len() + data.len() > max {
            drain(body, drain_limit.saturating_sub((out.len() + data.len()) as u64)).await;
            return Err(too_large(String::new()));
        }
        out.extend_from_slice(&data);
    }
    Ok(out.freeze())
}

/// Reads and discards up to `limit` more bytes of `body`, for at most [`DRAIN_TIME`].
async fn drain(mut body: Body, limit: u64) {
    let discard = async {
        let mut seen = 0u64;
        while let Some(Ok(frame)) = body.frame().await {
            if let Some(d) = frame.data_ref() {
                seen += d.len() as u64;
                if seen > limit {
                    break;
                }
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, discard).await;
}

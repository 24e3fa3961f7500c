//! `POST /api/v1/write`: remote write 1.0 and 2.0, the HTTP side only.
//!
//! The handler negotiates the message from the headers (415), refuses cheaply what needs
//! no body (a bad tenant, a server still replaying: 503), reads the body under the size
//! limit (413, after reading and discarding the rest so the sender sees it; `body.rs`), hands it to
//! the [`Distributor`](crate::distributor::Distributor), which runs the write pipeline,
//! and answers 204 or the distributor's error mapped by `crate::error` (400 naming the
//! first offending series, 413, 429 + Retry-After, 503, 500), with the 2.0
//! `X-Prometheus-Remote-Write-*-Written` headers on success and failure alike.

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::body::{read_bounded, BodyLimit};
use super::{params, AppState};
use crate::distributor::WriteOutcome;
use crate::error::{ApiError, ErrorKind};
use crate::ingest::decode::{self, Version};

pub async fn remote_write(State(st): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let header_str = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let version = match decode::negotiate(header_str(header::CONTENT_TYPE), header_str(header::CONTENT_ENCODING)) {
        Ok(v) => v,
        Err(e) => return ApiError::from(e).into_text_response(),
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
    let body =
        read_bounded(headers, body, &BodyLimit::request(st.config.limits.max_request_bytes)).await.map_err(nothing)?;
    st.distributor.push(&*writer, &tenant, version, body).await.map_err(|e| {
        let written = WriteOutcome { samples: e.written(), ..WriteOutcome::default() };
        (ApiError::from(e), written)
    })
}

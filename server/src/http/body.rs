//! The one bounded body reader of every endpoint: remote write and read bodies and the
//! form bodies of the JSON API.
//!
//! Guarantees: at most `max` bytes are kept; a larger body is refused with 413 (kind
//! `TooLarge`), naming the limit's config key. Before answering, the rest of an
//! oversized body is read and discarded, up to [`DRAIN_LIMIT_FACTOR`] × `max` bytes and
//! for at most [`DRAIN_TIME`]: a client that is still sending when the server answers
//! and closes gets a connection reset instead of the 413 (Prometheus then retries the
//! write forever; a dashboard shows a network error). Beyond these bounds the server
//! answers and closes anyway, so a sender cannot hold the connection by streaming. A
//! client that waits for `100 Continue` has sent nothing, so nothing is drained.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap};
use http_body_util::BodyExt;

use crate::error::{ApiError, ErrorKind};

/// How many bytes of an oversized body are read and discarded before the 413 is sent,
/// as a multiple of the limit.
const DRAIN_LIMIT_FACTOR: u64 = 4;
/// How long, at most, an oversized body is drained before the 413 is sent.
const DRAIN_TIME: Duration = Duration::from_secs(10);

/// The bound on one body, and the words its 413 uses.
pub struct BodyLimit {
    /// Most bytes accepted.
    pub max: usize,
    /// What is being read, e.g. `request body` or `form body`.
    pub what: &'static str,
    /// The config key (or rule) the limit comes from, e.g. `limits.max_request_bytes`.
    pub key: &'static str,
}

impl BodyLimit {
    /// A remote write or read body: `limits.max_request_bytes`, as sent (compressed).
    pub fn request(max: usize) -> Self {
        BodyLimit { max, what: "request body", key: "limits.max_request_bytes" }
    }

    /// A JSON endpoint's form body (`QueryLimits::max_form_bytes`).
    pub fn form(max: usize) -> Self {
        BodyLimit { max, what: "form body", key: "4 x query.max_query_bytes + 64 KiB" }
    }

    /// 413 naming the limit; `declared` is the Content-Length when it was known.
    fn too_large(&self, declared: Option<u64>) -> ApiError {
        let size = declared.map(|n| format!(" of {n} bytes")).unwrap_or_default();
        ApiError::new(
            ErrorKind::TooLarge,
            format!("{}{size} is larger than the limit of {} bytes ({})", self.what, self.max, self.key),
        )
    }
}

/// Reads `body`, refusing more than `limit.max` bytes with 413 after draining (see the
/// module doc). A body that fails mid-read is 400.
pub async fn read_bounded(headers: &HeaderMap, mut body: Body, limit: &BodyLimit) -> Result<Bytes, ApiError> {
    let max = limit.max as u64;
    let drain_limit = max.saturating_mul(DRAIN_LIMIT_FACTOR);
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if let Some(len) = declared.filter(|&len| len > max) {
        let expects_continue =
            headers.get(header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        if !expects_continue && len <= drain_limit {
            drain(body, drain_limit).await;
        }
        return Err(limit.too_large(Some(len)));
    }
    let mut out = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::bad_data(format!("cannot read {}: {e}", limit.what)))?;
        let Ok(data) = frame.into_data() else { continue };
        let seen = (out.len() + data.len()) as u64;
        if seen > max {
            drain(body, drain_limit.saturating_sub(seen)).await;
            return Err(limit.too_large(None));
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

#[cfg(test)]
mod tests;

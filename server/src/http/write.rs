//! `POST /api/v1/write`: remote write 1.0 and 2.0.
//!
//! The request's journey: negotiate the message from the headers (415) → read the body
//! under the size limit (413, after reading and discarding the rest so the sender sees
//! it) → on a blocking thread, snappy-decompress, protobuf-decode under the decoded-
//! memory budget and validate each series (`ingest::decode`, 400 for request-level
//! garbage, 413 over a budget), refuse samples outside the time window
//! (`ingest::window`) → rate
//! and series limits (429) → `Shards::push`, which splits the series per shard and
//! appends the parts in parallel, returning when all are durable (5xx on storage
//! failure) → 204, or 400/429 naming the first offending series when anything was not
//! written. Valid series of a request with invalid ones are still written, as both
//! specs allow; a retry of the whole request is harmless because re-sent samples are
//! idempotent in storage.

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tessera_storage::Label;

use super::{params, AppState};
use crate::error::{ApiError, ErrorKind};
use crate::ingest::decode::{self, Batch, Version};
use crate::ingest::window::{self, Window};
use crate::shards::{series_hash, PushSeries};

/// What was written, for the 2.0 `X-Prometheus-Remote-Write-*-Written` headers.
#[derive(Default)]
struct Written {
    samples: u64,
    histograms: u64,
    exemplars: u64,
}

pub async fn remote_write(State(st): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let header_str = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let version = match decode::negotiate(header_str(header::CONTENT_TYPE), header_str(header::CONTENT_ENCODING)) {
        Ok(v) => v,
        Err(e) => return e.into_text_response(),
    };
    let mut written = Written::default();
    let mut resp = match write(&st, &headers, version, body, &mut written).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => {
            if e.kind == ErrorKind::Internal || e.kind == ErrorKind::Unavailable {
                tracing::warn!(error = %e, "remote write failed");
            }
            e.into_text_response()
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

async fn write(
    st: &AppState,
    headers: &HeaderMap,
    version: Version,
    body: Body,
    written: &mut Written,
) -> Result<(), ApiError> {
    // Cheap refusals first: a bad tenant or a server still replaying costs no body read.
    let tenant = params::tenant(headers)?;
    let shards = st.shards()?;
    let limits = &st.config.limits;
    let body = read_body(headers, body, limits.max_request_bytes).await?;

    // Wait for room under the in-flight memory bound. The snappy header states the
    // decompressed size; a lying or broken header is caught by `decode` below, and the
    // per-request limit is enforced there too, so clamp rather than refuse here.
    let claimed = snap::raw::decompress_len(&body).unwrap_or(body.len()).min(limits.max_decompressed_bytes);
    let kib = u32::try_from(claimed.div_ceil(1024).max(1)).unwrap_or(u32::MAX);
    let sem = Arc::clone(&st.inflight_write_kib);
    let admitted =
        Arc::clone(&sem).acquire_many_owned(kib).await.map_err(|_| ApiError::unavailable("server is shutting down"))?;

    // Everything proportional to the request runs off the runtime, on one blocking
    // thread: decompression, decoding and validation, the time-window filter, the shard
    // hashes and recording metadata. Decoded memory takes further in-flight permits as
    // it is charged; all of them are held until the request is written.
    let lim = limits.clone();
    let window = Window::at(now_ms(), st.config.max_sample_age_ms(), limits.max_future_secs);
    let state = Arc::clone(st);
    let t = tenant.clone();
    let prepared = tokio::task::spawn_blocking(move || -> Result<_, ApiError> {
        let mut budget = decode::Budget::with_inflight(lim.max_decoded_bytes_per_request, sem, admitted);
        let mut batch = decode::decode_within(version, &body, &lim, &mut budget)?;
        drop(body);
        let invalid = batch.problems.samples();
        let refused = window::filter(&mut batch, window);
        let hashes: Vec<u64> = batch.series.iter().map(|s| series_hash(&t, &s.labels)).collect();
        state.metadata.record(&t, std::mem::take(&mut batch.metadata));
        Ok((batch, invalid, refused, hashes, budget.into_permit()))
    });
    let (batch, invalid, refused, hashes, _inflight) =
        prepared.await.map_err(|e| ApiError::internal(format!("decode task failed: {e}")))??;

    let m = &st.metrics;
    m.samples_received.fetch_add(batch.samples_total, Ordering::Relaxed);
    if invalid > 0 {
        m.samples_rejected.inc_by(&["invalid_series"], invalid);
    }
    if refused.too_new > 0 {
        m.samples_rejected.inc_by(&["too_far_in_future"], refused.too_new);
    }
    if refused.too_old > 0 {
        m.samples_rejected.inc_by(&["too_far_in_past"], refused.too_old);
    }
    let Batch { series, mut problems, series_total, samples_total, .. } = batch;

    // Rate limit: all or nothing, so a 429 never leaves a half-written request.
    let valid_samples: u64 = series.iter().map(|s| s.samples.len() as u64).sum();
    if let Err(wait) = st.rate_limiter.try_take(&tenant, valid_samples) {
        m.samples_rejected.inc_by(&["rate_limited"], valid_samples);
        return Err(ApiError::too_many_requests(
            format!(
                "ingestion rate limit of {} samples/s exceeded for tenant {tenant:?} (limits.ingestion_rate_samples_per_sec); \
                 no sample of this request was written",
                limits.ingestion_rate_samples_per_sec
            ),
            wait,
        ));
    }

    // Active-series cap: samples of known series pass, new series beyond the cap do not.
    // The shard hash doubles as the series identity of the limiter.
    let mut push = Vec::with_capacity(series.len());
    let mut order = Vec::with_capacity(series.len());
    let mut series_limited = false;
    let admitted = st.active_series.admit(&tenant, &hashes);
    for ((s, hash), ok) in series.into_iter().zip(hashes).zip(admitted) {
        if !ok {
            series_limited = true;
            let n = s.samples.len() as u64;
            m.samples_rejected.inc_by(&["series_limit"], n);
            problems.add(
                s.index,
                n,
                || describe_labels(&s.labels),
                || {
                    format!(
                        "tenant {tenant:?} already has the maximum of {} active series (limits.max_active_series_per_tenant); \
                         samples of this new series were not written",
                        limits.max_active_series_per_tenant
                    )
                },
            );
            continue;
        }
        order.push(s.index);
        push.push(PushSeries { labels: s.labels, samples: s.samples, hash });
    }

    if !push.is_empty() {
        let pushed: u64 = push.iter().map(|s| s.samples.len() as u64).sum();
        let outcome = match shards.push(&tenant, push).await {
            Ok(o) => o,
            Err(e) => {
                m.samples_rejected.inc_by(&["storage_error"], pushed);
                return Err(e);
            }
        };
        for (shard, secs) in &outcome.shard_seconds {
            m.storage_append_duration.observe(&[&shard.to_string()], *secs);
        }
        m.samples_written.fetch_add(outcome.accepted, Ordering::Relaxed);
        written.samples = outcome.accepted;
        if outcome.rejected_too_old > 0 {
            m.samples_rejected.inc_by(&["too_old"], outcome.rejected_too_old);
        }
        if outcome.rejected_duplicate > 0 {
            m.samples_rejected.inc_by(&["duplicate"], outcome.rejected_duplicate);
        }
        if let Some(first) = outcome.first_rejection {
            problems.add(
                order[first.index],
                outcome.rejected_too_old + outcome.rejected_duplicate,
                || describe_labels(&first.labels),
                || format!("sample at t={} ms not written: {}", first.t, first.reason),
            );
        }
    }

    // Name the first offending series in request order.
    let Some(first) = problems.first() else { return Ok(()) };
    let message = format!(
        "series {}: {} ({} of {} series had problems; {} of {} float samples in this request were written)",
        first.series,
        first.reason,
        problems.series_count(),
        series_total,
        written.samples,
        samples_total
    );
    // A 429 invites a retry (the new series may fit later); a 400 says never retry.
    if series_limited {
        Err(ApiError::too_many_requests(message, st.active_series.retry_after_secs()))
    } else {
        Err(ApiError::bad_data(message))
    }
}

/// Prometheus' text form of a validated label set, for error messages.
fn describe_labels(labels: &[Label]) -> String {
    crate::ingest::validate::describe(labels.iter().map(|l| (l.name.as_bytes(), l.value.as_bytes())))
}

/// The server's clock in milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

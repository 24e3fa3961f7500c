//! `POST /api/v1/write`: remote write 1.0 and 2.0.
//!
//! The request's journey: negotiate the message from the headers (415) → read the body
//! under the size limit (413) → on a blocking thread, snappy-decompress, protobuf-decode
//! and validate each series (`ingest::decode`, 400 for request-level garbage) → rate
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
use http_body_util::{BodyExt, LengthLimitError, Limited};
use std::sync::atomic::Ordering;
use tessera_storage::Label;

use super::{params, AppState};
use crate::error::{ApiError, ErrorKind};
use crate::ingest::decode::{self, Problem, Version};
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

/// Reads the body, refusing more than `max` bytes with 413.
pub(super) async fn read_body(headers: &HeaderMap, body: Body, max: usize) -> Result<bytes::Bytes, ApiError> {
    let too_large = |n: String| {
        ApiError::new(ErrorKind::TooLarge, format!("request body {n}is larger than the limit of {max} bytes (limits.max_request_bytes)"))
    };
    if let Some(len) = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok()) {
        if len > max as u64 {
            return Err(too_large(format!("of {len} bytes ")));
        }
    }
    match Limited::new(body, max).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(too_large(String::new())),
        Err(e) => Err(ApiError::bad_data(format!("cannot read request body: {e}"))),
    }
}

async fn write(st: &AppState, headers: &HeaderMap, version: Version, body: Body, written: &mut Written) -> Result<(), ApiError> {
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
    let _inflight = st
        .inflight_write_kib
        .acquire_many(kib)
        .await
        .map_err(|_| ApiError::unavailable("server is shutting down"))?;

    // Decompression and decoding are CPU work proportional to the body: off the runtime.
    let lim = limits.clone();
    let mut batch = tokio::task::spawn_blocking(move || decode::decode(version, &body, &lim))
        .await
        .map_err(|e| ApiError::internal(format!("decode task failed: {e}")))??;

    let m = &st.metrics;
    m.samples_received.fetch_add(batch.samples_total, Ordering::Relaxed);
    st.metadata.record(&tenant, batch.metadata);
    let mut problems: Vec<Problem> = batch.problems;
    let invalid: u64 = problems.iter().map(|p| p.samples).sum();
    if invalid > 0 {
        m.samples_rejected.inc_by(&["invalid_series"], invalid);
    }

    // Samples dated too far ahead are refused per sample; the rest of the series is kept.
    if limits.max_future_secs > 0 {
        let max_t = now_ms().saturating_add((limits.max_future_secs as i64).saturating_mul(1000));
        let mut future = 0u64;
        let mut emptied = Vec::new();
        for s in &mut batch.series {
            let before = s.samples.len();
            let first = s.samples.iter().find(|x| x.t > max_t).map(|x| x.t);
            s.samples.retain(|x| x.t <= max_t);
            let dropped = (before - s.samples.len()) as u64;
            if let Some(t) = first {
                future += dropped;
                if s.samples.is_empty() {
                    emptied.push(s.index);
                }
                problems.push(Problem {
                    index: s.index,
                    series: describe_labels(&s.labels),
                    reason: format!(
                        "sample at t={t} ms is too far in the future: at most {} s ahead of the server clock \
                         is accepted (limits.max_future_secs)",
                        limits.max_future_secs
                    ),
                    samples: dropped,
                });
            }
        }
        if future > 0 {
            m.samples_rejected.inc_by(&["too_far_in_future"], future);
        }
        // A series all of whose samples were refused is not created either.
        batch.series.retain(|s| !emptied.contains(&s.index));
    }

    // Rate limit: all or nothing, so a 429 never leaves a half-written request.
    let valid_samples: u64 = batch.series.iter().map(|s| s.samples.len() as u64).sum();
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
    let mut push = Vec::with_capacity(batch.series.len());
    let mut order = Vec::with_capacity(batch.series.len());
    let mut series_limited = false;
    // The shard hash doubles as the series identity of the active-series limiter, so it
    // is computed once per series and handed to `push`.
    let hashes: Vec<u64> = batch.series.iter().map(|s| series_hash(&tenant, &s.labels)).collect();
    let admitted = st.active_series.admit(&tenant, &hashes);
    for ((s, hash), ok) in batch.series.into_iter().zip(hashes).zip(admitted) {
        if !ok {
            series_limited = true;
            m.samples_rejected.inc_by(&["series_limit"], s.samples.len() as u64);
            problems.push(Problem {
                index: s.index,
                series: describe_labels(&s.labels),
                reason: format!(
                    "tenant {tenant:?} already has the maximum of {} active series (limits.max_active_series_per_tenant); \
                     samples of this new series were not written",
                    limits.max_active_series_per_tenant
                ),
                samples: s.samples.len() as u64,
            });
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
            problems.push(Problem {
                index: order[first.index],
                series: describe_labels(&first.labels),
                reason: format!("sample at t={} ms not written: {}", first.t, first.reason),
                samples: outcome.rejected_too_old + outcome.rejected_duplicate,
            });
        }
    }

    if problems.is_empty() {
        return Ok(());
    }
    // Name the first offending series in request order.
    let first = problems.iter().min_by_key(|p| p.index).expect("problems is not empty");
    let mut bad_series: Vec<usize> = problems.iter().map(|p| p.index).collect();
    bad_series.sort_unstable();
    bad_series.dedup();
    let message = format!(
        "series {}: {} ({} of {} series had problems; {} of {} float samples in this request were written)",
        first.series,
        first.reason,
        bad_series.len(),
        batch.series_total,
        written.samples,
        batch.samples_total
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

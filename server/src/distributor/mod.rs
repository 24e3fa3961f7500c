//! The distributor: the write pipeline every front end shares, out of the HTTP handler.
//!
//! [`Distributor::push`] takes one encoded remote-write body (1.0 or 2.0) for a tenant
//! and runs the whole pipeline: admission under the in-flight memory bound → on one
//! blocking thread, snappy-decompress, decode under the decoded-memory budget and
//! validate each series (`ingest::decode`), refuse samples outside the time window
//! (`ingest::window`), hash each series to its logical shard and record metadata (or
//! hand it to a writer that forwards it to a cluster's ingesters) → the tenant's rate
//! limit (all or nothing) → the active-series cap (per series) → the
//! [`ShardWriter`], which appends every shard's part and returns when all are durable →
//! the outcome, or an [`IngestError`] naming the first offending series in request
//! order. Valid series of a request with invalid ones are still written, as both
//! remote-write specs allow; a retry of the whole request is harmless because re-sent
//! samples are idempotent in storage.
//!
//! It knows no protocol: [`IngestError`] is mapped to HTTP in `crate::error` (one
//! function), and to gRPC status codes next to it when a gRPC front end arrives. The
//! shards are reached through [`ShardWriter`] only, so a writer that forwards to remote
//! ingesters can take the local shards' place.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use tessera_model::Label;
use tokio::sync::Semaphore;

pub mod series_refs;

use crate::config::{Config, Limits};
use crate::ingest::decode::{self, Batch, DecodeError, SeriesName, Version};
use crate::ingest::limits::{ActiveSeries, RateLimiter};
use crate::ingest::window::{self, Window};
use crate::metadata::{MetadataEntry, MetadataStore};
use crate::metrics::Metrics;
use crate::shards::{
    series_hash_pairs, PushOutcome, PushSeries, ShardError, ShardErrorKind, Shards, WriteLabels, WriteSeries,
};
use series_refs::{SeriesRef, SeriesRefs};

/// Where the distributor sends validated series: the local shards, or (in cluster
/// mode) the ingesters that own them.
pub trait ShardWriter: Send + Sync {
    /// Writes `series` (each with its [`series_hash`](crate::shards::series_hash)) for `tenant`; returns when every
    /// part is durable. Per-sample refusals are in the outcome; `Err` means a shard
    /// could not take its part.
    fn push<'a>(&'a self, tenant: &'a str, series: Vec<PushSeries>) -> BoxFuture<'a, Result<PushOutcome, ShardError>>;

    /// [`ShardWriter::push`] of series with compact labels, which is what the
    /// distributor sends. By default the labels are made owned and `push` is called;
    /// the local shards store them without that copy.
    fn push_compact<'a>(
        &'a self,
        tenant: &'a str,
        series: Vec<WriteSeries>,
    ) -> BoxFuture<'a, Result<PushOutcome, ShardError>> {
        match series.into_iter().map(WriteSeries::into_push_series).collect::<Option<Vec<_>>>() {
            Some(owned) => self.push(tenant, owned),
            None => Box::pin(async {
                Err(ShardError::internal("a series named by id reached a writer that takes labels only"))
            }),
        }
    }

    /// Whether [`ShardWriter::push_compact`] takes series named by the id their shard
    /// gave them ([`WriteLabels::Id`]); only the local shards do. Default: no.
    fn takes_ids(&self) -> bool {
        false
    }

    /// Whether metric metadata travels with the writes to where the series live (a
    /// cluster's ingesters, which then answer `/api/v1/metadata`) instead of staying in
    /// this process' [`MetadataStore`]. Default: it stays.
    fn forwards_metadata(&self) -> bool {
        false
    }

    /// [`ShardWriter::push`] plus the request's `metadata` (in request order), durable
    /// under the same rule as the series. Called only when
    /// [`ShardWriter::forwards_metadata`] says so; the default writes the series only.
    fn push_with_metadata<'a>(
        &'a self,
        tenant: &'a str,
        series: Vec<PushSeries>,
        _metadata: Vec<(String, MetadataEntry)>,
    ) -> BoxFuture<'a, Result<PushOutcome, ShardError>> {
        self.push(tenant, series)
    }
}

impl ShardWriter for Shards {
    fn push<'a>(&'a self, tenant: &'a str, series: Vec<PushSeries>) -> BoxFuture<'a, Result<PushOutcome, ShardError>> {
        Box::pin(Shards::push(self, tenant, series))
    }

    fn push_compact<'a>(
        &'a self,
        tenant: &'a str,
        series: Vec<WriteSeries>,
    ) -> BoxFuture<'a, Result<PushOutcome, ShardError>> {
        Box::pin(Shards::push_compact_before(self, tenant, series, None))
    }

    fn takes_ids(&self) -> bool {
        true
    }
}

/// Why a write was not (fully) done, in the write path's own terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IngestError {
    /// The body cannot be decoded or breaks a request-level rule; a retry will fail too.
    #[error("{0}")]
    Invalid(String),
    /// The body, decompressed or decoded, is over a per-request limit.
    #[error("{0}")]
    TooLarge(String),
    /// The tenant is over its ingestion rate; nothing of the request was written.
    #[error("{message}")]
    RateLimited { message: String, retry_after_secs: u64 },
    /// Some series or samples were not written (invalid, outside the time window, or
    /// refused by storage); the rest were. `written` float samples were stored.
    #[error("{message}")]
    Rejected { message: String, written: u64 },
    /// As `Rejected`, and among the refused series are new ones over the tenant's
    /// active-series cap, which may fit later: the sender should retry.
    #[error("{message}")]
    SeriesLimited { message: String, written: u64, retry_after_secs: u64 },
    /// Cannot write now: not ready, shutting down, the in-flight memory bound is full,
    /// or a shard is unavailable (poisoned, busy, not served here).
    #[error("{message}")]
    Unavailable { message: String, retry_after_secs: Option<u64> },
    /// A storage failure not known to pass (corruption, a failing disk) or a bug.
    #[error("{0}")]
    Internal(String),
}

impl IngestError {
    /// Float samples written before the request was refused, for the 2.0
    /// `X-Prometheus-Remote-Write-Samples-Written` header.
    pub fn written(&self) -> u64 {
        match self {
            IngestError::Rejected { written, .. } | IngestError::SeriesLimited { written, .. } => *written,
            _ => 0,
        }
    }
}

impl From<ShardError> for IngestError {
    fn from(e: ShardError) -> Self {
        match e.kind {
            ShardErrorKind::BadData => IngestError::Invalid(e.message),
            ShardErrorKind::Internal => IngestError::Internal(e.message),
            // A write has no deadline or cancel flag; should one stop it, the sender's
            // retry is the right answer.
            ShardErrorKind::Unavailable | ShardErrorKind::Timeout | ShardErrorKind::Canceled => {
                IngestError::Unavailable { message: e.message, retry_after_secs: e.retry_after_secs }
            }
        }
    }
}

impl From<DecodeError> for IngestError {
    /// The request-level refusals of `ingest::decode`, in the write path's terms.
    fn from(e: DecodeError) -> Self {
        match e {
            // The front end negotiates the message before the distributor sees a body, so
            // an unsupported one cannot reach here; should it, a retry fails too.
            DecodeError::Unsupported(message) | DecodeError::Invalid(message) => IngestError::Invalid(message),
            DecodeError::TooLarge(message) => IngestError::TooLarge(message),
            DecodeError::Busy { message, retry_after_secs } => {
                IngestError::Unavailable { message, retry_after_secs: Some(retry_after_secs) }
            }
        }
    }
}

/// What a successful write stored, for the 2.0 `X-Prometheus-Remote-Write-*-Written`
/// headers.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WriteOutcome {
    pub samples: u64,
    pub histograms: u64,
    pub exemplars: u64,
}

/// The write pipeline and its per-process state (limits, the in-flight memory bound).
pub struct Distributor {
    limits: Limits,
    /// Oldest accepted sample age, ms (`None` = unbounded); see `Config::max_sample_age_ms`.
    max_sample_age_ms: Option<i64>,
    rate_limiter: RateLimiter,
    active_series: Arc<ActiveSeries>,
    /// Admission of write requests by decompressed size, one permit per KiB (see
    /// `limits.max_inflight_write_bytes`); decoding charges its memory here too (see
    /// `ingest::decode::Budget`).
    inflight_write_kib: Arc<Semaphore>,
    metadata: Arc<MetadataStore>,
    metrics: Arc<Metrics>,
    /// Ids of series written before, by the label bytes their sender names them with.
    series_refs: Arc<SeriesRefs>,
}

impl Distributor {
    pub fn new(
        config: &Config,
        active_series: Arc<ActiveSeries>,
        metadata: Arc<MetadataStore>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Distributor {
            limits: config.limits.clone(),
            max_sample_age_ms: config.max_sample_age_ms(),
            rate_limiter: RateLimiter::new(&config.limits),
            active_series,
            // One spare permit: a request's body and its decoded memory are each rounded
            // up to whole KiB, so the largest request allowed by `Config::validate` fits.
            inflight_write_kib: Arc::new(Semaphore::new(config.limits.max_inflight_write_bytes.div_ceil(1024) + 1)),
            metadata,
            metrics,
            series_refs: Arc::new(SeriesRefs::new()),
        }
    }

    /// Writes one remote-write body of `version` for `tenant` through `writer` (see the
    /// module doc for the pipeline).
    pub async fn push(
        &self,
        writer: &dyn ShardWriter,
        tenant: &str,
        version: Version,
        body: Bytes,
    ) -> Result<WriteOutcome, IngestError> {
        let limits = &self.limits;
        // Wait for room under the in-flight memory bound. The snappy header states the
        // decompressed size; a lying or broken header is caught by `decode` below, and
        // the per-request limit is enforced there too, so clamp rather than refuse here.
        let claimed = snap::raw::decompress_len(&body).unwrap_or(body.len()).min(limits.max_decompressed_bytes);
        let kib = u32::try_from(claimed.div_ceil(1024).max(1)).unwrap_or(u32::MAX);
        let sem = Arc::clone(&self.inflight_write_kib);
        let admitted = Arc::clone(&sem).acquire_many_owned(kib).await.map_err(|_| IngestError::Unavailable {
            message: "server is shutting down".into(),
            retry_after_secs: None,
        })?;

        // Everything proportional to the request runs off the runtime, on one blocking
        // thread: decompression, decoding and validation, the time-window filter, the
        // shard hashes and recording metadata. Decoded memory takes further in-flight
        // permits as it is charged; all of them are held until the request is written.
        let lim = limits.clone();
        let window = Window::at(now_ms(), self.max_sample_age_ms, limits.max_future_secs);
        let metadata = Arc::clone(&self.metadata);
        let forward_metadata = writer.forwards_metadata();
        // Series named by remembered label bytes are written by id (remote write 1.0 to
        // the local shards; see `series_refs`).
        let refs = (writer.takes_ids() && version == Version::V1).then(|| Arc::clone(&self.series_refs));
        let t = tenant.to_owned();
        let prepared = tokio::task::spawn_blocking(move || -> Result<_, IngestError> {
            let mut budget = decode::Budget::with_inflight(lim.max_decoded_bytes_per_request, sem, admitted);
            let reader = refs.as_ref().map(|r| {
                r.sweep_if_due();
                r.reader(&t)
            });
            let mut batch = decode::decode_within(version, &body, &lim, &mut budget, reader.as_ref())?;
            drop(reader);
            drop(body);
            let invalid = batch.problems.samples();
            let refused = window::filter(&mut batch, window);
            let mut scratch = Vec::new();
            let hashes: Vec<u64> = batch
                .series
                .iter()
                .map(|s| match &s.name {
                    SeriesName::Labels(l, _) => series_hash_pairs(&t, l.iter(), &mut scratch),
                    SeriesName::Known { r, .. } => r.hash,
                })
                .collect();
            let entries = std::mem::take(&mut batch.metadata);
            let forwarded = if forward_metadata {
                entries
            } else {
                metadata.record(&t, entries);
                Vec::new()
            };
            Ok((batch, invalid, refused, hashes, forwarded, budget.into_permit()))
        });
        let (batch, invalid, refused, hashes, forwarded, _inflight) =
            prepared.await.map_err(|e| IngestError::Internal(format!("decode task failed: {e}")))??;

        let m = &self.metrics;
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
        let Batch { series, mut problems, series_total, samples_total, raw, .. } = batch;

        // Rate limit: all or nothing, so a 429 never leaves a half-written request.
        let valid_samples: u64 = series.iter().map(|s| s.samples.len() as u64).sum();
        if let Err(wait) = self.rate_limiter.try_take(tenant, valid_samples) {
            m.samples_rejected.inc_by(&["rate_limited"], valid_samples);
            return Err(IngestError::RateLimited {
                message: format!(
                    "ingestion rate limit of {} samples/s exceeded for tenant {tenant:?} (limits.ingestion_rate_samples_per_sec); \
                     no sample of this request was written",
                    limits.ingestion_rate_samples_per_sec
                ),
                retry_after_secs: wait,
            });
        }

        // Active-series cap: samples of known series pass, new series beyond the cap do
        // not. The shard hash doubles as the series identity of the limiter.
        let mut push = Vec::with_capacity(series.len());
        let mut pushed_info: Vec<Pushed> = Vec::with_capacity(series.len());
        let mut series_limited = false;
        let admitted = self.active_series.admit(tenant, &hashes);
        for ((s, hash), ok) in series.into_iter().zip(hashes).zip(admitted) {
            if !ok {
                series_limited = true;
                let n = s.samples.len() as u64;
                m.samples_rejected.inc_by(&["series_limit"], n);
                problems.add(
                    s.index,
                    n,
                    || decode::describe_series(&raw, &s),
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
            let (labels, key) = match s.name {
                SeriesName::Labels(l, key) => (WriteLabels::Labels(l), key),
                SeriesName::Known { key, r } => (WriteLabels::Id(r.id), Some(key)),
            };
            pushed_info.push(Pushed { index: s.index, key, hash, wire: s.wire });
            push.push(WriteSeries { labels, samples: s.samples, hash });
        }

        let mut written = WriteOutcome::default();
        if !push.is_empty() || !forwarded.is_empty() {
            let pushed: u64 = push.iter().map(|s| s.samples.len() as u64).sum();
            let write = if forwarded.is_empty() {
                writer.push_compact(tenant, push)
            } else {
                // Only the local shards take ids, and they keep metadata here.
                let Some(owned) = push.into_iter().map(WriteSeries::into_push_series).collect::<Option<Vec<_>>>()
                else {
                    return Err(IngestError::Internal(
                        "a series named by id reached a metadata-forwarding writer".into(),
                    ));
                };
                writer.push_with_metadata(tenant, owned, forwarded)
            };
            let mut outcome = match write.await {
                Ok(o) => o,
                Err(e) => {
                    m.samples_rejected.inc_by(&["storage_error"], pushed);
                    return Err(e.into());
                }
            };
            // Series the shards no longer hold by id (they went idle and left the head):
            // sent again with their labels, read again from the request.
            let mut forgotten = Vec::new();
            if !outcome.unknown_ids.is_empty() {
                let mut again = Vec::with_capacity(outcome.unknown_ids.len());
                for (i, samples) in std::mem::take(&mut outcome.unknown_ids) {
                    let info = &pushed_info[i];
                    forgotten.extend(info.key);
                    match decode::known_series_labels(&raw, info.wire.clone(), limits) {
                        Ok(l) => {
                            again.push((i, WriteSeries { labels: WriteLabels::Labels(l), samples, hash: info.hash }))
                        }
                        Err(reason) => {
                            let n = samples.len() as u64;
                            m.samples_rejected.inc_by(&["invalid_series"], n);
                            problems.add(info.index, n, || decode::describe_wire(&raw, info.wire.clone()), || reason);
                        }
                    }
                }
                let (order, series): (Vec<usize>, Vec<WriteSeries>) = again.into_iter().unzip();
                let retried: u64 = series.iter().map(|s| s.samples.len() as u64).sum();
                let second = match writer.push_compact(tenant, series).await {
                    Ok(o) => o,
                    Err(e) => {
                        m.samples_rejected.inc_by(&["storage_error"], retried);
                        return Err(e.into());
                    }
                };
                outcome.merge(second, &order);
            }
            if let Some(refs) = writer.takes_ids().then_some(&self.series_refs) {
                let learned: Vec<(u128, SeriesRef)> = outcome
                    .ids
                    .iter()
                    .filter_map(|&(i, id)| {
                        let info = &pushed_info[i];
                        info.key.map(|k| (k, SeriesRef { hash: info.hash, id }))
                    })
                    .collect();
                if !learned.is_empty() || !forgotten.is_empty() {
                    // The write lock waits for requests being decoded, and inserting may
                    // grow a map of a million entries: off the runtime.
                    let (refs, tenant) = (Arc::clone(refs), tenant.to_owned());
                    tokio::task::spawn_blocking(move || refs.update(&tenant, &learned, &forgotten))
                        .await
                        .map_err(|e| IngestError::Internal(format!("remembering series failed: {e}")))?;
                }
                let (entries, bytes) = refs.size();
                m.series_remembered.store(entries as u64, Ordering::Relaxed);
                m.series_remembered_bytes.store(bytes as u64, Ordering::Relaxed);
            }
            for (shard, secs) in &outcome.shard_seconds {
                m.storage_append_duration.observe(&[&shard.to_string()], *secs);
            }
            m.samples_written.fetch_add(outcome.accepted, Ordering::Relaxed);
            written.samples = outcome.accepted;
            for (reason, n) in [
                ("too_old", outcome.rejected_too_old),
                ("duplicate", outcome.rejected_duplicate),
                ("unreadable", outcome.rejected_unreadable),
            ] {
                if n > 0 {
                    m.samples_rejected.inc_by(&[reason], n);
                }
            }
            if let Some(first) = outcome.first_rejection {
                let Pushed { index, ref wire, .. } = pushed_info[first.index];
                problems.add(
                    index,
                    outcome.rejected_too_old + outcome.rejected_duplicate + outcome.rejected_unreadable,
                    || {
                        if first.labels.is_empty() {
                            decode::describe_wire(&raw, wire.clone())
                        } else {
                            describe_labels(&first.labels)
                        }
                    },
                    || format!("sample at t={} ms not written: {}", first.t, first.reason),
                );
            }
        }

        // Name the first offending series in request order.
        let Some(first) = problems.first() else { return Ok(written) };
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
            Err(IngestError::SeriesLimited {
                message,
                written: written.samples,
                retry_after_secs: self.active_series.retry_after_secs(),
            })
        } else {
            Err(IngestError::Rejected { message, written: written.samples })
        }
    }
}

/// Prometheus' text form of a validated label set, for error messages.
fn describe_labels(labels: &[Label]) -> String {
    crate::ingest::validate::describe(labels.iter().map(|l| (l.name.as_bytes(), l.value.as_bytes())))
}

/// What the distributor keeps of each series it pushes.
struct Pushed {
    /// Position in the request.
    index: usize,
    /// The key its label bytes are remembered under (see `series_refs`).
    key: Option<u128>,
    hash: u64,
    /// Its message in the request (remote write 1.0).
    wire: std::ops::Range<usize>,
}

/// The server's clock in milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests;

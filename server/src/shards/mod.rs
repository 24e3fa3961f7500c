//! `Shards`: the S local storage engines of an all-in-one node, and the ONE place that
//! knows about tenancy.
//!
//! Tenancy is encoded in storage as the reserved label `__tenant__="<tenant>"`, added to
//! every stored series. This module adds it on every write, adds a
//! `__tenant__="<tenant>"` matcher to every read, and strips it from every output
//! (series labels, label names, label values), so no other code (HTTP handlers, the
//! PromQL engine) ever sees it. Users may not send a label or a matcher named
//! `__tenant__`; the validators refuse both.
//!
//! Concurrency: the storage engines are synchronous and block on disk. Writes come from
//! the async side: [`Shards::push`] hands each shard's part to `spawn_blocking`, bounded
//! by the write semaphore. Reads come from blocking threads (query threads, the blocking
//! pool) through [`TenantView`]: [`Shards::select`] and the index reads run the shards'
//! parts in parallel on scoped threads, each part holding one of the process's read
//! slots ([`ReadSlots`], waited for until the request's deadline or cancel), so a burst
//! of reads runs at most that many storage reads at once and never holds up a write.

mod error;
mod hash;
mod read_slots;
mod tenant_view;

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tessera_model::{Label, Labels, Matcher, Sample};
use tessera_storage::{
    Decode, EncodedAppend, Engine, EngineConfig, Interrupt, RefAppend, RejectReason, SeriesChunks, SeriesCursor,
    SeriesSamples, Stats,
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::ingest::series_labels::SeriesLabels;
use crate::ingest::Samples;

pub use error::{classify, ShardError, ShardErrorKind};
pub use hash::{series_hash, series_hash_pairs, shard_of};
use read_slots::ReadSlots;
pub use tenant_view::TenantView;

/// Result of a call on the shards.
pub type Result<T, E = ShardError> = std::result::Result<T, E>;

/// A logical shard: the value of [`shard_of`]`(hash, S)` for the series it holds, and
/// the number in its directory name (`shard-NNNN`). It names the same shard in every
/// process, so an ingester can own a subset of the ids and shards can move between
/// processes; it is never a position in a local list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardId(pub u32);

impl ShardId {
    /// The shard of a series hash among `total` logical shards (`total` > 0).
    pub fn of(hash: u64, total: u32) -> ShardId {
        // `shard_of` is below `total`, which is a u32.
        ShardId(u32::try_from(shard_of(hash, total as usize)).unwrap_or(u32::MAX))
    }
}

impl std::fmt::Display for ShardId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The reserved label that carries the tenant inside storage.
pub const TENANT_LABEL: &str = "__tenant__";
/// Tenant used when a request has no `X-Scope-OrgID` header.
pub const DEFAULT_TENANT: &str = "anonymous";

/// One validated series to write: `labels` sorted by name, without `__tenant__`, and
/// `hash` = [`series_hash`]`(tenant, labels)`.
#[derive(Debug, Clone)]
pub struct PushSeries {
    pub labels: Vec<Label>,
    pub samples: Vec<Sample>,
    pub hash: u64,
}

/// [`PushSeries`] with its labels in the write path's compact form (see
/// [`SeriesLabels`]): what the distributor hands to [`Shards::push_compact_before`].
#[derive(Debug, Clone)]
pub struct WriteSeries {
    pub labels: WriteLabels,
    pub samples: Samples,
    pub hash: u64,
}

/// How a [`WriteSeries`] names its series.
#[derive(Debug, Clone)]
pub enum WriteLabels {
    Labels(SeriesLabels),
    /// The id the series' shard gave it ([`PushOutcome::ids`]); only the local shards
    /// take these.
    Id(u32),
}

impl WriteSeries {
    /// The series with owned labels, for writers that forward those; `None` for a
    /// series named by id.
    pub fn into_push_series(self) -> Option<PushSeries> {
        match self.labels {
            WriteLabels::Labels(l) => {
                Some(PushSeries { labels: l.to_labels(), samples: self.samples.into_vec(), hash: self.hash })
            }
            WriteLabels::Id(_) => None,
        }
    }
}

/// What happened to a push, summed over shards.
#[derive(Debug, Default)]
pub struct PushOutcome {
    /// Samples the storage accepted (newly stored or identical re-sends).
    pub accepted: u64,
    /// Samples newly stored.
    pub appended: u64,
    pub rejected_too_old: u64,
    pub rejected_duplicate: u64,
    /// Samples of series whose stored chunks cannot be read (storage damage).
    pub rejected_unreadable: u64,
    /// The first rejected sample in request order.
    pub first_rejection: Option<FirstRejection>,
    /// Wall time of each shard's append (shard, seconds), for the latency histogram.
    pub shard_seconds: Vec<(ShardId, f64)>,
    /// (index into the pushed series, id its shard gave it) of each series pushed with
    /// labels, for naming it by id next time ([`WriteLabels::Id`]).
    pub ids: Vec<(usize, u32)>,
    /// Series pushed by id whose shard no longer holds that id in its head, with their
    /// samples given back (index into the pushed series, samples): nothing of them was
    /// written; push them again with labels.
    pub unknown_ids: Vec<(usize, Samples)>,
}

impl PushOutcome {
    /// Adds the outcome of a second push of some of the same series, `order[i]` being
    /// the index in this push of that push's series `i`.
    pub fn merge(&mut self, other: PushOutcome, order: &[usize]) {
        self.accepted += other.accepted;
        self.appended += other.appended;
        self.rejected_too_old += other.rejected_too_old;
        self.rejected_duplicate += other.rejected_duplicate;
        self.rejected_unreadable += other.rejected_unreadable;
        self.shard_seconds.extend(other.shard_seconds);
        self.ids.extend(other.ids.into_iter().map(|(i, id)| (order[i], id)));
        self.unknown_ids.extend(other.unknown_ids.into_iter().map(|(i, s)| (order[i], s)));
        if let Some(mut first) = other.first_rejection {
            first.index = order[first.index];
            if self.first_rejection.as_ref().is_none_or(|f| first.index < f.index) {
                self.first_rejection = Some(first);
            }
        }
    }
}

/// The first sample storage refused in a push, for the 400 message.
#[derive(Debug, Clone)]
pub struct FirstRejection {
    /// Index into the pushed series.
    pub index: usize,
    /// The series' labels (without the tenant label).
    pub labels: Vec<Label>,
    /// Timestamp of the refused sample, ms.
    pub t: i64,
    pub reason: RejectReason,
}

/// The shards this process serves, keyed by their logical [`ShardId`]: all S of them in
/// an all-in-one node, a subset in an ingester. Cheap to share as `Arc<Shards>`.
pub struct Shards {
    engines: BTreeMap<ShardId, Arc<Engine>>,
    /// S, the number of logical shards of the whole data set (the modulus of
    /// [`shard_of`]); not the number of engines here.
    total: u32,
    /// Bounds the storage reads (one per shard part) running at once (see the module doc).
    read_slots: ReadSlots,
    /// Bounds concurrent appends, separately: a flood of reads holding every read
    /// slot must never delay an acknowledged write (measured: a one-sample write
    /// waited 560 ms behind a flood of index calls when both shared one pool).
    write_permits: Arc<Semaphore>,
}

impl Shards {
    /// Opens (and WAL-replays) all `count` logical shards under `data_dir/shard-NNNN`.
    /// Blocking: call it from a blocking thread. Shards open in parallel on a few
    /// threads; `on_open` is called after each one (for progress logging) with (shard
    /// id, engine). `permits` storage reads and as many appends may run at once.
    pub fn open(
        data_dir: &Path,
        count: usize,
        cfg: &EngineConfig,
        permits: usize,
        on_open: &(dyn Fn(usize, &Engine) + Sync),
    ) -> std::result::Result<Shards, tessera_storage::Error> {
        let total = u32::try_from(count)
            .map_err(|_| tessera_storage::Error::InvalidConfig(format!("{count} shards is more than {}", u32::MAX)))?;
        let ids: Vec<ShardId> = (0..total).map(ShardId).collect();
        Self::open_ids(data_dir, total, &ids, cfg, permits, on_open)
    }

    /// Opens only the shards `ids` of `total` logical shards, as a process that owns a
    /// subset of them does. A push of a series whose shard is not among them is refused
    /// (unavailable: another process serves it); reads see only these shards.
    pub fn open_ids(
        data_dir: &Path,
        total: u32,
        ids: &[ShardId],
        cfg: &EngineConfig,
        permits: usize,
        on_open: &(dyn Fn(usize, &Engine) + Sync),
    ) -> std::result::Result<Shards, tessera_storage::Error> {
        if let Some(bad) = ids.iter().find(|id| id.0 >= total) {
            return Err(tessera_storage::Error::InvalidConfig(format!(
                "shard {bad} does not exist among {total} logical shards"
            )));
        }
        // Opening is mostly disk reads and WAL decoding; a few threads overlap the I/O
        // without oversubscribing a small machine.
        let count = ids.len();
        let threads = count.clamp(1, 4);
        let next = AtomicUsize::new(0);
        let mut slots: Vec<Option<std::result::Result<Engine, tessera_storage::Error>>> =
            (0..count).map(|_| None).collect();
        let results = parking_lot::Mutex::new(&mut slots);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        break;
                    }
                    let id = ids[i];
                    let dir = data_dir.join(format!("shard-{:04}", id.0));
                    let r = Engine::open(&dir, cfg.clone());
                    if let Ok(e) = &r {
                        log_replay_damage(id, e);
                        on_open(id.0 as usize, e);
                    }
                    results.lock()[i] = Some(r);
                });
            }
        });
        let mut engines = BTreeMap::new();
        for (id, r) in ids.iter().zip(slots) {
            let engine = r.expect("every shard below count was claimed by a thread")?;
            engines.insert(*id, Arc::new(engine));
        }
        Ok(Shards {
            engines,
            total,
            read_slots: ReadSlots::new(permits),
            write_permits: Arc::new(Semaphore::new(permits.max(1))),
        })
    }

    /// Shards served by this process.
    pub fn len(&self) -> usize {
        self.engines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.engines.is_empty()
    }

    /// S, the number of logical shards of the data set (served here or not).
    pub fn total(&self) -> u32 {
        self.total
    }

    /// The ids of the shards served here, ascending.
    pub fn ids(&self) -> impl Iterator<Item = ShardId> + '_ {
        self.engines.keys().copied()
    }

    /// Per-shard engine counters (cheap, no disk I/O beyond RocksDB properties).
    pub fn stats(&self) -> Vec<(ShardId, Stats)> {
        self.engines.iter().map(|(id, e)| (*id, e.stats())).collect()
    }

    /// Storage reads running now (each holds a read slot).
    pub fn reads_in_flight(&self) -> usize {
        self.read_slots.in_use()
    }

    /// A synchronous, tenant-scoped view for the PromQL engine.
    pub fn tenant_view(self: &Arc<Self>, tenant: &str) -> TenantView {
        TenantView::new(Arc::clone(self), tenant)
    }

    /// A permit for one append.
    async fn write_permit(&self) -> Result<OwnedSemaphorePermit> {
        Arc::clone(&self.write_permits).acquire_owned().await.map_err(|_| ShardError::shutting_down())
    }

    /// Takes every append permit, stalling appends until the returned permit drops (a
    /// test's stand-in for a busy storage).
    #[cfg(test)]
    pub(crate) async fn stall_appends(&self) -> OwnedSemaphorePermit {
        let n = u32::try_from(self.write_permits.available_permits()).unwrap_or(u32::MAX);
        Arc::clone(&self.write_permits).acquire_many_owned(n).await.expect("the permits are never closed in tests")
    }

    /// The engine of shard `id`, if this process serves it.
    fn engine(&self, id: ShardId) -> Result<&Arc<Engine>> {
        self.engines
            .get(&id)
            .ok_or_else(|| ShardError::unavailable(format!("shard {id} is not served by this process")))
    }

    /// Runs `f` on shard `id`'s engine on the blocking pool, holding a write permit.
    async fn on_shard<T, F>(&self, id: ShardId, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Engine) -> std::result::Result<T, tessera_storage::Error> + Send + 'static,
    {
        let engine = Arc::clone(self.engine(id)?);
        let permit = self.write_permit().await?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            f(&engine)
        })
        .await
        .map_err(|e| ShardError::internal(format!("storage task of shard {id} failed: {e}")))?
        .map_err(|e| ShardError::from_storage(Some(id), &e))
    }

    /// Writes `series` for `tenant`. Each shard's part is appended in parallel; returns
    /// only when every part is durable (or failed). A storage failure of any shard is
    /// an `Err` (the sender retries; re-sent samples are idempotent no-ops). A series
    /// whose shard is not served here fails the whole push before anything is written.
    pub async fn push(&self, tenant: &str, series: Vec<PushSeries>) -> Result<PushOutcome> {
        self.push_before(tenant, series, None).await
    }

    /// [`Shards::push`] that starts no shard's append after `deadline`: a part still
    /// waiting for a storage permit or a blocking thread then fails with
    /// [`ShardErrorKind::Timeout`] and writes nothing. An append that has started runs
    /// to completion (it is durable or fails as usual), however late.
    pub async fn push_before(
        &self,
        tenant: &str,
        series: Vec<PushSeries>,
        deadline: Option<Instant>,
    ) -> Result<PushOutcome> {
        let series = series
            .into_iter()
            .map(|s| WriteSeries {
                labels: WriteLabels::Labels(SeriesLabels::from_labels(&s.labels)),
                samples: Samples::from_vec(s.samples),
                hash: s.hash,
            })
            .collect();
        self.push_compact_before(tenant, series, deadline).await
    }

    /// [`Shards::push_before`] of series whose labels are already compact, as the
    /// distributor decodes them (it passes no deadline): each shard's part builds its
    /// stored label encodings (tenant label included) in one buffer on its storage
    /// thread, with no allocation per series.
    pub async fn push_compact_before(
        &self,
        tenant: &str,
        series: Vec<WriteSeries>,
        deadline: Option<Instant>,
    ) -> Result<PushOutcome> {
        if self.total == 0 {
            return Err(ShardError::unavailable("no shards are configured"));
        }
        // Per shard: the indexes (into `series`) of its series, in request order.
        let mut parts: BTreeMap<ShardId, Vec<usize>> = BTreeMap::new();
        for (i, s) in series.iter().enumerate() {
            parts.entry(ShardId::of(s.hash, self.total)).or_default().push(i);
        }
        for id in parts.keys() {
            self.engine(*id)?;
        }
        let total: u64 = series.iter().map(|s| s.samples.len() as u64).sum();
        let series = Arc::new(series);
        let tenant: Arc<str> = Arc::from(tenant);
        let mut tasks = Vec::with_capacity(parts.len());
        for (shard, idx) in parts {
            let series = Arc::clone(&series);
            let tenant = Arc::clone(&tenant);
            tasks.push(async move {
                let queued = Instant::now();
                let appended = self
                    .on_shard(shard, move |engine| {
                        // The last moment before anything is written: a caller that has
                        // given up gets nothing appended.
                        if deadline.is_some_and(|d| Instant::now() >= d) {
                            return Ok(None);
                        }
                        // Labelled series (encoded with the tenant into one buffer) and
                        // those named by id; `idx` is reordered to the engine's batch order,
                        // labelled first.
                        let mut labelled = Vec::with_capacity(idx.len());
                        let mut by_id = Vec::new();
                        let mut refs = Vec::new();
                        let label_bytes = |l: &WriteLabels| match l {
                            WriteLabels::Labels(l) => l.heap_bytes() + 24, // + the tenant label
                            WriteLabels::Id(_) => 0,
                        };
                        let mut buf = Vec::with_capacity(idx.iter().map(|&i| label_bytes(&series[i].labels)).sum());
                        let mut ends = Vec::with_capacity(idx.len());
                        for &i in &idx {
                            match &series[i].labels {
                                WriteLabels::Labels(l) => {
                                    l.encode_with_tenant(&tenant, &mut buf);
                                    ends.push(buf.len());
                                    labelled.push(i);
                                }
                                WriteLabels::Id(id) => {
                                    refs.push(RefAppend { id: *id, samples: &series[i].samples });
                                    by_id.push(i);
                                }
                            }
                        }
                        let mut start = 0;
                        let batch: Vec<EncodedAppend<'_>> = labelled
                            .iter()
                            .zip(ends)
                            .map(|(&i, end)| {
                                let labels = &buf[start..end];
                                start = end;
                                EncodedAppend { labels, samples: &series[i].samples }
                            })
                            .collect();
                        let begin = Instant::now();
                        let report = engine.append_with_refs(&batch, &refs)?;
                        let mut idx = labelled;
                        idx.extend(by_id);
                        Ok(Some((idx, report, begin.elapsed().as_secs_f64())))
                    })
                    .await?;
                let Some((idx, report, secs)) = appended else {
                    return Err(ShardError::new(
                        ShardErrorKind::Timeout,
                        format!(
                            "shard {shard}: the caller's deadline passed after {} ms waiting for a storage permit; \
                             nothing of this part was written",
                            queued.elapsed().as_millis()
                        ),
                    ));
                };
                Ok::<_, ShardError>((shard, idx, report, secs))
            });
        }
        let mut out = PushOutcome::default();
        let mut first_err = None;
        let mut unknown = Vec::new();
        for r in futures::future::join_all(tasks).await {
            match r {
                Ok((shard, idx, report, secs)) => {
                    out.shard_seconds.push((shard, secs));
                    out.ids.extend(report.ids.iter().zip(&idx).filter_map(|(id, &i)| id.map(|id| (i, id))));
                    let labelled = report.ids.len();
                    unknown.extend(report.unknown_refs.iter().map(|&j| idx[labelled + j]));
                    out.appended += report.appended;
                    out.rejected_too_old += report.rejected_too_old;
                    out.rejected_duplicate += report.rejected_duplicate;
                    out.rejected_unreadable += report.rejected_unreadable;
                    if let Some(rej) = report.first_rejection {
                        let orig = idx[rej.series_index];
                        if out.first_rejection.as_ref().is_none_or(|f| orig < f.index) {
                            // Owned labels only for this one series, never on the happy path;
                            // a series named by id is described by the caller.
                            let labels = match &series[orig].labels {
                                WriteLabels::Labels(l) => l.to_labels(),
                                WriteLabels::Id(_) => Vec::new(),
                            };
                            out.first_rejection =
                                Some(FirstRejection { index: orig, labels, t: rej.t, reason: rej.reason });
                        }
                    }
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        let not_found: u64 = unknown.iter().map(|&i| series[i].samples.len() as u64).sum();
        out.accepted = total - not_found - out.rejected_too_old - out.rejected_duplicate - out.rejected_unreadable;
        // Every task has ended, so `series` is ours again: give the samples back.
        out.unknown_ids = match Arc::try_unwrap(series) {
            Ok(mut all) => unknown.into_iter().map(|i| (i, std::mem::take(&mut all[i].samples))).collect(),
            Err(shared) => unknown.into_iter().map(|i| (i, shared[i].samples.clone())).collect(),
        };
        Ok(out)
    }

    /// Series of `tenant` matching `matchers` with their samples in `[mint, maxt]` (ms),
    /// sorted by labels, tenant label stripped. Every read of the shards reads the shards
    /// `only` (a pushed-down fragment's group), or every local shard when `None`. Blocking (see [`Shards::read_all`]); the
    /// storage scans stop when `stop` fires.
    pub fn select(
        &self,
        only: Option<&[ShardId]>,
        tenant: &str,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        stop: &Interrupt,
    ) -> Result<Vec<SeriesSamples>> {
        let ms = tenant_matchers(tenant, matchers)?;
        let parts = self.read_all(only, stop, |e, stop| e.select_until(&ms, mint, maxt, stop))?;
        let mut out: Vec<SeriesSamples> = parts.into_iter().flatten().collect();
        for s in &mut out {
            s.labels = strip_tenant(std::mem::take(&mut s.labels));
        }
        out.sort_by(|a, b| a.labels.cmp(&b.labels));
        Ok(out)
    }

    /// [`Shards::select`] one series at a time, for PromQL's series-at-a-time path
    /// (`tessera_query::Queryable::select_stream`). Each shard in scope resolves its
    /// matching series and their labels now, one after the other under one read slot
    /// each; the stream then reads the shards one after the other, each in storage
    /// order (not label order: see `tessera_storage::SeriesCursor`), each
    /// series' chunks read and decoded only when the stream is asked for it, under a
    /// read slot held for that one series. So the stream holds every matched series'
    /// labels and one series' samples, never a slot between items, and a slow consumer
    /// never keeps other reads waiting. `decode` says what is decoded of each sample;
    /// `only_labels`, when set, the only labels each series comes with; `together`,
    /// whether each shard's series with the same timestamps may come one after another
    /// (`tessera_storage::SeriesCursor::same_times_together`). Blocking; stops when
    /// `stop` fires.
    #[allow(clippy::too_many_arguments)]
    pub fn select_stream(
        &self,
        only: Option<&[ShardId]>,
        tenant: &str,
        matchers: &[Matcher],
        (mint, maxt): (i64, i64),
        decode: Decode,
        only_labels: Option<&[String]>,
        together: bool,
        stop: Interrupt,
    ) -> Result<SelectStream<'_>> {
        let ms = tenant_matchers(tenant, matchers)?;
        let ids: Vec<ShardId> = match only {
            Some(ids) => ids.to_vec(),
            None => self.engines.keys().copied().collect(),
        };
        let mut cursors = VecDeque::with_capacity(ids.len());
        for id in ids {
            let engine = self.engine(id)?;
            let _slot = self.read_slots.acquire(&stop)?;
            let mut cursor = engine.select_cursor(&ms, mint, maxt, &stop).map_err(|e| read_error(id, &e))?;
            cursor.relabel(strip_tenant);
            cursor.decode(decode);
            if let Some(names) = only_labels {
                cursor.only_labels(names.to_vec());
            }
            if together {
                cursor.same_times_together();
            }
            cursors.push_back((id, cursor));
        }
        Ok(SelectStream { shards: self, cursors, stop })
    }

    /// Like [`Shards::select`], but each series' stored chunks as encoded (see
    /// `Engine::select_chunks_until`), for the cluster's Select: sorted by labels within
    /// each shard's part, tenant label stripped.
    pub fn select_chunks(
        &self,
        tenant: &str,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        stop: &Interrupt,
    ) -> Result<Vec<SeriesChunks>> {
        let ms = tenant_matchers(tenant, matchers)?;
        let parts = self.read_all(None, stop, |e, stop| e.select_chunks_until(&ms, mint, maxt, stop))?;
        let mut out: Vec<SeriesChunks> = parts.into_iter().flatten().collect();
        for s in &mut out {
            s.labels = strip_tenant(std::mem::take(&mut s.labels));
        }
        Ok(out)
    }

    /// Label sets of `tenant`'s series matching `matchers` with data in `[mint, maxt]`.
    /// Blocking; the index scans stop when `stop` fires.
    pub fn series(
        &self,
        only: Option<&[ShardId]>,
        tenant: &str,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        stop: &Interrupt,
    ) -> Result<Vec<Labels>> {
        let ms = tenant_matchers(tenant, matchers)?;
        let parts = self.read_all(only, stop, |e, stop| e.series_until(&ms, mint, maxt, stop))?;
        let mut out: Vec<Labels> = parts.into_iter().flatten().map(strip_tenant).collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Label names used by `tenant`'s series matching `matchers` in `[mint, maxt]`,
    /// sorted. Blocking; the index scans stop when `stop` fires.
    pub fn label_names(
        &self,
        only: Option<&[ShardId]>,
        tenant: &str,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        stop: &Interrupt,
    ) -> Result<Vec<String>> {
        let ms = tenant_matchers(tenant, matchers)?;
        let parts = self.read_all(only, stop, |e, stop| e.label_names_until(&ms, mint, maxt, stop))?;
        let mut out: Vec<String> = parts.into_iter().flatten().filter(|n| n != TENANT_LABEL).collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Values of label `name` among `tenant`'s series matching `matchers`, sorted.
    /// Blocking; the index scans stop when `stop` fires.
    // The label name, the scope and the five arguments every read takes.
    #[allow(clippy::too_many_arguments)]
    pub fn label_values(
        &self,
        only: Option<&[ShardId]>,
        tenant: &str,
        name: &str,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        stop: &Interrupt,
    ) -> Result<Vec<String>> {
        if name == TENANT_LABEL {
            // The tenant label is invisible; answering it would leak tenant names.
            return Ok(Vec::new());
        }
        let ms = tenant_matchers(tenant, matchers)?;
        let parts = self.read_all(only, stop, |e, stop| e.label_values_until(name, &ms, mint, maxt, stop))?;
        let mut out: Vec<String> = parts.into_iter().flatten().collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Shard `id`'s time bounds (see `Engine::time_bounds`); `None` when it is empty or
    /// not served here. Takes the head lock only.
    pub fn time_bounds(&self, id: ShardId) -> Option<(i64, i64)> {
        self.engines.get(&id)?.time_bounds()
    }

    /// Shard `id`'s newest sample written or replayed in this process, if any.
    pub fn head_max_t(&self, id: ShardId) -> Option<i64> {
        self.engines.get(&id)?.head_max_t()
    }

    /// Every series of shard `id`, of every tenant, with its samples in `[mint, maxt]`;
    /// labels keep `__tenant__` (the repair stream between the replicas of a shard
    /// carries all tenants). Blocking; holds one read slot; stops when `stop` fires.
    pub fn select_shard(&self, id: ShardId, mint: i64, maxt: i64, stop: &Interrupt) -> Result<Vec<SeriesSamples>> {
        let engine = self.engine(id)?;
        let all = Matcher::new(TENANT_LABEL, tessera_model::MatchOp::Regex, ".+")
            .map_err(|e| ShardError::internal(format!("tenant matcher: {e}")))?;
        let _slot = self.read_slots.acquire(stop)?;
        engine.select_until(&[all], mint, maxt, stop).map_err(|e| read_error(id, &e))
    }

    /// Flushes every shard (head chunks to RocksDB). Blocking: call from a blocking
    /// thread (shutdown does).
    pub fn flush_all(&self) -> std::result::Result<(), tessera_storage::Error> {
        let mut first = Ok(());
        for (id, e) in &self.engines {
            if let Err(err) = e.flush() {
                tracing::error!(shard = id.0, error = %err, "flush failed");
                if first.is_ok() {
                    first = Err(err);
                }
            }
        }
        first
    }

    /// Flushes every shard (as [`Shards::flush_all`]), then stops each one's RocksDB
    /// background work, waiting for what runs (`Engine::stop_background_work`): the
    /// last step of a process that exits next, while stray tasks may still hold the
    /// shards. Blocking.
    pub fn flush_for_exit(&self) -> std::result::Result<(), tessera_storage::Error> {
        let flushed = self.flush_all();
        for e in self.engines.values() {
            e.stop_background_work();
        }
        flushed
    }

    /// Drops expired days on every shard (see `Engine::enforce_retention`); failures are
    /// logged per shard and do not stop the others.
    pub fn enforce_retention_all(&self) {
        for (id, e) in &self.engines {
            if let Err(err) = e.enforce_retention() {
                tracing::error!(shard = id.0, error = %err, "retention failed");
            }
        }
    }

    /// Runs `f` on every shard served here (or on the shards `only`, one after the
    /// other on this thread: a fragment's worker) and collects the results in shard order. Blocking: call it from a blocking thread (it needs no runtime). The parts run in
    /// parallel, each on a scoped thread holding one read slot: a part starts only when
    /// a slot is free, so however many reads arrive, at most `permits` storage reads
    /// run at once. Waiting for a slot ends when `stop` fires, and each part gets `stop`.
    fn read_all<T, F>(&self, only: Option<&[ShardId]>, stop: &Interrupt, f: F) -> Result<Vec<T>>
    where
        T: Send,
        F: Fn(&Engine, &Interrupt) -> std::result::Result<T, tessera_storage::Error> + Sync,
    {
        let part = |id: ShardId, e: &Engine| f(e, stop).map_err(|err| read_error(id, &err));
        if let Some(ids) = only {
            let mut out = Vec::with_capacity(ids.len());
            for &id in ids {
                let engine = self.engine(id)?;
                let _slot = self.read_slots.acquire(stop)?;
                out.push(part(id, engine)?);
            }
            return Ok(out);
        }
        let mut engines = self.engines.iter();
        let Some((&last_id, last)) = engines.next_back() else {
            return Ok(Vec::new());
        };
        std::thread::scope(|s| {
            let mut running = Vec::with_capacity(self.engines.len());
            for (&id, e) in engines {
                let slot = self.read_slots.acquire(stop)?;
                let part = &part;
                running.push(s.spawn(move || {
                    let _slot = slot;
                    part(id, e)
                }));
            }
            // The last part runs on this thread.
            let slot = self.read_slots.acquire(stop)?;
            let mine = part(last_id, last);
            drop(slot);
            let mut out = Vec::with_capacity(running.len() + 1);
            for h in running {
                out.push(h.join().map_err(|_| ShardError::internal("a shard's storage read panicked"))??);
            }
            out.push(mine?);
            Ok(out)
        })
    }
}

/// The series of [`Shards::select`], one at a time, shard after shard, each shard's
/// in storage order (tenant label stripped), from [`Shards::select_stream`]. Series with
/// no sample in the range are skipped (by the cursors). After an error the stream ends.
pub struct SelectStream<'a> {
    shards: &'a Shards,
    /// The shards not finished yet, the one being read first.
    cursors: VecDeque<(ShardId, SeriesCursor<'a>)>,
    stop: Interrupt,
}

impl Iterator for SelectStream<'_> {
    type Item = Result<SeriesSamples>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (id, cursor) = self.cursors.front_mut()?;
            let stop = &self.stop;
            let read = self
                .shards
                .read_slots
                .acquire(stop)
                .and_then(|_slot| cursor.read_next(stop).map_err(|e| read_error(*id, &e)));
            match read {
                Ok(Some(s)) => return Some(Ok(s)),
                Ok(None) => {
                    self.cursors.pop_front();
                }
                Err(e) => {
                    self.cursors.clear();
                    return Some(Err(e));
                }
            }
        }
    }
}

/// A storage error of one shard's part of a read: an interrupted scan says where it
/// stopped; everything else is classified as usual.
fn read_error(id: ShardId, e: &tessera_storage::Error) -> ShardError {
    let mut err = ShardError::from_storage(Some(id), e);
    match err.kind {
        ShardErrorKind::Timeout => err.message = format!("timed out in storage (shard {id}): {e}"),
        ShardErrorKind::Canceled => err.message = format!("canceled in storage (shard {id})"),
        _ => {}
    }
    err
}

/// Logs what a shard's WAL replay lost to damage (the engine logs the details too).
fn log_replay_damage(shard: ShardId, engine: &Engine) {
    let r = engine.replay_report();
    if r.found_damage() {
        tracing::error!(
            shard = shard.0,
            damaged_stretches = r.damaged.len(),
            records_dropped = r.records_dropped,
            samples_dropped = r.samples_dropped,
            counts_are_lower_bounds = r.drops_uncounted,
            series_unreadable = r.series_unreadable,
            "WAL replay met damage: the damaged records were skipped, every intact record after them was replayed"
        );
    }
}

/// A read's controls for one request (deadline and cancel flag, for reads through
/// [`tessera_query::Queryable`]): the storage scans stop at `deadline`, or as soon as the
/// returned guard is dropped. Keep the guard in the request handler's future: when the
/// client goes away or the handler gives up (a timeout around it), the guard drops and
/// the scans on the blocking threads stop, releasing their read slots.
pub fn request_controls(deadline: Instant) -> (tessera_query::QueryOptions, CancelOnDrop) {
    let flag = Arc::new(AtomicBool::new(false));
    (
        tessera_query::QueryOptions { deadline: Some(deadline), cancel: Some(Arc::clone(&flag)), ..Default::default() },
        CancelOnDrop(flag),
    )
}

/// Raises a cancel flag when dropped (see [`request_controls`]).
pub struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        // Harmless after the work finished: nobody reads the flag any more.
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Removes the tenant label from a stored label set.
pub fn strip_tenant(labels: Labels) -> Labels {
    labels.without(TENANT_LABEL)
}

/// The user's matchers plus the tenant's equality matcher. A user matcher on
/// `__tenant__` is refused: it could only be an attempt to see another tenant.
pub fn tenant_matchers(tenant: &str, matchers: &[Matcher]) -> Result<Vec<Matcher>> {
    if matchers.iter().any(|m| m.name() == TENANT_LABEL) {
        return Err(ShardError::bad_data(format!("label name {TENANT_LABEL:?} is reserved and cannot be matched")));
    }
    let mut out = Vec::with_capacity(matchers.len() + 1);
    out.push(Matcher::equal(TENANT_LABEL, tenant));
    out.extend(matchers.iter().cloned());
    Ok(out)
}

#[cfg(test)]
mod tests;

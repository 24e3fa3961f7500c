//! The `Engine`: one shard. Glues the WAL, the head, RocksDB and the index together.
//!
//! Write path: `append` → (head lock) resolve/create series, apply samples with
//! Prometheus semantics (`head.rs`) → WAL record written (`wal/`) → RocksDB batch of cut
//! chunks, new series and postings (`persist.rs`) → (head lock released) group-commit fsync
//! → ack. Read path: `select` → day-clamped postings (`index.rs`) → head snapshot →
//! persisted chunks (`read.rs`) → merged, de-duplicated samples.
//!
//! Concurrency: one `parking_lot::Mutex` around the head. The WAL record is written
//! while holding it so WAL order equals head order (replay then reproduces the same
//! decisions), but the fsync is waited for after releasing it, so concurrent appenders
//! queue their records behind one shared fsync instead of one fsync each.
//!
//! Series lifecycle (memory stays proportional to the series in use, not to every
//! series ever created): a series enters the head when it is created or when a write or
//! the WAL replay names a series that exists only in RocksDB (found by hash in
//! `series_by_hash`, or by id in `series`; it keeps its id). Every minute of shard time
//! an idle sweep evicts the series idle for `head_idle_timeout_ms` (or ended by a
//! staleness marker): their open chunks are written to RocksDB in one batch, and only
//! after that write are they dropped from memory. Retention, when it drops whole days,
//! also deletes the `series` and `series_by_hash` records of series that have no
//! postings on any remaining day (all their data is older than retention). Reads of
//! series not in the head take their labels from the `series` column family.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use roaring::RoaringBitmap;
use rocksdb::{WriteBatch, DB};

use crate::config::EngineConfig;
use crate::db::{
    self, Background, CompactionFailure, ALL_CFS, CF_CHUNKS, CF_META, CF_POSTINGS, CF_SERIES, CF_SERIES_BY_HASH,
    CF_SERIES_ENDS,
};
use crate::error::{Error, Result};
use crate::head::{Ctx, Head, Located, MemSeries, Outcome};
use crate::index::{self, Index};
use crate::interrupt::Interrupt;
use crate::keys;
use crate::labels_codec;
use crate::persist::{self, Batch, PostingsFolds};
use crate::read::{self, SeriesCursor};
use crate::types::{
    AppendReport, DamagedFile, EncodedAppend, RefAppend, RejectReason, SeriesAppend, SeriesChunks, SeriesSamples, Stats,
};
use crate::wal::{self, record, Damage, TornTail, Wal};
use tessera_model::{Labels, Matcher, Sample};

#[derive(Default)]
struct Counters {
    samples_appended: AtomicU64,
    rejected_too_old: AtomicU64,
    rejected_duplicate: AtomicU64,
    rejected_unreadable: AtomicU64,
    chunks_written: AtomicU64,
    active_series: AtomicU64,
    total_series: AtomicU64,
    head_series: AtomicU64,
    head_bytes: AtomicU64,
}

/// What `open` found while replaying the WAL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayReport {
    /// Records replayed.
    pub records: u64,
    /// Samples in the records replayed.
    pub samples: u64,
    pub series_created: u64,
    /// Set when the WAL ended in a torn or corrupt record (cut and reported).
    pub torn_tail: Option<TornTail>,
    /// Damaged stretches before the end of the WAL: skipped (never deleted), and every
    /// valid record after each was replayed.
    pub damaged: Vec<Damage>,
    /// Records known lost to `damaged` (frames whose length was intact).
    pub records_dropped: u64,
    /// Samples known lost: those in damaged records whose payload still decodes, plus
    /// samples of valid records whose series was defined in a lost record.
    pub samples_dropped: u64,
    /// Whether some damaged bytes held an unknown number of records, so that
    /// `records_dropped` and `samples_dropped` are lower bounds.
    pub drops_uncounted: bool,
    /// Series whose stored chunks could not be read during replay (storage damage):
    /// their WAL samples were replayed without duplicate checks against those chunks.
    pub series_unreadable: u64,
    /// Series evicted from the head by idle sweeps during the replay.
    pub series_evicted: u64,
}

impl ReplayReport {
    /// Whether replay lost anything or met damage (a torn tail alone is a normal crash).
    pub fn found_damage(&self) -> bool {
        !self.damaged.is_empty() || self.samples_dropped > 0 || self.series_unreadable > 0
    }
}

/// One shard's storage engine. `Send + Sync`; share it as `Arc<Engine>` and call it from
/// blocking threads only.
pub struct Engine {
    dir: PathBuf,
    cfg: EngineConfig,
    db: DB,
    wal: Wal,
    head: Mutex<Head>,
    counters: Counters,
    /// When postings keys' merge operands are folded (see [`PostingsFolds`]); taken
    /// with the head lock held, by the one batch being written.
    postings_folds: Mutex<PostingsFolds>,
    /// Data older than this (ms) is invisible and being dropped (retention).
    watermark: AtomicI64,
    /// Shared with the chunks compaction filter.
    chunk_drop_before: Arc<AtomicI64>,
    /// Whether reads may trust `series_ends` (see `series_ends_complete`).
    ends_complete: bool,
    replay: ReplayReport,
    /// RocksDB's info-log sink: compactions that failed.
    background: Arc<Background>,
    /// Files compactions could not read; their column families' automatic compaction
    /// is stopped (see `handle_background_failures`).
    damaged: Mutex<Vec<DamagedFile>>,
    /// Shard time when the chunks memtable was last written out by age
    /// (`flush_chunks_if_old`); `i64::MIN` until the first append.
    chunks_flushed_at: AtomicI64,
}

impl Engine {
    /// Opens the shard in `dir` (created if missing), loads the series, replays the WAL.
    pub fn open(dir: &Path, config: EngineConfig) -> Result<Engine> {
        config.validate()?;
        let started = Instant::now();
        std::fs::create_dir_all(dir).map_err(Error::io("create data dir", dir))?;
        let chunk_drop_before = Arc::new(AtomicI64::new(i64::MIN));
        let background = Arc::new(Background::new(&dir.join("db")));
        let db = db::open(&dir.join("db"), &config, Arc::clone(&chunk_drop_before), Arc::clone(&background))?;
        let watermark = load_meta(&db)?;
        let ends_complete = series_ends_complete(&db)?;
        let lookback = chunk_lookback(&config);
        chunk_drop_before.store(watermark.saturating_sub(lookback), Ordering::Relaxed);
        let (head, stored_series) = load_head(&db)?;
        tracing::info!(dir = %dir.display(), series = stored_series, next_id = head.next_id, "storage: opened series index");

        let wal_dir = dir.join("wal");
        std::fs::create_dir_all(&wal_dir).map_err(Error::io("create wal dir", &wal_dir))?;
        let mut engine = Engine {
            dir: dir.to_path_buf(),
            cfg: config.clone(),
            db,
            wal: Wal::create(&wal_dir, config.wal_fsync, config.wal_fsync_interval_ms, config.wal_segment_bytes)?,
            head: Mutex::new(head),
            counters: Counters::default(),
            postings_folds: Mutex::default(),
            watermark: AtomicI64::new(watermark),
            chunk_drop_before,
            ends_complete,
            replay: ReplayReport::default(),
            background,
            damaged: Mutex::new(Vec::new()),
            chunks_flushed_at: AtomicI64::new(i64::MIN),
        };
        // `Wal::create` started a fresh segment after the existing ones; replay reads
        // the older ones (the fresh one is empty).
        engine.replay = engine.replay_wal(&wal_dir)?;
        let rep = &engine.replay;
        if let Some(t) = &rep.torn_tail {
            tracing::warn!(segment = t.segment, offset = t.offset, bytes = t.bytes, reason = %t.reason,
                "storage: WAL ended in a torn or corrupt record; cut there");
        }
        for d in &rep.damaged {
            tracing::error!(segment = d.segment, offset = d.offset, bytes = d.bytes, records = d.records,
                samples = d.samples, fully_counted = d.fully_counted, reason = %d.reason,
                "storage: damaged WAL stretch skipped; the records after it were replayed");
        }
        if rep.found_damage() {
            tracing::error!(dir = %dir.display(), records_dropped = rep.records_dropped,
                samples_dropped = rep.samples_dropped, lower_bounds = rep.drops_uncounted,
                series_unreadable = rep.series_unreadable, "storage: WAL replay lost data to damage");
        }
        tracing::info!(
            records = engine.replay.records,
            samples = engine.replay.samples,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "storage: WAL replayed"
        );
        {
            let mut head = engine.head.lock();
            // Replay may have brought back series that have been idle since: the same rule
            // evicts them again now.
            let seg = engine.wal.current_segment();
            engine.replay.series_evicted += engine.sweep_if_due(&mut head, seg, true)? as u64;
            engine.counters.active_series.store(head.active, Ordering::Relaxed);
            engine.counters.total_series.store(stored_series + engine.replay.series_created, Ordering::Relaxed);
            engine.note_head_size(&head);
        }
        Ok(engine)
    }

    /// What the WAL replay at `open` found (torn tail, counts).
    pub fn replay_report(&self) -> &ReplayReport {
        &self.replay
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What the shard holds in time: (start of its oldest day with postings, newest
    /// sample timestamp). The newest is the head's when it has one (samples written or
    /// replayed in this process); otherwise the last millisecond of the newest day with
    /// postings, an upper bound. `None` for an empty shard.
    pub fn time_bounds(&self) -> Option<(i64, i64)> {
        let head = self.head.lock();
        let (&lo, &hi) = (head.days.first()?, head.days.last()?);
        let oldest = i64::from(lo).saturating_mul(keys::MS_PER_DAY);
        let newest =
            if head.max_t == i64::MIN { (i64::from(hi) + 1).saturating_mul(keys::MS_PER_DAY) - 1 } else { head.max_t };
        Some((oldest, newest))
    }

    /// The newest sample timestamp written or replayed in this process (the head's), if any.
    pub fn head_max_t(&self) -> Option<i64> {
        let t = self.head.lock().max_t;
        (t != i64::MIN).then_some(t)
    }

    fn replay_wal(&self, wal_dir: &Path) -> Result<ReplayReport> {
        let mut rep = ReplayReport::default();
        let current = self.wal.current_segment();
        let mut head = self.head.lock();
        let mut last_seg = None;
        let found = wal::replay(wal_dir, |seg, typ, payload| {
            if seg >= current {
                return Ok(());
            }
            if last_seg != Some(seg) {
                // One line per segment (64 MiB by default) shows a long replay progressing.
                tracing::info!(
                    segment = seg,
                    last = current - 1,
                    samples_so_far = rep.samples,
                    "storage: replaying WAL segment"
                );
                last_seg = Some(seg);
            }
            if typ != record::TYPE_BATCH {
                return Err(Error::corrupt("wal record", format!("unknown record type {typ}")));
            }
            let (series, samples) = record::decode_batch(payload)?;
            let mut ctx = Ctx::new(&self.cfg, Batch::new(&self.db)?, seg);
            for e in series {
                let mut enc = Vec::new();
                labels_codec::encode_labels(&e.labels, &mut enc);
                let hash = labels_codec::labels_hash(&enc);
                let other_labels =
                    || Error::corrupt("wal record", format!("series id {} replayed with other labels", e.id));
                match head.get(e.id) {
                    Some(s) if *s.labels == *enc => {}
                    Some(_) => return Err(other_labels()),
                    // Stored before the crash (or evicted): back into the head, cold, so its
                    // chunks on disk take part in duplicate checks.
                    None => match self.stored_labels(e.id)? {
                        Some(stored) if *stored == *enc => {
                            head.insert(e.id, hash, MemSeries::new(stored, false));
                        }
                        Some(_) => return Err(other_labels()),
                        None => {
                            ctx.sink.put_series(e.id, hash, &enc)?;
                            head.insert(e.id, hash, MemSeries::new(enc.into_boxed_slice(), true));
                            rep.series_created += 1;
                        }
                    },
                }
            }
            for x in &samples {
                if head.get(x.id).is_none() {
                    // Defined in an older, already truncated segment: the series is in RocksDB.
                    if let Some(stored) = self.stored_labels(x.id)? {
                        let hash = labels_codec::labels_hash(&stored);
                        head.insert(x.id, hash, MemSeries::new(stored, false));
                    }
                }
                let Some(s) = head.get_mut(x.id) else {
                    if x.t < self.watermark.load(Ordering::Relaxed) {
                        // Retention deleted the series: this sample is past retention anyway.
                        continue;
                    }
                    // Its series was defined in a damaged record that was skipped (and never
                    // reached RocksDB): the sample cannot be attributed to labels.
                    rep.samples_dropped += 1;
                    continue;
                };
                // One attempt per series and replay: a failed read is not retried per sample.
                if !s.warm && !s.warm_failure_logged {
                    if let Err(e) = warm(&self.db, &self.cfg, x.id, s) {
                        // The WAL holds acknowledged samples; keep them even though the
                        // series' stored chunks cannot be read. The series stays cold, so
                        // live writes to it are refused until its chunks read again.
                        s.warm_failure_logged = true;
                        rep.series_unreadable += 1;
                        tracing::error!(series = %read::describe(&s.labels), error = %e.chain(),
                            "storage: stored chunks of a series unreadable during WAL replay; replaying its WAL samples anyway");
                    }
                }
                // Rejections here mean the sample is already on disk (or superseded).
                apply_warm(&mut head, &mut ctx, x.id, x.t, x.v)?;
            }
            rep.records += 1;
            rep.samples += samples.len() as u64;
            finish_ctx(&mut head, ctx, &self.counters, &self.postings_folds)?;
            rep.series_evicted += self.sweep_if_due(&mut head, seg, false)? as u64;
            Ok(())
        })?;
        rep.torn_tail = found.torn_tail;
        rep.records_dropped = found.damaged.iter().map(|d| d.records).sum();
        rep.samples_dropped += found.damaged.iter().map(|d| d.samples).sum::<u64>();
        rep.drops_uncounted = found.damaged.iter().any(|d| !d.fully_counted);
        rep.damaged = found.damaged;
        Ok(rep)
    }

    /// Appends a batch; returns once the accepted samples are durable per the WAL policy.
    ///
    /// Per-sample rejections are in the report; `Err` means nothing can be assumed
    /// stored and the sender should retry (retries are safe: identical samples are
    /// no-ops).
    pub fn append(&self, batch: &[SeriesAppend<'_>]) -> Result<AppendReport> {
        // Validate everything before touching the head, so a bad request changes nothing.
        // All label sets are encoded into one buffer: one allocation per batch instead of
        // one per series (the allocator was the top cost with many distinct series).
        let mut enc_buf: Vec<u8> = Vec::with_capacity(batch.len() * 160);
        let mut ends: Vec<usize> = Vec::with_capacity(batch.len());
        for s in batch {
            for l in s.labels {
                if l.name.len() > usize::from(u16::MAX) {
                    return Err(Error::InvalidInput(format!("label name of {} bytes exceeds 65535", l.name.len())));
                }
            }
            if !labels_codec::is_sorted_unique(s.labels) {
                return Err(Error::InvalidInput("label names must be sorted and unique".to_owned()));
            }
            labels_codec::encode_labels(s.labels, &mut enc_buf);
            ends.push(enc_buf.len());
        }
        let mut start = 0;
        let encoded: Vec<EncodedAppend<'_>> = batch
            .iter()
            .zip(ends)
            .map(|(s, end)| {
                let labels = &enc_buf[start..end];
                start = end;
                EncodedAppend { labels, samples: s.samples }
            })
            .collect();
        self.append_checked(&encoded, &[])
    }

    /// [`Engine::append`] of label sets already in the canonical encoding
    /// ([`labels_codec`]); each is checked ([`labels_codec::check_canonical`]) before
    /// anything changes, so a malformed one fails the batch with `InvalidInput`.
    pub fn append_encoded(&self, batch: &[EncodedAppend<'_>]) -> Result<AppendReport> {
        self.append_with_refs(batch, &[])
    }

    /// [`Engine::append_encoded`] plus series named by id ([`RefAppend`]): one batch,
    /// one WAL record. In the report, rejections of `refs[j]` carry the series index
    /// `batch.len() + j`; refs whose id is not in the head are listed in
    /// [`AppendReport::unknown_refs`] and nothing of them is appended.
    pub fn append_with_refs(&self, batch: &[EncodedAppend<'_>], refs: &[RefAppend<'_>]) -> Result<AppendReport> {
        for s in batch {
            labels_codec::check_canonical(s.labels).map_err(Error::InvalidInput)?;
        }
        self.append_checked(batch, refs)
    }

    /// The append itself, of label sets known to be canonical.
    fn append_checked(&self, batch: &[EncodedAppend<'_>], refs: &[RefAppend<'_>]) -> Result<AppendReport> {
        self.wal.check_poisoned()?;
        self.handle_background_failures();
        let encoded: Vec<u64> = batch.iter().map(|s| labels_codec::labels_hash(s.labels)).collect();

        let mut head = self.head.lock();
        let mut ctx = Ctx::new(&self.cfg, Batch::new(&self.db)?, self.wal.current_segment());
        let mut new_series: Vec<(u32, Vec<u8>)> = Vec::new();
        let samples_in =
            batch.iter().map(|s| s.samples.len()).sum::<usize>() + refs.iter().map(|r| r.samples.len()).sum::<usize>();
        let mut pending = Pending {
            report: AppendReport { ids: Vec::with_capacity(batch.len()), ..AppendReport::default() },
            accepted: Vec::with_capacity(samples_in),
            sorted: Vec::new(),
            days: Vec::new(),
        };
        // From here on the head changes before the WAL record is written. If anything
        // fails before that record is written, the head holds series and samples the WAL
        // does not (visible yet not durable, and a later record could refer to a series
        // id replay never saw), so the engine is poisoned: it refuses writes, and a
        // restart replays a consistent WAL without this never-acknowledged batch.
        let applied = (|| -> Result<()> {
            for (i, (s, hash)) in batch.iter().zip(encoded).enumerate() {
                let enc = s.labels;
                let in_head = head.lookup(hash, enc);
                let on_disk = match in_head {
                    Some(id) => Ok(Some(id)),
                    None if head.series_on_disk_only => self.find_stored(hash, enc),
                    None => Ok(None),
                };
                let on_disk = match on_disk {
                    Ok(found) => found,
                    Err(e) => {
                        // The series index cannot be read for this label set: refuse its
                        // samples (a new id could duplicate a stored series); nothing changed.
                        let cause: Arc<str> = read::unreadable(enc, &e).to_string().into();
                        tracing::error!(error = %cause, "storage: refusing samples of a series whose index entry cannot be read");
                        for x in s.samples {
                            pending.report.reject(i, x.t, RejectReason::Unreadable { cause: Arc::clone(&cause) });
                        }
                        pending.report.ids.push(None);
                        continue;
                    }
                };
                let id = match on_disk {
                    Some(id) => {
                        if in_head.is_none() {
                            // Evicted earlier or stored before this restart: back, cold.
                            head.insert(id, hash, MemSeries::new(enc.into(), false));
                        }
                        id
                    }
                    None => {
                        let id = head.new_id(labels_codec::metric_name(enc)).ok_or(Error::SeriesIdsExhausted)?;
                        ctx.sink.put_series(id, hash, enc)?;
                        head.insert(id, hash, MemSeries::new(enc.into(), true));
                        new_series.push((id, enc.to_vec()));
                        id
                    }
                };
                pending.report.ids.push(Some(id));
                self.append_to(&mut head, &mut ctx, &mut pending, i, id, s.samples)?;
            }
            for (j, r) in refs.iter().enumerate() {
                if head.get(r.id).is_none() {
                    pending.report.unknown_refs.push(j);
                    continue;
                }
                self.append_to(&mut head, &mut ctx, &mut pending, batch.len() + j, r.id, r.samples)?;
            }
            Ok(())
        })();
        let Pending { mut report, accepted, .. } = pending;
        report.appended = accepted.len() as u64;

        let mut pos = None;
        let logged = applied.and_then(|()| {
            if !accepted.is_empty() || !new_series.is_empty() {
                let series_refs: Vec<(u32, &[u8])> = new_series.iter().map(|(id, e)| (*id, e.as_slice())).collect();
                let mut payload = Vec::with_capacity(accepted.len() * 12 + 16);
                record::encode_batch(&series_refs, &accepted, &mut payload);
                pos = Some(self.wal.write(record::TYPE_BATCH, &payload)?);
            }
            Ok(())
        });
        if let Err(e) = logged {
            let cause = format!("an append failed after changing the in-memory head: {}", e.chain());
            tracing::error!(cause = %cause, "storage: engine poisoned");
            self.wal.poison(cause);
            return Err(e);
        }
        if let Err(e) = finish_ctx(&mut head, ctx, &self.counters, &self.postings_folds) {
            // The WAL has the samples but RocksDB refused the batch; the head and disk may
            // now disagree, so stop taking writes (replay on reopen repairs it).
            let cause = format!("a RocksDB write failed after the WAL record was written: {}", e.chain());
            tracing::error!(cause = %cause, "storage: engine poisoned");
            self.wal.poison(cause);
            return Err(e);
        }
        self.counters.total_series.fetch_add(new_series.len() as u64, Ordering::Relaxed);
        let evicted = self.sweep_if_due(&mut head, self.wal.current_segment(), false);
        if let Err(e) = evicted {
            // Chunks cut but not written, or written but the head not updated: stop.
            let cause = format!("evicting idle series failed: {}", e.chain());
            tracing::error!(cause = %cause, "storage: engine poisoned");
            self.wal.poison(cause);
            return Err(e);
        }
        if self.wal.wants_rotation() {
            self.rotate_wal(&mut head)?;
        }
        self.flush_chunks_if_old(&head);
        self.counters.head_series.store(head.len() as u64, Ordering::Relaxed);
        drop(head);

        if let Some(pos) = pos {
            self.wal.sync_to(pos)?;
        }
        self.counters.samples_appended.fetch_add(report.appended, Ordering::Relaxed);
        self.counters.rejected_too_old.fetch_add(report.rejected_too_old, Ordering::Relaxed);
        self.counters.rejected_duplicate.fetch_add(report.rejected_duplicate, Ordering::Relaxed);
        self.counters.rejected_unreadable.fetch_add(report.rejected_unreadable, Ordering::Relaxed);
        Ok(report)
    }

    /// Appends the samples of batch entry `i` to series `id` (in the head): warms a
    /// cold series first, applies the samples in time order, and notes in `pending`
    /// what was accepted and refused.
    fn append_to(
        &self,
        head: &mut Head,
        ctx: &mut Ctx<'_, Batch<'_>>,
        pending: &mut Pending,
        i: usize,
        id: u32,
        samples: &[Sample],
    ) -> Result<()> {
        let report = &mut pending.report;
        // A series from before this restart is read from disk on first touch. If
        // that read fails (a damaged chunk or SST block), only this series'
        // samples are refused: nothing was changed for it, so nothing is undone.
        let series = head.get_mut(id).ok_or_else(|| Error::corrupt("head", format!("series id {id} vanished")))?;
        if let Err(e) = warm(&self.db, &self.cfg, id, series) {
            let cause: Arc<str> = read::unreadable(&series.labels, &e).to_string().into();
            if !series.warm_failure_logged {
                series.warm_failure_logged = true;
                tracing::error!(error = %cause, "storage: refusing samples of a series whose stored chunks cannot be read");
            }
            for x in samples {
                report.reject(i, x.t, RejectReason::Unreadable { cause: Arc::clone(&cause) });
            }
            return Ok(());
        }
        // Samples may come in any order; apply them in time order so most take the
        // cheap in-order path. Stable sort keeps the sender's order for equal times.
        let samples = if samples.windows(2).all(|w| w[0].t <= w[1].t) {
            samples
        } else {
            pending.sorted.clear();
            pending.sorted.extend_from_slice(samples);
            pending.sorted.sort_by_key(|x| x.t);
            &pending.sorted[..]
        };
        // The series stays borrowed for all its samples (one head lookup per
        // series, not per sample); the head-wide newest time and days follow.
        let mut newest = i64::MIN;
        let mut last_day = None;
        for x in samples {
            match apply_to(ctx, id, series, x.t, x.v)? {
                Outcome::Appended => {
                    pending.accepted.push(record::SampleEntry { id, t: x.t, v: x.v });
                    newest = newest.max(x.t);
                    let day = keys::day_of(x.t);
                    if last_day != Some(day) {
                        last_day = Some(day);
                        pending.days.push(day);
                    }
                }
                Outcome::Unchanged => {}
                Outcome::Rejected(reason) => report.reject(i, x.t, reason),
            }
        }
        head.max_t = head.max_t.max(newest);
        for day in pending.days.drain(..) {
            head.note_day(day);
        }
        Ok(())
    }

    /// Starts writing the chunks memtable out (RocksDB's background flush; this call
    /// does not wait for it) once the shard's data has moved `memtable_max_age_ms` past
    /// the last time (config). Called with the head lock held, after a batch: shard
    /// time, so a backfill writes out as often per hour of data as live ingest does. A
    /// failure is logged; RocksDB's background errors are handled where they surface.
    fn flush_chunks_if_old(&self, head: &Head) {
        let age = self.cfg.memtable_max_age_ms;
        if age == 0 || head.max_t == i64::MIN {
            return;
        }
        let last = self.chunks_flushed_at.load(Ordering::Relaxed);
        if last == i64::MIN {
            self.chunks_flushed_at.store(head.max_t, Ordering::Relaxed);
            return;
        }
        if head.max_t.saturating_sub(last) < age {
            return;
        }
        self.chunks_flushed_at.store(head.max_t, Ordering::Relaxed);
        let mut opts = rocksdb::FlushOptions::default();
        opts.set_wait(false);
        if let Ok(chunks) = cf(&self.db, CF_CHUNKS) {
            if let Err(e) = self.db.flush_cf_opt(chunks, &opts) {
                tracing::warn!(error = %e, "storage: chunks memtable flush by age failed");
            }
        }
    }

    /// Starts a new WAL segment and deletes the segments no open chunk needs any more.
    /// If the WAL is over its size budget, first writes out the open chunks pinning the
    /// oldest segments.
    fn rotate_wal(&self, head: &mut Head) -> Result<()> {
        let new_seg = self.wal.rotate()?;
        if self.cfg.wal_max_bytes > 0 && self.wal.bytes() > self.cfg.wal_max_bytes {
            let oldest = pinned_segment(head).unwrap_or(new_seg);
            let cut_below = oldest + (new_seg - oldest).div_ceil(2).max(1);
            let mut ctx = Ctx::new(&self.cfg, Batch::new(&self.db)?, new_seg);
            let mut forced = 0u64;
            for (id, s) in head.iter_mut() {
                if s.open_len() > 0 && s.open_seg < cut_below {
                    ctx.cut(id, s)?;
                    forced += 1;
                }
            }
            finish_ctx(head, ctx, &self.counters, &self.postings_folds)?;
            tracing::info!(forced, cut_below, "storage: WAL over budget, wrote open chunks early");
        }
        let keep_from = pinned_segment(head).unwrap_or(new_seg);
        // RocksDB's own WAL holds the cut chunks and series written so far; make it
        // durable before deleting our copy of those samples.
        self.db.flush_wal(true).map_err(Error::rocks("flush wal"))?;
        self.wal.truncate_before(keep_from)?;
        self.apply_retention(head)
    }

    /// Drops whole days older than the retention period (relative to the newest sample):
    /// one range delete for their postings, and a compaction-filter watermark for chunks.
    fn apply_retention(&self, head: &mut Head) -> Result<()> {
        if self.cfg.retention_ms == 0 || head.max_t == i64::MIN {
            return Ok(());
        }
        // Relative to the newest sample, but never to a time ahead of the clock: one
        // sample dated years ahead must not push every real sample out of retention.
        let wm = head.max_t.min(now_ms()).saturating_sub(self.cfg.retention_ms);
        let old = self.watermark.load(Ordering::Relaxed);
        if wm <= old {
            return Ok(());
        }
        let cut_day = keys::day_of(wm);
        if cut_day > keys::day_of(old) || old == i64::MIN {
            let dropped = self.drop_dead_series(head, cut_day)?;
            if dropped > 0 {
                self.counters.total_series.fetch_sub(dropped, Ordering::Relaxed);
                tracing::info!(series = dropped, "storage: retention deleted series with no data left");
            }
            let cf = cf(&self.db, CF_POSTINGS)?;
            self.db
                .delete_range_cf(cf, keys::day_prefix(i32::MIN), keys::day_prefix(cut_day))
                .map_err(Error::rocks("delete old postings"))?;
            head.days = head.days.split_off(&cut_day);
            tracing::info!(before_day = cut_day, "storage: retention dropped old days");
        }
        let meta = cf(&self.db, CF_META)?;
        self.db.put_cf(meta, keys::META_RETENTION_WATERMARK, keys::encode_i64(wm)).map_err(Error::rocks("put meta"))?;
        self.chunk_drop_before.store(wm.saturating_sub(chunk_lookback(&self.cfg)), Ordering::Relaxed);
        self.watermark.store(wm, Ordering::Relaxed);
        Ok(())
    }

    /// Runs retention now (it also runs on WAL rotation and `flush`), and acts on failed
    /// compactions (`handle_background_failures`).
    pub fn enforce_retention(&self) -> Result<()> {
        self.handle_background_failures();
        let mut head = self.head.lock();
        self.apply_retention(&mut head)
    }

    /// Samples of every matching series with `mint <= t <= maxt`, in time order, series
    /// sorted by labels. An empty matcher list selects every series.
    pub fn select(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<SeriesSamples>> {
        self.select_until(matchers, mint, maxt, &Interrupt::none())
    }

    /// `select` that stops with `Error::Interrupted` when `stop` fires (checked between
    /// index reads and per series).
    pub fn select_until(
        &self,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        stop: &Interrupt,
    ) -> Result<Vec<SeriesSamples>> {
        let mut cursor = self.select_cursor(matchers, mint, maxt, stop)?;
        let mut out = Vec::with_capacity(cursor.remaining());
        while let Some(s) = cursor.read_next(stop)? {
            out.push(s);
        }
        out.sort_unstable_by(|a, b| a.labels.cmp(&b.labels));
        Ok(out)
    }

    /// `select` one series at a time (see [`SeriesCursor`]): the matching series in
    /// storage order (ascending series id, not label order), each read and decoded only
    /// when the caller asks for it. The index lookup stops with `Error::Interrupted`
    /// when `stop` fires (the cursor's reads are given their own).
    pub fn select_cursor(
        &self,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        stop: &Interrupt,
    ) -> Result<SeriesCursor<'_>> {
        let mint = mint.max(self.watermark.load(Ordering::Relaxed));
        let ids = if mint > maxt { Default::default() } else { self.lookup(matchers, mint, maxt, stop)? };
        Ok(SeriesCursor::new(&self.db, &self.head, &ids, mint, maxt, chunk_lookback(&self.cfg), self.ends_complete))
    }

    /// The stored chunks of every matching series that overlap `[mint, maxt]`, as
    /// encoded, for a reader that decodes them elsewhere (the cluster's Select): not
    /// decoded and not trimmed, so a chunk may hold samples outside the range. Per series
    /// the chunks are in read order (see [`ChunkSamples`]: decoding them with it over
    /// `[min_time, maxt]` gives exactly what `select` answers), series sorted by labels.
    /// `min_time` is `mint` raised to the retention watermark. Stops with
    /// `Error::Interrupted` when `stop` fires.
    ///
    /// [`ChunkSamples`]: crate::ChunkSamples
    pub fn select_chunks_until(
        &self,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        stop: &Interrupt,
    ) -> Result<Vec<SeriesChunks>> {
        let mint = mint.max(self.watermark.load(Ordering::Relaxed));
        if mint > maxt {
            return Ok(Vec::new());
        }
        let snaps = self.snapshots(matchers, mint, maxt, stop)?;
        read::select_chunks(&self.db, snaps, mint, chunk_lookback(&self.cfg), stop)
    }

    /// The matching series' head chunks in `[mint, maxt]` (copied under the head lock),
    /// and the labels of the matching series that are not in the head.
    fn snapshots(&self, matchers: &[Matcher], mint: i64, maxt: i64, stop: &Interrupt) -> Result<Vec<read::SeriesSnap>> {
        let ids = self.lookup(matchers, mint, maxt, stop)?;
        let (mut snaps, mut not_in_head) = read::snapshot(&self.head, &ids, mint, maxt, stop)?;
        self.drop_ended(&mut not_in_head, mint, stop)?;
        snaps.extend(read::stored_snaps(&self.db, &not_in_head, maxt, stop)?);
        Ok(snaps)
    }

    /// The index over the days of `[mint, maxt]` that hold data, or `None` when there are
    /// none. `mint` is already clamped to the retention watermark.
    fn index<'a>(&'a self, mint: i64, maxt: i64, stop: &'a Interrupt) -> Result<Option<Index<'a>>> {
        if mint > maxt {
            return Ok(None);
        }
        let days: Vec<i32> = self.head.lock().days.range(keys::day_of(mint)..=keys::day_of(maxt)).copied().collect();
        if days.is_empty() {
            return Ok(None);
        }
        Index::new(&self.db, days, stop).map(Some)
    }

    fn lookup(&self, matchers: &[Matcher], mint: i64, maxt: i64, stop: &Interrupt) -> Result<RoaringBitmap> {
        match self.index(mint, maxt, stop)? {
            Some(ix) => ix.select(matchers),
            None => Ok(Default::default()),
        }
    }

    fn matched_labels(&self, matchers: &[Matcher], mint: i64, maxt: i64, stop: &Interrupt) -> Result<Vec<Labels>> {
        let mint = mint.max(self.watermark.load(Ordering::Relaxed));
        if mint > maxt {
            return Ok(Vec::new());
        }
        let ids = self.lookup(matchers, mint, maxt, stop)?;
        self.labels_of(&ids, mint, maxt, stop)
    }

    /// Removes from `ids` (ascending, series not in the head) those whose recorded end is
    /// before `mint` ([`read::drop_ended`]), where the shard trusts its records.
    fn drop_ended(&self, ids: &mut Vec<u32>, mint: i64, stop: &Interrupt) -> Result<()> {
        if self.ends_complete {
            read::drop_ended(&self.db, ids, mint, stop)?;
        }
        Ok(())
    }

    /// The label sets of the series `ids`, less those not in the head whose end (listed
    /// among the evicted, else recorded) is before `mint`.
    fn labels_of(&self, ids: &RoaringBitmap, mint: i64, maxt: i64, stop: &Interrupt) -> Result<Vec<Labels>> {
        let mut out = Vec::with_capacity(ids.len() as usize);
        let mut not_in_head = Vec::new();
        let (mut encoded, mut ends) = (Vec::new(), Vec::new());
        // Copied as bytes under the head lock, decoded outside it, a batch at a time.
        let ids: Vec<u32> = ids.iter().collect();
        for part in ids.chunks(read::CURSOR_BATCH) {
            encoded.clear();
            ends.clear();
            read::visit_head(&self.head, part, stop, "series listing", |id, head| {
                // A series evicted lately has its labels and end in memory, as in `select`.
                let labels = match head.locate(id, mint) {
                    Located::Head(s) => &s.labels[..],
                    Located::Evicted(labels) => labels,
                    Located::EndedBefore => return,
                    Located::Stored => return not_in_head.push(id),
                };
                encoded.extend_from_slice(labels);
                ends.push(encoded.len());
            })?;
            let mut start = 0;
            for &end in &ends {
                out.push(labels_codec::decode_label_set(&encoded[start..end])?);
                start = end;
            }
        }
        self.drop_ended(&mut not_in_head, mint, stop)?;
        for snap in read::stored_snaps(&self.db, &not_in_head, maxt, stop)? {
            out.push(labels_codec::decode_label_set(snap.labels())?);
        }
        Ok(out)
    }

    /// Label sets of the matching series with postings in the time range (day
    /// granularity: a series is listed if it has data on a day the range touches),
    /// except series not in the head whose stored data ended before the range (their
    /// recorded ends, where the shard trusts them): a listing over the last hour does not
    /// hold every pod that ended earlier that day.
    pub fn series(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<Labels>> {
        self.series_until(matchers, mint, maxt, &Interrupt::none())
    }

    /// `series` that stops with `Error::Interrupted` when `stop` fires.
    pub fn series_until(&self, matchers: &[Matcher], mint: i64, maxt: i64, stop: &Interrupt) -> Result<Vec<Labels>> {
        let mut out = self.matched_labels(matchers, mint, maxt, stop)?;
        out.sort();
        Ok(out)
    }

    /// Sorted label names of the series the matchers select (all without matchers) that
    /// have postings on the days of the range, less those that ended before it; from the
    /// postings or the label sets, as [`Engine::label_values`].
    pub fn label_names(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<String>> {
        self.label_names_until(matchers, mint, maxt, &Interrupt::none())
    }

    /// `label_names` that stops with `Error::Interrupted` when `stop` fires.
    pub fn label_names_until(
        &self,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        stop: &Interrupt,
    ) -> Result<Vec<String>> {
        match self.label_source(matchers, mint, maxt, stop)? {
            LabelSource::Nothing => Ok(Vec::new()),
            LabelSource::LabelSets(sets) => {
                Ok(sorted_unique(sets.into_iter().flat_map(Labels::into_vec).map(|l| l.name.into_string())))
            }
            LabelSource::Postings { ix, selected, gone } => {
                Ok(ix.label_names(selected.as_ref(), &gone)?.into_iter().collect())
            }
        }
    }

    /// Where label names and values over `[mint, maxt]` are read from (see
    /// [`Engine::label_values`]).
    fn label_source<'a>(
        &'a self,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        stop: &'a Interrupt,
    ) -> Result<LabelSource<'a>> {
        let mint = mint.max(self.watermark.load(Ordering::Relaxed));
        let Some(ix) = self.index(mint, maxt, stop)? else { return Ok(LabelSource::Nothing) };
        let selected = if matchers.is_empty() { None } else { Some(ix.select(matchers)?) };
        match &selected {
            Some(ids) if ids.is_empty() => Ok(LabelSource::Nothing),
            Some(few) if few.len() <= DECODE_LABELS_UP_TO => {
                Ok(LabelSource::LabelSets(self.labels_of(few, mint, maxt, stop)?))
            }
            _ => {
                let gone = self.gone_before(&ix, selected.as_ref(), mint, stop)?;
                Ok(LabelSource::Postings { ix, selected, gone })
            }
        }
    }

    /// The series of `ix`'s days (among `within`, if given) that are not in the head and
    /// whose end, listed among the evicted or recorded, is before `mint` (none where the
    /// shard does not trust its `series_ends`). Only series of the first day alone can
    /// be such, and only when `mint` falls after that day's start.
    fn gone_before(
        &self,
        ix: &Index<'_>,
        within: Option<&RoaringBitmap>,
        mint: i64,
        stop: &Interrupt,
    ) -> Result<RoaringBitmap> {
        let starts_in_day = ix.first_day().is_some_and(|d| i64::from(d) * keys::MS_PER_DAY < mint);
        if !self.ends_complete || !starts_in_day {
            return Ok(Default::default());
        }
        let mut candidates = ix.first_day_only()?;
        if let Some(within) = within {
            candidates &= within;
        }
        let candidates: Vec<u32> = candidates.iter().collect();
        // A series evicted lately has its end in memory; others not in the head have it
        // recorded in RocksDB.
        let (mut gone, mut not_in_head) = (RoaringBitmap::new(), Vec::new());
        read::visit_head(&self.head, &candidates, stop, "label listing", |id, head| match head.locate(id, mint) {
            Located::EndedBefore => _ = gone.insert(id),
            Located::Stored => not_in_head.push(id),
            Located::Head(_) | Located::Evicted(_) => {}
        })?;
        gone.extend(read::ended_before(&self.db, &not_in_head, mint, stop)?);
        Ok(gone)
    }

    /// Sorted values of label `name` among the series the matchers select (all without
    /// matchers) that have postings on the days of the range, less those that ended before
    /// it (their recorded ends, see `gone_before`). From the index: each value's postings
    /// meet the selected series, no label set decoded (the server always passes its tenant
    /// matcher, and decoding every label set of the day cost 250 ms for 2,000 values over
    /// 150,000 series); up to `DECODE_LABELS_UP_TO` selected series, from their label sets.
    pub fn label_values(&self, name: &str, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<String>> {
        self.label_values_until(name, matchers, mint, maxt, &Interrupt::none())
    }

    /// `label_values` that stops with `Error::Interrupted` when `stop` fires.
    pub fn label_values_until(
        &self,
        name: &str,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        stop: &Interrupt,
    ) -> Result<Vec<String>> {
        match self.label_source(matchers, mint, maxt, stop)? {
            LabelSource::Nothing => Ok(Vec::new()),
            LabelSource::LabelSets(sets) => Ok(sorted_unique(
                sets.iter().filter_map(|ls| ls.get(name).filter(|v| !v.is_empty()).map(str::to_owned)),
            )),
            LabelSource::Postings { ix, selected, gone } => {
                Ok(ix.label_values(name, selected.as_ref(), &gone)?.into_iter().collect())
            }
        }
    }

    /// Writes every open head chunk to RocksDB, flushes RocksDB's memtables, and
    /// truncates the WAL (afterwards it holds nothing older than this call).
    pub fn flush(&self) -> Result<()> {
        self.wal.check_poisoned()?;
        self.handle_background_failures();
        let mut head = self.head.lock();
        let mut ctx = Ctx::new(&self.cfg, Batch::new(&self.db)?, self.wal.current_segment());
        for (id, s) in head.iter_mut() {
            ctx.cut(id, s)?;
        }
        finish_ctx(&mut head, ctx, &self.counters, &self.postings_folds)?;
        let new_seg = self.wal.rotate()?;
        let cfs: Vec<_> = ALL_CFS.iter().map(|n| cf(&self.db, n)).collect::<Result<_>>()?;
        self.db.flush_cfs_opt(&cfs, &rocksdb::FlushOptions::default()).map_err(Error::rocks("flush"))?;
        self.db.flush_wal(true).map_err(Error::rocks("flush wal"))?;
        self.wal.truncate_before(new_seg)?;
        self.apply_retention(&mut head)?;
        self.counters.active_series.store(head.active, Ordering::Relaxed);
        self.note_head_size(&head);
        Ok(())
    }

    /// Compacts every column family (benchmarks use it to measure settled disk size).
    pub fn compact(&self) -> Result<()> {
        for n in ALL_CFS {
            self.db.compact_range_cf(cf(&self.db, n)?, None::<&[u8]>, None::<&[u8]>);
        }
        Ok(())
    }

    /// Current counters.
    pub fn stats(&self) -> Stats {
        let mut disk = 0u64;
        for n in ALL_CFS {
            if let Some(h) = self.db.cf_handle(n) {
                for p in ["rocksdb.live-sst-files-size", "rocksdb.cur-size-all-mem-tables"] {
                    disk += self.db.property_int_value_cf(h, p).ok().flatten().unwrap_or(0);
                }
            }
        }
        let c = &self.counters;
        Stats {
            active_series: c.active_series.load(Ordering::Relaxed),
            total_series: c.total_series.load(Ordering::Relaxed),
            head_series: c.head_series.load(Ordering::Relaxed),
            head_bytes: c.head_bytes.load(Ordering::Relaxed),
            samples_appended: c.samples_appended.load(Ordering::Relaxed),
            rejected_too_old: c.rejected_too_old.load(Ordering::Relaxed),
            rejected_duplicate: c.rejected_duplicate.load(Ordering::Relaxed),
            rejected_unreadable: c.rejected_unreadable.load(Ordering::Relaxed),
            chunks_written: c.chunks_written.load(Ordering::Relaxed),
            disk_bytes: disk,
            wal_bytes: self.wal.bytes(),
            wal_fsync: self.wal.fsync_stats(),
            background_errors: self.db.property_int_value("rocksdb.background-errors").ok().flatten().unwrap_or(0),
            compactions_stopped: self.compactions_stopped() as u64,
        }
    }

    /// Files that compactions could not read since open (each stopped its column
    /// family's automatic compaction on this shard).
    pub fn damaged_files(&self) -> Vec<DamagedFile> {
        self.damaged.lock().clone()
    }

    /// Column families whose automatic compaction is stopped.
    fn compactions_stopped(&self) -> usize {
        let damaged = self.damaged.lock();
        if damaged.iter().any(|d| d.column_family.is_none()) {
            return ALL_CFS.len();
        }
        let mut cfs: Vec<&str> = damaged.iter().filter_map(|d| d.column_family.as_deref()).collect();
        cfs.sort_unstable();
        cfs.dedup();
        cfs.len()
    }

    /// Acts on the compactions RocksDB reported as failed since the last call (cheap
    /// when there are none; called from the write path, flush and retention, which run
    /// on blocking threads).
    ///
    /// A compaction that read damaged bytes fails again at every retry (about one a
    /// second, each re-reading its inputs up to the damage), and while it fails the
    /// column family's level-0 files pile up until RocksDB stops the shard's writes.
    /// So automatic compaction of that column family is stopped here: writes go on
    /// (RocksDB applies no level-0 stall to a column family without automatic
    /// compaction), reads of keys in the damaged blocks fail naming the cause, other
    /// keys read as before. The cost, until an operator repairs the shard: reads of that
    /// column family slow down as level-0 files accumulate, and retention no longer
    /// drops its old data. Other failures (a full disk, say) are logged and left to
    /// RocksDB's retry.
    pub fn handle_background_failures(&self) {
        let failures = self.background.take_new();
        if failures.is_empty() {
            return;
        }
        let live = match self.db.live_files() {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(dir = %self.dir.display(), error = %e, "storage: cannot list RocksDB files");
                Vec::new()
            }
        };
        for f in failures {
            if !f.is_corruption() {
                tracing::error!(dir = %self.dir.display(), cause = %f.cause,
                    "storage: a RocksDB compaction failed; RocksDB retries it");
                continue;
            }
            let file = f.file_number().and_then(|n| live.iter().find(|l| sst_number(&l.name) == Some(n)));
            let damaged = DamagedFile {
                file: f.file.clone(),
                column_family: file.map(|l| l.column_family_name.clone()),
                level: file.map(|l| l.level),
                cause: f.cause.clone(),
            };
            self.stop_compaction(&damaged, &f);
            let mut list = self.damaged.lock();
            if !list.iter().any(|d| d.file == damaged.file && d.column_family == damaged.column_family) {
                list.push(damaged);
            }
        }
    }

    /// Stops automatic compaction of `damaged`'s column family (of all of them when the
    /// file is not known), and says so.
    fn stop_compaction(&self, damaged: &DamagedFile, failure: &CompactionFailure) {
        let names: Vec<&str> = match &damaged.column_family {
            Some(cf) => vec![cf.as_str()],
            None => ALL_CFS.to_vec(),
        };
        for name in &names {
            let stopped = cf(&self.db, name).and_then(|h| {
                self.db.set_options_cf(h, &[("disable_auto_compactions", "true")]).map_err(Error::rocks("set options"))
            });
            if let Err(e) = stopped {
                tracing::error!(dir = %self.dir.display(), column_family = name, error = %e.chain(),
                    "storage: cannot stop automatic compaction");
            }
        }
        tracing::error!(
            dir = %self.dir.display(),
            file = failure.file.as_deref().unwrap_or("(not named)"),
            column_families = ?names,
            level = ?damaged.level,
            cause = %failure.cause,
            "storage: a compaction read a damaged file. Automatic compaction of its column family is stopped \
             on this shard so that the shard keeps taking writes; series with data in the damaged blocks are \
             refused on write and fail on read, naming this cause. Until repaired, retention does not drop that \
             column family's old data and its reads slow down as files accumulate. Repair: stop the server, \
             restore this shard directory from a backup, or run RocksDB's `ldb --db=<dir> repair` (it moves \
             unreadable tables to `lost/`, losing all their data) and restart"
        );
    }

    /// Approximate heap bytes held by the head now (maps, series, open and recent
    /// chunks); `Stats::head_bytes` is the same figure as of the last sweep.
    pub fn head_heap_bytes(&self) -> usize {
        self.head.lock().heap_bytes()
    }

    /// Runs the idle sweep now, whatever the time since the last one; returns the
    /// number of series evicted (benchmarks and tests).
    pub fn evict_idle_series(&self) -> Result<usize> {
        self.wal.check_poisoned()?;
        let mut head = self.head.lock();
        let n = self.sweep_if_due(&mut head, self.wal.current_segment(), true)?;
        self.counters.head_series.store(head.len() as u64, Ordering::Relaxed);
        Ok(n)
    }

    fn note_head_size(&self, head: &Head) {
        self.counters.head_series.store(head.len() as u64, Ordering::Relaxed);
        self.counters.head_bytes.store(head.heap_bytes() as u64, Ordering::Relaxed);
    }

    /// Evicts idle series when a minute of shard time has passed since the last sweep
    /// (or when `force`). Their open chunks are written to RocksDB in one batch first;
    /// only once that write succeeded are they removed from the head, so nothing
    /// acknowledged is lost (the WAL segments holding their samples are released the
    /// usual way: no open chunk pins them any more).
    fn sweep_if_due(&self, head: &mut Head, seg: u64, force: bool) -> Result<usize> {
        let idle = self.cfg.head_idle_timeout_ms;
        if idle == 0 || head.max_t == i64::MIN {
            return Ok(0);
        }
        // Shard time, capped at the clock like retention: one sample dated years ahead
        // must not make every series look idle.
        let now = head.max_t.min(now_ms());
        if !force && now < head.next_sweep_t {
            return Ok(0);
        }
        head.next_sweep_t = now.saturating_add(SWEEP_EVERY_MS);
        let idle_before = now.saturating_sub(idle);
        let stale_before = now.saturating_sub(self.cfg.out_of_order_window_ms.min(idle));
        let victims: Vec<u32> = head
            .iter()
            .filter(|(_, s)| !s.has_max || s.max_t < idle_before || (s.stale && s.max_t < stale_before))
            .map(|(id, _)| id)
            .collect();
        if !victims.is_empty() {
            let mut ctx = Ctx::new(&self.cfg, Batch::new(&self.db)?, seg);
            for &id in &victims {
                if let Some(s) = head.get_mut(id) {
                    ctx.cut(id, s)?;
                }
            }
            finish_ctx(head, ctx, &self.counters, &self.postings_folds)?;
            for &id in &victims {
                head.evict(id);
            }
            head.shrink();
            tracing::debug!(evicted = victims.len(), remaining = head.len(), "storage: idle series left the head");
        }
        self.note_head_size(head);
        Ok(victims.len())
    }

    /// The stored label encoding of series `id`, if the `series` column family has it.
    fn stored_labels(&self, id: u32) -> Result<Option<Box<[u8]>>> {
        let v = self
            .db
            .get_pinned_cf(cf(&self.db, CF_SERIES)?, keys::series_key(id))
            .map_err(Error::rocks("get series"))?;
        match v {
            Some(v) => {
                // Validated once when it enters the head, so later decodes cannot fail.
                labels_codec::validate_label_set(&v)?;
                Ok(Some(Box::from(&*v)))
            }
            None => Ok(None),
        }
    }

    /// The id of a stored series with this label encoding (not necessarily in the head).
    fn find_stored(&self, hash: u64, enc: &[u8]) -> Result<Option<u32>> {
        let mut opts = rocksdb::ReadOptions::default();
        // Id u32::MAX is never assigned, so this exclusive bound covers every id.
        opts.set_iterate_upper_bound(keys::series_hash_key(hash, u32::MAX).to_vec());
        let mut it = self.db.raw_iterator_cf_opt(cf(&self.db, CF_SERIES_BY_HASH)?, opts);
        it.seek(keys::series_hash_key(hash, 0));
        let mut ids = Vec::new();
        while it.valid() {
            let Some(k) = it.key() else { break };
            ids.push(parse_series_hash_id(k)?);
            it.next();
        }
        it.status().map_err(Error::rocks("read series_by_hash"))?;
        for id in ids {
            if self.stored_labels(id)?.is_some_and(|l| *l == *enc) {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }

    /// Deletes the `series` and `series_by_hash` records of the series that have
    /// postings on days before `cut_day` but on none from `cut_day` on: all their data
    /// is older than retention. Runs before those days' postings are deleted. Their
    /// chunks go the usual way (compaction filter); ids are never reused.
    fn drop_dead_series(&self, head: &mut Head, cut_day: i32) -> Result<u64> {
        let none = Interrupt::none();
        let old = Index::new(&self.db, head.days.range(..cut_day).copied().collect(), &none)?.all()?;
        if old.is_empty() {
            return Ok(0);
        }
        let live = Index::new(&self.db, head.days.range(cut_day..).copied().collect(), &none)?.all()?;
        let dead = old - live;
        if dead.is_empty() {
            return Ok(0);
        }
        let (scf, hcf, ecf) =
            (cf(&self.db, CF_SERIES)?, cf(&self.db, CF_SERIES_BY_HASH)?, cf(&self.db, CF_SERIES_ENDS)?);
        let mut batch = WriteBatch::default();
        let mut deleted = 0u64;
        for id in &dead {
            // A head series holds no data from `cut_day` on either (that would be in
            // postings): whatever it holds in memory is past retention.
            if head.remove(id).is_some_and(|s| s.open_len() > 0) {
                head.active = head.active.saturating_sub(1);
                self.counters.active_series.store(head.active, Ordering::Relaxed);
            }
            let Some(labels) = self.stored_labels(id)? else { continue };
            batch.delete_cf(scf, keys::series_key(id));
            batch.delete_cf(hcf, keys::series_hash_key(labels_codec::labels_hash(&labels), id));
            batch.delete_cf(ecf, keys::series_key(id));
            deleted += 1;
        }
        batch.put_cf(cf(&self.db, CF_META)?, keys::META_NEXT_SERIES_ID, head.next_id.to_be_bytes());
        self.db.write(batch).map_err(Error::rocks("delete series past retention"))?;
        head.shrink();
        Ok(deleted)
    }

    /// Stops RocksDB's background flushes and compactions, waiting for those running.
    /// For a process about to exit while other threads may still hold this engine (so
    /// that dropping it would not close the database): exiting under a running
    /// compaction destroys RocksDB's static state beneath it, and the process can abort
    /// instead of exiting cleanly. Reads and writes still work afterwards, but nothing
    /// is flushed or compacted any more.
    pub fn stop_background_work(&self) {
        self.db.cancel_all_background_work(true);
    }

    /// Flushes and shuts down; after this the directory can be reopened.
    pub fn close(self) -> Result<()> {
        self.flush()
    }
}

/// What label names and values are read from.
enum LabelSource<'a> {
    /// No series is selected.
    Nothing,
    /// The label sets of the few selected series (`DECODE_LABELS_UP_TO`).
    LabelSets(Vec<Labels>),
    /// The postings of the range's days, met with the selected series (`None`: all) less
    /// those that ended before the range (`gone`).
    Postings { ix: Index<'a>, selected: Option<RoaringBitmap>, gone: RoaringBitmap },
}

/// The strings sorted, each once.
fn sorted_unique(it: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = it.collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Up to how many selected series label names and values come from their decoded label
/// sets rather than from the postings: a few series' labels cost less than scanning
/// every value of a label with a million of them (Prometheus chooses the same way).
const DECODE_LABELS_UP_TO: u64 = 4096;

/// The number of a table file from its name as `live_files` gives it (`/000012.sst`).
fn sst_number(name: &str) -> Option<u64> {
    Path::new(name).file_name()?.to_str()?.strip_suffix(".sst")?.parse().ok()
}

fn cf<'a>(db: &'a DB, name: &str) -> Result<&'a rocksdb::ColumnFamily> {
    db.cf_handle(name).ok_or_else(|| Error::corrupt("rocksdb", format!("missing column family {name}")))
}

/// How far before a query's start a chunk may begin and still overlap it: a chunk spans
/// at most `chunk_max_span_ms`, plus what out-of-order inserts can stretch it by.
fn chunk_lookback(cfg: &EngineConfig) -> i64 {
    cfg.chunk_max_span_ms.saturating_add(cfg.out_of_order_window_ms)
}

/// Oldest WAL segment still holding a sample that is only in an open chunk.
fn pinned_segment(head: &Head) -> Option<u64> {
    head.iter().map(|(_, s)| s).filter(|s| s.open_len() > 0).map(|s| s.open_seg).min()
}

/// How often, in shard time, the idle sweep runs.
const SWEEP_EVERY_MS: i64 = 60_000;

/// The series id in a `series_by_hash` key (hash u64 BE, id u32 BE).
fn parse_series_hash_id(k: &[u8]) -> Result<u32> {
    let id: [u8; 4] = k
        .get(8..12)
        .and_then(|b| b.try_into().ok())
        .filter(|_| k.len() == 12)
        .ok_or_else(|| Error::corrupt("series_by_hash", format!("key of {} bytes, want 12", k.len())))?;
    Ok(u32::from_be_bytes(id))
}

/// What an append batch has accepted and refused so far, and its reused scratch.
struct Pending {
    /// Refusals and ids, in batch order.
    report: AppendReport,
    /// Samples for the WAL record.
    accepted: Vec<record::SampleEntry>,
    /// One series' samples sorted by time, when they came out of order.
    sorted: Vec<Sample>,
    /// Days one series' samples fell in, for the head's day set.
    days: Vec<i32>,
}

/// Warms a cold series with its stored recent chunks; on a read error the series is
/// left exactly as it was, still cold, and the next call tries again.
fn warm(db: &DB, cfg: &EngineConfig, id: u32, s: &mut MemSeries) -> Result<()> {
    if !s.warm {
        s.warm_from(persist::load_recent(db, id, cfg.out_of_order_window_ms)?);
    }
    Ok(())
}

/// Applies one sample to series `id` and indexes its day. The caller has warmed the
/// series (or, in replay, tried to).
fn apply_warm(head: &mut Head, ctx: &mut Ctx<'_, Batch<'_>>, id: u32, t: i64, v: f64) -> Result<Outcome> {
    let s =
        head.get_mut(id).ok_or_else(|| Error::corrupt("wal record", format!("sample for unknown series id {id}")))?;
    let out = apply_to(ctx, id, s, t, v)?;
    if out == Outcome::Appended {
        head.note_day(keys::day_of(t));
        head.max_t = head.max_t.max(t);
    }
    Ok(out)
}

/// One sample into a warm series, its day's postings marked if it is stored; the
/// caller updates the head's newest time and days ([`apply_warm`] does both).
fn apply_to(ctx: &mut Ctx<'_, Batch<'_>>, id: u32, s: &mut MemSeries, t: i64, v: f64) -> Result<Outcome> {
    let out = ctx.apply(id, s, t, v)?;
    if out == Outcome::Appended {
        ctx.mark_day(id, s, keys::day_of(t))?;
    }
    Ok(out)
}

/// Writes a context's RocksDB batch (chunks, series, postings) and folds its counters.
fn finish_ctx(
    head: &mut Head,
    ctx: Ctx<'_, Batch<'_>>,
    counters: &Counters,
    folds: &Mutex<PostingsFolds>,
) -> Result<()> {
    let Ctx { sink, active_delta, .. } = ctx;
    let chunks_written = sink.write(&mut folds.lock())?;
    head.active = (head.active as i64 + active_delta).max(0) as u64;
    counters.active_series.store(head.active, Ordering::Relaxed);
    counters.chunks_written.fetch_add(chunks_written, Ordering::Relaxed);
    Ok(())
}

fn load_meta(db: &DB) -> Result<i64> {
    let meta = cf(db, CF_META)?;
    match db.get_cf(meta, keys::META_SCHEMA_VERSION).map_err(Error::rocks("get meta"))? {
        Some(v) => {
            let got = u32::from_be_bytes(
                v.as_slice().try_into().map_err(|_| Error::corrupt("meta", "schema version is not 4 bytes"))?,
            );
            if got != keys::SCHEMA_VERSION {
                return Err(Error::corrupt(
                    "meta",
                    format!("schema version {got}, this build reads {}", keys::SCHEMA_VERSION),
                ));
            }
        }
        None => db
            .put_cf(meta, keys::META_SCHEMA_VERSION, keys::SCHEMA_VERSION.to_be_bytes())
            .map_err(Error::rocks("put meta"))?,
    }
    match db.get_cf(meta, keys::META_RETENTION_WATERMARK).map_err(Error::rocks("get meta"))? {
        Some(v) => keys::decode_i64(&v),
        None => Ok(i64::MIN),
    }
}

/// Whether the `series_ends` records of this shard can be trusted: every chunk write
/// merges its series' end, but a directory written before that column family existed
/// holds chunks without records, and a rewrite there of a series' older chunk would
/// record an end before the series' last one. So the records are trusted only when they
/// were kept from the start: the shard's meta says so, or `chunks` is empty now (a new
/// directory, before the WAL replay writes anything), and then the meta is written.
fn series_ends_complete(db: &DB) -> Result<bool> {
    let meta = cf(db, CF_META)?;
    if db.get_pinned_cf(meta, keys::META_SERIES_ENDS_COMPLETE).map_err(Error::rocks("get meta"))?.is_some() {
        return Ok(true);
    }
    let mut it = db.raw_iterator_cf(cf(db, CF_CHUNKS)?);
    it.seek_to_first();
    let empty = !it.valid();
    it.status().map_err(Error::rocks("read chunks"))?;
    if empty {
        db.put_cf(meta, keys::META_SERIES_ENDS_COMPLETE, []).map_err(Error::rocks("put meta"))?;
    }
    Ok(empty)
}

/// An empty head that knows the next id and the range of indexed days, and the number
/// of stored series. Series enter the head only when written (or replayed).
fn load_head(db: &DB) -> Result<(Head, u64)> {
    let mut head = Head::new();
    let mut it = db.raw_iterator_cf(cf(db, CF_SERIES)?);
    it.seek_to_first();
    let mut stored = 0u64;
    let mut last = None;
    while it.valid() {
        let Some(k) = it.key() else { break };
        last = Some(keys::parse_series_key(k)?);
        stored += 1;
        it.next();
    }
    it.status().map_err(Error::rocks("load series"))?;
    let persisted = match db.get_cf(cf(db, CF_META)?, keys::META_NEXT_SERIES_ID).map_err(Error::rocks("get meta"))? {
        Some(v) => u32::from_be_bytes(
            v.as_slice().try_into().map_err(|_| Error::corrupt("meta", "next_series_id is not 4 bytes"))?,
        ),
        None => 0,
    };
    head.next_id = persisted.max(last.map_or(0, |id: u32| id.saturating_add(1)));
    head.series_on_disk_only = head.next_id > 0;
    head.days = index::existing_days(db, i32::MIN, i32::MAX, &Interrupt::none())?.into_iter().collect();
    Ok((head, stored))
}

#[cfg(test)]
mod tests;

/// The wall clock in milliseconds since the Unix epoch (0 if the clock is before 1970).
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

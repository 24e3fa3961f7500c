//! Write-ahead log: numbered segment files of checksummed records, group commit.
//!
//! Appenders write their record with one `write` syscall under `writer` (so the bytes
//! are in the OS page cache and survive `kill -9` from that moment), then call
//! `sync_to(pos)`. The first appender needing a sync becomes the leader and runs one
//! `fdatasync` for everyone who wrote before it started; the others wait on a condvar.
//! A failed fsync poisons the WAL for good: the kernel may have dropped the dirty pages,
//! so retrying could report success for data that is gone.
//!
//! Segments are never appended to after a restart: replay reads them all, then a new
//! segment is started. Replay skips damaged records and keeps going (only a torn end of
//! the log is cut); see `replay`. A segment is deleted once every sample in it is in a chunk that
//! RocksDB holds durably (the engine decides; see `truncate_before`).

mod fsync_stats;
pub mod record;

use fsync_stats::FsyncHistogram;

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::config::WalFsync;
use crate::error::{Error, Result};
use crate::types::FsyncStats;

/// What replay found wrong at the end of the log (reported, never a crash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    pub segment: u64,
    /// Byte offset of the first bad record; the segment was truncated here.
    pub offset: u64,
    pub reason: String,
    /// Bytes cut off (the torn record and whatever garbage followed it).
    pub bytes: u64,
}

/// A damaged stretch *before* the end of the log: skipped, and the valid records after
/// it (in this segment and later ones) replayed. The bytes stay in the segment file (it
/// is deleted only when the WAL is truncated past it, like every segment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub segment: u64,
    /// Byte offset where the damage starts.
    pub offset: u64,
    /// Bytes skipped.
    pub bytes: u64,
    /// Whole records skipped (their frame length was intact, their checksum was not).
    pub records: u64,
    /// Samples in those records, where the damaged payload still decodes; a payload that
    /// does not, and bytes that are not a frame at all, hold an unknown number.
    pub samples: u64,
    /// Whether every skipped byte belonged to a counted record (so `samples` may be
    /// exact); false when some of the stretch could not be read as frames.
    pub fully_counted: bool,
    pub reason: String,
}

/// What replay found besides valid records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayDamage {
    /// A torn or corrupt end of the log, cut as a crash mid-write leaves it.
    pub torn_tail: Option<TornTail>,
    /// Damage with valid records after it, skipped.
    pub damaged: Vec<Damage>,
}

/// Checksum work allowed per damaged stretch while looking for the next valid record.
const RESYNC_BUDGET: usize = 256 << 20;

struct Writer {
    file: Arc<File>,
    seg: u64,
    seg_bytes: u64,
    /// Bytes ever written through this `Wal` (positions for group commit).
    written: u64,
    /// Size of every segment on disk, current one included.
    sizes: BTreeMap<u64, u64>,
}

struct SyncState {
    synced: u64,
    syncing: bool,
    last_sync: Instant,
    /// Why the log is unusable (the first failure), once it is.
    poisoned: Option<String>,
}

impl SyncState {
    fn check(&self) -> Result<()> {
        match &self.poisoned {
            Some(cause) => Err(Error::Poisoned { cause: cause.clone() }),
            None => Ok(()),
        }
    }

    fn poison(&mut self, cause: String) {
        self.poisoned.get_or_insert(cause);
    }
}

pub struct Wal {
    dir: PathBuf,
    policy: WalFsync,
    interval: Duration,
    segment_limit: u64,
    writer: Mutex<Writer>,
    sync: Mutex<SyncState>,
    synced_cv: Condvar,
    fsyncs: FsyncHistogram,
}

fn segment_path(dir: &Path, seg: u64) -> PathBuf {
    dir.join(format!("{seg:08}"))
}

/// Lists segment numbers in `dir` in order (files named by 8 decimal digits).
pub fn list_segments(dir: &Path) -> Result<Vec<u64>> {
    let mut segs = Vec::new();
    for e in fs::read_dir(dir).map_err(Error::io("read wal dir", dir))? {
        let e = e.map_err(Error::io("read wal dir", dir))?;
        if let Some(n) = e.file_name().to_str().and_then(|s| s.parse::<u64>().ok()) {
            segs.push(n);
        }
    }
    segs.sort_unstable();
    Ok(segs)
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(Error::io("fsync wal dir", dir))
}

/// Reads every record of every segment in order, calling `apply(segment, type, payload)`.
///
/// Damage never costs more than the damaged bytes: a record whose checksum fails but
/// whose length is intact is skipped; bytes that are not a frame at all are skipped up to
/// the next valid record (found by `record::resync`). Either way replay continues, and
/// the stretch is reported in `ReplayDamage::damaged`; no segment is deleted. Only when
/// nothing valid follows the first bad byte anywhere in the log (a crash mid-write) is the
/// segment truncated there, reported as `ReplayDamage::torn_tail`.
pub fn replay(dir: &Path, mut apply: impl FnMut(u64, u8, &[u8]) -> Result<()>) -> Result<ReplayDamage> {
    let segs = list_segments(dir)?;
    let mut out = ReplayDamage::default();
    // Whether any later segment holds bytes: then no damage in this one is a tail.
    let mut later_nonempty = vec![false; segs.len()];
    for i in (0..segs.len().saturating_sub(1)).rev() {
        let next = segment_path(dir, segs[i + 1]);
        let len = fs::metadata(&next).map_err(Error::io("stat wal segment", &next))?.len();
        later_nonempty[i] = later_nonempty[i + 1] || len > 0;
    }
    for (i, &seg) in segs.iter().enumerate() {
        let path = segment_path(dir, seg);
        let buf = fs::read(&path).map_err(Error::io("read wal segment", &path))?;
        let mut off = 0usize;
        // The damaged stretch being skipped, if any.
        let mut cur: Option<Damage> = None;
        loop {
            match record::read_frame(&buf[off..]) {
                record::Frame::End => break,
                record::Frame::Record(typ, payload, used) => {
                    if let Some(d) = cur.take() {
                        out.damaged.push(d);
                    }
                    apply(seg, typ, payload)?;
                    off += used;
                }
                record::Frame::Bad { reason, damaged } => {
                    let d = cur.get_or_insert_with(|| Damage {
                        segment: seg,
                        offset: off as u64,
                        bytes: 0,
                        records: 0,
                        samples: 0,
                        fully_counted: true,
                        reason: reason.clone(),
                    });
                    let skip = match damaged {
                        // The length looks intact: skip exactly this record, unless what
                        // follows is not a frame either (the length may be the damage).
                        Some((used, typ, payload)) if frame_follows(&buf[off + used..]) => {
                            d.records += 1;
                            if typ == record::TYPE_BATCH {
                                if let Ok((_, samples)) = record::decode_batch(payload) {
                                    d.samples += samples.len() as u64;
                                } else {
                                    d.fully_counted = false;
                                }
                            } else {
                                d.fully_counted = false;
                            }
                            Some(used)
                        }
                        _ => {
                            d.fully_counted = false;
                            record::resync(&buf[off..], RESYNC_BUDGET)
                        }
                    };
                    match skip {
                        Some(n) => {
                            d.bytes += n as u64;
                            off += n;
                        }
                        None => {
                            // Nothing valid in the rest of this segment.
                            d.bytes += (buf.len() - off) as u64;
                            break;
                        }
                    }
                }
            }
        }
        let Some(d) = cur else { continue };
        if later_nonempty[i] {
            out.damaged.push(d);
            continue;
        }
        // Nothing valid follows the damage anywhere in the log: a torn tail, as a crash
        // mid-write leaves it. Cut it, so the next start does not report it again.
        let f = OpenOptions::new().write(true).open(&path).map_err(Error::io("open wal segment", &path))?;
        f.set_len(d.offset).map_err(Error::io("truncate wal segment", &path))?;
        f.sync_all().map_err(Error::io("fsync wal segment", &path))?;
        out.torn_tail = Some(TornTail { segment: seg, offset: d.offset, reason: d.reason, bytes: d.bytes });
    }
    Ok(out)
}

/// Whether `rest` is empty (a clean segment end) or starts with a valid frame.
fn frame_follows(rest: &[u8]) -> bool {
    matches!(record::read_frame(rest), record::Frame::End | record::Frame::Record(..))
}

impl Wal {
    /// Opens the WAL for writing in a fresh segment after the existing ones (call after
    /// `replay`).
    pub fn create(dir: &Path, policy: WalFsync, interval_ms: u64, segment_limit: u64) -> Result<Wal> {
        fs::create_dir_all(dir).map_err(Error::io("create wal dir", dir))?;
        let mut sizes = BTreeMap::new();
        for seg in list_segments(dir)? {
            let p = segment_path(dir, seg);
            let len = fs::metadata(&p).map_err(Error::io("stat wal segment", &p))?.len();
            sizes.insert(seg, len);
        }
        let seg = sizes.keys().next_back().map_or(1, |s| s + 1);
        let file = Self::new_segment(dir, seg)?;
        sizes.insert(seg, 0);
        Ok(Wal {
            dir: dir.to_path_buf(),
            policy,
            interval: Duration::from_millis(interval_ms),
            segment_limit,
            writer: Mutex::new(Writer { file: Arc::new(file), seg, seg_bytes: 0, written: 0, sizes }),
            sync: Mutex::new(SyncState { synced: 0, syncing: false, last_sync: Instant::now(), poisoned: None }),
            synced_cv: Condvar::new(),
            fsyncs: FsyncHistogram::default(),
        })
    }

    fn new_segment(dir: &Path, seg: u64) -> Result<File> {
        let p = segment_path(dir, seg);
        let f =
            OpenOptions::new().create_new(true).append(true).open(&p).map_err(Error::io("create wal segment", &p))?;
        // The new directory entry must be durable too, or power loss could lose the file.
        sync_dir(dir)?;
        Ok(f)
    }

    /// `Err(Error::Poisoned)` naming the first failure, once the log is unusable.
    pub fn check_poisoned(&self) -> Result<()> {
        self.sync.lock().check()
    }

    /// Marks the log unusable: every later write or sync returns `Error::Poisoned` with
    /// `cause` (the first cause is kept). Used by the engine when the head and disk may
    /// disagree after a failure.
    pub fn poison(&self, cause: String) {
        self.sync.lock().poison(cause);
        self.synced_cv.notify_all();
    }

    /// The segment new records go to.
    pub fn current_segment(&self) -> u64 {
        self.writer.lock().seg
    }

    /// Total bytes in all segments on disk.
    pub fn bytes(&self) -> u64 {
        self.writer.lock().sizes.values().sum()
    }

    /// Whether the current segment has reached its size limit.
    pub fn wants_rotation(&self) -> bool {
        self.writer.lock().seg_bytes >= self.segment_limit
    }

    /// Appends one framed record; returns the position to pass to `sync_to`.
    /// The bytes are handed to the OS before this returns.
    pub fn write(&self, typ: u8, payload: &[u8]) -> Result<u64> {
        self.check_poisoned()?;
        if payload.len() + 1 > record::MAX_RECORD {
            // Replay treats a longer record as a torn tail and would cut the WAL there,
            // so such a record must never be acknowledged.
            return Err(Error::InvalidInput(format!(
                "WAL record of {} bytes exceeds the {} byte limit; send smaller write requests",
                payload.len() + 1,
                record::MAX_RECORD
            )));
        }
        let framed = record::frame(typ, payload);
        let mut w = self.writer.lock();
        let seg = w.seg;
        let r = (&*w.file).write_all(&framed);
        if let Err(source) = r {
            // A partial write leaves a torn record mid-segment; refuse further writes
            // rather than append after it.
            let err = Error::Io { op: "write wal segment", path: segment_path(&self.dir, seg), source };
            self.sync.lock().poison(format!("a WAL write failed: {}", err.chain()));
            self.synced_cv.notify_all();
            return Err(err);
        }
        w.seg_bytes += framed.len() as u64;
        w.written += framed.len() as u64;
        *w.sizes.entry(seg).or_insert(0) += framed.len() as u64;
        Ok(w.written)
    }

    /// Makes everything up to `pos` durable according to the fsync policy.
    pub fn sync_to(&self, pos: u64) -> Result<()> {
        let mut st = self.sync.lock();
        match self.policy {
            WalFsync::None => return st.check(),
            WalFsync::Interval if st.last_sync.elapsed() < self.interval => return st.check(),
            _ => {}
        }
        loop {
            st.check()?;
            if st.synced >= pos {
                return Ok(());
            }
            if st.syncing {
                // Someone else is syncing; they may or may not cover our bytes, so re-check.
                self.synced_cv.wait(&mut st);
                continue;
            }
            st.syncing = true;
            drop(st);
            // Snapshot the file and the position together: every byte up to `target` is
            // in this file or in an earlier segment that was synced when it was closed.
            let (file, target, seg) = {
                let w = self.writer.lock();
                (Arc::clone(&w.file), w.written, w.seg)
            };
            let started = Instant::now();
            let r = file.sync_data();
            self.fsyncs.observe(started.elapsed());
            st = self.sync.lock();
            st.syncing = false;
            match r {
                Ok(()) => {
                    st.synced = st.synced.max(target);
                    st.last_sync = Instant::now();
                }
                Err(source) => {
                    let err = Error::Io { op: "fsync wal segment", path: segment_path(&self.dir, seg), source };
                    st.poison(format!("a WAL fsync failed: {}", err.chain()));
                    self.synced_cv.notify_all();
                    tracing::error!(segment = seg, error = %err.chain(), "WAL fsync failed; engine is poisoned");
                    return Err(err);
                }
            }
            self.synced_cv.notify_all();
        }
    }

    /// Latency histogram of every WAL fsync so far.
    pub fn fsync_stats(&self) -> FsyncStats {
        self.fsyncs.snapshot()
    }

    /// Closes the current segment (fsynced) and starts the next one. Returns the new
    /// segment number.
    pub fn rotate(&self) -> Result<u64> {
        let mut w = self.writer.lock();
        let started = Instant::now();
        let r = w.file.sync_data();
        self.fsyncs.observe(started.elapsed());
        if let Err(source) = r {
            let err = Error::Io { op: "fsync wal segment", path: segment_path(&self.dir, w.seg), source };
            self.sync.lock().poison(format!("a WAL fsync failed: {}", err.chain()));
            self.synced_cv.notify_all();
            return Err(err);
        }
        let seg = w.seg + 1;
        let file = Self::new_segment(&self.dir, seg)?;
        w.file = Arc::new(file);
        w.seg = seg;
        w.seg_bytes = 0;
        w.sizes.insert(seg, 0);
        Ok(seg)
    }

    /// Deletes every segment numbered below `keep_from` (never the current one).
    pub fn truncate_before(&self, keep_from: u64) -> Result<usize> {
        let mut w = self.writer.lock();
        let keep_from = keep_from.min(w.seg);
        let doomed: Vec<u64> = w.sizes.range(..keep_from).map(|(s, _)| *s).collect();
        for s in &doomed {
            let p = segment_path(&self.dir, *s);
            match fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(Error::Io { op: "remove wal segment", path: p, source }),
            }
            w.sizes.remove(s);
        }
        if !doomed.is_empty() {
            sync_dir(&self.dir)?;
        }
        Ok(doomed.len())
    }
}

#[cfg(test)]
mod tests;

//! The in-memory head: the series written recently, with one open chunk per active
//! series plus the recently cut chunks that out-of-order samples may still land in.
//!
//! The head holds only series that are in use, not every series the shard ever had:
//! series that go idle (`head_idle_timeout_ms` of shard time without a sample, or
//! sooner after a staleness marker) are *evicted* by `Engine`'s sweep: their open chunk
//! is cut to RocksDB first, then their state and hash-map entries are freed (their label
//! sets and ends stay a while, within a fixed budget, for reads: [`Evicted`]). A series
//! not in the head lives only in RocksDB (`series`, `series_by_hash`, `chunks`); a later
//! sample finds it there by hash and loads it back *cold* (same id), and the first write
//! warms it (`Ctx::warm`). After a restart the head starts empty the same way.
//!
//! **Invariant:** every stored sample with `t >= max_t - out_of_order_window` of a warm
//! series is in `open` or `recent`, so duplicate checks never read RocksDB on the hot
//! path. Chunks of one series never overlap in time: an out-of-order sample goes into
//! the chunk whose range contains it, or the one before the gap it falls in.
//!
//! The head is in memory only: it never reads or writes RocksDB. What a cut, an
//! out-of-order rewrite or a new day must persist goes to a [`ChunkSink`] (the engine
//! passes `persist::Batch`), and a cold series is warmed from [`Recent`] chunks the
//! engine loaded (`persist::load_recent`). The head is guarded by one `Mutex` in
//! `Engine`; nothing here locks.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use rustc_hash::FxHashMap;

/// The hasher of the maps keyed by label-set hashes: foldhash, seeded at random per
/// process (the key is an xxh3 a sender can compute, so an unseeded hasher would let it
/// pick buckets); several times cheaper than std's SipHash on a `u64` key.
pub type SeededState = foldhash::fast::RandomState;

use crate::chunk::{self, Encoding, OpenAppender, MAX_SAMPLES};
use crate::config::EngineConfig;
use crate::error::Result;
use crate::labels_codec;
use crate::types::RejectReason;
use tessera_model::Sample;

/// A chunk already written to RocksDB, kept while out-of-order samples can reach it.
/// Its bytes are as stored (the smallest encoding, [`Ctx::seal`]) and shared with the
/// reads that take it out of the head (a rewrite replaces them, never changes them).
#[derive(Clone, Debug)]
pub struct CutChunk {
    pub enc: Encoding,
    pub bytes: Arc<[u8]>,
    pub mint: i64,
    pub maxt: i64,
}

/// One series in memory.
pub struct MemSeries {
    /// Canonical label encoding (`labels_codec::encode_labels`); compact, and compared byte-wise
    /// to detect hash collisions.
    pub labels: Box<[u8]>,
    pub open: Option<OpenAppender>,
    pub open_mint: i64,
    /// Oldest WAL segment holding a sample of `open`: that segment must outlive it.
    pub open_seg: u64,
    pub recent: Vec<CutChunk>,
    /// Newest timestamp stored for the series; meaningful when `has_max`.
    pub max_t: i64,
    pub has_max: bool,
    /// Whether `recent`/`max_t` were loaded from RocksDB in this process (series that
    /// existed before the last restart are cold until first touched).
    pub warm: bool,
    /// The two days most recently added to postings for this series in this process.
    pub days: [Option<i32>; 2],
    /// Whether a failure to warm this series (its chunks are unreadable) was logged, so
    /// every refused write does not log it again.
    pub warm_failure_logged: bool,
    /// Whether the newest sample (`max_t`) is a staleness marker: the series ended, so
    /// the sweep may evict it before the idle timeout.
    pub stale: bool,
    /// Whether the head holds every chunk ever stored of this series: true for a series
    /// created in this process (nothing of it was stored before) until a cut chunk
    /// leaves `recent`, so that a read of a young series never looks in RocksDB.
    pub complete: bool,
}

impl MemSeries {
    /// A series in the head: `warm` for a new one (nothing of it is stored yet, so the
    /// head holds all of it), cold for one whose chunks are in RocksDB.
    pub fn new(labels: Box<[u8]>, warm: bool) -> MemSeries {
        MemSeries {
            labels,
            open: None,
            open_mint: 0,
            open_seg: 0,
            recent: Vec::new(),
            max_t: i64::MIN,
            has_max: false,
            warm,
            days: [None, None],
            warm_failure_logged: false,
            stale: false,
            complete: warm,
        }
    }

    pub fn open_len(&self) -> usize {
        self.open.as_ref().map_or(0, OpenAppender::len)
    }

    /// Whether every stored sample of this series at or after `t` is in the head (`recent`
    /// or `open`), so that a read from `t` on need not look in RocksDB. The head's chunks
    /// are the series' newest: cuts append to `recent`, only chunks that end before the
    /// out-of-order window leave it (oldest first), and chunks never overlap, so a stored
    /// chunk not in the head ends before the first one that is. Known only for a warm
    /// series (a cold one holds none of its stored chunks). A complete series (see
    /// `complete`) holds everything from any `t`.
    pub fn holds_everything_from(&self, t: i64) -> bool {
        if self.warm && self.complete {
            return true;
        }
        let first = match self.recent.first() {
            Some(c) => c.mint,
            None if self.open_len() > 0 => self.open_mint,
            None => return false,
        };
        self.warm && first <= t
    }

    /// Makes a cold series warm with what is stored for it (loaded by the engine), so
    /// out-of-order and duplicate checks see what is already on disk. Chunks already in
    /// `recent` (replayed from the WAL while an earlier load failed) are kept; loaded
    /// chunks with the same start are not added.
    pub fn warm_from(&mut self, stored: Recent) {
        let Recent { mut chunks, newest, ended_stale } = stored;
        if let Some(t) = newest {
            if !self.has_max || t > self.max_t {
                self.max_t = t;
                self.has_max = true;
                self.stale = ended_stale;
            }
        }
        if self.recent.is_empty() {
            self.recent = chunks;
        } else {
            chunks.retain(|c| self.recent.iter().all(|r| r.mint != c.mint));
            self.recent.extend(chunks);
            self.recent.sort_by_key(|c| c.mint);
        }
        self.warm = true;
    }

    /// Approximate heap bytes, for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        self.labels.len()
            + self.open.as_ref().map_or(0, OpenAppender::heap_bytes)
            + self.recent.iter().map(|c| c.bytes.len() + 16 + std::mem::size_of::<CutChunk>()).sum::<usize>()
    }
}

/// What happened to one sample.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Appended,
    /// Same timestamp, bit-identical value: nothing to do (a retried write).
    Unchanged,
    Rejected(RejectReason),
}

/// Where the head sends what must be persisted; implemented over a RocksDB write batch
/// by `persist::Batch`, so the head itself knows nothing of the store.
pub trait ChunkSink {
    /// A sealed chunk, or an out-of-order rewrite of one, keyed by series and start time,
    /// in the form it is stored in (the head chooses it, [`Ctx::seal`]).
    /// `newest`: no stored chunk of the series ends after this one's `maxt` (a cut of
    /// the open chunk, whose last sample is the series' newest).
    fn put_chunk(&mut self, id: u32, enc: Encoding, mint: i64, maxt: i64, bytes: &[u8], newest: bool);
    /// A chunk that a rewrite replaced with one starting at another time.
    fn delete_chunk(&mut self, id: u32, mint: i64);
    /// Series `id` (canonical label encoding `labels`) has samples on `day`.
    fn add_to_day(&mut self, id: u32, labels: &[u8], day: i32) -> Result<()>;
}

/// A cold series' newest chunks as stored, for [`MemSeries::warm_from`].
#[derive(Debug, Default)]
pub struct Recent {
    /// Chunks within the out-of-order window of the newest stored sample, oldest first.
    pub chunks: Vec<CutChunk>,
    /// Newest stored timestamp, if the series has any chunk.
    pub newest: Option<i64>,
    /// Whether the newest stored sample is a staleness marker.
    pub ended_stale: bool,
}

/// Per-call write context: the configuration, the sink collecting what to persist, and
/// the counters the engine folds in afterwards.
pub struct Ctx<'a, S: ChunkSink> {
    pub cfg: &'a EngineConfig,
    pub sink: S,
    /// WAL segment the samples being applied are (or will be) written to.
    pub seg: u64,
    /// Change in the number of series with a non-empty open chunk.
    pub active_delta: i64,
    /// Decoded samples of the chunk being sealed (reused; see [`Ctx::seal`]).
    scratch: Vec<Sample>,
}

impl<'a, S: ChunkSink> Ctx<'a, S> {
    pub fn new(cfg: &'a EngineConfig, sink: S, seg: u64) -> Ctx<'a, S> {
        Ctx { cfg, sink, seg, active_delta: 0, scratch: Vec::new() }
    }

    /// The form a sealed chunk is stored and kept in: the decimal encoding when the
    /// samples allow it and it is smaller than their XOR encoding, else the XOR one
    /// (`chunk::sealed_form`).
    fn seal(&mut self, enc: Encoding, bytes: Vec<u8>) -> Result<(Encoding, Arc<[u8]>)> {
        let (enc, bytes) = chunk::sealed_form(bytes, enc, &mut self.scratch)?;
        Ok((enc, bytes.into()))
    }

    /// Seals the open chunk of `s`: writes it and keeps it in `recent`.
    pub fn cut(&mut self, id: u32, s: &mut MemSeries) -> Result<()> {
        let Some(open) = s.open.take() else { return Ok(()) };
        if open.is_empty() {
            return Ok(());
        }
        let maxt = open.last_t();
        let (enc, bytes) = self.seal(open.encoding(), open.into_bytes())?;
        // The open chunk holds the series' newest sample, unless an out-of-order sample
        // opened it behind what is stored (see `insert_out_of_order`).
        let newest = !s.has_max || maxt >= s.max_t;
        self.sink.put_chunk(id, enc, s.open_mint, maxt, &bytes, newest);
        s.recent.push(CutChunk { enc, bytes, mint: s.open_mint, maxt });
        self.active_delta -= 1;
        Ok(())
    }

    /// Records that series `id` has data on `day`, adding it to that day's postings
    /// unless it is one of the two days indexed most recently for the series (nearly
    /// every sample falls on the same day as the previous one; out-of-order samples
    /// around midnight touch two). Postings are idempotent, so forgetting an older day
    /// only costs a redundant merge operand.
    pub fn mark_day(&mut self, id: u32, s: &mut MemSeries, day: i32) -> Result<()> {
        if s.days[0] == Some(day) || s.days[1] == Some(day) {
            return Ok(());
        }
        s.days = [Some(day), s.days[0]];
        self.sink.add_to_day(id, &s.labels, day)
    }

    /// Applies one sample to a (warm) series with Prometheus append semantics.
    pub fn apply(&mut self, id: u32, s: &mut MemSeries, t: i64, v: f64) -> Result<Outcome> {
        let window = self.cfg.out_of_order_window_ms;
        if !s.has_max || t > s.max_t {
            self.append_in_order(id, s, t, v)?;
            s.max_t = t;
            s.has_max = true;
            s.stale = tessera_model::is_stale_nan(v);
            let keep_from = t.saturating_sub(window);
            // Chunks are in time order: the ones that leave are the oldest.
            let settled = s.recent.iter().take_while(|c| c.maxt < keep_from).count();
            if settled > 0 {
                s.recent.drain(..settled);
                s.complete = false;
            }
            return Ok(Outcome::Appended);
        }
        let min_allowed = s.max_t.saturating_sub(window);
        if t < min_allowed {
            return Ok(Outcome::Rejected(RejectReason::TooOld { min_allowed_t: min_allowed }));
        }
        self.insert_out_of_order(id, s, t, v)
    }

    fn append_in_order(&mut self, id: u32, s: &mut MemSeries, t: i64, v: f64) -> Result<()> {
        let n = s.open_len();
        if n > 0 && self.cfg.cuts_chunk(n, s.open_mint, t) {
            self.cut(id, s)?;
        }
        if s.open_len() == 0 {
            let mut a = OpenAppender::new();
            a.append(t, v)?;
            s.open = Some(a);
            s.open_mint = t;
            s.open_seg = self.seg;
            self.active_delta += 1;
            return Ok(());
        }
        s.open.as_mut().expect("open_len() > 0 implies an open chunk").append(t, v)
    }

    fn insert_out_of_order(&mut self, id: u32, s: &mut MemSeries, t: i64, v: f64) -> Result<Outcome> {
        // Chunks in time order: recent ones, then the open one.
        let open_idx = s.recent.len();
        let has_open = s.open_len() > 0;
        let count = open_idx + usize::from(has_open);
        if count == 0 {
            // Nothing in memory covers the window (cannot happen for a warm series with
            // a max_t, but stay correct): start an open chunk.
            return self.append_in_order(id, s, t, v).map(|()| Outcome::Appended);
        }
        let mint_of = |i: usize| if i == open_idx { s.open_mint } else { s.recent[i].mint };
        let target = (0..count).rev().find(|&i| mint_of(i) <= t).unwrap_or(0);
        let mut samples = if target == open_idx {
            let open = s.open.as_ref().expect("has_open");
            chunk::decode(open.bytes(), open.encoding())?
        } else {
            chunk::decode(&s.recent[target].bytes, s.recent[target].enc)?
        };
        match samples.binary_search_by(|x| x.t.cmp(&t)) {
            Ok(i) => {
                return Ok(if samples[i].v.to_bits() == v.to_bits() {
                    Outcome::Unchanged
                } else {
                    Outcome::Rejected(RejectReason::Duplicate)
                });
            }
            Err(i) => {
                if samples.len() >= MAX_SAMPLES {
                    // Reachable from user input (tens of thousands of distinct
                    // out-of-order timestamps within the window), so it is a rejection of
                    // this sample, not an engine error.
                    return Ok(Outcome::Rejected(RejectReason::OutOfOrderChunkFull));
                }
                samples.insert(i, Sample { t, v });
            }
        }
        let new_mint = samples[0].t;
        let new_maxt = samples[samples.len() - 1].t;
        if target == open_idx {
            s.open = Some(OpenAppender::from_samples(&samples)?);
            s.open_mint = new_mint;
        } else {
            let (enc, bytes) = chunk::stored_form(&samples)?;
            let bytes: Arc<[u8]> = bytes.into();
            let old_mint = s.recent[target].mint;
            if old_mint != new_mint {
                self.sink.delete_chunk(id, old_mint);
            }
            self.sink.put_chunk(id, enc, new_mint, new_maxt, &bytes, false);
            s.recent[target] = CutChunk { enc, bytes, mint: new_mint, maxt: new_maxt };
        }
        Ok(Outcome::Appended)
    }
}

/// The series of the shard that are in memory (see the module doc for which ones).
///
/// Series live in [`Slots`] (pages of slots, reused after eviction) rather than one
/// allocation each: the hot path (an append finding its series by label hash) then
/// reads the hash map's bucket, the slot, and the labels, one memory access fewer than
/// a map of boxed series, which measured 1.2x slower with 100,000 series.
#[derive(Default)]
pub struct Head {
    slots: Slots,
    /// Series id → slot. Ids are ours, never chosen by a sender, so a fast unkeyed
    /// hasher is safe here; the maps keyed by label-set hashes (which a sender can
    /// steer) use a hasher seeded at random per process ([`SeededState`]), so a sender
    /// cannot aim many label sets at one bucket.
    index: FxHashMap<u32, u32>,
    /// Label-set hash → slot of the first head series with this hash.
    by_hash: HashMap<u64, u32, SeededState>,
    /// Slots of further series whose label sets share a hash (rare; xxh3-64 collisions).
    collisions: HashMap<u64, Vec<u32>, SeededState>,
    /// The next id to assign: ids are never reused, also not after retention deleted
    /// the series (persisted in `meta` as `next_series_id`). Runs reserved by
    /// [`Head::new_id`] lie below it.
    pub next_id: u32,
    /// Per metric name, the rest of the run of ids it is being given (see
    /// [`Head::new_id`]): the next id and the run's end.
    id_runs: HashMap<Box<[u8]>, (u32, u32)>,
    /// Series with a non-empty open chunk.
    pub active: u64,
    /// Newest timestamp stored in the shard (drives retention), i64::MIN when empty.
    pub max_t: i64,
    /// The days that have postings. Index scans visit exactly these (a query over a
    /// huge time range costs the days that hold data, not the days it spans), and
    /// knowing them here spares every query a RocksDB seek per day, which would merge
    /// that day's postings operands just to learn that the day exists.
    pub days: BTreeSet<i32>,
    /// Whether RocksDB may hold series that are not in the head (loaded at open or
    /// evicted since): then a label set missing from the head is looked up on disk
    /// before a new id is assigned. False only for a shard that started empty and has
    /// evicted nothing, where that lookup would always miss.
    pub series_on_disk_only: bool,
    /// The label sets and ends of series the sweep evicted lately (see [`Evicted`]).
    evicted: Evicted,
    /// Shard time (ms) at or after which the next idle sweep runs.
    pub next_sweep_t: i64,
}

/// Slots per page of [`Slots`].
const PAGE: usize = 256;

/// Ids per run a metric name's new series are given (see [`Head::new_id`]).
pub const ID_RUN: u32 = 256;

/// Metric names with a run of ids at once; further names' series get single ids. Bounds
/// the map (a sender may invent names), and the ids a restart leaves unused in open runs
/// to a million.
const MAX_ID_RUNS: usize = 4096;

/// The head's series storage: fixed-size pages of slots, so growing never copies or
/// doubles what is there, and a slot freed by eviction is reused by the next series.
#[derive(Default)]
struct Slots {
    pages: Vec<Box<[Option<(u32, MemSeries)>]>>,
    /// Every empty slot (a new page puts all but its first slot here).
    free: Vec<u32>,
}

impl Slots {
    /// Occupied slots: every slot is either occupied or on the free list.
    fn len(&self) -> usize {
        self.pages.len() * PAGE - self.free.len()
    }

    fn get(&self, slot: u32) -> Option<&(u32, MemSeries)> {
        let slot = slot as usize;
        self.pages.get(slot / PAGE)?[slot % PAGE].as_ref()
    }

    fn get_mut(&mut self, slot: u32) -> Option<&mut (u32, MemSeries)> {
        let slot = slot as usize;
        self.pages.get_mut(slot / PAGE)?[slot % PAGE].as_mut()
    }

    fn put(&mut self, id: u32, s: MemSeries) -> u32 {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                let slot = (self.pages.len() * PAGE) as u32;
                self.pages.push((0..PAGE).map(|_| None).collect());
                self.free.extend((slot + 1..slot + PAGE as u32).rev());
                slot
            }
        };
        self.pages[slot as usize / PAGE][slot as usize % PAGE] = Some((id, s));
        slot
    }

    fn take(&mut self, slot: u32) -> Option<(u32, MemSeries)> {
        let taken = self.pages.get_mut(slot as usize / PAGE)?[slot as usize % PAGE].take()?;
        self.free.push(slot);
        Some(taken)
    }

    fn iter(&self) -> impl Iterator<Item = &(u32, MemSeries)> {
        self.pages.iter().flat_map(|p| p.iter().flatten())
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut (u32, MemSeries)> {
        self.pages.iter_mut().flat_map(|p| p.iter_mut().flatten())
    }
}

impl Head {
    pub fn new() -> Head {
        Head { max_t: i64::MIN, next_sweep_t: i64::MIN, ..Head::default() }
    }

    /// Series in the head.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Every head series with its id, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &MemSeries)> {
        self.slots.iter().map(|(id, s)| (*id, s))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut MemSeries)> {
        self.slots.iter_mut().map(|(id, s)| (*id, s))
    }

    /// An id for a new series named `metric`, `None` once ids are exhausted. A metric's
    /// new series get consecutive ids from a run of [`ID_RUN`] reserved for it, so its
    /// chunks (keyed by id) lie together in RocksDB and a query over one metric reads the
    /// blocks of that metric only. Handed out in arrival order, the series of the metrics
    /// one target exposes took turns: a query over one of four DCGM fields read and
    /// decompressed every field's blocks (BENCHMARKS.md, "A week-long query's sample
    /// buffers"). Ids of a run not used when the process stops are never used; ids stay
    /// unique because a run starts at `next_id` and moves it past the run.
    pub fn new_id(&mut self, metric: &[u8]) -> Option<u32> {
        if let Some((next, end)) = self.id_runs.get_mut(metric) {
            if *next < *end {
                *next += 1;
                return Some(*next - 1);
            }
        } else if self.id_runs.len() >= MAX_ID_RUNS {
            let id = self.next_id;
            self.next_id = id.checked_add(1)?;
            return Some(id);
        }
        let start = self.next_id;
        let end = start.checked_add(ID_RUN)?;
        self.next_id = end;
        self.id_runs.insert(metric.into(), (start + 1, end));
        Some(start)
    }

    /// Finds the id of a head series by its canonical label encoding.
    pub fn lookup(&self, hash: u64, encoded: &[u8]) -> Option<u32> {
        let first = *self.by_hash.get(&hash)?;
        let same = |slot: u32| self.slots.get(slot).filter(|(_, s)| *s.labels == *encoded).map(|(id, _)| *id);
        same(first).or_else(|| self.collisions.get(&hash)?.iter().find_map(|&slot| same(slot)))
    }

    /// Registers a series under an id (new, loaded back from RocksDB, or replayed),
    /// replacing the series of that id if the head has one.
    pub fn insert(&mut self, id: u32, hash: u64, s: MemSeries) {
        if let Some(&slot) = self.index.get(&id) {
            if let Some(entry) = self.slots.get_mut(slot) {
                entry.1 = s;
                return;
            }
        }
        self.place(id, hash, s);
        self.next_id = self.next_id.max(id.saturating_add(1));
    }

    /// Puts a series not in the head yet into a slot and files it by id and hash.
    fn place(&mut self, id: u32, hash: u64, s: MemSeries) {
        self.evicted.forget(id);
        let slot = self.slots.put(id, s);
        self.index.insert(id, slot);
        match self.by_hash.get(&hash) {
            Some(_) => self.collisions.entry(hash).or_default().push(slot),
            None => {
                self.by_hash.insert(hash, slot);
            }
        }
    }

    /// Takes a series out of the head (its open chunk must already be cut, or its data
    /// be past retention) and forgets its hash entry.
    pub fn remove(&mut self, id: u32) -> Option<MemSeries> {
        self.evicted.forget(id);
        let slot = self.index.remove(&id)?;
        let (_, s) = self.slots.take(slot)?;
        let hash = labels_codec::labels_hash(&s.labels);
        if self.by_hash.get(&hash) == Some(&slot) {
            self.by_hash.remove(&hash);
            // Promote a colliding series, if any, to the primary slot.
            if let Some(slots) = self.collisions.get_mut(&hash) {
                if let Some(next) = slots.pop() {
                    self.by_hash.insert(hash, next);
                }
                if slots.is_empty() {
                    self.collisions.remove(&hash);
                }
            }
        } else if let Some(slots) = self.collisions.get_mut(&hash) {
            slots.retain(|&x| x != slot);
            if slots.is_empty() {
                self.collisions.remove(&hash);
            }
        }
        self.series_on_disk_only = true;
        Some(s)
    }

    /// Takes an idle series out of the head (its open chunk already cut and stored) and
    /// keeps its label set and newest timestamp among the [`Evicted`].
    pub fn evict(&mut self, id: u32) {
        if let Some(s) = self.remove(id) {
            if s.has_max {
                self.evicted.remember(id, s.labels, s.max_t);
            }
        }
    }

    /// The label set and newest timestamp of series `id` if the sweep evicted it lately
    /// and it has not come back (see [`Evicted`]).
    pub fn evicted(&self, id: u32) -> Option<(&[u8], i64)> {
        self.evicted.get(id)
    }

    /// Where a read over a range from `mint` finds series `id`: the one rule every
    /// reader of series not in the head follows (the select cursor, the series listing,
    /// the label listings' ended-series check).
    pub fn locate(&self, id: u32, mint: i64) -> Located<'_> {
        // The evicted list is looked in only for a series not in the head: a lookup
        // there is a cache miss per series read.
        if let Some(s) = self.get(id) {
            return Located::Head(s);
        }
        match self.evicted(id) {
            Some((_, end)) if end < mint => Located::EndedBefore,
            Some((labels, _)) => Located::Evicted(labels),
            None => Located::Stored,
        }
    }

    /// [`locate`](Head::locate) for each of `ids`, in order, with the memory a read of
    /// each then touches first already loaded: a head series' label set, open chunk and
    /// cut chunks, an evicted one's label set.
    ///
    /// A series' entries are scattered over the heap, so each first touch is a cache
    /// miss, and a reader that handles one series at a time (copying labels, chunks)
    /// waits for them one after another: the work between two series is longer than
    /// the processor can look ahead. Here every series is located first, then every
    /// series' bytes are touched in a loop so short that the processor has the misses
    /// of several series in flight at once; the reader then finds them in cache.
    pub fn locate_all(&self, ids: &[u32], mint: i64) -> Vec<(u32, Located<'_>)> {
        let out: Vec<_> = ids.iter().map(|&id| (id, self.locate(id, mint))).collect();
        let mut touched = 0u8;
        for (_, at) in out.iter() {
            match at {
                Located::Head(s) => {
                    touched ^= s.labels.first().copied().unwrap_or(0);
                    if let Some(o) = &s.open {
                        touched ^= o.bytes().first().copied().unwrap_or(0);
                    }
                    for c in &s.recent {
                        touched ^= c.bytes.first().copied().unwrap_or(0);
                    }
                }
                Located::Evicted(labels) => touched ^= labels.first().copied().unwrap_or(0),
                Located::EndedBefore | Located::Stored => {}
            }
        }
        // The loads above are the point; the value is not.
        std::hint::black_box(touched);
        out
    }

    /// Gives memory back to the allocator after many evictions (hash maps never shrink
    /// by themselves, and freed slots are only reused, so without this the head would
    /// keep its peak size): when under a quarter of the slots are in use, the series
    /// move into as few pages as they need.
    pub fn shrink(&mut self) {
        let capacity = self.slots.pages.len() * PAGE;
        if capacity > PAGE && self.slots.len() < capacity / 4 {
            let old = std::mem::take(&mut self.slots);
            self.index = FxHashMap::default();
            self.by_hash = HashMap::default();
            self.collisions = HashMap::default();
            for (id, s) in old.pages.into_iter().flat_map(|p| p.into_vec().into_iter().flatten()) {
                self.place(id, labels_codec::labels_hash(&s.labels), s);
            }
        }
        if self.index.capacity() > 64 && self.index.len() < self.index.capacity() / 4 {
            self.index.shrink_to_fit();
        }
        if self.by_hash.capacity() > 64 && self.by_hash.len() < self.by_hash.capacity() / 4 {
            self.by_hash.shrink_to_fit();
        }
    }

    pub fn get(&self, id: u32) -> Option<&MemSeries> {
        self.slots.get(*self.index.get(&id)?).map(|(_, s)| s)
    }

    pub fn get_mut(&mut self, id: u32) -> Option<&mut MemSeries> {
        self.slots.get_mut(*self.index.get(&id)?).map(|(_, s)| s)
    }

    /// Records that `day` has postings (called per appended sample: nearly always the
    /// newest day, answered without a tree search).
    pub fn note_day(&mut self, day: i32) {
        if self.days.last() != Some(&day) {
            self.days.insert(day);
        }
    }

    /// Approximate heap bytes of the head: the maps (at their capacity, with hashbrown's
    /// one control byte per slot), the slot pages, and each series' labels and chunks.
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let map = |cap: usize, entry: usize| cap * (entry + 1);
        map(self.index.capacity(), size_of::<(u32, u32)>())
            + self.slots.pages.len() * PAGE * size_of::<Option<(u32, MemSeries)>>()
            + self.slots.free.capacity() * size_of::<u32>()
            + self.slots.iter().map(|(_, s)| s.heap_bytes()).sum::<usize>()
            + map(self.by_hash.capacity(), size_of::<(u64, u32)>())
            + map(self.collisions.capacity(), size_of::<(u64, Vec<u32>)>())
            + self.collisions.values().map(|v| v.capacity() * 4).sum::<usize>()
            + self.evicted.heap_bytes()
    }
}

/// Where a read finds a series ([`Head::locate`]).
pub enum Located<'a> {
    /// In the head.
    Head(&'a MemSeries),
    /// Evicted lately and ended at or after the range's start: its label set is here,
    /// its chunks are in RocksDB.
    Evicted(&'a [u8]),
    /// Evicted lately and ended before the range's start: nothing of it is in range.
    EndedBefore,
    /// Not in the head nor among the evicted: labels, end and chunks are in RocksDB.
    Stored,
}

/// The label sets and newest timestamps of the series the sweep evicted last, up to
/// [`Evicted::BUDGET`] bytes (oldest evictions leave first), until a series comes back
/// or retention deletes it. A read over a range such a series ended in (a dashboard over
/// the last hours of a fleet whose pods come and go) takes its labels from here and
/// passes over it when it ended before the range, instead of looking up its label set
/// and its end in RocksDB: two seeks into column families whose records are spread over
/// memtables (`series_ends` holds a merge operand per chunk written), which made the
/// 1.2 % of `dcgm_all_rate`'s series that were evicted cost 7 % of its time; with this,
/// 4.4–4.8 % less (BENCHMARKS.md, "Probes of the read path on the EPYC machine"). Its
/// chunks are still read from RocksDB.
#[derive(Default)]
pub(crate) struct Evicted {
    /// By id: the label set, the newest timestamp and the eviction's number.
    series: FxHashMap<u32, (Box<[u8]>, i64, u64)>,
    /// Ids and eviction numbers in eviction order; an entry whose number is no longer
    /// its id's (the series came back, or was evicted again since) is passed over.
    order: VecDeque<(u32, u64)>,
    evictions: u64,
    /// Bytes held: label sets and [`Evicted::ENTRY`] per entry.
    bytes: usize,
}

impl Evicted {
    /// Bytes kept per shard, label sets and entries: about 4,500 evicted series of the
    /// benchmark's fleet (label sets of about 300 bytes). 8 MiB measured the same on the
    /// compare dataset and on one that churns six times faster (BENCHMARKS.md).
    pub(crate) const BUDGET: usize = 2 << 20;
    /// What an entry costs at most besides its label set: its map slot (41 bytes, at most
    /// about twice over with the map's spare capacity) and its places in `order` (16
    /// bytes, up to twice as many entries as the map's, with a deque's spare capacity).
    const ENTRY: usize = 160;

    fn remember(&mut self, id: u32, labels: Box<[u8]>, end: i64) {
        self.evictions += 1;
        self.bytes += labels.len() + Self::ENTRY;
        if let Some((old, ..)) = self.series.insert(id, (labels, end, self.evictions)) {
            self.bytes -= old.len() + Self::ENTRY;
        }
        self.order.push_back((id, self.evictions));
        while self.bytes > Self::BUDGET {
            let Some((oldest, n)) = self.order.pop_front() else { break };
            if self.series.get(&oldest).is_some_and(|e| e.2 == n) {
                self.forget(oldest);
            }
        }
        // Entries passed over would pile up in `order` until they reach its front.
        if self.order.len() > 2 * self.series.len() + 1024 {
            let series = &self.series;
            self.order.retain(|(id, n)| series.get(id).is_some_and(|e| e.2 == *n));
        }
    }

    fn forget(&mut self, id: u32) {
        if let Some((labels, ..)) = self.series.remove(&id) {
            self.bytes -= labels.len() + Self::ENTRY;
        }
    }

    fn get(&self, id: u32) -> Option<(&[u8], i64)> {
        self.series.get(&id).map(|(labels, end, _)| (&labels[..], *end))
    }

    fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let labels = self.bytes - self.series.len() * Self::ENTRY;
        labels
            + self.series.capacity() * (size_of::<(u32, (Box<[u8]>, i64, u64))>() + 1)
            + self.order.capacity() * size_of::<(u32, u64)>()
    }
}

#[cfg(test)]
mod tests;

//! [`SeriesCursor`] (`select`): merges head chunks with persisted chunks, decoding only
//! chunks that overlap the query range, and de-duplicates overlapping samples, one
//! series at a time in storage order (ascending series id, the order of the chunk keys),
//! so a reader that folds each series before taking the next holds one series' samples,
//! not the whole answer, and reads each RocksDB block once. `select_chunks`: the same
//! chunks as stored, not decoded, for a reader elsewhere (a cluster querier) that
//! decodes them with [`ChunkSamples`] under the same rules.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;

use parking_lot::Mutex;
use roaring::RoaringBitmap;
use rocksdb::{DBRawIterator, DB};
use tessera_model::Labels;

use crate::chunk::{self, Decode, Encoding};
use crate::db::{CF_CHUNKS, CF_SERIES, CF_SERIES_ENDS};
use crate::error::{Error, Result};
use crate::head::{Head, Located, MemSeries};
use crate::interrupt::Interrupt;
use crate::keys;
use crate::labels_codec;
use crate::types::{RawChunk, SeriesChunks, SeriesSamples};
use tessera_model::Sample;

/// What `select` copies out of the head under its lock (bytes only; decoding happens
/// after the lock is released so a big query does not stall appends).
pub struct SeriesSnap {
    id: u32,
    labels: Box<[u8]>,
    /// Head chunks overlapping the range, in time order.
    head_chunks: Vec<HeadChunk>,
    /// Whether RocksDB may hold samples of the range that the head does not.
    read_stored: bool,
    /// The range's end (chunks starting after it are not read).
    maxt: i64,
}

impl SeriesSnap {
    /// The series' canonical label encoding.
    pub fn labels(&self) -> &[u8] {
        &self.labels
    }
}

/// Visits the series `ids` with the head locked: `each(id, head)`, where `head.get(id)`
/// is the series if it is in the head, `None` if not (evicted or never loaded: all its
/// data is in RocksDB). The head lock is taken per [`HEAD_LOCK_SERIES`] series, so that
/// appends wait for one part, never for a whole read; `stop` is checked before each part
/// (as `what`). Whatever `each` keeps of a series it copies: the lock is gone after the
/// part.
pub fn visit_head(
    head: &Mutex<Head>,
    ids: &[u32],
    stop: &Interrupt,
    what: &'static str,
    mut each: impl FnMut(u32, &Head),
) -> Result<()> {
    for_each_part(head, ids, stop, what, |part, head| part.iter().for_each(|&id| each(id, head)))
}

/// Calls `each(part, head)` for the parts of [`HEAD_LOCK_SERIES`] series of `ids`, each
/// with the head locked, after checking `stop` (as `what`).
fn for_each_part(
    head: &Mutex<Head>,
    ids: &[u32],
    stop: &Interrupt,
    what: &'static str,
    mut each: impl FnMut(&[u32], &Head),
) -> Result<()> {
    for part in ids.chunks(HEAD_LOCK_SERIES) {
        stop.check(what)?;
        each(part, &head.lock());
    }
    Ok(())
}

/// [`visit_head`] for a reader of every series' bytes: the series of each part are
/// located together ([`Head::locate_all`], which loads what a read touches first), then
/// `each(id, where)` is called for each, in order.
fn visit_located(
    head: &Mutex<Head>,
    ids: &[u32],
    mint: i64,
    stop: &Interrupt,
    what: &'static str,
    mut each: impl FnMut(u32, Located<'_>),
) -> Result<()> {
    for_each_part(head, ids, stop, what, |part, head| {
        head.locate_all(part, mint).into_iter().for_each(|(id, at)| each(id, at))
    })
}

/// Copies the head chunks of the series in `ids` that are in the head, and the labels
/// of those evicted lately that end in the range ([`Head::locate`]: one evicted and
/// ended before `mint` is left out); returns them and the ids of the series whose
/// labels are in RocksDB alone.
pub fn snapshot(
    head: &Mutex<Head>,
    ids: &RoaringBitmap,
    mint: i64,
    maxt: i64,
    stop: &Interrupt,
) -> Result<(Vec<SeriesSnap>, Vec<u32>)> {
    let mut out = Vec::with_capacity(ids.len() as usize);
    let mut not_in_head = Vec::new();
    let ids: Vec<u32> = ids.iter().collect();
    visit_located(head, &ids, mint, stop, "head snapshot", |id, at| match at {
        Located::Head(s) => out.push(SeriesSnap {
            id,
            labels: s.labels.clone(),
            head_chunks: head_chunks(s, mint, maxt),
            read_stored: !s.holds_everything_from(mint),
            maxt,
        }),
        Located::Evicted(labels) => {
            out.push(SeriesSnap { id, labels: Box::from(labels), head_chunks: Vec::new(), read_stored: true, maxt })
        }
        Located::EndedBefore => {}
        Located::Stored => not_in_head.push(id),
    })?;
    Ok((out, not_in_head))
}

/// A chunk of a head series as a read took it: a cut chunk's bytes shared with the head
/// (they never change: a rewrite replaces them), the open chunk's copied.
struct HeadChunk {
    encoding: Encoding,
    mint: i64,
    maxt: i64,
    bytes: Arc<[u8]>,
}

/// The bytes of a head chunk as the head holds them: a cut chunk's, which never change
/// (a rewrite replaces them), shared; the open chunk's, which the next append changes,
/// for a reader to copy.
enum InHead<'s> {
    Cut(&'s Arc<[u8]>),
    Open(&'s [u8]),
}

/// Calls `each(encoding, mint, maxt, bytes)` for the chunks of head series `s` that
/// overlap `[mint, maxt]`, in time order.
fn for_each_head_chunk(s: &MemSeries, mint: i64, maxt: i64, mut each: impl FnMut(Encoding, i64, i64, InHead<'_>)) {
    for c in &s.recent {
        if c.mint <= maxt && c.maxt >= mint {
            each(c.enc, c.mint, c.maxt, InHead::Cut(&c.bytes));
        }
    }
    if let Some(o) = &s.open {
        if !o.is_empty() && s.open_mint <= maxt && o.last_t() >= mint {
            each(o.encoding(), s.open_mint, o.last_t(), InHead::Open(o.bytes()));
        }
    }
}

/// The chunks of head series `s` that overlap `[mint, maxt]`, in time order.
fn head_chunks(s: &MemSeries, mint: i64, maxt: i64) -> Vec<HeadChunk> {
    let mut out = Vec::new();
    for_each_head_chunk(s, mint, maxt, |encoding, mint, maxt, bytes| {
        let bytes = match bytes {
            InHead::Cut(b) => Arc::clone(b),
            InHead::Open(b) => Arc::from(b),
        };
        out.push(HeadChunk { encoding, mint, maxt, bytes });
    });
    out
}

/// Snapshots of series that are not in the head: labels from the `series` column
/// family, no head chunks. Ids without a record (deleted by retention after the index
/// was read) are skipped. The labels are checked when they are decoded
/// (`labels_codec::decode_label_set`, by every caller), not here as well.
///
/// One forward walk of the column family ([`for_each_record`]).
pub fn stored_snaps(db: &DB, ids: &[u32], maxt: i64, stop: &Interrupt) -> Result<Vec<SeriesSnap>> {
    let mut out = Vec::with_capacity(ids.len());
    for_each_stored_label_set(db, ids, stop, |id, labels| {
        out.push(SeriesSnap { id, labels: Box::from(labels), head_chunks: Vec::new(), read_stored: true, maxt });
    })?;
    Ok(out)
}

/// Calls `each(id, encoded labels)` for the series `ids` (ascending) that have a record
/// in the `series` column family, walking it forward ([`stored_snaps`]).
fn for_each_stored_label_set(db: &DB, ids: &[u32], stop: &Interrupt, each: impl FnMut(u32, &[u8])) -> Result<()> {
    for_each_record(db, CF_SERIES, ids, stop, each)
}

/// Removes from `ids` (ascending, series not in the head) those whose stored chunks all
/// end before `mint`, as their records in the `series_ends` column family say, so that a
/// read passes over them without a seek into the chunks: over a recent range, most
/// series of a day with pods churning ended hours ago, and the seek to find that out
/// costs a chunk block each. A series without a record (its chunks were written before
/// this column family existed) stays; its chunks tell.
pub fn drop_ended(db: &DB, ids: &mut Vec<u32>, mint: i64, stop: &Interrupt) -> Result<()> {
    let ended = ended_before(db, ids, mint, stop)?;
    if !ended.is_empty() {
        // Both ascend.
        let mut ended = ended.into_iter().peekable();
        ids.retain(|&id| ended.next_if_eq(&id).is_none());
    }
    Ok(())
}

/// Those of the series `ids` (ascending, not in the head) whose `series_ends` record is
/// before `mint`, ascending (see [`drop_ended`]). The records only save work, so one
/// that cannot be read (a damaged table file) costs that saving, not the read: the
/// error is logged and no series counts as ended.
pub fn ended_before(db: &DB, ids: &[u32], mint: i64, stop: &Interrupt) -> Result<Vec<u32>> {
    let mut ended = Vec::new();
    let walked = for_each_record(db, CF_SERIES_ENDS, ids, stop, |id, v| {
        if keys::parse_series_end(v).is_some_and(|end| end < mint) {
            ended.push(id);
        }
    });
    match walked {
        Ok(()) => Ok(ended),
        Err(e @ Error::Interrupted { .. }) => Err(e),
        Err(e) => {
            tracing::warn!(error = %e.chain(), "storage: series ends unreadable; reading those series' chunks instead");
            Ok(Vec::new())
        }
    }
}

/// Calls `each(id, value)` for the series `ids` (ascending) that have a record in the
/// column family `cf_name`, keyed by [`keys::series_key`].
///
/// The ids ascend (they come from a bitmap) and so do their big-endian keys, so one
/// iterator walks the column family forward: a few steps to a near record (selected
/// ids are usually close: the other metrics' series lie between them), a seek to a far
/// one. A point lookup per id (`multi_get`) searched the index and a block for each;
/// it was 8.5 % of `dcgm_all_rate`'s profile on a freshly started server.
fn for_each_record(
    db: &DB,
    cf_name: &str,
    ids: &[u32],
    stop: &Interrupt,
    mut each: impl FnMut(u32, &[u8]),
) -> Result<()> {
    let cf =
        db.cf_handle(cf_name).ok_or_else(|| Error::corrupt("rocksdb", format!("missing column family {cf_name}")))?;
    // Not valid until the first seek (as in `for_each_chunk`).
    let mut it = db.raw_iterator_cf(cf);
    for (i, &id) in ids.iter().enumerate() {
        if i % 1024 == 0 {
            stop.check("series listing")?;
        }
        let key = keys::series_key(id);
        step_or_seek(&mut it, &key);
        if !it.valid() {
            it.status().map_err(Error::rocks("read series records"))?;
            break; // no record at or after this id: none for the rest either
        }
        let (Some(k), Some(v)) = (it.key(), it.value()) else { continue };
        if k != key.as_slice() {
            continue;
        }
        each(id, v);
        it.next();
    }
    it.status().map_err(Error::rocks("read series records"))
}

/// Moves a forward iterator to the first key at or after `key`: by a few steps when
/// that key is near (the next selected series' record or first chunk usually is), by a
/// seek (an index and a block search) otherwise or when the iterator was never placed
/// (it is not valid then). An iterator already there stays.
fn step_or_seek(it: &mut rocksdb::DBRawIterator<'_>, key: &[u8]) {
    /// Keys stepped over before a seek is cheaper.
    const STEPS_BEFORE_SEEK: usize = 8;
    let before_key = |it: &rocksdb::DBRawIterator<'_>| it.key().is_some_and(|k| k < key);
    for _ in 0..STEPS_BEFORE_SEEK {
        if !(it.valid() && before_key(it)) {
            break;
        }
        it.next();
    }
    if !it.valid() || before_key(it) {
        it.seek(key);
    }
}

/// How many series a [`SeriesCursor`] reads with one RocksDB iterator, their labels held
/// at once. An iterator must be created after the head was looked at for its series (a
/// chunk an eviction writes later would be missed), so each batch gets a new one, and
/// RocksDB's readahead starts small again with it (8 KiB, doubling to 256 KiB per file).
/// With 256 series a batch, a scan of every series of a week (about 2 KiB of chunks
/// each) never left that ramp: the billion-sample week's all-samples query from disk
/// took 8.7–13.6 s against 7.4–9.2 s with 4,096 (BENCHMARKS.md, "Recent reads without
/// seeks").
pub(crate) const CURSOR_BATCH: usize = 4096;

/// How many series a [`SeriesCursor`] copies out of the head under one lock: the lock
/// is held briefly (appends wait for it).
const HEAD_LOCK_SERIES: usize = 256;

/// Bytes of stored chunks a [`SeriesCursor`] reads ahead per batch to put series with
/// the same timestamps together ([`SeriesCursor::same_times_together`]); past them, the
/// batch's other series come in storage order.
const AHEAD_BYTES: usize = 8 << 20;

/// A series of a [`SeriesCursor`]'s batch, not read yet.
struct Pending {
    id: u32,
    /// Its chunks held in the head that overlap the range, in time order: their place in
    /// the cursor's `head_chunks`.
    head: Range<usize>,
    /// Whether RocksDB may hold samples of the range that its head chunks do not.
    read_stored: bool,
    /// Its encoded labels' place in the cursor's `labels` (empty until known): the
    /// labels named by `only_labels` when that is set, else all of them.
    labels: Range<usize>,
    /// Its stored chunks, when read ahead with its batch.
    ahead: Option<Ahead>,
}

/// A series' stored chunks read ahead with its batch
/// ([`SeriesCursor::same_times_together`]).
struct Ahead {
    /// Their place in the cursor's `ahead_chunks`.
    chunks: Range<usize>,
    /// Where its first chunk (stored or in the head) starts and how many samples all its
    /// chunks hold ([`samples_in`]): equal for series scraped together.
    start: i64,
    samples: usize,
}

/// A head chunk as a [`SeriesCursor`] holds it for a batch: a cut chunk's bytes shared
/// with the head, the open chunk's copied into the cursor's `open_bytes` (one buffer
/// for the batch, not an allocation per series).
struct BatchChunk {
    encoding: Encoding,
    mint: i64,
    bytes: BatchBytes,
}

enum BatchBytes {
    Shared(Arc<[u8]>),
    Open(Range<usize>),
}

impl BatchChunk {
    fn bytes<'b>(&'b self, open_bytes: &'b [u8]) -> &'b [u8] {
        match &self.bytes {
            BatchBytes::Shared(b) => b,
            BatchBytes::Open(r) => &open_bytes[r.clone()],
        }
    }
}

/// Appends to `out` the chunks of head series `s` that overlap `[mint, maxt]`, in time
/// order, as [`head_chunks`] takes them, the open chunk's bytes copied into `open_bytes`.
fn batch_chunks(s: &MemSeries, mint: i64, maxt: i64, out: &mut Vec<BatchChunk>, open_bytes: &mut Vec<u8>) {
    for_each_head_chunk(s, mint, maxt, |encoding, mint, _, bytes| {
        let bytes = match bytes {
            InHead::Cut(b) => BatchBytes::Shared(Arc::clone(b)),
            InHead::Open(b) => {
                let at = open_bytes.len();
                open_bytes.extend_from_slice(b);
                BatchBytes::Open(at..open_bytes.len())
            }
        };
        out.push(BatchChunk { encoding, mint, bytes });
    });
}

/// The samples of the series a select matched, read one series at a time, a batch of
/// series at a time: for each batch the cursor copies the series' labels and head
/// chunks out of the head (under its lock) and reads the labels of the series not in it
/// from RocksDB; each [`SeriesCursor::read_next`] then reads the next series' persisted
/// chunks and decodes them. Memory held: the matched ids, one batch's encoded labels
/// and head-chunk copies, one series' samples (and, with
/// [`SeriesCursor::same_times_together`], up to [`AHEAD_BYTES`] of the batch's stored
/// chunks). (Resolving every series' labels at
/// creation held them all at once: most of the 410 MiB peak of a query over the
/// billion-sample week's 1.25 million series, and an allocation per series.)
///
/// **Order: storage order**, ascending series id, not label order. Chunk keys start with
/// the series id, so in this order one iterator walks forward through the chunks
/// column family and reads each block once; in label order consecutive series sit in
/// unrelated blocks, and a block holding chunks of several selected series (a dozen
/// series of a GPU fleet's neighbouring ids) was read and decompressed once per selected
/// series in it. Measured on the billion-sample benchmark: a query over every series
/// 2.1× faster, one over a quarter of them 1.2–1.4×. A caller that needs label order
/// sorts (`Engine::select_until` does). A caller whose answer does not depend on the
/// order may ask for series with the same timestamps together instead
/// ([`SeriesCursor::same_times_together`]).
///
/// A series evicted from the head between the lookup and its read is read from RocksDB
/// (eviction persists everything first); one whose record retention deleted meanwhile
/// is skipped; samples appended meanwhile may or may not be seen, as with any read
/// racing a write.
pub struct SeriesCursor<'a> {
    db: &'a DB,
    head: &'a Mutex<Head>,
    /// The matched series in read order (ascending id).
    ids: Vec<u32>,
    /// Applied to each series' decoded labels as it is read (see `relabel`).
    relabel: Option<fn(Labels) -> Labels>,
    /// The only labels decoded of each series, when set (see `only_labels`).
    only_labels: Option<Vec<String>>,
    /// Where in `ids` the next batch starts.
    next: usize,
    /// The current batch's series not read yet.
    pending: VecDeque<Pending>,
    labels: Vec<u8>,
    /// The current batch's head chunks ([`Pending::head`]) and its open chunks' bytes.
    head_chunks: Vec<BatchChunk>,
    open_bytes: Vec<u8>,
    /// The RocksDB iterator of the current batch.
    it: Option<DBRawIterator<'a>>,
    mint: i64,
    maxt: i64,
    lookback: i64,
    /// Whether series that ended before `mint` are found by their `series_ends`
    /// records ([`drop_ended`]) rather than by their chunks.
    ends_known: bool,
    /// The current series' encoded chunks, copied out of the iterator (reused across
    /// series), and each one's encoding and bytes in `chunk_bytes`.
    chunk_bytes: Vec<u8>,
    chunks: Vec<(Encoding, Range<usize>)>,
    /// What is decoded of each sample.
    decode: Decode,
    /// Whether each batch is read ahead and ordered so that series with the same
    /// timestamps come together ([`SeriesCursor::same_times_together`]).
    together: bool,
    /// The current batch's stored chunks read ahead ([`Ahead`]): their bytes, and each
    /// one's encoding and bytes in `ahead_bytes`.
    ahead_bytes: Vec<u8>,
    ahead_chunks: Vec<(Encoding, Range<usize>)>,
}

impl<'a> SeriesCursor<'a> {
    /// A cursor over the series `ids` for samples in `[mint, maxt]` (`mint` already
    /// raised to the retention watermark), in storage order. `lookback` is how far before
    /// `mint` a persisted chunk may start and still reach into the range. `ends_known`:
    /// the shard's `series_ends` records can be trusted.
    pub(crate) fn new(
        db: &'a DB,
        head: &'a Mutex<Head>,
        ids: &RoaringBitmap,
        mint: i64,
        maxt: i64,
        lookback: i64,
        ends_known: bool,
    ) -> SeriesCursor<'a> {
        SeriesCursor {
            db,
            head,
            ids: ids.iter().collect(),
            relabel: None,
            only_labels: None,
            next: 0,
            pending: VecDeque::new(),
            labels: Vec::new(),
            head_chunks: Vec::new(),
            open_bytes: Vec::new(),
            it: None,
            mint,
            maxt,
            lookback,
            ends_known,
            chunk_bytes: Vec::new(),
            chunks: Vec::new(),
            decode: Decode::Full,
            together: false,
            ahead_bytes: Vec::new(),
            ahead_chunks: Vec::new(),
        }
    }

    /// Decodes only what `what` asks for of the series not read yet (see [`Decode`]).
    pub fn decode(&mut self, what: Decode) {
        self.decode = what;
    }

    /// Series not read yet (those without samples in the range, and those whose record
    /// retention deletes before they are read, will be skipped).
    pub fn remaining(&self) -> usize {
        self.pending.len() + self.ids.len() - self.next
    }

    /// Replaces the labels of the series not read yet by `f(labels)` as each is read (a
    /// caller that strips a label every series carries); the read order stays.
    pub fn relabel(&mut self, f: fn(Labels) -> Labels) {
        self.relabel = Some(f);
    }

    /// Decodes only the labels named in `names` of the series not read yet: the others
    /// are stepped over, left out of [`SeriesSamples::labels`] (for a caller whose answer
    /// depends on these labels alone).
    pub fn only_labels(&mut self, names: Vec<String>) {
        self.only_labels = Some(names);
    }

    /// Hands out series with the same timestamps (series scraped together) one after
    /// another, as far as each batch's first [`AHEAD_BYTES`] of stored chunks go, instead
    /// of in storage order: each batch's chunks are read ahead (in storage order, one
    /// walk) and its series ordered by where their first chunk starts and how many
    /// samples they hold. For a caller whose answer does not depend on the order and that
    /// keeps state per set of timestamps (`sum(rate(…))`'s tables of windows): in storage
    /// order a metric's series come target after target, so each series found its
    /// target's table evicted from the caches by every other target's.
    pub fn same_times_together(&mut self) {
        self.together = true;
    }

    /// Reads the next series with samples in `[mint, maxt]`: its labels and those samples
    /// in time order. `None` after the last. Series without a sample in the range (whose
    /// chunks all lie outside it: over a short range, most series of a day with pods
    /// churning) are passed over without decoding their labels. A chunk that cannot be
    /// read is an error naming the series; `stop` is checked per batch of series
    /// (reading the clock per series cost 1 % of a query over many short series).
    pub fn read_next(&mut self, stop: &Interrupt) -> Result<Option<SeriesSamples>> {
        loop {
            while self.pending.is_empty() {
                if self.next >= self.ids.len() {
                    return Ok(None);
                }
                stop.check("select")?;
                self.read_batch(stop)?;
            }
            let (Some(series), Some(it)) = (self.pending.pop_front(), self.it.as_mut()) else {
                return Err(Error::corrupt("select", "series cursor lost its batch"));
            };
            let encoded = &self.labels[series.labels];
            let (head_chunks, open_bytes) = (&self.head_chunks[series.head], &self.open_bytes[..]);
            let (bytes, chunks) = match &series.ahead {
                Some(ahead) => (&self.ahead_bytes[..], &self.ahead_chunks[ahead.chunks.clone()]),
                None => {
                    // The chunks are copied out first (their encoded bytes, a tenth of
                    // the samples' size) so that the samples' buffer is allocated once at
                    // its final size, which their headers give: grown chunk by chunk, it
                    // was copied into one twice as big whenever it filled, 2.5 % of a
                    // week-long `rate` query's instructions and more of its time (fresh
                    // pages for the bigger buffer). The head's chunks are read where they
                    // are (shared, not copied), after the stored ones, as
                    // `for_each_chunk` orders them.
                    let (bytes, chunks) = (&mut self.chunk_bytes, &mut self.chunks);
                    bytes.clear();
                    chunks.clear();
                    if series.read_stored {
                        let range = (self.mint, self.maxt);
                        copy_stored_chunks(it, series.id, head_chunks, range, self.lookback, bytes, chunks)
                            .map_err(|e| unreadable_series(self.db, self.head, series.id, &e))?;
                    }
                    (&bytes[..], &chunks[..])
                }
            };
            if chunks.is_empty() && head_chunks.is_empty() {
                continue;
            }
            let total = match &series.ahead {
                Some(ahead) => ahead.samples,
                None => samples_in(chunks, bytes, head_chunks, open_bytes),
            };
            let mut samples = ChunkSamples::with_capacity(self.mint, self.maxt, total).decoding(self.decode);
            let unreadable = |e: Error| unreadable_series(self.db, self.head, series.id, &e);
            for (enc, r) in chunks.iter() {
                samples.add(*enc, &bytes[r.clone()]).map_err(unreadable)?;
            }
            for c in head_chunks {
                samples.add(c.encoding, c.bytes(open_bytes)).map_err(unreadable)?;
            }
            let samples = samples.finish();
            if samples.is_empty() {
                // Chunks that overlap the range only by their bounds' slack.
                tessera_model::spare::give_samples(samples);
                continue;
            }
            let labels = labels_codec::decode_label_subset(encoded, self.only_labels.as_deref())?;
            let labels = match self.relabel {
                Some(f) => f(labels),
                None => labels,
            };
            return Ok(Some(SeriesSamples { labels, samples }));
        }
    }

    /// Loads the next batch of series: their labels and head chunks from the head
    /// ([`visit_located`]), then the labels of those not in it from
    /// RocksDB, less those that ended before the range ([`drop_ended`]).
    fn read_batch(&mut self, stop: &Interrupt) -> Result<()> {
        let end = (self.next + CURSOR_BATCH).min(self.ids.len());
        let batch = &self.ids[self.next..end];
        self.next = end;
        self.labels.clear();
        self.head_chunks.clear();
        self.open_bytes.clear();
        let mut stored = Vec::new();
        let (labels, pending, (mint, maxt)) = (&mut self.labels, &mut self.pending, (self.mint, self.maxt));
        let (chunks, open_bytes, only) = (&mut self.head_chunks, &mut self.open_bytes, self.only_labels.as_deref());
        visit_located(self.head, batch, mint, stop, "select", |id, at| match at {
            Located::Head(s) => {
                let at = labels.len();
                keep_labels(&s.labels, only, labels);
                let first = chunks.len();
                batch_chunks(s, mint, maxt, chunks, open_bytes);
                // A series scraped now, read over the last minutes: all in the head (most
                // of an instant query's series), no seek into RocksDB.
                let read_stored = !s.holds_everything_from(mint);
                pending.push_back(Pending {
                    id,
                    head: first..chunks.len(),
                    read_stored,
                    labels: at..labels.len(),
                    ahead: None,
                });
            }
            // Not in the head: all its chunks are in RocksDB. One evicted lately has its
            // labels and end in memory; one that ended before the range is left out.
            Located::Evicted(encoded) => {
                let at = labels.len();
                keep_labels(encoded, only, labels);
                pending.push_back(Pending { id, head: 0..0, read_stored: true, labels: at..labels.len(), ahead: None });
            }
            Located::EndedBefore => {}
            Located::Stored => {
                stored.push(id);
                pending.push_back(Pending { id, head: 0..0, read_stored: true, labels: 0..0, ahead: None });
            }
        })?;
        if !stored.is_empty() {
            // Series that ended before the range are left without labels, and so out.
            if self.ends_known {
                drop_ended(self.db, &mut stored, self.mint, stop)?;
            }
            let (labels, pending, only) = (&mut self.labels, &mut self.pending, self.only_labels.as_deref());
            let mut unlabelled = pending.iter_mut().filter(|p| p.labels.is_empty());
            for_each_stored_label_set(self.db, &stored, stop, |id, encoded| {
                // Both ascend; a series without a record is passed over (left empty).
                for p in unlabelled.by_ref() {
                    if p.id == id {
                        let at = labels.len();
                        keep_labels(encoded, only, labels);
                        p.labels = at..labels.len();
                        break;
                    }
                }
            })?;
            // An empty range is a series that ended before the range, or one retention
            // deleted after the lookup (a stored label set is never empty: it holds at
            // least its count).
            pending.retain(|p| !p.labels.is_empty());
        }
        let cf =
            self.db.cf_handle(CF_CHUNKS).ok_or_else(|| Error::corrupt("rocksdb", "missing chunks column family"))?;
        self.it = Some(self.db.raw_iterator_cf(cf));
        if self.together {
            self.read_ahead()?;
        }
        Ok(())
    }

    /// Reads the stored chunks of the batch's series ahead, in storage order (one walk
    /// of the iterator, as `read_next` would), until [`AHEAD_BYTES`] are read, and puts
    /// the series read in order of where their first chunk starts and how many samples
    /// they hold, so that series with the same timestamps come one after another.
    fn read_ahead(&mut self) -> Result<()> {
        self.ahead_bytes.clear();
        self.ahead_chunks.clear();
        let Some(it) = self.it.as_mut() else { return Ok(()) };
        let (range, lookback) = ((self.mint, self.maxt), self.lookback);
        let (bytes, chunks) = (&mut self.ahead_bytes, &mut self.ahead_chunks);
        let (head_chunks, open_bytes) = (&self.head_chunks, &self.open_bytes[..]);
        let mut read = 0;
        for p in self.pending.iter_mut() {
            if bytes.len() >= AHEAD_BYTES {
                break;
            }
            let (first, in_head) = (chunks.len(), &head_chunks[p.head.clone()]);
            let mut start = None;
            if p.read_stored {
                start = copy_stored_chunks(it, p.id, in_head, range, lookback, bytes, chunks)
                    .map_err(|e| unreadable_series(self.db, self.head, p.id, &e))?;
            }
            let samples = samples_in(&chunks[first..], bytes, in_head, open_bytes);
            let start = start.or(in_head.first().map(|c| c.mint)).unwrap_or(i64::MAX);
            p.ahead = Some(Ahead { chunks: first..chunks.len(), start, samples });
            read += 1;
        }
        let read_ahead = &mut self.pending.make_contiguous()[..read];
        read_ahead.sort_unstable_by_key(|p| (p.ahead.as_ref().map(|a| (a.start, a.samples)), p.id));
        Ok(())
    }
}

/// Copies series `id`'s stored chunks that can hold samples in `range` into `bytes`,
/// each one's encoding and place in `chunks` ([`walk_stored_chunks`]; a chunk the head
/// holds too, in `in_head`, is left out: the head's copy is read). Returns where the
/// first one copied starts.
fn copy_stored_chunks(
    it: &mut DBRawIterator<'_>,
    id: u32,
    in_head: &[BatchChunk],
    range: (i64, i64),
    lookback: i64,
    bytes: &mut Vec<u8>,
    chunks: &mut Vec<(Encoding, Range<usize>)>,
) -> Result<Option<i64>> {
    let mut start = None;
    let in_head_at = |m: i64| in_head.iter().any(|c| c.mint == m);
    walk_stored_chunks(it, id, in_head_at, range, lookback, &mut |enc, mint, _, chunk| {
        start.get_or_insert(mint);
        bytes.extend_from_slice(chunk);
        chunks.push((enc, bytes.len() - chunk.len()..bytes.len()));
        Ok(())
    })?;
    Ok(start)
}

/// The samples a series' chunks hold by their headers: the stored ones copied into
/// `bytes` (`stored`), then those in the head. A header that does not parse counts
/// nothing here; decoding names the error.
fn samples_in(stored: &[(Encoding, Range<usize>)], bytes: &[u8], in_head: &[BatchChunk], open_bytes: &[u8]) -> usize {
    let stored = stored.iter().map(|(_, r)| &bytes[r.clone()]);
    stored.chain(in_head.iter().map(|c| c.bytes(open_bytes))).map(|c| chunk::num_samples(c).unwrap_or(0)).sum()
}

/// The error for series `id`'s chunks that cannot be read, naming the whole series
/// (looked up again: a cursor may hold only some of its labels).
fn unreadable_series(db: &DB, head: &Mutex<Head>, id: u32, e: &Error) -> Error {
    let series = full_labels(db, head, id).unwrap_or_else(|| format!("id {id}"));
    Error::corrupt("chunks", format!("chunks of series {series} unreadable: {}", e.chain()))
}

/// Appends a series' encoded labels to a cursor's `labels`: only those named in `only`
/// when set (a label set is a few hundred bytes, most of them never read by a `sum`
/// without grouping: copying them all was 2.6 % of `dcgm_all_rate`'s CPU), else all.
/// A stored set always holds its count, so what is appended is never empty.
fn keep_labels(encoded: &[u8], only: Option<&[String]>, labels: &mut Vec<u8>) {
    if !only.is_some_and(|only| labels_codec::put_subset(encoded, only, labels)) {
        labels.extend_from_slice(encoded);
    }
}

/// Series `id`'s labels as text, from the head or the `series` column family (for an
/// error message); `None` when neither has them or they do not decode.
fn full_labels(db: &DB, head: &Mutex<Head>, id: u32) -> Option<String> {
    let encoded = match head.lock().get(id) {
        Some(s) => s.labels.to_vec(),
        None => db.get_cf(db.cf_handle(CF_SERIES)?, keys::series_key(id)).ok()??,
    };
    labels_codec::decode_label_set(&encoded).ok().map(|l| l.to_string())
}

/// The stored chunks of every snapshotted series that overlap `[mint, maxt]`, copied
/// as encoded (not decoded, not trimmed: a chunk may hold samples outside the range).
/// Series without such a chunk are left out; the rest are sorted by labels. A chunk
/// that cannot be read fails the call naming the series; `stop` is checked per series.
pub fn select_chunks(
    db: &DB,
    mut snaps: Vec<SeriesSnap>,
    mint: i64,
    lookback: i64,
    stop: &Interrupt,
) -> Result<Vec<SeriesChunks>> {
    // One iterator walks the series in id order (see `for_each_chunk`).
    snaps.sort_unstable_by_key(|s| s.id);
    let cf = db.cf_handle(CF_CHUNKS).ok_or_else(|| Error::corrupt("rocksdb", "missing chunks column family"))?;
    let mut it = db.raw_iterator_cf(cf);
    let mut result = Vec::with_capacity(snaps.len());
    for snap in snaps {
        stop.check("select")?;
        let mut chunks = Vec::new();
        let range = (mint, snap.maxt);
        let it = snap.read_stored.then_some(&mut it);
        for_each_chunk(it, snap.id, &snap.head_chunks, range, lookback, |encoding, mint, maxt, bytes| {
            let (encoding, bytes) = shippable(encoding, bytes)?;
            chunks.push(RawChunk { encoding, mint, maxt, bytes });
            Ok(())
        })
        .map_err(|e| unreadable(&snap.labels, &e))?;
        if chunks.is_empty() {
            continue;
        }
        result.push(SeriesChunks { labels: labels_codec::decode_label_set(&snap.labels)?, min_time: mint, chunks });
    }
    result.sort_by(|a, b| a.labels.cmp(&b.labels));
    Ok(result)
}

/// A chunk as a reader elsewhere gets it: in a stored encoding. The head's open chunk in
/// its own byte form (`Encoding::OpenDecimal`, which is never stored or sent) goes as XOR.
fn shippable(encoding: Encoding, bytes: &[u8]) -> Result<(Encoding, Vec<u8>)> {
    if encoding != Encoding::OpenDecimal {
        return Ok((encoding, bytes.to_vec()));
    }
    let samples = chunk::decode(bytes, encoding)?;
    Ok((Encoding::DEFAULT, chunk::XorAppender::encode(Encoding::DEFAULT, &samples)?))
}

/// The error for a series whose stored chunks cannot be read: names the series and the
/// cause (e.g. RocksDB's "block checksum mismatch ... in file 000012.sst").
pub fn unreadable(labels: &[u8], e: &Error) -> Error {
    Error::corrupt("chunks", format!("chunks of series {} unreadable: {}", describe(labels), e.chain()))
}

/// `{a="1", b="2"}` for an encoded label set (or a placeholder if it does not decode).
pub fn describe(labels: &[u8]) -> String {
    match labels_codec::decode_labels(labels) {
        Ok(ls) => {
            let parts: Vec<String> = ls.iter().map(|l| format!("{}={:?}", l.name, l.value)).collect();
            format!("{{{}}}", parts.join(", "))
        }
        Err(_) => "<undecodable labels>".to_string(),
    }
}

/// Calls `f(encoding, chunk mint, chunk maxt, bytes)` for each chunk of series `id`
/// that can hold samples in `[mint, maxt]` (`range`), in read order: persisted chunks by
/// start time, read with `it` unless it is `None` (the head holds all of the range; a
/// chunk also in `head_chunks` is skipped: the head's copy may be newer), then
/// `head_chunks` (the series' head chunks that overlap the range, in time order). See
/// [`ChunkSamples`] for how a reader applies them.
///
/// One iterator `it` serves a run of calls only if their series come in ascending id
/// order (the walk of one series leaves the iterator where the next one starts).
fn for_each_chunk(
    it: Option<&mut rocksdb::DBRawIterator<'_>>,
    id: u32,
    head_chunks: &[HeadChunk],
    (mint, maxt): (i64, i64),
    lookback: i64,
    mut f: impl FnMut(Encoding, i64, i64, &[u8]) -> Result<()>,
) -> Result<()> {
    if let Some(it) = it {
        walk_stored_chunks(it, id, |m| head_chunks.iter().any(|c| c.mint == m), (mint, maxt), lookback, &mut f)?;
    }
    for c in head_chunks {
        f(c.encoding, c.mint, c.maxt, &c.bytes)?;
    }
    Ok(())
}

/// The persisted part of [`for_each_chunk`]; `in_head(mint)` says whether the head holds
/// the chunk that starts at `mint` (its copy is read instead).
fn walk_stored_chunks(
    it: &mut rocksdb::DBRawIterator<'_>,
    id: u32,
    in_head: impl Fn(i64) -> bool,
    (mint, maxt): (i64, i64),
    lookback: i64,
    f: &mut impl FnMut(Encoding, i64, i64, &[u8]) -> Result<()>,
) -> Result<()> {
    // Keys are (id, chunk mint), so the first key at or after `from` is the first
    // chunk that can overlap; each chunk's maxt is in its value header, so
    // chunks ending before `mint` are skipped without decoding. Series come in ascending
    // id order and the previous series' walk stopped on the first key after its range:
    // this series' first chunk, or a few chunks before it (the previous series' chunks
    // after the range, this one's before it), so it is usually reached by stepping.
    let from = keys::chunk_key(id, mint.saturating_sub(lookback));
    step_or_seek(it, &from);
    let upper = keys::chunk_key(id, maxt);
    while it.valid() {
        let (Some(k), Some(v)) = (it.key(), it.value()) else { break };
        if k > upper.as_slice() {
            break;
        }
        let (_, cmint) = keys::parse_chunk_key(k)?;
        let (enc, cmaxt, bytes) = keys::decode_chunk_value(cmint, v)?;
        if cmaxt >= mint && !in_head(cmint) {
            f(enc, cmint, cmaxt, bytes)?;
        }
        it.next();
    }
    it.status().map_err(Error::rocks("read chunks"))
}

/// Turns one series' chunks, applied in read order (as [`Engine::select_chunks_until`]
/// returns them), into its samples within `[mint, maxt]`: time order, one sample per
/// timestamp. Chunks of a series do not overlap in time, except after a WAL replay
/// re-cut samples already on disk; then an equal timestamp keeps the later chunk's
/// sample (the head's).
///
/// [`Engine::select_chunks_until`]: crate::Engine::select_chunks_until
pub struct ChunkSamples {
    mint: i64,
    maxt: i64,
    samples: Vec<Sample>,
    in_order: bool,
    decode: Decode,
}

impl ChunkSamples {
    pub fn new(mint: i64, maxt: i64) -> ChunkSamples {
        Self::with_capacity(mint, maxt, 0)
    }

    /// [`ChunkSamples::new`] with room for `samples` samples before the buffer grows.
    pub fn with_capacity(mint: i64, maxt: i64, samples: usize) -> ChunkSamples {
        // The buffer the consumer of the previous series on this thread gave back, if
        // big enough (see `tessera_model::spare`).
        let samples = tessera_model::spare::take_samples(samples);
        ChunkSamples { mint, maxt, samples, in_order: true, decode: Decode::Full }
    }

    /// Decodes only what `what` asks for of the chunks added from now on.
    pub fn decoding(mut self, what: Decode) -> ChunkSamples {
        self.decode = what;
        self
    }

    /// Decodes the next chunk's samples within the range.
    pub fn add(&mut self, enc: Encoding, chunk: &[u8]) -> Result<()> {
        let before = self.samples.len();
        // Decode the whole chunk straight into the series' buffer, then keep what is in
        // range: samples up to the first one after `maxt`, minus those before `mint`.
        chunk::decode_part_into(chunk, enc, self.decode, &mut self.samples)?;
        let new = &self.samples[before..];
        // A chunk's samples are in time order: one wholly in range (most of a long
        // query's) needs no trimming.
        let inside = new.first().is_some_and(|s| s.t >= self.mint) && new.last().is_some_and(|s| s.t <= self.maxt);
        if !inside {
            let end = before + new.iter().position(|s| s.t > self.maxt).unwrap_or(new.len());
            self.samples.truncate(end);
            let first_in =
                before + self.samples[before..].iter().position(|s| s.t >= self.mint).unwrap_or(end - before);
            if first_in > before {
                let mut keep = before;
                for i in first_in..end {
                    let s = self.samples[i];
                    if s.t >= self.mint {
                        self.samples[keep] = s;
                        keep += 1;
                    }
                }
                self.samples.truncate(keep);
            }
        }
        if before > 0 && self.samples.len() > before && self.samples[before].t <= self.samples[before - 1].t {
            self.in_order = false;
        }
        Ok(())
    }

    /// The samples, in time order, one per timestamp.
    pub fn finish(self) -> Vec<Sample> {
        let mut samples = self.samples;
        if !self.in_order {
            // Overlapping chunks: order by time; for equal times keep the later source.
            samples.sort_by_key(|s| s.t);
            let mut dedup: Vec<Sample> = Vec::with_capacity(samples.len());
            for s in samples {
                match dedup.last_mut() {
                    Some(last) if last.t == s.t => *last = s,
                    _ => dedup.push(s),
                }
            }
            samples = dedup;
        }
        samples
    }
}

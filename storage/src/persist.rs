//! The RocksDB side of the head: collects what one head operation must persist (cut and
//! rewritten chunks, new series records, postings of new days) into one write batch, and
//! loads a cold series' newest chunks so the head can warm it.
//!
//! The head (`head.rs`) decides *what* is written; this module only knows *where* it goes
//! (column families and key layout from `keys.rs`). One `Batch` is written atomically, so
//! a chunk and the postings that make it findable land together.

use std::collections::BTreeMap;

use roaring::RoaringBitmap;
use rocksdb::{ColumnFamily, ReadOptions, WriteBatch, DB};

use crate::chunk::{self, Encoding};
use crate::db::{self, CF_CHUNKS, CF_POSTINGS, CF_SERIES, CF_SERIES_BY_HASH, CF_SERIES_ENDS};
use crate::error::{Error, Result};
use crate::head::{ChunkSink, CutChunk, Recent};
use crate::keys;
use crate::labels_codec;

fn cf<'a>(db: &'a DB, name: &str) -> Result<&'a ColumnFamily> {
    db.cf_handle(name).ok_or_else(|| Error::corrupt("rocksdb", format!("missing column family {name}")))
}

/// One atomic RocksDB write being assembled.
pub struct Batch<'a> {
    db: &'a DB,
    chunks: &'a ColumnFamily,
    series_ends: &'a ColumnFamily,
    batch: WriteBatch,
    /// Chunk puts (a value) and deletes (none), by key: written in key order, see
    /// [`Batch::write`].
    chunk_ops: Vec<([u8; 12], Option<Vec<u8>>)>,
    /// Postings key → ids to OR in (one merge operand per key per batch).
    postings: BTreeMap<Vec<u8>, RoaringBitmap>,
    chunks_written: u64,
}

impl<'a> Batch<'a> {
    pub fn new(db: &'a DB) -> Result<Batch<'a>> {
        Ok(Batch {
            db,
            chunks: cf(db, CF_CHUNKS)?,
            series_ends: cf(db, CF_SERIES_ENDS)?,
            batch: WriteBatch::default(),
            chunk_ops: Vec::new(),
            postings: BTreeMap::new(),
            chunks_written: 0,
        })
    }

    /// Records a new series: its labels by id, and its id under its label hash.
    pub fn put_series(&mut self, id: u32, hash: u64, labels: &[u8]) -> Result<()> {
        self.batch.put_cf(cf(self.db, CF_SERIES)?, keys::series_key(id), labels);
        self.batch.put_cf(cf(self.db, CF_SERIES_BY_HASH)?, keys::series_hash_key(hash, id), []);
        Ok(())
    }

    /// Writes everything collected in one atomic batch; returns the chunks written.
    /// The caller holds the shard's head lock, so no other batch of this shard is being
    /// written meanwhile (what folding a postings key relies on: [`PostingsFolds`]).
    ///
    /// Chunks go in key order (series id, then start), not in the order they were cut:
    /// RocksDB's memtable lays its entries out in the order they are written, and a read
    /// walks it in key order. A sender's request holds a few targets' scrapes, each
    /// every metric of its target, while ids run per metric (`Head::new_id`): written
    /// as cut, a metric's neighbouring chunks lay a request's whole size apart, and a
    /// query over recent data missed the CPU's caches on nearly every entry.
    pub fn write(self, folds: &mut PostingsFolds) -> Result<u64> {
        let Batch { db, chunks, mut batch, mut chunk_ops, postings, chunks_written, .. } = self;
        // Stable: a key's put and delete stay in the order they came.
        chunk_ops.sort_by_key(|op| op.0);
        for (key, value) in chunk_ops {
            match value {
                Some(value) => batch.put_cf(chunks, key, value),
                None => batch.delete_cf(chunks, key),
            }
        }
        if !postings.is_empty() {
            let pcf = cf(db, CF_POSTINGS)?;
            for (k, ids) in &postings {
                match folds.merged(k).then(|| folded(db, pcf, k, ids)).flatten() {
                    Some(all) => batch.put_cf(pcf, k, all),
                    None => batch.merge_cf(pcf, k, db::encode_bitmap(ids)),
                }
            }
        }
        if !batch.is_empty() {
            db.write(batch).map_err(Error::rocks("write batch"))?;
        }
        Ok(chunks_written)
    }
}

/// When to fold a postings key's merge operands into one value. Every batch that
/// creates series merges a bitmap into each of their postings keys; a key every new
/// series joins (the day's every-series key, the tenant's, a metric name's, a job's)
/// collects one operand per such batch until a flush or compaction merges them, and
/// every read of it (each query reads its tenant's key) merged them all again: after
/// the compare dataset's 2 h backfill, a query that selected nothing took 2 ms, most of
/// it there. So every [`PostingsFolds::EVERY`]th merge into a key is written instead as
/// the key's whole value (read, with the new ids added, and put), which bounds what a
/// read merges (a query selecting nothing: 1.7-2.0 ms before, 0.85-1.05 ms after, on the
/// same data). RocksDB's own bound (`max_successive_merges`) counts a key's operands in
/// the memtable on every merge and cost the write path 22-44 % more server CPU in a 12 h
/// backfill at 32 operands, 40 % at 256; here the count is a table lookup. A fold reads
/// and puts the whole bitmap, so its cost grows with the key's series: every 32nd merge
/// cost that backfill about 4 % more CPU and bytes, every 128th about 2.5 % and 1 %, for
/// the same gain on small queries (BENCHMARKS.md, "Postings keys folded").
///
/// Keys are counted by a hash into a fixed table, so keys that share a slot fold
/// sooner (a read of one then merges fewer operands, a write reads and puts a value
/// more often): memory stays fixed however many keys a day has (a pod's name is a
/// key that gets one merge).
pub struct PostingsFolds {
    counts: Box<[u16]>,
}

impl Default for PostingsFolds {
    fn default() -> Self {
        PostingsFolds { counts: vec![0; Self::SLOTS].into_boxed_slice() }
    }
}

impl PostingsFolds {
    /// Merges into a key before it is folded.
    pub const EVERY: u16 = 128;
    const SLOTS: usize = 4096;

    /// Counts one merge into `key`; true (and the count starts again) when this one is
    /// to be written as the key's whole value.
    fn merged(&mut self, key: &[u8]) -> bool {
        let slot = (xxhash_rust::xxh3::xxh3_64(key) % Self::SLOTS as u64) as usize;
        let count = &mut self.counts[slot];
        *count += 1;
        if *count >= Self::EVERY {
            *count = 0;
            return true;
        }
        false
    }
}

/// The whole value of postings key `key` with `ids` added, encoded; `None` (merge the
/// ids as usual) when the stored value cannot be read or decoded: a read of the key then
/// reports that as it would have.
fn folded(db: &DB, pcf: &ColumnFamily, key: &[u8], ids: &RoaringBitmap) -> Option<Vec<u8>> {
    let mut all = match db.get_pinned_cf(pcf, key).ok()? {
        Some(v) => db::decode_bitmap(&v).ok()?,
        None => RoaringBitmap::new(),
    };
    all |= ids;
    Some(db::encode_bitmap(&all))
}

impl ChunkSink for Batch<'_> {
    fn put_chunk(&mut self, id: u32, enc: Encoding, mint: i64, maxt: i64, bytes: &[u8], newest: bool) {
        let value = keys::encode_chunk_value(enc, mint, maxt, bytes);
        self.chunk_ops.push((keys::chunk_key(id, mint), Some(value)));
        // The series' last stored timestamp, so that a read can pass over a series that
        // ended before its range without seeking its chunks (`read::drop_ended`). A
        // rewritten older chunk must not lower it: its end is merged (the latest wins,
        // `db::latest_end`). The newest chunk's end is put, replacing what was merged
        // before, so that a read finds one value rather than an operand per chunk to
        // merge (until compaction merges them: most of the record reads' cost after a
        // backfill, BENCHMARKS.md, "Labels left undecoded").
        let (key, end) = (keys::series_key(id), keys::encode_series_end(maxt));
        if newest {
            self.batch.put_cf(self.series_ends, key, end);
        } else {
            self.batch.merge_cf(self.series_ends, key, end);
        }
        self.chunks_written += 1;
    }

    fn delete_chunk(&mut self, id: u32, mint: i64) {
        self.chunk_ops.push((keys::chunk_key(id, mint), None));
    }

    fn add_to_day(&mut self, id: u32, labels: &[u8], day: i32) -> Result<()> {
        let labels = labels_codec::decode_labels(labels)?;
        self.postings.entry(keys::all_postings_key(day).to_vec()).or_default().insert(id);
        for l in &labels {
            self.postings.entry(keys::postings_key(day, &l.name, &l.value)?).or_default().insert(id);
        }
        Ok(())
    }
}

/// Loads the stored chunks of series `id` that lie within `window` ms of its newest
/// stored sample (what out-of-order and duplicate checks need), oldest first.
///
/// The iteration is bounded to this series' keys, so RocksDB need not read a
/// neighbour's block to find where the series ends: a damaged neighbouring block then
/// costs nothing. A read error (a damaged chunk or SST block) is returned as is; the
/// caller leaves the series cold and decides what to do with its samples.
pub fn load_recent(db: &DB, id: u32, window: i64) -> Result<Recent> {
    let cf = cf(db, CF_CHUNKS)?;
    let mut opts = ReadOptions::default();
    opts.set_iterate_lower_bound(keys::chunk_key(id, i64::MIN).to_vec());
    if let Some(next) = id.checked_add(1) {
        opts.set_iterate_upper_bound(keys::chunk_key(next, i64::MIN).to_vec());
    }
    let mut it = db.raw_iterator_cf_opt(cf, opts);
    it.seek_for_prev(keys::chunk_key(id, i64::MAX));
    let mut newest: Option<i64> = None;
    let mut chunks = Vec::new();
    while it.valid() {
        let (Some(k), Some(v)) = (it.key(), it.value()) else { break };
        let (cid, mint) = keys::parse_chunk_key(k)?;
        if cid != id {
            break;
        }
        let (enc, maxt, bytes) = keys::decode_chunk_value(mint, v)?;
        let newest_t = *newest.get_or_insert(maxt);
        if maxt < newest_t.saturating_sub(window) {
            break;
        }
        chunks.push(CutChunk { enc, bytes: bytes.into(), mint, maxt });
        it.prev();
    }
    it.status().map_err(Error::rocks("read chunks"))?;
    chunks.reverse();
    // Whether the stored series ended with a staleness marker (the idle sweep evicts
    // those sooner); the newest chunk is the last one loaded.
    let ended_stale = match chunks.last() {
        Some(c) => chunk::decode(&c.bytes, c.enc)?
            .last()
            .is_some_and(|x| Some(x.t) == newest && tessera_model::is_stale_nan(x.v)),
        None => false,
    };
    Ok(Recent { chunks, newest, ended_stale })
}

#[cfg(test)]
mod tests;

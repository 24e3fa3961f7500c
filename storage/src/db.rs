//! Opening the shard's RocksDB instance: column families, merge operator, retention
//! compaction filter, options sized for many shards per process, and the info-log sink
//! that sees failed background work (`background.rs`).

mod background;
mod usage;

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};

use roaring::MultiOps;
use roaring::RoaringBitmap;
use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, DBCompressionType, InfoLogger, LogLevel, MergeOperands, Options,
    WriteBufferManager, DB,
};

use crate::config::EngineConfig;
use crate::error::{Error, Result};
use crate::keys;

pub use background::{Background, CompactionFailure};
pub use usage::{shard_usage, CfUsage, FileUsage, ShardUsage};

pub const CF_SERIES: &str = "series";
pub const CF_SERIES_BY_HASH: &str = "series_by_hash";
pub const CF_POSTINGS: &str = "postings";
pub const CF_CHUNKS: &str = "chunks";
pub const CF_META: &str = "meta";
pub const CF_SERIES_ENDS: &str = "series_ends";
pub const ALL_CFS: [&str; 6] = [CF_SERIES, CF_SERIES_BY_HASH, CF_POSTINGS, CF_CHUNKS, CF_META, CF_SERIES_ENDS];

/// RocksDB's default table block size (uncompressed bytes per block).
const DEFAULT_BLOCK: usize = 4 << 10;
/// Table block size of the `chunks` column family (see `open`).
const CHUNK_BLOCK: usize = 32 << 10;
/// Table block size of the `series` column family: label sets compress better with
/// more of their neighbours in a block.
const SERIES_BLOCK: usize = 16 << 10;

/// One block cache for every engine in the process: the server runs many shards, and a
/// cache per instance would multiply memory. Sized by the first engine opened.
fn shared_cache(bytes: usize) -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(|| Cache::new_lru_cache(bytes))
}

/// One memtable budget for every engine in the process: with 16 shards × 5 column
/// families, per-instance memtables alone would otherwise reach gigabytes. When the
/// budget is reached RocksDB flushes the largest memtables early.
fn shared_write_buffers(bytes: usize) -> &'static WriteBufferManager {
    static WBM: OnceLock<WriteBufferManager> = OnceLock::new();
    WBM.get_or_init(|| WriteBufferManager::new_write_buffer_manager(bytes, false))
}

/// Merge operator of the `postings` CF: OR every operand bitmap into the existing one.
/// A corrupt bitmap makes the merge fail (RocksDB then reports corruption on read)
/// rather than silently dropping series.
fn postings_or(_key: &[u8], existing: Option<&[u8]>, ops: &MergeOperands) -> Option<Vec<u8>> {
    // One n-way union (roaring's `MultiOps`) rather than n pairwise ones: ORing the
    // operands one by one into a growing array container copies it once per operand,
    // quadratic in the operands a freshly written key holds until compaction merges
    // them (measured: most of a query's CPU on a freshly backfilled shard).
    let mut bitmaps = Vec::with_capacity(ops.len() + 1);
    if let Some(b) = existing {
        bitmaps.push(RoaringBitmap::deserialize_from(b).ok()?);
    }
    for op in ops {
        bitmaps.push(RoaringBitmap::deserialize_from(op).ok()?);
    }
    let acc = bitmaps.union();
    let mut out = Vec::with_capacity(acc.serialized_size());
    acc.serialize_into(&mut out).ok()?;
    Some(out)
}

/// Merge operator of the `series_ends` CF: the latest of the existing end and the
/// operands (each chunk write merges its chunk's end, so a key holds its series' last
/// stored timestamp whatever order chunks are written or rewritten in). An operand that
/// is not an end (damaged) is ignored; a key left without any valid one becomes empty,
/// which readers take as "unknown" (they then read the series' chunks).
fn latest_end(_key: &[u8], existing: Option<&[u8]>, ops: &MergeOperands) -> Option<Vec<u8>> {
    let latest = existing.into_iter().chain(ops).filter_map(keys::parse_series_end).max();
    Some(latest.map_or_else(Vec::new, |t| keys::encode_series_end(t).to_vec()))
}

pub fn decode_bitmap(b: &[u8]) -> Result<RoaringBitmap> {
    RoaringBitmap::deserialize_from(b).map_err(|e| Error::corrupt("postings bitmap", e.to_string()))
}

pub fn encode_bitmap(b: &RoaringBitmap) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.serialized_size());
    b.serialize_into(&mut out).expect("writing into a Vec cannot fail");
    out
}

/// Opens (creating if needed) the RocksDB instance in `dir`.
///
/// `chunk_drop_before` is read by the `chunks` compaction filter: a chunk whose first
/// timestamp is below it is dropped when compaction next touches it (retention without
/// per-series tombstones). RocksDB's warnings and errors go to `background` (and from
/// there to `tracing`), not to a `LOG` file in `dir`.
pub fn open(
    dir: &Path,
    cfg: &EngineConfig,
    chunk_drop_before: Arc<AtomicI64>,
    background: Arc<Background>,
) -> Result<DB> {
    let mut db_opts = Options::default();
    db_opts.create_if_missing(true);
    // A damaged block costs only what it damaged. With the default (`true`), the first
    // compaction that reads a damaged block sets an unrecoverable background error and
    // RocksDB refuses every later write of the shard, for every tenant, until reopened
    // (and again after each reopen): `db/error_handler.cc`, DefaultErrorSeverityMap,
    // (kCompaction, kCorruption, true) → kUnrecoverableError. With `false` that entry is
    // kNoError: the compaction fails alone (the engine then stops automatic compaction of
    // that column family, see `Engine::handle_background_failures`), reads of the damaged
    // keys still fail with `Corruption` (block checksums are verified regardless), and a
    // table that cannot be opened does not stop the DB from opening. What else the flag
    // relaxes does not weaken durability here: RocksDB's own WAL is not what makes a write
    // durable (ours is, and a failed RocksDB write poisons the engine), and a failed
    // flush still fails `Engine::flush`, which then keeps the WAL.
    db_opts.set_paranoid_checks(false);
    let sink = Arc::clone(&background);
    db_opts.set_info_logger(InfoLogger::new_callback_logger(LogLevel::Warn, move |level, msg| sink.on_log(level, msg)));
    db_opts.create_missing_column_families(true);
    // Few threads per instance: the process holds many shards on few cores.
    db_opts.set_max_background_jobs(2);
    db_opts.set_max_open_files(512);
    db_opts.set_keep_log_file_num(2);
    db_opts.set_max_total_wal_size(4 * cfg.memtable_bytes as u64 * ALL_CFS.len() as u64);
    if cfg.write_buffer_budget_bytes > 0 {
        db_opts.set_write_buffer_manager(shared_write_buffers(cfg.write_buffer_budget_bytes));
    }

    let table = |bloom: bool, block_bytes: usize| {
        let mut t = BlockBasedOptions::default();
        t.set_block_size(block_bytes);
        if cfg.block_cache_bytes > 0 {
            t.set_block_cache(shared_cache(cfg.block_cache_bytes));
        } else {
            t.disable_cache();
        }
        if bloom {
            t.set_bloom_filter(10.0, false);
        }
        t.set_cache_index_and_filter_blocks(true);
        t
    };
    let cf_opts = |bloom: bool, compression: DBCompressionType, memtable: usize, block_bytes: usize| {
        let mut o = Options::default();
        o.set_write_buffer_size(memtable.max(64 << 10));
        o.set_max_write_buffer_number(2);
        o.set_block_based_table_factory(&table(bloom, block_bytes));
        o.set_compression_type(compression);
        o
    };

    let full = cfg.memtable_bytes;
    let mut postings = cf_opts(true, DBCompressionType::Zstd, full / 2, DEFAULT_BLOCK);
    postings.set_merge_operator_associative("roaring_or", postings_or);
    // Chunks are dense bit streams, but their keys and headers are not, and series
    // scraped together (neighbouring ids) have byte-identical timestamp streams: zstd
    // over 32 KiB blocks, which hold several series' chunks, took 21 % off them (4 KiB
    // blocks: 12 %; 64 KiB: 22 %; an exploratory run on the 24 h dataset, not kept as a
    // benchmark). Its cost is paid once per flush and compaction; a read decompresses
    // one block per cache miss, and a damaged block costs every series with a chunk in
    // it (more of them than with 4 KiB blocks: BENCHMARKS.md, "Decimal chunks").
    let mut chunks = cf_opts(false, DBCompressionType::Zstd, full, CHUNK_BLOCK);
    chunks.set_compaction_filter("retention", move |_level, key: &[u8], _value: &[u8]| {
        let drop_before = chunk_drop_before.load(Ordering::Relaxed);
        match keys::parse_chunk_key(key) {
            Ok((_, mint)) if mint < drop_before => rocksdb::compaction_filter::Decision::Remove,
            _ => rocksdb::compaction_filter::Decision::Keep,
        }
    });
    // 12 bytes a series, read forward by id in big batches: no bloom filter.
    let mut series_ends = cf_opts(false, DBCompressionType::None, full / 8, DEFAULT_BLOCK);
    series_ends.set_merge_operator_associative("latest_end", latest_end);
    let descriptors = vec![
        // Label sets repeat their names and most values: zstd.
        ColumnFamilyDescriptor::new(CF_SERIES, cf_opts(true, DBCompressionType::Zstd, full / 2, SERIES_BLOCK)),
        ColumnFamilyDescriptor::new(CF_SERIES_BY_HASH, cf_opts(true, DBCompressionType::None, full / 4, DEFAULT_BLOCK)),
        ColumnFamilyDescriptor::new(CF_POSTINGS, postings),
        ColumnFamilyDescriptor::new(CF_CHUNKS, chunks),
        ColumnFamilyDescriptor::new(CF_META, cf_opts(false, DBCompressionType::None, 64 << 10, DEFAULT_BLOCK)),
        ColumnFamilyDescriptor::new(CF_SERIES_ENDS, series_ends),
    ];
    DB::open_cf_descriptors(&db_opts, dir, descriptors).map_err(Error::rocks("open"))
}

//! Engine configuration: one struct, `#[serde(default)]`, validated at open.

use serde::Deserialize;

use crate::error::{Error, Result};

/// When the WAL is fsynced relative to acknowledging an append.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WalFsync {
    /// fsync (fdatasync) before `append` returns, shared by concurrent appenders (group
    /// commit). Survives `kill -9` and power loss without losing an acknowledged sample.
    Always,
    /// fsync at most every `wal_fsync_interval_ms`, piggy-backed on appends (there is no
    /// timer: the tail written after the last fsync stays unsynced until the next append
    /// or `flush`). The data is written to the OS before the ack, so `kill -9` loses
    /// nothing; power loss may lose that unsynced tail.
    Interval,
    /// Never fsync the WAL (benchmarks only). Survives `kill -9`, not power loss.
    None,
}

/// Configuration of one shard's engine.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// How far behind a series' newest sample an out-of-order sample may be, in ms.
    /// Default 600_000 (10 minutes). 0 disables out-of-order appends (only strictly
    /// newer timestamps, or an identical re-send, are accepted).
    pub out_of_order_window_ms: i64,
    /// How long data is kept, in ms, measured back from the newest sample in the shard.
    /// Default 15 days. 0 keeps data forever.
    pub retention_ms: i64,
    /// WAL durability policy; default `always`.
    pub wal_fsync: WalFsync,
    /// Interval for `wal_fsync = "interval"`, in ms. Default 1000. Must be > 0 then.
    pub wal_fsync_interval_ms: u64,
    /// Size at which a WAL segment is closed and a new one started, in bytes.
    /// Default 64 MiB. Must be at least 1 MiB.
    pub wal_segment_bytes: u64,
    /// When the WAL holds more than this many bytes, the open chunks pinning the oldest
    /// segments are written out early so the WAL can be truncated. Default 256 MiB.
    /// 0 means "never force" (the WAL then only shrinks as chunks fill up or on flush).
    pub wal_max_bytes: u64,
    /// A head chunk is cut (written to RocksDB) after this many samples. Default 120
    /// (Prometheus' target). Must be in 1..=65535.
    pub chunk_target_samples: u16,
    /// A head chunk is also cut when a sample is this many ms after the chunk's first
    /// sample, so slow series still reach disk and chunk spans stay bounded.
    /// Default 7_200_000 (2 h). Must be > 0.
    pub chunk_max_span_ms: i64,
    /// A series leaves the in-memory head (its open chunk is written to RocksDB first,
    /// then its memory is freed) when it has had no sample for this many ms of *shard
    /// time*: measured back from the newest sample the shard has stored (capped at the
    /// wall clock), not from the wall clock, so WAL replays and backfills behave like live
    /// ingest. A series whose newest sample is a staleness marker leaves as soon as that
    /// marker is `out_of_order_window_ms` old (or this timeout, if shorter). A later
    /// sample brings the series back (same id; reads see old and new data). Default
    /// 3_600_000 (1 h). 0 keeps every series in the head until retention deletes it.
    pub head_idle_timeout_ms: i64,
    /// RocksDB memtable size per column family, in bytes. Default 8 MiB. Kept small
    /// because the server runs many shards (engines) in one process.
    pub memtable_bytes: usize,
    /// The chunks memtable is also written out (in the background) once the shard's
    /// data has moved this many ms of *shard time* since it last was, full or not: a
    /// query over recent data then reads table blocks, where a series' chunks lie
    /// together in series order, instead of the skip list, where each chunk sits where
    /// it was written. Measured at 10 minutes (BENCHMARKS.md, "Rate tables shared by a
    /// query's fragments…"): a 2 h `sum(rate)` right after a backfill 8 % faster; a 12 h
    /// backfill of 17,600 series 43 % more bytes written, CPU flat; the billion-sample
    /// week (64,000 active series, 7 days) 20 % more server CPU to load, its queries no
    /// faster: every flush is compacted into levels that span every series. A store
    /// whose memtables fill sooner never waits for it. Default 0: only when full.
    pub memtable_max_age_ms: i64,
    /// Total RocksDB memtable memory of every engine in the process, in bytes (a shared
    /// write-buffer manager; the first engine opened sizes it). Default 256 MiB.
    /// 0 means no shared cap (each column family still obeys `memtable_bytes`).
    pub write_buffer_budget_bytes: usize,
    /// RocksDB block cache size in bytes, shared by every engine in the process (the
    /// first engine opened sizes it). Default 64 MiB. 0 disables the block cache.
    pub block_cache_bytes: usize,
}

/// 15 days in milliseconds.
pub const FIFTEEN_DAYS_MS: i64 = 15 * 24 * 3600 * 1000;

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            out_of_order_window_ms: 600_000,
            retention_ms: FIFTEEN_DAYS_MS,
            wal_fsync: WalFsync::Always,
            wal_fsync_interval_ms: 1000,
            wal_segment_bytes: 64 << 20,
            wal_max_bytes: 256 << 20,
            chunk_target_samples: 120,
            chunk_max_span_ms: 7_200_000,
            head_idle_timeout_ms: 3_600_000,
            memtable_bytes: 8 << 20,
            memtable_max_age_ms: 0,
            write_buffer_budget_bytes: 256 << 20,
            block_cache_bytes: 64 << 20,
        }
    }
}

impl EngineConfig {
    /// Whether an in-order sample at `t` starts a new chunk after an open one holding
    /// `open_len` (≥ 1) samples from `open_mint`: `chunk_target_samples` reached, or `t`
    /// `chunk_max_span_ms` or more after the chunk's first sample.
    pub fn cuts_chunk(&self, open_len: usize, open_mint: i64, t: i64) -> bool {
        open_len >= usize::from(self.chunk_target_samples)
            || i128::from(t) - i128::from(open_mint) >= i128::from(self.chunk_max_span_ms)
    }

    /// Checks ranges; called by `Engine::open`.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidConfig(m));
        if self.out_of_order_window_ms < 0 {
            return bad(format!("out_of_order_window_ms must be >= 0, got {}", self.out_of_order_window_ms));
        }
        if self.retention_ms < 0 {
            return bad(format!("retention_ms must be >= 0, got {}", self.retention_ms));
        }
        if self.wal_fsync == WalFsync::Interval && self.wal_fsync_interval_ms == 0 {
            return bad("wal_fsync_interval_ms must be > 0 when wal_fsync = \"interval\"".into());
        }
        if self.wal_segment_bytes < 1 << 20 {
            return bad(format!("wal_segment_bytes must be >= 1 MiB, got {}", self.wal_segment_bytes));
        }
        if self.chunk_target_samples == 0 {
            return bad("chunk_target_samples must be >= 1".into());
        }
        if self.chunk_max_span_ms <= 0 {
            return bad(format!("chunk_max_span_ms must be > 0, got {}", self.chunk_max_span_ms));
        }
        if self.head_idle_timeout_ms < 0 {
            return bad(format!("head_idle_timeout_ms must be >= 0, got {}", self.head_idle_timeout_ms));
        }
        if self.memtable_max_age_ms < 0 {
            return bad(format!("memtable_max_age_ms must be >= 0, got {}", self.memtable_max_age_ms));
        }
        if self.memtable_bytes < 64 << 10 {
            return bad(format!("memtable_bytes must be >= 64 KiB, got {}", self.memtable_bytes));
        }
        Ok(())
    }
}

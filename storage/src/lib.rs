//! One shard's durable time-series store.
//!
//! Owns the chunk codec, the write-ahead log, the in-memory head, the RocksDB layout,
//! the per-day inverted index (answering `tessera_model::Matcher`s) and retention. It is synchronous (no
//! tokio): every call may block on disk and must be made from a blocking thread.
//! It never knows about HTTP, gRPC, PromQL or tenants (the server encodes the tenant
//! as the reserved label `__tenant__`). Byte layouts are in `FORMAT.md`.
//!
//! - `Engine::open(dir, EngineConfig) -> Result<Engine>` replays the WAL.
//! - `Engine::append(&self, &[SeriesAppend]) -> Result<AppendReport>` (or
//!   `Engine::append_encoded` with label sets already in the canonical encoding of
//!   [`labels_codec`], as the server's write path builds them): returns only
//!   after the accepted samples are durable (WAL fsync per the configured policy).
//!   Per-sample rejections (too old, duplicate) are reported in `AppendReport`, not as
//!   `Err`; `Err` means the storage itself failed (the sender should retry).
//! - `Engine::select(&self, &[Matcher], mint, maxt) -> Result<Vec<SeriesSamples>>`:
//!   samples with `mint <= t <= maxt`, in time order, one entry per series, labels sorted.
//! - `Engine::select_chunks_until`: the same series' chunks as stored (not decoded);
//!   [`ChunkSamples`] turns them into exactly what `select` answers.
//!
//! Labels, samples and matchers are `tessera_model`'s (shared with the query engine):
//! `SeriesAppend` takes `&[Label]` sorted by name with unique names (refused otherwise),
//! reads answer `Labels`, and the index looks values up through the matcher's
//! `Pattern::scan` plan.
//! - `Engine::label_names` / `Engine::label_values` / `Engine::series` read the index only.
//! - The `*_until` variants of those reads take an [`Interrupt`] (deadline, cancel flag)
//!   and stop with `Error::Interrupted` when it fires.
//! - `Engine::flush`, `Engine::stats`, `Engine::close`.

pub mod chunk;
mod config;
mod db;
mod engine;
mod error;
#[cfg(test)]
mod format_tests;
mod head;
mod index;
mod interrupt;
mod keys;
pub mod labels_codec;
mod persist;
mod read;
mod types;
mod varint;
mod wal;

pub use chunk::Decode;
pub use config::{EngineConfig, WalFsync, FIFTEEN_DAYS_MS};
pub use db::{shard_usage, CfUsage, FileUsage, ShardUsage};
pub use engine::{Engine, ReplayReport};
pub use error::{Error, ErrorKind, Result};
pub use interrupt::Interrupt;
pub use read::{ChunkSamples, SeriesCursor};
pub use types::{
    AppendReport, DamagedFile, EncodedAppend, FsyncStats, RawChunk, RefAppend, RejectReason, Rejection, SeriesAppend,
    SeriesChunks, SeriesSamples, Stats, FSYNC_BUCKETS_SECONDS,
};
pub use wal::{Damage, TornTail};

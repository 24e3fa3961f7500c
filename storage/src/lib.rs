//! One shard's durable time-series store.
//!
//! Owns the chunk codec, the write-ahead log, the in-memory head, the RocksDB layout,
//! the per-day inverted index, label matchers and retention. It is synchronous (no
//! tokio): every call may block on disk and must be made from a blocking thread.
//! It never knows about HTTP, gRPC, PromQL or tenants (the server encodes the tenant
//! as the reserved label `__tenant__`).
//!
//! Interface contract (fixed so the server and query crates can build against it;
//! the storage issue fills in the bodies):
//!
//! - `Engine::open(dir, EngineConfig) -> Result<Engine>` replays the WAL.
//! - `Engine::append(&self, &[SeriesAppend]) -> Result<AppendReport>`: returns only
//!   after the accepted samples are durable (WAL fsync per the configured policy).
//!   Per-sample rejections (too old, duplicate) are reported in `AppendReport`, not as
//!   `Err`; `Err` means the storage itself failed (the sender should retry).
//! - `Engine::select(&self, &[Matcher], mint, maxt) -> Result<Vec<SeriesSamples>>`:
//!   samples with `mint <= t <= maxt`, in time order, one entry per series, labels sorted.
//! - `Engine::label_names` / `Engine::label_values` / `Engine::series` read the index only.
//! - `Engine::flush`, `Engine::stats`, `Engine::close`.

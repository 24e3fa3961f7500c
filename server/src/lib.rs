//! The `tessera` server: configuration, the HTTP front end (remote write/read and the
//! Prometheus HTTP API), the local shards and self-monitoring.
//!
//! This is the only crate that knows about networks. It crosses into the synchronous
//! storage engines through `shards` only, on the blocking pool; it owns tenancy (the
//! reserved `__tenant__` label is added and stripped in `shards` and nowhere else).
//! It never reads or writes RocksDB or WAL files itself.
//!
//! Write path: `http/write.rs` (content type, body) → `distributor/` (`Distributor::push`:
//! `ingest/decode.rs` + `ingest/validate.rs`, time window, `ingest/limits.rs`) →
//! `shards/mod.rs` (`Shards::push` through the `ShardWriter` trait, hash in
//! `shards/hash.rs`) → `tessera_storage::Engine::append`.

pub mod check_config;
pub mod cluster;
pub mod config;
pub mod distributor;
mod durable_file;
pub mod error;
#[cfg(test)]
mod fuzz;
pub mod http;
pub mod import;
pub mod ingest;
pub mod metadata;
pub mod metrics;
pub mod serve;
pub mod shards;

pub use config::Config;
pub use http::{AppState, ServerState};
pub use shards::{Shards, TenantView};

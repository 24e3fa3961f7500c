//! The server's configuration: one struct mirrored by the config file (TOML), the
//! command-line flags and the `TESSERA_*` environment variables.
//!
//! Precedence, lowest to highest: built-in defaults, the config file, environment
//! variables, flags (clap folds env vars into the flags). Every field documents its
//! unit, its default and what 0 means; `deploy/tessera.toml` is the annotated example
//! and a test parses it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::ConfigError;

/// Default HTTP listen address: loopback only, so a first run exposes nothing.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9201";
/// Default data directory, relative to the working directory.
pub const DEFAULT_DATA_DIR: &str = "./tessera-data";
/// Fewest and most logical shards `shards = 0` (automatic) picks for a new data directory.
pub const AUTOMATIC_SHARDS: std::ops::RangeInclusive<u32> = 4..=16;

/// The shard count of a new data directory when the config leaves it at 0: two per core,
/// at least 4 and at most 16. Each shard a write request touches costs it one blocking
/// task, one WAL write and one fsync, so a small machine ingests with less CPU from fewer
/// shards; queries run one fragment per shard, so a big one wants enough of them to use
/// its cores (BENCHMARKS.md, "Fewer shards on a small machine").
pub fn automatic_shards() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    cores.saturating_mul(2).clamp(*AUTOMATIC_SHARDS.start(), *AUTOMATIC_SHARDS.end())
}

/// The shard count to open `data_dir` with: the configured one if not 0, else the one the
/// directory recorded when it was created, else [`automatic_shards`].
pub fn resolve_shards(configured: u32, recorded: Option<u32>) -> u32 {
    match configured {
        0 => recorded.unwrap_or_else(automatic_shards),
        n => n,
    }
}

/// Top-level configuration of `tessera serve`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// HTTP listen address. Default `127.0.0.1:9201`. Port 0 picks a free port (the
    /// bound address is printed on stdout as `listening on ADDR`).
    pub listen: SocketAddr,
    /// Where the shards keep their WAL and RocksDB files. Default `./tessera-data`.
    pub data_dir: PathBuf,
    /// Number of logical shards S, each its own storage engine. Fixed when the data
    /// directory is created (it is recorded there, because the series-to-shard hash
    /// depends on it); starting with a different value is refused. Default 0 = the
    /// recorded count, or for a new directory [`automatic_shards`] (2 per core, 4..=16).
    pub shards: u32,
    /// Maximum number of storage calls running at once, per kind: this many shard reads
    /// (each shard's part of a select, remote read or index read) and, separately, this
    /// many appends, so reads can never hold up an acknowledged write. Default 0 =
    /// 2 × shards.
    pub max_blocking_storage_calls: usize,
    /// Seconds to wait for in-flight requests on SIGTERM/SIGINT before flushing and
    /// exiting anyway. Default 30. 0 = wait without limit.
    pub shutdown_timeout_secs: u64,
    /// Connection handling of the HTTP listener.
    pub http: HttpConfig,
    /// Write-path limits.
    pub limits: Limits,
    /// Settings of each shard's storage engine (see the storage crate for each field).
    pub storage: tessera_storage::EngineConfig,
    /// Limits of the PromQL query API (see `http/query_api.rs` for each field).
    pub query: crate::http::query_api::QueryLimits,
    /// Cluster mode: shards, replication and membership (`cluster/config.rs`).
    /// Ignored by `tessera serve`.
    pub cluster: crate::cluster::ClusterConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: DEFAULT_LISTEN.parse().expect("DEFAULT_LISTEN is a valid socket address"),
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            shards: 0,
            max_blocking_storage_calls: 0,
            shutdown_timeout_secs: 30,
            http: HttpConfig::default(),
            limits: Limits::default(),
            storage: tessera_storage::EngineConfig::default(),
            query: crate::http::query_api::QueryLimits::default(),
            cluster: crate::cluster::ClusterConfig::default(),
        }
    }
}

/// Connection handling of the HTTP listener (`http/connections.rs` explains the rules).
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Most open client connections. A new connection over the cap closes the
    /// connection idle longest (or is closed itself if every connection is busy).
    /// Default 4096; lowered at start-up to half the process' open-file limit if that
    /// is smaller (the log says so). Must be > 0.
    pub max_connections: usize,
    /// Seconds a client has to send a complete HTTP/1 request head before the
    /// connection is closed (slowloris). Default 10. 0 = no limit.
    pub header_read_timeout_secs: u64,
    /// Seconds a connection may stay open with no request in flight (between
    /// keep-alive requests, or before its first request) before it is closed.
    /// Default 60 (as VictoriaMetrics' `-http.idleConnTimeout`). 0 = no limit.
    pub idle_timeout_secs: u64,
    /// Most concurrent requests (streams) on one HTTP/2 connection. Default 100.
    pub max_concurrent_streams: u32,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            max_connections: 4096,
            header_read_timeout_secs: 10,
            idle_timeout_secs: 60,
            max_concurrent_streams: 100,
        }
    }
}

/// How label and metric names are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NameValidation {
    /// The remote-write 1.0 rules: metric names `[a-zA-Z_:][a-zA-Z0-9_:]*`, label names
    /// `[a-zA-Z_][a-zA-Z0-9_]*`.
    Legacy,
    /// Prometheus 3.x UTF-8 names: any non-empty valid UTF-8.
    Utf8,
}

/// Limits applied to every remote-write (and remote-read) request, per tenant where it
/// says so. What memory one request can cause, in terms of these keys, is written down
/// in `server/README.md` ("Request limits and the memory they bound").
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest accepted request body as sent (snappy-compressed), in bytes. Larger → 413.
    /// Default 32 MiB. Must be > 0.
    pub max_request_bytes: usize,
    /// Largest accepted body after snappy decompression, in bytes. Larger → 413.
    /// Default 256 MiB. Must be > 0.
    pub max_decompressed_bytes: usize,
    /// Most labels (including `__name__`) one series may have. Default 64 (DCGM
    /// exporters send 30+ labels). 0 = no limit.
    pub max_labels_per_series: usize,
    /// Longest label name, in bytes. Default 1024. 0 = no limit.
    pub max_label_name_bytes: usize,
    /// Longest label value, in bytes. Default 4096. 0 = no limit.
    pub max_label_value_bytes: usize,
    /// Name rules: `legacy` (default) or `utf8`.
    pub name_validation: NameValidation,
    /// Sustained ingestion rate per tenant, in samples per second. A request that would
    /// exceed it is refused with 429 and `Retry-After`. Default 0 = unlimited.
    pub ingestion_rate_samples_per_sec: f64,
    /// Burst allowance of the per-tenant rate limit, in samples. Default 0 = one second
    /// of `ingestion_rate_samples_per_sec` (at least one request of the largest size).
    pub ingestion_burst_samples: u64,
    /// Most active series per tenant. Samples for new series beyond it are refused with
    /// 429 (samples of known series in the same request are still written).
    /// Default 0 = unlimited.
    pub max_active_series_per_tenant: u64,
    /// A series counts as active for this many seconds after its last sample, for
    /// `max_active_series_per_tenant`. Default 1200 (20 minutes). Must be > 0.
    pub active_series_idle_secs: u64,
    /// Metric families remembered per tenant for `/api/v1/metadata`. Default 100000.
    /// 0 = metadata is not kept.
    pub max_metadata_per_tenant: usize,
    /// Memory of all write requests being decoded and written at once, in bytes: their
    /// decompressed bodies (a request waits for room for its body before decoding) plus
    /// their decoded memory (charged as `max_decoded_bytes_per_request` counts it; a
    /// request that finds no room while decoding is refused with 503 and retried by
    /// the sender). This bounds the memory any number of concurrent requests can
    /// take. Default 1 GiB. Must be at least `max_decompressed_bytes +
    /// max_decoded_bytes_per_request`.
    pub max_inflight_write_bytes: usize,
    /// How far ahead of the server's clock a sample's timestamp may be, in seconds
    /// (Mimir's `creation_grace_period`). Later samples are refused with 400: one sample
    /// dated years ahead would otherwise move its shard's retention window and hide
    /// every real sample. Default 600 (10 minutes). 0 = no check.
    pub max_future_secs: u64,
    /// How far behind the server's clock a sample's timestamp may be, in seconds. Older
    /// samples are refused with 400 (the rest of the request is still written).
    /// Default 0 = the storage retention (`storage.retention_ms`): an older sample
    /// would only be dropped by retention later. When this and the retention are both
    /// 0, there is no lower bound.
    pub max_sample_age_secs: u64,
    /// Memory one write request may take once decoded, in bytes: the protobuf
    /// structures (estimated from the wire format before decoding, allocation
    /// slack included) plus the labels, samples and metadata text copied out of them.
    /// A request over it is refused with 413 before the memory is allocated; this is
    /// what stops remote write 2.0 symbol references from being copied into every
    /// series without bound. Default 512 MiB. Must be > 0.
    pub max_decoded_bytes_per_request: usize,
    /// Bytes of metadata (metric family names, help and unit texts) kept per tenant
    /// for `/api/v1/metadata`. Entries that do not fit are not kept. Default 16 MiB.
    /// 0 = no byte limit (`max_metadata_per_tenant` still applies).
    pub max_metadata_bytes_per_tenant: usize,
    /// Longest metadata help or unit text kept, in bytes; longer texts are cut at a
    /// character boundary. Default 1024 (Mimir's `max_metadata_length`). 0 = no limit.
    pub max_metadata_text_bytes: usize,
    /// Most queries one remote-read request may carry; more → 400. Default 64.
    /// Must be > 0.
    pub max_read_queries_per_request: usize,
    /// Remote-read requests served at once; more wait for a slot until their deadline
    /// (`query.timeout_secs`, which also bounds each request's run time).
    /// Default 10 (Prometheus' `--storage.remote.read-concurrent-limit`). Must be > 0.
    pub max_concurrent_reads: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_bytes: 32 << 20,
            max_decompressed_bytes: 256 << 20,
            max_labels_per_series: 64,
            max_label_name_bytes: 1024,
            max_label_value_bytes: 4096,
            name_validation: NameValidation::Legacy,
            ingestion_rate_samples_per_sec: 0.0,
            ingestion_burst_samples: 0,
            max_active_series_per_tenant: 0,
            active_series_idle_secs: 1200,
            max_metadata_per_tenant: 100_000,
            max_inflight_write_bytes: 1 << 30,
            max_future_secs: 600,
            max_sample_age_secs: 0,
            max_decoded_bytes_per_request: 512 << 20,
            max_metadata_bytes_per_tenant: 16 << 20,
            max_metadata_text_bytes: 1024,
            max_read_queries_per_request: 64,
            max_concurrent_reads: 10,
        }
    }
}

impl Config {
    /// Reads a TOML config file; unknown keys are an error (a typo must not be ignored).
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        Self::from_toml(&text).map_err(|e| match e {
            ConfigError::Parse { message, .. } => ConfigError::Parse { path: path.to_owned(), message },
            other => other,
        })
    }

    /// Parses TOML text (used by `from_file` and by tests of the example config).
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse { path: PathBuf::new(), message: e.to_string() })
    }

    /// Checks value ranges; called once at start-up.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        if self.shards > 4096 {
            return bad(format!("shards must be in 1..=4096 (or 0 for automatic), got {}", self.shards));
        }
        if self.http.max_connections == 0 {
            return bad("http.max_connections must be > 0".into());
        }
        if self.http.max_concurrent_streams == 0 {
            return bad("http.max_concurrent_streams must be > 0".into());
        }
        let l = &self.limits;
        if l.max_request_bytes == 0 {
            return bad("limits.max_request_bytes must be > 0".into());
        }
        if l.max_decompressed_bytes == 0 {
            return bad("limits.max_decompressed_bytes must be > 0".into());
        }
        if !(l.ingestion_rate_samples_per_sec >= 0.0 && l.ingestion_rate_samples_per_sec.is_finite()) {
            return bad(format!(
                "limits.ingestion_rate_samples_per_sec must be a finite number >= 0, got {}",
                l.ingestion_rate_samples_per_sec
            ));
        }
        // The largest request allowed must fit on its own, or it would get 503 forever.
        if l.max_inflight_write_bytes < l.max_decompressed_bytes.saturating_add(l.max_decoded_bytes_per_request) {
            return bad(format!(
                "limits.max_inflight_write_bytes ({}) must be >= limits.max_decompressed_bytes ({}) + \
                 limits.max_decoded_bytes_per_request ({})",
                l.max_inflight_write_bytes, l.max_decompressed_bytes, l.max_decoded_bytes_per_request
            ));
        }
        if l.max_decoded_bytes_per_request == 0 {
            return bad("limits.max_decoded_bytes_per_request must be > 0".into());
        }
        if l.max_read_queries_per_request == 0 {
            return bad("limits.max_read_queries_per_request must be > 0".into());
        }
        if l.max_concurrent_reads == 0 {
            return bad("limits.max_concurrent_reads must be > 0".into());
        }
        if l.active_series_idle_secs == 0 {
            return bad("limits.active_series_idle_secs must be > 0".into());
        }
        self.storage.validate().map_err(|e| ConfigError::Invalid(e.to_string()))?;
        self.query.validate().map_err(ConfigError::Invalid)?;
        Ok(())
    }

    /// How far back (ms before the server clock) a written sample may be, resolving
    /// `limits.max_sample_age_secs = 0` to the storage retention; `None` = no bound.
    pub fn max_sample_age_ms(&self) -> Option<i64> {
        let secs = self.limits.max_sample_age_secs;
        if secs > 0 {
            Some(i64::try_from(secs).unwrap_or(i64::MAX).saturating_mul(1000))
        } else if self.storage.retention_ms > 0 {
            Some(self.storage.retention_ms)
        } else {
            None
        }
    }

    /// Permits of the blocking-call semaphore, resolving the 0 default.
    pub fn blocking_permits(&self) -> usize {
        if self.max_blocking_storage_calls == 0 {
            2 * self.shards as usize
        } else {
            self.max_blocking_storage_calls
        }
    }
}

#[cfg(test)]
mod tests;

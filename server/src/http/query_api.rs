//! The read half of the Prometheus HTTP API: PromQL queries and the status endpoints.
//!
//! Routes (GET, and POST with a form body where Prometheus allows it): `/api/v1/query`,
//! `/query_range`, `/query_exemplars`, `/format_query`, `/parse_query`, and
//! `/status/{buildinfo,runtimeinfo,flags,tsdb}`. Answers are byte-compatible with Prometheus
//! 3.x (written by `http/json.rs`, parameters read by `http/params.rs`); errors use its
//! envelope and types (see `response.rs`).
//! Not implemented: `stats=` is accepted but no query statistics are returned, and
//! `query_exemplars` answers an empty list because no exemplars are stored.
//!
//! This module knows nothing about shards or RocksDB: it reads a tenant's data through
//! [`TenantData`] and evaluates PromQL through [`Evaluator`], which the server wires to the
//! local shards and the `tessera_query` engine. Evaluation runs on the blocking pool, bounded
//! and cancellable (`exec.rs`), so a heavy query never stalls ingestion.

mod ast_json;
mod engine;
mod exec;
mod handlers;
mod response;
mod status;
#[cfg(test)]
mod tests;
mod tsdb_stats;

use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use futures::future::BoxFuture;
use tessera_model::Labels;
use tessera_query::{QueryError, QueryOutput, Queryable};

pub use engine::engine_for;
pub use exec::{wait_for_query_threads, Executor, QueryControl};
pub use response::ApiError;
pub use tsdb_stats::{CardinalityCounter, HeadSummary, TsdbStatus};

/// Options of one evaluation beyond the expression and its times.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// Deadline and cancel flag the evaluation must honour.
    pub control: QueryControl,
    /// Per-query override of the lookback delta (`lookback_delta=` parameter), in ms.
    pub lookback_delta_ms: Option<i64>,
}

/// What the API needs from a PromQL engine. Implemented for `tessera_query::Engine`; a remote
/// querier can implement it later without touching the HTTP layer. Calls block: they are made
/// from the blocking pool.
pub trait Evaluator: Send + Sync + 'static {
    /// Evaluates `expr` at `time_ms`.
    fn instant(
        &self,
        data: &dyn Queryable,
        expr: &str,
        time_ms: i64,
        opts: &EvalOptions,
    ) -> Result<QueryOutput, QueryError>;

    /// Evaluates `expr` at every step from `start_ms` to `end_ms` inclusive.
    fn range(
        &self,
        data: &dyn Queryable,
        expr: &str,
        start_ms: i64,
        end_ms: i64,
        step_ms: i64,
        opts: &EvalOptions,
    ) -> Result<QueryOutput, QueryError>;
}

/// A tenant's data as the read API sees it. Implemented by the server over its shards.
pub trait TenantData: Send + Sync + 'static {
    /// The tenant's series and samples, as the engine reads them. Cheap to call; the
    /// returned view blocks on storage and is only used from the blocking pool. Fails
    /// (typically `unavailable`) while storage is not ready.
    fn queryable(&self, tenant: &str) -> Result<Arc<dyn Queryable>, ApiError>;

    /// What `/api/v1/status/tsdb` counts for the tenant (all its series): their label
    /// sets from the index (no samples), or counts already made where the series live.
    /// Async because the index is read on the storage side's own bounded blocking pool.
    fn cardinality(&self, tenant: &str) -> BoxFuture<'static, Result<Cardinality, ApiError>>;

    /// Chunk count and time range of the tenant's data for `headStats`, when storage
    /// keeps them per tenant. Must not do I/O.
    fn head_summary(&self, tenant: &str) -> HeadSummary;

    /// Series held across all tenants (`timeSeriesCount` in runtimeinfo), if known.
    fn total_series(&self) -> Option<u64>;
}

/// The input of `/api/v1/status/tsdb` ([`TenantData::cardinality`]).
pub enum Cardinality {
    /// Every series' label set; the endpoint counts them on a query thread.
    Series(Vec<Labels>),
    /// Series per label pair counted by the shards and added up (a cluster's
    /// ingesters), with the read's warnings (a partial answer names what is missing).
    Counted(tessera_query::ReadResult<CardinalityCounter>),
}

/// Limits that protect the server from expensive queries. Also the `[query]` table of the
/// server's config file, hence the plain units.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueryLimits {
    /// Longest a query may run, in seconds, waiting for a slot included; a request's
    /// `timeout=` can only shorten it. Default 120 (Prometheus' `--query.timeout`).
    pub timeout_secs: u64,
    /// Evaluations running at once; more wait in a queue. Default 0, meaning twice the
    /// number of cores.
    pub max_concurrent: usize,
    /// Samples one query may hold in memory at once (enforced by the engine): decoded
    /// samples of the series being read, step points of intermediate results and
    /// aggregation states, not samples scanned and dropped (a streamed `sum(rate(..))`
    /// holds one series and its steps). Pushed-down fragments share it. Default
    /// 50,000,000 (Prometheus' `--query.max-samples`); 0 is refused.
    pub max_samples: u64,
    /// Most steps per series of a range query, as Prometheus counts them:
    /// `(end - start) / step` may not exceed it. Default 11,000, Prometheus' fixed limit.
    pub max_points_per_series: u64,
    /// How far back (seconds) an instant selector looks for a sample. Default 300.
    pub lookback_delta_secs: u64,
    /// The step (seconds) of a subquery written without one (`max_over_time(x[1h:])`):
    /// Prometheus takes its `global.evaluation_interval` there, so a user whose
    /// Prometheus scrapes and evaluates every 15 s sets 15 here to get the same answers.
    /// Default 60 (Prometheus' default); 0 is refused.
    pub default_subquery_step_secs: u64,
    /// Longest PromQL expression accepted (`query=` and each `match[]`), in bytes; a
    /// longer one is refused with 400 naming this key, before it is parsed. A POST form
    /// body may be up to 4 times this plus 64 KiB (room for percent-encoding and the
    /// other parameters); a larger one is refused with 413. Default 262144 (256 KiB);
    /// 0 is refused.
    pub max_query_bytes: usize,
    /// Deepest PromQL expression accepted, in syntax-tree levels, as bounded on the text
    /// before parsing (each operator, bracket group and subquery counts one level; see
    /// `tessera_query::engine::limits`). A deeper one is refused with 400 naming this key.
    /// Everything that walks a query recurses over it, so this is what keeps a query from
    /// overflowing a thread's stack. Default 256; at most 512 (parsing that deep was
    /// measured to fit a 2 MiB stack, evaluating it half of a query thread's 64 MiB);
    /// 0 is refused.
    pub max_query_depth: usize,
}

/// The largest `query.max_query_depth` accepted (see
/// `tessera_query::engine::limits::MAX_QUERY_DEPTH_CEILING` for how it was measured).
pub const MAX_QUERY_DEPTH_CEILING: usize = tessera_query::engine::limits::MAX_QUERY_DEPTH_CEILING;

impl Default for QueryLimits {
    fn default() -> Self {
        QueryLimits {
            timeout_secs: 120,
            max_concurrent: 0,
            max_samples: 50_000_000,
            max_points_per_series: 11_000,
            lookback_delta_secs: 300,
            default_subquery_step_secs: (tessera_query::DEFAULT_SUBQUERY_STEP_MS / 1000) as u64,
            max_query_bytes: tessera_query::engine::limits::DEFAULT_MAX_QUERY_BYTES,
            max_query_depth: tessera_query::engine::limits::DEFAULT_MAX_QUERY_DEPTH,
        }
    }
}

impl QueryLimits {
    /// Rejects limits that would make every query fail.
    pub fn validate(&self) -> Result<(), String> {
        if self.timeout_secs == 0 {
            return Err("query.timeout_secs must be positive".into());
        }
        if self.max_samples == 0 || self.max_points_per_series == 0 {
            return Err("query.max_samples and query.max_points_per_series must be positive".into());
        }
        if self.lookback_delta_secs == 0 {
            return Err("query.lookback_delta_secs must be positive".into());
        }
        if self.default_subquery_step_secs == 0 {
            return Err(
                "query.default_subquery_step_secs must be positive (the step of a subquery written as x[1h:])".into()
            );
        }
        if self.max_query_bytes == 0 {
            return Err("query.max_query_bytes must be positive".into());
        }
        if self.max_query_depth == 0 || self.max_query_depth > MAX_QUERY_DEPTH_CEILING {
            return Err(format!(
                "query.max_query_depth must be between 1 and {MAX_QUERY_DEPTH_CEILING} (deeper queries could overflow a thread's stack)"
            ));
        }
        Ok(())
    }

    /// The bounds on PromQL text the engine and the API check before parsing.
    pub fn text_limits(&self) -> tessera_query::TextLimits {
        tessera_query::TextLimits { max_depth: self.max_query_depth, max_bytes: self.max_query_bytes }
    }

    /// The largest POST form body of a query endpoint, in bytes: room for a query of
    /// `max_query_bytes` fully percent-encoded plus 64 KiB of other parameters.
    pub fn max_form_bytes(&self) -> usize {
        self.max_query_bytes.saturating_mul(4).saturating_add(64 * 1024)
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs)
    }

    /// The concurrency bound with 0 resolved to twice the core count.
    pub fn concurrency(&self) -> usize {
        if self.max_concurrent > 0 {
            return self.max_concurrent;
        }
        2 * std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    }

    pub fn lookback_delta_ms(&self) -> i64 {
        i64::try_from(self.lookback_delta_secs.saturating_mul(1000)).unwrap_or(i64::MAX)
    }

    pub fn default_subquery_step_ms(&self) -> i64 {
        i64::try_from(self.default_subquery_step_secs.saturating_mul(1000)).unwrap_or(i64::MAX)
    }

    /// The limits as `query.<key>` flag pairs for `/status/flags`.
    pub fn flag_pairs(&self) -> Vec<(String, String)> {
        vec![
            ("query.timeout_secs".into(), self.timeout_secs.to_string()),
            ("query.max_concurrent".into(), self.concurrency().to_string()),
            ("query.max_samples".into(), self.max_samples.to_string()),
            ("query.max_points_per_series".into(), self.max_points_per_series.to_string()),
            ("query.lookback_delta_secs".into(), self.lookback_delta_secs.to_string()),
            ("query.default_subquery_step_secs".into(), self.default_subquery_step_secs.to_string()),
            ("query.max_query_bytes".into(), self.max_query_bytes.to_string()),
            ("query.max_query_depth".into(), self.max_query_depth.to_string()),
        ]
    }
}

/// What `/status/buildinfo` reports. Grafana reads `version` to pick Prometheus features;
/// we answer with the Prometheus API level we follow and keep our own facts in the other
/// fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildInfo {
    pub version: String,
    pub revision: String,
    pub branch: String,
    pub build_user: String,
    pub build_date: String,
    pub go_version: String,
}

impl Default for BuildInfo {
    fn default() -> Self {
        BuildInfo {
            // The Prometheus HTTP API and PromQL semantics Tessera implements.
            version: "3.0.0".into(),
            revision: option_env!("TESSERA_GIT_REVISION").unwrap_or("unknown").into(),
            branch: option_env!("TESSERA_GIT_BRANCH").unwrap_or("unknown").into(),
            build_user: "tessera".into(),
            build_date: option_env!("TESSERA_BUILD_DATE").unwrap_or("unknown").into(),
            // There is no Go here; name what was built instead of pretending.
            go_version: format!("tessera {} (Rust)", env!("CARGO_PKG_VERSION")),
        }
    }
}

/// Facts about the running server for the status endpoints.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    pub build: BuildInfo,
    pub start_time: chrono::DateTime<chrono::Utc>,
    /// Command-line flags and their values as strings (`/status/flags`).
    pub flags: Vec<(String, String)>,
    /// Retention as Prometheus prints it, e.g. `15d`.
    pub storage_retention: String,
}

impl Default for ServerInfo {
    fn default() -> Self {
        ServerInfo {
            build: BuildInfo::default(),
            start_time: chrono::Utc::now(),
            flags: Vec::new(),
            storage_retention: String::new(),
        }
    }
}

/// Everything the handlers share.
pub struct QueryApi {
    evaluator: Arc<dyn Evaluator>,
    data: Arc<dyn TenantData>,
    limits: QueryLimits,
    info: ServerInfo,
    executor: exec::Executor,
}

impl QueryApi {
    pub fn new(
        evaluator: Arc<dyn Evaluator>,
        data: Arc<dyn TenantData>,
        limits: QueryLimits,
        info: ServerInfo,
    ) -> Self {
        let executor = exec::Executor::new(limits.concurrency());
        QueryApi { evaluator, data, limits, info, executor }
    }
}

/// The router for all endpoints of this module, with paths starting at `/api/v1`.
pub fn routes(api: QueryApi) -> Router {
    let api = Arc::new(api);
    Router::new()
        .route("/api/v1/query", get(handlers::query).post(handlers::query))
        .route("/api/v1/query_range", get(handlers::query_range).post(handlers::query_range))
        .route("/api/v1/query_exemplars", get(handlers::query_exemplars).post(handlers::query_exemplars))
        .route("/api/v1/format_query", get(handlers::format_query).post(handlers::format_query))
        .route("/api/v1/parse_query", get(handlers::parse_query).post(handlers::parse_query))
        .route("/api/v1/status/buildinfo", get(status::buildinfo))
        .route("/api/v1/status/runtimeinfo", get(status::runtimeinfo))
        .route("/api/v1/status/flags", get(status::flags))
        .route("/api/v1/status/tsdb", get(status::tsdb))
        // Prometheus gzips answers for clients that accept it; dashboards fetching
        // large matrices over a network are why.
        .layer(tower_http::compression::CompressionLayer::new())
        .with_state(api)
}

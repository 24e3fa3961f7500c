//! The HTTP front end (axum): shared state, the router, and per-request metrics.
//!
//! Route map (each handler in the file named after what it serves):
//!
//! | route | file |
//! |---|---|
//! | `POST /api/v1/write` | `write.rs` (remote write 1.0 and 2.0) |
//! | `POST /api/v1/read` | `read.rs` (remote read, sampled response) |
//! | `GET/POST /api/v1/series`, `/api/v1/labels`, `/api/v1/label/{name}/values`, `GET /api/v1/metadata` | `index_api.rs` |
//! | `/-/healthy`, `/-/ready`, `/metrics` | `health.rs` |
//! | `/api/v1/query`, `/api/v1/query_range`, `/api/v1/status/*`, ... | `query_api.rs` (added by the query API work; mounted in [`router`]) |
//!
//! Shared by every endpoint, each rule once: `params.rs` (Prometheus' parameter parsers
//! and their error texts, the tenant header), `body.rs` (the bounded body reader: 413
//! after draining) and `json.rs` (the JSON writer, with Go's escaping).
//!
//! Handlers never call storage directly. Reads go through the tenant's
//! [`tessera_query::Queryable`] ([`ServerState::queryable`]), writes through the
//! [`crate::distributor::Distributor`]; behind both, [`crate::shards::Shards`] owns
//! tenancy and the blocking pool.

pub mod body;
pub mod connections;
pub mod health;
pub mod index_api;
pub mod json;
pub mod params;
pub mod query_api;
pub mod read;
pub mod tenant_data;
pub mod write;

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;

use crate::config::Config;
use crate::distributor::Distributor;
use crate::ingest::limits::ActiveSeries;
use crate::metadata::MetadataStore;
use crate::metrics::Metrics;
use crate::shards::{ShardError, Shards, TenantView};

/// State shared by every handler. Clone is cheap (one `Arc`).
pub type AppState = Arc<ServerState>;

/// Everything a handler may need.
pub struct ServerState {
    pub config: Config,
    /// Set once every shard has replayed its WAL; until then reads and writes get 503
    /// and `/-/ready` says not ready.
    shards: OnceLock<Arc<Shards>>,
    /// Cluster front ends (gateway, distributor, querier): reads and writes go to the
    /// ingesters through this instead of local shards.
    remote: OnceLock<Arc<dyn crate::cluster::Frontend>>,
    pub metadata: Arc<MetadataStore>,
    pub metrics: Arc<Metrics>,
    /// The active-series cap, shared with the distributor (purged by `serve`).
    pub active_series: Arc<ActiveSeries>,
    /// The write pipeline (`POST /api/v1/write` only reads the body and calls it).
    pub distributor: Distributor,
    /// Remote-read requests served at once (`limits.max_concurrent_reads`).
    pub read_slots: tokio::sync::Semaphore,
    /// Set on SIGTERM/SIGINT so `/-/ready` turns 503 and load balancers stop routing
    /// here while in-flight requests finish.
    pub shutting_down: std::sync::atomic::AtomicBool,
    /// The cores this process may use, read once: a query evaluates its shard fragments
    /// on this many workers. (`available_parallelism` reads the cgroup files under
    /// `/proc` and `/sys` each time, about a tenth of a query's fixed cost when it was
    /// asked per query.)
    cores: usize,
}

impl ServerState {
    pub fn new(config: Config) -> Self {
        let metadata = Arc::new(MetadataStore::new(
            config.limits.max_metadata_per_tenant,
            config.limits.max_metadata_bytes_per_tenant,
            config.limits.max_metadata_text_bytes,
        ));
        let metrics = Arc::new(Metrics::new());
        let active_series = Arc::new(ActiveSeries::new(&config.limits));
        ServerState {
            distributor: Distributor::new(
                &config,
                Arc::clone(&active_series),
                Arc::clone(&metadata),
                Arc::clone(&metrics),
            ),
            metadata,
            read_slots: tokio::sync::Semaphore::new(config.limits.max_concurrent_reads),
            active_series,
            metrics,
            shards: OnceLock::new(),
            remote: OnceLock::new(),
            shutting_down: std::sync::atomic::AtomicBool::new(false),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            config,
        }
    }

    /// Publishes the opened shards; the server is ready from now on.
    pub fn set_shards(&self, shards: Arc<Shards>) {
        // `set` fails only if called twice; start-up calls it exactly once.
        let _ = self.shards.set(shards);
    }

    /// The shards, or 503 while the WAL replay is still running.
    pub fn shards(&self) -> Result<Arc<Shards>, ShardError> {
        self.shards.get().cloned().ok_or_else(ShardError::not_ready)
    }

    /// Makes this a cluster front end: reads and writes go through `remote`.
    pub fn set_remote(&self, remote: Arc<dyn crate::cluster::Frontend>) {
        // Called once at start-up, before serving.
        let _ = self.remote.set(remote);
    }

    /// The cluster front end's data plane, if this is one.
    pub fn remote(&self) -> Option<&Arc<dyn crate::cluster::Frontend>> {
        self.remote.get()
    }

    /// Where the distributor sends validated series: the local shards (503 while the
    /// WAL replay runs) or, in a cluster front end, the ingesters.
    pub fn writer(&self) -> Result<Arc<dyn crate::distributor::ShardWriter>, ShardError> {
        match self.remote.get() {
            Some(r) => r.writer(),
            None => Ok(self.shards()?),
        }
    }

    /// The shards if already open (for `/metrics` and shutdown).
    pub fn shards_if_ready(&self) -> Option<Arc<Shards>> {
        self.shards.get().cloned()
    }

    /// A synchronous, tenant-scoped `Queryable` for the PromQL engine (call it from a
    /// blocking thread). The tenant comes from [`params::tenant`].
    /// PromQL evaluated through it pushes shard-local fragments down to each local shard,
    /// one worker per core.
    pub fn tenant_view(&self, tenant: &str) -> Result<TenantView, ShardError> {
        let engine = query_api::engine_for(&self.config.query);
        Ok(self.shards()?.tenant_view(tenant).with_pushdown(engine, self.cores))
    }

    /// The tenant's data as the read trait every read endpoint goes through (503 while
    /// the WAL replay runs). Call it on the runtime: the index reads of the returned
    /// view run on it.
    pub fn queryable(&self, tenant: &str) -> Result<Arc<dyn tessera_query::Queryable>, ShardError> {
        self.queryable_partial(tenant, None)
    }

    /// [`ServerState::queryable`] with the request's `partial_response` (cluster front
    /// ends; `None`: the configured default). A single node has no replicas to miss and
    /// ignores it.
    pub fn queryable_partial(
        &self,
        tenant: &str,
        partial: Option<bool>,
    ) -> Result<Arc<dyn tessera_query::Queryable>, ShardError> {
        if let Some(r) = self.remote.get() {
            return r.queryable(tenant, partial);
        }
        Ok(Arc::new(self.tenant_view(tenant)?))
    }
}

/// The complete router: this module's routes plus, when given, the PromQL query API
/// (`query_api::routes`, built over [`tenant_data::ShardsData`]). Add new route groups
/// here (one `.merge` per module); axum panics at start-up on a duplicated route, which
/// every end-to-end test would catch.
pub fn router(state: AppState, query: Option<query_api::QueryApi>) -> Router {
    let api = Router::new()
        .route("/api/v1/write", post(write::remote_write))
        .route("/api/v1/read", post(read::remote_read))
        .route("/api/v1/series", get(index_api::series).post(index_api::series))
        .route("/api/v1/labels", get(index_api::label_names).post(index_api::label_names))
        .route("/api/v1/label/{name}/values", get(index_api::label_values))
        .route("/api/v1/metadata", get(index_api::metadata))
        .route("/-/healthy", get(health::healthy))
        .route("/-/ready", get(health::ready))
        .route("/metrics", get(health::metrics));
    let mut app: Router = api.with_state(Arc::clone(&state));
    if let Some(q) = query {
        app = app.merge(query_api::routes(q));
    }
    // Layered last so that every route, the query API's included, is counted.
    app.layer(axum::middleware::from_fn_with_state(state, track_request))
}

/// Counts every request by route and status and records its latency.
async fn track_request(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let handler =
        req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_owned()).unwrap_or_else(|| "other".to_owned());
    let start = Instant::now();
    let resp = next.run(req).await;
    let code = resp.status().as_u16().to_string();
    state.metrics.requests.inc_by(&[&handler, &code], 1);
    state.metrics.request_duration.observe(&[&handler], start.elapsed().as_secs_f64());
    resp
}

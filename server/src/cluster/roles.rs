//! The cluster roles as processes: `tessera ingester` ([`run_ingester`]) and the front
//! ends `tessera distributor`, `querier` and `gateway` ([`run_frontend`]).
//!
//! An ingester binds its HTTP and gRPC listeners first (so `/-/healthy` answers at
//! once), opens the shards placement gives it (WAL replay), starts serving gRPC, and
//! only then turns `/-/ready` to 200. A front end serves the same HTTP API as `tessera
//! serve` (the distributor's remote write, the querier's Prometheus API; the gateway
//! both) with the reads and writes going to the ingesters ([`ClusterFrontend`]); it is
//! ready once every shard has enough replicas up by the last health check (R for reads,
//! W for writes). Every role serves `/api/v1/status/cluster`; a front end's shows each
//! ingester's shards with their holes and repair state (from the health checks'
//! `Status` answers).
//!
//! `partial_response`: the query API runs twice, over a strict and over a partial view
//! of the cluster, and [`PartialSwitch`] sends each `/api/v1/query*` request to one of
//! them by its `partial_response` parameter (URL or form body), defaulting to
//! `[cluster] allow_partial_response`. The index endpoints (`/api/v1/series`,
//! `/labels`, `/label/<name>/values`) and remote read read the same parameter
//! themselves and ask [`Frontend::queryable`] for that view.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures::future::BoxFuture;
use tessera_query::{QueryOptions, Queryable, ReadResult};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::holes::HoleBook;
use super::identity::{self, Identity};
use super::ingester::IngesterService;
use super::peers::{identity_json, Peers};
use super::querier::ClusterQueryable;
use super::repair;
use super::writer::ClusterWriter;
use crate::config::Config;
use crate::distributor::ShardWriter;
use crate::error::ApiError;
use crate::error::JsonError;
use crate::http::body::{read_bounded, BodyLimit};
use crate::http::json::{ApiSuccess, ObjectWriter};
use crate::http::params::Params;
use crate::http::query_api::{Cardinality, HeadSummary, QueryApi, TenantData};
use crate::http::{self, AppState, ServerState};
use crate::metadata::MetadataEntry;
use crate::shards::{ShardError, ShardId, Shards};

/// A cluster front end's data plane, as the HTTP handlers use it
/// (`ServerState::set_remote`).
pub trait Frontend: Send + Sync {
    /// Where remote write goes; an error when this role takes no writes.
    fn writer(&self) -> Result<Arc<dyn ShardWriter>, ShardError>;
    /// A tenant's data for reads: with `partial` (the request's `partial_response`, or
    /// `[cluster] allow_partial_response` when `None`), a read that cannot reach enough
    /// replicas of some shard answers with a warning instead of failing. An error when
    /// this role serves no reads.
    fn queryable(&self, tenant: &str, partial: Option<bool>) -> Result<Arc<dyn Queryable>, ShardError>;
    /// A tenant's metric metadata, read from the ingesters and merged, with
    /// `/api/v1/metadata`'s `metric`, `limit` and `limit_per_metric` (`partial` as for
    /// [`Frontend::queryable`]). Blocking: call it on the blocking pool.
    fn metadata(
        &self,
        tenant: &str,
        partial: Option<bool>,
        query: MetadataQuery<'_>,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<BTreeMap<String, Vec<MetadataEntry>>>, ApiError>;
    /// `Ok` when ready to serve; otherwise why not.
    fn ready(&self) -> Result<(), String>;
    /// Appends this front end's own metrics (`tessera_cluster_*`) to a `/metrics` page.
    fn render_metrics(&self, out: &mut String);
}

/// `/api/v1/metadata`'s parameters: one family or all, at most `limit` families (by
/// name) and `limit_per_metric` entries each; `None` = no limit.
#[derive(Clone, Copy, Debug, Default)]
pub struct MetadataQuery<'a> {
    pub metric: Option<&'a str>,
    pub limit: Option<usize>,
    pub limit_per_metric: Option<usize>,
}

/// Which front end a process is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrontendRole {
    Distributor,
    Querier,
    Gateway,
}

impl FrontendRole {
    pub fn name(self) -> &'static str {
        match self {
            FrontendRole::Distributor => "distributor",
            FrontendRole::Querier => "querier",
            FrontendRole::Gateway => "gateway",
        }
    }

    fn writes(self) -> bool {
        self != FrontendRole::Querier
    }

    fn reads(self) -> bool {
        self != FrontendRole::Distributor
    }
}

/// Reads and writes through the ingesters.
pub struct ClusterFrontend {
    role: FrontendRole,
    peers: Arc<Peers>,
    writer: Arc<ClusterWriter>,
    /// The runtime the fan-outs of the synchronous read views run on.
    runtime: tokio::runtime::Handle,
    /// Evaluates at the front end the pushed-down fragments no replica could.
    engine: Option<Arc<tessera_query::Engine>>,
}

impl ClusterFrontend {
    /// Must be called on the runtime (the read views run their fan-out on it).
    pub fn new(role: FrontendRole, peers: Arc<Peers>) -> Self {
        ClusterFrontend {
            role,
            writer: Arc::new(ClusterWriter::new(Arc::clone(&peers))),
            peers,
            runtime: tokio::runtime::Handle::current(),
            engine: None,
        }
    }

    /// Pushes query fragments down to the ingesters (when `[cluster] query_pushdown`),
    /// with `engine` for what no replica can evaluate.
    pub fn with_engine(mut self, engine: Arc<tessera_query::Engine>) -> Self {
        self.engine = Some(engine);
        self
    }

    fn cluster_view(&self, tenant: &str, partial: bool) -> Result<Arc<ClusterQueryable>, ShardError> {
        if !self.role.reads() {
            return Err(ShardError::bad_data(
                "this process is a distributor (tessera distributor) and serves no reads; query a querier or gateway",
            ));
        }
        let view = ClusterQueryable::new(Arc::clone(&self.peers), tenant, partial, self.runtime.clone());
        Ok(Arc::new(match (&self.engine, self.peers.config.query_pushdown) {
            (Some(engine), true) => view.with_pushdown(Arc::clone(engine)),
            _ => view,
        }))
    }

    fn view(&self, tenant: &str, partial: bool) -> Result<Arc<dyn Queryable>, ShardError> {
        Ok(self.cluster_view(tenant, partial)? as Arc<dyn Queryable>)
    }
}

impl Frontend for ClusterFrontend {
    fn writer(&self) -> Result<Arc<dyn ShardWriter>, ShardError> {
        if !self.role.writes() {
            return Err(ShardError::bad_data(
                "this process is a querier (tessera querier) and takes no writes; send remote write to a distributor \
                 or gateway",
            ));
        }
        Ok(Arc::clone(&self.writer) as Arc<dyn ShardWriter>)
    }

    fn queryable(&self, tenant: &str, partial: Option<bool>) -> Result<Arc<dyn Queryable>, ShardError> {
        self.view(tenant, partial.unwrap_or(self.peers.config.allow_partial_response))
    }

    fn metadata(
        &self,
        tenant: &str,
        partial: Option<bool>,
        query: MetadataQuery<'_>,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<BTreeMap<String, Vec<MetadataEntry>>>, ApiError> {
        let view = self.cluster_view(tenant, partial.unwrap_or(self.peers.config.allow_partial_response))?;
        Ok(view.metadata(query.metric, query.limit, query.limit_per_metric, ctl)?)
    }

    fn ready(&self) -> Result<(), String> {
        let need = match self.role {
            FrontendRole::Distributor => self.peers.write_quorum(),
            FrontendRole::Querier => self.peers.read_quorum(),
            FrontendRole::Gateway => self.peers.write_quorum().max(self.peers.read_quorum()),
        };
        let short = self.peers.short_shards(need);
        if short.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = short.iter().take(16).map(|(s, up)| format!("{s} ({up} up)")).collect();
        Err(format!(
            "{} of {} shards have fewer than {need} replicas up: {}{}; see /api/v1/status/cluster",
            short.len(),
            self.peers.placement.shards,
            list.join(", "),
            if short.len() > 16 { ", ..." } else { "" }
        ))
    }

    fn render_metrics(&self, out: &mut String) {
        self.peers.metrics.render(out);
    }
}

/// The query API's data source over the cluster, strict or partial.
struct ClusterData {
    frontend: Arc<ClusterFrontend>,
    partial: bool,
    query_timeout: Duration,
}

impl TenantData for ClusterData {
    fn queryable(&self, tenant: &str) -> Result<Arc<dyn Queryable>, ApiError> {
        Ok(self.frontend.view(tenant, self.partial)?)
    }

    fn cardinality(&self, tenant: &str) -> BoxFuture<'static, Result<Cardinality, ApiError>> {
        let q = self.frontend.cluster_view(tenant, self.partial);
        let deadline = std::time::Instant::now() + self.query_timeout;
        Box::pin(async move {
            let q = q?;
            let (ctl, _cancel_on_drop) = crate::shards::request_controls(deadline);
            // The fan-out blocks on the runtime and the merge is CPU work: off the workers.
            let r = tokio::task::spawn_blocking(move || q.cardinality(&ctl))
                .await
                .map_err(|e| ApiError::internal(format!("cardinality task failed: {e}")))??;
            Ok(Cardinality::Counted(r))
        })
    }

    fn head_summary(&self, _tenant: &str) -> HeadSummary {
        // As `tessera serve`: storage keeps chunk counts and time ranges per shard, not
        // per tenant.
        HeadSummary::default()
    }

    fn total_series(&self) -> Option<u64> {
        self.frontend.peers.total_series()
    }
}

/// Sends each query request to the strict or the partial query API by its
/// `partial_response` parameter (see the module doc).
#[derive(Clone)]
struct PartialSwitch {
    strict: Router,
    partial: Router,
    default: bool,
    max_form_bytes: usize,
}

async fn switch(State(sw): State<PartialSwitch>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let content_type = parts.headers.get(axum::http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let is_form = content_type.is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    let (body, bytes) = if parts.method == axum::http::Method::POST && is_form {
        match read_bounded(&parts.headers, body, &BodyLimit::form(sw.max_form_bytes)).await {
            Ok(b) => (Body::from(b.clone()), b),
            Err(e) => return JsonError(e).into_response(),
        }
    } else {
        (body, bytes::Bytes::new())
    };
    let params = Params::from_request(parts.uri.query(), content_type, &bytes);
    let partial = match http::params::partial_response(&params) {
        Ok(p) => p.unwrap_or(sw.default),
        Err(e) => return JsonError(e).into_response(),
    };
    let mut req = Request::from_parts(parts, body);
    if !bytes.is_empty() {
        req.headers_mut().insert(axum::http::header::CONTENT_LENGTH, bytes.len().into());
    }
    let router = if partial { sw.partial } else { sw.strict };
    match router.oneshot(req).await {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

/// `/api/v1/status/cluster` of a front end.
async fn frontend_status(State((peers, role)): State<(Arc<Peers>, FrontendRole)>) -> Response {
    ApiSuccess::data(peers.status_json(role.name())).into_response()
}

fn query_api(config: &Config, data: Arc<dyn TenantData>) -> QueryApi {
    use http::params::format_duration_ms;
    use http::query_api::{engine_for, ServerInfo};
    let mut flags = vec![("listen".to_string(), config.listen.to_string())];
    flags.extend(config.query.flag_pairs());
    let info = ServerInfo {
        flags,
        storage_retention: format_duration_ms(config.storage.retention_ms),
        ..ServerInfo::default()
    };
    QueryApi::new(Arc::new(engine_for(&config.query)), data, config.query.clone(), info)
}

/// Runs a distributor, querier or gateway until SIGTERM/SIGINT.
pub async fn run_frontend(config: Config, role: FrontendRole) -> anyhow::Result<()> {
    check_cluster_config(&config)?;
    let peers = Arc::new(Peers::new(&config.cluster)?);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let addr = listener.local_addr().context("listener has no local address")?;
    println!("listening on {addr}");
    tracing::info!(%addr, role = role.name(), ingesters = peers.peers.len(), "tessera cluster front end serving HTTP");

    let engine = Arc::new(crate::http::query_api::engine_for(&config.query));
    let frontend = Arc::new(ClusterFrontend::new(role, Arc::clone(&peers)).with_engine(engine));
    let state: AppState = Arc::new(ServerState::new(config));
    state.set_remote(Arc::clone(&frontend) as Arc<dyn Frontend>);
    let shutdown = CancellationToken::new();
    tokio::spawn(Arc::clone(&peers).health_loop(shutdown.clone()));
    tokio::spawn(signal_watch(shutdown.clone()));

    let status =
        Router::new().route("/api/v1/status/cluster", get(frontend_status)).with_state((Arc::clone(&peers), role));
    let mut app = http::router(Arc::clone(&state), None).merge(status);
    if role.reads() {
        let cfg = &state.config;
        let data = |partial| -> Arc<dyn TenantData> {
            Arc::new(ClusterData { frontend: Arc::clone(&frontend), partial, query_timeout: cfg.query.timeout() })
        };
        let sw = PartialSwitch {
            strict: http::query_api::routes(query_api(cfg, data(false))),
            partial: http::query_api::routes(query_api(cfg, data(true))),
            default: cfg.cluster.allow_partial_response,
            max_form_bytes: cfg.query.max_form_bytes(),
        };
        app = app.fallback_service(Router::new().fallback(switch).with_state(sw));
    }
    let http_cfg = state.config.http.clone();
    let timeout_secs = state.config.shutdown_timeout_secs;
    let serve =
        http::connections::serve(listener, app, http_cfg, Arc::clone(&state.metrics.connections), shutdown.clone());
    let serve_task = tokio::spawn(serve);
    shutdown.cancelled().await;
    state.shutting_down.store(true, Ordering::Relaxed);
    wait_in_flight(serve_task, timeout_secs).await;
    tracing::info!("shutdown complete");
    Ok(())
}

/// Options of `tessera ingester` beyond the config file.
pub struct IngesterOptions {
    /// This ingester's id; must be one of `[cluster]`'s.
    pub id: String,
    /// gRPC listen address; default `0.0.0.0:<port of this ingester's addr>`.
    pub grpc_listen: Option<SocketAddr>,
}

/// Runs an ingester until SIGTERM/SIGINT (see the module doc for the order of events).
pub async fn run_ingester(config: Config, opts: IngesterOptions) -> anyhow::Result<()> {
    check_cluster_config(&config)?;
    let cluster = config.cluster.clone();
    let members = cluster.ingesters();
    let Some(me) = members.iter().position(|e| e.id == opts.id) else {
        let ids: Vec<&str> = members.iter().map(|e| e.id.as_str()).collect();
        anyhow::bail!(
            "ingester id {:?} is not in the cluster's ingesters ({}); pass --id, or set TESSERA_INGESTER_ID or HOSTNAME",
            opts.id,
            ids.join(", ")
        );
    };
    let placement = cluster.placement().map_err(|e| anyhow::anyhow!("cluster: {e}"))?;
    let owned: Vec<ShardId> = placement.shards_of(me).into_iter().map(ShardId).collect();
    let identity = Identity::of(&cluster);
    // Directory creation and the fsynced records: blocking file I/O, off the async workers.
    let (data_dir, shards, id, recorded) = (config.data_dir.clone(), cluster.shards, opts.id.clone(), identity.clone());
    tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("cannot create data directory {}", data_dir.display()))?;
        crate::serve::check_shard_count(&data_dir, shards)?;
        identity::check_data_dir(&data_dir, &recorded, &id)
    })
    .await
    .context("data directory check task failed")??;

    let grpc_addr = match opts.grpc_listen {
        Some(a) => a,
        None => {
            let port = members[me].addr.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok()).unwrap_or(9095);
            SocketAddr::from(([0, 0, 0, 0], port))
        }
    };
    let grpc_listener = tokio::net::TcpListener::bind(grpc_addr)
        .await
        .with_context(|| format!("cannot listen on {grpc_addr} (gRPC)"))?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let addr = listener.local_addr().context("listener has no local address")?;
    let grpc_bound = grpc_listener.local_addr().context("gRPC listener has no local address")?;
    println!("listening on {addr}");
    println!("grpc listening on {grpc_bound}");
    tracing::info!(%addr, grpc = %grpc_bound, id = %opts.id, shards = owned.len(), "tessera ingester starting");

    // `shards` of the process is what it opens: replay progress, /metrics and the
    // storage-call permits (2 x shards by default) count the owned shards.
    let mut config = config;
    config.shards = u32::try_from(owned.len()).unwrap_or(u32::MAX);
    let state: AppState = Arc::new(ServerState::new(config));
    let shutdown = CancellationToken::new();
    tokio::spawn(signal_watch(shutdown.clone()));
    // The repair state exists once the WAL replay is done; `null` until then.
    let book_cell: Arc<std::sync::OnceLock<Arc<HoleBook>>> = Arc::new(std::sync::OnceLock::new());
    let status_data = {
        let (id, identity, owned, cell) = (opts.id.clone(), identity.clone(), owned.clone(), Arc::clone(&book_cell));
        move || {
            let mut data = String::new();
            let mut o = ObjectWriter::new(&mut data);
            o.str("role", "ingester")
                .str("id", &id)
                .raw("cluster", |out| identity_json(out, &identity))
                .raw("shards", |out| {
                    let ids: Vec<String> = owned.iter().map(|s| s.0.to_string()).collect();
                    out.push('[');
                    out.push_str(&ids.join(","));
                    out.push(']');
                })
                .str("grpc_listen", &grpc_bound.to_string())
                .raw("repair", |out| match cell.get() {
                    Some(book) => book.status_json(out),
                    None => out.push_str("null"),
                });
            o.finish();
            data
        }
    };
    let status = Router::new().route(
        "/api/v1/status/cluster",
        get(move || {
            let data = status_data();
            async move { ApiSuccess::data(data).into_response() }
        }),
    );
    let app = http::router(Arc::clone(&state), None).merge(status);
    let serve = http::connections::serve(
        listener,
        app,
        state.config.http.clone(),
        Arc::clone(&state.metrics.connections),
        shutdown.clone(),
    );
    let serve_task = tokio::spawn(serve);

    // WAL replay of the owned shards, off the runtime.
    let st = Arc::clone(&state);
    let ids = owned.clone();
    let total = cluster.shards;
    let started = std::time::Instant::now();
    let opened = tokio::task::spawn_blocking(move || {
        let cfg = &st.config;
        Shards::open_ids(&cfg.data_dir, total, &ids, &cfg.storage, cfg.blocking_permits(), &|i, engine| {
            st.metrics.shards_replayed.fetch_add(1, Ordering::Relaxed);
            let r = engine.replay_report();
            tracing::info!(shard = i, records = r.records, samples = r.samples, "WAL replay of shard done");
        })
    });
    let shards = tokio::select! {
        r = opened => Arc::new(r.context("shard open task")?.context("opening shards")?),
        _ = shutdown.cancelled() => anyhow::bail!("stopped during WAL replay"),
    };
    tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, "WAL replay complete");

    // Holes: what each shard may have missed while this ingester was down (holes.rs).
    let (dir, ids, sh) = (state.config.data_dir.clone(), owned.clone(), Arc::clone(&shards));
    let window = state.config.storage.out_of_order_window_ms;
    let refuse = cluster.repair_block_writes_ms > 0;
    let book = tokio::task::spawn_blocking(move || HoleBook::open(&dir, &ids, &sh, window, refuse))
        .await
        .context("repair state task")?
        .context("reading the repair state")?;
    let book = Arc::new(book);
    for (shard, _) in book.pending() {
        let hs: Vec<String> = book.holes(shard).iter().map(ToString::to_string).collect();
        tracing::info!(shard = shard.0, holes = %hs.join(", "), "shard may be missing writes: repairing from its peers");
    }
    let _ = book_cell.set(Arc::clone(&book));
    let metrics_book = Arc::clone(&book);
    let _ = state.metrics.extra.set(Box::new(move |out: &mut String| metrics_book.render_metrics(out)));

    let max = state.config.cluster.grpc_max_message_bytes;
    let service = pb_server(
        IngesterService::new(opts.id.clone(), identity, Arc::clone(&shards))
            .with_holes(Arc::clone(&book))
            .with_metadata(Arc::clone(&state.metadata))
            .with_query_limits(&state.config.query)
            .with_max_message_bytes(max),
        max,
    );
    let grpc_stop = shutdown.clone();
    let grpc = tokio::spawn(
        tonic::transport::Server::builder()
            .tcp_nodelay(true)
            .add_service(service)
            .serve_with_incoming_shutdown(tonic::transport::server::TcpIncoming::from(grpc_listener), async move {
                grpc_stop.cancelled().await
            }),
    );
    // Serving gRPC now (the listener was bound before the replay): ready.
    state.set_shards(Arc::clone(&shards));
    tracing::info!("ready: serving gRPC and HTTP");
    let repairer = repair::Repairer {
        me,
        peers: Arc::new(Peers::new(&cluster)?),
        shards: Arc::clone(&shards),
        book: Arc::clone(&book),
        metadata: Arc::clone(&state.metadata),
        window_ms: window,
        block_writes: Duration::from_millis(cluster.repair_block_writes_ms),
        grace: Duration::from_millis(cluster.push_timeout_ms),
    };
    tokio::spawn(repair::run(repairer, shutdown.clone()));

    shutdown.cancelled().await;
    state.shutting_down.store(true, Ordering::Relaxed);
    let timeout_secs = state.config.shutdown_timeout_secs;
    wait_in_flight(serve_task, timeout_secs).await;
    match tokio::time::timeout(Duration::from_secs(timeout_secs.max(1)), grpc).await {
        Ok(Ok(Err(e))) => tracing::warn!(error = %e, "gRPC server stopped with an error"),
        Err(_) => tracing::warn!("in-flight gRPC calls did not finish in time; flushing anyway"),
        _ => {}
    }
    tracing::info!("flushing shards");
    let (flushed, saved) = tokio::task::spawn_blocking(move || {
        let flushed = shards.flush_for_exit();
        // Records each shard's newest sample: the next start's hole begins there.
        (flushed, book.save(&shards))
    })
    .await
    .context("flush task")?;
    if let Err(e) = saved {
        tracing::error!(error = %e, "cannot save the repair state file");
    }
    flushed.context("flushing shards on shutdown")?;
    tracing::info!("shutdown complete");
    Ok(())
}

fn pb_server(
    svc: IngesterService,
    max: usize,
) -> tessera_proto::ingester::ingester_server::IngesterServer<IngesterService> {
    tessera_proto::ingester::ingester_server::IngesterServer::new(svc)
        // Whatever `[cluster] grpc_compression` says: front ends may compress pushes.
        .accept_compressed(tonic::codec::CompressionEncoding::Gzip)
        .max_decoding_message_size(max)
        .max_encoding_message_size(max)
}

/// What every cluster role checks at start: the config, and its `[cluster]` table (the
/// same checks `tessera check-config --role ROLE` runs, in `check_config.rs`).
pub fn check_cluster_config(config: &Config) -> anyhow::Result<()> {
    config.validate()?;
    config.cluster.validate().map_err(|e| anyhow::anyhow!("{e}"))
}

async fn wait_in_flight(serve_task: tokio::task::JoinHandle<Result<(), std::io::Error>>, timeout_secs: u64) {
    tracing::info!("shutting down: no new connections; waiting for in-flight requests");
    if timeout_secs == 0 {
        let _ = serve_task.await;
    } else if tokio::time::timeout(Duration::from_secs(timeout_secs), serve_task).await.is_err() {
        tracing::warn!(timeout_secs, "in-flight requests did not finish in time");
    }
}

/// Cancels `shutdown` on SIGTERM or SIGINT.
async fn signal_watch(shutdown: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::error!("cannot install signal handlers; stop the process with SIGKILL");
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("received SIGTERM"),
        _ = int.recv() => tracing::info!("received SIGINT"),
        _ = shutdown.cancelled() => return,
    }
    shutdown.cancel();
}

/// The data directory flag's effect, for `main.rs`: `--data-dir` beats the config.
pub fn apply_overrides(config: &mut Config, listen: Option<SocketAddr>, data_dir: Option<PathBuf>) {
    if let Some(v) = listen {
        config.listen = v;
    }
    if let Some(v) = data_dir {
        config.data_dir = v;
    }
}

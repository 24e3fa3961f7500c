//! `tessera serve`: start-up, readiness and graceful shutdown of the all-in-one node.
//!
//! Order of events:
//! 1. Validate the config; create the data directory; resolve the shard count (the
//!    configured one, else the recorded one, else one for this machine) and check that
//!    it matches the recorded one (the shard hash depends on it).
//! 2. Bind the listener and start serving at once, so `/-/healthy` answers and
//!    `/-/ready` says "replay in progress" while the shards open.
//! 3. Open every shard (WAL replay) on a blocking thread, logging progress; then
//!    publish them: `/-/ready` turns 200 and writes are accepted.
//! 4. On SIGTERM/SIGINT: stop accepting connections, let in-flight requests finish
//!    (every acknowledged write is already durable), flush every shard, exit 0.
//!    A shard that fails to open ends the process with an error instead.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::http::{self, AppState, ServerState};
use crate::shards::Shards;

/// Name of the file in the data directory that records the shard count.
const CLUSTER_FILE: &str = "cluster.toml";

/// Runs the server until a signal (or a fatal start-up error).
pub async fn run(mut config: Config) -> anyhow::Result<()> {
    config.validate()?;
    // Directory creation and the fsynced record: blocking file I/O, off the async workers.
    let (data_dir, configured) = (config.data_dir.clone(), config.shards);
    config.shards = tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("cannot create data directory {}", data_dir.display()))?;
        let shards = crate::config::resolve_shards(configured, recorded_shard_count(&data_dir)?);
        check_shard_count(&data_dir, shards)?;
        anyhow::Ok(shards)
    })
    .await
    .context("data directory check task failed")??;

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let addr = listener.local_addr().context("listener has no local address")?;
    // Printed on stdout (not only logged) so scripts and tests that pass port 0 can
    // read the chosen port.
    println!("listening on {addr}");
    tracing::info!(%addr, data_dir = %config.data_dir.display(), shards = config.shards, "tessera serving HTTP");

    let state: AppState = Arc::new(ServerState::new(config));
    let shutdown = CancellationToken::new();
    let fatal = Arc::new(parking_lot::Mutex::new(None::<anyhow::Error>));

    tokio::spawn(open_shards(Arc::clone(&state), shutdown.clone(), Arc::clone(&fatal)));
    tokio::spawn(signal_watch(shutdown.clone()));
    tokio::spawn(purge_loop(Arc::clone(&state), shutdown.clone()));
    tokio::spawn(retention_loop(Arc::clone(&state), shutdown.clone()));

    let app = http::router(Arc::clone(&state), Some(query_api(&state)));
    let mut http_cfg = state.config.http.clone();
    http_cfg.max_connections = connection_cap(http_cfg.max_connections);
    let serve =
        http::connections::serve(listener, app, http_cfg, Arc::clone(&state.metrics.connections), shutdown.clone());
    let timeout_secs = state.config.shutdown_timeout_secs;
    let mut serve_task = tokio::spawn(serve);
    // Normally a signal (or a failed shard open) cancels `shutdown`; if the HTTP server
    // itself stops first (an accept error), that is fatal and must not hang here.
    // `biased`: once shutdown is cancelled the server task finishes too, and both
    // branches may be ready at once; the cancellation must win that tie.
    tokio::select! {
        biased;
        _ = shutdown.cancelled() => {}
        r = &mut serve_task => {
            shutdown.cancel();
            r.context("HTTP server task")?.context("HTTP server stopped")?;
            anyhow::bail!("HTTP server stopped unexpectedly");
        }
    }
    state.shutting_down.store(true, Ordering::Relaxed);
    tracing::info!("shutting down: no new connections; waiting for in-flight requests");
    if timeout_secs == 0 {
        serve_task.await.context("HTTP server task")??;
    } else if tokio::time::timeout(Duration::from_secs(timeout_secs), serve_task).await.is_err() {
        tracing::warn!(timeout_secs, "in-flight requests did not finish in time; flushing anyway");
    }

    if let Some(shards) = state.shards_if_ready() {
        tracing::info!("flushing shards");
        tokio::task::spawn_blocking(move || shards.flush_for_exit())
            .await
            .context("flush task")?
            .context("flushing shards on shutdown")?;
    }
    if let Some(e) = fatal.lock().take() {
        return Err(e);
    }
    tracing::info!("shutdown complete");
    Ok(())
}

/// Raises the open-file soft limit to the hard limit (as Go's runtime does for
/// Prometheus) and returns the connection cap that fits in it: at most half the
/// descriptors go to client connections, the rest stay for RocksDB and the WAL.
fn connection_cap(configured: usize) -> usize {
    let limit = match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read or raise the open-file limit");
            return configured;
        }
    };
    let fit = usize::try_from(limit / 2).unwrap_or(usize::MAX).max(1);
    if fit < configured {
        tracing::warn!(
            configured,
            effective = fit,
            open_file_limit = limit,
            "http.max_connections lowered to half the open-file limit; raise `ulimit -n` to allow more"
        );
        return fit;
    }
    configured
}

/// The PromQL query API over the local shards, with the configured limits.
fn query_api(state: &AppState) -> http::query_api::QueryApi {
    use http::params::format_duration_ms;
    use http::query_api::{engine_for, QueryApi, ServerInfo};
    let cfg = &state.config;
    let mut flags = vec![
        ("listen".to_string(), cfg.listen.to_string()),
        ("data_dir".to_string(), cfg.data_dir.display().to_string()),
        ("shards".to_string(), cfg.shards.to_string()),
        ("storage.retention_ms".to_string(), cfg.storage.retention_ms.to_string()),
    ];
    flags.extend(cfg.query.flag_pairs());
    let info =
        ServerInfo { flags, storage_retention: format_duration_ms(cfg.storage.retention_ms), ..ServerInfo::default() };
    QueryApi::new(
        Arc::new(engine_for(&cfg.query)),
        Arc::new(http::tenant_data::ShardsData::new(Arc::clone(state))),
        cfg.query.clone(),
        info,
    )
}

/// Opens all shards on a blocking thread, logging replay progress, then publishes them.
async fn open_shards(
    state: AppState,
    shutdown: CancellationToken,
    fatal: Arc<parking_lot::Mutex<Option<anyhow::Error>>>,
) {
    let st = Arc::clone(&state);
    let started = std::time::Instant::now();
    let res = tokio::task::spawn_blocking(move || {
        let cfg = &st.config;
        let total = cfg.shards as usize;
        tracing::info!(shards = total, "WAL replay starting");
        Shards::open(&cfg.data_dir, total, &cfg.storage, cfg.blocking_permits(), &|i, engine| {
            let done = st.metrics.shards_replayed.fetch_add(1, Ordering::Relaxed) + 1;
            let r = engine.replay_report();
            tracing::info!(
                shard = i,
                progress = %format!("{done}/{total}"),
                records = r.records,
                samples = r.samples,
                series_created = r.series_created,
                "WAL replay of shard done"
            );
            if let Some(t) = &r.torn_tail {
                tracing::warn!(shard = i, torn_tail = ?t, "WAL ended in a torn or corrupt record; cut at the last good record");
            }
        })
    })
    .await;
    match res {
        Ok(Ok(shards)) => {
            tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, "WAL replay complete; ready");
            state.set_shards(Arc::new(shards));
        }
        Ok(Err(e)) => {
            tracing::error!(error = %e, "opening shards failed");
            *fatal.lock() = Some(anyhow::Error::new(e).context("opening shards"));
            shutdown.cancel();
        }
        Err(e) => {
            *fatal.lock() = Some(anyhow::anyhow!("shard open task failed: {e}"));
            shutdown.cancel();
        }
    }
}

/// Cancels `shutdown` on SIGTERM or SIGINT.
async fn signal_watch(shutdown: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::error!("cannot install signal handlers; stop the server with SIGKILL");
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("received SIGTERM"),
        _ = int.recv() => tracing::info!("received SIGINT"),
        _ = shutdown.cancelled() => return,
    }
    shutdown.cancel();
}

/// Forgets idle series of the active-series limiter once a minute.
async fn purge_loop(state: AppState, shutdown: CancellationToken) {
    if !state.active_series.enabled() {
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    loop {
        tokio::select! {
            _ = tick.tick() => state.active_series.purge(),
            _ = shutdown.cancelled() => return,
        }
    }
}

/// Applies retention every 10 minutes. Storage also applies it when a WAL segment fills
/// and on flush, but a shard that receives little data would otherwise keep expired
/// days indefinitely.
async fn retention_loop(state: AppState, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(600));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.cancelled() => return,
        }
        let Some(shards) = state.shards_if_ready() else { continue };
        // RocksDB range deletes and metadata writes: blocking work, off the runtime.
        if let Err(e) = tokio::task::spawn_blocking(move || shards.enforce_retention_all()).await {
            tracing::error!(error = %e, "retention task failed");
        }
    }
}

/// The shard count recorded in `data_dir` (`None` if the directory has none yet).
pub(crate) fn recorded_shard_count(data_dir: &Path) -> anyhow::Result<Option<u32>> {
    let path = data_dir.join(CLUSTER_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            #[derive(serde::Deserialize)]
            struct Cluster {
                shards: u32,
            }
            let c: Cluster = toml::from_str(&text).with_context(|| format!("cannot parse {}", path.display()))?;
            Ok(Some(c.shards))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow::Error::new(e).context(format!("cannot read {}", path.display()))),
    }
}

/// Records the shard count on first start and refuses a different one later: every
/// stored series lives in the shard `series_hash mod S` picked when it was written.
/// Writes nothing when the directory already records a count.
pub(crate) fn check_shard_count(data_dir: &Path, shards: u32) -> anyhow::Result<()> {
    let path = data_dir.join(CLUSTER_FILE);
    match recorded_shard_count(data_dir)? {
        Some(recorded) => {
            if recorded != shards {
                anyhow::bail!(
                    "data directory {} was created with {recorded} shards but the configuration says {shards}; \
                     the shard count cannot change (series are placed by hash mod shards)",
                    data_dir.display(),
                );
            }
            Ok(())
        }
        None => {
            let text = format!(
                "# Written by tessera on first start. Do not edit: series are placed in\n\
                 # shard xxh3_64(tenant, labels) mod shards (server/src/shards/hash.rs).\n\
                 shards = {shards}\nhash = \"xxh3_64-v1\"\n"
            );
            // Durable: the shard count must survive a crash right after the first start,
            // or a restart could pick another one.
            crate::durable_file::write(&path, &text)
        }
    }
}

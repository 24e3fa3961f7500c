//! The HTTP accept loop: admits connections under a cap, closes the ones that hold a
//! slot without using it, and drains the rest on shutdown. It replaces `axum::serve`,
//! which has no connection cap, no header-read timeout and no idle timeout: with it,
//! about a thousand half-open connections made the server unreachable.
//!
//! Rules, in the order they apply:
//! - **Cap.** At most `http.max_connections` connections are open. A new connection
//!   over the cap evicts the connection that has been idle longest (no request in
//!   flight: waiting for headers or parked between keep-alive requests), as nginx
//!   drains reusable connections when it runs out; if every connection is busy, the new
//!   one is closed at once. So a flood of half-open connections cannot lock out a
//!   probe or a remote-write sender: each newcomer takes an idle slot.
//! - **Header read timeout.** hyper closes an HTTP/1 connection that has not sent a
//!   complete request head within `http.header_read_timeout_secs` (slowloris).
//! - **Idle timeout.** A sweep once a second closes connections that have had no
//!   request in flight for `http.idle_timeout_secs`; this covers HTTP/2 too.
//! - **Descriptor exhaustion.** When `accept` fails (EMFILE), the idlest connection
//!   is evicted so the next accept can succeed, instead of spinning.
//! - **Shutdown.** No new connections; each open connection finishes its in-flight
//!   requests and closes (hyper's graceful shutdown); [`serve`] returns when all are
//!   closed. The caller bounds that wait with `shutdown_timeout_secs`.
//!
//! A request counts as in flight from the moment its head is parsed until its response
//! body has been written out (the guard travels inside the body).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::Router;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::config::HttpConfig;

/// Connection counters exported on `/metrics`.
#[derive(Default)]
pub struct ConnectionStats {
    /// Connections open now.
    pub open: AtomicU64,
    /// Connections accepted since start.
    pub accepted: AtomicU64,
    /// Idle connections closed to make room for a new one (cap reached or no descriptors).
    pub evicted: AtomicU64,
    /// New connections closed at once because every open connection was busy.
    pub refused: AtomicU64,
    /// Connections closed by the idle timeout.
    pub idle_closed: AtomicU64,
}

/// One open connection as the registry sees it.
struct ConnState {
    /// Requests whose response body has not been fully written yet.
    in_flight: AtomicUsize,
    /// Milliseconds since the registry's epoch of the last accept, request start or
    /// response end on this connection.
    last_active_ms: AtomicU64,
    /// Cancelled to close the connection at once (eviction, idle timeout).
    kill: CancellationToken,
}

/// The open connections, for the cap, eviction and the idle sweep.
struct Registry {
    epoch: Instant,
    conns: Mutex<HashMap<u64, Arc<ConnState>>>,
    /// Notified when a connection closes (the shutdown drain waits on it).
    closed: tokio::sync::Notify,
}

impl Registry {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn len(&self) -> usize {
        self.conns.lock().len()
    }

    /// Closes the connection that has been idle longest; false if none is idle.
    fn evict_idlest(&self) -> bool {
        let conns = self.conns.lock();
        let victim = conns
            .values()
            .filter(|c| c.in_flight.load(Ordering::Acquire) == 0 && !c.kill.is_cancelled())
            .min_by_key(|c| c.last_active_ms.load(Ordering::Relaxed));
        match victim {
            Some(c) => {
                c.kill.cancel();
                true
            }
            None => false,
        }
    }

    /// Closes every connection idle for longer than `idle`; returns how many.
    fn close_idle(&self, idle: Duration) -> u64 {
        let now = self.now_ms();
        let idle_ms = idle.as_millis() as u64;
        let mut n = 0;
        for c in self.conns.lock().values() {
            if c.in_flight.load(Ordering::Acquire) == 0
                && now.saturating_sub(c.last_active_ms.load(Ordering::Relaxed)) > idle_ms
                && !c.kill.is_cancelled()
            {
                c.kill.cancel();
                n += 1;
            }
        }
        n
    }
}

/// Marks one request in flight on a connection until dropped.
struct InFlight {
    conn: Arc<ConnState>,
    registry: Arc<Registry>,
}

impl InFlight {
    fn enter(conn: &Arc<ConnState>, registry: &Arc<Registry>) -> Self {
        conn.in_flight.fetch_add(1, Ordering::AcqRel);
        conn.last_active_ms.store(registry.now_ms(), Ordering::Relaxed);
        InFlight { conn: Arc::clone(conn), registry: Arc::clone(registry) }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.conn.last_active_ms.store(self.registry.now_ms(), Ordering::Relaxed);
        self.conn.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Serves `app` on `listener` until `shutdown` is cancelled and every connection has
/// drained. See the module doc for the rules.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    cfg: HttpConfig,
    stats: Arc<ConnectionStats>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let registry = Arc::new(Registry {
        epoch: Instant::now(),
        conns: Mutex::new(HashMap::new()),
        closed: tokio::sync::Notify::new(),
    });
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(
        (cfg.header_read_timeout_secs > 0).then(|| Duration::from_secs(cfg.header_read_timeout_secs)),
    );
    builder.http2().timer(TokioTimer::new()).max_concurrent_streams(cfg.max_concurrent_streams);
    let builder = Arc::new(builder);

    if cfg.idle_timeout_secs > 0 {
        tokio::spawn(idle_sweep(
            Arc::clone(&registry),
            Duration::from_secs(cfg.idle_timeout_secs),
            Arc::clone(&stats),
            shutdown.clone(),
        ));
    }

    let mut next_id: u64 = 0;
    loop {
        let accepted = tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            r = listener.accept() => r,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            Err(e) => {
                // Out of descriptors (EMFILE/ENFILE) or a connection reset before accept.
                // Free a descriptor by closing the idlest connection, then back off a
                // little so an error that persists does not spin the loop.
                if registry.evict_idlest() {
                    stats.evicted.fetch_add(1, Ordering::Relaxed);
                }
                tracing::warn!(error = %e, open = registry.len(), "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        stats.accepted.fetch_add(1, Ordering::Relaxed);
        if registry.len() >= cfg.max_connections {
            if registry.evict_idlest() {
                stats.evicted.fetch_add(1, Ordering::Relaxed);
            } else {
                // Every connection is busy with a request: refuse this one (close it).
                stats.refused.fetch_add(1, Ordering::Relaxed);
                drop(stream);
                continue;
            }
        }
        let _ = stream.set_nodelay(true);
        next_id += 1;
        let id = next_id;
        let conn = Arc::new(ConnState {
            in_flight: AtomicUsize::new(0),
            last_active_ms: AtomicU64::new(registry.now_ms()),
            kill: CancellationToken::new(),
        });
        registry.conns.lock().insert(id, Arc::clone(&conn));
        stats.open.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(serve_connection(
            TokioIo::new(stream),
            app.clone(),
            Arc::clone(&builder),
            conn,
            id,
            Arc::clone(&registry),
            Arc::clone(&stats),
            shutdown.clone(),
        ));
    }

    // Drain: each connection task saw `shutdown` and started hyper's graceful shutdown.
    loop {
        let notified = registry.closed.notified();
        if registry.len() == 0 {
            return Ok(());
        }
        notified.await;
    }
}

/// Runs one connection to completion, eviction or the end of its graceful shutdown.
#[allow(clippy::too_many_arguments)]
async fn serve_connection(
    io: TokioIo<tokio::net::TcpStream>,
    app: Router,
    builder: Arc<Builder<TokioExecutor>>,
    conn: Arc<ConnState>,
    id: u64,
    registry: Arc<Registry>,
    stats: Arc<ConnectionStats>,
    shutdown: CancellationToken,
) {
    let (c, r) = (Arc::clone(&conn), Arc::clone(&registry));
    let service = tower::service_fn(move |req: hyper::Request<Incoming>| {
        let guard = InFlight::enter(&c, &r);
        let app = app.clone();
        async move {
            let resp = app.oneshot(req.map(Body::new)).await.unwrap_or_else(|e: Infallible| match e {});
            // The guard lives in the body: the request stays in flight until hyper has
            // written the whole response (or dropped it on a closed connection).
            Ok::<_, Infallible>(resp.map(|body| {
                Body::new(body.map_frame(move |frame| {
                    let _ = &guard;
                    frame
                }))
            }))
        }
    });
    let hyper_service = TowerToHyperService::new(service);
    let served = builder.serve_connection_with_upgrades(io, hyper_service);
    tokio::pin!(served);
    let mut draining = false;
    loop {
        tokio::select! {
            r = served.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                break;
            }
            // Dropping `served` closes the socket at once.
            _ = conn.kill.cancelled() => break,
            _ = shutdown.cancelled(), if !draining => {
                draining = true;
                served.as_mut().graceful_shutdown();
            }
        }
    }
    registry.conns.lock().remove(&id);
    stats.open.fetch_sub(1, Ordering::Relaxed);
    registry.closed.notify_waiters();
}

/// Once a second, closes connections idle for longer than `idle`.
async fn idle_sweep(registry: Arc<Registry>, idle: Duration, stats: Arc<ConnectionStats>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.cancelled() => return,
        }
        let n = registry.close_idle(idle);
        stats.idle_closed.fetch_add(n, Ordering::Relaxed);
    }
}

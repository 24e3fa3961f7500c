//! `/-/healthy` (the process is up), `/-/ready` (every shard has replayed its WAL and
//! the server is not shutting down) and `/metrics` (self-monitoring).

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use super::AppState;

pub async fn healthy() -> Response {
    (StatusCode::OK, "Tessera is Healthy.\n").into_response()
}

pub async fn ready(State(st): State<AppState>) -> Response {
    if st.shutting_down.load(std::sync::atomic::Ordering::Relaxed) {
        return (StatusCode::SERVICE_UNAVAILABLE, "Tessera is shutting down.\n").into_response();
    }
    if let Some(remote) = st.remote() {
        return match remote.ready() {
            Ok(()) => (StatusCode::OK, "Tessera is Ready.\n").into_response(),
            Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("Tessera is not ready: {why}\n")).into_response(),
        };
    }
    if st.shards_if_ready().is_some() {
        (StatusCode::OK, "Tessera is Ready.\n").into_response()
    } else {
        let done = st.metrics.shards_replayed.load(std::sync::atomic::Ordering::Relaxed);
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("Tessera is not ready: WAL replay in progress ({done}/{} shards done).\n", st.config.shards),
        )
            .into_response()
    }
}

pub async fn metrics(State(st): State<AppState>) -> Response {
    let shards = st.shards_if_ready();
    // Engine stats read RocksDB properties: cheap, but still a call into the C++
    // library under its locks, so it runs on the blocking pool.
    let text = tokio::task::spawn_blocking(move || {
        let mut text = st.metrics.render(shards.as_deref(), st.config.shards as usize);
        if let Some(remote) = st.remote() {
            remote.render_metrics(&mut text);
        }
        text
    })
    .await;
    match text {
        Ok(text) => ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("rendering metrics failed: {e}\n")).into_response(),
    }
}

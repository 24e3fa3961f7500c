//! The remote-write sender: one task per shard, each sending its batches in order
//! over a keep-alive connection, retrying what Prometheus would retry.
//!
//! Concurrency model: the producer (a feeder task or the generator thread) hands
//! batches to per-shard bounded channels in generation order. Because a full channel
//! blocks the producer, no shard can run more than a few batches ahead of the
//! slowest one; Prometheus needs that, since it rejects samples more than ~1 h older
//! than its newest ("out of bounds").

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::encode::{Batch, Protocol};
use crate::latency::{Latencies, Percentiles};

/// Prometheus' remote-write defaults: min_backoff 30 ms, max_backoff 5 s.
const MIN_BACKOFF: Duration = Duration::from_millis(30);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// A `Retry-After` longer than this is capped: a benchmark should not sleep for hours.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// How many error texts a report keeps, of final failures and of retried attempts each.
const KEPT_ERRORS: usize = 5;

/// Appends `e` to `kept` unless it already holds [`KEPT_ERRORS`].
fn keep_error(kept: &mut Vec<String>, e: String) {
    if kept.len() < KEPT_ERRORS {
        kept.push(e);
    }
}

#[derive(Debug, Clone)]
pub struct PushConfig {
    pub url: String,
    pub protocol: Protocol,
    pub tenant: Option<String>,
    /// Retries of one batch (5xx, 429, connection errors) before it counts as failed.
    pub max_retries: u32,
    pub timeout: Duration,
}

/// What one shard saw; merged into a [`PushReport`].
#[derive(Debug, Default)]
struct ShardResult {
    samples_ok: u64,
    samples_failed: u64,
    requests: u64,
    retries: u64,
    bytes: u64,
    raw_bytes: u64,
    written_header: u64,
    status: BTreeMap<String, u64>,
    errors: Vec<String>,
    retried_errors: Vec<String>,
    latency: Latencies,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PushReport {
    pub url: String,
    pub protocol: String,
    pub shards: usize,
    pub samples_ok: u64,
    pub samples_failed: u64,
    pub requests: u64,
    pub retries: u64,
    /// Compressed bytes sent (successful and failed attempts' bodies, once each).
    pub bytes_sent: u64,
    pub raw_protobuf_bytes: u64,
    /// Sum of `X-Prometheus-Remote-Write-Samples-Written` (2.0 receivers only).
    pub samples_written_header: u64,
    /// Final outcome of each request by HTTP status (or "conn-error"/"timeout"),
    /// plus "retried-<status>" for attempts that were retried.
    pub status: BTreeMap<String, u64>,
    /// The first few error responses, verbatim (truncated), to see why.
    pub first_errors: Vec<String>,
    /// The first few errors of attempts that were retried (and may then have succeeded).
    #[serde(default)]
    pub first_retried_errors: Vec<String>,
    pub latency: Percentiles,
    pub elapsed_s: f64,
    pub samples_per_s: f64,
}

/// Sends every batch arriving on `shards` (one receiver per shard) and reports.
pub async fn run(cfg: PushConfig, shards: Vec<mpsc::Receiver<Batch>>) -> anyhow::Result<PushReport> {
    let n = shards.len();
    let client =
        reqwest::Client::builder().pool_max_idle_per_host(n.max(1)).tcp_nodelay(true).timeout(cfg.timeout).build()?;
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(n);
    for rx in shards {
        tasks.push(tokio::spawn(shard_loop(client.clone(), cfg.clone(), rx)));
    }
    let mut total = ShardResult::default();
    for t in tasks {
        let r = t.await?;
        total.samples_ok += r.samples_ok;
        total.samples_failed += r.samples_failed;
        total.requests += r.requests;
        total.retries += r.retries;
        total.bytes += r.bytes;
        total.raw_bytes += r.raw_bytes;
        total.written_header += r.written_header;
        for (k, v) in r.status {
            *total.status.entry(k).or_default() += v;
        }
        for e in r.errors {
            keep_error(&mut total.errors, e);
        }
        for e in r.retried_errors {
            keep_error(&mut total.retried_errors, e);
        }
        total.latency.merge(r.latency);
    }
    let elapsed = start.elapsed().as_secs_f64();
    Ok(PushReport {
        url: cfg.url,
        protocol: format!("{:?}", cfg.protocol),
        shards: n,
        samples_ok: total.samples_ok,
        samples_failed: total.samples_failed,
        requests: total.requests,
        retries: total.retries,
        bytes_sent: total.bytes,
        raw_protobuf_bytes: total.raw_bytes,
        samples_written_header: total.written_header,
        status: total.status,
        first_errors: total.errors,
        first_retried_errors: total.retried_errors,
        latency: total.latency.summary(),
        elapsed_s: elapsed,
        samples_per_s: if elapsed > 0.0 { total.samples_ok as f64 / elapsed } else { 0.0 },
    })
}

enum Outcome {
    Ok {
        written: u64,
    },
    /// Worth retrying (5xx, 429, network); `after` is the server's Retry-After.
    Retry {
        label: String,
        after: Option<Duration>,
        detail: String,
    },
    /// Permanent (4xx other than 429): Prometheus drops such a batch, and so do we.
    Fail {
        label: String,
        detail: String,
    },
}

async fn send_once(client: &reqwest::Client, cfg: &PushConfig, batch: &Batch) -> Outcome {
    let mut req = client
        .post(&cfg.url)
        .header("Content-Encoding", "snappy")
        .header("Content-Type", cfg.protocol.content_type())
        .header("X-Prometheus-Remote-Write-Version", cfg.protocol.version_header())
        .header("User-Agent", concat!("tessera-bench/", env!("CARGO_PKG_VERSION")))
        .body(batch.body.clone());
    if let Some(t) = &cfg.tenant {
        req = req.header("X-Scope-OrgID", t);
    }
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) => {
            let label = if e.is_timeout() { "timeout" } else { "conn-error" };
            // reqwest's message names only the URL; `{:#}` appends its causes.
            let detail = format!("{:#}", anyhow::Error::new(e));
            return Outcome::Retry { label: label.into(), after: None, detail };
        }
    };
    let status = resp.status();
    let written = resp
        .headers()
        .get("X-Prometheus-Remote-Write-Samples-Written")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    let retry_after = resp
        .headers()
        .get("Retry-After")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|s| Duration::from_secs(s).min(MAX_RETRY_AFTER));
    // Read the body to the end either way, so the connection can be reused.
    let body = resp.bytes().await.unwrap_or_default();
    if status.is_success() {
        return Outcome::Ok { written };
    }
    let detail = format!("{}: {}", status.as_u16(), String::from_utf8_lossy(&body[..body.len().min(300)]).trim());
    if status.is_server_error() || status.as_u16() == 429 {
        Outcome::Retry { label: status.as_u16().to_string(), after: retry_after, detail }
    } else {
        Outcome::Fail { label: status.as_u16().to_string(), detail }
    }
}

async fn shard_loop(client: reqwest::Client, cfg: PushConfig, mut rx: mpsc::Receiver<Batch>) -> ShardResult {
    let mut r = ShardResult::default();
    while let Some(batch) = rx.recv().await {
        r.bytes += batch.body.len() as u64;
        r.raw_bytes += batch.raw_len as u64;
        let mut backoff = MIN_BACKOFF;
        let mut attempt = 0;
        loop {
            let t = Instant::now();
            let outcome = send_once(&client, &cfg, &batch).await;
            r.latency.record(t.elapsed());
            r.requests += 1;
            match outcome {
                Outcome::Ok { written } => {
                    *r.status.entry("2xx".into()).or_default() += 1;
                    r.samples_ok += batch.samples;
                    r.written_header += written;
                    break;
                }
                Outcome::Fail { label, detail } => {
                    *r.status.entry(label).or_default() += 1;
                    r.samples_failed += batch.samples;
                    keep_error(&mut r.errors, detail);
                    break;
                }
                Outcome::Retry { label, after, detail } => {
                    if attempt >= cfg.max_retries {
                        *r.status.entry(label).or_default() += 1;
                        r.samples_failed += batch.samples;
                        keep_error(&mut r.errors, format!("gave up after {attempt} retries: {detail}"));
                        break;
                    }
                    *r.status.entry(format!("retried-{label}")).or_default() += 1;
                    keep_error(&mut r.retried_errors, detail);
                    r.retries += 1;
                    attempt += 1;
                    tokio::time::sleep(after.unwrap_or(backoff)).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// Reads one HTTP/1.1 request (headers, then `Content-Length` bytes of body).
    async fn read_request(conn: &mut tokio::net::TcpStream) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = conn.read(&mut chunk).await.unwrap();
            assert!(n > 0, "client closed before sending a whole request");
            buf.extend_from_slice(&chunk[..n]);
            let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize =
                head.lines().find_map(|l| l.strip_prefix("content-length:")).map_or(0, |v| v.trim().parse().unwrap());
            if buf.len() >= end + 4 + len {
                return;
            }
        }
    }

    /// A receiver that answers 503 to the first request, drops the connection of the
    /// second without answering, and accepts the third: the batch is sent, both
    /// retries are counted by cause, and their error texts are kept.
    #[tokio::test]
    async fn retried_attempts_are_counted_and_their_errors_kept() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/api/v1/write", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            for attempt in 0..3 {
                let (mut conn, _) = listener.accept().await.unwrap();
                read_request(&mut conn).await;
                match attempt {
                    0 => conn
                        .write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 9\r\nConnection: close\r\n\r\nwal busy\n")
                        .await
                        .unwrap(),
                    1 => drop(conn),
                    _ => conn.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n").await.unwrap(),
                }
            }
        });
        let cfg =
            PushConfig { url, protocol: Protocol::V1, tenant: None, max_retries: 3, timeout: Duration::from_secs(10) };
        let (tx, rx) = mpsc::channel(1);
        tx.send(Batch { shard: 0, samples: 7, body: Bytes::from_static(b"x"), raw_len: 1 }).await.unwrap();
        drop(tx);
        let report = run(cfg, vec![rx]).await.unwrap();
        server.await.unwrap();

        assert_eq!((report.samples_ok, report.samples_failed, report.requests, report.retries), (7, 0, 3, 2));
        assert_eq!(report.status.get("2xx"), Some(&1));
        assert_eq!(report.status.get("retried-503"), Some(&1));
        assert_eq!(report.status.get("retried-conn-error"), Some(&1));
        assert!(report.first_errors.is_empty(), "{:?}", report.first_errors);
        let [busy, dropped] = &report.first_retried_errors[..] else { panic!("{:?}", report.first_retried_errors) };
        assert_eq!(busy, "503: wal busy");
        // reqwest's own message only names the URL; the cause follows it.
        assert!(dropped.starts_with("error sending request") && dropped.contains("): "), "{dropped}");
    }
}

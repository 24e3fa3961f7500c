//! Floods of expensive but legal requests from several clients at once: remote
//! reads, index calls and range queries over a server holding many series. While each
//! runs, the server stays reachable (`probe`), because the expensive work runs off
//! the async workers under bounded slots and deadlines.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use tessera_proto::prometheus;

use crate::harness::{now_ms, snappy, ts, write_request, Server};
use crate::probe::probe_during;

/// A server with 5,000 series of 60 samples each (one per minute, the last hour).
fn loaded_server(dir: &std::path::Path) -> Server {
    loaded_server_with(dir, "")
}

/// [`loaded_server`] with extra TOML config.
fn loaded_server_with(dir: &std::path::Path, config: &str) -> Server {
    let s = Server::start_with_config(&dir.join("data"), config);
    let now = now_ms();
    for batch in 0..5 {
        let series = (0..1_000)
            .map(|i| {
                let gpu = (batch * 1_000 + i).to_string();
                let samples: Vec<(i64, f64)> = (0..60).map(|k| (now - (60 - k) * 60_000, k as f64)).collect();
                ts(
                    &[("Hostname", &format!("node-{}", i % 50)), ("__name__", "DCGM_FI_DEV_GPU_UTIL"), ("gpu", &gpu)],
                    &samples,
                )
            })
            .collect();
        let r = s.write_v1(&write_request(series), None);
        assert_eq!(r.status(), 204, "{:?}", r.text());
    }
    s
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder().timeout(Duration::from_secs(60)).build().expect("client")
}

/// The most storage reads seen running at once (`tessera_storage_reads_in_flight`,
/// sampled from `/metrics` every 10 ms until `done` is set).
fn sample_reads_in_flight(url: String, done: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let c = client();
        let mut most = 0;
        while !done.load(Ordering::Relaxed) {
            let text = c.get(&url).send().and_then(|r| r.text()).unwrap_or_default();
            let now = text
                .lines()
                .find_map(|l| l.strip_prefix("tessera_storage_reads_in_flight "))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
            most = most.max(now);
            std::thread::sleep(Duration::from_millis(10));
        }
        most
    })
}

/// Remote read runs its queries through the same read slots as PromQL: with 2 slots,
/// the flood never runs more than 2 storage reads at once (sampled), and the server
/// stays reachable.
#[test]
fn a_flood_of_remote_reads_of_everything_leaves_the_server_reachable() {
    let _serial = crate::probe::serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let s = loaded_server_with(dir.path(), "max_blocking_storage_calls = 2\n");
    let done = Arc::new(AtomicBool::new(false));
    let sampler = sample_reads_in_flight(s.url("/metrics"), Arc::clone(&done));
    let url = s.url("/api/v1/read");
    let now = now_ms();
    let body = snappy(
        &prometheus::ReadRequest {
            queries: (0..4)
                .map(|_| prometheus::Query {
                    start_timestamp_ms: now - 3_600_000,
                    end_timestamp_ms: now,
                    matchers: vec![prometheus::LabelMatcher { r#type: 2, name: "__name__".into(), value: ".+".into() }],
                    hints: None,
                })
                .collect(),
            accepted_response_types: vec![],
        }
        .encode_to_vec(),
    );
    probe_during(&s, "remote-read flood", 4, move || {
        for _ in 0..2 {
            let r = client()
                .post(&url)
                .header("Content-Type", "application/x-protobuf")
                .header("Content-Encoding", "snappy")
                .body(body.clone())
                .send()
                .expect("read");
            // 200, or 503 when the read slots are taken and the deadline passes: both
            // are answers; what matters is that the probes are answered meanwhile.
            assert!([200, 503].contains(&r.status().as_u16()), "{}", r.status());
        }
    });
    done.store(true, Ordering::Relaxed);
    let most = sampler.join().expect("sampler");
    assert!((1..=2).contains(&most), "{most} storage reads at once with 2 read slots");
}

#[test]
fn a_flood_of_index_calls_leaves_the_server_reachable() {
    let _serial = crate::probe::serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let s = loaded_server(dir.path());
    let urls = [
        s.url("/api/v1/series?match[]=%7B__name__%3D~%22.%2B%22%7D"),
        s.url("/api/v1/labels"),
        s.url("/api/v1/label/gpu/values"),
        s.url("/api/v1/label/Hostname/values?match[]=%7Bgpu%3D~%221.*%22%7D"),
    ];
    probe_during(&s, "index-call flood", 8, move || {
        for _ in 0..5 {
            for u in &urls {
                let r = client().get(u).send().expect("index call");
                assert!([200, 503].contains(&r.status().as_u16()), "{u}: {}", r.status());
            }
        }
    });
}

#[test]
fn a_flood_of_heavy_range_queries_leaves_the_server_reachable() {
    let _serial = crate::probe::serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let s = loaded_server(dir.path());
    let now = now_ms() / 1000;
    let url = s.url(&format!(
        "/api/v1/query_range?query={}&start={}&end={now}&step=15",
        form_urlencoded::byte_serialize(
            b"sum by (Hostname) (rate({__name__=~\"DCGM.*\"}[5m])) / on() group_left count(up or vector(1))"
        )
        .collect::<String>(),
        now - 3600
    ));
    probe_during(&s, "range-query flood", 8, move || {
        for _ in 0..3 {
            let r = client().get(&url).send().expect("query");
            assert!([200, 503].contains(&r.status().as_u16()), "{}", r.status());
        }
    });
}

/// SIGTERM while the server is busy with slow queries, stalled uploads and idle
/// connections: it stops accepting, gives in-flight work `shutdown_timeout_secs`,
/// flushes, and exits 0 within that bound (plus the flush), never hanging on a client.
#[test]
fn sigterm_during_a_flood_exits_within_the_shutdown_timeout() {
    let _serial = crate::probe::serial();
    use std::io::Write;
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let s = loaded_server(dir.path());
    let acknowledged =
        s.get_json("/api/v1/query?query=count(DCGM_FI_DEV_GPU_UTIL)", None).1["data"]["result"][0]["value"][1].clone();
    assert_eq!(acknowledged, serde_json::json!("5000"));
    assert!(s.terminate().success());
    let s = Server::start_with_config(&data, "shutdown_timeout_secs = 2\n");
    let now = now_ms() / 1000;
    let url = s.url(&format!(
        "/api/v1/query_range?query={}&start={}&end={now}&step=1",
        form_urlencoded::byte_serialize(b"sum by (gpu) (rate({__name__=~\"DCGM.*\"}[5m]))").collect::<String>(),
        now - 3600
    ));
    let queries: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || client().get(&url).send().map(|r| r.status().as_u16()))
        })
        .collect();
    let mut idle: Vec<std::net::TcpStream> =
        (0..100).map(|_| std::net::TcpStream::connect(s.addr).expect("connect")).collect();
    let mut stalled = std::net::TcpStream::connect(s.addr).expect("connect");
    stalled
        .write_all(b"POST /api/v1/write HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 1000\r\n\r\n")
        .expect("head");
    idle.push(stalled);
    std::thread::sleep(Duration::from_millis(500));
    let started = std::time::Instant::now();
    let status = s.terminate();
    let took = started.elapsed();
    assert!(status.success(), "exit status {status}");
    assert!(took < Duration::from_secs(10), "exit took {took:?} with a 2 s shutdown timeout");
    eprintln!("SIGTERM during a flood: exited 0 after {took:?}");
    for q in queries {
        let _ = q.join();
    }
    // Everything acknowledged before is still there.
    let s = Server::start(&data);
    let (_, body) = s.get_json("/api/v1/query?query=count(DCGM_FI_DEV_GPU_UTIL)", None);
    assert_eq!(body["data"]["result"][0]["value"][1], acknowledged);
}

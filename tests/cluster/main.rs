//! Cluster tests: each boots real `tessera ingester` and `tessera gateway` processes (and
//! a `tessera serve` to compare with) on loopback and talks to them over HTTP only.
//! Sized for a 2-core machine: a handful of processes, small shard counts, and health
//! checks every 200 ms so that failures are seen quickly.

#[allow(dead_code)]
#[path = "../e2e/harness.rs"]
mod harness;

mod frontend;
mod proc;
mod promqltest;
mod pushdown;
mod repair;
mod rpcs;
mod slow;

use std::time::{Duration, Instant};

use harness::{now_ms, ts, write_request, Server};
use proc::Cluster;
use serde_json::Value;
use tessera_proto::prometheus::WriteRequest;

/// The queries compared between the cluster and the single node.
const QUERIES: &[&str] = &[
    "http_requests_total",
    "sum(rate(http_requests_total[5m]))",
    "count by (code) (http_requests_total)",
    "count_over_time(http_requests_total[2h])",
    "max_over_time(cpu_seconds[10m])",
    "sum by (instance) (cpu_seconds)",
];

/// Series names × instances × codes of the data set: 4 instances × 2 codes of
/// `http_requests_total` and 4 of `cpu_seconds`.
fn batch(t: i64, k: i64) -> WriteRequest {
    let mut series = Vec::new();
    for inst in 0..4 {
        let instance = format!("i{inst}");
        for code in ["200", "500"] {
            series.push(ts(
                &[("__name__", "http_requests_total"), ("code", code), ("instance", &instance), ("job", "api")],
                &[(t, (k * (inst + 1)) as f64)],
            ));
        }
        series
            .push(ts(&[("__name__", "cpu_seconds"), ("instance", &instance), ("job", "node")], &[(t, k as f64 * 0.5)]));
    }
    write_request(series)
}

/// The answers to every query and index endpoint, as (endpoint, data) pairs.
fn answers(get: &dyn Fn(&str) -> (u16, Value), start: i64, end: i64) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let (s, e) = (start as f64 / 1000.0, end as f64 / 1000.0);
    let mut paths: Vec<String> = Vec::new();
    for q in QUERIES {
        let q = urlencode(q);
        paths.push(format!("/api/v1/query?query={q}&time={e}"));
        paths.push(format!("/api/v1/query_range?query={q}&start={s}&end={e}&step=60"));
    }
    paths.push(format!("/api/v1/series?match[]={}&start={s}&end={e}", urlencode("{job=~\".+\"}")));
    paths.push(format!("/api/v1/labels?start={s}&end={e}"));
    paths.push(format!("/api/v1/label/instance/values?start={s}&end={e}"));
    for p in paths {
        let (status, body) = get(&p);
        assert_eq!(status, 200, "{p}: {body}");
        out.push((p, body["data"].clone()));
    }
    out
}

fn urlencode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The same answers, sample values within a relative 1e-12: a `sum` adds the same
/// values grouped by shard (and `sum(rate)` by timestamp set within a shard), which can
/// move the last bit (ARCHITECTURE.md, "Pushdown"). Everything else is equal.
fn assert_same(cluster: &[(String, Value)], single: &[(String, Value)]) {
    for ((p, c), (_, s)) in cluster.iter().zip(single) {
        assert!(same(c, s), "cluster and single node differ on {p}:\n{c}\n{s}");
    }
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(a, b)),
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| same(v, w)))
        }
        (Value::String(a), Value::String(b)) if a != b => match (a.parse::<f64>(), b.parse::<f64>()) {
            (Ok(x), Ok(y)) => x.is_finite() && (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
            _ => false,
        },
        _ => a == b,
    }
}

/// Sends `req` until it is acknowledged (as Prometheus retries a 5xx), at most 50 times.
fn write_acked(c: &Cluster, req: &WriteRequest) -> u32 {
    for attempt in 1..=50 {
        let r = c.gateway().write_v1(req, None);
        if r.status() == 204 {
            return attempt;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("write never acknowledged; gateway stderr:\n{}", c.gateway().stderr());
}

#[test]
fn three_ingesters_rf3_answer_like_one_node_and_lose_no_acknowledged_sample_when_killed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = Cluster::start(dir.path(), 3, 3, 8, "");
    let single = Server::start(&dir.path().join("single"));

    // Phase 1: a data set written to both, compared on every read endpoint.
    let base = now_ms() - 3_600_000;
    let mut k = 0;
    let mut t = base;
    while t < base + 1_800_000 {
        let req = batch(t, k);
        assert_eq!(write_acked(&c, &req), 1, "every replica is up: the first attempt is acknowledged");
        assert_eq!(single.write_v1(&req, None).status(), 204);
        k += 1;
        t += 30_000;
    }
    // A retried request (the last one again, as a sender whose ack got lost would) is
    // acknowledged and stored once: the answers below still equal the single node's.
    let again = batch(t - 30_000, k - 1);
    assert_eq!(c.gateway().write_v1(&again, None).status(), 204);
    let single_get = |p: &str| single.get_json(p, None);
    assert_same(&answers(&|p: &str| c.gateway().get_json(p, None), base, t), &answers(&single_get, base, t));

    // A hung replica (SIGSTOP: connections open, no answers) holds neither writes nor
    // reads: W = 2 and R = 2 of the other two answer (push timeout 5 s, query 120 s).
    c.ingester(2).signal("STOP");
    let started = Instant::now();
    let req = batch(t, k);
    assert_eq!(c.gateway().write_v1(&req, None).status(), 204);
    assert_eq!(single.write_v1(&req, None).status(), 204);
    k += 1;
    t += 30_000;
    assert_same(&answers(&|p: &str| c.gateway().get_json(p, None), base, t), &answers(&single_get, base, t));
    let took = started.elapsed();
    c.ingester(2).signal("CONT");
    assert!(took < Duration::from_secs(4), "a write and 15 reads took {took:?} with one replica hung");

    // Phase 2: a stream of writes; ingester-1 is killed -9 in the middle. Every request
    // is retried until acknowledged, so the single node gets exactly the same data.
    let mut acked = Vec::new();
    let before = k;
    for i in 0..60 {
        if i == 20 {
            c.kill9(1);
        }
        let req = batch(t, k);
        write_acked(&c, &req);
        assert_eq!(single.write_v1(&req, None).status(), 204);
        acked.push(t);
        k += 1;
        t += 15_000;
    }
    let cluster_now = answers(&|p: &str| c.gateway().get_json(p, None), base, t);
    assert_same(&cluster_now, &answers(&single_get, base, t));
    // Zero acknowledged samples lost: every series has every acknowledged timestamp.
    let q = format!("/api/v1/query?query={}&time={}", urlencode("count_over_time(cpu_seconds[3h])"), t as f64 / 1000.0);
    let (_, body) = c.gateway().get_json(&q, None);
    for s in body["data"]["result"].as_array().expect("vector") {
        let n: usize = s["value"][1].as_str().expect("value").parse().expect("count");
        assert_eq!(n as i64, before + acked.len() as i64, "{s}");
    }

    // Phase 3: ingester-1 comes back (it missed the writes above: a hole) and the stream
    // goes on; in its middle ingester-2 dies -9. Reads now rely on ingester-0 and the
    // one with the hole: still identical, and still no acknowledged sample lost.
    c.restart(1);
    // Until it has caught up from its peers it reports a hole and does not count
    // towards the read quorum (the read below would fail); repair clears it.
    c.wait_repaired(1, Duration::from_secs(60));
    for i in 0..30 {
        if i == 10 {
            c.kill9(2);
        }
        let req = batch(t, k);
        write_acked(&c, &req);
        assert_eq!(single.write_v1(&req, None).status(), 204);
        k += 1;
        t += 15_000;
    }
    assert_same(&answers(&|p: &str| c.gateway().get_json(p, None), base, t), &answers(&single_get, base, t));
    let q = format!("/api/v1/query?query={}&time={}", urlencode("count_over_time(cpu_seconds[4h])"), t as f64 / 1000.0);
    let (_, body) = c.gateway().get_json(&q, None);
    let series = body["data"]["result"].as_array().expect("vector");
    assert_eq!(series.len(), 4, "{body}");
    for s in series {
        let n: i64 = s["value"][1].as_str().expect("value").parse().expect("count");
        assert_eq!(n, k, "every acknowledged sample of {s} is there");
    }
}

#[test]
fn rf1_with_an_ingester_down_fails_by_default_and_warns_with_partial_response() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = Cluster::start(dir.path(), 2, 1, 4, "");
    let t = now_ms() - 60_000;
    assert_eq!(write_acked(&c, &batch(t, 1)), 1);
    c.kill9(0);
    // Wait for the health checks to see it (the read does not need them, the message
    // does not either; this only makes /-/ready deterministic below).
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.gateway().status_code("/-/ready") == 200 {
        assert!(Instant::now() < deadline, "gateway still ready with an ingester down");
        std::thread::sleep(Duration::from_millis(50));
    }
    let q = format!("/api/v1/query?query={}&time={}", urlencode("count(cpu_seconds)"), t as f64 / 1000.0);
    let (status, body) = c.gateway().get_json(&q, None);
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["errorType"], "unavailable");
    let msg = body["error"].as_str().expect("error");
    assert!(msg.contains("shards ") && msg.contains("(0 of 1)"), "{msg}");
    assert!(msg.contains("ingester-0"), "names the ingester that failed: {msg}");

    let (status, body) = c.gateway().get_json(&format!("{q}&partial_response=true"), None);
    assert_eq!(status, 200, "{body}");
    let warnings = body["warnings"].as_array().expect("warnings");
    assert!(warnings.iter().any(|w| w.as_str().is_some_and(|w| w.contains("partial response: shards "))), "{body}");
    // Some series are on ingester-1 and are counted.
    let count: f64 = body["data"]["result"][0]["value"][1].as_str().expect("value").parse().expect("number");
    assert!(count > 0.0 && count < 4.0, "{body}");

    // The parameter is read from a POST form body too (as Grafana sends queries).
    let r = c
        .gateway()
        .http()
        .post(c.gateway().url("/api/v1/query"))
        .form(&[
            ("query", "count(cpu_seconds)"),
            ("time", &(t as f64 / 1000.0).to_string()),
            ("partial_response", "true"),
        ])
        .send()
        .expect("POST");
    assert_eq!(r.status(), 200);
    let r = c
        .gateway()
        .http()
        .post(c.gateway().url("/api/v1/query"))
        .form(&[("query", "up"), ("partial_response", "maybe")])
        .send()
        .expect("POST");
    assert_eq!(r.status(), 400);
    assert!(r.text().expect("body").contains("partial_response"));

    // A write touching the dead ingester's shards is refused, naming them.
    let r = c.gateway().write_v1(&batch(t + 1000, 2), None);
    assert_eq!(r.status(), 503);
    let text = r.text().expect("body");
    assert!(text.contains("0 of 1 required acknowledgements"), "{text}");
}

#[test]
fn a_config_mismatch_between_gateway_and_ingester_is_refused_with_both_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = Cluster::start(dir.path(), 1, 1, 4, "");
    // A gateway configured for 8 shards talking to the 4-shard ingester.
    let grpc = c.grpc_addr(0);
    let other = dir.path().join("other.toml");
    std::fs::write(&other, proc::config_toml(&[grpc], 1, 8, "health_check_interval_ms = 200\n")).expect("write");
    let gw = proc::start(&["gateway", &format!("--config={}", other.display()), "--listen=127.0.0.1:0"]);
    let t = now_ms() - 60_000;
    let r = gw.write_v1(&batch(t, 1), None);
    assert_eq!(r.status(), 503);
    let text = r.text().expect("body");
    assert!(text.contains("cluster identity mismatch"), "{text}");
    assert!(text.contains("shard count: request 8, ingester \"ingester-0\" 4"), "{text}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, status) = gw.get_json("/api/v1/status/cluster", None);
        let err = status["data"]["ingesters"][0]["error"].as_str().unwrap_or_default().to_owned();
        if err.contains("cluster identity mismatch") {
            break;
        }
        assert!(Instant::now() < deadline, "status never showed the mismatch: {status}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(gw.status_code("/-/ready"), 503);

    // The ingester's data directory refuses another cluster name.
    c.kill9(0);
    let renamed = dir.path().join("renamed.toml");
    std::fs::write(&renamed, format!("[cluster]\nname = \"prod\"\n{}", proc::cluster_body(&[grpc], 1, 4, "")))
        .expect("write");
    let out = std::process::Command::new(harness::tessera_binary())
        .args(["ingester", &format!("--config={}", renamed.display()), "--id=ingester-0", "--listen=127.0.0.1:0"])
        .arg(format!("--data-dir={}", c.data_dir(0).display()))
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cluster.name: recorded \"tessera\", configured \"prod\""), "{err}");
}

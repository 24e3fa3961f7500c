//! What a cluster front end serves from its ingesters beyond queries: `/api/v1/metadata`
//! (Metadata RPC), `/api/v1/status/tsdb` and `timeSeriesCount` (Cardinality and Status
//! RPCs), each equal to `tessera serve` fed the same data, also from a repaired replica
//! alone, with the pushes gzip-compressed; and `/api/v1/status/cluster` showing every
//! ingester's holes and repair state.

use std::time::{Duration, Instant};

use serde_json::Value;
use tessera_proto::prometheus::{self, metric_metadata::MetricType, WriteRequest};

use super::harness::{now_ms, ts, Proc, Server};
use super::proc::Cluster;
use super::write_acked;

fn md(kind: MetricType, family: &str, help: &str, unit: &str) -> prometheus::MetricMetadata {
    prometheus::MetricMetadata {
        r#type: kind as i32,
        metric_family_name: family.into(),
        help: help.into(),
        unit: unit.into(),
    }
}

/// Three metrics over 24 hosts in 3 racks (label pairs of very different counts), with
/// one request of metadata each.
fn data(t: i64) -> Vec<WriteRequest> {
    let mut out = Vec::new();
    for (name, gpus) in [("gpu_util", 4), ("gpu_temp_celsius", 2), ("node_up", 1)] {
        let mut series = Vec::new();
        for host in 0..24 {
            for gpu in 0..gpus {
                let (h, r, g) = (format!("host-{host:02}"), format!("rack-{}", host % 3), gpu.to_string());
                series.push(ts(
                    &[("__name__", name), ("gpu", &g), ("instance", &h), ("rack", &r)],
                    &[(t, f64::from(host * gpu))],
                ));
            }
        }
        out.push(WriteRequest { timeseries: series, metadata: vec![] });
    }
    // Metadata only (as Prometheus sends it with remote write 1.0), two help texts for
    // one family in two requests: newest first in the answer.
    out.push(WriteRequest {
        timeseries: vec![],
        metadata: vec![
            md(MetricType::Gauge, "gpu_util", "GPU utilisation (old text)", "ratio"),
            md(MetricType::Gauge, "gpu_temp_celsius", "GPU temperature", "celsius"),
        ],
    });
    out.push(WriteRequest {
        timeseries: vec![],
        metadata: vec![
            md(MetricType::Gauge, "gpu_util", "GPU utilisation", "ratio"),
            md(MetricType::Gauge, "node_up", "Node is up", ""),
            md(MetricType::Counter, "never_sampled_total", "A family without series", ""),
        ],
    });
    out
}

const METADATA: &[&str] = &[
    "/api/v1/metadata",
    "/api/v1/metadata?metric=gpu_util",
    "/api/v1/metadata?metric=gpu_util&limit_per_metric=1",
    "/api/v1/metadata?limit=2",
    "/api/v1/metadata?limit=0",
    "/api/v1/metadata?metric=nope",
];
const TSDB: &[&str] = &["/api/v1/status/tsdb", "/api/v1/status/tsdb?limit=3", "/api/v1/status/tsdb?limit=10000"];

fn data_of(p: &Proc, path: &str) -> Value {
    let (status, body) = p.get_json(path, None);
    assert_eq!(status, 200, "{path}: {body}");
    body["data"].clone()
}

fn time_series_count(p: &Proc) -> Value {
    data_of(p, "/api/v1/status/runtimeinfo")["timeSeriesCount"].clone()
}

#[test]
fn metadata_and_tsdb_status_of_an_rf3_cluster_equal_the_single_nodes_also_from_a_repaired_replica_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Pushes gzip-compressed: the ingesters take them like uncompressed ones.
    let mut c = Cluster::start(dir.path(), 3, 3, 8, "push_timeout_ms = 1000\ngrpc_compression = \"gzip\"\n");
    let single = Server::start(&dir.path().join("single"));
    let t = now_ms() - 60_000;
    for req in data(t) {
        write_acked(&c, &req);
        assert_eq!(single.write_v1(&req, None).status(), 204);
    }
    let gw = c.gateway();
    let one = data_of(&single, "/api/v1/metadata");
    assert_eq!(one["gpu_util"][0]["help"], "GPU utilisation", "newest first: {one}");
    assert_eq!(one["gpu_util"].as_array().map(Vec::len), Some(2));
    for path in METADATA.iter().chain(TSDB) {
        assert_eq!(data_of(gw, path), data_of(&single, path), "{path}");
    }
    let tsdb = data_of(gw, "/api/v1/status/tsdb");
    assert_eq!(tsdb["headStats"]["numSeries"], 24 * 7);
    assert_eq!(tsdb["labelValueCountByLabelName"][0], serde_json::json!({"name": "instance", "value": 24}));

    // All tenants' series, summed over one replica per shard (not 3x): from the
    // health checks, so allow them a moment.
    let expected = time_series_count(&single);
    assert_eq!(expected, 24 * 7);
    let deadline = Instant::now() + Duration::from_secs(10);
    while time_series_count(gw) != expected {
        assert!(Instant::now() < deadline, "timeSeriesCount {} != {expected}", time_series_count(gw));
        std::thread::sleep(Duration::from_millis(100));
    }

    // A restarted ingester has lost its in-memory metadata and has holes until repaired:
    // it does not count, the other two answer.
    c.restart(1);
    for path in METADATA.iter().chain(TSDB) {
        assert_eq!(data_of(c.gateway(), path), data_of(&single, path), "{path} with ingester-1 repairing");
    }
    // Repair copies the metadata with the samples: once repaired, it alone answers as
    // the single node (with a warning: the other replicas are gone).
    c.wait_repaired(1, Duration::from_secs(30));
    c.kill9(0);
    c.kill9(2);
    for path in METADATA.iter().chain(TSDB) {
        let sep = if path.contains('?') { '&' } else { '?' };
        let partial = format!("{path}{sep}partial_response=true");
        let (status, body) = c.gateway().get_json(&partial, None);
        assert_eq!(status, 200, "{partial}: {body}");
        assert_eq!(body["data"], data_of(&single, path), "{partial} from the repaired replica alone");
        if *path != "/api/v1/metadata?limit=0" {
            let warnings = body["warnings"].as_array().expect("warnings");
            assert!(warnings.iter().any(|w| w.as_str().is_some_and(|w| w.contains("partial response"))), "{body}");
        }
        let (status, body) = c.gateway().get_json(path, None);
        if *path != "/api/v1/metadata?limit=0" {
            assert_eq!(status, 503, "{path} without partial_response: {body}");
            assert_eq!(body["errorType"], "unavailable", "{body}");
        }
    }
}

/// The `repair` object the gateway shows for ingester `i`.
fn gateway_repair(c: &Cluster, i: usize) -> Value {
    let (status, st) = c.gateway().get_json("/api/v1/status/cluster", None);
    assert_eq!(status, 200);
    st["data"]["ingesters"][i]["repair"].clone()
}

fn wait_for(c: &Cluster, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, st) = c.gateway().get_json("/api/v1/status/cluster", None);
        if ok(&st["data"]) {
            return st["data"].clone();
        }
        assert!(Instant::now() < deadline, "gateway status never showed {what}: {st}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_gateway_status_shows_each_ingesters_holes_and_repair_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = Cluster::start(dir.path(), 3, 3, 4, "push_timeout_ms = 1000\n");
    let t = now_ms() - 10_000;
    write_acked(&c, &super::batch(t, 1));
    let all_complete = |d: &Value| {
        d["ingesters"].as_array().is_some_and(|a| a.iter().all(|i| i["repair"]["repaired"] == true))
            && d["shards"].as_array().is_some_and(|s| s.iter().all(|s| s["replicas_complete"] == 3))
    };
    // The batch's 12 series, on every replica, per shard (after a health check). A write
    // is acknowledged by a quorum of 2: the third replica and its next health check may
    // come later, so the wait covers all three.
    let series_of = |d: &Value, i: usize| -> i64 {
        d["ingesters"][i]["repair"]["shards"]
            .as_array()
            .map_or(0, |a| a.iter().map(|s| s["series"].as_i64().unwrap_or(0)).sum())
    };
    let st = wait_for(&c, "every replica complete with the series", |d| {
        all_complete(d) && (0..3).all(|i| series_of(d, i) == 12)
    });
    let shards = st["ingesters"][1]["repair"]["shards"].as_array().expect("shards").clone();
    assert_eq!(shards.len(), 4, "RF 3 of 3 ingesters: every shard on each");
    assert!(shards.iter().all(|s| s["state"] == "complete" && s["holes"] == serde_json::json!([])), "{st}");
    assert_eq!(series_of(&st, 0), 12, "{st}");

    // Restarted while its peers are stopped: it cannot repair, so it keeps an open hole
    // per shard (and refuses writes meanwhile), and the gateway says so.
    c.ingester(0).signal("STOP");
    c.ingester(2).signal("STOP");
    c.restart(1);
    let st = wait_for(&c, "ingester-1's holes, the others down", |d| {
        d["ingesters"][1]["repair"]["pending_shards"] == 4 && d["ingesters"][0]["up"] == false
    });
    let r = &st["ingesters"][1]["repair"];
    assert_eq!(r["repaired"], false, "{st}");
    for s in r["shards"].as_array().expect("shards") {
        assert_eq!(s["state"], "repairing", "{s}");
        assert_eq!(s["refusing_writes"], true, "{s}");
        let holes = s["holes"].as_array().expect("holes");
        assert_eq!(holes.len(), 1, "{s}");
        assert_eq!(holes[0]["to_ms"], i64::MAX, "open until repaired: {s}");
        assert!(holes[0]["from_ms"].as_i64().is_some_and(|f| f <= t), "{s}");
    }
    assert_eq!(gateway_repair(&c, 0), Value::Null, "a stopped ingester's state is unknown, not stale");
    assert!(st["shards"].as_array().expect("shards").iter().all(|s| s["replicas_complete"] == 0), "{st}");

    // Peers back: it repairs, and the gateway shows it complete again.
    c.ingester(0).signal("CONT");
    c.ingester(2).signal("CONT");
    let st = wait_for(&c, "ingester-1 repaired", all_complete);
    let r = &st["ingesters"][1]["repair"];
    assert!(r["shards"].as_array().expect("shards").iter().all(|s| s["refusing_writes"] == false), "{st}");
}

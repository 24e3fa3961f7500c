//! Remote write 1.0/2.0 in, remote read and the index API out.

use prost::Message;
use tessera_proto::{prometheus, v2, SymbolTable};

use crate::harness::{eq, now_ms, snappy, ts, write_request, Server};

/// The basic promise: what a 1.0 sender wrote comes back unchanged through remote read
/// and the index API, spread over both shards, without the internal tenant label.
#[test]
fn remote_write_v1_samples_are_read_back_by_remote_read_and_series_api() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(&dir.path().join("data"));
    let t0 = now_ms();
    // 50 series: enough that both shards get some (the hash spreads them).
    let series: Vec<_> = (0..50)
        .map(|g| {
            ts(
                &[("Hostname", "node-1"), ("__name__", "DCGM_FI_DEV_GPU_UTIL"), ("gpu", &g.to_string())],
                &[(t0, g as f64), (t0 + 15_000, g as f64 + 0.5)],
            )
        })
        .collect();
    let r = s.write_v1(&write_request(series), None);
    assert_eq!(r.status(), 204, "{:?}", r.text());

    let res = s.read(vec![eq("__name__", "DCGM_FI_DEV_GPU_UTIL")], t0 - 1000, t0 + 60_000, None);
    assert_eq!(res.timeseries.len(), 50);
    let g7 = res
        .timeseries
        .iter()
        .find(|t| t.labels.iter().any(|l| &l.name[..] == b"gpu" && &l.value[..] == b"7"))
        .expect("gpu 7 read back");
    assert_eq!(
        g7.samples,
        vec![
            prometheus::Sample { value: 7.0, timestamp: t0 },
            prometheus::Sample { value: 7.5, timestamp: t0 + 15_000 }
        ]
    );
    assert!(g7.labels.iter().all(|l| &l.name[..] != b"__tenant__"), "tenant label must not leak");

    let (code, body) = s.get_json("/api/v1/series?match[]=DCGM_FI_DEV_GPU_UTIL{gpu=%223%22}", None);
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["status"], "success");
    assert_eq!(
        body["data"],
        serde_json::json!([{"Hostname": "node-1", "__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "3"}])
    );

    let (_, labels) = s.get_json("/api/v1/labels", None);
    assert_eq!(labels["data"], serde_json::json!(["Hostname", "__name__", "gpu"]));
    // Values sort as strings, as Prometheus sorts them; `limit` truncates with a warning.
    let (_, values) = s.get_json("/api/v1/label/gpu/values?limit=3", None);
    assert_eq!(values["data"], serde_json::json!(["0", "1", "10"]));
    assert_eq!(values["warnings"], serde_json::json!(["results truncated due to limit"]));
}

/// 2.0 requests (symbol table, per-series metadata) are written, answered with the
/// mandatory `*-Written` headers, and their metadata is served.
#[test]
fn remote_write_v2_answers_204_with_written_count_headers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(&dir.path().join("data"));
    let t0 = now_ms();
    // One shared symbol table: "__name__", "gpu_temp", the help and unit text are
    // stored once however many series use them.
    let mut st = SymbolTable::new();
    let timeseries: Vec<v2::TimeSeries> = (0..10)
        .map(|i| {
            let gpu = i.to_string();
            v2::TimeSeries {
                labels_refs: st.label_refs([("__name__", "gpu_temp"), ("gpu", gpu.as_str())]),
                samples: vec![
                    v2::Sample { value: 40.0 + i as f64, timestamp: t0, start_timestamp: 0 },
                    v2::Sample { value: 41.0, timestamp: t0 + 1000, start_timestamp: 0 },
                ],
                metadata: Some(v2::Metadata {
                    r#type: 2,
                    help_ref: st.get_ref("GPU temperature (C)."),
                    unit_ref: st.get_ref("celsius"),
                }),
                ..Default::default()
            }
        })
        .collect();
    let req = v2::Request { symbols: st.into_symbols(), timeseries };
    let r = s.post_write(
        snappy(&req.encode_to_vec()),
        &[
            ("Content-Type", tessera_proto::CONTENT_TYPE_V2),
            ("Content-Encoding", "snappy"),
            ("X-Prometheus-Remote-Write-Version", "2.0.0"),
        ],
    );
    assert_eq!(r.status(), 204);
    let h = r.headers();
    assert_eq!(h["X-Prometheus-Remote-Write-Samples-Written"], "20");
    assert_eq!(h["X-Prometheus-Remote-Write-Histograms-Written"], "0");
    assert_eq!(h["X-Prometheus-Remote-Write-Exemplars-Written"], "0");

    let res = s.read(vec![eq("__name__", "gpu_temp")], t0, t0 + 1000, None);
    assert_eq!(res.timeseries.len(), 10);
    assert_eq!(res.timeseries.iter().map(|t| t.samples.len()).sum::<usize>(), 20);

    let (_, md) = s.get_json("/api/v1/metadata?metric=gpu_temp", None);
    assert_eq!(
        md["data"]["gpu_temp"],
        serde_json::json!([{"type": "gauge", "help": "GPU temperature (C).", "unit": "celsius"}])
    );
}

/// X-Scope-OrgID separates tenants on every read path (remote read, label values,
/// label names), and a request without the header is the `anonymous` tenant.
#[test]
fn tenants_never_see_each_others_series() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(&dir.path().join("data"));
    let t0 = now_ms();
    let a = write_request(vec![ts(&[("__name__", "up"), ("job", "team-a-job")], &[(t0, 1.0)])]);
    assert_eq!(s.write_v1(&a, Some("team-a")).status(), 204);
    let b = write_request(vec![ts(&[("__name__", "up"), ("job", "team-b-job")], &[(t0, 0.0)])]);
    assert_eq!(s.write_v1(&b, Some("team-b")).status(), 204);

    let ra = s.read(vec![eq("__name__", "up")], t0 - 1, t0 + 1, Some("team-a"));
    assert_eq!(ra.timeseries.len(), 1);
    assert!(ra.timeseries[0].labels.iter().any(|l| &l.value[..] == b"team-a-job"));
    let (_, vals) = s.get_json("/api/v1/label/job/values", Some("team-b"));
    assert_eq!(vals["data"], serde_json::json!(["team-b-job"]));
    let anon = s.read(vec![eq("__name__", "up")], t0 - 1, t0 + 1, None);
    assert!(anon.timeseries.is_empty(), "the anonymous tenant sees nothing of team-a or team-b");
    let (_, names) = s.get_json("/api/v1/labels", Some("team-a"));
    assert!(!names["data"].as_array().expect("array").iter().any(|n| n == "__tenant__"));
}

/// Prometheus sends metadata in separate 1.0 requests with no series at all.
#[test]
fn metadata_sent_with_v1_is_served_by_api_metadata() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(&dir.path().join("data"));
    let mut req = write_request(vec![]);
    req.metadata.push(prometheus::MetricMetadata {
        r#type: prometheus::metric_metadata::MetricType::Counter as i32,
        metric_family_name: "http_requests_total".into(),
        help: "Requests served.".into(),
        unit: String::new(),
    });
    assert_eq!(s.write_v1(&req, None).status(), 204);
    let (code, md) = s.get_json("/api/v1/metadata", None);
    assert_eq!(code, 200);
    assert_eq!(md["data"]["http_requests_total"][0]["type"], "counter");
    assert_eq!(md["data"]["http_requests_total"][0]["help"], "Requests served.");
}

/// `/metrics` reflects one write: counters, the per-route request count and latency,
/// and the engines' per-shard gauges.
#[test]
fn metrics_endpoint_counts_samples_requests_and_active_series() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(&dir.path().join("data"));
    let t0 = now_ms();
    let req = write_request(vec![
        ts(&[("__name__", "m1")], &[(t0, 1.0), (t0 + 1, 2.0)]),
        ts(&[("__name__", "m2")], &[(t0, 1.0)]),
    ]);
    assert_eq!(s.write_v1(&req, None).status(), 204);
    let text = s.http().get(s.url("/metrics")).send().expect("GET /metrics").text().expect("text");
    assert!(text.contains("tessera_samples_received_total 3"), "{text}");
    assert!(text.contains("tessera_samples_written_total 3"), "{text}");
    assert!(text.contains("tessera_http_requests_total{handler=\"/api/v1/write\",code=\"204\"} 1"), "{text}");
    assert!(text.contains("tessera_http_request_duration_seconds_bucket{handler=\"/api/v1/write\""), "{text}");
    // Active series are reported per shard; their sum is the two series written.
    let active: u64 = text
        .lines()
        .filter(|l| l.starts_with("tessera_active_series{"))
        .map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<u64>().ok()).expect("gauge value"))
        .sum();
    assert_eq!(active, 2, "{text}");
    assert!(text.contains("tessera_storage_disk_bytes{shard=\"0\"}"));
    assert!(text.contains("tessera_wal_bytes{shard=\"1\"}"));
    // The write was fsynced before the 204 (default policy), so at least one shard
    // counted a WAL fsync.
    let fsyncs: u64 = text
        .lines()
        .filter(|l| l.starts_with("tessera_wal_fsync_duration_seconds_count{"))
        .map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<u64>().ok()).expect("count value"))
        .sum();
    assert!(fsyncs >= 1, "{text}");
}

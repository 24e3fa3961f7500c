//! The internal API as a user of a gateway sees it: Select's raw chunks give the same
//! answers as the single node over thousands of series (and far fewer bytes than
//! decoded samples), `partial_response` on the index endpoints and remote read, and the
//! `tessera_cluster_*` metrics.

use std::time::{Duration, Instant};

use prost::Message;
use tessera_proto::prometheus;

use super::harness::{eq, now_ms, snappy, ts, write_request, Server};
use super::proc::Cluster;
use super::{urlencode, write_acked};

/// Series of the large data set.
const SERIES: usize = 2_000;
/// Samples per series (every 15 s: 30 minutes).
const SAMPLES: i64 = 120;

fn metric_value(text: &str, prefix: &str) -> f64 {
    text.lines().filter(|l| l.starts_with(prefix)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
}

fn metrics(c: &Cluster) -> String {
    let r = c.gateway().http().get(c.gateway().url("/metrics")).send().expect("GET /metrics");
    assert_eq!(r.status(), 200);
    r.text().expect("metrics text")
}

#[test]
fn select_over_thousands_of_series_streams_chunks_and_answers_like_one_node() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = Cluster::start(dir.path(), 3, 3, 8, "");
    let single = Server::start(&dir.path().join("single"));
    let base = now_ms() - 3_600_000;
    // One request per 100 series, all their samples (a few jittered timestamps so the
    // chunks are not all alike).
    for first in (0..SERIES).step_by(100) {
        let series = (first..first + 100)
            .map(|i| {
                let inst = format!("host-{i}");
                let samples: Vec<(i64, f64)> = (0..SAMPLES)
                    .map(|k| (base + k * 15_000 + (k * i as i64) % 7, (k * (i as i64 % 13)) as f64))
                    .collect();
                ts(&[("__name__", "gpu_util"), ("instance", &inst), ("job", "dcgm")], &samples)
            })
            .collect();
        let req = write_request(series);
        write_acked(&c, &req);
        assert_eq!(single.write_v1(&req, None).status(), 204);
    }
    let end = base + SAMPLES * 15_000;
    let q = format!("/api/v1/query?query={}&time={}", urlencode("gpu_util[1h]"), end as f64 / 1000.0);
    let before = metrics(&c);
    let started = Instant::now();
    let (status, cluster) = c.gateway().get_json(&q, None);
    let took = started.elapsed();
    assert_eq!(status, 200, "{cluster}");
    let (status, one) = single.get_json(&q, None);
    assert_eq!(status, 200);
    let result = cluster["data"]["result"].as_array().expect("matrix");
    assert_eq!(result.len(), SERIES);
    assert!(result.iter().all(|s| s["values"].as_array().map(Vec::len) == Some(SAMPLES as usize)));
    assert_eq!(cluster["data"], one["data"], "the cluster's raw samples equal the single node's");
    let after_first = metrics(&c);

    // Only part of each chunk is asked for: trimmed at the querier, still equal.
    let mid = base + 600_000;
    let q = format!("/api/v1/query?query={}&time={}", urlencode("gpu_util[3m]"), mid as f64 / 1000.0);
    assert_eq!(c.gateway().get_json(&q, None).1["data"], single.get_json(&q, None).1["data"]);

    // What one replica sent for the first query before Select streamed chunks: the
    // same series as decoded samples (`Series` with packed timestamps and values).
    let decoded_bytes: usize = one["data"]["result"]
        .as_array()
        .expect("matrix")
        .iter()
        .map(|s| {
            let labels = s["metric"].as_object().expect("labels");
            let values = s["values"].as_array().expect("values");
            let series = tessera_proto::ingester::Series {
                labels: labels
                    .iter()
                    .map(|(n, v)| tessera_proto::ingester::Label {
                        name: n.clone(),
                        value: v.as_str().unwrap_or("").into(),
                    })
                    .collect(),
                timestamps: values.iter().map(|p| (p[0].as_f64().unwrap_or(0.0) * 1000.0).round() as i64).collect(),
                values: values.iter().map(|p| p[1].as_str().and_then(|v| v.parse().ok()).unwrap_or(0.0)).collect(),
                shard: 0,
            };
            series.encoded_len() + 4
        })
        .sum();
    let after = metrics(&c);
    // The first query's bytes alone: the second one reads the same whole chunks again.
    let select_bytes = metric_value(&after_first, "tessera_cluster_grpc_response_bytes_total{")
        - metric_value(&before, "tessera_cluster_grpc_response_bytes_total{");
    let samples_read = (SERIES as i64 * SAMPLES) as f64;
    eprintln!(
        "select of {SERIES} series x {SAMPLES} samples: {took:?}; {select_bytes} bytes of chunks from all replicas; \
         decoded samples would be {decoded_bytes} bytes per replica"
    );
    assert!(select_bytes < decoded_bytes as f64, "chunks from every replica take less than decoded samples from one");
    assert!(select_bytes > 0.0, "Select frames were counted");
    // Decoded samples took 16 bytes each on the wire (timestamp + value); raw chunks of
    // regular scrapes take 1-3 with their labels and framing. The querier stops reading
    // once it has its quorum (2 of 3), but on a fast machine all 3 may have answered.
    assert!(select_bytes / samples_read < 3.0 * 3.0, "{select_bytes} bytes for {samples_read} samples");
    // Which replicas a read asks is the querier's choice (R = 2 of the 3), so count the
    // Selects of every peer: each of the two queries reads at least two replicas.
    let selects_ok: f64 = after
        .lines()
        .filter(|l| {
            l.starts_with("tessera_cluster_grpc_requests_total{") && l.contains("method=\"Select\",code=\"Ok\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(selects_ok >= 4.0, "{selects_ok} successful Selects over all ingesters");
    assert!(
        metric_value(&after, "tessera_cluster_grpc_requests_total{peer=\"ingester-0\",method=\"Push\",code=\"Ok\"}")
            >= 20.0
    );
    assert!(
        after.contains("tessera_cluster_grpc_request_duration_seconds_bucket{peer=\"ingester-1\",method=\"Select\"")
    );
    assert!(
        after.contains("tessera_cluster_grpc_requests_in_flight{peer=\"ingester-2\",method=\"Select\"} 0"),
        "{after}"
    );
}

fn remote_read(c: &Cluster, query: &str, start: i64, end: i64) -> reqwest::blocking::Response {
    let req = prometheus::ReadRequest {
        queries: vec![prometheus::Query {
            start_timestamp_ms: start,
            end_timestamp_ms: end,
            matchers: vec![eq("__name__", "cpu_seconds")],
            hints: None,
        }],
        accepted_response_types: vec![],
    };
    c.gateway()
        .http()
        .post(c.gateway().url(&format!("/api/v1/read{query}")))
        .header("Content-Type", "application/x-protobuf")
        .header("Content-Encoding", "snappy")
        .body(snappy(&req.encode_to_vec()))
        .send()
        .expect("read request")
}

#[test]
fn index_endpoints_and_remote_read_fail_by_default_and_warn_with_partial_response() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = Cluster::start(dir.path(), 2, 1, 4, "");
    let t = now_ms() - 60_000;
    let series = (0..8)
        .map(|i| {
            let inst = format!("i{i}");
            ts(&[("__name__", "cpu_seconds"), ("instance", &inst)], &[(t, i as f64)])
        })
        .collect();
    write_acked(&c, &write_request(series));
    c.kill9(0);
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.gateway().status_code("/-/ready") == 200 {
        assert!(Instant::now() < deadline, "gateway still ready with an ingester down");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (s, e) = ((t - 60_000) as f64 / 1000.0, (t + 60_000) as f64 / 1000.0);
    let paths = [
        format!("/api/v1/series?match[]=cpu_seconds&start={s}&end={e}"),
        format!("/api/v1/labels?start={s}&end={e}"),
        format!("/api/v1/label/instance/values?start={s}&end={e}"),
    ];
    for p in &paths {
        let (status, body) = c.gateway().get_json(p, None);
        assert_eq!(status, 503, "{p}: {body}");
        assert_eq!(body["errorType"], "unavailable", "{p}");
        assert!(body["error"].as_str().is_some_and(|m| m.contains("(0 of 1)") && m.contains("ingester-0")), "{body}");

        let (status, body) = c.gateway().get_json(&format!("{p}&partial_response=true"), None);
        assert_eq!(status, 200, "{p}: {body}");
        let warnings = body["warnings"].as_array().expect("warnings");
        assert!(warnings.iter().any(|w| w.as_str().is_some_and(|w| w.contains("partial response: shards "))), "{body}");

        let (status, body) = c.gateway().get_json(&format!("{p}&partial_response=maybe"), None);
        assert_eq!(status, 400, "{p}: {body}");
        assert!(body["error"].as_str().is_some_and(|m| m.contains("partial_response")), "{body}");
    }
    // The surviving ingester's series are listed with the warning.
    let (_, body) = c.gateway().get_json(&format!("{}&partial_response=true", paths[0]), None);
    let listed = body["data"].as_array().expect("series").len();
    assert!(listed > 0 && listed < 8, "{body}");

    let r = remote_read(&c, "", t - 60_000, t + 60_000);
    assert_eq!(r.status(), 503);
    let r = remote_read(&c, "?partial_response=true", t - 60_000, t + 60_000);
    assert_eq!(r.status(), 200);
    let warning = r.headers().get("warning").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    assert!(warning.starts_with("299 tessera \"partial response: shards "), "{warning:?}");
    let raw = snap::raw::Decoder::new().decompress_vec(&r.bytes().expect("body")).expect("snappy");
    let rr = prometheus::ReadResponse::decode(raw.as_slice()).expect("ReadResponse");
    let n = rr.results[0].timeseries.len();
    assert!(n > 0 && n < 8, "the live ingester's series: {n}");

    let m = metrics(&c);
    assert!(metric_value(&m, "tessera_cluster_shard_coverage_failures_total{op=\"read\",result=\"failed\"}") >= 4.0);
    assert!(metric_value(&m, "tessera_cluster_shard_coverage_failures_total{op=\"read\",result=\"partial\"}") >= 4.0);
    assert!(
        metric_value(
            &m,
            "tessera_cluster_grpc_requests_total{peer=\"ingester-0\",method=\"Series\",code=\"Unavailable\"}"
        ) >= 1.0,
        "{m}"
    );
}

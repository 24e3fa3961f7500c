//! The PromQL HTTP API of the real binary: samples written by remote write come back from
//! `/api/v1/query` and `/api/v1/query_range` in Prometheus' JSON, per tenant, and bad
//! requests get Prometheus' error answers.

use super::harness::{now_ms, ts, write_request, Server};

/// Writes two `up` series and one counter for the default tenant, and one `up` series for
/// tenant `team-a`, all with samples every 15 s over the last 10 minutes (aligned to whole
/// seconds). Returns the time of the last sample (ms).
fn seed(server: &Server) -> i64 {
    let last = now_ms() / 1000 * 1000 - 60_000;
    let times: Vec<i64> = (0..40).map(|i| last - (39 - i) * 15_000).collect();
    let up = |v: f64| times.iter().map(|&t| (t, v)).collect::<Vec<_>>();
    let counter: Vec<(i64, f64)> = times.iter().enumerate().map(|(i, &t)| (t, (i * 30) as f64)).collect();
    let req = write_request(vec![
        ts(&[("__name__", "up"), ("instance", "a:9100"), ("job", "node")], &up(1.0)),
        ts(&[("__name__", "up"), ("instance", "b:9100"), ("job", "node")], &up(0.0)),
        ts(&[("__name__", "requests_total"), ("instance", "a:9100"), ("job", "node")], &counter),
    ]);
    let resp = server.write_v1(&req, None);
    assert!(resp.status().is_success(), "write failed: {:?}", resp.text());
    let req = write_request(vec![ts(&[("__name__", "up"), ("instance", "secret:1"), ("job", "team")], &up(1.0))]);
    let resp = server.write_v1(&req, Some("team-a"));
    assert!(resp.status().is_success(), "write failed: {:?}", resp.text());
    last
}

fn secs(ms: i64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

#[test]
fn query_api_answers_instant_and_range_queries_over_written_samples() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(&dir.path().join("data"));
    let last = seed(&server);

    let (status, v) = server.get_json(&format!("/api/v1/query?query=up&time={}", secs(last)), None);
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"]["resultType"], "vector");
    let result = v["data"]["result"].as_array().expect("result list");
    assert_eq!(result.len(), 2, "{v}");
    let a = result.iter().find(|e| e["metric"]["instance"] == "a:9100").expect("series a");
    assert_eq!(a["metric"], serde_json::json!({"__name__": "up", "instance": "a:9100", "job": "node"}));
    assert_eq!(a["value"], serde_json::json!([last / 1000, "1"]));

    // Counter: 30 per 15 s is 2 per second (up to float rounding of the extrapolation).
    let (status, v) = server
        .get_json(&format!("/api/v1/query?query=rate(requests_total%5B5m%5D)&time={}", secs(last - 30_000)), None);
    assert_eq!(status, 200, "{v}");
    let rate: f64 = v["data"]["result"][0]["value"][1].as_str().and_then(|s| s.parse().ok()).expect("rate value");
    assert!((rate - 2.0).abs() < 1e-9, "{v}");
    assert!(v["data"]["result"][0]["metric"].get("__name__").is_none(), "rate drops the name: {v}");

    let start = last - 120_000;
    let (status, v) = server
        .get_json(&format!("/api/v1/query_range?query=sum(up)&start={}&end={}&step=60", secs(start), secs(last)), None);
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"]["resultType"], "matrix");
    let values = v["data"]["result"][0]["values"].as_array().expect("values");
    assert_eq!(values.len(), 3, "{v}");
    assert_eq!(values[0], serde_json::json!([start / 1000, "1"]));
}

#[test]
fn query_api_keeps_tenants_apart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(&dir.path().join("data"));
    let last = seed(&server);
    let path = format!("/api/v1/query?query=up&time={}", secs(last));
    let (_, anon) = server.get_json(&path, None);
    let (_, team) = server.get_json(&path, Some("team-a"));
    let (_, other) = server.get_json(&path, Some("team-b"));
    assert_eq!(anon["data"]["result"].as_array().map(|a| a.len()), Some(2), "{anon}");
    assert!(!anon.to_string().contains("secret:1"));
    assert_eq!(team["data"]["result"].as_array().map(|a| a.len()), Some(1), "{team}");
    assert_eq!(team["data"]["result"][0]["metric"]["instance"], "secret:1");
    assert_eq!(other["data"]["result"], serde_json::json!([]));

    // Cardinality statistics are per tenant too.
    let (status, stats) = server.get_json("/api/v1/status/tsdb", Some("team-a"));
    assert_eq!(status, 200, "{stats}");
    assert_eq!(stats["data"]["headStats"]["numSeries"], 1, "{stats}");
    assert_eq!(stats["data"]["seriesCountByMetricName"], serde_json::json!([{"name": "up", "value": 1}]));
}

#[test]
fn query_api_rejects_bad_requests_like_prometheus() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(&dir.path().join("data"));

    let (status, v) = server.get_json("/api/v1/query?query=sum(up", None);
    assert_eq!((status, v["errorType"].as_str()), (400, Some("bad_data")), "{v}");

    let (status, v) = server.get_json("/api/v1/query_range?query=up&start=0&end=86400&step=1", None);
    assert_eq!(status, 400, "{v}");
    assert_eq!(
        v["error"],
        "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"
    );

    // A query the parser accepts but evaluation refuses is an execution error (422).
    let (status, v) = server.get_json("/api/v1/query?query=rate(up)", None);
    assert!(status == 400 || status == 422, "{status} {v}");

    // POST form bodies, as Grafana sends them.
    let resp = server
        .http()
        .post(server.url("/api/v1/query"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("query=1%2B2&time=100")
        .send()
        .expect("POST query");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().expect("body"), r#"{"status":"success","data":{"resultType":"scalar","result":[100,"3"]}}"#);

    let (status, v) = server.get_json("/api/v1/status/buildinfo", None);
    assert_eq!(status, 200);
    assert_eq!(v["data"]["version"], "3.0.0");
}

/// A float sample whose NaN payload happens to equal the engine's internal "native
/// histogram" marker is stored and evaluated as a float: `abs` keeps it (a histogram
/// would be dropped by a float function) and `min` returns it.
#[test]
fn float_with_the_internal_marker_nan_payload_is_evaluated_as_a_float() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(&dir.path().join("data"));
    let t = now_ms() / 1000 * 1000 - 60_000;
    // 0x7ff0000000000003 is tessera_model::HISTOGRAM_MARKER_BITS.
    let odd_nan = f64::from_bits(0x7ff0_0000_0000_0003);
    let req = write_request(vec![ts(&[("__name__", "odd_nan"), ("job", "x")], &[(t, odd_nan)])]);
    let resp = server.write_v1(&req, None);
    assert!(resp.status().is_success(), "write failed: {:?}", resp.text());

    for query in ["abs(odd_nan)", "min(odd_nan)"] {
        let (status, v) = server.get_json(&format!("/api/v1/query?query={query}&time={}", secs(t)), None);
        assert_eq!(status, 200, "{v}");
        let result = v["data"]["result"].as_array().expect("result list");
        assert_eq!(result.len(), 1, "{query}: {v}");
        assert_eq!(result[0]["value"][1], "NaN", "{query}: {v}");
    }
}

/// Selectors go through the storage index and `label_replace` through the engine; both
/// read regexes as Go's RE2 does, so `\d` matches the ASCII digit 3 and not the
/// Arabic-Indic digit three, as in Prometheus.
#[test]
fn selector_and_label_replace_share_go_regex_semantics() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(&dir.path().join("data"));
    let t = now_ms() / 1000 * 1000 - 60_000;
    let req = write_request(vec![
        ts(&[("__name__", "gpu_util"), ("gpu", "3")], &[(t, 1.0)]),
        ts(&[("__name__", "gpu_util"), ("gpu", "٣")], &[(t, 2.0)]),
    ]);
    let resp = server.write_v1(&req, None);
    assert!(resp.status().is_success(), "write failed: {:?}", resp.text());

    let query = |q: &str| {
        let q: String = form_urlencoded::byte_serialize(q.as_bytes()).collect();
        let (status, v) = server.get_json(&format!("/api/v1/query?query={q}&time={}", secs(t)), None);
        assert_eq!(status, 200, "{v}");
        v["data"]["result"].as_array().expect("result list").clone()
    };
    let selected = query(r#"gpu_util{gpu=~"\\d+"}"#);
    assert_eq!(selected.len(), 1, "{selected:?}");
    assert_eq!(selected[0]["metric"]["gpu"], "3");
    let replaced = query(r#"label_replace(gpu_util, "n", "$1", "gpu", "(\\d+)")"#);
    let with_n: Vec<_> = replaced.iter().filter(|e| e["metric"].get("n").is_some()).collect();
    assert_eq!(with_n.len(), 1, "{replaced:?}");
    assert_eq!(with_n[0]["metric"]["gpu"], "3");
}

/// Every JSON endpoint is written by the one JSON writer, which escapes strings as Go's
/// encoding/json does (Prometheus' bytes): a label value and a HELP text holding `<`,
/// `>`, `&` and U+2028 come back as `\u003c`, `\u003e`, `\u0026` and `\u2028` from the
/// query, index, metadata and format endpoints and in the error envelope.
#[test]
fn every_json_endpoint_escapes_strings_like_prometheus() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(&dir.path().join("data"));
    let t = now_ms() / 1000 * 1000 - 60_000;
    let mut req = write_request(vec![ts(&[("__name__", "esc"), ("job", "<script>&\u{2028}")], &[(t, 1.0)])]);
    req.metadata = vec![tessera_proto::prometheus::MetricMetadata {
        r#type: tessera_proto::prometheus::metric_metadata::MetricType::Gauge as i32,
        metric_family_name: "esc".into(),
        help: "a <b> & c".into(),
        unit: String::new(),
    }];
    let resp = server.write_v1(&req, None);
    assert!(resp.status().is_success(), "write failed: {:?}", resp.text());

    let raw =
        |path: &str| -> String { server.http().get(server.url(path)).send().expect("answer").text().expect("body") };
    let labels = r#"{"__name__":"esc","job":"\u003cscript\u003e\u0026\u2028"}"#;
    let at = secs(t);
    assert_eq!(
        raw(&format!("/api/v1/query?query=esc&time={at}")),
        format!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{labels},"value":[{},"1"]}}]}}}}"#,
            t / 1000
        )
    );
    assert_eq!(
        raw(&format!("/api/v1/query_range?query=esc&start={at}&end={at}&step=15")),
        format!(
            r#"{{"status":"success","data":{{"resultType":"matrix","result":[{{"metric":{labels},"values":[[{},"1"]]}}]}}}}"#,
            t / 1000
        )
    );
    assert_eq!(raw("/api/v1/series?match%5B%5D=esc"), format!(r#"{{"status":"success","data":[{labels}]}}"#));
    assert_eq!(raw("/api/v1/labels"), r#"{"status":"success","data":["__name__","job"]}"#);
    assert_eq!(raw("/api/v1/label/job/values"), r#"{"status":"success","data":["\u003cscript\u003e\u0026\u2028"]}"#);
    assert_eq!(
        raw("/api/v1/metadata?metric=esc"),
        r#"{"status":"success","data":{"esc":[{"type":"gauge","help":"a \u003cb\u003e \u0026 c","unit":""}]}}"#
    );
    assert_eq!(
        raw("/api/v1/format_query?query=esc%7Bjob%3D%22%3C%26%3E%22%7D"),
        r#"{"status":"success","data":"esc{job=\"\u003c\u0026\u003e\"}"}"#
    );
    // An error message quoting the request is escaped the same way.
    let err = raw("/api/v1/query?query=esc&time=%3Cnow%3E");
    assert!(err.contains(r#"cannot parse \"\u003cnow\u003e\" to a valid timestamp"#), "{err}");
    assert!(!err.contains('<'), "{err}");
}

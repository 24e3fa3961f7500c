//! Every kind of bad remote-write input gets the right status and a message that says
//! what is wrong (and names the first offending series); valid series of the same
//! request are still written; the server keeps serving.

use prost::Message;

use crate::harness::{eq, now_ms, snappy, ts, write_request, Server};

const V1: [(&str, &str); 2] = [("Content-Type", "application/x-protobuf"), ("Content-Encoding", "snappy")];

fn status_and_text(r: reqwest::blocking::Response) -> (u16, String) {
    let code = r.status().as_u16();
    (code, r.text().expect("body"))
}

#[test]
fn undecodable_bodies_and_unsupported_types_get_400_or_415() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(&dir.path().join("data"));

    let (code, msg) = status_and_text(s.post_write(b"definitely not snappy \xff\xff".to_vec(), &V1));
    assert_eq!(code, 400, "{msg}");
    assert!(msg.contains("snappy"), "{msg}");

    let (code, msg) = status_and_text(s.post_write(snappy(b"\x0a\xff\xff\xff\x0f"), &V1));
    assert_eq!(code, 400, "{msg}");
    assert!(msg.contains("protobuf"), "{msg}");

    let body = snappy(&write_request(vec![ts(&[("__name__", "x")], &[(now_ms(), 1.0)])]).encode_to_vec());
    let (code, msg) = status_and_text(
        s.post_write(body.clone(), &[("Content-Type", "application/json"), ("Content-Encoding", "snappy")]),
    );
    assert_eq!(code, 415, "{msg}");
    assert!(msg.contains("Content-Type"), "{msg}");

    let (code, msg) = status_and_text(s.post_write(
        body.clone(),
        &[("Content-Type", "application/x-protobuf;proto=foo.Bar"), ("Content-Encoding", "snappy")],
    ));
    assert_eq!(code, 415, "{msg}");

    let (code, msg) = status_and_text(
        s.post_write(body.clone(), &[("Content-Type", "application/x-protobuf"), ("Content-Encoding", "gzip")]),
    );
    assert_eq!(code, 415, "{msg}");
    assert!(msg.contains("Content-Encoding"), "{msg}");

    // After all that garbage the server still accepts a good request.
    assert_eq!(s.post_write(body, &V1).status(), 204);
}

#[test]
fn invalid_label_sets_get_400_naming_the_first_bad_series_and_valid_series_are_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(&dir.path().join("data"));
    let t = now_ms();
    let many: Vec<(String, String)> = (0..70).map(|i| (format!("l{i:02}"), "v".to_string())).collect();
    let mut too_many: Vec<(&str, &str)> = vec![("__name__", "wide")];
    too_many.extend(many.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    let long_value = "x".repeat(5000);
    let cases: Vec<(&str, Vec<(&str, &str)>, &str)> = vec![
        ("unsorted", vec![("__name__", "bad_unsorted"), ("zone", "a"), ("job", "b")], "not sorted"),
        ("duplicate", vec![("__name__", "bad_dup"), ("job", "a"), ("job", "b")], "duplicate label name \"job\""),
        ("empty name", vec![("", "x"), ("__name__", "bad_empty")], "empty label name"),
        ("no metric name", vec![("job", "nameless")], "missing metric name"),
        ("invalid metric name", vec![("__name__", "0starts_with_digit")], "invalid metric name"),
        ("invalid label name", vec![("__name__", "bad_label"), ("with-dash", "x")], "invalid label name \"with-dash\""),
        ("reserved tenant label", vec![("__name__", "sneaky"), ("__tenant__", "other")], "reserved"),
        ("too many labels", too_many.clone(), "71 labels, more than the limit of 64"),
        ("value too long", vec![("__name__", "long_value"), ("v", long_value.as_str())], "5000 bytes long"),
    ];
    for (what, labels, want) in cases {
        // One good series before and after the bad one: both must be written.
        let good_before = format!("good_before_{}", what.replace(' ', "_"));
        let good_after = format!("good_after_{}", what.replace(' ', "_"));
        let req = write_request(vec![
            ts(&[("__name__", &good_before)], &[(t, 1.0)]),
            ts(&labels, &[(t, 2.0)]),
            ts(&[("__name__", &good_after)], &[(t, 3.0)]),
        ]);
        let (code, msg) = status_and_text(s.write_v1(&req, None));
        assert_eq!(code, 400, "{what}: {msg}");
        assert!(msg.contains(want), "{what}: message {msg:?} should contain {want:?}");
        assert!(msg.starts_with("series "), "{what}: message names the series: {msg}");
        assert!(msg.contains("2 of 3 float samples"), "{what}: {msg}");
        for name in [&good_before, &good_after] {
            let res = s.read(vec![eq("__name__", name)], t, t, None);
            assert_eq!(res.timeseries.len(), 1, "{what}: valid series {name} must be written");
        }
    }
    // The message names the series in Prometheus' text form.
    let req = write_request(vec![ts(&[("__name__", "named"), ("zone", "a"), ("job", "b")], &[(t, 1.0)])]);
    let (_, msg) = status_and_text(s.write_v1(&req, None));
    assert!(msg.contains("named{zone=\"a\", job=\"b\"}"), "{msg}");
}

#[test]
fn samples_older_than_the_out_of_order_window_get_400_and_newer_ones_are_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(&dir.path().join("data"));
    let t = now_ms();
    assert_eq!(s.write_v1(&write_request(vec![ts(&[("__name__", "clock")], &[(t, 1.0)])]), None).status(), 204);
    // One hour back is beyond the default 10-minute out-of-order window.
    let req = write_request(vec![
        ts(&[("__name__", "clock")], &[(t - 3_600_000, 0.0)]),
        ts(&[("__name__", "fresh")], &[(t, 5.0)]),
    ]);
    let (code, msg) = status_and_text(s.write_v1(&req, None));
    assert_eq!(code, 400, "{msg}");
    assert!(msg.contains("clock{}"), "{msg}");
    assert!(msg.contains("too old"), "{msg}");
    assert_eq!(s.read(vec![eq("__name__", "fresh")], t, t, None).timeseries.len(), 1);
    // Re-sending an already stored sample is an idempotent success (sender retries).
    assert_eq!(s.write_v1(&write_request(vec![ts(&[("__name__", "clock")], &[(t, 1.0)])]), None).status(), 204);
}

#[test]
fn samples_far_in_the_future_get_400_and_do_not_hide_existing_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(&dir.path().join("data"));
    let t = now_ms();
    assert_eq!(s.write_v1(&write_request(vec![ts(&[("__name__", "clock")], &[(t, 1.0)])]), None).status(), 204);
    // A sample dated ~100 years ahead (a client with a broken clock, or ns instead of ms)
    // must neither be stored nor move retention past the real data.
    let far = t + 100 * 365 * 86_400_000;
    let req = write_request(vec![ts(&[("__name__", "clock")], &[(t + 1_000, 2.0), (far, 3.0)])]);
    let (code, msg) = status_and_text(s.write_v1(&req, None));
    assert_eq!(code, 400, "{msg}");
    assert!(msg.contains("clock{}") && msg.contains("too far in the future"), "{msg}");
    let got = s.read(vec![eq("__name__", "clock")], t - 1, far, None);
    assert_eq!(got.timeseries.len(), 1);
    let times: Vec<i64> = got.timeseries[0].samples.iter().map(|x| x.timestamp).collect();
    assert_eq!(times, vec![t, t + 1_000], "the in-range sample of the same series is written");
}

#[test]
fn body_over_the_size_limit_gets_413() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start_with_config(&dir.path().join("data"), "[limits]\nmax_request_bytes = 1000\n");
    let (code, msg) = status_and_text(s.post_write(vec![0u8; 5000], &V1));
    assert_eq!(code, 413, "{msg}");
    assert!(msg.contains("max_request_bytes"), "{msg}");
    // Remote read obeys the same limit with the same status.
    let r = s
        .http()
        .post(s.url("/api/v1/read"))
        .header("Content-Type", "application/x-protobuf")
        .header("Content-Encoding", "snappy")
        .body(vec![0u8; 5000])
        .send()
        .expect("read request");
    let (code, msg) = status_and_text(r);
    assert_eq!(code, 413, "{msg}");
}

#[test]
fn over_the_ingestion_rate_gets_429_with_retry_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start_with_config(
        &dir.path().join("data"),
        "[limits]\ningestion_rate_samples_per_sec = 10.0\ningestion_burst_samples = 10\n",
    );
    let t = now_ms();
    let samples: Vec<(i64, f64)> = (0..8).map(|i| (t + i, 1.0)).collect();
    let req = write_request(vec![ts(&[("__name__", "limited")], &samples)]);
    assert_eq!(s.write_v1(&req, Some("small")).status(), 204);
    let req2 = write_request(vec![ts(
        &[("__name__", "limited")],
        &samples.iter().map(|&(t, v)| (t + 100, v)).collect::<Vec<_>>(),
    )]);
    let r = s.write_v1(&req2, Some("small"));
    assert_eq!(r.status(), 429);
    let retry: u64 = r.headers()["Retry-After"].to_str().expect("ascii").parse().expect("seconds");
    assert!(retry >= 1);
    assert!(r.text().expect("body").contains("rate limit"));
    // Another tenant has its own budget.
    assert_eq!(s.write_v1(&req2, Some("other")).status(), 204);
}

#[test]
fn new_series_over_the_active_series_limit_get_429_and_known_series_are_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start_with_config(&dir.path().join("data"), "[limits]\nmax_active_series_per_tenant = 2\n");
    let t = now_ms();
    let req = write_request(vec![ts(&[("__name__", "a")], &[(t, 1.0)]), ts(&[("__name__", "b")], &[(t, 1.0)])]);
    assert_eq!(s.write_v1(&req, None).status(), 204);
    let req = write_request(vec![ts(&[("__name__", "a")], &[(t + 1, 2.0)]), ts(&[("__name__", "c")], &[(t + 1, 1.0)])]);
    let r = s.write_v1(&req, None);
    assert_eq!(r.status(), 429);
    assert!(r.headers().contains_key("Retry-After"));
    let msg = r.text().expect("body");
    assert!(msg.contains("c{}") && msg.contains("max_active_series_per_tenant"), "{msg}");
    assert_eq!(s.read(vec![eq("__name__", "a")], t, t + 1, None).timeseries[0].samples.len(), 2);
    assert!(s.read(vec![eq("__name__", "c")], t, t + 1, None).timeseries.is_empty());
}

#[test]
fn bad_api_parameters_get_prometheus_error_envelopes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(&dir.path().join("data"));
    let (code, body) = s.get_json("/api/v1/series", None);
    assert_eq!(code, 400);
    assert_eq!(body["status"], "error");
    assert_eq!(body["errorType"], "bad_data");
    assert!(body["error"].as_str().expect("message").contains("match[]"));
    let (code, body) = s.get_json("/api/v1/series?match[]=up&start=yesterday", None);
    assert_eq!(code, 400);
    assert!(body["error"].as_str().expect("message").contains("start"));
    let (code, body) = s.get_json("/api/v1/labels?match[]=%7Bjob%3D~%22.*%22%7D", None);
    assert_eq!(code, 400, "{body}");
    let (code, _) = s.get_json("/api/v1/series?match[]=up", Some("bad|tenant"));
    assert_eq!(code, 400);
}

#[test]
fn v2_histograms_exemplars_and_bad_symbol_refs_get_400_with_written_counts() {
    use tessera_proto::{v2, SymbolTable};
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(&dir.path().join("data"));
    let t = now_ms();
    let mut st = SymbolTable::new();
    let ok = st.label_refs([("__name__", "v2_ok")]);
    let with_exemplar = st.label_refs([("__name__", "v2_exemplar")]);
    let histo = st.label_refs([("__name__", "v2_histogram")]);
    let sample = |v| vec![v2::Sample { value: v, timestamp: t, start_timestamp: 0 }];
    let req = v2::Request {
        symbols: st.into_symbols(),
        timeseries: vec![
            v2::TimeSeries { labels_refs: ok, samples: sample(1.0), ..Default::default() },
            v2::TimeSeries {
                labels_refs: with_exemplar,
                samples: sample(2.0),
                exemplars: vec![v2::Exemplar { labels_refs: vec![], value: 2.0, timestamp: t }],
                ..Default::default()
            },
            v2::TimeSeries {
                labels_refs: histo,
                histograms: vec![v2::Histogram { timestamp: t, ..Default::default() }],
                ..Default::default()
            },
            v2::TimeSeries { labels_refs: vec![1, 1000], samples: sample(3.0), ..Default::default() },
        ],
    };
    let r = s.post_write(
        snappy(&req.encode_to_vec()),
        &[("Content-Type", tessera_proto::CONTENT_TYPE_V2), ("Content-Encoding", "snappy")],
    );
    assert_eq!(r.status(), 400);
    assert_eq!(r.headers()["X-Prometheus-Remote-Write-Samples-Written"], "2");
    assert_eq!(r.headers()["X-Prometheus-Remote-Write-Histograms-Written"], "0");
    assert_eq!(r.headers()["X-Prometheus-Remote-Write-Exemplars-Written"], "0");
    let msg = r.text().expect("body");
    assert!(
        msg.contains("v2_exemplar{}") && msg.contains("exemplars"),
        "first offending series is the one with an exemplar: {msg}"
    );
    assert!(msg.contains("3 of 4 series had problems"), "{msg}");
    assert_eq!(
        s.read(vec![eq("__name__", "v2_exemplar")], t, t, None).timeseries.len(),
        1,
        "its float sample is written"
    );
}

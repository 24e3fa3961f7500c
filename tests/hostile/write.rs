//! Hostile input on the write and remote-read side (issue 12): requests built to
//! amplify memory, to outlive their welcome, to plant samples outside the time window,
//! or to bend the HTTP contract. Each gets a clear 4xx/5xx naming the limit, and the
//! server is still healthy afterwards (ready, and a small write is acknowledged).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use prost::Message;
use tessera_proto::{prometheus, v2, SymbolTable};

use crate::harness::{eq, now_ms, snappy, ts, write_request, Server};

const V1: [(&str, &str); 2] = [("Content-Type", "application/x-protobuf"), ("Content-Encoding", "snappy")];
const V2: [(&str, &str); 2] = [("Content-Type", tessera_proto::CONTENT_TYPE_V2), ("Content-Encoding", "snappy")];

fn status_and_text(r: reqwest::blocking::Response) -> (u16, String) {
    let code = r.status().as_u16();
    (code, r.text().expect("body"))
}

/// Ready, and a one-sample write is acknowledged.
fn assert_healthy(s: &Server) {
    assert_eq!(s.http().get(s.url("/-/ready")).send().expect("ready").status(), 200, "stderr:\n{}", s.stderr());
    let req = write_request(vec![ts(&[("__name__", "still_alive")], &[(now_ms(), 1.0)])]);
    assert_eq!(s.write_v1(&req, None).status(), 204, "stderr:\n{}", s.stderr());
}

/// Sends raw bytes on a fresh connection (in a thread, so a server that answers early
/// cannot deadlock the test) and returns (whether every byte was sent, the response
/// head and body as far as its Content-Length says).
fn raw_exchange(s: &Server, head: String, body: Vec<u8>) -> (bool, String) {
    let mut conn = TcpStream::connect(s.addr).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let mut writer = conn.try_clone().expect("clone");
    let sender =
        std::thread::spawn(move || writer.write_all(head.as_bytes()).and_then(|_| writer.write_all(&body)).is_ok());
    let mut resp = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => resp.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&resp).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let len = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                })
                .unwrap_or(0);
            if resp.len() >= end + 4 + len {
                break;
            }
        }
    }
    let sent = sender.join().expect("sender thread");
    (sent, String::from_utf8_lossy(&resp).into_owned())
}

/// Remote write 2.0 lets every series reference one long symbol: a small body would
/// become gigabytes of copied labels. It is refused with 413 before the copies exist.
#[test]
fn v2_symbol_amplification_is_413_before_allocating() {
    let _serial = crate::probe::serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start_with_config(&dir.path().join("data"), "[limits]\nmax_decoded_bytes_per_request = 16777216\n");
    let mut st = SymbolTable::new();
    let value = "v".repeat(4000);
    let refs = st.label_refs([("__name__", "amp"), ("big", value.as_str())]);
    let t = now_ms();
    let req = v2::Request {
        timeseries: (0..20_000)
            .map(|_| v2::TimeSeries {
                labels_refs: refs.clone(),
                samples: vec![v2::Sample { value: 1.0, timestamp: t, start_timestamp: 0 }],
                ..Default::default()
            })
            .collect(),
        symbols: st.into_symbols(),
    };
    let body = snappy(&req.encode_to_vec());
    assert!(body.len() < 400_000, "a small request: {} bytes", body.len());
    let (code, msg) = status_and_text(s.post_write(body, &V2));
    assert_eq!(code, 413, "{msg}");
    assert!(msg.contains("limits.max_decoded_bytes_per_request"), "{msg}");
    assert_healthy(&s);
}

/// Long help texts are cut and a tenant's metadata is bounded in bytes, so repeated
/// requests cannot grow `/api/v1/metadata` to ~100 MB.
#[test]
fn metadata_is_bounded_in_bytes_per_tenant() {
    let _serial = crate::probe::serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start_with_config(
        &dir.path().join("data"),
        "[limits]\nmax_metadata_bytes_per_tenant = 65536\nmax_metadata_text_bytes = 512\n",
    );
    let help = "h".repeat(100_000);
    for round in 0..5 {
        let mut req = write_request(vec![ts(&[("__name__", "m")], &[(now_ms(), 1.0)])]);
        req.metadata = (0..200)
            .map(|i| prometheus::MetricMetadata {
                r#type: 2,
                metric_family_name: format!("family_{round}_{i}"),
                help: help.clone(),
                unit: String::new(),
            })
            .collect();
        assert_eq!(s.write_v1(&req, None).status(), 204);
    }
    let r = s.http().get(s.url("/api/v1/metadata")).send().expect("metadata");
    assert_eq!(r.status(), 200);
    let text = r.text().expect("body");
    assert!(text.len() < 100_000, "metadata response is {} bytes", text.len());
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    let families = v["data"].as_object().expect("object");
    assert!(!families.is_empty());
    assert!(families.values().all(|l| l[0]["help"].as_str().expect("help").len() == 512));
    assert_healthy(&s);
}

/// Samples older than retention, or absurdly old, are refused with a 400 that says why;
/// the rest of the request is written.
#[test]
fn samples_outside_the_time_window_are_refused_and_the_rest_written() {
    let _serial = crate::probe::serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(&dir.path().join("data"));
    let t = now_ms();
    let sixteen_days = 16 * 86_400_000;
    let req = write_request(vec![
        ts(&[("__name__", "window_ok")], &[(t, 1.0)]),
        ts(&[("__name__", "window_old")], &[(t - sixteen_days, 1.0), (t, 2.0)]),
        ts(&[("__name__", "window_ancient")], &[(-(1i64 << 62), 1.0)]),
        ts(&[("__name__", "window_future")], &[(t + 86_400_000, 1.0)]),
    ]);
    let (code, msg) = status_and_text(s.write_v1(&req, None));
    assert_eq!(code, 400, "{msg}");
    assert!(msg.starts_with("series window_old{}: sample at t="), "names the first bad series: {msg}");
    assert!(msg.contains("too old") && msg.contains("storage.retention_ms"), "{msg}");
    assert!(msg.contains("3 of 4 series had problems") && msg.contains("2 of 5 float samples"), "{msg}");
    let ok = s.read(vec![eq("__name__", "window_ok")], t - 1000, t + 1000, None);
    assert_eq!(ok.timeseries.len(), 1);
    let old = s.read(vec![eq("__name__", "window_old")], t - sixteen_days - 1000, t + 1000, None);
    assert_eq!(
        old.timeseries[0].samples,
        vec![prometheus::Sample { value: 2.0, timestamp: t }],
        "only the recent sample"
    );
    let ancient = -(1i64 << 62);
    assert!(s.read(vec![eq("__name__", "window_ancient")], ancient - 1000, ancient + 1000, None).timeseries.is_empty());

    // The bound is configurable.
    drop(s);
    let s = Server::start_with_config(&dir.path().join("data2"), "[limits]\nmax_sample_age_secs = 60\n");
    let (code, msg) =
        status_and_text(s.write_v1(&write_request(vec![ts(&[("__name__", "w")], &[(t - 120_000, 1.0)])]), None));
    assert_eq!(code, 400, "{msg}");
    assert!(msg.contains("at most 60 s before the server clock"), "{msg}");
    assert_healthy(&s);
}

/// Filtering a large request is linear and off the async workers: while 100,000
/// series dated in the future are refused, `/-/ready` answers promptly.
#[test]
fn a_large_request_of_refused_samples_does_not_block_the_server() {
    let _serial = crate::probe::serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(&dir.path().join("data"));
    let future = now_ms() + 86_400_000;
    let series: Vec<prometheus::TimeSeries> =
        (0..100_000).map(|i| ts(&[("__name__", "flood"), ("i", &i.to_string())], &[(future, 1.0)])).collect();
    let body = snappy(&write_request(series).encode_to_vec());
    let addr = s.url("/api/v1/write");
    let writer = std::thread::spawn(move || {
        let start = Instant::now();
        let r = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .expect("client")
            .post(addr)
            .header("Content-Type", "application/x-protobuf")
            .header("Content-Encoding", "snappy")
            .body(body)
            .send()
            .expect("write");
        (r.status().as_u16(), r.text().expect("body"), start.elapsed())
    });
    let mut slowest = Duration::ZERO;
    while !writer.is_finished() {
        slowest = slowest.max(crate::probe::assert_reachable(&s, "a 100,000-series request of refused samples"));
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, msg, took) = writer.join().expect("writer");
    assert_eq!(code, 400, "{msg}");
    assert!(msg.contains("too far in the future") && msg.contains("100000 of 100000 series had problems"), "{msg}");
    eprintln!("100,000 refused series answered in {took:?}; slowest probe meanwhile {slowest:?}");
    assert_healthy(&s);
}

/// Remote read: too many queries is a 400 naming the limit; a request that does not
/// finish within the query timeout (here: a client that never sends its body) gets 503
/// `timeout`, and while it waits it holds no read slot, so other reads are served.
/// (Waiting for a slot is tested in `http/read/tests.rs`.)
#[test]
fn remote_read_is_bounded_in_queries_and_time() {
    let _serial = crate::probe::serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start_with_config(
        &dir.path().join("data"),
        "[limits]\nmax_read_queries_per_request = 4\nmax_concurrent_reads = 1\n[query]\ntimeout_secs = 2\n",
    );
    let query = || prometheus::Query {
        start_timestamp_ms: 0,
        end_timestamp_ms: 1,
        matchers: vec![eq("__name__", "x")],
        hints: None,
    };
    let post_read = |queries: Vec<prometheus::Query>| {
        let req = prometheus::ReadRequest { queries, accepted_response_types: vec![] };
        s.http().post(s.url("/api/v1/read")).headers_from(&V1).body(snappy(&req.encode_to_vec())).send().expect("read")
    };
    let (code, msg) = status_and_text(post_read((0..5).map(|_| query()).collect()));
    assert_eq!(code, 400, "{msg}");
    assert!(msg.contains("5 queries") && msg.contains("limits.max_read_queries_per_request"), "{msg}");
    assert_eq!(post_read((0..4).map(|_| query()).collect()).status(), 200);

    // A client that announces a body and never sends it...
    let mut stalled = TcpStream::connect(s.addr).expect("connect");
    stalled
        .write_all(b"POST /api/v1/read HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 100\r\n\r\n")
        .expect("send head");
    let stalled_at = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    // ...does not keep the only slot from others...
    assert_eq!(post_read(vec![query()]).status(), 200);
    assert!(stalled_at.elapsed() < Duration::from_millis(1800), "served only after {:?}", stalled_at.elapsed());
    // ...and is ended by its deadline.
    stalled.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let mut resp = Vec::new();
    let _ = stalled.read_to_end(&mut resp);
    let resp = String::from_utf8_lossy(&resp);
    assert!(resp.starts_with("HTTP/1.1 503"), "{resp}");
    assert!(resp.contains("query.timeout_secs"), "{resp}");
    let took = stalled_at.elapsed();
    assert!(took >= Duration::from_millis(1800) && took < Duration::from_secs(10), "answered after {took:?}");
    assert_healthy(&s);
}

/// Small contract fixes: a repeated tenant header, a 2.0 `symbols[0]` that is not "",
/// and a path that is not UTF-8 once decoded.
#[test]
fn contract_violations_get_clear_400s() {
    let _serial = crate::probe::serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(&dir.path().join("data"));
    let body = snappy(&write_request(vec![ts(&[("__name__", "x")], &[(now_ms(), 1.0)])]).encode_to_vec());
    let r = s
        .http()
        .post(s.url("/api/v1/write"))
        .headers_from(&V1)
        .header("X-Scope-OrgID", "a")
        .header("X-Scope-OrgID", "b")
        .body(body)
        .send();
    let (code, msg) = status_and_text(r.expect("write"));
    assert_eq!(code, 400, "{msg}");
    assert!(msg.contains("X-Scope-OrgID is given 2 times"), "{msg}");
    let r = s
        .http()
        .get(s.url("/api/v1/labels"))
        .header("X-Scope-OrgID", "a")
        .header("X-Scope-OrgID", "b")
        .send()
        .expect("labels");
    assert_eq!(r.status(), 400);
    let v: serde_json::Value = r.json().expect("JSON envelope");
    assert_eq!(v["errorType"], "bad_data");

    let req = v2::Request {
        symbols: vec!["__name__".into(), "up".into()],
        timeseries: vec![v2::TimeSeries {
            labels_refs: vec![0, 1],
            samples: vec![v2::Sample { value: 1.0, timestamp: now_ms(), start_timestamp: 0 }],
            ..Default::default()
        }],
    };
    let (code, msg) = status_and_text(s.post_write(snappy(&req.encode_to_vec()), &V2));
    assert_eq!(code, 400, "{msg}");
    assert!(msg.contains("symbols[0] must be the empty string"), "{msg}");

    let (code, v) = s.get_json("/api/v1/label/%ff/values", None);
    assert_eq!(code, 400, "{v}");
    assert_eq!(v["status"], "error");
    assert_eq!(v["errorType"], "bad_data");
    assert!(v["error"].as_str().expect("message").contains("URL path"), "{v}");
    assert_healthy(&s);
}

/// A body over the limit gets a 413 that reaches the sender: the server reads and
/// discards the rest before answering, so a client that writes the whole body first
/// (as Prometheus does) is not reset mid-send. With and without Content-Length.
#[test]
fn oversized_body_gets_a_413_the_sender_can_read() {
    let _serial = crate::probe::serial();
    let dir = tempfile::tempdir().expect("tempdir");
    // 20 MB: more than the kernel's socket buffers absorb, so a server that answers
    // and closes without reading resets the sender mid-body (measured: broken pipe).
    let s = Server::start_with_config(&dir.path().join("data"), "[limits]\nmax_request_bytes = 8388608\n");
    let body = vec![b'x'; 20_000_000];
    let head = format!(
        "POST /api/v1/write HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Encoding: snappy\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let (sent, resp) = raw_exchange(&s, head, body.clone());
    assert!(sent, "the whole body could be sent; response: {resp}");
    assert!(resp.starts_with("HTTP/1.1 413"), "{resp}");
    assert!(resp.contains("limits.max_request_bytes"), "{resp}");

    // Chunked: the size is only known while reading.
    let mut chunked = Vec::new();
    for part in body.chunks(64 << 10) {
        chunked.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
        chunked.extend_from_slice(part);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let head = "POST /api/v1/write HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nTransfer-Encoding: chunked\r\n\r\n".to_string();
    let (sent, resp) = raw_exchange(&s, head, chunked);
    assert!(sent, "the whole chunked body could be sent; response: {resp}");
    assert!(resp.starts_with("HTTP/1.1 413"), "{resp}");
    assert_healthy(&s);
}

/// Extension for the tests' request builders: a header list at once.
trait HeadersFrom {
    fn headers_from(self, h: &[(&str, &str)]) -> Self;
}

impl HeadersFrom for reqwest::blocking::RequestBuilder {
    fn headers_from(mut self, h: &[(&str, &str)]) -> Self {
        for (k, v) in h {
            self = self.header(*k, *v);
        }
        self
    }
}

/// An index call with a form body over the size limit gets 413 in the JSON envelope,
/// like every other error of the API (not axum's plain text).
#[test]
fn oversized_index_form_gets_413_in_the_json_envelope() {
    let _serial = crate::probe::serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(&dir.path().join("data"));
    let form = format!("match[]=up&start={}", "1".repeat(3 << 20));
    // Label values is GET only (as in Prometheus); a GET may still carry a body.
    for (post, path) in [(true, "/api/v1/series"), (true, "/api/v1/labels"), (false, "/api/v1/label/job/values")] {
        let r = if post { s.http().post(s.url(path)) } else { s.http().get(s.url(path)) };
        let r =
            r.header("Content-Type", "application/x-www-form-urlencoded").body(form.clone()).send().expect("answer");
        let (code, text) = status_and_text(r);
        assert_eq!(code, 413, "{path}: {text}");
        let body: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {text}"));
        assert_eq!(body["status"], "error", "{path}: {body}");
        assert_eq!(body["errorType"], "bad_data", "{path}: {body}");
    }
    assert_healthy(&s);
}

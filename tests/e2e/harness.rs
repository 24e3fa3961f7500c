//! Boots the real `tessera` binary on `127.0.0.1:0` and talks to it over HTTP.
//!
//! The binary is the one cargo built for this test run (`CARGO_BIN_EXE_tessera`; the
//! test target is declared in `server/Cargo.toml` so that `cargo test --workspace`
//! always builds the current `tessera` binary first).
//! The server prints `listening on ADDR` on stdout; we read the port from there and
//! then poll `/-/ready` (never a fixed sleep).

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use prost::Message;
use reqwest::blocking::{Client, Response};
use tessera_proto::prometheus;

/// How long a server gets to print its address and to become ready.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Path of the `tessera` binary cargo built for this test run.
pub fn tessera_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tessera"))
}

/// A running `tessera serve` child process.
pub struct Server {
    child: Option<Child>,
    pub addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
    http: Client,
}

impl Server {
    /// Starts a server with 2 shards on a free port over `data_dir`.
    pub fn start(data_dir: &Path) -> Server {
        Self::start_with_config(data_dir, "")
    }

    /// Starts a server with extra TOML config (e.g. a `[limits]` table).
    pub fn start_with_config(data_dir: &Path, toml: &str) -> Server {
        std::fs::create_dir_all(data_dir).expect("create data dir");
        let cfg_path = data_dir.with_extension("toml");
        std::fs::write(&cfg_path, toml).expect("write config");
        let mut child = Command::new(tessera_binary())
            .arg("serve")
            .arg("--listen=127.0.0.1:0")
            .arg(format!("--data-dir={}", data_dir.display()))
            .arg("--shards=2")
            .arg(format!("--config={}", cfg_path.display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tessera");

        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().expect("stderr piped");
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().expect("stderr buffer").push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let out_pipe = child.stdout.take().expect("stdout piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out_pipe).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("listening on ") {
                    let _ = tx.send(addr.trim().to_owned());
                }
            }
        });
        let addr = match rx.recv_timeout(START_TIMEOUT) {
            Ok(a) => a.parse().expect("server printed a socket address"),
            Err(_) => {
                let _ = child.kill();
                panic!("tessera did not print its address; stderr:\n{}", stderr.lock().expect("stderr"));
            }
        };
        let http = Client::builder().timeout(Duration::from_secs(30)).build().expect("http client");
        let server = Server { child: Some(child), addr, stderr, http };
        server.wait_ready();
        server
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(r) = self.http.get(self.url("/-/ready")).send() {
                if r.status() == 200 {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "tessera not ready in time; stderr:\n{}", self.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr buffer").clone()
    }

    pub fn http(&self) -> &Client {
        &self.http
    }

    /// POSTs a raw body to `/api/v1/write` with the given headers.
    pub fn post_write(&self, body: Vec<u8>, headers: &[(&str, &str)]) -> Response {
        let mut req = self.http.post(self.url("/api/v1/write")).body(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.send().expect("write request")
    }

    /// Sends a remote-write 1.0 request the way Prometheus does.
    pub fn write_v1(&self, req: &prometheus::WriteRequest, tenant: Option<&str>) -> Response {
        let mut headers = vec![
            ("Content-Type", "application/x-protobuf"),
            ("Content-Encoding", "snappy"),
            ("X-Prometheus-Remote-Write-Version", "0.1.0"),
        ];
        if let Some(t) = tenant {
            headers.push(("X-Scope-OrgID", t));
        }
        self.post_write(snappy(&req.encode_to_vec()), &headers)
    }

    /// Remote read (SAMPLES) of one query.
    pub fn read(
        &self,
        matchers: Vec<prometheus::LabelMatcher>,
        start: i64,
        end: i64,
        tenant: Option<&str>,
    ) -> prometheus::QueryResult {
        let req = prometheus::ReadRequest {
            queries: vec![prometheus::Query {
                start_timestamp_ms: start,
                end_timestamp_ms: end,
                matchers,
                hints: None,
            }],
            accepted_response_types: vec![],
        };
        let mut r = self
            .http
            .post(self.url("/api/v1/read"))
            .header("Content-Type", "application/x-protobuf")
            .header("Content-Encoding", "snappy")
            .body(snappy(&req.encode_to_vec()));
        if let Some(t) = tenant {
            r = r.header("X-Scope-OrgID", t);
        }
        let resp = r.send().expect("read request");
        assert_eq!(resp.status(), 200, "remote read failed: {:?}", resp.text());
        let body = resp.bytes().expect("read body");
        let raw = snap::raw::Decoder::new().decompress_vec(&body).expect("snappy response");
        let mut rr = prometheus::ReadResponse::decode(raw.as_slice()).expect("ReadResponse");
        assert_eq!(rr.results.len(), 1);
        rr.results.remove(0)
    }

    /// GET a JSON API path; returns (status, body).
    pub fn get_json(&self, path_and_query: &str, tenant: Option<&str>) -> (u16, serde_json::Value) {
        let mut r = self.http.get(self.url(path_and_query));
        if let Some(t) = tenant {
            r = r.header("X-Scope-OrgID", t);
        }
        let resp = r.send().expect("GET");
        let status = resp.status().as_u16();
        let body = resp.json().expect("JSON body");
        (status, body)
    }

    /// SIGTERM, then wait for the exit status.
    pub fn terminate(mut self) -> ExitStatus {
        let mut child = self.child.take().expect("server running");
        // SIGTERM through kill(1): the tests forbid `unsafe`, and std only sends SIGKILL.
        let sent = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
        assert!(matches!(&sent, Ok(s) if s.success()), "kill -TERM {} failed: {sent:?}", child.id());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(st) = child.try_wait().expect("wait") {
                if !st.success() {
                    // Shown with the failing test's output: why the server exited badly.
                    eprintln!("tessera exited with {st} after SIGTERM; stderr:\n{}", self.stderr());
                }
                return st;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("tessera did not exit after SIGTERM; stderr:\n{}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: no chance to flush anything.
    pub fn kill9(mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn snappy(b: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new().compress_vec(b).expect("snappy compress")
}

/// A 1.0 series from label pairs (given in the order to send) and (t, v) samples.
pub fn ts(labels: &[(&str, &str)], samples: &[(i64, f64)]) -> prometheus::TimeSeries {
    prometheus::TimeSeries {
        labels: labels.iter().map(|(n, v)| prometheus::Label::new(n.to_string(), v.to_string())).collect(),
        samples: samples.iter().map(|&(t, v)| prometheus::Sample { value: v, timestamp: t }).collect(),
        ..Default::default()
    }
}

pub fn write_request(series: Vec<prometheus::TimeSeries>) -> prometheus::WriteRequest {
    prometheus::WriteRequest { timeseries: series, metadata: vec![] }
}

/// An equality matcher for remote read.
pub fn eq(name: &str, value: &str) -> prometheus::LabelMatcher {
    prometheus::LabelMatcher { r#type: 0, name: name.into(), value: value.into() }
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock after 1970").as_millis() as i64
}

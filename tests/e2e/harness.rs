//! Boots the real `tessera serve` on `127.0.0.1:0` and talks to it over HTTP, through
//! the process handling the suites share (`tessera_tests::Proc`: spawn, address from
//! the `listening on ADDR` line, `/-/ready` polling, signals).
//!
//! The binary is the one cargo built for this test run (`CARGO_BIN_EXE_tessera`; the
//! test target is declared in `server/Cargo.toml` so that `cargo test --workspace`
//! always builds the current `tessera` binary first).

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use prost::Message;
use tessera_proto::prometheus;
pub use tessera_tests::{snappy, Proc};

/// Path of the `tessera` binary cargo built for this test run.
pub fn tessera_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tessera"))
}

/// A running `tessera serve` child process: a [`Proc`] (its HTTP helpers, signals
/// and kill) over a data directory.
pub struct Server {
    proc: Proc,
}

impl Deref for Server {
    type Target = Proc;
    fn deref(&self) -> &Proc {
        &self.proc
    }
}

impl DerefMut for Server {
    fn deref_mut(&mut self) -> &mut Proc {
        &mut self.proc
    }
}

impl Server {
    /// Starts a server with 2 shards on a free port over `data_dir`.
    pub fn start(data_dir: &Path) -> Server {
        Self::start_with_config(data_dir, "")
    }

    /// Starts a server with extra TOML config (e.g. a `[limits]` table) and waits until
    /// it is ready.
    pub fn start_with_config(data_dir: &Path, toml: &str) -> Server {
        std::fs::create_dir_all(data_dir).expect("create data dir");
        let cfg_path = data_dir.with_extension("toml");
        std::fs::write(&cfg_path, toml).expect("write config");
        let proc = Proc::start(
            &tessera_binary(),
            &[
                "serve",
                "--listen=127.0.0.1:0",
                &format!("--data-dir={}", data_dir.display()),
                "--shards=2",
                &format!("--config={}", cfg_path.display()),
            ],
        );
        proc.wait_ready();
        Server { proc }
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
            .http()
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

    /// SIGTERM, then wait for the exit status.
    pub fn terminate(mut self) -> ExitStatus {
        self.proc.terminate()
    }

    /// SIGKILL: no chance to flush anything.
    pub fn kill9(mut self) {
        self.proc.kill9();
    }
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

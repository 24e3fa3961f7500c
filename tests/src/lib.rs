//! What the process-booting test suites share: starting a `tessera` process, reading
//! its address, waiting for readiness, talking to it over HTTP, signalling and killing
//! it.
//!
//! The suites' sources live in this folder (`e2e/`, `hostile/`, `cluster/`, `deploy/`)
//! but their test targets are declared in `server/Cargo.toml`: only a package's own
//! integration tests make `cargo test --workspace` build that package's binary first and
//! tell the tests where it is (`CARGO_BIN_EXE_tessera`). So this library never names the
//! binary: each suite passes the path it was given.
//!
//! A process prints `listening on ADDR` on stdout once its HTTP listener is bound (port 0
//! picks a free one); [`Proc::start`] reads the address from there, and readiness is
//! polled on `/-/ready`, never a fixed sleep.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use prost::Message;
use reqwest::blocking::{Client, Response};
use tessera_proto::prometheus::WriteRequest;

/// How long a process gets to print its address, to become ready and to exit on SIGTERM.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A free loopback port for a process to bind later (a cluster's config names its
/// members' addresses before they start). It is picked below the kernel's ephemeral range
/// (`ip_local_port_range`). A port from `bind(:0)` was once taken, before the process
/// bound it, by another test's listener on port 0 or outgoing connection: the kernel
/// gives those ports from that range. Ports are handed out in turn from a per-process
/// start, so two tests of one binary never get the same one, and each is checked free by
/// binding it.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const LOWEST: u32 = 10_000;
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next().and_then(|p| p.parse::<u32>().ok()))
        .unwrap_or(32_768);
    let span = ephemeral_start.saturating_sub(LOWEST);
    if span >= 1_000 {
        let start = std::process::id().wrapping_mul(7_919) % span;
        for _ in 0..span {
            let port = LOWEST + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span;
            if std::net::TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
                return port as u16;
            }
        }
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Snappy block compression, as remote write and remote read frame their bodies.
pub fn snappy(b: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new().compress_vec(b).expect("snappy compress")
}

/// One running `tessera` process; killed (SIGKILL) when dropped.
pub struct Proc {
    child: Option<Child>,
    pub addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
    http: Client,
}

impl Proc {
    /// Starts `binary ARGS` and waits for its `listening on` line (not for readiness).
    pub fn start(binary: &Path, args: &[&str]) -> Proc {
        let mut child = Command::new(binary)
            .args(args)
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
        let out = child.stdout.take().expect("stdout piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some(a) = line.strip_prefix("listening on ") {
                    let _ = tx.send(a.trim().to_owned());
                }
            }
        });
        let addr = match rx.recv_timeout(START_TIMEOUT) {
            Ok(a) => a.parse().expect("a socket address"),
            Err(_) => {
                let _ = child.kill();
                panic!("tessera {args:?} did not print its address; stderr:\n{}", stderr.lock().expect("stderr"));
            }
        };
        let http = Client::builder().timeout(Duration::from_secs(30)).build().expect("http client");
        Proc { child: Some(child), addr, stderr, http }
    }

    /// Polls `/-/ready` until it answers 200 (panics with the stderr after 60 s).
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + START_TIMEOUT;
        while self.status_code("/-/ready") != 200 {
            assert!(Instant::now() < deadline, "not ready in time; stderr:\n{}", self.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The status of `GET path`, 0 when the request itself failed.
    pub fn status_code(&self, path: &str) -> u16 {
        self.http.get(self.url(path)).send().map(|r| r.status().as_u16()).unwrap_or(0)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn http(&self) -> &Client {
        &self.http
    }

    /// Everything the process wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr buffer").clone()
    }

    /// POSTs a raw body to `/api/v1/write` with the given headers.
    pub fn post_write(&self, body: Vec<u8>, headers: &[(&str, &str)]) -> Response {
        let mut req = self.http.post(self.url("/api/v1/write")).body(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.send().expect("write request")
    }

    /// Sends a remote-write 1.0 request the way Prometheus does, under `tenant`
    /// (`X-Scope-OrgID`) if given.
    pub fn write_v1(&self, req: &WriteRequest, tenant: Option<&str>) -> Response {
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

    /// GET a JSON API path (under `tenant` if given); returns (status, body).
    pub fn get_json(&self, path_and_query: &str, tenant: Option<&str>) -> (u16, serde_json::Value) {
        let mut r = self.http.get(self.url(path_and_query));
        if let Some(t) = tenant {
            r = r.header("X-Scope-OrgID", t);
        }
        let resp = r.send().expect("GET");
        let status = resp.status().as_u16();
        (status, resp.json().expect("JSON body"))
    }

    /// Sends `sig` (e.g. `STOP`, `CONT`, `TERM`) through kill(1); the tests forbid `unsafe`.
    pub fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("running").id();
        let st = Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status();
        assert!(matches!(&st, Ok(s) if s.success()), "kill -{sig} {pid}: {st:?}");
    }

    /// SIGTERM, then the exit status (SIGKILL and a panic if it takes over 60 s).
    pub fn terminate(&mut self) -> ExitStatus {
        self.signal("TERM");
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(st) = child.try_wait().expect("wait") {
                if !st.success() {
                    // Shown with the failing test's output: why the process exited badly.
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

    /// SIGKILL: nothing is flushed. A no-op once the process is gone.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

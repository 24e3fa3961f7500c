//! Starting, killing and restarting the processes of a loopback cluster.
//!
//! Ingesters need each other's gRPC addresses in the shared config before any of them
//! starts, so their gRPC ports are picked free (bind port 0, note it, release it); HTTP
//! ports are port 0 and read from each process' `listening on ADDR` line. Readiness is
//! polled on `/-/ready`, never a fixed sleep.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use prost::Message;
use reqwest::blocking::{Client, Response};
use tessera_proto::prometheus::WriteRequest;

use super::harness::{snappy, tessera_binary};

const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A free loopback port (released before use; the race with other processes is
/// accepted in tests).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// The `[cluster]` keys (without the header) of a cluster of ingesters at `grpc`.
pub fn cluster_body(grpc: &[SocketAddr], rf: u32, shards: u32, extra: &str) -> String {
    let list: Vec<String> =
        grpc.iter().enumerate().map(|(i, a)| format!("  {{ id = \"ingester-{i}\", addr = \"{a}\" }},")).collect();
    format!("shards = {shards}\nreplication_factor = {rf}\n{extra}ingesters = [\n{}\n]\n", list.join("\n"))
}

/// A whole config file with a `[cluster]` table.
pub fn config_toml(grpc: &[SocketAddr], rf: u32, shards: u32, extra: &str) -> String {
    format!("[cluster]\n{}", cluster_body(grpc, rf, shards, extra))
}

/// One running `tessera` process.
pub struct Proc {
    child: Option<Child>,
    pub addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
    http: Client,
}

impl Proc {
    /// Starts `tessera ARGS` and waits for its `listening on` line (not for readiness).
    pub fn start(args: &[&str]) -> Proc {
        let mut child = Command::new(tessera_binary())
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

    pub fn wait_ready(&self) {
        let deadline = Instant::now() + START_TIMEOUT;
        while self.status_code("/-/ready") != 200 {
            assert!(Instant::now() < deadline, "not ready in time; stderr:\n{}", self.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn status_code(&self, path: &str) -> u16 {
        self.http.get(self.url(path)).send().map(|r| r.status().as_u16()).unwrap_or(0)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn http(&self) -> &Client {
        &self.http
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr buffer").clone()
    }

    pub fn write_v1(&self, req: &WriteRequest) -> Response {
        self.http
            .post(self.url("/api/v1/write"))
            .header("Content-Type", "application/x-protobuf")
            .header("Content-Encoding", "snappy")
            .header("X-Prometheus-Remote-Write-Version", "0.1.0")
            .body(snappy(&req.encode_to_vec()))
            .send()
            .expect("write request")
    }

    pub fn get_json(&self, path: &str) -> (u16, serde_json::Value) {
        let resp = self.http.get(self.url(path)).send().expect("GET");
        let status = resp.status().as_u16();
        (status, resp.json().expect("JSON body"))
    }

    /// Sends `sig` (e.g. `STOP`, `CONT`) through kill(1); the tests forbid `unsafe`.
    pub fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("running").id();
        let st = Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status();
        assert!(matches!(&st, Ok(s) if s.success()), "kill -{sig} {pid}: {st:?}");
    }

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

/// N ingesters and one gateway on loopback.
pub struct Cluster {
    dir: PathBuf,
    config: PathBuf,
    grpc: Vec<SocketAddr>,
    ingesters: Vec<Option<Proc>>,
    gateway: Option<Proc>,
}

impl Cluster {
    /// Starts `n` ingesters (replication factor `rf`, `shards` logical shards, `extra`
    /// `[cluster]` keys) and a gateway, and waits until all are ready.
    pub fn start(dir: &Path, n: usize, rf: u32, shards: u32, extra: &str) -> Cluster {
        Cluster::start_with_tables(dir, n, rf, shards, extra, "")
    }

    /// [`Cluster::start`] with further config tables (e.g. `[storage]`) after `[cluster]`.
    pub fn start_with_tables(dir: &Path, n: usize, rf: u32, shards: u32, extra: &str, tables: &str) -> Cluster {
        let grpc: Vec<SocketAddr> = (0..n).map(|_| SocketAddr::from(([127, 0, 0, 1], free_port()))).collect();
        let config = dir.join("cluster.toml");
        let extra = format!("health_check_interval_ms = 200\n{extra}");
        std::fs::write(&config, format!("{}{tables}", config_toml(&grpc, rf, shards, &extra))).expect("write config");
        let mut c = Cluster { dir: dir.to_owned(), config, grpc, ingesters: Vec::new(), gateway: None };
        for i in 0..n {
            let p = c.spawn_ingester(i);
            c.ingesters.push(Some(p));
        }
        for p in c.ingesters.iter().flatten() {
            p.wait_ready();
        }
        let gateway = Proc::start(&["gateway", &format!("--config={}", c.config.display()), "--listen=127.0.0.1:0"]);
        gateway.wait_ready();
        c.gateway = Some(gateway);
        c
    }

    fn spawn_ingester(&self, i: usize) -> Proc {
        Proc::start(&[
            "ingester",
            &format!("--config={}", self.config.display()),
            &format!("--id=ingester-{i}"),
            &format!("--data-dir={}", self.data_dir(i).display()),
            "--listen=127.0.0.1:0",
            &format!("--grpc-listen={}", self.grpc[i]),
        ])
    }

    pub fn data_dir(&self, i: usize) -> PathBuf {
        self.dir.join(format!("ingester-{i}"))
    }

    pub fn grpc_addr(&self, i: usize) -> SocketAddr {
        self.grpc[i]
    }

    pub fn gateway(&self) -> &Proc {
        self.gateway.as_ref().expect("the gateway runs once start returned")
    }

    /// Ingester `i`'s process.
    pub fn ingester(&self, i: usize) -> &Proc {
        self.ingesters[i].as_ref().expect("ingester running")
    }

    /// SIGKILL ingester `i`: nothing is flushed.
    pub fn kill9(&mut self, i: usize) {
        if let Some(mut p) = self.ingesters[i].take() {
            p.kill9();
        }
    }

    /// Waits until ingester `i`'s status says every shard is repaired (no holes).
    pub fn wait_repaired(&self, i: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let (_, st) = self.ingester(i).get_json("/api/v1/status/cluster");
            if st["data"]["repair"]["repaired"] == true {
                return;
            }
            assert!(Instant::now() < deadline, "ingester-{i} not repaired in time: {st}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts ingester `i` again on its data and waits until it is ready.
    pub fn restart(&mut self, i: usize) {
        self.kill9(i);
        let p = self.spawn_ingester(i);
        p.wait_ready();
        self.ingesters[i] = Some(p);
    }
}

//! Starting, killing and restarting the processes of a loopback cluster (each one a
//! `tessera_tests::Proc`, the process handling every suite shares).
//!
//! Ingesters need each other's gRPC addresses in the shared config before any of them
//! starts, so their gRPC ports are picked free (bind port 0, note it, release it); HTTP
//! ports are port 0 and read from each process' `listening on ADDR` line. Readiness is
//! polled on `/-/ready`, never a fixed sleep.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::harness::{tessera_binary, Proc};
use tessera_tests::free_port;

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

/// Starts `tessera ARGS` (the binary of this test run) and waits for its address.
pub fn start(args: &[&str]) -> Proc {
    Proc::start(&tessera_binary(), args)
}

/// What [`Cluster::start_with`] starts.
pub struct Spec<'a> {
    pub ingesters: usize,
    pub replication_factor: u32,
    pub shards: u32,
    /// Extra `[cluster]` keys, one per line.
    pub cluster_keys: &'a str,
    /// Other TOML tables of the shared config (e.g. `[storage]`), after `[cluster]`.
    pub tables: &'a str,
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
        let spec = Spec { ingesters: n, replication_factor: rf, shards, cluster_keys: extra, tables: "" };
        Self::start_with(dir, &spec, &|_, addr| addr)
    }

    /// [`Cluster::start`] with further config tables (e.g. `[storage]`) after `[cluster]`.
    pub fn start_with_tables(dir: &Path, n: usize, rf: u32, shards: u32, extra: &str, tables: &str) -> Cluster {
        let spec = Spec { ingesters: n, replication_factor: rf, shards, cluster_keys: extra, tables };
        Self::start_with(dir, &spec, &|_, addr| addr)
    }

    /// Starts what `spec` says. The gateway reaches ingester `i` (gRPC at `addr`) at
    /// `route(i, addr)`: `addr` itself, or e.g. a proxy in front of it.
    pub fn start_with(dir: &Path, spec: &Spec, route: &dyn Fn(usize, SocketAddr) -> SocketAddr) -> Cluster {
        let grpc: Vec<SocketAddr> =
            (0..spec.ingesters).map(|_| SocketAddr::from(([127, 0, 0, 1], free_port()))).collect();
        let keys = format!("health_check_interval_ms = 200\n{}", spec.cluster_keys);
        let config_for = |addrs: &[SocketAddr]| {
            format!("{}{}", config_toml(addrs, spec.replication_factor, spec.shards, &keys), spec.tables)
        };
        let config = dir.join("cluster.toml");
        std::fs::write(&config, config_for(&grpc)).expect("write config");
        let routed: Vec<SocketAddr> = grpc.iter().enumerate().map(|(i, a)| route(i, *a)).collect();
        let gateway_config = dir.join("gateway.toml");
        std::fs::write(&gateway_config, config_for(&routed)).expect("write config");
        let mut c = Cluster { dir: dir.to_owned(), config, grpc, ingesters: Vec::new(), gateway: None };
        for i in 0..spec.ingesters {
            let p = c.spawn_ingester(i);
            c.ingesters.push(Some(p));
        }
        for p in c.ingesters.iter().flatten() {
            p.wait_ready();
        }
        let gateway = start(&["gateway", &format!("--config={}", gateway_config.display()), "--listen=127.0.0.1:0"]);
        gateway.wait_ready();
        c.gateway = Some(gateway);
        c
    }

    fn spawn_ingester(&self, i: usize) -> Proc {
        start(&[
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
            let (_, st) = self.ingester(i).get_json("/api/v1/status/cluster", None);
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

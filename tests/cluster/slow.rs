//! A slow ingester does not hold query latency hostage: the gateway reaches one of three
//! RF = 3 ingesters through a TCP proxy in this test process that, once switched on,
//! holds every byte the ingester sends back for several seconds. Nothing in the
//! product knows: no test hook, just a slow network path.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::harness::{now_ms, ts, write_request, Server};
use super::proc::{Cluster, Spec};
use super::urlencode;

/// How long the proxy holds each chunk of the slow ingester's answers.
const DELAY: Duration = Duration::from_secs(6);

/// A loopback TCP proxy to `target` that can delay the target's replies.
struct DelayProxy {
    addr: SocketAddr,
    delay_ms: Arc<AtomicU64>,
    /// Chunks of the target's replies held so far.
    held: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl DelayProxy {
    fn start(target: SocketAddr) -> DelayProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let delay_ms = Arc::new(AtomicU64::new(0));
        let held = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (delay, counter, stopped) = (Arc::clone(&delay_ms), Arc::clone(&held), Arc::clone(&stop));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(client) = conn else { continue };
                let Ok(server) = TcpStream::connect(target) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                let (c2, s2) = (client.try_clone().expect("clone"), server.try_clone().expect("clone"));
                let (no_delay, uncounted) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
                std::thread::spawn(move || pump(client, server, &no_delay, &uncounted));
                let (delay, counter) = (Arc::clone(&delay), Arc::clone(&counter));
                std::thread::spawn(move || pump(s2, c2, &delay, &counter));
            }
        });
        DelayProxy { addr, delay_ms, held, stop }
    }

    fn set_delay(&self, d: Duration) {
        self.delay_ms.store(d.as_millis() as u64, Ordering::Relaxed);
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Copies `from` to `to`, holding each chunk for the current delay first (and counting
/// the chunks held in `held`).
fn pump(mut from: TcpStream, mut to: TcpStream, delay_ms: &AtomicU64, held: &AtomicU64) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let d = delay_ms.load(Ordering::Relaxed);
        if d > 0 {
            held.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(d));
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

#[test]
fn a_slow_ingester_does_not_hold_reads_or_writes_and_answers_stay_complete() {
    let dir = tempfile::tempdir().expect("tempdir");
    let proxy = std::sync::Mutex::new(None);
    let spec = Spec { ingesters: 3, replication_factor: 3, shards: 8, cluster_keys: "", tables: "" };
    // The gateway reaches ingester-2 through the proxy; the ingesters reach each other directly.
    let c = Cluster::start_with(dir.path(), &spec, &|i, addr| {
        if i != 2 {
            return addr;
        }
        let p = DelayProxy::start(addr);
        let a = p.addr;
        *proxy.lock().expect("proxy") = Some(p);
        a
    });
    let proxy = proxy.into_inner().expect("proxy").expect("ingester-2 is proxied");
    let single = Server::start(&dir.path().join("single"));

    let base = now_ms() - 600_000;
    let write = |k: i64| {
        let series: Vec<_> = (0..12)
            .map(|s| {
                let inst = format!("i{s}");
                ts(&[("__name__", "slow_test"), ("instance", &inst)], &[(base + k * 15_000, (k * s) as f64)])
            })
            .collect();
        let req = write_request(series);
        let started = Instant::now();
        let r = c.gateway().write_v1(&req, None);
        assert_eq!(r.status(), 204, "{:?}", r.text());
        assert_eq!(single.write_v1(&req, None).status(), 204);
        started.elapsed()
    };
    for k in 0..20 {
        write(k);
    }
    let queries = [
        format!("/api/v1/query?query={}&time={}", urlencode("sum(slow_test)"), (base + 600_000) as f64 / 1000.0),
        format!(
            "/api/v1/query_range?query={}&start={}&end={}&step=15",
            urlencode("slow_test"),
            base as f64 / 1000.0,
            (base + 600_000) as f64 / 1000.0
        ),
        format!("/api/v1/series?match[]=slow_test&start={}", base as f64 / 1000.0),
    ];
    let check = |why: &str| {
        for q in &queries {
            let started = Instant::now();
            let (status, body) = c.gateway().get_json(q, None);
            let took = started.elapsed();
            assert_eq!(status, 200, "{why}: {q}: {body}");
            assert!(body.get("warnings").is_none(), "{why}: a complete answer has no warnings: {body}");
            assert!(took < DELAY / 4, "{why}: {q} took {took:?} with a {DELAY:?} replica");
            let (_, want) = single.get_json(q, None);
            assert_eq!(body["data"], want["data"], "{why}: {q}: the cluster answers like the single node");
        }
    };
    check("all replicas fast");

    proxy.set_delay(DELAY);
    let slow = Instant::now();
    check("ingester-2 slow");
    // Writes are acknowledged by W = 2 of 3 without waiting for the slow one, and the
    // quorum read sees them at once.
    for k in 20..25 {
        let took = write(k);
        assert!(took < DELAY / 4, "a write took {took:?} with a {DELAY:?} replica");
    }
    check("ingester-2 slow, after new writes");
    // The checks really ran while the replica was slow, and it was asked: its replies
    // were held.
    assert!(slow.elapsed() < DELAY, "the slow phase outlasted the delay ({:?})", slow.elapsed());
    assert!(proxy.held.load(Ordering::Relaxed) > 0, "the gateway never talked to the slow ingester");
}

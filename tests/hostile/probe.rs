//! The reachability probe every flood test runs while its flood is in progress: on
//! fresh connections, `/-/ready`, `/metrics` and a one-sample remote write must each
//! be answered within a second.

use std::time::{Duration, Instant};

use prost::Message;
use reqwest::blocking::Client;

use crate::harness::{now_ms, snappy, ts, write_request, Server};

/// The tests of this binary run one at a time: each flood is sized to load this 2-core
/// machine on its own, and a second attack running beside it would turn the "within a
/// second" probes into a measurement of the two together. Every test takes this first.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes the lock (a test that panicked still releases it for the others).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How long each probe may take.
pub const WITHIN: Duration = Duration::from_secs(1);

/// Probes once; panics naming the flood and the probe that was slow or failed.
/// Returns the slowest of the three answers.
pub fn assert_reachable(s: &Server, during: &str) -> Duration {
    // No connection reuse: a flood of connections must not be able to hide behind a
    // kept-alive one.
    let client = Client::builder().timeout(WITHIN).pool_max_idle_per_host(0).build().expect("client");
    let mut slowest = Duration::ZERO;
    let mut timed = |what: &str, f: &dyn Fn() -> Result<u16, String>, want: u16| {
        let started = Instant::now();
        let got = f();
        let took = started.elapsed();
        assert_eq!(got, Ok(want), "{what} during {during} (after {took:?}); stderr:\n{}", s.stderr());
        assert!(took < WITHIN, "{what} took {took:?} during {during}");
        if std::env::var_os("TESSERA_PROBE_TRACE").is_some() && took > WITHIN / 4 {
            eprintln!("{during}: {what} took {took:?}");
        }
        slowest = slowest.max(took);
    };
    let get = |path: &str| -> Result<u16, String> {
        client.get(s.url(path)).send().map(|r| r.status().as_u16()).map_err(|e| e.to_string())
    };
    timed("/-/ready", &|| get("/-/ready"), 200);
    timed("/metrics", &|| get("/metrics"), 200);
    let body = snappy(
        &write_request(vec![ts(&[("__name__", "reachability_probe"), ("during", during)], &[(now_ms(), 1.0)])])
            .encode_to_vec(),
    );
    timed(
        "a one-sample remote write",
        &|| {
            client
                .post(s.url("/api/v1/write"))
                .header("Content-Type", "application/x-protobuf")
                .header("Content-Encoding", "snappy")
                .header("X-Prometheus-Remote-Write-Version", "0.1.0")
                .body(body.clone())
                .send()
                .map(|r| r.status().as_u16())
                .map_err(|e| e.to_string())
        },
        204,
    );
    slowest
}

/// Runs `flood` on `threads` threads until each returns, probing meanwhile; returns
/// how many probe rounds ran (at least one, or the test proves nothing).
pub fn probe_during(s: &Server, during: &str, threads: usize, flood: impl Fn() + Send + Sync + 'static) -> usize {
    let flood = std::sync::Arc::new(flood);
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let f = std::sync::Arc::clone(&flood);
            std::thread::spawn(move || f())
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut rounds = 0;
    let mut slowest = Duration::ZERO;
    while workers.iter().any(|w| !w.is_finished()) {
        let took = assert_reachable(s, during);
        if std::env::var_os("TESSERA_PROBE_TRACE").is_some() {
            eprintln!("{during}: probe round {rounds}: slowest {took:?}");
        }
        slowest = slowest.max(took);
        rounds += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    for w in workers {
        w.join().expect("flood thread panicked");
    }
    assert!(rounds > 0, "the {during} flood ended before any probe ran; make it longer");
    eprintln!("{during}: {rounds} probe rounds, slowest answer {slowest:?}");
    rounds
}

//! Crash and shutdown behaviour: acknowledged writes survive SIGKILL; SIGTERM exits 0
//! after flushing; data survives a restart.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::harness::{eq, now_ms, ts, write_request, Server};

/// Several writer threads stream requests (each: 20 series × 1 new sample) and record
/// which timestamps were acknowledged with 204. The server is SIGKILLed mid-stream,
/// restarted on the same directory, and every acknowledged sample must be there.
#[test]
fn kill_9_during_a_write_stream_loses_no_acknowledged_sample() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let s = Server::start(&data);
    let base = now_ms();
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Mutex<Vec<(usize, i64)>>> = Arc::new(Mutex::new(Vec::new()));
    let url = s.url("/api/v1/write");
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let (stop, acked, url) = (Arc::clone(&stop), Arc::clone(&acked), url.clone());
            std::thread::spawn(move || {
                let client =
                    reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).build().expect("client");
                let mut i = 0i64;
                while !stop.load(Ordering::Relaxed) {
                    let t = base + i;
                    let series = (0..20)
                        .map(|k| {
                            ts(
                                &[("__name__", "crash_test"), ("series", &k.to_string()), ("writer", &w.to_string())],
                                &[(t, i as f64)],
                            )
                        })
                        .collect();
                    let body = crate::harness::snappy(&prost::Message::encode_to_vec(&write_request(series)));
                    let r = client
                        .post(&url)
                        .header("Content-Type", "application/x-protobuf")
                        .header("Content-Encoding", "snappy")
                        .body(body)
                        .send();
                    match r {
                        Ok(resp) if resp.status() == 204 => acked.lock().expect("acked").push((w, t)),
                        // The server died mid-request: this one was never acknowledged.
                        _ => break,
                    }
                    i += 1;
                }
            })
        })
        .collect();
    // Let the stream run until plenty has been acknowledged, then kill without warning.
    let deadline = Instant::now() + Duration::from_secs(30);
    while acked.lock().expect("acked").len() < 150 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    s.kill9();
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().expect("writer thread");
    }
    let acked = acked.lock().expect("acked").clone();
    assert!(acked.len() >= 150, "only {} requests acknowledged before the kill", acked.len());

    let s = Server::start(&data);
    let res = s.read(vec![eq("__name__", "crash_test")], base, base + 1_000_000, None);
    for (w, t) in &acked {
        for k in 0..20 {
            let (series, writer) = (k.to_string(), w.to_string());
            let found = res.timeseries.iter().any(|tsr| {
                let has = |n: &str, v: &str| {
                    tsr.labels.iter().any(|l| &l.name[..] == n.as_bytes() && &l.value[..] == v.as_bytes())
                };
                has("series", &series) && has("writer", &writer) && tsr.samples.iter().any(|p| p.timestamp == *t)
            });
            assert!(found, "acknowledged sample writer={w} series={k} t={t} lost after kill -9");
        }
    }
}

/// SIGTERM while writers are streaming: the server stops accepting, answers what is in
/// flight, exits 0, and every acknowledged sample is there after a restart.
#[test]
fn sigterm_during_a_write_stream_exits_0_and_keeps_every_acknowledged_sample() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let s = Server::start(&data);
    let base = now_ms();
    let acked: Arc<Mutex<Vec<i64>>> = Arc::new(Mutex::new(Vec::new()));
    let url = s.url("/api/v1/write");
    let writer = {
        let acked = Arc::clone(&acked);
        std::thread::spawn(move || {
            let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).build().expect("client");
            for i in 0..100_000i64 {
                let t = base + i;
                let series = (0..10)
                    .map(|k| ts(&[("__name__", "term_test"), ("series", &k.to_string())], &[(t, i as f64)]))
                    .collect();
                let body = crate::harness::snappy(&prost::Message::encode_to_vec(&write_request(series)));
                let r = client.post(&url).header("Content-Type", "application/x-protobuf").body(body).send();
                match r {
                    Ok(resp) if resp.status() == 204 => acked.lock().expect("acked").push(t),
                    _ => break,
                }
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while acked.lock().expect("acked").len() < 50 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let status = s.terminate();
    assert!(status.success(), "exit status after SIGTERM under load: {status:?}");
    writer.join().expect("writer thread");
    let acked = acked.lock().expect("acked").clone();
    assert!(acked.len() >= 50, "only {} writes acknowledged", acked.len());

    let s = Server::start(&data);
    let res = s.read(vec![eq("__name__", "term_test")], base, base + 1_000_000, None);
    assert_eq!(res.timeseries.len(), 10);
    for series in &res.timeseries {
        let stored: std::collections::HashSet<i64> = series.samples.iter().map(|p| p.timestamp).collect();
        for t in &acked {
            assert!(stored.contains(t), "acknowledged sample t={t} lost after SIGTERM");
        }
    }
}

#[test]
fn sigterm_exits_0_and_data_survives_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let s = Server::start(&data);
    let t = now_ms();
    let req = write_request(vec![ts(&[("__name__", "persisted"), ("k", "v")], &[(t, 1.0), (t + 1000, 2.0)])]);
    assert_eq!(s.write_v1(&req, None).status(), 204);
    let status = s.terminate();
    assert!(status.success(), "exit status after SIGTERM: {status:?}");

    let s = Server::start(&data);
    let res = s.read(vec![eq("__name__", "persisted")], t, t + 1000, None);
    assert_eq!(res.timeseries.len(), 1);
    assert_eq!(res.timeseries[0].samples.len(), 2);
}

#[test]
fn restart_with_a_different_shard_count_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let s = Server::start(&data);
    assert!(s.terminate().success());
    let out = std::process::Command::new(crate::harness::tessera_binary())
        .args(["serve", "--listen=127.0.0.1:0", "--shards=3"])
        .arg(format!("--data-dir={}", data.display()))
        .output()
        .expect("run tessera");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("created with 2 shards"), "{err}");
}

/// Without `--shards` a new directory gets 2 shards per core (4..=16), and a directory
/// that recorded another count opens with that one, its data intact.
#[test]
fn without_a_shard_count_the_recorded_one_is_kept() {
    let start = |data: &std::path::Path| {
        let p = tessera_tests::Proc::start(
            &crate::harness::tessera_binary(),
            &["serve", "--listen=127.0.0.1:0", &format!("--data-dir={}", data.display())],
        );
        p.wait_ready();
        p
    };
    let recorded = |data: &std::path::Path| std::fs::read_to_string(data.join("cluster.toml")).expect("cluster.toml");
    let dir = tempfile::tempdir().expect("tempdir");

    let fresh = dir.path().join("fresh");
    let mut p = start(&fresh);
    assert!(p.terminate().success());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let expected = (2 * cores).clamp(4, 16);
    assert!(recorded(&fresh).contains(&format!("shards = {expected}\n")), "{}", recorded(&fresh));

    let data = dir.path().join("data");
    let s = Server::start(&data); // --shards=2
    let t = now_ms();
    let req = write_request(vec![ts(&[("__name__", "kept"), ("k", "v")], &[(t, 1.0)])]);
    assert_eq!(s.write_v1(&req, None).status(), 204);
    assert!(s.terminate().success());
    let p = start(&data);
    let (code, body) = p.get_json(&format!("/api/v1/query?query=kept&time={}", t / 1000 + 1), None);
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["data"]["result"].as_array().map(Vec::len), Some(1), "{body}");
    assert!(recorded(&data).contains("shards = 2\n"));
}

#[test]
fn healthy_and_ready_answer_200_once_started() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(&dir.path().join("data"));
    for path in ["/-/healthy", "/-/ready"] {
        let r = s.http().get(s.url(path)).send().expect("GET");
        assert_eq!(r.status(), 200, "{path}");
    }
}

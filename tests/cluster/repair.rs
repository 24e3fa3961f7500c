//! Repair: a replica that was down catches up from its peers, so that afterwards it
//! alone answers with every acknowledged sample, also when the gap it missed is longer
//! than the storage out-of-order window.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prost::Message;

use super::harness::{now_ms, snappy, ts, write_request};
use super::proc::Cluster;
use super::urlencode;

/// Series per batch.
const SERIES: usize = 6;
/// `[storage] out_of_order_window_ms` of the cluster: far shorter than the gap below.
const WINDOW_MS: i64 = 3000;

/// Writes a batch (one sample per series at `t`, value `k * 10 + i`) through the
/// gateway at `url` every 40 ms until `stop`, retrying each until acknowledged; records
/// the acknowledged `(t, k)`.
fn writer(url: String, stop: Arc<AtomicBool>, acked: Arc<Mutex<Vec<(i64, i64)>>>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).build().expect("client");
        let mut last_t = 0;
        let mut k = 0;
        while !stop.load(Ordering::Relaxed) {
            // Sample time follows wall time, as with a real scraper.
            let t = now_ms().max(last_t + 1);
            let series = (0..SERIES)
                .map(|i| ts(&[("__name__", "repair_test"), ("i", &i.to_string())], &[(t, (k * 10 + i as i64) as f64)]))
                .collect();
            let body = snappy(&write_request(series).encode_to_vec());
            let mut attempts = 0;
            loop {
                attempts += 1;
                let r = http
                    .post(&url)
                    .header("Content-Type", "application/x-protobuf")
                    .header("Content-Encoding", "snappy")
                    .header("X-Prometheus-Remote-Write-Version", "0.1.0")
                    .body(body.clone())
                    .send();
                if r.is_ok_and(|r| r.status() == 204) {
                    break;
                }
                assert!(attempts < 100, "write at {t} never acknowledged");
                std::thread::sleep(Duration::from_millis(50));
            }
            acked.lock().expect("acked").push((t, k));
            last_t = t;
            k += 1;
            std::thread::sleep(Duration::from_millis(40));
        }
    })
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
}

#[test]
fn a_restarted_replica_repairs_a_gap_longer_than_the_out_of_order_window_and_then_alone_has_every_acked_sample() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = Cluster::start_with_tables(
        dir.path(),
        3,
        3,
        4,
        "write_quorum = 2\npush_timeout_ms = 1000\n",
        &format!("[storage]\nout_of_order_window_ms = {WINDOW_MS}\n"),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let w = writer(c.gateway().url("/api/v1/write"), Arc::clone(&stop), Arc::clone(&acked));

    std::thread::sleep(Duration::from_millis(1000));
    c.kill9(0);
    let killed = Instant::now();
    // Ingesters 1 and 2 acknowledge meanwhile; the gap ingester-0 misses is longer than
    // the out-of-order window, so only the catch-up with writes refused can fill it.
    std::thread::sleep(Duration::from_millis(WINDOW_MS as u64 + 1500));
    c.restart(0);
    assert!(killed.elapsed() > Duration::from_millis(WINDOW_MS as u64), "the gap must exceed the window");
    // It reports its hole until repaired, then none.
    c.wait_repaired(0, Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    w.join().expect("writer");
    let acked = acked.lock().expect("acked").clone();
    assert!(acked.len() > 50, "only {} batches acknowledged", acked.len());

    let (_, status) = c.ingester(0).get_json("/api/v1/status/cluster");
    let shards = status["data"]["repair"]["shards"].as_array().expect("repair shards").clone();
    assert_eq!(shards.len(), 4, "RF 3 of 3 ingesters: every shard is on ingester-0: {status}");
    let repaired: i64 = shards.iter().map(|s| s["repaired_samples"].as_i64().expect("count")).sum();
    assert!(repaired > 0, "repair fetched nothing: {status}");
    let metrics = c.ingester(0).http().get(c.ingester(0).url("/metrics")).send().expect("metrics");
    let metrics = metrics.text().expect("metrics text");
    assert!(metric(&metrics, "tessera_cluster_repair_samples_total") >= repaired as f64, "{metrics}");
    assert_eq!(metric(&metrics, "tessera_cluster_repair_pending_shards"), 0.0);
    assert_eq!(metric(&metrics, "tessera_cluster_repair_unrepairable_samples_total"), 0.0);

    // Only ingester-0 is left.
    c.kill9(1);
    c.kill9(2);
    let (first, last) = (acked[0].0, acked[acked.len() - 1].0);
    let range_s = (last - first) / 1000 + 5;
    let q = format!(
        "/api/v1/query?query={}&time={}&partial_response=true",
        urlencode(&format!("repair_test[{range_s}s]")),
        last as f64 / 1000.0
    );
    let (code, body) = c.gateway().get_json(&q);
    assert_eq!(code, 200, "{body}");
    let result = body["data"]["result"].as_array().expect("matrix");
    assert_eq!(result.len(), SERIES, "{body}");
    let mut got: BTreeMap<String, Vec<(i64, f64)>> = BTreeMap::new();
    for s in result {
        let i = s["metric"]["i"].as_str().expect("label i").to_owned();
        let values = s["values"].as_array().expect("values");
        got.insert(
            i,
            values
                .iter()
                .map(|p| {
                    let t = (p[0].as_f64().expect("time") * 1000.0).round() as i64;
                    (t, p[1].as_str().expect("value").parse().expect("number"))
                })
                .collect(),
        );
    }
    for i in 0..SERIES {
        let want: Vec<(i64, f64)> = acked.iter().map(|&(t, k)| (t, (k * 10 + i as i64) as f64)).collect();
        let have = &got[&i.to_string()];
        let missing: Vec<&(i64, f64)> = want.iter().filter(|p| !have.contains(p)).collect();
        assert!(
            missing.is_empty(),
            "series i={i}: {} of {} acknowledged samples missing from ingester-0 after repair, first {:?}; gap \
             written while it was down",
            missing.len(),
            want.len(),
            missing.first()
        );
        assert_eq!(have.len(), want.len(), "series i={i}: unexpected extra samples");
    }
}

//! `tessera import`: a backfilled directory is served by `tessera serve` (PromQL sees
//! every imported sample), a bad line fails the import with `file:line` and leaves the
//! directory as it was, and a directory held by a running server is refused.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::harness::{now_ms, tessera_binary, Server};

const SERIES: usize = 4;
const SAMPLES: usize = 3000;
const STEP_MS: i64 = 10_000;

fn import(data: &Path, files: &[&Path]) -> Output {
    Command::new(tessera_binary())
        .arg("import")
        .arg(format!("--data-dir={}", data.display()))
        .arg("--shards=2")
        .args(files)
        .output()
        .expect("run tessera import")
}

/// Every file under `dir` with its size.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, u64> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).expect("read dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(snapshot(&p));
        } else {
            out.insert(p, e.metadata().map(|m| m.len()).unwrap_or(0));
        }
    }
    out
}

/// An OpenMetrics file (seconds) of SERIES gauges × SAMPLES samples, scrape order
/// (every series at one time, then the next time), ending at `last_ms`. Value of
/// series g at step i: g * 100000 + i.
fn openmetrics_file(path: &Path, last_ms: i64) {
    let first = last_ms - (SAMPLES as i64 - 1) * STEP_MS;
    let mut text = String::from("# HELP gpu_temp GPU temperature.\n# TYPE gpu_temp gauge\n# UNIT gpu_temp celsius\n");
    for i in 0..SAMPLES {
        let t = first + i as i64 * STEP_MS;
        for g in 0..SERIES {
            let v = g * 100_000 + i;
            text.push_str(&format!("gpu_temp{{gpu=\"{g}\",host=\"n\\\"1\"}} {v} {}.{:03}\n", t / 1000, t % 1000));
        }
    }
    text.push_str("# EOF\n");
    std::fs::write(path, text).expect("write input");
}

fn scalar(v: &serde_json::Value) -> f64 {
    v["data"]["result"][0]["value"][1].as_str().expect("a value").parse().expect("a number")
}

#[test]
fn imported_openmetrics_data_is_served_by_promql() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let input = dir.path().join("backfill.om");
    let last = (now_ms() - 60_000) / 1000 * 1000;
    openmetrics_file(&input, last);

    let out = import(&data, &[&input]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "import failed: {}", String::from_utf8_lossy(&out.stderr));
    let total = SERIES * SAMPLES;
    assert!(stdout.contains(&format!("imported {total} samples of {SERIES} series")), "{stdout}");
    assert!(stdout.contains("samples/s"), "{stdout}");

    let server = Server::start(&data);
    let at = last as f64 / 1000.0;
    let q = |query: &str| {
        let (status, v) = server.get_json(&format!("/api/v1/query?query={query}&time={at}"), None);
        assert_eq!(status, 200, "{query}: {v}");
        v
    };
    // Every sample is there: 12000 in the last day, 3000 per series.
    assert_eq!(scalar(&q("sum(count_over_time(gpu_temp%5B1d%5D))")), total as f64);
    assert_eq!(scalar(&q("count(gpu_temp)")), SERIES as f64);
    assert_eq!(scalar(&q("min(count_over_time(gpu_temp%5B1d%5D))")), SAMPLES as f64);
    // Values and the escaped label survived; the newest sample of gpu 2 is 2*100000+2999.
    let v = q("gpu_temp%7Bgpu%3D%222%22%7D");
    assert_eq!(v["data"]["result"][0]["metric"]["host"], "n\"1", "{v}");
    assert_eq!(scalar(&v), (2 * 100_000 + SAMPLES - 1) as f64);

    // A second import while the server holds the directory is refused.
    let again = import(&data, &[&input]);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(!again.status.success(), "import into a served directory succeeded");
    assert!(stderr.contains("is in use by another process"), "{stderr}");
    assert!(server.terminate().success());
}

#[test]
fn a_bad_line_fails_the_import_with_file_and_line_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let good = dir.path().join("good.om");
    openmetrics_file(&good, (now_ms() - 60_000) / 1000 * 1000);
    assert!(import(&data, &[&good]).status.success());
    let before = snapshot(&data);

    // Prometheus text (milliseconds): 500 good lines, a bad one, 500 more.
    let t0 = now_ms() - 3_600_000;
    let mut text = String::new();
    for i in 0..500 {
        text.push_str(&format!("other_metric{{k=\"v\"}} {i} {}\n", t0 + i));
    }
    text.push_str(&format!("other_metric{{k=\"v\"}} twelve {}\n", t0 + 500));
    for i in 501..1000 {
        text.push_str(&format!("other_metric{{k=\"v\"}} {i} {}\n", t0 + i));
    }
    let bad = dir.path().join("bad.prom");
    std::fs::write(&bad, text).expect("write bad input");

    let out = import(&data, &[&good, &bad]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a bad line was accepted");
    assert!(stderr.contains(&format!("{}:501: invalid value \"twelve\"", bad.display())), "{stderr}");
    assert!(stderr.contains("nothing was imported"), "{stderr}");
    assert_eq!(snapshot(&data), before, "the data directory changed");

    // The server still sees only the first import.
    let server = Server::start(&data);
    let (_, v) = server.get_json("/api/v1/query?query=count(other_metric)", None);
    assert_eq!(v["data"]["result"], serde_json::json!([]), "{v}");
}

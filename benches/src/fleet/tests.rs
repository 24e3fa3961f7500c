use std::collections::{HashMap, HashSet};

use super::catalog::Dcgm;
use super::series::Series;
use super::*;

fn small(seed: u64) -> FleetConfig {
    // Small enough for a debug build to simulate in well under a second.
    FleetConfig { nodes: 4, seed, span_ms: 3_600_000, node_cpus: 2, mean_job_minutes: 10.0, ..FleetConfig::default() }
}

fn run(cfg: FleetConfig) -> (Vec<Sample>, FleetStats) {
    let mut fleet = Fleet::new(cfg).expect("valid config");
    let mut out = Vec::new();
    while fleet.next_round(&mut out) {}
    (out, fleet.stats().clone())
}

fn key(s: &Series) -> Vec<(Vec<u8>, Vec<u8>)> {
    s.labels.iter().map(|(n, v)| (n.to_vec(), v.to_vec())).collect()
}

fn label<'a>(s: &'a Series, name: &str) -> Option<&'a str> {
    s.get(name).map(|v| std::str::from_utf8(v).expect("labels are utf-8"))
}

#[test]
fn same_seed_gives_identical_samples() {
    let (a, sa) = run(small(7));
    let (b, sb) = run(small(7));
    assert_eq!(sa, sb);
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(key(&x.series), key(&y.series));
        assert_eq!(x.ts, y.ts);
        assert_eq!(x.value.to_bits(), y.value.to_bits());
    }
}

#[test]
fn different_seed_gives_different_samples() {
    let (a, _) = run(small(7));
    let (b, _) = run(small(8));
    let differs = a.len() != b.len()
        || a.iter().zip(&b).any(|(x, y)| x.value.to_bits() != y.value.to_bits() || key(&x.series) != key(&y.series));
    assert!(differs);
}

#[test]
fn every_dcgm_series_has_the_exporter_label_set() {
    let (samples, _) = run(small(3));
    let mut with_pod = 0;
    for s in samples.iter().filter(|s| s.series.metric_name().starts_with(b"DCGM_FI_")) {
        for l in ["gpu", "UUID", "device", "modelName", "Hostname", "job", "instance", "cluster"] {
            assert!(s.series.get(l).is_some(), "{l} missing on {:?}", key(&s.series));
        }
        // The kube labels come and go together.
        let kube = ["pod", "namespace", "container"].map(|l| s.series.get(l).is_some());
        assert!(kube.iter().all(|&b| b) || kube.iter().all(|&b| !b));
        with_pod += usize::from(kube[0]);
        assert_eq!(label(&s.series, "job"), Some("dcgm-exporter"));
        let uuid = label(&s.series, "UUID").expect("checked above");
        assert!(uuid.starts_with("GPU-") && uuid.len() == 40, "{uuid}");
        let gpu = label(&s.series, "gpu").expect("checked above");
        assert_eq!(label(&s.series, "device"), Some(format!("nvidia{gpu}").as_str()));
    }
    assert!(with_pod > 0, "no DCGM series ever had a pod");
}

#[test]
fn labels_are_sorted_unique_and_non_empty() {
    let (samples, _) = run(small(4));
    for s in &samples {
        let l = &s.series.labels;
        assert!(l.windows(2).all(|w| w[0].0 < w[1].0), "unsorted or duplicate: {:?}", key(&s.series));
        assert!(l.iter().all(|(_, v)| !v.is_empty()));
        assert!(s.series.get("__name__").is_some());
    }
}

#[test]
fn no_series_appears_twice_in_one_scrape_and_time_goes_forward() {
    let (samples, _) = run(small(5));
    let mut last: HashMap<Vec<(Vec<u8>, Vec<u8>)>, i64> = HashMap::new();
    for s in &samples {
        if let Some(prev) = last.insert(key(&s.series), s.ts) {
            assert!(s.ts > prev, "series {:?} went from {prev} to {}", key(&s.series), s.ts);
        }
    }
}

#[test]
fn counters_never_decrease_without_reboots() {
    let cfg = FleetConfig { reboot_rate: 0.0, ..small(6) };
    let (samples, stats) = run(cfg);
    assert_eq!(stats.reboots, 0);
    let counters: HashSet<&str> = Dcgm::ALL.iter().filter(|f| f.is_counter()).map(|f| f.name()).collect();
    let mut last: HashMap<u64, f64> = HashMap::new();
    let mut checked = 0;
    for s in samples.iter().filter(|s| !s.is_stale_marker()) {
        let name = std::str::from_utf8(s.series.metric_name()).expect("utf-8");
        let is_counter =
            counters.contains(name) || name.ends_with("_total") || name.starts_with("training_step_duration_seconds");
        if !is_counter {
            continue;
        }
        if let Some(prev) = last.insert(s.series.id, s.value) {
            assert!(s.value >= prev, "{name} fell from {prev} to {}", s.value);
            checked += 1;
        }
    }
    assert!(checked > 1000);
}

#[test]
fn counters_reset_only_after_the_node_was_down() {
    let cfg = FleetConfig { reboot_rate: 4.0, ..small(9) };
    let interval = cfg.interval_ms;
    let (samples, stats) = run(cfg);
    assert!(stats.reboots > 0, "a reboot rate of 4/h over 1 h of 4 nodes must reboot something");
    let mut last: HashMap<u64, (i64, f64)> = HashMap::new();
    let mut resets = 0;
    for s in samples.iter().filter(|s| !s.is_stale_marker()) {
        if s.series.metric_name() != b"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" {
            continue;
        }
        if let Some((pts, pv)) = last.insert(s.series.id, (s.ts, s.value)) {
            if s.value < pv {
                // A reboot keeps the node away for at least 3 minutes.
                assert!(s.ts - pts >= 5 * interval, "reset without an outage at {}", s.ts);
                resets += 1;
            }
        }
    }
    assert!(resets > 0, "reboots happened but no energy counter restarted");
}

#[test]
fn vanished_series_end_with_a_staleness_marker() {
    let cfg = small(10);
    let end_round = cfg.start_ms + (cfg.rounds().expect("finite") as i64 - 1) * cfg.interval_ms;
    let (samples, stats) = run(cfg);
    assert!(stats.stale_markers > 0);
    let mut last: HashMap<u64, &Sample> = HashMap::new();
    for s in &samples {
        last.insert(s.series.id, s);
    }
    for s in last.values() {
        assert!(
            s.is_stale_marker() || s.ts >= end_round,
            "series {:?} stopped at {} without a marker",
            key(&s.series),
            s.ts
        );
    }
}

#[test]
fn shorter_jobs_mean_more_pod_churn() {
    let pods = |minutes: f64| {
        let (samples, _) = run(FleetConfig { mean_job_minutes: minutes, ..small(11) });
        samples.iter().filter_map(|s| s.series.get("pod").map(<[u8]>::to_vec)).collect::<HashSet<_>>().len()
    };
    let churny = pods(5.0);
    let calm = pods(120.0);
    assert!(churny > 2 * calm, "5-minute jobs gave {churny} pods, 2-hour jobs {calm}");
}

#[test]
fn dcgm_integer_gauges_are_integers() {
    let (samples, _) = run(small(12));
    let ints = [
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_XID_ERRORS",
    ];
    for s in samples.iter().filter(|s| !s.is_stale_marker()) {
        let name = std::str::from_utf8(s.series.metric_name()).expect("utf-8");
        if ints.contains(&name) {
            assert_eq!(s.value, s.value.round(), "{name} = {}", s.value);
        }
        if name == "DCGM_FI_DEV_GPU_UTIL" {
            assert!((0.0..=100.0).contains(&s.value));
        }
    }
}

#[test]
fn every_gpu_is_scraped_once_per_round() {
    let cfg = FleetConfig { reboot_rate: 0.0, ..small(13) };
    let gpus = cfg.nodes * cfg.gpus_per_node;
    let rounds = cfg.rounds().expect("finite") as usize;
    let (samples, _) = run(cfg);
    let mut per_uuid: HashMap<Vec<u8>, usize> = HashMap::new();
    for s in samples.iter().filter(|s| !s.is_stale_marker() && s.series.metric_name() == b"DCGM_FI_DEV_GPU_UTIL") {
        *per_uuid.entry(s.series.get("UUID").expect("dcgm label").to_vec()).or_default() += 1;
    }
    assert_eq!(per_uuid.len(), gpus);
    assert!(per_uuid.values().all(|&n| n == rounds), "{per_uuid:?}");
}

#[test]
fn invalid_configs_are_refused_with_a_message() {
    assert!(Fleet::new(FleetConfig { nodes: 0, ..FleetConfig::default() }).is_err());
    assert!(Fleet::new(FleetConfig { jitter_ms: 10_000, ..FleetConfig::default() }).is_err());
    assert!(Fleet::new(FleetConfig { busy: 1.5, ..FleetConfig::default() }).is_err());
    let err = Fleet::new(FleetConfig { interval_ms: 10, ..FleetConfig::default() }).err();
    assert!(err.is_some_and(|e| e.contains("--interval")));
}

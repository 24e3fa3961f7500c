//! The comparison table `compare.sh` prints: one row per system, medians over runs,
//! then Tessera's ratios to each peer, then per-query latencies.
//!
//! Input layout (written by `compare.sh`): `DIR/<system>/run<N>/push.json` (an
//! `IngestReport`), `query.json` (a `QueryReport`, absent if queries were not run)
//! and `proc.json` (`{"cpu_s", "peak_rss_kib", "disk_bytes", "loopback_bytes"}`, measured from /proc
//! and `du` by the script). A missing number prints as `n/a`, never as 0.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;

use crate::ingest::IngestReport;
use crate::query_load::QueryReport;

#[derive(Debug, Default, serde::Deserialize)]
struct ProcNumbers {
    cpu_s: Option<f64>,
    peak_rss_kib: Option<f64>,
    disk_bytes: Option<f64>,
    /// Bytes over the loopback interface during the push (client traffic plus, for a
    /// cluster, the traffic between its processes).
    #[serde(default)]
    loopback_bytes: Option<f64>,
}

#[derive(Default)]
struct Run {
    push: Option<IngestReport>,
    query: Option<QueryReport>,
    proc_: ProcNumbers,
}

/// Median of the values present; None when there are none.
fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

fn read_json<T: serde::de::DeserializeOwned>(p: &Path) -> anyhow::Result<Option<T>> {
    if !p.exists() {
        return Ok(None);
    }
    let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
    Ok(Some(serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", p.display()))?))
}

fn load(dir: &Path) -> anyhow::Result<BTreeMap<String, Vec<Run>>> {
    let mut systems = BTreeMap::new();
    for sys in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let sys = sys?;
        if !sys.file_type()?.is_dir() {
            continue;
        }
        let mut runs = Vec::new();
        let mut run_dirs: Vec<_> =
            std::fs::read_dir(sys.path())?.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir()).collect();
        run_dirs.sort();
        for rd in run_dirs {
            runs.push(Run {
                push: read_json(&rd.join("push.json"))?,
                query: read_json(&rd.join("query.json"))?,
                proc_: read_json(&rd.join("proc.json"))?.unwrap_or_default(),
            });
        }
        systems.insert(sys.file_name().to_string_lossy().into_owned(), runs);
    }
    Ok(systems)
}

/// The numbers of one system's row (medians over its runs).
#[derive(Debug, Default, Clone, Copy)]
struct Row {
    runs: usize,
    samples_per_s: Option<f64>,
    cpu_per_m: Option<f64>,
    rss_mib: Option<f64>,
    /// Peak RSS divided by the series the dataset created (churned ones included,
    /// so with heavy churn this understates the cost of an active series).
    rss_kib_per_series: Option<f64>,
    bytes_per_sample: Option<f64>,
    loopback_per_sample: Option<f64>,
    q_p50: Option<f64>,
    q_p90: Option<f64>,
    failed_samples: u64,
    query_errors: u64,
}

fn row(runs: &[Run]) -> Row {
    let ok = |r: &Run| r.push.as_ref().map(|p| p.push.samples_ok as f64);
    Row {
        runs: runs.len(),
        samples_per_s: median(runs.iter().filter_map(|r| r.push.as_ref().map(|p| p.push.samples_per_s)).collect()),
        cpu_per_m: median(runs.iter().filter_map(|r| Some(r.proc_.cpu_s? / (ok(r)? / 1e6))).collect()),
        rss_mib: median(runs.iter().filter_map(|r| r.proc_.peak_rss_kib.map(|k| k / 1024.0)).collect()),
        rss_kib_per_series: median(
            runs.iter()
                .filter_map(|r| Some(r.proc_.peak_rss_kib? / r.push.as_ref()?.dataset.series_created.max(1) as f64))
                .collect(),
        ),
        bytes_per_sample: median(runs.iter().filter_map(|r| Some(r.proc_.disk_bytes? / ok(r)?)).collect()),
        loopback_per_sample: median(runs.iter().filter_map(|r| Some(r.proc_.loopback_bytes? / ok(r)?)).collect()),
        q_p50: median(
            runs.iter()
                .filter_map(|r| r.query.as_ref().filter(|q| q.overall.count > 0).map(|q| q.overall.p50_ms))
                .collect(),
        ),
        q_p90: median(
            runs.iter()
                .filter_map(|r| r.query.as_ref().filter(|q| q.overall.count > 0).map(|q| q.overall.p90_ms))
                .collect(),
        ),
        failed_samples: runs.iter().filter_map(|r| r.push.as_ref().map(|p| p.push.samples_failed)).sum(),
        query_errors: runs.iter().filter_map(|r| r.query.as_ref().map(|q| q.errors)).sum(),
    }
}

fn fmt(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(x) => format!("{x:.decimals$}"),
        None => "n/a".into(),
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => "n/a".into(),
    }
}

/// Display order: Tessera first, then the peers alphabetically.
fn ordered(systems: &BTreeMap<String, Vec<Run>>) -> Vec<&String> {
    let mut names: Vec<&String> = systems.keys().collect();
    names.sort_by_key(|n| (n.as_str() != "tessera", n.as_str().to_owned()));
    names
}

pub fn render(dir: &Path) -> anyhow::Result<String> {
    let systems = load(dir)?;
    if systems.is_empty() {
        anyhow::bail!("{}: no system folders", dir.display());
    }
    let mut out = String::new();
    let rows: BTreeMap<&String, Row> = systems.iter().map(|(k, v)| (k, row(v))).collect();
    let names = ordered(&systems);

    writeln!(out, "| system | runs | ingest samples/s | CPU s per M samples | peak RSS MiB | RSS KiB/series | bytes/sample on disk | loopback bytes/sample | query p50 ms | query p90 ms | failed samples | query errors |")?;
    writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|")?;
    for n in &names {
        let r = rows[n];
        writeln!(
            out,
            "| {n} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.runs,
            fmt(r.samples_per_s, 0),
            fmt(r.cpu_per_m, 2),
            fmt(r.rss_mib, 0),
            fmt(r.rss_kib_per_series, 2),
            fmt(r.bytes_per_sample, 3),
            fmt(r.loopback_per_sample, 2),
            fmt(r.q_p50, 1),
            fmt(r.q_p90, 1),
            r.failed_samples,
            r.query_errors
        )?;
    }
    if let Some(t) = rows.get(&"tessera".to_string()) {
        writeln!(out)?;
        writeln!(out, "| Tessera ÷ peer | ingest samples/s (higher is better) | CPU s per M (lower) | peak RSS (lower) | bytes/sample (lower) | query p50 (lower) | query p90 (lower) |")?;
        writeln!(out, "|---|---|---|---|---|---|---|")?;
        for n in names.iter().filter(|n| n.as_str() != "tessera") {
            let p = rows[n];
            writeln!(
                out,
                "| ÷ {n} | {} | {} | {} | {} | {} | {} |",
                ratio(t.samples_per_s, p.samples_per_s),
                ratio(t.cpu_per_m, p.cpu_per_m),
                ratio(t.rss_mib, p.rss_mib),
                ratio(t.bytes_per_sample, p.bytes_per_sample),
                ratio(t.q_p50, p.q_p50),
                ratio(t.q_p90, p.q_p90)
            )?;
        }
    }

    // Per-query medians: latency p50 (ms) and the series count of the answer, so a
    // fast but empty or different answer is visible.
    let mut query_names: Vec<String> = Vec::new();
    for runs in systems.values() {
        for r in runs {
            if let Some(q) = &r.query {
                for s in &q.queries {
                    if !query_names.contains(&s.name) {
                        query_names.push(s.name.clone());
                    }
                }
            }
        }
    }
    if !query_names.is_empty() {
        writeln!(out)?;
        write!(out, "| query (median p50 ms / series) |")?;
        for n in &names {
            write!(out, " {n} |")?;
        }
        writeln!(out)?;
        write!(out, "|---|")?;
        for _ in &names {
            write!(out, "---|")?;
        }
        writeln!(out)?;
        for qn in &query_names {
            write!(out, "| {qn} |")?;
            for n in &names {
                let stats: Vec<_> = systems[*n]
                    .iter()
                    .filter_map(|r| r.query.as_ref())
                    .filter_map(|q| q.queries.iter().find(|s| &s.name == qn))
                    .collect();
                let p50 = median(stats.iter().filter(|s| s.ok > 0).map(|s| s.latency.p50_ms).collect());
                let errors: u64 = stats.iter().map(|s| s.errors).sum();
                let series = stats.iter().rev().find(|s| s.ok > 0).map(|s| s.series);
                let cell = match (p50, series) {
                    (Some(p), Some(s)) => format!("{p:.1} / {s}"),
                    _ if errors > 0 => "error".to_string(),
                    _ => "n/a".to_string(),
                };
                write!(out, " {cell} |")?;
            }
            writeln!(out)?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_ignores_missing_and_averages_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![f64::NAN]), None);
        assert_eq!(median(vec![]), None);
    }

    #[test]
    fn table_prints_na_for_what_was_not_measured() {
        let dir = tempfile::tempdir().expect("temp dir");
        let run = dir.path().join("tessera").join("run1");
        std::fs::create_dir_all(&run).expect("mkdir");
        std::fs::write(run.join("proc.json"), r#"{"cpu_s": 2.0, "peak_rss_kib": 2048, "disk_bytes": null}"#)
            .expect("write");
        let text = render(dir.path()).expect("renders");
        assert!(text.contains("| tessera | 1 | n/a | n/a | 2 | n/a | n/a |"), "{text}");
    }
}

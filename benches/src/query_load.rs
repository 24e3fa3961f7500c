//! Query load: replays a file of dashboard queries against any Prometheus-compatible
//! HTTP API and reports latency percentiles per query and overall.
//!
//! File format (`benches/queries/dashboard.promql`): one query per line, written as
//! `name: expression`; blank lines and lines starting with `#` are ignored. The name
//! is what the report prints; it must be `[A-Za-z0-9_-]+` followed by `: `, which no
//! PromQL expression starts with (a recording-rule name like `job:rate5m` has no
//! space after its colon).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tokio::sync::Semaphore;

use crate::latency::{Latencies, Percentiles};

#[derive(Debug, Clone)]
pub struct QueryDef {
    pub name: String,
    pub expr: String,
}

pub fn parse_query_file(text: &str) -> anyhow::Result<Vec<QueryDef>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((name, expr)) = line.split_once(": ") else {
            bail!("line {}: expected `name: expression`, got {line:?}", i + 1);
        };
        let name = name.trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            bail!("line {}: query name {name:?} must be letters, digits, _ or -", i + 1);
        }
        if out.iter().any(|q: &QueryDef| q.name == name) {
            bail!("line {}: query name {name:?} used twice", i + 1);
        }
        out.push(QueryDef { name: name.to_string(), expr: expr.trim().to_string() });
    }
    if out.is_empty() {
        bail!("no queries in the file");
    }
    Ok(out)
}

#[derive(Debug, Clone)]
pub struct QueryConfig {
    /// Base URL of the HTTP API, e.g. `http://127.0.0.1:9090`.
    pub base_url: String,
    /// Range in unix seconds; instant queries are evaluated at `end`.
    pub start: f64,
    pub end: f64,
    pub step_s: f64,
    pub instant: bool,
    /// Times each query runs.
    pub reps: usize,
    /// Queries started per second (open loop); 0 = each as soon as a slot is free.
    pub rate: f64,
    pub concurrency: usize,
    pub tenant: Option<String>,
    pub timeout: Duration,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct QueryStat {
    pub name: String,
    pub expr: String,
    pub ok: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    /// Series and points in the last successful answer (to see that systems agree
    /// on roughly how much data came back; a fast empty answer is no win).
    pub series: u64,
    pub points: u64,
    pub latency: Percentiles,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct QueryReport {
    pub base_url: String,
    pub start: f64,
    pub end: f64,
    pub step_s: f64,
    pub instant: bool,
    pub reps: usize,
    pub queries: Vec<QueryStat>,
    /// Over every execution of every query.
    pub overall: Percentiles,
    pub errors: u64,
    pub elapsed_s: f64,
}

struct One {
    idx: usize,
    took: Duration,
    result: Result<(u64, u64), String>,
}

async fn run_one(client: &reqwest::Client, cfg: &QueryConfig, q: &QueryDef) -> Result<(u64, u64), String> {
    let (path, form): (&str, Vec<(&str, String)>) = if cfg.instant {
        ("/api/v1/query", vec![("query", q.expr.clone()), ("time", format!("{:.3}", cfg.end))])
    } else {
        (
            "/api/v1/query_range",
            vec![
                ("query", q.expr.clone()),
                ("start", format!("{:.3}", cfg.start)),
                ("end", format!("{:.3}", cfg.end)),
                ("step", format!("{}", cfg.step_s)),
            ],
        )
    };
    let mut req = client.post(format!("{}{}", cfg.base_url.trim_end_matches('/'), path)).form(&form);
    if let Some(t) = &cfg.tenant {
        req = req.header("X-Scope-OrgID", t);
    }
    let resp = req.send().await.map_err(|e| format!("request failed: {e}"))?;
    let status = resp.status();
    let body = resp.bytes().await.map_err(|e| format!("reading body: {e}"))?;
    let v: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
        format!("{}: not JSON ({e}): {}", status.as_u16(), String::from_utf8_lossy(&body[..body.len().min(200)]))
    })?;
    if v["status"] != "success" {
        return Err(format!(
            "{} {}: {}",
            status.as_u16(),
            v["errorType"].as_str().unwrap_or("?"),
            v["error"].as_str().unwrap_or("?")
        ));
    }
    let result = &v["data"]["result"];
    let (series, points) = match v["data"]["resultType"].as_str() {
        Some("matrix") => {
            let arr = result.as_array().map(Vec::as_slice).unwrap_or_default();
            (arr.len() as u64, arr.iter().map(|s| s["values"].as_array().map_or(0, Vec::len) as u64).sum())
        }
        Some("vector") => {
            let n = result.as_array().map_or(0, Vec::len) as u64;
            (n, n)
        }
        _ => (1, 1),
    };
    Ok((series, points))
}

pub async fn run(cfg: QueryConfig, queries: Vec<QueryDef>) -> anyhow::Result<QueryReport> {
    let client = reqwest::Client::builder().timeout(cfg.timeout).tcp_nodelay(true).build().context("HTTP client")?;
    let cfg = Arc::new(cfg);
    let queries = Arc::new(queries);
    let slots = Arc::new(Semaphore::new(cfg.concurrency.max(1)));
    let start = Instant::now();
    let mut handles = Vec::new();
    let total = cfg.reps * queries.len();
    for i in 0..total {
        if cfg.rate > 0.0 {
            let due = start + Duration::from_secs_f64(i as f64 / cfg.rate);
            tokio::time::sleep_until(due.into()).await;
        }
        let permit = slots.clone().acquire_owned().await.context("semaphore closed")?;
        let (client, cfg, queries) = (client.clone(), cfg.clone(), queries.clone());
        handles.push(tokio::spawn(async move {
            let idx = i % queries.len();
            let t = Instant::now();
            let result = run_one(&client, &cfg, &queries[idx]).await;
            drop(permit);
            One { idx, took: t.elapsed(), result }
        }));
    }
    let mut per: Vec<(Latencies, QueryStat)> = queries
        .iter()
        .map(|q| {
            (
                Latencies::default(),
                QueryStat {
                    name: q.name.clone(),
                    expr: q.expr.clone(),
                    ok: 0,
                    errors: 0,
                    first_error: None,
                    series: 0,
                    points: 0,
                    latency: Percentiles::default(),
                },
            )
        })
        .collect();
    let mut overall = Latencies::default();
    for h in handles {
        let one = h.await?;
        let (lat, stat) = &mut per[one.idx];
        match one.result {
            Ok((series, points)) => {
                // Only successful answers count towards latency: an instant error is
                // not a fast query.
                lat.record(one.took);
                overall.record(one.took);
                stat.ok += 1;
                stat.series = series;
                stat.points = points;
            }
            Err(e) => {
                stat.errors += 1;
                stat.first_error.get_or_insert(e);
            }
        }
    }
    let elapsed_s = start.elapsed().as_secs_f64();
    let stats: Vec<QueryStat> = per
        .into_iter()
        .map(|(lat, mut s)| {
            s.latency = lat.summary();
            s
        })
        .collect();
    let errors = stats.iter().map(|s| s.errors).sum();
    Ok(QueryReport {
        base_url: cfg.base_url.clone(),
        start: cfg.start,
        end: cfg.end,
        step_s: cfg.step_s,
        instant: cfg.instant,
        reps: cfg.reps,
        queries: stats,
        overall: overall.summary(),
        errors,
        elapsed_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_file_parses_names_and_skips_comments() {
        let q = parse_query_file(
            "# a comment\n\nutil: avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL)\nrule: job:rate5m{a=\"b: c\"}\n",
        )
        .expect("valid file");
        assert_eq!(q.len(), 2);
        assert_eq!(q[0].name, "util");
        assert_eq!(q[0].expr, "avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL)");
        assert_eq!(q[1].expr, "job:rate5m{a=\"b: c\"}");
    }

    #[test]
    fn query_file_without_names_is_an_error_naming_the_line() {
        let err = parse_query_file("ok: up\nsum(rate(x[5m]))\n").expect_err("second line has no name");
        assert!(err.to_string().contains("line 2"), "{err}");
        assert!(parse_query_file("# only comments\n").is_err());
        assert!(parse_query_file("a: up\na: up\n").is_err());
    }

    #[test]
    fn shipped_dashboard_file_parses() {
        let text = include_str!("../queries/dashboard.promql");
        let q = parse_query_file(text).expect("shipped file is valid");
        assert!(q.len() >= 10, "{} queries", q.len());
        for def in &q {
            assert!(promql_parser::parser::parse(&def.expr).is_ok(), "{} does not parse: {}", def.name, def.expr);
        }
    }
}

//! tessera-bench: the GPU-fleet load generator and query-load driver of Tessera's
//! end-to-end benchmarks.
//!
//! It speaks only public protocols (Prometheus remote write 1.0/2.0 and the
//! Prometheus HTTP query API), so the same command measures Tessera, Prometheus and
//! VictoriaMetrics alike; `benches/compare.sh` runs it against all three. It must not
//! know Tessera's internals: anything it needs from a running target goes over HTTP
//! (`disk-usage` alone reads a stopped Tessera data directory, and `chunk-bytes` uses the
//! storage crate's chunk encoders, without a server).
//!
//! Subcommands: `backfill` (send a time span as fast as the target accepts), `live`
//! (send at the real scrape rate), `query` (replay dashboard queries), `describe`
//! (print what a dataset contains without sending it), `table` (summarise a
//! `compare.sh` results folder), `disk-usage` (bytes of a stopped Tessera data directory
//! per column family), `chunk-bytes` (a dataset's chunk bytes per metric, split into
//! timestamps, values and the rest).

mod chunk_bytes;
mod cli_time;
mod disk_usage;
mod encode;
mod fleet;
mod ingest;
mod latency;
mod push;
mod query_load;
mod rng;
mod table;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};

use encode::Protocol;
use fleet::FleetConfig;

#[derive(Parser)]
#[command(
    name = "tessera-bench",
    version,
    about = "GPU-fleet load generator and query-load driver for Prometheus-compatible TSDBs"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Send a simulated time span as fast as the target accepts it.
    Backfill(BackfillArgs),
    /// Send at the real scrape rate, timestamps = now, for --duration.
    Live(LiveArgs),
    /// Replay a file of dashboard queries and report latency percentiles.
    Query(QueryArgs),
    /// Generate a dataset in memory and print its size, without sending it.
    Describe(DescribeArgs),
    /// Print the comparison table of a `compare.sh` results folder.
    Table(TableArgs),
    /// Break down the bytes of a stopped Tessera data directory per column family and
    /// file kind (opens each shard's RocksDB read-only).
    DiskUsage(DiskUsageArgs),
    /// Generate a dataset in memory, encode its chunks as the engine stores them, and
    /// break their bytes down per metric into timestamps, values and the rest; also what
    /// each chunk takes as the head's open chunk and as XOR.
    ChunkBytes(ChunkBytesArgs),
}

/// The simulated fleet (same flags for every mode; equal flags = identical data).
#[derive(Args, Clone)]
struct FleetArgs {
    /// GPU nodes (8 GPUs each by default).
    #[arg(long, default_value_t = 10)]
    nodes: usize,
    #[arg(long, default_value_t = 8)]
    gpus_per_node: usize,
    /// Clusters the nodes are spread over (`cluster` label).
    #[arg(long, default_value_t = 2)]
    clusters: usize,
    /// Seed of every random choice; same seed and flags = byte-identical requests.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Scrape interval (e.g. 15s, 30s).
    #[arg(long, default_value = "30s")]
    interval: String,
    /// Each scrape's timestamp moves by a uniform ± this many milliseconds.
    #[arg(long, default_value_t = 5)]
    jitter_ms: i64,
    /// CPUs per node exposed by node-exporter (8 `node_cpu_seconds_total` series
    /// each); 0 = no node-exporter series.
    #[arg(long, default_value_t = 16)]
    node_cpus: usize,
    /// Fraction of GPUs kept allocated to jobs.
    #[arg(long, default_value_t = 0.75)]
    busy: f64,
    /// Mean notebook lifetime in minutes; other job kinds scale from it (fine-tune
    /// 2×, eval 0.5×, pretraining 8×, inference 50×). Lower = more pod churn.
    #[arg(long, default_value_t = 60.0)]
    mean_job_minutes: f64,
    /// Node reboots per node-hour (XID 79, `up` = 0, counters restart).
    #[arg(long, default_value_t = 0.01)]
    reboot_rate: f64,
    /// No kube-state-metrics series (`kube_pod_labels`, resource requests).
    #[arg(long)]
    no_kube: bool,
    /// No training step-duration histograms.
    #[arg(long)]
    no_histograms: bool,
    /// DCGM fields per GPU, comma-separated (`GPU_UTIL,GPU_TEMP,POWER_USAGE` or full
    /// metric names); `all` = the 22 fields of dcgm-exporter's counters file.
    #[arg(long, default_value = "all")]
    dcgm_fields: String,
}

impl FleetArgs {
    fn config(&self, start_ms: i64, span_ms: i64) -> anyhow::Result<FleetConfig> {
        let cfg = FleetConfig {
            nodes: self.nodes,
            gpus_per_node: self.gpus_per_node,
            clusters: self.clusters,
            seed: self.seed,
            start_ms,
            span_ms,
            interval_ms: cli_time::parse_duration_ms(&self.interval)?,
            jitter_ms: self.jitter_ms,
            node_cpus: self.node_cpus,
            busy: self.busy,
            mean_job_minutes: self.mean_job_minutes,
            reboot_rate: self.reboot_rate,
            kube: !self.no_kube,
            training_histograms: !self.no_histograms,
            dcgm_fields: parse_dcgm_fields(&self.dcgm_fields)?,
        };
        cfg.validate().map_err(anyhow::Error::msg)?;
        Ok(cfg)
    }
}

fn parse_dcgm_fields(list: &str) -> anyhow::Result<Vec<fleet::catalog::Dcgm>> {
    use fleet::catalog::Dcgm;
    if list.trim() == "all" {
        return Ok(Dcgm::ALL.to_vec());
    }
    let mut fields = Vec::new();
    for name in list.split(',').filter(|n| !n.trim().is_empty()) {
        let known = || Dcgm::ALL.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ");
        let f = Dcgm::from_name(name)
            .with_context(|| format!("--dcgm-fields: unknown DCGM field {name:?}; known fields: {}", known()))?;
        if !fields.contains(&f) {
            fields.push(f);
        }
    }
    Ok(fields)
}

/// Where and how to send.
#[derive(Args, Clone)]
struct SendArgs {
    /// Remote-write URL, e.g. http://127.0.0.1:9090/api/v1/write.
    #[arg(long)]
    url: String,
    /// Remote-write protocol version: 1 (any receiver) or 2 (receivers that support it).
    #[arg(long, value_enum, default_value = "1")]
    protocol: Protocol,
    /// Parallel senders (Prometheus "shards"); each series always uses the same one.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Samples per request (Prometheus' max_samples_per_send default is 2,000).
    #[arg(long, default_value_t = 2000)]
    batch_samples: usize,
    /// Tenant, sent as X-Scope-OrgID.
    #[arg(long)]
    tenant: Option<String>,
    /// Retries of a batch on 5xx/429/connection errors before it counts as failed.
    #[arg(long, default_value_t = 10)]
    max_retries: u32,
    /// Per-request timeout.
    #[arg(long, default_value = "30s")]
    timeout: String,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

impl SendArgs {
    fn push_config(&self) -> anyhow::Result<push::PushConfig> {
        if self.concurrency == 0 || self.concurrency > 1024 {
            bail!("--concurrency must be 1..=1024");
        }
        if self.batch_samples == 0 {
            bail!("--batch-samples must be at least 1");
        }
        check_loopback(&self.url)?;
        Ok(push::PushConfig {
            url: self.url.clone(),
            protocol: self.protocol,
            tenant: self.tenant.clone(),
            max_retries: self.max_retries,
            timeout: Duration::from_millis(cli_time::parse_duration_ms(&self.timeout)? as u64),
        })
    }
}

#[derive(Args)]
struct BackfillArgs {
    #[command(flatten)]
    fleet: FleetArgs,
    #[command(flatten)]
    send: SendArgs,
    /// First timestamp (RFC 3339 or unix seconds); `auto` = the span ending 5
    /// minutes ago, aligned to the interval. Pass it explicitly to reproduce a dataset.
    #[arg(long, default_value = "auto")]
    start: String,
    /// Length of the simulated time span.
    #[arg(long, default_value = "1h")]
    span: String,
    /// Generate while sending instead of before (less memory; the generator then
    /// competes with the target for CPU).
    #[arg(long)]
    stream: bool,
    /// Consecutive samples of each series per request: 1 sends one sample per
    /// series as a Prometheus agent does; more is a bulk load (e.g. 120 = an hour at
    /// 30 s per series per request), for loading big datasets fast into any receiver.
    #[arg(long, default_value_t = 1)]
    samples_per_series: usize,
}

#[derive(Args)]
struct LiveArgs {
    #[command(flatten)]
    fleet: FleetArgs,
    #[command(flatten)]
    send: SendArgs,
    /// How long to run.
    #[arg(long, default_value = "10m")]
    duration: String,
    /// A partial batch is sent once its oldest sample is this old (Prometheus'
    /// batch_send_deadline).
    #[arg(long, default_value = "5s")]
    batch_deadline: String,
}

#[derive(Args)]
struct QueryArgs {
    /// Base URL of the Prometheus HTTP API, e.g. http://127.0.0.1:9090.
    #[arg(long)]
    url: String,
    /// Query file (`name: expression` per line).
    #[arg(long, default_value = "benches/queries/dashboard.promql")]
    file: PathBuf,
    /// Range start (RFC 3339 or unix seconds).
    #[arg(long)]
    start: String,
    /// Range end; instant queries are evaluated here.
    #[arg(long)]
    end: String,
    /// Range step.
    #[arg(long, default_value = "60s")]
    step: String,
    /// Run instant queries at --end instead of range queries.
    #[arg(long)]
    instant: bool,
    /// Times each query runs.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Queries started per second (open loop); 0 = back to back.
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Queries in flight at once.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    #[arg(long)]
    tenant: Option<String>,
    #[arg(long, default_value = "120s")]
    timeout: String,
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Args)]
struct DescribeArgs {
    #[command(flatten)]
    fleet: FleetArgs,
    #[arg(long, default_value = "2026-11-30T00:00:00Z")]
    start: String,
    #[arg(long, default_value = "1h")]
    span: String,
    #[arg(long, value_enum, default_value = "1")]
    protocol: Protocol,
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    #[arg(long, default_value_t = 2000)]
    batch_samples: usize,
    #[arg(long, default_value_t = 1)]
    samples_per_series: usize,
}

#[derive(Args)]
struct ChunkBytesArgs {
    #[command(flatten)]
    fleet: FleetArgs,
    #[arg(long, default_value = "2026-11-30T00:00:00Z")]
    start: String,
    #[arg(long, default_value = "24h")]
    span: String,
    /// Metrics listed one by one (by bytes); the rest are summed in one row.
    #[arg(long, default_value_t = 20)]
    top: usize,
}

#[derive(Args)]
struct TableArgs {
    /// The results folder `compare.sh` wrote (SYSTEM/runN/{push,query,proc}.json).
    dir: PathBuf,
}

#[derive(Args)]
struct DiskUsageArgs {
    /// A Tessera data directory (holding `shard-NNNN/`); the server must be stopped.
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,
    /// Samples stored, to print bytes per sample too.
    #[arg(long)]
    samples: Option<u64>,
}

/// The benchmark only ever sends to this machine: refuse anything but loopback, so a
/// typo cannot load-test someone else's server.
fn check_loopback(url: &str) -> anyhow::Result<()> {
    let rest = url.strip_prefix("http://").with_context(|| format!("{url}: only http:// URLs are supported"))?;
    let host = rest.split('/').next().unwrap_or_default();
    let host = match host.rsplit_once(':') {
        Some((h, _)) => h,
        None => host,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()) {
        Ok(())
    } else {
        bail!("{url}: tessera-bench only sends to loopback addresses (127.0.0.1, ::1, localhost)")
    }
}

fn write_json<T: serde::Serialize>(path: &Option<PathBuf>, v: &T) -> anyhow::Result<()> {
    if let Some(p) = path {
        std::fs::write(p, serde_json::to_vec_pretty(v)?).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

fn print_ingest(r: &ingest::IngestReport) {
    let d = &r.dataset;
    let p = &r.push;
    println!(
        "dataset: {} nodes × {} GPUs, {} rounds of {} ms from {} to {}; {} samples ({} stale markers), {} series created, {} jobs ({} crashed), {} reboots",
        d.nodes,
        d.gpus / d.nodes.max(1),
        d.rounds,
        d.interval_ms,
        d.start_ms,
        d.end_ms,
        d.samples,
        d.stale_markers,
        d.series_created,
        d.jobs_started,
        d.jobs_crashed,
        d.reboots
    );
    println!(
        "push: {} samples ok, {} failed, in {:.2} s = {:.0} samples/s; {} requests ({} retries), {:.1} MB snappy ({:.1} MB protobuf)",
        p.samples_ok,
        p.samples_failed,
        p.elapsed_s,
        p.samples_per_s,
        p.requests,
        p.retries,
        p.bytes_sent as f64 / 1e6,
        p.raw_protobuf_bytes as f64 / 1e6
    );
    println!(
        "latency ms: p50 {:.1}  p90 {:.1}  p99 {:.1}  max {:.1}",
        p.latency.p50_ms, p.latency.p90_ms, p.latency.p99_ms, p.latency.max_ms
    );
    println!("status: {:?}", p.status);
    for e in &p.first_errors {
        println!("error: {e}");
    }
    for e in &p.first_retried_errors {
        println!("retried: {e}");
    }
    println!("client: {:.1} s generating, {:.1} CPU s in total", r.generate_s, r.client_cpu_s);
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // One worker thread: the client must leave the second core to the target; the
    // work here is moving bytes, not computing.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    match cli.cmd {
        Cmd::Backfill(a) => {
            let span_ms = cli_time::parse_duration_ms(&a.span)?;
            let interval_ms = cli_time::parse_duration_ms(&a.fleet.interval)?;
            let start_ms = if a.start == "auto" {
                let end = (cli_time::now_ms() - 300_000) / interval_ms.max(1) * interval_ms.max(1);
                end - span_ms
            } else {
                cli_time::parse_time_ms(&a.start)?
            };
            let cfg = ingest::IngestConfig {
                fleet: a.fleet.config(start_ms, span_ms)?,
                push: a.send.push_config()?,
                shards: a.send.concurrency,
                batch_samples: a.send.batch_samples,
                samples_per_series: a.samples_per_series.max(1),
                stream: a.stream,
                live: false,
                batch_deadline_ms: 5000,
            };
            let report = rt.block_on(ingest::run(cfg))?;
            print_ingest(&report);
            write_json(&a.send.json, &report)?;
            if report.push.samples_failed > 0 {
                bail!("{} samples were not accepted", report.push.samples_failed);
            }
        }
        Cmd::Live(a) => {
            let duration_ms = cli_time::parse_duration_ms(&a.duration)?;
            let interval_ms = cli_time::parse_duration_ms(&a.fleet.interval)?;
            let start_ms = cli_time::now_ms() / interval_ms.max(1) * interval_ms.max(1) + interval_ms;
            let cfg = ingest::IngestConfig {
                fleet: a.fleet.config(start_ms, duration_ms.max(1))?,
                push: a.send.push_config()?,
                shards: a.send.concurrency,
                batch_samples: a.send.batch_samples,
                samples_per_series: 1,
                stream: true,
                live: true,
                batch_deadline_ms: cli_time::parse_duration_ms(&a.batch_deadline)?,
            };
            let report = rt.block_on(ingest::run(cfg))?;
            print_ingest(&report);
            write_json(&a.send.json, &report)?;
            if report.push.samples_failed > 0 {
                bail!("{} samples were not accepted", report.push.samples_failed);
            }
        }
        Cmd::Query(a) => {
            check_loopback(&a.url)?;
            let text = std::fs::read_to_string(&a.file).with_context(|| format!("reading {}", a.file.display()))?;
            let queries = query_load::parse_query_file(&text).with_context(|| format!("in {}", a.file.display()))?;
            let cfg = query_load::QueryConfig {
                base_url: a.url.clone(),
                start: cli_time::parse_time_ms(&a.start)? as f64 / 1000.0,
                end: cli_time::parse_time_ms(&a.end)? as f64 / 1000.0,
                step_s: cli_time::parse_duration_ms(&a.step)? as f64 / 1000.0,
                instant: a.instant,
                reps: a.reps.max(1),
                rate: a.rate,
                concurrency: a.concurrency.max(1),
                tenant: a.tenant.clone(),
                timeout: Duration::from_millis(cli_time::parse_duration_ms(&a.timeout)? as u64),
            };
            if cfg.step_s <= 0.0 || cfg.end < cfg.start {
                bail!("need --step > 0 and --end >= --start");
            }
            let report = rt.block_on(query_load::run(cfg, queries))?;
            println!(
                "{:<28} {:>8} {:>9} {:>9} {:>9} {:>7} {:>9}",
                "query", "ok/err", "p50 ms", "p90 ms", "max ms", "series", "points"
            );
            for q in &report.queries {
                println!(
                    "{:<28} {:>8} {:>9.1} {:>9.1} {:>9.1} {:>7} {:>9}",
                    q.name,
                    format!("{}/{}", q.ok, q.errors),
                    q.latency.p50_ms,
                    q.latency.p90_ms,
                    q.latency.max_ms,
                    q.series,
                    q.points
                );
                if let Some(e) = &q.first_error {
                    println!("    error: {e}");
                }
            }
            println!(
                "all: {} ok, {} errors; p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms in {:.1} s",
                report.overall.count,
                report.errors,
                report.overall.p50_ms,
                report.overall.p90_ms,
                report.overall.p99_ms,
                report.elapsed_s
            );
            write_json(&a.json, &report)?;
        }
        Cmd::Describe(a) => {
            let cfg = ingest::IngestConfig {
                fleet: a.fleet.config(cli_time::parse_time_ms(&a.start)?, cli_time::parse_duration_ms(&a.span)?)?,
                push: push::PushConfig {
                    url: String::new(),
                    protocol: a.protocol,
                    tenant: None,
                    max_retries: 0,
                    timeout: Duration::from_secs(1),
                },
                shards: a.concurrency.max(1),
                batch_samples: a.batch_samples.max(1),
                samples_per_series: a.samples_per_series.max(1),
                stream: false,
                live: false,
                batch_deadline_ms: 5000,
            };
            let t = std::time::Instant::now();
            let (batches, stats, end_ms) = ingest::generate(&cfg)?;
            let secs = t.elapsed().as_secs_f64();
            let snappy: u64 = batches.iter().map(|b| b.body.len() as u64).sum();
            let raw: u64 = batches.iter().map(|b| b.raw_len as u64).sum();
            println!("{stats:#?}");
            println!(
                "end_ms: {end_ms}\nbatches: {}\nsnappy bytes: {snappy} ({:.1} per sample)\nprotobuf bytes: {raw}\ngenerated in {secs:.2} s ({:.0} samples/s)",
                batches.len(),
                snappy as f64 / stats.samples.max(1) as f64,
                stats.samples as f64 / secs.max(1e-9)
            );
        }
        Cmd::Table(a) => {
            print!("{}", table::render(&a.dir)?);
        }
        Cmd::DiskUsage(a) => {
            print!("{}", disk_usage::render(&a.data_dir, a.samples)?);
        }
        Cmd::ChunkBytes(a) => {
            let start_ms = cli_time::parse_time_ms(&a.start)?;
            let cfg = a.fleet.config(start_ms, cli_time::parse_duration_ms(&a.span)?)?;
            print!("{}", chunk_bytes::render(cfg, a.top)?);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_loopback;

    #[test]
    fn only_loopback_targets_are_accepted() {
        assert!(check_loopback("http://127.0.0.1:9090/api/v1/write").is_ok());
        assert!(check_loopback("http://localhost:8428/api/v1/write").is_ok());
        assert!(check_loopback("http://[::1]:9090").is_ok());
        assert!(check_loopback("http://10.0.0.1:9090/api/v1/write").is_err());
        assert!(check_loopback("https://127.0.0.1:9090").is_err());
        assert!(check_loopback("http://example.com/api/v1/write").is_err());
    }
}

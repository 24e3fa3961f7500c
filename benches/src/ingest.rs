//! The ingest modes: `backfill` (a time span, as fast as the target accepts) and
//! `live` (at the real scrape rate, timestamps = now).
//!
//! Backfill encodes the whole dataset first (unless `--stream`), so that the timed
//! part measures the target, not our protobuf encoder sharing its two cores.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::encode::{Batch, Batcher, Protocol, SeriesBatcher};
use crate::fleet::{Fleet, FleetConfig, FleetStats, Sample};
use crate::push::{self, PushConfig, PushReport};

/// How many batches each shard's channel holds: the producer blocks beyond that,
/// which keeps the shards within a few batches of each other in time.
const CHANNEL_BATCHES: usize = 2;

#[derive(Debug, Clone)]
pub struct IngestConfig {
    pub fleet: FleetConfig,
    pub push: PushConfig,
    pub shards: usize,
    pub batch_samples: usize,
    /// Backfill: consecutive samples of a series per request (1 = one sample per
    /// `TimeSeries`, as Prometheus sends; more = a bulk load, see `SeriesBatcher`).
    pub samples_per_series: usize,
    /// Generate while sending instead of before (for datasets too big for memory).
    pub stream: bool,
    /// Live mode: send each scrape when its timestamp is reached.
    pub live: bool,
    /// Live mode: a partial batch is sent once its oldest sample is this old, ms.
    pub batch_deadline_ms: i64,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DatasetInfo {
    pub nodes: usize,
    pub gpus: usize,
    pub clusters: usize,
    pub seed: u64,
    pub start_ms: i64,
    pub end_ms: i64,
    pub interval_ms: i64,
    pub jitter_ms: i64,
    pub node_cpus: usize,
    pub mean_job_minutes: f64,
    pub reboot_rate: f64,
    pub protocol: Protocol,
    pub batch_samples: usize,
    #[serde(default = "one")]
    pub samples_per_series: usize,
    pub shards: usize,
    pub rounds: u64,
    pub samples: u64,
    pub stale_markers: u64,
    pub series_created: u64,
    pub jobs_started: u64,
    pub jobs_crashed: u64,
    pub reboots: u64,
    pub batches: u64,
    pub snappy_bytes: u64,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct IngestReport {
    pub dataset: DatasetInfo,
    /// Wall time spent generating and encoding before the push (0 when streaming).
    pub generate_s: f64,
    pub push: PushReport,
    /// CPU seconds (user + system) this process used, generation included.
    pub client_cpu_s: f64,
}

fn one() -> usize {
    1
}

/// How generated samples become requests: one `TimeSeries` per sample, cut when a
/// shard's batch is full, or many samples per series, cut every `per_series` rounds.
enum Cutter {
    PerSample(Batcher),
    PerSeries { batcher: SeriesBatcher, per_series: usize, rounds: usize },
}

impl Cutter {
    fn new(cfg: &IngestConfig) -> Cutter {
        if cfg.samples_per_series > 1 {
            Cutter::PerSeries {
                batcher: SeriesBatcher::new(cfg.push.protocol, cfg.shards, cfg.batch_samples),
                per_series: cfg.samples_per_series,
                rounds: 0,
            }
        } else {
            Cutter::PerSample(Batcher::new(cfg.push.protocol, cfg.shards, cfg.batch_samples))
        }
    }

    /// One scrape round's samples (drained); the batches that are ready.
    fn round(
        &mut self,
        samples: &mut Vec<Sample>,
        mut ready: impl FnMut(Batch) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        match self {
            Cutter::PerSample(b) => {
                for s in samples.drain(..) {
                    if let Some(batch) = b.push(s) {
                        ready(batch)?;
                    }
                }
            }
            Cutter::PerSeries { batcher, per_series, rounds } => {
                samples.drain(..).for_each(|s| batcher.push(s));
                *rounds += 1;
                if *rounds % *per_series == 0 {
                    batcher.flush().into_iter().try_for_each(ready)?;
                }
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Vec<Batch> {
        match self {
            Cutter::PerSample(b) => b.flush_all(),
            Cutter::PerSeries { batcher, .. } => batcher.flush(),
        }
    }
}

fn dataset_info(cfg: &IngestConfig, stats: &FleetStats, batches: u64, snappy_bytes: u64, end_ms: i64) -> DatasetInfo {
    let f = &cfg.fleet;
    DatasetInfo {
        nodes: f.nodes,
        gpus: f.nodes * f.gpus_per_node,
        clusters: f.clusters,
        seed: f.seed,
        start_ms: f.start_ms,
        end_ms,
        interval_ms: f.interval_ms,
        jitter_ms: f.jitter_ms,
        node_cpus: f.node_cpus,
        mean_job_minutes: f.mean_job_minutes,
        reboot_rate: f.reboot_rate,
        protocol: cfg.push.protocol,
        batch_samples: cfg.batch_samples,
        samples_per_series: cfg.samples_per_series,
        shards: cfg.shards,
        rounds: stats.rounds,
        samples: stats.samples,
        stale_markers: stats.stale_markers,
        series_created: stats.series_created,
        jobs_started: stats.jobs_started,
        jobs_crashed: stats.jobs_crashed,
        reboots: stats.reboots,
        batches,
        snappy_bytes,
    }
}

/// Generates the whole dataset into batches, in generation order.
pub fn generate(cfg: &IngestConfig) -> anyhow::Result<(Vec<Batch>, FleetStats, i64)> {
    let mut fleet = Fleet::new(cfg.fleet.clone()).map_err(anyhow::Error::msg)?;
    let mut cutter = Cutter::new(cfg);
    let mut batches = Vec::new();
    let mut round = Vec::new();
    let mut end_ms = cfg.fleet.start_ms;
    while fleet.next_round(&mut round) {
        end_ms = round.iter().map(|s| s.ts).fold(end_ms, i64::max);
        cutter.round(&mut round, |b| {
            batches.push(b);
            Ok(())
        })?;
    }
    batches.extend(cutter.finish());
    Ok((batches, fleet.stats().clone(), end_ms))
}

/// Runs the generator on its own thread, feeding the shard channels as it goes;
/// in live mode each sample waits for its timestamp.
fn spawn_streaming(
    cfg: IngestConfig,
    senders: Vec<mpsc::Sender<Batch>>,
) -> std::thread::JoinHandle<anyhow::Result<(FleetStats, u64, u64, i64)>> {
    std::thread::spawn(move || {
        let mut fleet = Fleet::new(cfg.fleet.clone()).map_err(anyhow::Error::msg)?;
        let (mut n, mut bytes) = (0u64, 0u64);
        let mut end_ms = cfg.fleet.start_ms;
        let mut send = |b: Batch| -> anyhow::Result<()> {
            n += 1;
            bytes += b.body.len() as u64;
            let shard = b.shard;
            senders[shard].blocking_send(b).map_err(|_| anyhow::anyhow!("sender for shard {shard} stopped"))
        };
        let mut round = Vec::new();
        if cfg.live {
            // Live: each sample waits for its timestamp; partial batches go out after
            // the batch deadline, as Prometheus' queue manager sends them.
            let mut batcher = Batcher::new(cfg.push.protocol, cfg.shards, cfg.batch_samples);
            while fleet.next_round(&mut round) {
                for s in round.drain(..) {
                    let wait = s.ts - crate::cli_time::now_ms();
                    if wait > 0 {
                        std::thread::sleep(Duration::from_millis(wait as u64));
                    }
                    for b in batcher.flush_older_than(s.ts - cfg.batch_deadline_ms) {
                        send(b)?;
                    }
                    end_ms = end_ms.max(s.ts);
                    if let Some(b) = batcher.push(s) {
                        send(b)?;
                    }
                }
            }
            batcher.flush_all().into_iter().try_for_each(&mut send)?;
        } else {
            let mut cutter = Cutter::new(&cfg);
            while fleet.next_round(&mut round) {
                end_ms = round.iter().map(|s| s.ts).fold(end_ms, i64::max);
                cutter.round(&mut round, &mut send)?;
            }
            cutter.finish().into_iter().try_for_each(&mut send)?;
        }
        Ok((fleet.stats().clone(), n, bytes, end_ms))
    })
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes into the struct we pass; zeroed is a valid rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer cannot fail.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

pub async fn run(cfg: IngestConfig) -> anyhow::Result<IngestReport> {
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..cfg.shards).map(|_| mpsc::channel::<Batch>(CHANNEL_BATCHES)).unzip();
    if cfg.stream || cfg.live {
        let gen = spawn_streaming(cfg.clone(), txs);
        let push = push::run(cfg.push.clone(), rxs).await?;
        let (stats, n, bytes, end_ms) = tokio::task::spawn_blocking(move || gen.join())
            .await?
            .map_err(|_| anyhow::anyhow!("generator thread panicked"))??;
        return Ok(IngestReport {
            dataset: dataset_info(&cfg, &stats, n, bytes, end_ms),
            generate_s: 0.0,
            push,
            client_cpu_s: cpu_seconds(),
        });
    }
    let t = Instant::now();
    let c2 = cfg.clone();
    let (batches, stats, end_ms) = tokio::task::spawn_blocking(move || generate(&c2)).await??;
    let generate_s = t.elapsed().as_secs_f64();
    let n = batches.len() as u64;
    let bytes = batches.iter().map(|b| b.body.len() as u64).sum();
    eprintln!(
        "generated {} samples in {} batches ({:.1} MB snappy) in {:.1} s; pushing to {}",
        stats.samples,
        n,
        bytes as f64 / 1e6,
        generate_s,
        cfg.push.url
    );
    // The feeder hands batches over in generation order; a full shard channel blocks
    // it, which is what keeps shards in step.
    let feeder = tokio::spawn(async move {
        for b in batches {
            let shard = b.shard;
            if txs[shard].send(b).await.is_err() {
                break;
            }
        }
    });
    let push = push::run(cfg.push.clone(), rxs).await?;
    feeder.await?;
    Ok(IngestReport {
        dataset: dataset_info(&cfg, &stats, n, bytes, end_ms),
        generate_s,
        push,
        client_cpu_s: cpu_seconds(),
    })
}

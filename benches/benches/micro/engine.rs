//! Engine append/select throughput, bytes/sample on disk, memory per active series.

use std::time::Instant;

use criterion::{BatchSize, Criterion, Throughput};
use tessera_model::{Label, MatchOp, Matcher, Sample};
use tessera_storage::{Engine, EngineConfig, SeriesAppend, WalFsync};

use crate::data::{self, Kind, KINDS, SCRAPE_MS, T0};

fn gpu_labels(gpu: usize, kind: Kind) -> Vec<Label> {
    vec![
        Label::new("Hostname", format!("node-{:04}", gpu / 8)),
        Label::new("__name__", format!("DCGM_FI_DEV_{}", kind.name().to_uppercase())),
        Label::new("__tenant__", "anonymous"),
        Label::new("gpu", (gpu % 8).to_string()),
        Label::new("job", "dcgm-exporter"),
        Label::new("modelName", "NVIDIA H100 80GB HBM3"),
        Label::new("pod", format!("train-{}", gpu / 64)),
    ]
}

fn open(dir: &std::path::Path, fsync: WalFsync) -> Engine {
    Engine::open(dir, EngineConfig { wal_fsync: fsync, ..EngineConfig::default() }).expect("open engine")
}

/// Appends one 2,000-sample batch (2,000 series × 1 sample, as a Prometheus agent
/// sends them) per iteration, each iteration one scrape later.
fn bench_append(c: &mut Criterion, name: &str, fsync: WalFsync) {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = open(dir.path(), fsync);
    let labels: Vec<Vec<Label>> = (0..2000).map(|i| gpu_labels(i / 4, KINDS[i % 4])).collect();
    let mut step = 0i64;
    let mut g = c.benchmark_group("engine");
    g.throughput(Throughput::Elements(2000));
    g.bench_function(name, |b| {
        b.iter_batched(
            || {
                step += 1;
                let t = T0 + step * SCRAPE_MS;
                (0..2000).map(|i| [Sample::new(t, (i as i64 + step) as f64)]).collect::<Vec<_>>()
            },
            |samples| {
                let batch: Vec<SeriesAppend<'_>> =
                    labels.iter().zip(&samples).map(|(l, s)| SeriesAppend { labels: l, samples: s }).collect();
                let r = e.append(&batch).expect("append");
                assert_eq!(r.appended, 2000);
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

/// Builds `gpus` GPUs × 4 DCGM kinds with `n` samples each, in scrape order.
fn fill(e: &Engine, gpus: usize, n: usize) -> u64 {
    let series: Vec<(Vec<Label>, Vec<Sample>)> = (0..gpus)
        .flat_map(|g| KINDS.iter().map(move |&k| (gpu_labels(g, k), data::series(k, n, g as u64 * 4 + k as u64))))
        .collect();
    let mut total = 0u64;
    for i in 0..n {
        for chunk in series.chunks(2000) {
            let one: Vec<[Sample; 1]> = chunk.iter().map(|(_, s)| [s[i]]).collect();
            let batch: Vec<SeriesAppend<'_>> =
                chunk.iter().zip(&one).map(|((l, _), s)| SeriesAppend { labels: l, samples: s }).collect();
            total += e.append(&batch).expect("append").appended;
        }
    }
    total
}

fn bench_select(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = open(dir.path(), WalFsync::None);
    // 250 GPUs × 4 kinds × 720 samples (3 h) = 720k samples, persisted.
    let total = fill(&e, 250, 720);
    e.flush().expect("flush");
    let all = [Matcher::new("__tenant__", MatchOp::Equal, "anonymous").expect("matcher")];
    let mut g = c.benchmark_group("engine");
    g.throughput(Throughput::Elements(total));
    g.sample_size(10);
    g.bench_function("select_decode_1000_series_720_samples", |b| {
        b.iter(|| {
            let r = e.select(&all, i64::MIN, i64::MAX).expect("select");
            assert_eq!(r.len(), 1000);
        })
    });
    g.finish();
}

pub fn benches(c: &mut Criterion) {
    bench_append(c, "append_2000_fsync_none", WalFsync::None);
    bench_append(c, "append_2000_fsync_always", WalFsync::Always);
    bench_select(c);
}

/// Bytes on disk per sample after flush + full compaction of DCGM-like data.
pub fn report_disk_bytes_per_sample() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = open(dir.path(), WalFsync::None);
    // 500 GPUs × 4 kinds × 960 samples (4 h at 15 s) = 1.92M samples.
    let started = Instant::now();
    let total = fill(&e, 500, 960);
    let secs = started.elapsed().as_secs_f64();
    e.flush().expect("flush");
    e.compact().expect("compact");
    let st = e.stats();
    println!("report: fill_append_rate samples={total} seconds={secs:.2} samples_per_sec={:.0}", total as f64 / secs);
    println!(
        "report: disk_bytes_per_sample samples={total} disk_bytes={} value={:.3} chunks={}",
        st.disk_bytes,
        st.disk_bytes as f64 / total as f64,
        st.chunks_written
    );
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    pages * 4096
}

/// RSS growth per active series: `TESSERA_BENCH_SERIES` series (default 1,000,000), each
/// with 10 samples in its open chunk.
pub fn report_memory_per_series() {
    let n: usize = std::env::var("TESSERA_BENCH_SERIES").ok().and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let e = open(dir.path(), WalFsync::None);
    let before = rss_bytes();
    let started = Instant::now();
    let mut in_append = std::time::Duration::ZERO;
    for step in 0..10i64 {
        let step_started = Instant::now();
        let t = T0 + step * SCRAPE_MS;
        let mut i = 0;
        while i < n {
            let end = (i + 2000).min(n);
            let labels: Vec<Vec<Label>> = (i..end).map(|s| gpu_labels(s / 4, KINDS[s % 4])).collect();
            let samples: Vec<[Sample; 1]> = (i..end).map(|s| [Sample::new(t, (s % 100) as f64)]).collect();
            let batch: Vec<SeriesAppend<'_>> =
                labels.iter().zip(&samples).map(|(l, s)| SeriesAppend { labels: l, samples: s }).collect();
            let a = Instant::now();
            e.append(&batch).expect("append");
            in_append += a.elapsed();
            i = end;
        }
        println!("report: memory_fill_step step={step} series={n} seconds={:.2}", step_started.elapsed().as_secs_f64());
    }
    println!(
        "report: many_series_append_rate series={n} samples={} seconds_in_append={:.2} samples_per_sec={:.0}",
        n * 10,
        in_append.as_secs_f64(),
        (n * 10) as f64 / in_append.as_secs_f64()
    );
    let after = rss_bytes();
    let st = e.stats();
    println!(
        "report: memory_per_active_series series={} active={} rss_delta_bytes={} rss_per_series={:.0} head_heap_per_series={:.0} seconds={:.1}",
        n,
        st.active_series,
        after.saturating_sub(before),
        after.saturating_sub(before) as f64 / n as f64,
        e.head_heap_bytes() as f64 / n as f64,
        started.elapsed().as_secs_f64()
    );
}

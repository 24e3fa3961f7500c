//! The PromQL engine end to end over an in-memory `Queryable`: the dashboard queries of
//! the query issue on a small GPU fleet. Throughput is in samples read by the query, so
//! the numbers compare with the samples/s/core target.

use criterion::measurement::WallTime;
use criterion::{black_box, BenchmarkGroup, Criterion, Throughput};
use tessera_model::Labels;
use tessera_query::promqltest::MemStore;
use tessera_query::{Engine, EngineOptions, QueryOptions};

/// 256 GPUs on 32 nodes, scraped every 15 s for 12 hours.
const GPUS: usize = 256;
const SCRAPE_MS: i64 = 15_000;
const SAMPLES: usize = 2_880;
const T0: i64 = 1_760_000_000_000;

/// An energy counter (mJ, rising by power × 15 s), a utilisation gauge and a temperature
/// gauge (whole degrees, dropping in two of five samples) per GPU.
fn fleet() -> MemStore {
    let mut s = MemStore::new();
    for gpu in 0..GPUS {
        let host = format!("node-{:03}", gpu / 8);
        let g = (gpu % 8).to_string();
        let energy = Labels::from_pairs([
            ("__name__", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"),
            ("Hostname", host.as_str()),
            ("gpu", g.as_str()),
        ]);
        let util = Labels::from_pairs([
            ("__name__", "DCGM_FI_DEV_GPU_UTIL"),
            ("Hostname", host.as_str()),
            ("gpu", g.as_str()),
        ]);
        let temp = Labels::from_pairs([
            ("__name__", "DCGM_FI_DEV_GPU_TEMP"),
            ("Hostname", host.as_str()),
            ("gpu", g.as_str()),
        ]);
        let mut e = 0.0;
        for i in 0..SAMPLES {
            let t = T0 + i as i64 * SCRAPE_MS;
            let watts = 300.0 + ((i * 7 + gpu) % 50) as f64;
            e += watts * 15_000.0;
            s.add(energy.clone(), t, e);
            s.add(util.clone(), t, ((i / 40 + gpu) % 101) as f64);
            s.add(temp.clone(), t, (60 + (i * 7 + gpu) % 5) as f64);
        }
    }
    s
}

pub fn benches(c: &mut Criterion) {
    let store = fleet();
    let engine = Engine::new(EngineOptions::default());
    let opts = QueryOptions::default();
    let end = T0 + (SAMPLES as i64 - 1) * SCRAPE_MS;
    let mut g = c.benchmark_group("query");
    g.sample_size(10);
    // A range query from `start` to the data's end at `step`.
    let range_query = |g: &mut BenchmarkGroup<'_, WallTime>, name: &str, q: &str, start: i64, step: i64| {
        g.bench_function(name, |b| {
            b.iter(|| {
                black_box(engine.range_query(black_box(&store), q, start, end, step, &opts).expect("valid query"))
            })
        });
    };
    // Every sample of the 256 energy series is read once by the range query.
    g.throughput(Throughput::Elements((GPUS * SAMPLES) as u64));
    range_query(
        &mut g,
        "range_query_sum_rate_5m_256_gpus_12h_1m_step",
        "sum by (Hostname) (rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[5m]))",
        T0 + 300_000,
        60_000,
    );
    // `rate` over a gauge that drops in two of five samples, at a 15 s step: every
    // sample sits in 20 windows, as in the issue's `sum(rate({__name__=~"DCGM.*"}[5m]))`.
    range_query(
        &mut g,
        "range_query_sum_rate_5m_temp_gauge_256_gpus_12h_15s_step",
        "sum(rate(DCGM_FI_DEV_GPU_TEMP[5m]))",
        T0 + 300_000,
        SCRAPE_MS,
    );
    // `max_over_time` over windows that overlap 40 times (the dashboard's
    // `max_temp_per_node`), then 20, 8 and 4 times.
    for step in [SCRAPE_MS, 30_000, 75_000, 150_000] {
        range_query(
            &mut g,
            &format!("range_query_max_over_time_10m_temp_by_host_256_gpus_12h_{}s_step", step / 1000),
            "max by (Hostname) (max_over_time(DCGM_FI_DEV_GPU_TEMP[10m]))",
            T0 + 600_000,
            step,
        );
    }
    // `avg_over_time(util[1h])` at a 10 m step (every sample in 6 windows), the shape of
    // the billion-sample benchmark's `top10_util`, and at 1 m (60).
    for step in [600_000, 60_000] {
        range_query(
            &mut g,
            &format!("range_query_topk_avg_over_time_1h_util_256_gpus_12h_{}m_step", step / 60_000),
            "topk(10, avg_over_time(DCGM_FI_DEV_GPU_UTIL[1h]))",
            T0 + 3_600_000,
            step,
        );
    }
    // `changes(temp[1h])` at a 1 m step: every sample in 60 windows.
    range_query(
        &mut g,
        "range_query_sum_changes_1h_temp_256_gpus_12h_1m_step",
        "sum(changes(DCGM_FI_DEV_GPU_TEMP[1h]))",
        T0 + 3_600_000,
        60_000,
    );
    range_query(
        &mut g,
        "range_query_avg_util_by_host_256_gpus_12h_1m_step",
        "avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL)",
        T0,
        60_000,
    );
    // One hour of each series (240 samples) per evaluation.
    g.throughput(Throughput::Elements((GPUS * 240) as u64));
    g.bench_function("instant_topk_5_avg_over_time_1h_256_gpus", |b| {
        b.iter(|| {
            let out = engine
                .instant_query(black_box(&store), "topk(5, avg_over_time(DCGM_FI_DEV_GPU_UTIL[1h]))", end, &opts)
                .expect("valid query");
            black_box(out)
        })
    });
    g.finish();
    churning_pods(c);
    scraped_fleet(c);
}

/// 100 nodes of 8 GPUs, ten DCGM fields each (8,000 series), scraped every 15 s for two
/// hours, every series of a node stamped with its scrape's time (a per-round jitter of
/// up to ±50 ms, the same for the node's series, as an agent stamps one scrape): the
/// shape of `compare.sh`'s `dcgm_all_rate` (BENCHMARKS.md) without storage. Integer
/// and two-decimal gauges drop at random, so `rate` meets resets in a third of their
/// samples; two counters only rise.
fn scraped_fleet(c: &mut Criterion) {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    const NODES: usize = 100;
    const ROUNDS: usize = 500;
    let fields = [
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
    ];
    let mut rng = StdRng::seed_from_u64(7);
    let mut store = MemStore::new();
    for node in 0..NODES {
        let host = format!("node-{node:03}");
        let times: Vec<i64> =
            (0..ROUNDS).map(|i| T0 + i as i64 * SCRAPE_MS + node as i64 * 97 + rng.gen_range(-50..=50)).collect();
        for gpu in 0..8 {
            let g = gpu.to_string();
            for (f, name) in fields.iter().enumerate() {
                let l = Labels::from_pairs([("__name__", *name), ("Hostname", host.as_str()), ("gpu", g.as_str())]);
                let mut counter = rng.gen_range(1e9..1e11f64).round();
                for &t in &times {
                    let v = match f {
                        0..=3 => rng.gen_range(0..=100) as f64,
                        4 => (rng.gen_range(25_000..40_000) as f64) / 100.0,
                        5..=7 => (rng.gen_range(0..=1000) as f64) / 1000.0,
                        _ => {
                            counter += (rng.gen_range(250.0..400.0) * 15_000.0f64).round();
                            counter
                        }
                    };
                    store.add(l.clone(), t, v);
                }
            }
        }
    }
    let engine = Engine::new(EngineOptions::default());
    let opts = QueryOptions::default();
    let (start, end) = (T0 + 300_000, T0 + (ROUNDS as i64 - 1) * SCRAPE_MS);
    let mut g = c.benchmark_group("query");
    g.sample_size(10);
    g.throughput(Throughput::Elements((NODES * 8 * fields.len() * ROUNDS) as u64));
    g.bench_function("range_query_sum_rate_5m_all_fields_800_gpus_2h_15s_step", |b| {
        b.iter(|| {
            let q = r#"sum(rate({__name__=~"DCGM.*"}[5m]))"#;
            black_box(engine.range_query(black_box(&store), q, start, end, SCRAPE_MS, &opts).expect("valid query"))
        })
    });
    g.finish();
}

/// Pods replaced every 5 minutes for 12 hours: 2,880 pods of 20 samples each, about 20
/// alive at any step, aggregated at the querier (`label_replace` keeps the aggregation
/// from streaming). A walk over every series at every step costs pods × steps; one over
/// the series alive at each step costs the points.
fn churning_pods(c: &mut Criterion) {
    const PODS: usize = 2_880;
    const LIFE: usize = 20;
    let mut store = MemStore::new();
    for pod in 0..PODS {
        let name = format!("pod-{pod:05}");
        let job = format!("job-{}", pod % 7);
        let l = Labels::from_pairs([("__name__", "pod_cpu"), ("job", job.as_str()), ("pod", name.as_str())]);
        for i in 0..LIFE {
            store.add(l.clone(), T0 + ((pod + i) as i64) * SCRAPE_MS, (pod % 13 + i) as f64);
        }
    }
    let engine = Engine::new(EngineOptions::default());
    let opts = QueryOptions::default();
    let end = T0 + (PODS + LIFE) as i64 * SCRAPE_MS;
    let mut g = c.benchmark_group("query");
    g.sample_size(10);
    g.throughput(Throughput::Elements((PODS * LIFE) as u64));
    g.bench_function("range_query_sum_by_job_relabelled_2880_churning_pods_12h_15s_step", |b| {
        b.iter(|| {
            let q = r#"sum by (job) (label_replace(pod_cpu, "x", "$1", "pod", "(.*)"))"#;
            black_box(engine.range_query(black_box(&store), q, T0, end, SCRAPE_MS, &opts).expect("valid query"))
        })
    });
    g.finish();
}

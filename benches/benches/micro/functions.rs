//! PromQL function kernels on one window: the per-series, per-step work of `rate()` and
//! `sum_over_time()` once the engine has cut a window out of a decoded series.
//! Throughput is in samples, so the numbers compare directly with decode speed.

use criterion::{black_box, BenchmarkId, Criterion, Throughput};
use tessera_model::Sample;
use tessera_query::bench_kernels::{eval_range, extrapolate, KahanSum, RangeFn, RateWindows, ResetIndex};

/// A counter scraped every 15 s with millisecond jitter and one reset, as a 5m window
/// holds it (20 samples), with the window bounds the engine would pass.
fn counter_window(n: usize) -> (Vec<Sample>, i64, i64) {
    let mut v = 1_000.0;
    let samples: Vec<Sample> = (0..n)
        .map(|i| {
            v += (i % 7) as f64 * 13.0;
            if i == n / 2 {
                v = 3.0; // a counter reset in the middle
            }
            Sample { t: 1_700_000_000_000 + i as i64 * 15_000 + (i as i64 * 37) % 11, v }
        })
        .collect();
    let end = samples[n - 1].t + 4_000;
    (samples, end - n as i64 * 15_000, end)
}

pub fn benches(c: &mut Criterion) {
    for name in ["rate", "sum_over_time", "avg_over_time", "deriv"] {
        let f = RangeFn::from_name(name).expect("known function");
        let mut g = c.benchmark_group(format!("fn_{name}"));
        for n in [20usize, 240] {
            let (w, start, end) = counter_window(n);
            g.throughput(Throughput::Elements(n as u64));
            g.bench_with_input(BenchmarkId::from_parameter(n), &w, |b, w| {
                b.iter(|| f.eval(black_box(w), start, end, &[]).expect("valid call"))
            });
        }
        g.finish();
    }
    // The same rate call resolved by name on every window, to show what the per-call
    // string match costs (the engine should resolve once per query).
    let (w, start, end) = counter_window(20);
    let mut g = c.benchmark_group("fn_rate_by_name");
    g.throughput(Throughput::Elements(20));
    g.bench_function("20", |b| {
        b.iter(|| eval_range(black_box("rate"), black_box(&w), start, end, &[]).expect("known"))
    });
    g.finish();
    // `rate`'s extrapolation alone (the window's change given), over every 5m window of
    // 12 h of a counter at a 15 s step: what a range query does per series and step
    // once its windows are cut. Timestamps on the scrape grid, and with jitter.
    let mut g = c.benchmark_group("rate_extrapolate_12h_15s_step");
    for (data, jitter) in [("regular", 0), ("jittered", 11)] {
        let samples: Vec<Sample> = (0..2_880i64)
            .map(|i| Sample { t: i * 15_000 + if jitter > 0 { (i * 37) % jitter } else { 0 }, v: (i * 7) as f64 })
            .collect();
        // Cut as the engine cuts them: steps half an interval after a scrape, the start
        // exclusive.
        let end = |hi: usize| (hi as i64 - 1) * 15_000 + 7_500;
        let windows: Vec<(usize, usize, i64, i64)> =
            (20..samples.len()).map(|hi| (hi - 20, hi, end(hi) - 300_000, end(hi))).collect();
        g.throughput(Throughput::Elements(windows.len() as u64));
        g.bench_function(data, |b| {
            b.iter(|| {
                windows.iter().fold(0.0, |acc, &(lo, hi, ws, we)| {
                    let w = black_box(&samples[lo..hi]);
                    acc + extrapolate(w, ws, we, true, true, w[w.len() - 1].v - w[0].v)
                })
            })
        });
        // The table of these windows, built on `s` (the first series of a timestamp set
        // does this, computing its values as it goes).
        let build = |table: &mut RateWindows, s: &[Sample]| {
            table.start(windows[0].2, 15_000, 300_000, true, windows.len());
            for (k, &(lo, hi, _, we)) in windows.iter().enumerate() {
                table.push(s, lo, hi, k, we, || s[hi - 1].v - s[lo].v);
            }
            table.finish(s);
        };
        // Other series with the same timestamps: gauges (most DCGM fields), whose
        // windows' changes are positive at random, of integers (their losses come from
        // exact prefix sums) and of two decimals (added one by one).
        let gauge = |modulus: usize, scale: f64| -> Vec<Sample> {
            samples
                .iter()
                .enumerate()
                .map(|(i, s)| Sample { t: s.t, v: ((i * 2_654_435_761) % modulus) as f64 / scale })
                .collect()
        };
        let (integer_gauge, decimal_gauge) = (gauge(101, 1.0), gauge(10_007, 100.0));
        let mut kept = RateWindows::default();
        build(&mut kept, &samples);
        g.bench_function(format!("{data}_table"), |b| {
            let mut table = RateWindows::default();
            b.iter(|| {
                let s = black_box(&samples);
                build(&mut table, s);
                table.values().fold(0.0, |acc, (_, v)| acc + v)
            })
        });
        // A later series reads its values off the kept table, given each window's change
        // as `last - first` (the loop alone).
        for (name, series) in [("table_kept", &samples), ("table_kept_gauge", &integer_gauge)] {
            g.bench_function(format!("{data}_{name}"), |b| {
                b.iter(|| {
                    let s = black_box(series);
                    let change = |lo: usize, hi: usize| s[hi - 1].v - s[lo].v;
                    kept.counter_values(s, change).fold(0.0, |acc, (_, v)| acc + v)
                })
            });
        }
        // As the engine runs the decimal gauge: its reset index built per series, each
        // window's losses (a drop in half of the samples) added one by one.
        g.bench_function(format!("{data}_table_kept_decimal_gauge_resets"), |b| {
            b.iter(|| {
                let s = black_box(&decimal_gauge);
                let index = ResetIndex::new(s);
                let change = |lo: usize, hi: usize| index.change(s, lo, hi);
                kept.counter_values(s, change).fold(0.0, |acc, (_, v)| acc + v)
            })
        });
        // Of which building the gauge's reset index (elements: still the windows).
        g.bench_function(format!("{data}_reset_index_of_decimal_gauge"), |b| {
            b.iter(|| ResetIndex::new(black_box(&decimal_gauge)))
        });
    }
    g.finish();
    // The Kahan sum alone, the inner loop of `sum`/`avg` aggregations.
    let values: Vec<f64> = (0..1000).map(|i| i as f64 * 0.1).collect();
    let mut g = c.benchmark_group("kahan_sum");
    g.throughput(Throughput::Elements(values.len() as u64));
    g.bench_function("1000", |b| {
        b.iter(|| {
            let mut k = KahanSum::new();
            for v in black_box(&values) {
                k.add(*v);
            }
            k.value()
        })
    });
    g.finish();
}

//! Micro-benchmarks of the storage engine and the PromQL function kernels (criterion,
//! `harness = false`).
//!
//! `cargo bench --workspace --bench micro` runs the criterion groups of each module and
//! the one-shot reports (bytes/sample on disk, memory per active series), which print
//! plain `report:` lines because criterion measures time, not size.

mod codec;
mod data;
mod engine;
mod functions;
mod query;

fn main() {
    // Size reports are slow (they build real data sets): run them only under
    // `cargo bench` (which passes `--bench`), not `cargo test --benches`, and not when a
    // criterion filter narrows the run. `TESSERA_BENCH_REPORTS=1` forces them.
    let args: Vec<String> = std::env::args().collect();
    let filtered = has_filter(&args[1..]);
    let forced = std::env::var("TESSERA_BENCH_REPORTS").is_ok_and(|v| v == "1");
    let reports = forced || (args.iter().any(|a| a == "--bench") && !filtered);
    if reports {
        // First, while the heap is fresh: freed memory from earlier work would hide
        // part of the RSS growth.
        engine::report_memory_per_series();
    }
    let mut c = criterion::Criterion::default().configure_from_args();
    codec::benches(&mut c);
    engine::benches(&mut c);
    functions::benches(&mut c);
    query::benches(&mut c);
    c.final_summary();
    if reports {
        codec::report_bytes_per_sample();
        engine::report_disk_bytes_per_sample();
    }
}

/// Whether criterion was given a benchmark-name filter (a positional argument that is
/// not the value of an option such as `--measurement-time 3`).
fn has_filter(args: &[String]) -> bool {
    const TAKES_VALUE: &[&str] = &[
        "--warm-up-time",
        "--measurement-time",
        "--sample-size",
        "--save-baseline",
        "--baseline",
        "--load-baseline",
        "--nresamples",
        "--noise-threshold",
        "--confidence-level",
        "--significance-level",
        "--profile-time",
        "--plotting-backend",
        "--color",
        "--output-format",
    ];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if TAKES_VALUE.contains(&a.as_str()) {
            it.next();
        } else if !a.starts_with('-') {
            return true;
        }
    }
    false
}

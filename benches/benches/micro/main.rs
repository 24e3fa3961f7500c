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
    let filtered = args.iter().skip(1).any(|a| !a.starts_with('-'));
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

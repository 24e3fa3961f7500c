//! Prometheus' conformance scripts run through the real storage path: samples are
//! pushed through `Shards::push` into three RocksDB-backed engines under a tenant, and
//! every eval reads through `TenantView` (tenant matcher, the compiled matchers' literal,
//! prefix and set fast paths in the storage index, per-day postings, head + persisted chunks),
//! set up as `tessera serve` sets it up: the planner's shard-local fragments run per
//! shard, two at a time, and the engine merges their partials.
//!
//! The in-memory runner (`query/tests/promqltest.rs`) proves the engine; this proves
//! that storage hands the engine the same series. Every eval that passes in memory
//! must pass here: the expected failures are exactly the in-memory ones
//! (`query/testdata/upstream/EXPECTED_FAILURES`), no more.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tessera_model::{Label, Labels, Sample};
use tessera_query::promqltest::{eval_in_process, run_script_on, EvalQuery, TestStore, UPSTREAM_FLOAT_SCRIPTS};
use tessera_query::{Engine, EngineOptions, QueryOutput};
use tessera_server::shards::{series_hash, PushSeries, Shards, TenantView};
use tessera_storage::{EngineConfig, WalFsync};

const TENANT: &str = "conformance";
const SHARDS: usize = 3;

/// Loads go to a buffer (last write per timestamp wins, as in Prometheus' test
/// storage); `commit` pushes whatever is new, in time order per series.
struct StorageStore {
    rt: tokio::runtime::Runtime,
    dir: Option<tempfile::TempDir>,
    shards: Arc<Shards>,
    view: TenantView,
    /// Fragments evaluated and selects streamed by the views of earlier `clear`s.
    fragments_before: u64,
    streamed_before: u64,
    pending: BTreeMap<Vec<Label>, BTreeMap<i64, f64>>,
}

fn config() -> EngineConfig {
    EngineConfig {
        // The scripts' samples sit near t = 0 (1970) and may be loaded out of order
        // across `load` commands; keep everything and accept any order.
        retention_ms: 0,
        out_of_order_window_ms: i64::MAX / 4,
        wal_fsync: WalFsync::None,
        memtable_bytes: 1 << 20,
        ..EngineConfig::default()
    }
}

impl StorageStore {
    fn new() -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
        let (dir, shards) = Self::open();
        let view = serve_view(&shards);
        StorageStore {
            rt,
            dir: Some(dir),
            shards,
            view,
            fragments_before: 0,
            streamed_before: 0,
            pending: BTreeMap::new(),
        }
    }

    fn open() -> (tempfile::TempDir, Arc<Shards>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let shards = Shards::open(dir.path(), SHARDS, &config(), 4, &|_, _| {}).expect("open shards");
        (dir, Arc::new(shards))
    }
}

/// The tenant's view as `tessera serve` makes it: pushing fragments down to the shards.
fn serve_view(shards: &Arc<Shards>) -> TenantView {
    shards.tenant_view(TENANT).with_pushdown(Engine::new(EngineOptions::default()), 2)
}

impl TestStore for StorageStore {
    fn clear(&mut self) {
        self.pending.clear();
        self.fragments_before += self.view.fragments_evaluated();
        self.streamed_before += self.view.streamed_selects();
        // Engines close when the last handle drops; then the directory goes.
        self.view = {
            let (dir, shards) = Self::open();
            let view = serve_view(&shards);
            self.shards = shards;
            let old = self.dir.replace(dir);
            drop(old);
            view
        };
    }

    fn add(&mut self, labels: Labels, t: i64, v: f64) {
        let labels: Vec<Label> =
            labels.iter().map(|l| Label { name: l.name.clone(), value: l.value.clone() }).collect();
        self.pending.entry(labels).or_default().insert(t, v);
    }

    fn commit(&mut self) -> Result<(), String> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let series: Vec<PushSeries> = std::mem::take(&mut self.pending)
            .into_iter()
            .map(|(labels, samples)| PushSeries {
                hash: series_hash(TENANT, &labels),
                samples: samples.into_iter().map(|(t, v)| Sample { t, v }).collect(),
                labels,
            })
            .collect();
        let out =
            self.rt.block_on(self.shards.push(TENANT, series)).map_err(|e| format!("push failed: {}", e.message))?;
        if let Some(r) = out.first_rejection {
            return Err(format!("storage refused a loaded sample of {:?} at t={}: {:?}", r.labels, r.t, r.reason));
        }
        Ok(())
    }

    fn eval(&mut self, engine: &Engine, q: EvalQuery<'_>) -> Result<QueryOutput, String> {
        eval_in_process(engine, &self.view, q)
    }
}

fn upstream_dir() -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs tests"))
        .join("../query/testdata/upstream")
}

/// `file:line` of every eval the in-memory runner is expected to fail.
fn expected_failures() -> BTreeSet<String> {
    std::fs::read_to_string(upstream_dir().join("EXPECTED_FAILURES"))
        .expect("EXPECTED_FAILURES")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split('\t').next().map(str::to_owned))
        .collect()
}

#[test]
fn upstream_scripts_give_the_same_results_through_the_storage_engine() {
    let expected = expected_failures();
    let mut store = StorageStore::new();
    let mut unexpected = Vec::new();
    let (mut passed, mut failed) = (0, 0);
    for script in UPSTREAM_FLOAT_SCRIPTS {
        let path = upstream_dir().join(script);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        store.clear();
        let fs = run_script_on(script, &text, &mut store);
        passed += fs.passed;
        failed += fs.failed;
        for f in fs.failures {
            if !expected.contains(&format!("{script}:{}", f.line)) {
                unexpected.push(format!("{script}:{}: {}: {}", f.line, f.query, f.reason));
            }
        }
    }
    let fragments = store.fragments_before + store.view.fragments_evaluated();
    let streamed = store.streamed_before + store.view.streamed_selects();
    eprintln!(
        "through storage: {passed} evals passed, {failed} failed (all listed in EXPECTED_FAILURES); \
         {fragments} shard fragments evaluated, {streamed} selects streamed"
    );
    assert!(passed > 500, "only {passed} evals ran");
    assert!(fragments > 1000, "only {fragments} fragments ran: the pushdown path was not taken");
    // Inside the fragments, the dashboard shapes read series one at a time from storage.
    assert!(streamed > 1000, "only {streamed} selects streamed: the series-at-a-time path was not taken");
    assert!(
        unexpected.is_empty(),
        "{} evals fail through storage but not in memory:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
}

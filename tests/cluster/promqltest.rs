//! Prometheus' conformance scripts over HTTP, against a 3-ingester RF=3 cluster (through
//! its gateway) and a single `tessera serve`, both started once for the whole suite.
//!
//! The scripts are the vendored copies in `query/testdata/upstream` (the same list as
//! the storage runner, `server/tests/promqltest_storage.rs`) and the project's own
//! `query/testdata/*.test`, parsed and judged by the one promqltest runner
//! (`tessera_query::promqltest`); only where the data goes and who answers differ:
//!
//! - Data. A first pass runs every script with a [`Pass::Collect`] store that records,
//!   at each eval, the data loaded since the last `clear` if a `load` came since the
//!   previous eval. Each such state becomes one tenant (`X-Scope-OrgID`), so cases are
//!   isolated and a later `load` never leaks into an earlier eval. All tenants are then
//!   written with remote write, in parallel, to both servers, each series' samples in
//!   time order. The samples sit near t = 0 (1970): both servers run with
//!   `storage.retention_ms = 0`, because the default oldest accepted sample is the
//!   retention (15 days) before the server clock and a 1970 sample is refused with 400
//!   (`limits.max_sample_age_secs`), by design. Names are checked as UTF-8
//!   (`limits.name_validation`), as the scripts use Prometheus 3 names.
//! - Evals. The second pass asks both servers every eval over `/api/v1/query` or
//!   `/api/v1/query_range` (the same tenant), asserts that they answer the same, and
//!   hands the cluster's answer to the runner, which checks it against the script.
//!
//! "The same" is the same HTTP status and the same JSON body: value for value, series
//! in the same order, every float printed the same, the same `warnings` and `infos`, the
//! same error message. No float-rounding tolerance: both sides run the same engine over
//! the same samples handed over in the same order, and every eval measured so answers
//! identically, so any difference is a bug.
//!
//! Skipped, as in the storage runner: `native_histograms.test` (its samples are not
//! floats). Other scripts load a few native histograms next to floats; the in-process
//! runners stand them in with an internal NaN marker, which the write path deliberately
//! turns into a plain NaN (`canonical_float` in `ingest/decode.rs`: a client cannot
//! forge it), and remote write 1.0 has no other way to carry them. So an eval whose data
//! holds such a sample is still asked of both servers and their answers must still be
//! identical, but a failed expectation there is counted as skipped, not as a failure.
//! Every other failing eval must be one the in-memory runner fails too
//! (`query/testdata/upstream/EXPECTED_FAILURES`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use serde_json::Value as Json;
use tessera_model::Labels;
use tessera_model::HISTOGRAM_MARKER_BITS;
use tessera_proto::prometheus::{Label, Sample as PbSample, TimeSeries, WriteRequest};
use tessera_query::promqltest::{run_script_on, EvalAt, EvalQuery, TestStore, UPSTREAM_FLOAT_SCRIPTS};
use tessera_query::{Engine, QueryOutput, Series, Value, VectorElem};

use super::harness::{Proc, Server};
use super::proc::{Cluster, Spec};

/// Config tables both servers run with (see the module doc).
const TABLES: &str = "\n[storage]\nretention_ms = 0\nwal_fsync = \"none\"\n\n[limits]\nname_validation = \"utf8\"\n";

/// Most samples in one remote-write request.
const SAMPLES_PER_REQUEST: usize = 20_000;

type Data = BTreeMap<Labels, BTreeMap<i64, f64>>;

fn testdata() -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs tests"))
        .join("../query/testdata")
}

/// (name, text) of every script run: upstream ones as `NAME`, own ones as `own/NAME`.
fn scripts() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for name in UPSTREAM_FLOAT_SCRIPTS {
        let path = testdata().join("upstream").join(name);
        out.push((name.to_string(), std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"))));
    }
    let mut own: Vec<PathBuf> = std::fs::read_dir(testdata())
        .expect("query/testdata")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "test"))
        .collect();
    own.sort();
    assert!(!own.is_empty(), "no own scripts in query/testdata");
    for path in own {
        let name = format!("own/{}", path.file_name().expect("file name").to_string_lossy());
        out.push((name, std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"))));
    }
    out
}

/// `file:line` of every upstream eval the in-memory runner is expected to fail.
fn expected_failures() -> BTreeSet<String> {
    std::fs::read_to_string(testdata().join("upstream/EXPECTED_FAILURES"))
        .expect("EXPECTED_FAILURES")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split('\t').next().map(str::to_owned))
        .collect()
}

/// The two servers asked, and what was seen while asking.
struct Targets<'a> {
    gateway: &'a Proc,
    single: &'a Server,
    /// Evals on which the two answered differently: the request and both answers.
    differences: Vec<String>,
    requests: usize,
}

enum Pass<'a, 'b> {
    /// Records each tenant's data.
    Collect(&'b mut Vec<(String, Data)>),
    /// Asks both servers.
    Query(&'b mut Targets<'a>),
}

/// One script's view of the servers: which tenant holds the data its next eval reads.
struct HttpStore<'a, 'b> {
    script: usize,
    generation: usize,
    /// A `load` added samples since the last eval (or `clear`).
    dirty: bool,
    data: Data,
    /// `data` holds native-histogram samples (the runner's marker NaN).
    histograms: bool,
    /// Lines of the evals that read data with native-histogram samples.
    histogram_evals: BTreeSet<usize>,
    pass: Pass<'a, 'b>,
}

impl<'a, 'b> HttpStore<'a, 'b> {
    fn new(script: usize, pass: Pass<'a, 'b>) -> Self {
        HttpStore {
            script,
            generation: 0,
            dirty: false,
            data: Data::new(),
            histograms: false,
            histogram_evals: BTreeSet::new(),
            pass,
        }
    }

    /// The tenant of the current data; one that nothing was written to is empty.
    fn tenant(&self) -> String {
        format!("s{}-g{}", self.script, self.generation)
    }
}

impl TestStore for HttpStore<'_, '_> {
    fn clear(&mut self) {
        self.data.clear();
        self.histograms = false;
        self.dirty = false;
        self.generation += 1;
    }

    fn add(&mut self, labels: Labels, t: i64, v: f64) {
        self.histograms |= v.to_bits() == HISTOGRAM_MARKER_BITS;
        self.data.entry(labels).or_default().insert(t, v);
        self.dirty = true;
    }

    fn commit(&mut self) -> Result<(), String> {
        if self.dirty {
            self.dirty = false;
            self.generation += 1;
            let tenant = self.tenant();
            if let Pass::Collect(out) = &mut self.pass {
                out.push((tenant, self.data.clone()));
            }
        }
        Ok(())
    }

    fn eval(&mut self, _engine: &Engine, q: EvalQuery<'_>) -> Result<QueryOutput, String> {
        let tenant = self.tenant();
        if self.histograms {
            self.histogram_evals.insert(q.line);
        }
        let Pass::Query(targets) = &mut self.pass else {
            return Err("not asked in the collecting pass".into());
        };
        let query = enc(q.query);
        let path = match q.at {
            EvalAt::Instant(t) => format!("/api/v1/query?query={query}&time={}", secs(t)),
            EvalAt::Range { start, end, step } => {
                format!("/api/v1/query_range?query={query}&start={}&end={}&step={step}ms", secs(start), secs(end))
            }
        };
        let (cs, cluster) = targets.gateway.get_json(&path, Some(&tenant));
        let (ss, single) = targets.single.get_json(&path, Some(&tenant));
        targets.requests += 2;
        if (cs, &cluster) != (ss, &single) {
            targets.differences.push(format!("{path}\n  cluster: {cs} {cluster}\n  single:  {ss} {single}"));
        }
        if cs != 200 {
            return Err(cluster["error"].as_str().unwrap_or("(no error message)").to_owned());
        }
        to_output(&cluster)
    }
}

fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Milliseconds as the API's decimal seconds, exactly (`-1500` → `-1.500`).
fn secs(ms: i64) -> String {
    let sign = if ms < 0 { "-" } else { "" };
    let a = ms.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1000, a % 1000)
}

/// A float as the API prints it (`"NaN"`, `"+Inf"`, shortest round-trip decimal).
fn float(v: &Json) -> Result<f64, String> {
    let s = v.as_str().ok_or_else(|| format!("value {v} is not a string"))?;
    s.parse().map_err(|_| format!("value {s:?} is not a float"))
}

/// `[t, "v"]` as (ms, value).
fn point(p: &Json) -> Result<(i64, f64), String> {
    let t = p[0].as_f64().ok_or_else(|| format!("timestamp of {p} is not a number"))?;
    Ok(((t * 1000.0).round() as i64, float(&p[1])?))
}

fn labels(m: &Json) -> Result<Labels, String> {
    let m = m.as_object().ok_or_else(|| format!("metric {m} is not an object"))?;
    Ok(Labels::from_pairs(m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))))
}

fn strings(v: &Json) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect()).unwrap_or_default()
}

/// A successful API answer as the engine's output, for the runner to check.
fn to_output(body: &Json) -> Result<QueryOutput, String> {
    let data = &body["data"];
    let result = &data["result"];
    let items = || result.as_array().ok_or_else(|| format!("result {result} is not an array"));
    let value = match data["resultType"].as_str() {
        Some("scalar") => {
            let (t, v) = point(result)?;
            Value::Scalar { t, v }
        }
        Some("string") => {
            let t = result[0].as_f64().ok_or_else(|| format!("timestamp of {result} is not a number"))?;
            let s = result[1].as_str().ok_or_else(|| format!("string result {result} has no text"))?;
            Value::String { t: (t * 1000.0).round() as i64, s: s.to_owned() }
        }
        Some("vector") => Value::Vector(
            items()?
                .iter()
                .map(|x| {
                    let (t, v) = point(&x["value"])?;
                    Ok(VectorElem { labels: labels(&x["metric"])?, t, v })
                })
                .collect::<Result<_, String>>()?,
        ),
        Some("matrix") => Value::Matrix(
            items()?
                .iter()
                .map(|x| {
                    let samples = x["values"]
                        .as_array()
                        .ok_or("a matrix series without values")?
                        .iter()
                        .map(|p| point(p).map(|(t, v)| tessera_model::Sample { t, v }))
                        .collect::<Result<_, String>>()?;
                    Ok(Series { labels: labels(&x["metric"])?, samples })
                })
                .collect::<Result<_, String>>()?,
        ),
        other => return Err(format!("unknown resultType {other:?}")),
    };
    Ok(QueryOutput { value, warnings: strings(&body["warnings"]), infos: strings(&body["infos"]) })
}

/// Remote-write requests carrying `data`, at most [`SAMPLES_PER_REQUEST`] samples each.
fn requests(data: &Data) -> Vec<WriteRequest> {
    let mut out = vec![WriteRequest::default()];
    let mut n = 0;
    for (ls, samples) in data {
        if n > 0 && n + samples.len() > SAMPLES_PER_REQUEST {
            out.push(WriteRequest::default());
            n = 0;
        }
        n += samples.len();
        let labels = ls.iter().map(|l| Label::new(l.name.to_string(), l.value.to_string())).collect();
        let samples = samples.iter().map(|(&timestamp, &value)| PbSample { value, timestamp }).collect();
        out.last_mut().expect("one request").timeseries.push(TimeSeries { labels, samples, ..Default::default() });
    }
    out
}

/// Writes every tenant's data to both servers, on 4 threads.
fn write_all(tenants: &[(String, Data)], gateway: &Proc, single: &Server) -> usize {
    let next = AtomicUsize::new(0);
    let errors = Mutex::new(Vec::new());
    let samples = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((tenant, data)) = tenants.get(i) else { break };
                samples.fetch_add(data.values().map(BTreeMap::len).sum::<usize>(), Ordering::Relaxed);
                for req in requests(data) {
                    for (who, p) in [("cluster", gateway), ("single node", &**single)] {
                        let r = p.write_v1(&req, Some(tenant));
                        let status = r.status().as_u16();
                        if status != 204 {
                            let body = r.text().unwrap_or_default();
                            errors.lock().expect("errors").push(format!("{who}, tenant {tenant}: {status} {body}"));
                        }
                    }
                }
            });
        }
    });
    let errors = errors.into_inner().expect("errors");
    assert!(errors.is_empty(), "{} writes refused:\n{}", errors.len(), errors.join("\n"));
    samples.into_inner()
}

/// What running one script in the query pass found.
#[derive(Default)]
struct ScriptOutcome {
    passed: usize,
    /// Failing evals the in-memory runner also fails.
    expected: usize,
    /// Failing evals on data with native histograms (see the module doc).
    skipped: usize,
    unexpected: Vec<String>,
    differences: Vec<String>,
    requests: usize,
}

fn run_query_pass(
    i: usize,
    name: &str,
    text: &str,
    targets: (&Proc, &Server),
    expected: &BTreeSet<String>,
) -> ScriptOutcome {
    let mut t = Targets { gateway: targets.0, single: targets.1, differences: Vec::new(), requests: 0 };
    let mut store = HttpStore::new(i, Pass::Query(&mut t));
    let fs = run_script_on(name, text, &mut store);
    let histogram_evals = std::mem::take(&mut store.histogram_evals);
    drop(store);
    let mut out =
        ScriptOutcome { passed: fs.passed, differences: t.differences, requests: t.requests, ..Default::default() };
    for f in fs.failures {
        if expected.contains(&format!("{name}:{}", f.line)) {
            out.expected += 1;
        } else if histogram_evals.contains(&f.line) {
            out.skipped += 1;
        } else {
            out.unexpected.push(format!("{name}:{}: {}: {}", f.line, f.query, f.reason));
        }
    }
    out
}

#[test]
fn promqltest_scripts_over_http_answer_the_same_on_a_3_ingester_rf3_cluster_and_one_node() {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = Spec { ingesters: 3, replication_factor: 3, shards: 8, cluster_keys: "", tables: TABLES };
    let cluster = Cluster::start_with(dir.path(), &spec, &|_, addr| addr);
    let single = Server::start_with_config(&dir.path().join("single"), TABLES);
    let scripts = scripts();

    let mut tenants = Vec::new();
    for (i, (name, text)) in scripts.iter().enumerate() {
        run_script_on(name, text, &mut HttpStore::new(i, Pass::Collect(&mut tenants)));
    }
    let samples = write_all(&tenants, cluster.gateway(), &single);
    let loaded = started.elapsed();

    // The scripts' evals, 3 scripts at a time (each script's evals in order).
    let expected = expected_failures();
    let next = AtomicUsize::new(0);
    let outcomes = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((name, text)) = scripts.get(i) else { break };
                let o = run_query_pass(i, name, text, (cluster.gateway(), &single), &expected);
                outcomes.lock().expect("outcomes").push(o);
            });
        }
    });
    let all = outcomes.into_inner().expect("outcomes");
    let sum = |f: fn(&ScriptOutcome) -> usize| all.iter().map(f).sum::<usize>();
    let differences: Vec<&String> = all.iter().flat_map(|o| &o.differences).collect();
    let unexpected: Vec<&String> = all.iter().flat_map(|o| &o.unexpected).collect();
    eprintln!(
        "promqltest over HTTP: {} scripts, {} tenants, {samples} samples written in {loaded:?}; {} queries; evals: {} \
         passed, {} failed as in memory (EXPECTED_FAILURES), {} skipped (native histograms), {} unexpected; {:?} in all",
        scripts.len(),
        tenants.len(),
        sum(|o| o.requests),
        sum(|o| o.passed),
        sum(|o| o.expected),
        sum(|o| o.skipped),
        unexpected.len(),
        started.elapsed()
    );
    assert!(sum(|o| o.passed) > 1000, "only {} evals passed", sum(|o| o.passed));
    assert!(
        differences.is_empty(),
        "{} evals answered differently by the cluster and the single node:\n{}",
        differences.len(),
        differences.iter().map(|d| d.as_str()).collect::<Vec<_>>().join("\n")
    );
    assert!(
        unexpected.is_empty(),
        "{} evals fail over HTTP but not in memory:\n{}",
        unexpected.len(),
        unexpected.iter().map(|d| d.as_str()).collect::<Vec<_>>().join("\n")
    );
}

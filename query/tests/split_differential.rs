//! Generated-query differential test: random series and random PromQL (per-series
//! functions, subqueries, every pushable and unpushable aggregation, vector matching,
//! label functions, `@` and `offset`), evaluated by the plain engine and by the engine
//! over the same data split into 2, 3 or 7 shards. Answers must agree as
//! `compare_outputs` defines it (values within `SPLIT_REL_TOLERANCE`); the reference
//! materialises every select, and the unsplit engine with the series-at-a-time path on
//! must give it exactly. Seeded: the same cases every run.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use tessera_model::{Labels, STALE_NAN_BITS};
use tessera_query::promqltest::{compare_outputs, compare_outputs_exact, MemStore};
use tessera_query::{shard_of, Engine, EngineOptions, QueryOptions, ShardedQueryable, Value};

const METRICS: &[&str] = &["a_total", "b", "c"];
const INTERVAL_MS: i64 = 15_000;
const POINTS: usize = 120;

/// One generated series: metric, `job` and `inst` indexes, and per-point values
/// (`None` = no sample).
type SeriesSpec = (usize, usize, usize, Vec<Option<f64>>);

fn value() -> impl Strategy<Value = Option<f64>> {
    prop_oneof![
        20 => (-50.0f64..50.0).prop_map(Some),
        4 => (0i32..4).prop_map(|v| Some(v as f64)),
        1 => Just(Some(f64::NAN)),
        1 => Just(Some(f64::INFINITY)),
        1 => Just(Some(f64::from_bits(STALE_NAN_BITS))),
        3 => Just(None),
    ]
}

fn series() -> impl Strategy<Value = Vec<SeriesSpec>> {
    prop::collection::vec((0..METRICS.len(), 0usize..3, 0usize..5, prop::collection::vec(value(), POINTS)), 8..40)
}

fn metric_and_matchers() -> impl Strategy<Value = String> {
    (
        prop::sample::select(METRICS.to_vec()),
        prop::sample::select(vec!["", "{job=\"j1\"}", "{inst=~\"i[0-2]\"}", "{job!=\"j0\"}"]),
    )
        .prop_map(|(m, sel)| format!("{m}{sel}"))
}

fn modifier() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["", "", " offset 1m", " @ 900", " offset -30s"])
}

fn selector() -> impl Strategy<Value = String> {
    (metric_and_matchers(), modifier()).prop_map(|(s, m)| format!("{s}{m}"))
}

fn range_fn() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "rate",
        "increase",
        "irate",
        "delta",
        "deriv",
        "changes",
        "resets",
        "avg_over_time",
        "sum_over_time",
        "min_over_time",
        "max_over_time",
        "count_over_time",
        "last_over_time",
        "stddev_over_time",
        "present_over_time",
    ])
}

fn grouping() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["", " by (job)", " without (inst)", " by (inst, job)", " by (__name__)", " without ()"])
}

fn vector_expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        selector(),
        (range_fn(), metric_and_matchers(), prop::sample::select(vec!["1m", "2m", "5m"]), modifier())
            .prop_map(|(f, s, w, m)| format!("{f}({s}[{w}]{m})")),
        (prop::sample::select(METRICS.to_vec()), prop::sample::select(vec!["-", "/", "and", "or", "unless", ">"]))
            .prop_map(|(m, op)| format!("({m} {op} {m} offset 1m)")),
        (0.0f64..1.0).prop_map(|q| format!("quantile_over_time({q:.2}, b[3m])")),
    ];
    leaf.prop_recursive(3, 24, 2, |inner| {
        prop_oneof![
            (prop::sample::select(vec!["abs", "-", "ceil", "sqrt", "timestamp", "hour"]), inner.clone())
                .prop_map(|(f, e)| if f == "-" { format!("-({e})") } else { format!("{f}({e})") }),
            (inner.clone(), prop::sample::select(vec!["* 2", "> 10", "> bool 1", "+ time()", "% 7", "^ 2"]))
                .prop_map(|(e, tail)| format!("({e}) {tail}")),
            (
                prop::sample::select(vec![
                    "sum",
                    "avg",
                    "count",
                    "group",
                    "min",
                    "max",
                    "stddev",
                    "stdvar",
                    "quantile",
                    "topk",
                    "bottomk",
                    "count_values",
                    "limitk",
                ]),
                grouping(),
                inner.clone()
            )
                .prop_map(|(op, g, e)| match op {
                    "quantile" => format!("quantile{g} (0.7, {e})"),
                    "topk" | "bottomk" | "limitk" => format!("{op}{g} (2, {e})"),
                    "count_values" => format!("count_values{g} (\"val\", {e})"),
                    _ => format!("{op}{g} ({e})"),
                }),
            inner.clone().prop_map(|e| format!("max_over_time(({e})[5m:1m])")),
            inner.clone().prop_map(|e| format!("label_replace({e}, \"dst\", \"x$1\", \"inst\", \"i(.)\")")),
            (
                inner.clone(),
                inner.clone(),
                prop::sample::select(vec!["+", "/", "and", "or", "unless", "> on(job, inst) group_left()"])
            )
                .prop_map(|(a, b, op)| format!("({a}) {op} ({b})")),
            inner.clone().prop_map(|e| format!("topk(scalar(count(b)), {e})")),
        ]
    })
}

fn store(data: &[SeriesSpec], shards: usize) -> (MemStore, ShardedQueryable<MemStore>) {
    let mut whole = MemStore::new();
    let mut parts: Vec<MemStore> = (0..shards).map(|_| MemStore::new()).collect();
    for (m, job, inst, values) in data {
        let labels = Labels::from_pairs([
            ("__name__", METRICS[*m].to_string()),
            ("job", format!("j{job}")),
            ("inst", format!("i{inst}")),
        ]);
        let counter = METRICS[*m].ends_with("_total");
        let mut acc = 0.0f64;
        for (i, v) in values.iter().enumerate() {
            let Some(mut v) = *v else { continue };
            if counter && v.is_finite() {
                // A counter: increases, with a reset when the draw is very negative.
                acc = if v < -45.0 { 0.0 } else { acc + v.abs() };
                v = acc;
            }
            let t = i as i64 * INTERVAL_MS;
            whole.add(labels.clone(), t, v);
            parts[shard_of(&labels, shards)].add(labels.clone(), t, v);
        }
    }
    (whole, ShardedQueryable::new(parts, EngineOptions::default(), 2))
}

#[test]
fn generated_queries_answer_the_same_split_and_unsplit() {
    let config = Config { cases: 300, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let case = (series(), vector_expr(), prop::sample::select(vec![2usize, 3, 7]), 0i64..120, any::<bool>());
    let engine = Engine::new(EngineOptions::default());
    let reference = Engine::new(EngineOptions { streaming: false, ..EngineOptions::default() });
    let streamed = AtomicU64::new(0);
    // How many cases had data in the answer, and how many fragments the split runs made:
    // the generator must produce queries that select something and push work down.
    let answered = AtomicUsize::new(0);
    let cases = AtomicUsize::new(0);
    let fragments = AtomicU64::new(0);
    let result = runner.run(&case, |(data, query, shards, at, range)| {
        let (whole, split) = store(&data, shards);
        let opts = QueryOptions::default();
        let t = at * INTERVAL_MS;
        let run = |e: &Engine, q: &dyn tessera_query::Queryable| {
            if range {
                e.range_query(q, &query, t, t + 600_000, 30_000, &opts)
            } else {
                e.instant_query(q, &query, t, &opts)
            }
        };
        let (want, unsplit, got) = (run(&reference, &whole), run(&engine, &whole), run(&engine, &split));
        streamed.fetch_add(whole.streamed_selects(), Ordering::Relaxed);
        compare_outputs_exact(&want, &unsplit).map_err(|e| {
            TestCaseError::fail(format!("{query} (unsplit, range={range}, t={t}): streamed differs: {e}"))
        })?;
        cases.fetch_add(1, Ordering::Relaxed);
        fragments.fetch_add(split.fragments_evaluated(), Ordering::Relaxed);
        if let Ok(out) = &want {
            let has_data = match &out.value {
                Value::Vector(v) => !v.is_empty(),
                Value::Matrix(m) => !m.is_empty(),
                Value::Scalar { .. } | Value::String { .. } => false,
            };
            if has_data {
                answered.fetch_add(1, Ordering::Relaxed);
            } else if std::env::var_os("SPLIT_DEBUG").is_some() {
                eprintln!("no data: {query}");
            }
        } else if let Err(e) = &want {
            if std::env::var_os("SPLIT_DEBUG").is_some() {
                eprintln!("error: {query}: {}", e.message);
            }
        }
        compare_outputs(&want, &got)
            .map_err(|e| TestCaseError::fail(format!("{query} ({shards} shards, range={range}, t={t}): {e}")))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (cases, answered, fragments) =
        (cases.load(Ordering::Relaxed), answered.load(Ordering::Relaxed), fragments.load(Ordering::Relaxed));
    let streamed = streamed.load(Ordering::Relaxed);
    eprintln!("{cases} cases, {answered} with data, {fragments} fragments, {streamed} streamed selects unsplit");
    assert!(streamed as usize > cases / 2, "only {streamed} streamed selects in {cases} cases");
    assert!(answered * 2 > cases, "only {answered} of {cases} generated queries returned data");
    assert!(fragments as usize > cases * 2, "only {fragments} fragments in {cases} cases");
}

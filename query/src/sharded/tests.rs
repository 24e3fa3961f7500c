use super::*;
use crate::promqltest::MemStore;
use crate::value::Value;
use tessera_model::Label;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    Labels::from_pairs(pairs.iter().copied())
}

/// 40 series of `x_total` over 4 values of `a`, split over `n` shards, plus the same
/// data unsplit.
fn fixture(n: usize) -> (MemStore, ShardedQueryable<MemStore>) {
    let mut whole = MemStore::new();
    let mut parts: Vec<MemStore> = (0..n).map(|_| MemStore::new()).collect();
    for i in 0..40 {
        let l = labels(&[("__name__", "x_total"), ("a", &(i % 4).to_string()), ("i", &i.to_string())]);
        for k in 0..60 {
            let v = (k * (i + 1)) as f64 + 0.1 * i as f64;
            whole.add(l.clone(), k * 15_000, v);
            parts[shard_of(&l, n)].add(l.clone(), k * 15_000, v);
        }
    }
    (whole, ShardedQueryable::new(parts, EngineOptions::default(), 2))
}

#[test]
fn shard_of_spreads_series_and_is_stable() {
    let l = labels(&[("__name__", "up"), ("job", "a")]);
    assert_eq!(shard_of(&l, 7), shard_of(&l.clone(), 7));
    assert_eq!(shard_of(&l, 1), 0);
    let mut used = std::collections::BTreeSet::new();
    for i in 0..100 {
        used.insert(shard_of(&Labels::from_sorted(vec![Label::new("i", i.to_string())]), 7));
    }
    assert_eq!(used.len(), 7);
}

#[test]
fn a_split_source_answers_selects_and_index_reads_like_the_whole() {
    let (whole, split) = fixture(3);
    let m = vec![Matcher::equal("a", "1")];
    let h = SelectHints::range(0, 1_000_000);
    let ctl = QueryOptions::default();
    assert_eq!(split.select(&m, &h, &ctl).expect("select").data, whole.select(&m, &h, &ctl).expect("select").data);
    assert_eq!(split.series(&m, &h, &ctl).expect("series").data, whole.series(&m, &h, &ctl).expect("series").data);
    assert_eq!(split.label_values("i", &[], &h, &ctl).expect("values").data.len(), 40);
    assert_eq!(split.label_names(&[], &h, &ctl).expect("names").data, vec!["__name__", "a", "i"]);
}

#[test]
fn a_pushed_down_range_query_matches_the_unsplit_engine_and_runs_on_every_shard() {
    let (whole, split) = fixture(3);
    let e = Engine::default();
    let ctl = QueryOptions::default();
    let q = "sum by (a) (rate(x_total[2m]))";
    let want = e.range_query(&whole, q, 120_000, 800_000, 30_000, &ctl).expect("unsplit");
    let got = e.range_query(&split, q, 120_000, 800_000, 30_000, &ctl).expect("split");
    assert_eq!(split.fragments_evaluated(), 3, "one fragment per shard");
    let (Value::Matrix(w), Value::Matrix(g)) = (&want.value, &got.value) else { panic!("matrices") };
    assert_eq!(w.len(), 4);
    assert_eq!(w.len(), g.len());
    for (a, b) in w.iter().zip(g) {
        assert_eq!(a.labels, b.labels);
        assert_eq!(a.samples.len(), b.samples.len());
        for (x, y) in a.samples.iter().zip(&b.samples) {
            assert_eq!(x.t, y.t);
            assert!((x.v - y.v).abs() <= 1e-9 * x.v.abs().max(1.0), "{} vs {}", x.v, y.v);
        }
    }
    assert_eq!(want.infos, got.infos);
}

/// Many groups that each live for a few steps of a long range (pods churning): the
/// shards' partials are merged step by step without a table of every group at every
/// step, and the answer is the unsplit engine's. Also a dashboard's few groups at every
/// step, merged in the table.
#[test]
fn groups_living_a_few_steps_and_groups_at_every_step_merge_like_the_unsplit_engine() {
    let n = 3;
    let mut whole = MemStore::new();
    let mut parts: Vec<MemStore> = (0..n).map(|_| MemStore::new()).collect();
    for pod in 0..200i64 {
        for c in 0..2 {
            let l = labels(&[("__name__", "mem"), ("c", &c.to_string()), ("pod", &pod.to_string())]);
            // Pod p lives from minute 2p for two minutes.
            for k in 0..8 {
                let (t, v) = (pod * 120_000 + k * 15_000, (pod * 10 + k + c) as f64 / 4.0);
                whole.add(l.clone(), t, v);
                parts[shard_of(&l, n)].add(l.clone(), t, v);
            }
        }
    }
    let split = ShardedQueryable::new(parts, EngineOptions::default(), 2);
    let e = Engine::default();
    let ctl = QueryOptions::default();
    for q in ["sum by (pod) (mem)", "max by (pod) (mem)", "sum by (c) (mem)", "avg(mem)"] {
        let want = e.range_query(&whole, q, 0, 24_000_000, 15_000, &ctl).expect("unsplit");
        let got = e.range_query(&split, q, 0, 24_000_000, 15_000, &ctl).expect("split");
        let (Value::Matrix(w), Value::Matrix(g)) = (&want.value, &got.value) else { panic!("matrices") };
        assert!(!w.is_empty(), "{q}");
        assert_eq!(w, g, "{q}");
    }
}

#[test]
fn a_fragment_naming_no_node_is_refused() {
    let (_, split) = fixture(2);
    let f = Fragment {
        query: "sum(x_total)".into(),
        path: vec![3],
        mode: crate::FragmentMode::Partial,
        start: 0,
        end: 0,
        step: 1,
        query_start: 0,
        query_end: 0,
        query_step: 0,
        lookback_delta_ms: 300_000,
        default_subquery_step_ms: 60_000,
        max_samples: 1_000,
        param: vec![],
        string_param: None,
    };
    let err = split.eval_fragment(&f, 0, &QueryOptions::default()).expect_err("bad path");
    assert_eq!(err.kind, crate::ErrorKind::BadData);
    let err = split.eval_fragment(&Fragment { path: vec![0], ..f.clone() }, 0, &QueryOptions::default());
    assert_eq!(err.expect_err("not an aggregation").kind, crate::ErrorKind::BadData);
    let err = split.eval_fragment(&Fragment { path: vec![], ..f }, 9, &QueryOptions::default());
    assert_eq!(err.expect_err("no such shard").kind, crate::ErrorKind::BadData);
}

/// A split source that records the sample budget of every fragment it evaluates.
struct Budgets {
    inner: ShardedQueryable<MemStore>,
    seen: std::sync::Mutex<Vec<u64>>,
}

impl Queryable for Budgets {
    fn select(&self, m: &[Matcher], h: &SelectHints, ctl: &QueryOptions) -> Result<SelectResult, QueryError> {
        self.inner.select(m, h, ctl)
    }
    fn shard_evaluator(&self) -> Option<&dyn ShardEvaluator> {
        Some(self)
    }
}

impl ShardEvaluator for Budgets {
    fn shard_count(&self) -> usize {
        self.inner.shard_count()
    }
    fn eval_fragment(&self, f: &Fragment, shard: usize, ctl: &QueryOptions) -> Result<FragmentOutput, QueryError> {
        self.seen.lock().expect("lock").push(f.max_samples);
        self.inner.eval_fragment(f, shard, ctl)
    }
}

/// The shards' outputs are held together at the querier, and a local source runs its
/// fragments side by side: together they may hold no more than the query's limit.
#[test]
fn fragments_share_the_sample_limit_instead_of_each_getting_all_of_it() {
    let (_, split) = fixture(3);
    let src = Budgets { inner: split, seen: Default::default() };
    let e = Engine::new(EngineOptions { max_samples: 9_000, ..Default::default() });
    e.range_query(&src, "sum by (a) (rate(x_total[2m]))", 120_000, 800_000, 30_000, &QueryOptions::default())
        .expect("query");
    let seen = src.seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|&b| b == 3_000), "each shard gets a third: {seen:?}");
}

/// A subquery written without a step takes the querier's setting on every shard, not
/// the shards' own (Prometheus' evaluation interval: 15 s here, the default 1 m there).
#[test]
fn a_pushed_down_subquery_without_a_step_takes_the_queriers_default_step() {
    let (whole, split) = fixture(3);
    let ctl = QueryOptions::default();
    let q = "sum by (a) (count_over_time(x_total[5m:]))";
    let fine = Engine::new(EngineOptions { default_subquery_step_ms: 15_000, ..Default::default() });
    let want = fine.instant_query(&whole, q, 800_000, &ctl).expect("unsplit");
    let got = fine.instant_query(&split, q, 800_000, &ctl).expect("split");
    assert!(split.fragments_evaluated() > 0, "pushed down");
    assert_eq!(got.value, want.value);
    // (500 s, 800 s] holds 20 steps of 15 s and 5 of 1 m; 10 series per group.
    let Value::Vector(v) = &want.value else { panic!("a vector") };
    assert_eq!(v.len(), 4);
    assert!(v.iter().all(|e| e.v == 200.0), "{v:?}");
    let coarse = Engine::default().instant_query(&split, q, 800_000, &ctl).expect("default step");
    let Value::Vector(v) = &coarse.value else { panic!("a vector") };
    assert!(v.iter().all(|e| e.v == 50.0), "{v:?}");
}

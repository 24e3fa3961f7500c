use super::*;
use crate::promqltest::MemStore;
use tessera_model::{Labels, Sample, STALE_NAN_BITS};

fn store() -> MemStore {
    let mut s = MemStore::new();
    for i in 0..=10 {
        s.add(Labels::from_pairs([("__name__", "up_total"), ("job", "a")]), i * 60_000, i as f64 * 10.0);
        s.add(Labels::from_pairs([("__name__", "up_total"), ("job", "b")]), i * 60_000, i as f64);
    }
    s
}

#[test]
fn instant_selector_returns_latest_sample_within_lookback() {
    let e = Engine::new(EngineOptions::default());
    let out = e.instant_query(&store(), "up_total{job=\"a\"}", 330_000, &QueryOptions::default()).unwrap();
    match out.value {
        Value::Vector(v) => {
            assert_eq!(v.len(), 1);
            assert_eq!(v[0].v, 50.0);
            assert_eq!(v[0].t, 330_000);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn stale_marker_hides_series_from_instant_selector() {
    let mut s = MemStore::new();
    let l = Labels::from_pairs([("__name__", "m")]);
    s.add(l.clone(), 0, 1.0);
    s.add(l, 60_000, f64::from_bits(STALE_NAN_BITS));
    let e = Engine::default();
    let out = e.instant_query(&s, "m", 90_000, &QueryOptions::default()).unwrap();
    assert_eq!(out.value, Value::Vector(vec![]));
}

#[test]
fn range_query_sum_rate_is_sorted_matrix() {
    let e = Engine::default();
    let out = e
        .range_query(&store(), "sum by (job) (rate(up_total[5m]))", 300_000, 600_000, 60_000, &QueryOptions::default())
        .unwrap();
    let Value::Matrix(m) = out.value else { panic!("not a matrix") };
    assert_eq!(m.len(), 2);
    assert_eq!(m[0].labels.get("job"), Some("a"));
    assert_eq!(m[0].samples.len(), 6);
    assert!((m[0].samples[0].v - 10.0 / 60.0).abs() < 1e-9);
    assert_eq!(m[1].samples[0], Sample { t: 300_000, v: 1.0 / 60.0 });
}

#[test]
fn parse_error_is_bad_data() {
    let e = Engine::default();
    let err = e.instant_query(&store(), "sum(", 0, &QueryOptions::default()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::BadData);
    assert!(err.message.contains("parse error"), "{}", err.message);
}

#[test]
fn too_many_samples_is_an_execution_error() {
    let e = Engine::new(EngineOptions { max_samples: 5, ..Default::default() });
    let err = e.instant_query(&store(), "up_total[10m]", 600_000, &QueryOptions::default()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Execution);
    assert!(err.message.contains("too many samples"));
}

#[test]
fn passed_deadline_times_out() {
    let e = Engine::default();
    let opts = QueryOptions { deadline: Some(std::time::Instant::now()), cancel: None, ..Default::default() };
    let err = e.range_query(&store(), "up_total", 0, 600_000, 1_000, &opts).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout);
}

#[test]
fn cancel_flag_cancels() {
    let e = Engine::default();
    let flag = Arc::new(AtomicBool::new(true));
    let opts = QueryOptions { deadline: None, cancel: Some(flag), ..Default::default() };
    let err = e.instant_query(&store(), "up_total", 0, &opts).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Canceled);
}

#[test]
fn range_query_rejects_too_many_points() {
    let e = Engine::default();
    let err = e.range_query(&store(), "up_total", 0, 20_000_000, 1_000, &QueryOptions::default()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::BadData);
}

#[test]
fn huge_offset_range_or_time_is_bad_data_not_overflow() {
    let e = Engine::default();
    let q = QueryOptions::default();
    for expr in
        ["up_total offset 200000000y", "rate(up_total[200000000y])", "up_total[5m:200000000y]", "up_total @ 9e15"]
    {
        let err = e.instant_query(&store(), expr, 0, &q).unwrap_err();
        assert_eq!(err.kind, ErrorKind::BadData, "{expr}: {}", err.message);
        assert!(err.message.contains("out of range"), "{expr}: {}", err.message);
    }
    let err = e.instant_query(&store(), "up_total", i64::MIN, &q).unwrap_err();
    assert_eq!(err.kind, ErrorKind::BadData);
    let err = e.range_query(&store(), "up_total", i64::MIN + 1, i64::MIN + 2, 1, &q).unwrap_err();
    assert_eq!(err.kind, ErrorKind::BadData);
}

#[test]
fn offset_of_a_few_thousand_years_still_evaluates() {
    let e = Engine::default();
    let out = e.instant_query(&store(), "up_total offset 5000y", 0, &QueryOptions::default()).unwrap();
    assert_eq!(out.value, Value::Vector(vec![]));
}

/// Issue 12: `vector(1)[1000d:1ms]` would be a grid of 86.4 billion steps (1.4 TB); the
/// grid is checked against the sample limit before anything is allocated.
#[test]
fn huge_subquery_grid_is_refused_before_allocating() {
    let e = Engine::default();
    let start = std::time::Instant::now();
    for q in [
        "count_over_time(vector(1)[1000d:1ms])",
        "count_over_time(vector(time())[1000d:1ms])",
        "max_over_time((vector(1) + 2)[1000d:1ms])",
        "sum_over_time(up_total[1000d:1ms])",
        "max_over_time(max_over_time(vector(1)[10d:1s])[1000d:1ms])",
    ] {
        let err = e.instant_query(&store(), q, 600_000, &QueryOptions::default()).expect_err(q);
        assert_eq!(err.kind, ErrorKind::Execution, "{q}");
        assert!(err.message.contains("too many samples"), "{q}: {}", err.message);
        let err = e.range_query(&store(), q, 0, 600_000, 60_000, &QueryOptions::default()).expect_err(q);
        assert!(err.message.contains("too many samples"), "{q}: {}", err.message);
    }
    assert!(start.elapsed() < std::time::Duration::from_secs(2), "refused without doing the work");
}

#[test]
fn subquery_grid_larger_than_the_sample_limit_is_refused_and_a_smaller_one_evaluated() {
    // An instant subquery [10s:1s] at t = 600s has 10 steps (590s excluded, 600s included).
    let q = "count_over_time(vector(1)[10s:1s])";
    let roomy = Engine::new(EngineOptions { max_samples: 100, ..Default::default() });
    let out = roomy.instant_query(&store(), q, 600_000, &QueryOptions::default()).expect("fits");
    let Value::Vector(v) = out.value else { panic!("not a vector") };
    assert_eq!(v[0].v, 10.0);
    let small = Engine::new(EngineOptions { max_samples: 9, ..Default::default() });
    let err = small.instant_query(&store(), q, 600_000, &QueryOptions::default()).expect_err("10 steps > 9");
    assert!(err.message.contains("too many samples"), "{}", err.message);
}

#[test]
fn step_invariant_expansion_counts_against_the_sample_limit() {
    // `sum(up_total @ 600)` is evaluated once and repeated at every step of the range.
    let e = Engine::new(EngineOptions { max_samples: 5, ..Default::default() });
    let err = e
        .range_query(&store(), "sum(up_total @ 600)", 0, 600_000, 60_000, &QueryOptions::default())
        .expect_err("11 points > 5");
    assert!(err.message.contains("too many samples"), "{}", err.message);
}

/// A source that records the hints of every select and answers with a warning.
struct Recording {
    inner: MemStore,
    hints: std::sync::Mutex<Vec<crate::model::SelectHints>>,
}

impl Queryable for Recording {
    fn select(
        &self,
        matchers: &[tessera_model::Matcher],
        hints: &crate::model::SelectHints,
        ctl: &QueryOptions,
    ) -> Result<crate::model::SelectResult, QueryError> {
        self.hints.lock().expect("lock").push(hints.clone());
        let mut r = self.inner.select(matchers, hints, ctl)?;
        r.warnings.push("shard 3 did not answer: partial result".into());
        Ok(r)
    }
}

/// The engine tells the source what it will do with a select (Prometheus'
/// `SelectHints`), and a source's warnings reach the query's answer.
#[test]
fn selects_carry_hints_and_source_warnings_reach_the_answer() {
    let q = Recording { inner: store(), hints: Default::default() };
    let e = Engine::new(EngineOptions::default());
    let out = e
        .range_query(&q, "sum by (job) (rate(up_total[5m]))", 300_000, 600_000, 60_000, &QueryOptions::default())
        .expect("query");
    assert_eq!(out.warnings, vec!["shard 3 did not answer: partial result".to_owned()]);
    let hints = q.hints.lock().expect("lock").clone();
    assert_eq!(hints.len(), 1);
    let h = &hints[0];
    assert_eq!((h.start, h.end), (1, 600_000), "the samples the windows need: (start - range, end]");
    assert_eq!((h.step, h.range), (60_000, 300_000));
    assert_eq!(h.func.as_deref(), Some("rate"));
    assert_eq!((h.grouping.clone(), h.by), (vec!["job".to_owned()], true));

    let q = Recording { inner: store(), hints: Default::default() };
    e.instant_query(&q, "up_total", 300_000, &QueryOptions::default()).expect("query");
    let h = q.hints.lock().expect("lock")[0].clone();
    assert_eq!((h.step, h.range, h.func), (0, 0, None), "an instant selector on its own");
}

/// `n` counters `x_total{i="0".."n"}`, one sample every 15 s for 15 minutes.
fn counters(n: usize) -> MemStore {
    let mut s = MemStore::new();
    for i in 0..n {
        let l = Labels::from_pairs([("__name__", "x_total".to_string()), ("i", i.to_string())]);
        for k in 0..=60 {
            s.add(l.clone(), k * 15_000, (k * (i as i64 + 1)) as f64);
        }
    }
    s
}

/// Issue 10: a dashboard query over ten times the series holds no more samples at once
/// when it streams (one series in flight plus the group's step states), where the
/// materialising path holds every selected sample.
#[test]
fn a_streamed_aggregation_holds_as_much_over_ten_times_the_data() {
    let ctl = QueryOptions::default();
    let peak = |e: &Engine, q: &str, n: usize| {
        let (_, stats) = e.range_query_stats(&counters(n), q, 300_000, 900_000, 60_000, &ctl).expect(q);
        stats.peak_samples
    };
    let streaming = Engine::default();
    let materialising = Engine::new(EngineOptions { streaming: false, ..Default::default() });
    // `sum(rate)` also holds, per sample position of the series' shared timestamps, a
    // plain sum and (once folded) a compensated sum and its compensation
    // (`functions::range::rate_sums`): 3 × 61.
    for (q, columns) in [
        ("sum(rate(x_total[5m]))", 3 * 61),
        ("max(abs(x_total) * 2)", 0),
        ("count(max_over_time(x_total[1m]) > 3)", 0),
        ("sum(max_over_time(rate(x_total[5m])[5m:1m]))", 0),
    ] {
        let (small, big) = (peak(&streaming, q, 10), peak(&streaming, q, 100));
        assert_eq!(small, big, "{q}: streamed peak over 10 and 100 series");
        // One series' samples, the group's 11 step states and a scalar operand's 11 points.
        assert!(small <= 61 + 11 + 11 + columns, "{q}: held {small}");
        let (small, big) = (peak(&materialising, q, 10), peak(&materialising, q, 100));
        assert!(big >= 9 * small, "{q}: materialised peak over 10 and 100 series: {small} and {big}");
    }
    // Many groups hold one state per group and step, still not the samples.
    let by = peak(&streaming, "sum by (i) (rate(x_total[5m]))", 100);
    assert!(by <= 100 * 11 + 61, "held {by}");
}

#[test]
fn the_sample_limit_error_says_it_counts_samples_held() {
    let e = Engine::new(EngineOptions { max_samples: 500, ..Default::default() });
    let ctl = QueryOptions::default();
    // 100 series × 11 steps of states: more than 500 held at once.
    let err = e
        .range_query(&counters(100), "sum by (i) (rate(x_total[5m]))", 300_000, 900_000, 60_000, &ctl)
        .expect_err("1,100 states");
    assert_eq!(err.kind, ErrorKind::Execution);
    assert!(
        err.message.starts_with("query processing would load too many samples into memory in query execution"),
        "Prometheus' prefix: {}",
        err.message
    );
    assert!(err.message.contains("more than 500 samples held in memory at once"), "{}", err.message);
    // The same data folded into one group fits: scanning 6,100 samples is not holding them.
    e.range_query(&counters(100), "sum(rate(x_total[5m]))", 300_000, 900_000, 60_000, &ctl).expect("fits");
}

/// A source that streams its series in reverse label order (and counts its streams).
struct Backwards(MemStore, std::sync::atomic::AtomicU64);

impl Queryable for Backwards {
    fn select(
        &self,
        matchers: &[tessera_model::Matcher],
        hints: &crate::model::SelectHints,
        ctl: &QueryOptions,
    ) -> Result<crate::model::SelectResult, QueryError> {
        self.0.select(matchers, hints, ctl)
    }
    fn select_stream<'a>(
        &'a self,
        matchers: &[tessera_model::Matcher],
        hints: &crate::model::SelectHints,
        ctl: &QueryOptions,
    ) -> Result<crate::model::ReadResult<crate::model::SeriesStream<'a>>, QueryError> {
        self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut all = self.0.select(matchers, hints, ctl)?.data;
        all.reverse();
        Ok(crate::model::ReadResult::new(Box::new(all.into_iter().map(Ok))))
    }
}

/// The local shards stream in storage order, not label order: the streamed answer must
/// not depend on the order (the same values per group and step, whatever the order;
/// these integer sums are exact in any order, so equal bit for bit).
#[test]
fn a_source_streaming_in_another_order_gives_the_same_answers() {
    let streamed = Engine::default();
    let materialised = Engine::new(EngineOptions { streaming: false, ..Default::default() });
    let store = Backwards(counters(7), Default::default());
    for q in ["sum(x_total)", "sum by (i) (rate(x_total[5m]))", "max(x_total)", "count(x_total > 20)", "x_total * 2"] {
        let a = streamed.range_query(&store, q, 300_000, 900_000, 60_000, &QueryOptions::default()).expect(q);
        let b = materialised.range_query(&counters(7), q, 300_000, 900_000, 60_000, &QueryOptions::default()).expect(q);
        assert_eq!(format!("{:?}", a.value), format!("{:?}", b.value), "{q}");
    }
    assert!(store.1.into_inner() >= 5, "the streamed path read the reversed stream");
}

/// The range functions a per-series helper answers over overlapping windows
/// (`Evaluator::range_fn_by_helper`: reset index, running counts, exact sums, sliding
/// extremes) give, at every step of a range query, what an instant query at that time
/// gives, bit for bit: an instant query has one window and walks it.
#[test]
fn range_functions_over_overlapping_windows_equal_instant_queries() {
    let mut s = MemStore::new();
    let series = |k: &str| Labels::from_pairs([("__name__", "g"), ("k", k)]);
    let mut counter = 0.0;
    for i in 0..240i64 {
        let t = i * 15_000;
        let wobble = ((i * 7) % 5) as f64;
        s.add(series("int"), t, 60.0 + wobble);
        s.add(series("frac"), t, 100.1 + wobble * 0.37);
        counter = if i == 100 { 3.0 } else { counter + wobble };
        s.add(series("counter"), t, counter);
        s.add(series("nan"), t, if i % 17 == 0 { f64::NAN } else { wobble - 2.0 });
        s.add(series("zeros"), t, if i % 3 == 0 { -0.0 } else { 0.0 });
        s.add(series("huge"), t, 1e300 * (wobble + 1.0));
        if i % 40 < 30 {
            s.add(series("gappy"), t, wobble);
        }
    }
    let (start, end, step) = (600_000, 3_585_000, 30_000);
    let functions =
        ["rate", "increase", "changes", "resets", "sum_over_time", "avg_over_time", "max_over_time", "min_over_time"];
    for f in functions {
        // 2 m: 4 windows per sample (sums and counts); 20 m: 40 (the slide too).
        for range in ["2m", "20m"] {
            range_query_equals_instant_queries(&s, &format!("{f}(g[{range}])"), start, end, step);
        }
    }
}

/// Checks that every point of range query `q` is, bit for bit, what an instant query at
/// its time gives, and that the range query has no point the instant queries lack.
fn range_query_equals_instant_queries(s: &MemStore, q: &str, start: i64, end: i64, step: i64) {
    let e = Engine::default();
    let opts = QueryOptions::default();
    let Value::Matrix(m) = e.range_query(s, q, start, end, step, &opts).expect(q).value else {
        panic!("{q}: not a matrix")
    };
    let mut points = 0;
    for t in (start..=end).step_by(step as usize) {
        let Value::Vector(v) = e.instant_query(s, q, t, &opts).expect(q).value else { panic!("{q}: not a vector") };
        for elem in &v {
            let series =
                m.iter().find(|x| x.labels == elem.labels).unwrap_or_else(|| panic!("{q} at {t}: {elem:?} missing"));
            let got = series.samples.iter().find(|p| p.t == t).unwrap_or_else(|| panic!("{q} at {t}: no point"));
            assert_eq!(got.v.to_bits(), elem.v.to_bits(), "{q} at {t} for {:?}: {} vs {}", elem.labels, got.v, elem.v);
            points += 1;
        }
    }
    let in_range: usize = m.iter().map(|x| x.samples.len()).sum();
    assert_eq!(in_range, points, "{q}: the range query has points the instant queries do not");
}

/// `rate`/`increase` reuse the windows of a series with the same timestamps
/// (`RateWindowCache`); a series whose timestamps differ only inside (same count, same
/// first and last) or by one millisecond at one sample, or that starts near zero (its
/// zero point binds), gets its own windows. Every point is, bit for bit, the scanning
/// kernel's over the samples the test cuts out itself.
#[test]
fn rate_windows_shared_by_series_with_the_same_timestamps_give_each_its_own_answer() {
    let jitter = |i: i64| (i * 37) % 11;
    let mut data: Vec<(&str, Vec<Sample>)> = Vec::new();
    let mut add = |k: &'static str, t: i64, v: f64| match data.iter_mut().find(|(n, _)| *n == k) {
        Some((_, s)) => s.push(Sample { t, v }),
        None => data.push((k, vec![Sample { t, v }])),
    };
    for i in 0..240i64 {
        let t = i * 15_000 + jitter(i);
        add("a", t, 1000.0 + (i * i) as f64);
        add("b", t, 5.0 + (i * 3 % 7) as f64 + i as f64);
        // From zero: the zero point binds in the first windows.
        add("from_zero", t, (i * 2) as f64);
        // A gauge: drops (resets) and rises at random.
        add("gauge", t, ((i * 7) % 5) as f64 * 0.37);
        // Same count, first and last timestamp as the others; the middle moved.
        add("moved", if (1..239).contains(&i) { t + 4_000 } else { t }, 1000.0 + (i * i) as f64);
        // One millisecond off at a single sample.
        add("one_ms", if i == 120 { t + 1 } else { t }, 1000.0 + (i * i) as f64);
    }
    let mut store = MemStore::new();
    for (k, samples) in &data {
        for p in samples {
            store.add(Labels::from_pairs([("__name__", "c_total"), ("k", k)]), p.t, p.v);
        }
    }
    let (start, end, step) = (300_000, 3_585_000, 15_000);
    for (func, range, offset) in
        [("rate", 300_000, 0), ("increase", 60_000, 0), ("rate", 300_000, 60_000), ("increase", 90_000, 0)]
    {
        let offset_text = if offset > 0 { format!(" offset {}s", offset / 1000) } else { String::new() };
        let q = format!("{func}(c_total[{}s]{offset_text})", range / 1000);
        let out = Engine::default().range_query(&store, &q, start, end, step, &QueryOptions::default()).expect(&q);
        let Value::Matrix(m) = out.value else { panic!("{q}: not a matrix") };
        for (k, samples) in &data {
            let want: Vec<(i64, u64)> = (start..=end)
                .step_by(step as usize)
                .filter_map(|t| {
                    let (ws, we) = (t - offset - range, t - offset);
                    let w: Vec<Sample> = samples.iter().filter(|p| p.t > ws && p.t <= we).copied().collect();
                    crate::functions::range::rate::extrapolated_rate(&w, ws, we, true, func == "rate")
                        .map(|v| (t, v.to_bits()))
                })
                .collect();
            let got: Vec<(i64, u64)> = m
                .iter()
                .find(|x| x.labels.get("k") == Some(k))
                .map(|x| x.samples.iter().map(|p| (p.t, p.v.to_bits())).collect())
                .unwrap_or_default();
            assert_eq!(got, want, "{q} for {k}");
        }
    }
    // `rate` and `increase` over the same samples in one query: each its own windows.
    let q = "rate(c_total[300s]) - increase(c_total[300s])";
    let out = Engine::default().range_query(&store, q, start, end, step, &QueryOptions::default()).expect(q);
    let Value::Matrix(m) = out.value else { panic!("{q}: not a matrix") };
    for (k, samples) in &data {
        let of = |t: i64, is_rate: bool| {
            let w: Vec<Sample> = samples.iter().filter(|p| p.t > t - 300_000 && p.t <= t).copied().collect();
            crate::functions::range::rate::extrapolated_rate(&w, t - 300_000, t, true, is_rate)
        };
        let want: Vec<(i64, u64)> = (start..=end)
            .step_by(step as usize)
            .filter_map(|t| Some((t, (of(t, true)? - of(t, false)?).to_bits())))
            .collect();
        let x = m.iter().find(|x| x.labels.get("k") == Some(k)).expect(k);
        let got: Vec<(i64, u64)> = x.samples.iter().map(|p| (p.t, p.v.to_bits())).collect();
        assert_eq!(got, want, "{q} for {k}");
    }
}

/// Series that live for a small part of a long range (pods churn) are evaluated only at
/// the steps that can see them (`Evaluator::steps_seeing`): every step of the range
/// query still equals an instant query at that time pinned with `@` (with `@` the
/// evaluator visits every step), with offsets either way, selectors, range functions
/// and the streamed aggregations.
#[test]
fn short_lived_series_in_a_long_range_give_every_step_its_instant_answer() {
    let mut s = MemStore::new();
    // Lifetimes in minutes of a 3 h range: at its start, inside, at its end, and one
    // sample only; scraped every 30 s.
    for (pod, from, to) in [("early", 0i64, 12), ("middle", 70, 71), ("late", 160, 180), ("single", 95, 95)] {
        let l = Labels::from_pairs([("__name__", "g"), ("pod", pod)]);
        for half in from * 2..=to * 2 {
            s.add(l.clone(), half * 30_000, (half % 7) as f64 + 1.0);
        }
    }
    let e = Engine::default();
    let opts = QueryOptions::default();
    let (start, end, step) = (0, 180 * 60_000, 60_000);
    let queries = [
        "g {at}",
        "g {at} offset 5m",
        "g {at} offset -7m",
        "rate(g[5m] {at})",
        "max_over_time(g[10m] {at} offset -3m)",
        "count_over_time(g[1m] {at} offset 2m)",
        "sum(g {at})",
        "topk(1, last_over_time(g[3m] {at}))",
    ];
    for q in queries {
        let range_q = q.replace("{at}", "");
        let Value::Matrix(m) = e.range_query(&s, &range_q, start, end, step, &opts).expect(&range_q).value else {
            panic!("{range_q}: not a matrix")
        };
        let mut points = 0;
        for t in (start..=end).step_by(step as usize) {
            let pinned = q.replace("{at}", &format!("@ {}", t / 1000));
            let Value::Vector(v) = e.instant_query(&s, &pinned, t, &opts).expect(&pinned).value else {
                panic!("{pinned}: not a vector")
            };
            for elem in &v {
                let series = m.iter().find(|x| x.labels == elem.labels);
                let got = series.and_then(|x| x.samples.iter().find(|p| p.t == t));
                assert_eq!(
                    got.map(|p| p.v.to_bits()),
                    Some(elem.v.to_bits()),
                    "{range_q} at {t} for {:?}",
                    elem.labels
                );
                points += 1;
            }
        }
        let in_range: usize = m.iter().map(|x| x.samples.len()).sum();
        assert!(points > 0, "{range_q}: no point at all");
        assert_eq!(in_range, points, "{range_q}: the range query has points the instant queries do not");
    }
}

proptest::proptest! {
    /// `skip_through` (walk, gallop, bisect) and `skip_through_guessing` (right and wrong
    /// guesses) find what a walk sample by sample finds, from any start, with repeated timestamps and bounds before, inside and after.
    #[test]
    fn skip_through_finds_the_first_sample_after_the_bound(
        gaps in proptest::collection::vec(0i64..3, 0..200),
        from in 0usize..220,
        bound in -5i64..400,
    ) {
        let mut t = 0;
        let samples: Vec<Sample> = gaps.iter().map(|g| { t += g; Sample { t, v: 0.0 } }).collect();
        let from = from.min(samples.len());
        let mut walk = from;
        while walk < samples.len() && samples[walk].t <= bound {
            walk += 1;
        }
        proptest::prop_assert_eq!(super::eval::skip_through(&samples, from, bound), walk);
        for guess in [0, 1, 5, walk - from, walk - from + 1, 300] {
            proptest::prop_assert_eq!(super::eval::skip_through_guessing(&samples, from, bound, guess), walk, "guess {}", guess);
        }
    }
}

/// An annotation raised by many series (`rate` over gauges names each metric) comes
/// back once per distinct message, in the order first raised.
#[test]
fn annotations_repeated_by_many_series_are_listed_once_in_order() {
    let mut s = MemStore::new();
    for metric in ["temp", "util", "power_total"] {
        for gpu in 0..50 {
            let l = Labels::from_pairs([("__name__", metric), ("gpu", &format!("{metric}-{gpu}"))]);
            for i in 0..10 {
                s.add(l.clone(), i * 15_000, i as f64);
            }
        }
    }
    let out = Engine::default().instant_query(&s, "rate({gpu!=\"\"}[5m])", 150_000, &QueryOptions::default()).unwrap();
    assert_eq!(out.infos.len(), 2, "{:?}", out.infos);
    assert!(out.infos[0].contains("\"temp\"") && out.infos[1].contains("\"util\""), "{:?}", out.infos);
}

/// `sum` of -0 values is +0, as in Prometheus, which adds the Kahan compensation (+0) to
/// the running sum at the end: at every step of a range query (folded series by series)
/// as at an instant. (The sign of a -0 is the one thing that seeding a group with its
/// first value, as Prometheus does, changes in the running sum.)
#[test]
fn sum_of_negative_zeros_is_positive_zero() {
    let mut s = MemStore::new();
    for i in 0..10 {
        s.add(Labels::from_pairs([("__name__", "z"), ("k", "a")]), i * 15_000, -0.0);
        s.add(Labels::from_pairs([("__name__", "z"), ("k", "b")]), i * 15_000, -0.0);
    }
    let e = Engine::default();
    let opts = QueryOptions::default();
    for q in ["sum(z)", "sum(z{k=\"a\"})"] {
        let Value::Matrix(m) = e.range_query(&s, q, 0, 135_000, 15_000, &opts).unwrap().value else {
            panic!("not a matrix")
        };
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].samples.len(), 10);
        assert!(m[0].samples.iter().all(|p| p.v.to_bits() == 0), "{q}: {:?}", m[0].samples);
        let Value::Vector(v) = e.instant_query(&s, q, 60_000, &opts).unwrap().value else { panic!("not a vector") };
        assert_eq!(v[0].v.to_bits(), 0, "{q}: {v:?}");
    }
}

/// Vector-vector operations joined series by series (when every many-side series has
/// one partner at every step) answer what the step-by-step walk answers, bit for bit:
/// arithmetic, comparisons with and without `bool`, `on`/`ignoring`, `group_left` and
/// `group_right`, over series that start, stop and skip steps.
#[test]
fn vector_operations_joined_by_series_equal_the_step_walk() {
    use super::binary::test_hooks::{JOINS, STEP_WALK_ONLY};
    let mut s = MemStore::new();
    let gpu = |name: &str, g: i64, pod: &str| {
        Labels::from_pairs([("__name__", name), ("gpu", &g.to_string()), ("kind", name), ("pod", pod)])
    };
    for i in 0..80i64 {
        let t = i * 15_000;
        for g in 0..6i64 {
            // Pods are replaced every 30 steps; GPU 5 leaves half way.
            let pod = format!("p{}-{}", g % 3, i / 30);
            if g == 5 && i > 40 {
                continue;
            }
            let used = ((i * 7 + g * 13) % 17) as f64 * 0.7;
            if (i + g) % 9 != 0 {
                s.add(gpu("used", g, &pod), t, if i % 23 == 5 { f64::NAN } else { used });
            }
            if (i * 3 + g) % 11 != 0 {
                s.add(gpu("free", g, &pod), t, 12.0 - used * 0.5);
            }
        }
        for p in 0..3 {
            if i % 13 != p {
                let pod = format!("p{p}-{}", i / 30);
                let job = format!("job{}", p % 2);
                s.add(Labels::from_pairs([("__name__", "info"), ("job", job.as_str()), ("pod", pod.as_str())]), t, 1.0);
            }
        }
    }
    let queries = [
        "used + ignoring(kind) free",
        "used / ignoring(kind) (used + ignoring(kind) free)",
        "used > bool ignoring(kind) free",
        "used > ignoring(kind) free",
        "free <= ignoring(kind) used",
        "used - on(gpu, pod) free",
        "used * on(pod) group_left(job) info",
        "info / on(pod) group_right(job) free",
        "used >= on(pod) group_left info",
    ];
    let e = Engine::default();
    let opts = QueryOptions::default();
    let run = |q: &str, walk: bool| {
        STEP_WALK_ONLY.with(|c| c.set(walk));
        let out = e.range_query(&s, q, 0, 1_185_000, 15_000, &opts);
        STEP_WALK_ONLY.with(|c| c.set(false));
        match out.unwrap_or_else(|err| panic!("{q}: {err:?}")).value {
            Value::Matrix(mut m) => {
                m.sort_by(|a, b| a.labels.cmp(&b.labels));
                m.into_iter()
                    .map(|s| (s.labels, s.samples.iter().map(|p| (p.t, p.v.to_bits())).collect::<Vec<_>>()))
                    .collect::<Vec<_>>()
            }
            other => panic!("{q}: not a matrix: {other:?}"),
        }
    };
    for q in queries {
        let joins = JOINS.with(|c| c.get());
        let joined = run(q, false);
        assert!(JOINS.with(|c| c.get()) > joins, "{q}: not joined series by series");
        let walked = run(q, true);
        assert!(!joined.is_empty(), "{q}: no result");
        assert_eq!(joined, walked, "{q}");
    }
    // A shared signature (two pods' series of one GPU match `on(gpu)` at once) is left
    // to the walk, which reports the match error.
    let joins = JOINS.with(|c| c.get());
    let err = e.range_query(&s, "used + on(gpu) free", 0, 1_185_000, 15_000, &opts).unwrap_err();
    assert!(err.message.contains("many-to-many matching not allowed"), "{}", err.message);
    // So are pairs that would share an output series: `group_left(gpu)` copies the
    // info series' (absent) `gpu` over both GPUs of a pod.
    let q = "used * on(pod) group_left(gpu) info";
    let err = e.range_query(&s, q, 0, 1_185_000, 15_000, &opts).unwrap_err();
    assert!(err.message.contains("grouping labels must ensure unique matches"), "{}", err.message);
    // And one-to-one matches of two series at once.
    let q = "{__name__=~\"used|free\"} / ignoring(kind) used";
    let err = e.range_query(&s, q, 0, 1_185_000, 15_000, &opts).unwrap_err();
    assert!(err.message.contains("many-to-one matching must be explicit"), "{}", err.message);
    assert_eq!(JOINS.with(|c| c.get()), joins);
}

/// `and`, `unless` and `or` at every step of a range query match what instant queries
/// at those steps match, when the other side's series share a signature and take turns
/// over time (a pod replaced under the same `job`): the steps a signature is present at
/// are the union over its series.
#[test]
fn set_operators_over_series_taking_turns_equal_instant_queries() {
    let mut s = MemStore::new();
    for i in 0..40i64 {
        let t = i * 15_000;
        for job in ["a", "b", "c"] {
            s.add(Labels::from_pairs([("__name__", "x"), ("job", job)]), t, i as f64);
        }
        // `y`'s series for job "a" take turns: the later pod first in label order.
        let pod = if i < 20 { "p2" } else { "p1" };
        if i % 7 != 3 {
            s.add(Labels::from_pairs([("__name__", "y"), ("job", "a"), ("pod", pod)]), t, 1.0);
        }
        if i % 3 == 0 {
            s.add(Labels::from_pairs([("__name__", "y"), ("job", "b"), ("pod", "p3")]), t, 2.0);
        }
    }
    let e = Engine::default();
    let opts = QueryOptions::default();
    for q in ["x and on(job) y", "x unless on(job) y", "y or on(job) x", "x or on(job) y"] {
        let Value::Matrix(m) = e.range_query(&s, q, 0, 585_000, 15_000, &opts).expect(q).value else {
            panic!("{q}: not a matrix")
        };
        let mut points = 0;
        for t in (0..=585_000).step_by(15_000) {
            let Value::Vector(mut want) = e.instant_query(&s, q, t, &opts).expect(q).value else {
                panic!("{q}: not a vector")
            };
            want.sort_by(|a, b| a.labels.cmp(&b.labels));
            let mut got: Vec<(Labels, f64)> =
                m.iter().filter_map(|s| s.samples.iter().find(|p| p.t == t).map(|p| (s.labels.clone(), p.v))).collect();
            got.sort_by(|a, b| a.0.cmp(&b.0));
            let want: Vec<(Labels, f64)> = want.into_iter().map(|v| (v.labels, v.v)).collect();
            assert_eq!(got, want, "{q} at {t}");
            points += got.len();
        }
        assert!(points > 0, "{q}: empty");
    }
}

proptest::proptest! {
    /// The step cursor lists, at each step, exactly the series with a point there, in
    /// series order, whatever steps the series start, stop and skip at.
    #[test]
    fn step_cursor_lists_the_series_present_at_each_step(
        masks in proptest::collection::vec(proptest::collection::vec(proptest::bool::weighted(0.3), 0..40), 0..30),
    ) {
        let series: Vec<super::types::StepSeries> = masks
            .iter()
            .enumerate()
            .map(|(i, mask)| {
                let mut s = super::types::StepSeries::new(Labels::from_pairs([("i", i.to_string())]), false);
                s.pts = mask.iter().enumerate().filter(|(_, &m)| m).map(|(k, _)| (k as i64 * 10, (i * 100 + k) as f64)).collect();
                s
            })
            .collect();
        let mut cur = super::binary::StepCursor::new(&series);
        let mut present = Vec::new();
        for k in 0..40i64 {
            let t = k * 10;
            cur.at(&series, t, &mut present);
            let want: Vec<(usize, f64)> = series
                .iter()
                .enumerate()
                .filter_map(|(i, s)| s.pts.iter().find(|p| p.0 == t).map(|p| (i, p.1)))
                .collect();
            proptest::prop_assert_eq!(&present, &want, "step {}", k);
        }
    }
}

/// `max` and `min` keep the first of equal values, as Prometheus does (it replaces a
/// group's value only by a strictly greater or smaller one, or when it is NaN): -0 first
/// in label order stays -0 against a later +0, at every step and at an instant.
#[test]
fn max_and_min_keep_the_first_of_equal_values() {
    let mut s = MemStore::new();
    for i in 0..10 {
        s.add(Labels::from_pairs([("__name__", "z"), ("k", "a")]), i * 15_000, -0.0);
        s.add(Labels::from_pairs([("__name__", "z"), ("k", "b")]), i * 15_000, 0.0);
        s.add(Labels::from_pairs([("__name__", "z"), ("k", "c")]), i * 15_000, f64::NAN);
    }
    let e = Engine::default();
    let opts = QueryOptions::default();
    for q in ["max(z)", "min(z)"] {
        let Value::Matrix(m) = e.range_query(&s, q, 0, 135_000, 15_000, &opts).unwrap().value else {
            panic!("not a matrix")
        };
        assert_eq!(m[0].samples.len(), 10);
        assert!(m[0].samples.iter().all(|p| p.v.to_bits() == (-0.0f64).to_bits()), "{q}: {:?}", m[0].samples);
        let Value::Vector(v) = e.instant_query(&s, q, 60_000, &opts).unwrap().value else { panic!("not a vector") };
        assert_eq!(v[0].v.to_bits(), (-0.0f64).to_bits(), "{q}: {v:?}");
    }
}

/// Per group (each series' first string) and step: the sum over `data`'s series of
/// `func` (`rate` or `increase`) over `[range_ms]`, computed window by window per series
/// with Prometheus' arithmetic and added with Kahan's compensation, and the sum of the
/// values' magnitudes.
fn summed_rates(
    data: &[(String, String, Vec<Sample>)],
    func: &str,
    range_ms: i64,
    (start, end, step): (i64, i64, i64),
) -> std::collections::BTreeMap<(String, i64), (f64, f64)> {
    type Sums = (crate::functions::stats::KahanSum, f64);
    let mut sums: std::collections::BTreeMap<(String, i64), Sums> = Default::default();
    for (group, _, samples) in data {
        for t in (start..=end).step_by(step as usize) {
            let w: Vec<Sample> = samples.iter().filter(|p| p.t > t - range_ms && p.t <= t).copied().collect();
            if let Some(v) = crate::functions::range::rate::extrapolated_rate(&w, t - range_ms, t, true, func == "rate")
            {
                let (sum, magnitude) = sums.entry((group.clone(), t)).or_default();
                sum.add(v);
                *magnitude += v.abs();
            }
        }
    }
    sums.into_iter().map(|(k, (s, m))| (k, (s.value(), m))).collect()
}

/// Evaluates `q` over `data` (metric `c_total`, labels `g` and `k`) and compares each
/// group's points with [`summed_rates`], within `1e-12` of the values' magnitudes (NaN
/// where it is NaN): `sum` over series that share their timestamps adds their
/// increments per sample (`functions::range::rate_sums`), a different grouping of the
/// same additions.
fn assert_sum_of_rates(data: &[(String, String, Vec<Sample>)], func: &str, by_group: bool) {
    let mut store = MemStore::new();
    for (g, k, samples) in data {
        for p in samples {
            store.add(Labels::from_pairs([("__name__", "c_total"), ("g", g.as_str()), ("k", k.as_str())]), p.t, p.v);
        }
    }
    let grid = (300_000, 3_585_000, 15_000);
    let by = if by_group { " by (g)" } else { "" };
    let q = format!("sum{by} ({func}(c_total[5m]))");
    let out = Engine::default().range_query(&store, &q, grid.0, grid.1, grid.2, &QueryOptions::default()).expect(&q);
    let Value::Matrix(m) = out.value else { panic!("{q}: not a matrix") };
    let all: Vec<(String, String, Vec<Sample>)> = match by_group {
        true => data.to_vec(),
        false => data.iter().map(|(_, k, s)| (String::new(), k.clone(), s.clone())).collect(),
    };
    let want = summed_rates(&all, func, 300_000, grid);
    let got: std::collections::BTreeMap<(String, i64), f64> = m
        .iter()
        .flat_map(|x| x.samples.iter().map(|p| ((x.labels.get("g").unwrap_or("").to_string(), p.t), p.v)))
        .collect();
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{q}: steps and groups");
    for (key, &(w, magnitude)) in &want {
        let g = got[key];
        let close = (g - w).abs() <= 1e-12 * magnitude || (g.is_nan() && w.is_nan());
        assert!(close, "{q} at {key:?}: got {g}, want {w}");
    }
}

#[test]
fn sum_of_rates_over_series_sharing_timestamps_is_the_sum_of_their_rates() {
    let jitter = |i: i64| (i * 37) % 11;
    let mut data: Vec<(String, String, Vec<Sample>)> = Vec::new();
    let shapes: [(&str, fn(i64) -> f64); 9] = [
        ("counter", |i| 1e9 + (i * i) as f64 * 3.5),
        ("slow", |i| 5.0 + (i * 3 % 7) as f64 + i as f64),
        // From zero: the zero point binds in the first windows.
        ("from_zero", |i| (i * 2) as f64),
        // A gauge: drops (resets) and rises at random, sometimes to zero.
        ("gauge", |i| ((i * 7) % 5) as f64 * 0.37),
        ("util", |i| if (i / 9) % 3 == 0 { 0.0 } else { ((i * 13) % 100) as f64 }),
        ("zero", |_| 0.0),
        ("restarts", |i| ((i % 50) * 1000) as f64 + 0.25),
        // Refused by the per-sample sums (negative, NaN): window by window.
        ("negative", |i| -((i * 5) as f64)),
        ("nan", |i| if i == 100 { f64::NAN } else { i as f64 }),
    ];
    for (n, (name, value)) in shapes.iter().enumerate() {
        // Three series of each shape in each of two groups, all on one timestamp set.
        for copy in 0..6i64 {
            let samples = (0..240i64)
                .map(|i| Sample { t: i * 15_000 + jitter(i), v: value(i + copy) * (1.0 + copy as f64) })
                .collect();
            data.push((format!("g{}", copy % 2), format!("{name}{copy}"), samples));
        }
        // One on a timestamp set of its own (window by window).
        if n % 3 == 0 {
            let samples = (0..240i64).map(|i| Sample { t: i * 15_000 + 3 * jitter(i), v: value(i) }).collect();
            data.push(("g0".to_string(), format!("{name}_own"), samples));
        }
    }
    for func in ["rate", "increase"] {
        assert_sum_of_rates(&data, func, false);
        assert_sum_of_rates(&data, func, true);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
    /// Random counters and gauges (drops to any value, runs at zero, steps large and
    /// tiny) on one timestamp set: `sum(rate)` is the sum of the series' rates.
    #[test]
    fn sum_of_rates_matches_the_per_series_sum(
        series in proptest::collection::vec(proptest::collection::vec((0u8..4, 0.0f64..1e6), 240), 2..8),
        scale in proptest::sample::select(vec![1e-9, 1.0, 1e12]),
    ) {
        let data: Vec<(String, String, Vec<Sample>)> = series
            .iter()
            .enumerate()
            .map(|(s, steps)| {
                let mut v = 0.0;
                let samples = steps.iter().enumerate().map(|(i, &(kind, x))| {
                    v = match kind {
                        0 => v + x * scale,
                        1 => x * scale,
                        2 => 0.0,
                        _ => v,
                    };
                    Sample { t: i as i64 * 15_000 + (i as i64 * 37) % 11, v }
                }).collect();
                (format!("g{}", s % 2), format!("s{s}"), samples)
            })
            .collect();
        assert_sum_of_rates(&data, "rate", false);
        assert_sum_of_rates(&data, "increase", true);
    }
}

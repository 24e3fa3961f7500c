use super::parse::{parse_script, parse_series_line, Cmd, Point};
use super::run_script;
use super::store::MemStore;

#[test]
fn series_values_expand_like_promtool() {
    let (labels, pts) = parse_series_line(r#"m{a="x\"y"} 1+2x3 _x2 stale 5x1 0x2 -1-1x1 Inf"#).unwrap();
    assert_eq!(labels.get("a"), Some("x\"y"));
    assert_eq!(labels.get("__name__"), Some("m"));
    use Point::*;
    assert_eq!(
        pts,
        vec![
            Float(1.0),
            Float(3.0),
            Float(5.0),
            Float(7.0),
            Missing,
            Missing,
            Stale,
            Float(5.0),
            Float(5.0),
            Float(0.0),
            Float(0.0),
            Float(0.0),
            Float(-1.0),
            Float(-2.0),
            Float(f64::INFINITY)
        ]
    );
}

#[test]
fn histogram_values_are_counted_not_parsed() {
    let (_, pts) = parse_series_line("m {{schema:1 sum:3 count:22 buckets:[5 10 7]}}x2 4").unwrap();
    assert_eq!(pts, vec![Point::Histogram, Point::Histogram, Point::Histogram, Point::Float(4.0)]);
}

#[test]
fn malformed_lines_give_errors_not_panics() {
    for bad in ["m{a=\"\\xé\"} 1", "m{a=\"\\u12", "m{a=} 1", "m 1+", "{", "m{\"é\" 1", "m 1xx"] {
        let _ = parse_series_line(bad);
    }
    let cmds = parse_script("load 1m\n  m{a=} 1\n\neval instant at 0 m\n  m 1\n\nbogus\n");
    assert!(matches!(cmds[0], Cmd::Load { error: Some(_), .. }));
}

#[test]
fn runner_reports_the_failing_eval_with_its_line() {
    let script = "load 1m\n  m 1 2 3\n\neval instant at 1m m\n  m 2\n\neval instant at 2m m\n  m 99\n";
    let s = run_script("t.test", script);
    assert_eq!((s.passed, s.failed), (1, 1));
    assert_eq!(s.failures[0].line, 7);
    assert!(s.failures[0].reason.contains("expected"), "{}", s.failures[0].reason);
}

#[test]
fn expect_fail_and_annotations_are_checked() {
    let script = "load 1m\n  m 1\n\neval instant at 0 sum(\n  expect fail\n\n\
                  eval instant at 0 quantile(2, m)\n  expect warn regex: quantile value should be between 0 and 1\n  {} +Inf\n\n\
                  eval instant at 0 m\n  expect warn\n  m 1\n";
    let s = run_script("t.test", script);
    assert_eq!((s.passed, s.failed), (2, 1), "{:?}", s.failures);
    assert!(s.failures[0].reason.contains("warn"));
}

/// A source that records what `prepare` announced and what `select` was then asked.
struct Recorder<'a> {
    inner: &'a MemStore,
    announced: std::sync::Mutex<Vec<crate::model::PlannedSelect>>,
    selected: std::sync::Mutex<Vec<crate::model::PlannedSelect>>,
}

impl crate::model::Queryable for Recorder<'_> {
    fn prepare(&self, selects: &[crate::model::PlannedSelect], _ctl: &crate::QueryOptions) {
        self.announced.lock().unwrap().extend_from_slice(selects);
    }

    fn select(
        &self,
        matchers: &[tessera_model::Matcher],
        hints: &crate::model::SelectHints,
        ctl: &crate::QueryOptions,
    ) -> Result<crate::model::SelectResult, crate::QueryError> {
        // The plan announces every select with all labels: evaluation may then narrow
        // one (`only_labels`), which the answer to the announced select serves too.
        let announced = crate::model::SelectHints { only_labels: None, same_times_together: false, ..hints.clone() };
        self.selected
            .lock()
            .unwrap()
            .push(crate::model::PlannedSelect { matchers: matchers.to_vec(), hints: announced });
        crate::model::Queryable::select(self.inner, matchers, hints, ctl)
    }
}

fn sorted_debug(v: &[crate::model::PlannedSelect]) -> Vec<String> {
    let mut out: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
    out.sort();
    out
}

/// The pre-pass that announces a query's selects (`engine/plan.rs`) mirrors evaluation
/// exactly: over every eval of the upstream and own scripts, a query that succeeds made
/// exactly the announced selects (same matchers, ranges and hints), and one that fails
/// made no select that was not announced.
#[test]
fn every_select_evaluation_makes_was_announced_before_it_started() {
    let root = std::path::Path::new(
        &std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs tests"),
    )
    .join("testdata");
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    for dir in [root.clone(), root.join("upstream")] {
        for e in std::fs::read_dir(&dir).expect("read testdata") {
            let p = e.expect("entry").path();
            if p.extension().is_some_and(|x| x == "test") {
                files.push(p);
            }
        }
    }
    files.sort();
    let engine = crate::Engine::new(crate::EngineOptions::default());
    let (mut exact, mut with_selects, mut mismatches) = (0usize, 0usize, Vec::new());
    for path in &files {
        let text = std::fs::read_to_string(path).expect("read script");
        let mut store = MemStore::new();
        for cmd in parse_script(&text) {
            match cmd {
                Cmd::Clear => store.clear(),
                Cmd::Load { series, interval, .. } => super::run::load(&mut store, series, interval),
                Cmd::Eval(e) => {
                    let rec = Recorder { inner: &store, announced: Default::default(), selected: Default::default() };
                    let opts = crate::QueryOptions::default();
                    let res = match (e.instant, e.range) {
                        (Some(t), _) => engine.instant_query(&rec, &e.query, t, &opts).map(|_| ()),
                        (None, Some((s, en, st))) => engine.range_query(&rec, &e.query, s, en, st, &opts).map(|_| ()),
                        _ => continue,
                    };
                    let announced = sorted_debug(&rec.announced.lock().unwrap());
                    let selected = sorted_debug(&rec.selected.lock().unwrap());
                    let at = format!("{}:{}: {}", path.display(), e.line, e.query);
                    if res.is_ok() {
                        if announced != selected {
                            mismatches.push(format!("{at}\n  announced {announced:?}\n  selected  {selected:?}"));
                        }
                        exact += 1;
                        with_selects += usize::from(!selected.is_empty());
                    } else {
                        let mut left = announced.clone();
                        for s in &selected {
                            match left.iter().position(|a| a == s) {
                                Some(i) => {
                                    left.remove(i);
                                }
                                None => {
                                    mismatches.push(format!("{at}\n  not announced: {s}\n  announced {announced:?}"))
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(mismatches.is_empty(), "{} evals differ from their plan:\n{}", mismatches.len(), mismatches.join("\n"));
    assert!(exact > 1000 && with_selects > 800, "too few evals compared: {exact} ({with_selects} with selects)");
}

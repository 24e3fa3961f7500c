//! Runs parsed scripts against the engine and compares results the way Prometheus'
//! promqltest does (labels matched as sets, floats compared with a relative epsilon).

use std::path::{Path, PathBuf};

use super::parse::{parse_script, Cmd, EvalCmd, Expected, MsgMatch, Point};
use super::store::{EvalAt, EvalQuery, MemStore, TestStore};
use crate::engine::{Engine, EngineOptions};
use crate::value::{QueryOutput, Value};
use tessera_model::{Labels, HISTOGRAM_MARKER_BITS, STALE_NAN_BITS};

/// One failing `eval`.
#[derive(Debug, Clone)]
pub struct Failure {
    pub file: String,
    pub line: usize,
    pub query: String,
    pub reason: String,
}

/// The outcome of one script.
#[derive(Debug, Clone, Default)]
pub struct FileSummary {
    pub file: String,
    pub passed: usize,
    pub failed: usize,
    pub failures: Vec<Failure>,
}

/// The outcome of several scripts.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub files: Vec<FileSummary>,
    pub passed: usize,
    pub failed: usize,
}

/// Runs every script in `paths`.
pub fn run_files(paths: &[PathBuf]) -> Summary {
    let mut sum = Summary::default();
    for p in paths {
        let fs = run_file(p);
        sum.passed += fs.passed;
        sum.failed += fs.failed;
        sum.files.push(fs);
    }
    sum
}

/// Runs one script file; an unreadable file counts as one failure.
pub fn run_file(path: &Path) -> FileSummary {
    let name = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => run_script(&name, &text),
        Err(e) => FileSummary {
            file: name.clone(),
            passed: 0,
            failed: 1,
            failures: vec![Failure {
                file: name,
                line: 0,
                query: String::new(),
                reason: format!("cannot read file: {e}"),
            }],
        },
    }
}

/// Runs a script given as text over the in-memory store; `name` labels the failures.
pub fn run_script(name: &str, text: &str) -> FileSummary {
    run_script_on(name, text, &mut MemStore::new())
}

/// Runs a script given as text over `store` (which the script's `clear` commands
/// empty); `name` labels the failures.
pub fn run_script_on(name: &str, text: &str, store: &mut dyn TestStore) -> FileSummary {
    let engine = Engine::new(EngineOptions::default());
    let mut fs = FileSummary { file: name.to_string(), ..Default::default() };
    // A load that failed to parse poisons the evals that follow it until `clear`.
    let mut load_error: Option<(usize, String)> = None;
    for cmd in parse_script(text) {
        match cmd {
            Cmd::Clear => {
                store.clear();
                load_error = None;
            }
            Cmd::Load { line, interval, series, error } => {
                if let Some(e) = error {
                    load_error = Some((line, e));
                }
                load(store, series, interval);
            }
            Cmd::Eval(e) => {
                let mut result = store.commit().and_then(|()| run_eval(&engine, store, &e));
                if let (Err(r), Some((line, le))) = (&mut result, &load_error) {
                    *r = format!("{r} (load at line {line} failed: {le})");
                }
                match result {
                    Ok(()) => fs.passed += 1,
                    Err(reason) => {
                        fs.failed += 1;
                        fs.failures.push(Failure {
                            file: name.to_string(),
                            line: e.line,
                            query: e.query.clone(),
                            reason,
                        });
                    }
                }
            }
        }
    }
    fs
}

/// Adds a `load` command's points to `store`, the first at t = 0.
pub(crate) fn load(store: &mut dyn TestStore, series: Vec<(Labels, Vec<Point>)>, interval: i64) {
    for (labels, points) in series {
        for (i, p) in points.iter().enumerate() {
            let t = i as i64 * interval;
            match p {
                Point::Float(v) => store.add(labels.clone(), t, *v),
                Point::Stale => store.add(labels.clone(), t, f64::from_bits(STALE_NAN_BITS)),
                // Native histograms are not evaluated; a marker keeps their
                // presence visible (counted, skipped by float functions).
                Point::Histogram => store.add(labels.clone(), t, f64::from_bits(HISTOGRAM_MARKER_BITS)),
                Point::Missing => {}
            }
        }
    }
}

/// Runs the scripts and prints `FILE:LINE: query: reason` for each failing eval,
/// per-file counts, and a final `N passed, M failed`. Returns the process exit code.
pub fn run_cli(paths: &[PathBuf]) -> i32 {
    let sum = run_files(paths);
    for f in &sum.files {
        for x in &f.failures {
            println!("{}:{}: {}: {}", x.file, x.line, x.query, x.reason);
        }
    }
    for f in &sum.files {
        println!("# {}: {} passed, {} failed", f.file, f.passed, f.failed);
    }
    println!("{} passed, {} failed", sum.passed, sum.failed);
    if sum.failed == 0 {
        0
    } else {
        1
    }
}

fn run_eval(engine: &Engine, store: &mut dyn TestStore, e: &EvalCmd) -> Result<(), String> {
    if let Some(err) = &e.error {
        return Err(err.clone());
    }
    let at = match (e.instant, e.range) {
        (Some(t), _) => EvalAt::Instant(t),
        (None, Some((start, end, step))) => EvalAt::Range { start, end, step },
        _ => return Err("eval without time".into()),
    };
    let res = store.eval(engine, EvalQuery { line: e.line, query: &e.query, at });
    if let Some(m) = &e.fail {
        return match res {
            Ok(_) => Err("expected the query to fail, but it succeeded".into()),
            Err(err) => {
                if msg_matches(m, &err)? {
                    Ok(())
                } else {
                    Err(format!("error message {err:?} does not match {:?}", describe(m)))
                }
            }
        };
    }
    let out = res.map_err(|err| format!("unexpected error: {err}"))?;
    check_annotations("warn", &e.warn, e.no_warn, &out.warnings)?;
    check_annotations("info", &e.info, e.no_info, &out.infos)?;
    check_value(e, &out)
}

fn describe(m: &MsgMatch) -> String {
    match m {
        MsgMatch::Any => "<any>".into(),
        MsgMatch::Exact(s) => s.clone(),
        MsgMatch::Regex(s) => format!("regex {s}"),
    }
}

fn msg_matches(m: &MsgMatch, msg: &str) -> Result<bool, String> {
    Ok(match m {
        MsgMatch::Any => true,
        MsgMatch::Exact(s) => s == msg,
        MsgMatch::Regex(r) => regex::Regex::new(r).map_err(|e| format!("bad regex in test: {e}"))?.is_match(msg),
    })
}

fn check_annotations(kind: &str, expects: &[MsgMatch], none: bool, got: &[String]) -> Result<(), String> {
    if none && !got.is_empty() {
        return Err(format!("expected no {kind} annotations, got {got:?}"));
    }
    if expects.is_empty() {
        return Ok(());
    }
    if got.is_empty() {
        return Err(format!("expected {kind} annotations, got none"));
    }
    let specific: Vec<&MsgMatch> = expects.iter().filter(|m| !matches!(m, MsgMatch::Any)).collect();
    for m in &specific {
        let mut hit = false;
        for g in got {
            hit |= msg_matches(m, g)?;
        }
        if !hit {
            return Err(format!("expected {kind} {:?}, got {got:?}", describe(m)));
        }
    }
    if !specific.is_empty() {
        for g in got {
            let mut hit = false;
            for m in &specific {
                hit |= msg_matches(m, g)?;
            }
            if !hit {
                return Err(format!("unexpected {kind} annotation {g:?}"));
            }
        }
    }
    Ok(())
}

/// Prometheus' `almost.Equal` with epsilon 1e-6.
fn almost_equal(a: f64, b: f64) -> bool {
    const EPS: f64 = 1e-6;
    const MIN_NORMAL: f64 = f64::MIN_POSITIVE;
    if a.is_nan() && b.is_nan() {
        return true;
    }
    if a == b {
        return true;
    }
    let abs_sum = a.abs() + b.abs();
    let diff = (a - b).abs();
    if a == 0.0 || b == 0.0 || abs_sum < MIN_NORMAL {
        return diff < EPS * MIN_NORMAL;
    }
    diff / abs_sum.min(f64::MAX) < EPS
}

fn point_eq(p: &Point, v: f64) -> bool {
    match p {
        Point::Float(x) => almost_equal(*x, v),
        Point::Stale => v.to_bits() == STALE_NAN_BITS,
        _ => false,
    }
}

fn expected_series(e: &EvalCmd) -> Result<Vec<(&Labels, &Vec<Point>)>, String> {
    let mut out = Vec::new();
    for x in &e.expected {
        match x {
            Expected::Series { labels, points } => {
                if points.contains(&Point::Histogram) {
                    return Err("native histogram values are not supported".into());
                }
                out.push((labels, points));
            }
            Expected::Scalar(_) => return Err("expected a scalar, but the result is a vector or matrix".into()),
        }
    }
    Ok(out)
}

fn check_value(e: &EvalCmd, out: &QueryOutput) -> Result<(), String> {
    if let Some(s) = &e.string {
        return match &out.value {
            Value::String { s: got, .. } if got == s => Ok(()),
            other => Err(format!("expected string {s:?}, got {other:?}")),
        };
    }
    match &out.value {
        Value::String { s, .. } => Err(format!("unexpected string result {s:?}")),
        Value::Scalar { v, .. } => match e.expected.as_slice() {
            [Expected::Scalar(x)] if almost_equal(*x, *v) => Ok(()),
            [Expected::Scalar(x)] => Err(format!("expected scalar {x}, got {v}")),
            _ => Err(format!("unexpected scalar result {v}")),
        },
        Value::Vector(got) => {
            let exp = expected_series(e)?;
            if exp.len() != got.len() {
                return Err(format!(
                    "expected {} series, got {}: {}",
                    exp.len(),
                    got.len(),
                    got.iter().map(|g| format!("{} {}", g.labels, g.v)).collect::<Vec<_>>().join(", ")
                ));
            }
            for (i, (labels, points)) in exp.iter().enumerate() {
                let Some(pos) = got.iter().position(|g| &g.labels == *labels) else {
                    return Err(format!("missing series {labels} in result"));
                };
                if e.ordered && pos != i {
                    return Err(format!("series {labels} at position {pos}, expected {i}"));
                }
                if points.len() != 1 {
                    return Err(format!("expected {} points for {labels} in an instant vector", points.len()));
                }
                if !point_eq(&points[0], got[pos].v) {
                    return Err(format!("{labels}: expected {:?}, got {}", points[0], got[pos].v));
                }
            }
            Ok(())
        }
        Value::Matrix(got) => {
            let exp = expected_series(e)?;
            let (start, step) = match (e.range, e.range_vector) {
                (Some((s, _, st)), _) => (s, st),
                (None, Some((s, _, st))) => (s, st),
                _ => return Err("a range vector result needs `expect range vector`".into()),
            };
            if exp.len() != got.len() {
                return Err(format!(
                    "expected {} series, got {}: {}",
                    exp.len(),
                    got.len(),
                    got.iter().map(|g| g.labels.to_string()).collect::<Vec<_>>().join(", ")
                ));
            }
            for (labels, points) in exp {
                let Some(g) = got.iter().find(|g| &g.labels == labels) else {
                    return Err(format!("missing series {labels} in result"));
                };
                let want: Vec<(i64, &Point)> = points
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| !matches!(p, Point::Missing))
                    .map(|(i, p)| (start + i as i64 * step, p))
                    .collect();
                let ok = want.len() == g.samples.len()
                    && want.iter().zip(&g.samples).all(|((t, p), s)| *t == s.t && point_eq(p, s.v));
                if !ok {
                    let gs: Vec<String> = g.samples.iter().map(|s| format!("{}@{}", s.v, s.t / 1000)).collect();
                    let ws: Vec<String> = want
                        .iter()
                        .map(|(t, p)| match p {
                            Point::Float(v) => format!("{v}@{}", t / 1000),
                            other => format!("{other:?}@{}", t / 1000),
                        })
                        .collect();
                    return Err(format!("{labels}: expected [{}], got [{}]", ws.join(" "), gs.join(" ")));
                }
            }
            Ok(())
        }
    }
}

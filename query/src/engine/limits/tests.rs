//! Tests of the PromQL text limits: the depth bound against real trees, the refusals
//! of issue 12's inputs, and the stack measurements behind the defaults.

use std::time::{Duration, Instant};

use promql_parser::parser::Expr;
use proptest::prelude::*;

use super::*;
use crate::engine::{Engine, EngineOptions, QueryOptions};
use crate::promqltest::MemStore;
use crate::ErrorKind;
use tessera_model::Labels;

/// The real depth of a parsed tree (leaves are depth 1). Recursive: only used on trees
/// the limit admitted, or on small ones.
fn real_depth(e: &Expr) -> usize {
    1 + match e {
        Expr::Aggregate(a) => real_depth(&a.expr).max(a.param.as_deref().map_or(0, real_depth)),
        Expr::Unary(u) => real_depth(&u.expr),
        Expr::Binary(b) => real_depth(&b.lhs).max(real_depth(&b.rhs)),
        Expr::Paren(p) => real_depth(&p.expr),
        Expr::Subquery(s) => real_depth(&s.expr),
        Expr::Call(c) => c.args.args.iter().map(|a| real_depth(a)).max().unwrap_or(0),
        Expr::VectorSelector(_) | Expr::MatrixSelector(_) | Expr::NumberLiteral(_) | Expr::StringLiteral(_) => 0,
        Expr::Extension(_) => 0,
    }
}

/// Whether a shape's syntax tree nests (unary `+` leaves no node, but the parser still
/// works through it level by level, so it is bounded all the same).
fn tree_nests(name: &str) -> bool {
    name != "unary plus"
}

/// Query shapes that nest one level per repetition, by every construct the parser
/// nests with. Each is valid PromQL that evaluates to something.
fn shapes() -> Vec<(&'static str, fn(usize) -> String)> {
    vec![
        ("unary minus", |k| format!("{}vector(1)", "-".repeat(k))),
        ("unary plus", |k| format!("{}vector(1)", "+".repeat(k))),
        ("left-deep + chain", |k| format!("vector(1){}", " + vector(1)".repeat(k))),
        ("right-deep ^ chain", |k| format!("2{}", " ^ 1".repeat(k))),
        ("or chain", |k| format!("up_total{}", " or up_total".repeat(k))),
        ("and on() chain", |k| format!("up_total{}", " and on(job) up_total".repeat(k))),
        ("comparison chain", |k| format!("up_total{}", " >= bool 0".repeat(k))),
        ("parentheses", |k| format!("{}vector(1){}", "(".repeat(k), ")".repeat(k))),
        ("nested calls", |k| format!("{}vector(1){}", "abs(".repeat(k), ")".repeat(k))),
        ("nested aggregations", |k| format!("{}up_total{}", "sum by (job) (".repeat(k), ")".repeat(k))),
        ("negated parentheses", |k| format!("{}vector(1){}", "-(".repeat(k), ")".repeat(k))),
        ("nested label_replace", |k| {
            format!("{}up_total{}", "label_replace(".repeat(k), ", \"a\", \"$1\", \"job\", \"(.*)\")".repeat(k))
        }),
        ("nested subqueries", |k| {
            let mut e = "vector(1)".to_string();
            for _ in 0..k {
                e = format!("max_over_time({e}[1m:1m])");
            }
            e
        }),
        ("nested subqueries of rates", |k| {
            let mut e = "up_total".to_string();
            for _ in 0..k {
                e = format!("sum(rate({e}[5m:1m]))");
            }
            e
        }),
    ]
}

/// The largest repetition count of `shape` whose text the limit `max` admits.
fn largest_admitted(shape: fn(usize) -> String, max: usize) -> usize {
    let mut k = 0;
    while depth_bound(&shape(k + 1)) <= max {
        k += 1;
    }
    k
}

fn store() -> MemStore {
    let mut s = MemStore::new();
    for i in 0..=10 {
        s.add(Labels::from_pairs([("__name__", "up_total"), ("job", "a")]), i * 60_000, i as f64);
    }
    s
}

/// Parses, inspects, evaluates (instant and range), prints and drops `text` — every
/// recursive walk a query goes through — on a thread with `stack` bytes of stack. A
/// stack overflow aborts the whole test binary, so passing means it fit.
fn walk_on_stack(text: String, max_depth: usize, stack: usize) -> usize {
    walk_on_stack_phases(text, max_depth, stack, true)
}

fn walk_on_stack_phases(text: String, max_depth: usize, stack: usize, evaluate: bool) -> usize {
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(move || {
            let limits = TextLimits { max_depth, max_bytes: DEFAULT_MAX_QUERY_BYTES };
            let ast = crate::engine::parse_with_limits(&text, &limits).expect("admitted text parses");
            let depth = real_depth(&ast);
            let _ = ast.value_type();
            let pretty = ast.prettify();
            let plain = ast.to_string();
            assert!(!pretty.is_empty() && !plain.is_empty());
            let cloned = ast.clone();
            drop(ast);
            drop(cloned);
            if !evaluate {
                return depth;
            }
            let engine = Engine::new(EngineOptions { text: limits, ..EngineOptions::default() });
            let q = QueryOptions::default();
            let data = store();
            engine.instant_query(&data, &text, 600_000, &q).expect("evaluates at one time");
            engine.range_query(&data, &text, 300_000, 600_000, 60_000, &q).expect("evaluates over a range");
            depth
        })
        .expect("spawn")
        .join()
        .expect("the walk succeeded")
}

#[test]
fn everyday_queries_have_small_depth_bounds() {
    for q in [
        "up",
        "sum by (job) (rate(http_requests_total{code=~\"5..\"}[5m])) / sum by (job) (rate(http_requests_total[5m]))",
        "histogram_quantile(0.99, sum by (le) (rate(req_bucket{job=\"api\", le!=\"+Inf\"}[5m])))",
        "max_over_time(deriv(rate(x[1m])[5m:1m])[1h:]) offset -5m @ end()",
        "label_replace(up, \"a\", \"$1\", \"b\", \"(.*)\") > bool 0.5",
    ] {
        let b = depth_bound(q);
        assert!(b < 16, "{q}: {b}");
        check_text(q, &TextLimits::default()).expect("admitted");
    }
}

#[test]
fn depth_bound_is_at_least_the_real_depth_of_every_shape() {
    for (name, shape) in shapes() {
        for k in [0, 1, 2, 3, 7, 20, 60] {
            let text = shape(k);
            let ast = promql_parser::parser::parse(&text).unwrap_or_else(|e| panic!("{name} at {k}: {e}"));
            let (real, bound) = (real_depth(&ast), depth_bound(&text));
            assert!(real <= bound, "{name} at {k}: real depth {real} > bound {bound}");
            // Not absurdly pessimistic either: at most three levels of bound per level.
            assert!(!tree_nests(name) || bound <= 3 * real + 3, "{name} at {k}: bound {bound} for real depth {real}");
        }
    }
}

#[test]
fn brackets_and_operators_inside_strings_and_comments_do_not_count() {
    let text = format!(
        "up{{a=\"{}\", b='{}', c=`{}`}} # {}\n",
        "((((-".repeat(5000),
        "))+[\\'".repeat(5000),
        "{{{{".repeat(5000),
        "(((".repeat(5000)
    );
    assert_eq!(depth_bound(&text), 2);
    check_text(&text, &TextLimits::default()).expect("admitted");
}

#[test]
fn crashing_inputs_from_issue_12_are_refused_naming_the_limit() {
    let limits = TextLimits::default();
    let nested_subqueries = shapes().into_iter().find(|(n, _)| *n == "nested subqueries").unwrap().1;
    for (what, text) in [
        ("2000 unary minus", format!("{}vector(1)", "-".repeat(2000))),
        ("1750 unary plus", format!("{}vector(1)", "+".repeat(1750))),
        ("1750 + terms", format!("a{}", "+a".repeat(1750))),
        ("1500 nested calls", format!("{}vector(1){}", "abs(".repeat(1500), ")".repeat(1500))),
        ("1250 nested subqueries", nested_subqueries(1250)),
        ("7800 parentheses", format!("{}1{}", "(".repeat(7800), ")".repeat(7800))),
        ("2750 parentheses", format!("{}up{}", "(".repeat(2750), ")".repeat(2750))),
        ("unclosed parentheses", "(".repeat(100_000)),
        ("unclosed braces", "{".repeat(100_000)),
    ] {
        let start = Instant::now();
        let err = check_text(&text, &limits).expect_err(what);
        assert!(start.elapsed() < Duration::from_millis(500), "{what}: the scan is linear");
        assert_eq!(err.kind, ErrorKind::BadData);
        assert!(
            err.message.contains("query.max_query_depth") && err.message.contains("256"),
            "{what}: {}",
            err.message
        );
    }
}

#[test]
fn the_depth_limit_is_inclusive_and_configurable() {
    let text = format!("{}vector(1)", "-".repeat(10));
    let bound = depth_bound(&text);
    assert!(check_text(&text, &TextLimits { max_depth: bound, max_bytes: 1000 }).is_ok());
    assert!(check_text(&text, &TextLimits { max_depth: bound - 1, max_bytes: 1000 }).is_err());
}

#[test]
fn long_text_is_refused_naming_the_byte_limit() {
    let text = format!("up{}", " ".repeat(2000));
    let err = check_text(&text, &TextLimits { max_depth: 256, max_bytes: 1000 }).expect_err("too long");
    assert_eq!(err.kind, ErrorKind::BadData);
    assert!(err.message.contains("2002 bytes") && err.message.contains("query.max_query_bytes"), "{}", err.message);
    assert!(check_text(&text, &TextLimits { max_depth: 256, max_bytes: 2002 }).is_ok());
}

#[test]
fn the_engine_refuses_too_deep_queries_before_parsing() {
    let engine = Engine::default();
    let text = format!("{}vector(1)", "-".repeat(2000));
    let err = engine.instant_query(&store(), &text, 0, &QueryOptions::default()).expect_err("too deep");
    assert_eq!(err.kind, ErrorKind::BadData);
    assert!(err.message.contains("query.max_query_depth"), "{}", err.message);
    let err = crate::engine::parse(&text).expect_err("too deep");
    assert!(err.message.contains("query.max_query_depth"), "{}", err.message);
}

/// The measurement behind `DEFAULT_MAX_QUERY_DEPTH`: every shape at the deepest text the
/// default admits is parsed, printed and dropped on HALF of tokio's 2 MiB blocking-thread
/// stack, in whatever profile the tests run (debug frames are the largest): a margin of
/// at least 2x where `match[]` selectors are parsed.
#[test]
fn parsing_at_the_default_depth_limit_fits_in_half_a_blocking_thread_stack() {
    for (name, shape) in shapes() {
        let k = largest_admitted(shape, DEFAULT_MAX_QUERY_DEPTH);
        let depth = walk_on_stack_phases(shape(k), DEFAULT_MAX_QUERY_DEPTH, 1024 * 1024, false);
        // The shapes really reach deep: at least a third of the limit.
        assert!(!tree_nests(name) || depth >= DEFAULT_MAX_QUERY_DEPTH / 3, "{name}: only {depth} levels at k={k}");
    }
}

/// The measurement behind `MAX_QUERY_DEPTH_CEILING`: at that depth, parsing, printing
/// and dropping fit a 2 MiB stack (tokio's blocking threads).
#[test]
fn parsing_at_the_depth_ceiling_fits_in_a_blocking_thread_stack() {
    for (name, shape) in shapes() {
        let k = largest_admitted(shape, MAX_QUERY_DEPTH_CEILING);
        let depth = walk_on_stack_phases(shape(k), MAX_QUERY_DEPTH_CEILING, 2 * 1024 * 1024, false);
        assert!(!tree_nests(name) || depth >= MAX_QUERY_DEPTH_CEILING / 3, "{name}: only {depth} levels at k={k}");
    }
}

/// ... and evaluating as well fits in half of the query threads' stack.
#[test]
fn evaluating_at_the_depth_ceiling_fits_in_half_a_query_thread_stack() {
    for (name, shape) in shapes() {
        let k = largest_admitted(shape, MAX_QUERY_DEPTH_CEILING);
        let depth = walk_on_stack(shape(k), MAX_QUERY_DEPTH_CEILING, EVAL_STACK_BYTES / 2);
        assert!(!tree_nests(name) || depth >= MAX_QUERY_DEPTH_CEILING / 3, "{name}: only {depth} levels at k={k}");
    }
}

proptest! {
    /// Any text: the scan never panics, and whatever the parser accepts nests no deeper
    /// than the bound says.
    #[test]
    fn bound_covers_the_real_depth_of_any_parsable_text(
        text in "[-+*/^()\\[\\]{}\"'#\\n a1,:=!<>~]{0,40}|(vector\\(1\\)|up|[-+*^/]|or |and |\\(|\\)|\\[1m:\\]| |sum|abs|\"\\(\"){0,30}"
    ) {
        let bound = depth_bound(&text);
        let _ = check_text(&text, &TextLimits::default());
        if let Ok(ast) = promql_parser::parser::parse(&text) {
            prop_assert!(real_depth(&ast) <= bound, "{:?}: real {} > bound {}", text, real_depth(&ast), bound);
        }
    }
}

/// A probe for measuring, one process per run (an overflow aborts the process):
/// `TESSERA_STACK_PROBE=<shape index>,<repetitions>,<stack KiB> cargo test -- --ignored stack_probe`.
#[test]
#[ignore]
fn stack_probe() {
    let spec = std::env::var("TESSERA_STACK_PROBE")
        .expect("set TESSERA_STACK_PROBE=<shape>,<k>,<stack KiB>[,1 = skip evaluation]");
    let v: Vec<usize> = spec.split(',').map(|x| x.parse().expect("number")).collect();
    let (name, shape) = shapes()[v[0]];
    let text = shape(v[1]);
    let depth = walk_on_stack_phases(text.clone(), usize::MAX / 2, v[2] * 1024, v.get(3) != Some(&1));
    eprintln!("PROBE {name} k={} bound={} real={depth} stack={}KiB ok", v[1], depth_bound(&text), v[2]);
}

/// The widest text the default limits admit (about 250 KB, three levels of 49-operator
/// chains, 125,000 terms): how long parsing, printing and dropping it take. Printed for
/// BENCHMARKS.md; the assertion only catches a return of the quadratic blow-up.
#[test]
fn widest_admitted_text_parses_and_prints_in_bounded_time() {
    let leaf = format!("({})", vec!["a"; 50].join("+"));
    let mid = format!("({})", vec![leaf.as_str(); 50].join("+"));
    let text = vec![mid.as_str(); 50].join("+");
    assert!(text.len() <= DEFAULT_MAX_QUERY_BYTES, "{}", text.len());
    check_text(&text, &TextLimits::default()).expect("admitted");
    let t0 = Instant::now();
    let ast = promql_parser::parser::parse(&text).expect("parses");
    let parsed = t0.elapsed();
    let t1 = Instant::now();
    let pretty = ast.prettify();
    let printed = t1.elapsed();
    let t2 = Instant::now();
    drop(ast);
    let dropped = t2.elapsed();
    eprintln!(
        "widest admitted text: {} bytes, parse {parsed:?}, prettify {printed:?} ({} bytes), drop {dropped:?}",
        text.len(),
        pretty.len()
    );
    assert!(parsed + printed < Duration::from_secs(30), "parse {parsed:?}, prettify {printed:?}");
}

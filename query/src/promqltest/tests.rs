use super::parse::{parse_script, parse_series_line, Cmd, Point};
use super::run_script;

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

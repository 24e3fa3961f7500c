//! Line parser: both timestamp units, escapes, special values, and the refusals.

use super::*;

fn sample(line: &str, format: Format) -> SampleLine<'_> {
    match parse_line(line, format) {
        Ok(Line::Sample(s)) => s,
        other => panic!("expected a sample from {line:?}, got {other:?}"),
    }
}

/// The error of a line, from the line parser or (for a label set) `labels()`.
fn error(line: &str, format: Format) -> String {
    match parse_line(line, format) {
        Err(e) => e,
        Ok(Line::Sample(s)) if s.labels().is_err() => s.labels().expect_err("checked"),
        other => panic!("expected an error from {line:?}, got {other:?}"),
    }
}

#[test]
fn openmetrics_timestamps_are_seconds_and_text_timestamps_are_milliseconds() {
    assert_eq!(sample("up 1 1700000000.5", Format::OpenMetrics).t, 1_700_000_000_500);
    assert_eq!(sample("up 1 1700000000", Format::OpenMetrics).t, 1_700_000_000_000);
    assert_eq!(sample("up 1 1700000000.123456", Format::OpenMetrics).t, 1_700_000_000_123);
    assert_eq!(sample("up 1 1.7e9", Format::OpenMetrics).t, 1_700_000_000_000);
    assert_eq!(sample("up 1 -1.5", Format::OpenMetrics).t, -1500);
    assert_eq!(sample("up 1 1700000000500", Format::PrometheusText).t, 1_700_000_000_500);
    let e = error("up 1 1700000000.5", Format::PrometheusText);
    assert!(e.contains("integer milliseconds"), "{e}");
}

#[test]
fn labels_are_unescaped_and_keep_their_written_order() {
    let s = sample(r#"m{b="x\\y",a="q\"t\nz",} 2.5 10"#, Format::PrometheusText);
    assert_eq!(s.name, "m");
    assert_eq!(s.series_text, r#"m{b="x\\y",a="q\"t\nz",}"#);
    let labels = s.labels().expect("labels");
    let got: Vec<(&str, &str)> = labels.iter().map(|(n, v)| (*n, v.as_ref())).collect();
    assert_eq!(got, vec![("b", "x\\y"), ("a", "q\"t\nz")]);
    assert_eq!(s.value, 2.5);
}

#[test]
fn braces_and_quotes_inside_label_values_do_not_end_the_label_set() {
    let s = sample(r#"m{a="}{\"}",b=""} 1 7"#, Format::PrometheusText);
    assert_eq!(s.t, 7);
    let labels = s.labels().expect("labels");
    assert_eq!(labels[0].1, "}{\"}");
    assert_eq!(labels[1].1, "");
}

#[test]
fn special_values_parse() {
    assert!(sample("m NaN 1", Format::PrometheusText).value.is_nan());
    assert_eq!(sample("m +Inf 1", Format::PrometheusText).value, f64::INFINITY);
    assert_eq!(sample("m -Inf 1", Format::PrometheusText).value, f64::NEG_INFINITY);
    assert_eq!(sample("m_bucket{le=\"0.5\"} 3 1", Format::PrometheusText).value, 3.0);
}

#[test]
fn descriptors_and_eof_are_recognised_and_exemplars_ignored() {
    assert_eq!(parse_line("# HELP m some help text", Format::OpenMetrics), Ok(Line::Skip));
    assert_eq!(parse_line("# TYPE m counter", Format::OpenMetrics), Ok(Line::Skip));
    assert_eq!(parse_line("# UNIT m seconds", Format::OpenMetrics), Ok(Line::Skip));
    assert_eq!(parse_line("# EOF", Format::OpenMetrics), Ok(Line::Eof));
    assert_eq!(parse_line("# any comment", Format::PrometheusText), Ok(Line::Skip));
    assert_eq!(parse_line("", Format::PrometheusText), Ok(Line::Skip));
    let s = sample(r#"m_total 5 100.5 # {trace_id="a"} 1 100.4"#, Format::OpenMetrics);
    assert_eq!((s.value, s.t), (5.0, 100_500));
}

#[test]
fn bad_lines_are_refused_with_a_reason() {
    let cases = [
        ("m 1", Format::PrometheusText, "no timestamp"),
        ("m abc 1", Format::PrometheusText, "invalid value"),
        ("m{a=\"b} 1 1", Format::PrometheusText, "no closing `}`"),
        ("m{a=\"b\"} 1 1 # x", Format::PrometheusText, "after the timestamp"),
        ("m{a=\"b\",=\"c\"} 1 1", Format::PrometheusText, "expected a label name"),
        ("m{a=\"\\t\"} 1 1", Format::PrometheusText, "invalid escape"),
        ("m{a=b} 1 1", Format::PrometheusText, "expected `=\"`"),
        ("m{a=\"b\" c=\"d\"} 1 1", Format::PrometheusText, "expected `,` or `}`"),
        ("1m 1 1", Format::PrometheusText, "metric name"),
        ("m 1 1 extra", Format::PrometheusText, "after the timestamp"),
        ("m 1 soon", Format::OpenMetrics, "seconds"),
        ("# TYPE m weird", Format::OpenMetrics, "unknown metric type"),
        ("# a comment", Format::OpenMetrics, "only"),
        ("# EOF", Format::PrometheusText, "last line"),
        ("# UNIT m seconds", Format::PrometheusText, "only in OpenMetrics"),
    ];
    for (line, format, want) in cases {
        let e = error(line, format);
        assert!(e.contains(want), "{line:?}: {e:?} should mention {want:?}");
    }
}

#[test]
fn the_tail_split_agrees_with_the_parser_whenever_it_names_the_parsed_series() {
    let lines = [
        (r#"m{a="x y",b="}"} 2.5 10"#, Format::PrometheusText),
        ("m 2.5 10\r", Format::PrometheusText),
        ("m{} NaN 10", Format::PrometheusText),
        ("m{a=\"b\"} +Inf 1700000000.5", Format::OpenMetrics),
        (r#"m{a="b"} 1 5 # {trace="x y"} 2 3"#, Format::OpenMetrics),
        (r#"m{a="b"} 1 5 # {} 2"#, Format::OpenMetrics),
        ("m  1 10", Format::PrometheusText),
        ("m 1\t 10", Format::PrometheusText),
        ("m\t1 10", Format::PrometheusText),
    ];
    for (line, format) in lines {
        let parsed = sample(line, format);
        match split_tail(line.as_bytes(), format) {
            Some((text, v, t)) if text == parsed.series_text.as_bytes() => {
                assert_eq!((v.to_bits(), t), (parsed.value.to_bits(), parsed.t), "{line:?}");
            }
            // Another text is never a series spelling, so the importer parses the line.
            Some((text, _, _)) => assert!(text.contains(&b' ') || text.contains(&b'\t'), "{line:?}"),
            None => {}
        }
    }
    // The common line is read from its end.
    let (text, v, t) = split_tail(br#"m{a="x y"} 2.5 10"#, Format::PrometheusText).expect("split");
    assert_eq!((text, v, t), (&br#"m{a="x y"}"#[..], 2.5, 10));
}

//! Matcher semantics: anchoring, `(?s)`, Go's ASCII classes, fast paths.

use super::*;

fn m(op: MatchOp, v: &str) -> Matcher {
    Matcher::new("l", op, v).expect("valid matcher")
}

#[test]
fn regex_is_fully_anchored() {
    let r = m(MatchOp::Regex, "ab[0-9]");
    assert!(r.matches("ab1"));
    assert!(!r.matches("xab1"));
    assert!(!r.matches("ab12"));
}

#[test]
fn dot_matches_newline_like_prometheus() {
    assert!(m(MatchOp::Regex, "a.b").matches("a\nb"));
    assert!(m(MatchOp::Regex, "a.*").matches("a\n\n"));
}

#[test]
fn fast_paths_agree_with_the_regex() {
    let cases = ["train-.*", "0|1|2", "plain", ".*", "x+", "ab*c", "a?b", "pre[0-9]+.*", "", "a|"];
    let inputs =
        ["", "train-", "train-abc", "0", "1", "3", "plain", "plainx", "xx", "ac", "abbc", "b", "ab", "pre12z", "a"];
    for c in cases {
        let fast = m(MatchOp::Regex, c);
        let re = goregex::compile_anchored(c).expect("regex");
        for i in inputs {
            assert_eq!(fast.matches(i), re.is_match(i), "pattern {c:?} input {i:?}");
        }
    }
}

#[test]
fn empty_matching_matchers_are_flagged() {
    assert!(m(MatchOp::Equal, "").matches_empty());
    assert!(!m(MatchOp::Equal, "x").matches_empty());
    assert!(m(MatchOp::NotEqual, "x").matches_empty());
    assert!(!m(MatchOp::NotEqual, "").matches_empty());
    assert!(m(MatchOp::Regex, ".*").matches_empty());
    assert!(!m(MatchOp::Regex, ".+").matches_empty());
    assert!(m(MatchOp::NotRegex, ".+").matches_empty());
    assert!(!m(MatchOp::NotRegex, ".*").matches_empty());
}

#[test]
fn perl_classes_are_ascii_as_in_go() {
    // Prometheus matches `{gpu=~"\\d+"}` with Go's RE2: `\d` is [0-9] only.
    let digits = m(MatchOp::Regex, r"\d+");
    assert!(digits.matches("3"));
    assert!(!digits.matches("٣"));
    assert!(m(MatchOp::NotRegex, r"\d+").matches("٣"));
    assert!(!m(MatchOp::Regex, r"\w+").matches("é"));
    // Go's `\Q...\E` quoting, a parse error in Rust's own syntax.
    assert!(m(MatchOp::Regex, r"\Qa.b\E").matches("a.b"));
    assert!(!m(MatchOp::Regex, r"\Qa.b\E").matches("axb"));
}

#[test]
fn bad_regex_is_an_error_naming_label_and_regex() {
    let e = Matcher::new("l", MatchOp::NotRegex, "(unclosed").expect_err("must fail");
    assert!(matches!(e, Error::InvalidRegex { .. }));
    assert_eq!(e.to_string(), r#"invalid regex "(unclosed" for label "l""#);
    assert!(e.chain().starts_with(r#"invalid regex "(unclosed" for label "l": regex parse error"#), "{}", e.chain());
}

#[test]
fn a_malformed_regex_is_refused_even_when_a_fast_path_would_fit() {
    // `a|b(` splits into "literals" only if the regex is never compiled.
    assert!(Matcher::new("l", MatchOp::Regex, "a|b(").is_err());
    assert!(Matcher::new("l", MatchOp::Equal, "(").is_ok(), "= takes any value literally");
}

#[test]
fn index_scans_cover_every_match() {
    assert_eq!(m(MatchOp::Regex, "b|a|b").pattern().scan(), ValueScan::Exact(vec!["a", "b"]));
    assert_eq!(m(MatchOp::Equal, "x").pattern().scan(), ValueScan::Exact(vec!["x"]));
    assert_eq!(m(MatchOp::Regex, "train-.*").pattern().scan(), ValueScan::Prefix("train-"));
    assert_eq!(m(MatchOp::Regex, "pre[0-9]+").pattern().scan(), ValueScan::Prefix("pre"));
    assert_eq!(m(MatchOp::Regex, "a|b.*").pattern().scan(), ValueScan::Prefix(""));
    // The negated operators scan for what they exclude.
    let ne = m(MatchOp::NotRegex, "0|1");
    assert!(ne.is_negated());
    assert_eq!(ne.pattern().scan(), ValueScan::Exact(vec!["0", "1"]));
    assert!(ne.pattern().matches("0") && !ne.matches("0"));
}

#[test]
fn equal_constructor_is_the_equal_matcher() {
    let a = Matcher::equal("__name__", "up");
    let b = m(MatchOp::Equal, "up");
    assert_eq!(a.to_string(), r#"__name__="up""#);
    assert_eq!(a, Matcher::new("__name__", MatchOp::Equal, "up").expect("valid"));
    assert_ne!(a, b, "different label names");
    assert!(a.matches("up") && !a.matches("down") && !a.matches_empty());
}

#[test]
fn matchers_are_equal_by_name_op_and_value() {
    assert_eq!(m(MatchOp::Regex, "a.*"), m(MatchOp::Regex, "a.*"));
    assert_ne!(m(MatchOp::Regex, "a.*"), m(MatchOp::NotRegex, "a.*"));
    assert_ne!(m(MatchOp::Regex, "a.*"), m(MatchOp::Regex, "a.+"));
}

#[test]
fn missing_label_matches_as_empty_value() {
    let labels = [Label::new("a", "1")];
    assert!(Matcher::equal("b", "").matches_labels(&labels));
    assert!(!Matcher::equal("b", "1").matches_labels(&labels));
    assert!(Matcher::equal("a", "1").matches_labels(&labels));
}

#[test]
fn literal_prefix_stops_before_quantified_char() {
    assert_eq!(literal_prefix("train-[0-9]+"), "train-");
    assert_eq!(literal_prefix("ab*"), "a");
    assert_eq!(literal_prefix("a|b"), "");
}

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
fn bad_regex_is_an_error() {
    let e = Matcher::new("l", MatchOp::Regex, "(unclosed").expect_err("must fail");
    assert!(matches!(e, Error::InvalidRegex { .. }));
}

#[test]
fn literal_prefix_stops_before_quantified_char() {
    assert_eq!(literal_prefix("train-[0-9]+"), "train-");
    assert_eq!(literal_prefix("ab*"), "a");
    assert_eq!(literal_prefix("a|b"), "");
}

//! Expectations from the `label_replace`/`label_join` section of `functions.test`.

use super::*;
use crate::ErrorKind;

fn lbls(pairs: &[(&str, &str)]) -> Labels {
    Labels::from_pairs(pairs.iter().copied())
}

/// `label_replace` on one series, regex included.
fn label_replace(l: &Labels, dst: &str, replacement: &str, src: &str, regex: &str) -> Result<Labels, QueryError> {
    let re = compile_replace_regex(regex)?;
    label_replace_with(l, dst, replacement, src, &re)
}

fn testmetric() -> Labels {
    lbls(&[("__name__", "testmetric"), ("src", "source-value-10"), ("dst", "original-destination-value")])
}

#[test]
fn label_replace_does_a_full_string_match() {
    let out = label_replace(&testmetric(), "dst", "destination-value-$1", "src", "source-value-(.*)").expect("ok");
    assert_eq!(out.get("dst"), Some("destination-value-10"));
    assert_eq!(out.get("src"), Some("source-value-10"));
    // A substring match is no match: labels stay as they were.
    let out = label_replace(&testmetric(), "dst", "destination-value-$1", "src", "value-(.*)").expect("ok");
    assert_eq!(out, testmetric());
}

#[test]
fn label_replace_with_multiple_and_named_groups() {
    let out = label_replace(&testmetric(), "dst", "$1-value-$2", "src", "(.*)-value-(.*)").expect("ok");
    assert_eq!(out.get("dst"), Some("source-value-10"));
    let up = lbls(&[("job", "api-server"), ("service", "a:c")]);
    let out = label_replace(&up, "foo", "$name", "service", "(?P<name>.*):(?P<version>.*)").expect("ok");
    assert_eq!(out.get("foo"), Some("a"));
    let out = label_replace(&up, "foo", "${version}x", "service", "(?P<name>.*):(?P<version>.*)").expect("ok");
    assert_eq!(out.get("foo"), Some("cx"));
}

#[test]
fn label_replace_with_missing_source_matches_the_empty_string() {
    // A missing source does not match "source-value-(.*)": unchanged.
    let out = label_replace(&testmetric(), "dst", "value-$1", "nonexistent-src", "source-value-(.*)").expect("ok");
    assert_eq!(out, testmetric());
    // But it matches "(.*)", which overwrites the destination.
    let out = label_replace(&testmetric(), "dst", "value-$1", "nonexistent-src", "(.*)").expect("ok");
    assert_eq!(out.get("dst"), Some("value-"));
}

#[test]
fn label_replace_with_empty_result_removes_the_label() {
    let out = label_replace(&testmetric(), "dst", "", "dst", ".*").expect("ok");
    assert_eq!(out, lbls(&[("__name__", "testmetric"), ("src", "source-value-10")]));
}

#[test]
fn label_replace_adds_a_new_label_in_sorted_position() {
    let out = label_replace(&testmetric(), "mid", "x", "src", ".*").expect("ok");
    let names: Vec<&str> = out.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["__name__", "dst", "mid", "src"]);
    let out = label_replace(&testmetric(), "zzz", "x", "src", ".*").expect("ok");
    assert_eq!(out.iter().last().map(|l| l.name.as_str()), Some("zzz"));
}

#[test]
fn label_replace_regex_dot_matches_newline() {
    let l = lbls(&[("a", "x\ny")]);
    let out = label_replace(&l, "b", "$1", "a", "(.*)").expect("ok");
    assert_eq!(out.get("b"), Some("x\ny"));
}

#[test]
fn label_replace_rejects_invalid_regex_and_empty_destination() {
    let err = label_replace(&testmetric(), "dst", "value-$1", "src", "(.*").expect_err("bad regex");
    assert_eq!(err.kind, ErrorKind::Execution);
    let err = label_replace(&testmetric(), "", "", "src", "(.*)").expect_err("bad name");
    assert_eq!(err.kind, ErrorKind::Execution);
}

#[test]
fn expand_follows_go_template_rules() {
    let re = compile_replace_regex("(a)(b)?(?P<n>c)").expect("regex");
    let caps = re.captures("ac").expect("match");
    let e = |t: &str| expand(&re, &caps, t);
    assert_eq!(e("$1"), "a");
    assert_eq!(e("$1x"), ""); // group "1x" does not exist
    assert_eq!(e("${1}x"), "ax");
    assert_eq!(e("$2"), ""); // group did not participate
    assert_eq!(e("$n$3"), "cc");
    assert_eq!(e("$$1"), "$1");
    assert_eq!(e("a$"), "a$");
    assert_eq!(e("$-"), "$-");
    assert_eq!(e("${1"), "${1");
    assert_eq!(e("$01"), ""); // leading zero: a name, not a number
    assert_eq!(e("$9"), "");
}

#[test]
fn label_join_joins_in_order_with_missing_as_empty() {
    let l = lbls(&[("src", "a"), ("src1", "b"), ("src2", "c"), ("dst", "original")]);
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(label_join(&l, "dst", "-", &s(&["src", "src1", "src2"])).expect("ok").get("dst"), Some("a-b-c"));
    assert_eq!(label_join(&l, "dst", "-", &s(&["src", "src3", "src1"])).expect("ok").get("dst"), Some("a--b"));
    // An empty join removes the destination, even with no sources at all.
    assert_eq!(label_join(&l, "dst", "", &s(&["e1", "e2"])).expect("ok").get("dst"), None);
    assert_eq!(label_join(&l, "dst", ", ", &[]).expect("ok").get("dst"), None);
    assert_eq!(label_join(&l, "new", ", ", &s(&["src", "src1"])).expect("ok").get("new"), Some("a, b"));
    assert!(label_join(&l, "", ",", &s(&["src"])).is_err());
    assert!(label_join(&l, "dst", ",", &s(&[""])).is_err());
}

//! Go (RE2) syntax on Rust's engine: ASCII classes, `\Q...\E`, brackets, anchoring.

use super::*;

fn m(pattern: &str, s: &str) -> bool {
    compile_anchored(pattern).expect("valid pattern").is_match(s)
}

#[test]
fn perl_classes_are_ascii_only_as_in_go() {
    assert!(m(r"\d+", "123"));
    assert!(!m(r"\d+", "١٢٣")); // Arabic-Indic digits are not \d in Go
    assert!(m(r"\w+", "abc_09"));
    assert!(!m(r"\w+", "héllo"));
    assert!(m(r"\s", "\t"));
    assert!(!m(r"\s", "\u{a0}")); // no-break space is not \s in Go
    assert!(m(r"\D", "x"));
    assert!(m(r"\W", "é"));
    assert!(m(r"\S+", "é"));
}

#[test]
fn perl_classes_inside_brackets() {
    assert!(m(r"[\d.]+", "1.2.3"));
    assert!(!m(r"[\d.]+", "١.٢"));
    assert!(m(r"[^\d]+", "abc"));
    assert!(m(r"[\w-]+", "api-server_1"));
}

#[test]
fn word_boundary_is_ascii() {
    assert!(m(r".*\bfoo\b.*", "a foo b"));
    // In Go "é" is not a word character, so there is a boundary between it and "foo".
    assert!(m(r".*\bfoo", "éfoo"));
}

#[test]
fn quote_escapes_literal_text() {
    assert!(m(r"\Qa.b*c\E", "a.b*c"));
    assert!(!m(r"\Qa.b*c\E", "axbbbc"));
    assert!(m(r"x\Q(y)", "x(y)"));
}

#[test]
fn brackets_inside_classes_are_literal_as_in_go() {
    assert!(m(r"[[]", "["));
    assert!(m(r"[]a]+", "]a"));
    assert!(m(r"[a&&b]+", "a&b"));
    assert!(m(r"[[:alpha:]]+", "abc"));
    assert!(m(r"[a-z]+", "abc"));
}

#[test]
fn ordinary_patterns_pass_through() {
    assert_eq!(translate("source-value-(.*)"), "source-value-(.*)");
    assert_eq!(translate(r"(?P<name>.*):(?P<version>.*)"), r"(?P<name>.*):(?P<version>.*)");
    assert!(m("a|b|c", "b"));
    assert!(compile_anchored("(.*").is_err());
}

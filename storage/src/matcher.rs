//! Label matchers with Prometheus semantics.
//!
//! Regexes are Go (RE2) syntax, fully anchored, and `.` matches newlines (Prometheus
//! compiles `^(?s:<re>)$` with Go's `regexp`); `tessera_model::goregex` does the
//! compiling, so `\d` is ASCII here exactly as in `label_replace`. A series without the label behaves as if it had the label with an
//! empty value, so `{gpu=""}` and `{gpu!~".+"}` select series lacking `gpu`.
//! Literal regexes, `a|b|c` alternations of literals and `prefix.*` are recognised at
//! construction so the index can look values up directly instead of scanning them.

use std::fmt;

use regex::Regex;
use tessera_model::goregex;

use crate::error::{Error, Result};

/// The four Prometheus matcher operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatchOp {
    /// `=`
    Equal,
    /// `!=`
    NotEqual,
    /// `=~`
    Regex,
    /// `!~`
    NotRegex,
}

/// The positive predicate of a matcher (the operator's negation is kept apart).
#[derive(Clone, Debug)]
pub(crate) enum Pattern {
    /// Equal to one string.
    Literal(String),
    /// Equal to one of several strings (sorted, deduplicated), from `a|b|c`.
    Set(Vec<String>),
    /// Starts with this string, from `prefix.*`.
    Prefix(String),
    /// General regex; `prefix` is a literal every match starts with (may be empty).
    Regex { re: Regex, prefix: String },
}

/// How the index should find the label values a pattern can match.
pub(crate) enum ValueScan<'a> {
    /// Exactly these values.
    Exact(Vec<&'a str>),
    /// Every value starting with this prefix, filtered by `Pattern::matches`.
    Prefix(&'a str),
}

impl Pattern {
    pub(crate) fn matches(&self, v: &str) -> bool {
        match self {
            Pattern::Literal(l) => v == l,
            Pattern::Set(s) => s.binary_search_by(|x| x.as_str().cmp(v)).is_ok(),
            Pattern::Prefix(p) => v.starts_with(p.as_str()),
            Pattern::Regex { re, prefix } => v.starts_with(prefix.as_str()) && re.is_match(v),
        }
    }

    pub(crate) fn scan(&self) -> ValueScan<'_> {
        match self {
            Pattern::Literal(l) => ValueScan::Exact(vec![l.as_str()]),
            Pattern::Set(s) => ValueScan::Exact(s.iter().map(String::as_str).collect()),
            Pattern::Prefix(p) => ValueScan::Prefix(p),
            Pattern::Regex { prefix, .. } => ValueScan::Prefix(prefix),
        }
    }
}

/// One label matcher, e.g. `gpu=~"0|1"`.
#[derive(Clone)]
pub struct Matcher {
    name: String,
    op: MatchOp,
    value: String,
    pattern: Pattern,
    /// Whether the matcher selects a series that lacks the label (value "").
    matches_empty: bool,
}

impl fmt::Debug for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.op {
            MatchOp::Equal => "=",
            MatchOp::NotEqual => "!=",
            MatchOp::Regex => "=~",
            MatchOp::NotRegex => "!~",
        };
        write!(f, "{}{}{:?}", self.name, op, self.value)
    }
}

const META: &[char] = &['\\', '.', '+', '*', '?', '(', ')', '|', '[', ']', '{', '}', '^', '$'];

fn is_literal(s: &str) -> bool {
    !s.contains(META)
}

impl Matcher {
    /// Builds a matcher; a regex that does not compile is an error.
    pub fn new(name: &str, op: MatchOp, value: &str) -> Result<Matcher> {
        let pattern = match op {
            MatchOp::Equal | MatchOp::NotEqual => Pattern::Literal(value.to_string()),
            MatchOp::Regex | MatchOp::NotRegex => compile(name, value)?,
        };
        let negated = matches!(op, MatchOp::NotEqual | MatchOp::NotRegex);
        let matches_empty = pattern.matches("") != negated;
        Ok(Matcher { name: name.to_string(), op, value: value.to_string(), pattern, matches_empty })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn op(&self) -> MatchOp {
        self.op
    }

    pub fn value(&self) -> &str {
        &self.value
    }

    /// Whether a label value (use "" for a missing label) satisfies the matcher.
    pub fn matches(&self, v: &str) -> bool {
        self.pattern.matches(v) != self.is_negated()
    }

    /// Whether a series without this label is selected.
    pub fn matches_empty(&self) -> bool {
        self.matches_empty
    }

    pub(crate) fn is_negated(&self) -> bool {
        matches!(self.op, MatchOp::NotEqual | MatchOp::NotRegex)
    }

    pub(crate) fn pattern(&self) -> &Pattern {
        &self.pattern
    }

    /// True when the label set (sorted by name) satisfies this matcher.
    pub fn matches_labels(&self, labels: &[crate::Label]) -> bool {
        let v = labels.iter().find(|l| l.name == self.name).map_or("", |l| l.value.as_str());
        self.matches(v)
    }
}

/// Recognises the fast-path shapes before falling back to a compiled regex.
fn compile(name: &str, value: &str) -> Result<Pattern> {
    // Always compile, so a malformed regex is an error even when a fast path would do.
    let re = goregex::compile_anchored(value).map_err(|source| Error::InvalidRegex {
        name: name.to_string(),
        value: value.to_string(),
        source,
    })?;
    if is_literal(value) {
        return Ok(Pattern::Literal(value.to_string()));
    }
    if value.contains('|') && value.split('|').all(is_literal) {
        let mut set: Vec<String> = value.split('|').map(str::to_string).collect();
        set.sort();
        set.dedup();
        return Ok(Pattern::Set(set));
    }
    if let Some(p) = value.strip_suffix(".*") {
        if is_literal(p) {
            return Ok(Pattern::Prefix(p.to_string()));
        }
    }
    Ok(Pattern::Regex { re, prefix: literal_prefix(value) })
}

/// The literal text every match of `value` must start with ("" when unknown).
fn literal_prefix(value: &str) -> String {
    if value.contains('|') {
        // A top-level alternation can start with different literals; be conservative.
        return String::new();
    }
    let end = value.find(META).unwrap_or(value.len());
    let mut prefix = &value[..end];
    // In `ab*` or `ab?` the quantifier applies to the last literal char only.
    if matches!(value[end..].chars().next(), Some('*' | '?' | '{')) {
        let cut = prefix.char_indices().last().map_or(0, |(i, _)| i);
        prefix = &prefix[..cut];
    }
    prefix.to_string()
}

#[cfg(test)]
mod tests;

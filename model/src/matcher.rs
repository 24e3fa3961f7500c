//! Label matchers with Prometheus semantics, compiled once.
//!
//! Regexes are Go (RE2) syntax, fully anchored, and `.` matches newlines (Prometheus
//! compiles `^(?s:<re>)$` with Go's `regexp`); [`crate::goregex`] does the compiling,
//! so `\d` is ASCII here exactly as in `label_replace`. A series without the label
//! behaves as if it had the label with an empty value, so `{gpu=""}` and
//! `{gpu!~".+"}` select series lacking `gpu`.
//!
//! [`Matcher::new`] compiles the regex once and recognises three shapes so that the
//! common matchers never run a regex: a literal (`=~"a"`), a set of literals
//! (`=~"a|b|c"`) and a literal prefix (`=~"train-.*"`). An index uses the same shapes
//! through [`Matcher::pattern`] and [`Pattern::scan`] to look values up directly
//! instead of scanning them all.

use std::fmt;

use regex::Regex;

use crate::error::Error;
use crate::goregex;
use crate::Label;

/// The four Prometheus matcher operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatchOp {
    /// `=`
    Equal,
    /// `!=`
    NotEqual,
    /// `=~`, a fully anchored regex match.
    Regex,
    /// `!~`, a fully anchored negative regex match.
    NotRegex,
}

impl MatchOp {
    /// The operator as PromQL writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            MatchOp::Equal => "=",
            MatchOp::NotEqual => "!=",
            MatchOp::Regex => "=~",
            MatchOp::NotRegex => "!~",
        }
    }
}

/// The positive predicate of a matcher: what `=` and `=~` test, and what `!=` and `!~`
/// negate (see [`Matcher::is_negated`]). Built by [`Matcher::new`].
#[derive(Clone, Debug)]
pub struct Pattern(Kind);

#[derive(Clone, Debug)]
enum Kind {
    /// Equal to one string.
    Literal(String),
    /// Equal to one of several strings (sorted, deduplicated), from `a|b|c`.
    Set(Vec<String>),
    /// Starts with this string, from `prefix.*`.
    Prefix(String),
    /// General regex; `prefix` is a literal every match starts with (may be empty).
    Regex { re: Regex, prefix: String },
}

/// Which label values an index has to look at to find every value a [`Pattern`]
/// matches. It never misses a match; the values it yields must still be tested with
/// [`Pattern::matches`] (only `Exact` values of a literal or set pattern are known to
/// match).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueScan<'a> {
    /// Only these values (sorted, unique); look each one up.
    Exact(Vec<&'a str>),
    /// Only values starting with this prefix (`""`: every value); scan them in order.
    Prefix(&'a str),
}

impl Pattern {
    /// Whether `v` satisfies the positive predicate.
    #[inline]
    pub fn matches(&self, v: &str) -> bool {
        match &self.0 {
            Kind::Literal(l) => v == l,
            Kind::Set(s) => s.binary_search_by(|x| x.as_str().cmp(v)).is_ok(),
            Kind::Prefix(p) => v.starts_with(p.as_str()),
            Kind::Regex { re, prefix } => v.starts_with(prefix.as_str()) && re.is_match(v),
        }
    }

    /// The values an index must visit to find every match (see [`ValueScan`]).
    pub fn scan(&self) -> ValueScan<'_> {
        match &self.0 {
            Kind::Literal(l) => ValueScan::Exact(vec![l.as_str()]),
            Kind::Set(s) => ValueScan::Exact(s.iter().map(String::as_str).collect()),
            Kind::Prefix(p) => ValueScan::Prefix(p),
            Kind::Regex { prefix, .. } => ValueScan::Prefix(prefix),
        }
    }
}

/// One compiled label matcher, e.g. `gpu=~"0|1"`. Built once per selector and shared by
/// every series it is tested against. Equality looks at name, operator and value only
/// (the compiled form follows from them).
#[derive(Clone)]
pub struct Matcher {
    name: String,
    op: MatchOp,
    value: String,
    pattern: Pattern,
    /// Whether the matcher selects a series that lacks the label (value "").
    matches_empty: bool,
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Self) -> bool {
        self.op == other.op && self.name == other.name && self.value == other.value
    }
}

impl Eq for Matcher {}

impl fmt::Debug for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Matcher {
    /// PromQL's form: `name="value"`, `name=~"regex"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}{:?}", self.name, self.op.as_str(), self.value)
    }
}

const META: &[char] = &['\\', '.', '+', '*', '?', '(', ')', '|', '[', ']', '{', '}', '^', '$'];

fn is_literal(s: &str) -> bool {
    !s.contains(META)
}

impl Matcher {
    /// Builds a matcher, compiling a regex once; a regex that does not compile is
    /// [`Error::InvalidRegex`].
    pub fn new(name: &str, op: MatchOp, value: &str) -> Result<Matcher, Error> {
        let pattern = match op {
            MatchOp::Equal | MatchOp::NotEqual => Pattern(Kind::Literal(value.to_string())),
            MatchOp::Regex | MatchOp::NotRegex => compile(name, value)?,
        };
        Ok(Matcher::with_pattern(name.to_string(), op, value.to_string(), pattern))
    }

    /// `name="value"`, which cannot fail.
    pub fn equal(name: impl Into<String>, value: impl Into<String>) -> Matcher {
        let value = value.into();
        let pattern = Pattern(Kind::Literal(value.clone()));
        Matcher::with_pattern(name.into(), MatchOp::Equal, value, pattern)
    }

    fn with_pattern(name: String, op: MatchOp, value: String, pattern: Pattern) -> Matcher {
        let negated = matches!(op, MatchOp::NotEqual | MatchOp::NotRegex);
        let matches_empty = pattern.matches("") != negated;
        Matcher { name, op, value, pattern, matches_empty }
    }

    #[inline]
    pub fn name(&self) -> &str {
        &self.name
    }

    #[inline]
    pub fn op(&self) -> MatchOp {
        self.op
    }

    /// The value or regex as the user wrote it.
    #[inline]
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Whether a label value (use "" for a missing label) satisfies the matcher.
    #[inline]
    pub fn matches(&self, v: &str) -> bool {
        self.pattern.matches(v) != self.is_negated()
    }

    /// Whether a series without this label is selected.
    #[inline]
    pub fn matches_empty(&self) -> bool {
        self.matches_empty
    }

    /// Whether the operator is `!=` or `!~`: the matcher selects what its
    /// [`Matcher::pattern`] does not match.
    #[inline]
    pub fn is_negated(&self) -> bool {
        matches!(self.op, MatchOp::NotEqual | MatchOp::NotRegex)
    }

    /// The positive predicate, for an index that looks values up by
    /// [`Pattern::scan`] and negates the result itself when [`Matcher::is_negated`].
    #[inline]
    pub fn pattern(&self) -> &Pattern {
        &self.pattern
    }

    /// Whether a label set satisfies this matcher (a missing label counts as "").
    pub fn matches_labels(&self, labels: &[Label]) -> bool {
        let v = labels.iter().find(|l| l.name == self.name).map_or("", |l| l.value.as_str());
        self.matches(v)
    }
}

/// Recognises the fast-path shapes before falling back to a compiled regex.
fn compile(name: &str, value: &str) -> Result<Pattern, Error> {
    // Always compile, so a malformed regex is an error even when a fast path would do.
    let re = goregex::compile_anchored(value).map_err(|source| Error::InvalidRegex {
        name: name.to_string(),
        value: value.to_string(),
        source,
    })?;
    if is_literal(value) {
        return Ok(Pattern(Kind::Literal(value.to_string())));
    }
    if value.contains('|') && value.split('|').all(is_literal) {
        let mut set: Vec<String> = value.split('|').map(str::to_string).collect();
        set.sort();
        set.dedup();
        return Ok(Pattern(Kind::Set(set)));
    }
    if let Some(p) = value.strip_suffix(".*") {
        if is_literal(p) {
            return Ok(Pattern(Kind::Prefix(p.to_string())));
        }
    }
    Ok(Pattern(Kind::Regex { re, prefix: literal_prefix(value) }))
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

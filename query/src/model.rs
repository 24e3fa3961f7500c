//! The data model the engine reads and returns: label sets, samples, series, and the
//! [`Queryable`] trait through which all data enters the engine.

use std::fmt;

/// One label pair.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Label {
    pub name: String,
    pub value: String,
}

/// A label set, always sorted by name with unique names and no empty values.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Labels(Vec<Label>);

impl Labels {
    /// Builds a label set from pairs in any order; empty values are dropped (an empty
    /// value means "label absent" in Prometheus). Later duplicates win.
    pub fn from_pairs<N: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (N, V)>) -> Self {
        let mut v: Vec<Label> = pairs.into_iter().map(|(n, v)| Label { name: n.into(), value: v.into() }).collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        // Keep the last of equal names, then drop empties.
        v.reverse();
        v.dedup_by(|a, b| a.name == b.name);
        v.reverse();
        v.retain(|l| !l.value.is_empty());
        Labels(v)
    }

    /// Wraps labels that the caller guarantees are sorted, unique and non-empty.
    pub fn from_sorted(v: Vec<Label>) -> Self {
        debug_assert!(v.windows(2).all(|w| w[0].name < w[1].name));
        Labels(v)
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.binary_search_by(|l| l.name.as_str().cmp(name)).ok().map(|i| self.0[i].value.as_str())
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Label> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn as_slice(&self) -> &[Label] {
        &self.0
    }

    pub fn into_vec(self) -> Vec<Label> {
        self.0
    }
}

impl fmt::Display for Labels {
    /// Prometheus' text form: `name{a="b", c="d"}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.get(tessera_model::METRIC_NAME).unwrap_or("");
        write!(f, "{name}{{")?;
        let mut first = true;
        for l in self.0.iter().filter(|l| l.name != tessera_model::METRIC_NAME) {
            if !first {
                write!(f, ", ")?;
            }
            first = false;
            write!(f, "{}={:?}", l.name, l.value)?;
        }
        write!(f, "}}")
    }
}

/// One float sample; `t` is milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub t: i64,
    pub v: f64,
}

/// A series as returned by [`Queryable::select`]: samples in strictly increasing time order.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: Labels,
    pub samples: Vec<Sample>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatchOp {
    Equal,
    NotEqual,
    /// Fully anchored regex match.
    Regex,
    /// Fully anchored negative regex match.
    NotRegex,
}

/// A label matcher with Prometheus semantics: a matcher that matches the empty string
/// also selects series that do not have the label at all.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Matcher {
    pub name: String,
    pub op: MatchOp,
    pub value: String,
}

/// The only way data enters the engine. Implemented by the local shards (server) and by
/// the in-memory store the promqltest runner uses.
pub trait Queryable: Send + Sync {
    /// Every series matching all `matchers`, with its samples `mint <= t <= maxt`
    /// (milliseconds, both inclusive) in time order. Series with no sample in the range
    /// may be omitted. Stale markers (NaN with bits `0x7ff0000000000002`) are returned
    /// as stored; the engine interprets them.
    fn select(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<Series>, crate::QueryError>;

    /// `select` for an evaluation that must stop at `ctl.deadline` or once `ctl.cancel` is
    /// set; the engine calls this one. Sources whose reads can take long (storage scans)
    /// pass the controls down and stop with a timeout or canceled error; the default
    /// ignores them (the engine still checks them between selects).
    fn select_controlled(
        &self,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        ctl: &crate::QueryOptions,
    ) -> Result<Vec<Series>, crate::QueryError> {
        let _ = ctl;
        self.select(matchers, mint, maxt)
    }
}

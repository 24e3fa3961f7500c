//! The pushdown planner: which nodes of a query a sharded source evaluates shard by
//! shard ([`crate::Fragment`]s), and how their results merge.
//!
//! Every series lives in exactly one shard (sharded by a hash of its full label set).
//! The planner walks the tree from the root and marks the **highest** node that can run
//! shard-locally; it does not descend below a marked node, and descends into the
//! children (and aggregation parameters) of any node it cannot push, so whatever cannot
//! be pushed gets its inputs pushed instead. The rules:
//!
//! - **Shard-local (CONCAT: concatenate per-shard series, then sort by labels):**
//!   a vector selector; a range function (`rate`, `increase`, `*_over_time`, `deriv`,
//!   `predict_linear`, ... every one but `absent_over_time`) over a matrix selector or
//!   over a subquery whose inner expression is shard-local; math and date functions,
//!   `round`/`clamp*`, `timestamp` over a shard-local vector; unary minus; and a binary
//!   operator between a shard-local vector and a data-independent scalar (literal,
//!   `time()`, ...: no selector inside), comparisons and `bool` included. Every scalar
//!   argument must be data-independent too, since the shard evaluates it itself.
//! - **vector ⊕ vector** (arithmetic, comparisons, `and`, `unless`) is shard-local only
//!   when both sides provably live in the same shard: both are shard-local, both select
//!   exactly one metric name by `__name__` equality (the same name on both sides), and
//!   matching is the default (no `on`/`ignoring`/`group_*`/`fill*`). Then a matched pair
//!   has the same full label set, so it is one series in one shard (`x - x offset 1d`).
//!   Only in instant queries and outside subqueries: over many steps the operator
//!   orders its output by first appearance, not by labels, and the merge could not
//!   restore that order (which `limitk`, `topk` ties and instant results show).
//!   Otherwise each side is pushed on its own and the operator runs at the querier.
//! - **Aggregations over a shard-local input (PARTIAL):** `sum`, `count`, `group`, `min`,
//!   `max`, `avg` return each group's running state per step (Kahan sum and
//!   compensation, count, min/max, avg's sum or incremental mean, the histogram count
//!   and name-drop flag); the querier merges them in shard order and finishes each step
//!   with the single node's code (mix rule, annotations, `result`). `quantile` returns
//!   every value of each group and step (a quantile needs them all); the querier joins
//!   them and finishes each step with its parameter, which it evaluates itself (the
//!   shards never see it). `topk`/`bottomk`
//!   return each shard's top k per group and step, and the querier runs the same
//!   `topk` over the candidates in label order (its k is evaluated at the querier and
//!   shipped per step, so `topk(scalar(x), ...)` works). `count_values` returns
//!   per-shard counts; the querier adds them.
//! - **Never pushed (inputs pushed instead):** `stddev`, `stdvar`, `limitk`,
//!   `limit_ratio`, label functions, `histogram_quantile`/`_fraction` (buckets are
//!   separate series), `absent*`, `scalar`, `vector`, `sort*`, any other vector ⊕ vector,
//!   a top-level range vector, and anything whose scalar argument reads data. `or`
//!   runs at the querier over its pushed sides (its output order, left then the right's
//!   unmatched series, is not a label order the merge could restore).
//!
//! Exactness: CONCAT, `count`, `group`, `min`, `max`, `quantile` (it sorts the joined
//! values), `count_values`, `topk` and `bottomk` give the single node's values. `sum` and `avg` add per-shard compensated sums
//! in shard order instead of one sequence, which agrees with the single node to the
//! last bits (the differential tests allow a relative 1e-9).

use std::collections::HashMap;

use promql_parser::label::MatchOp;
use promql_parser::parser::value::ValueType;
use promql_parser::parser::{Expr, VectorMatchCardinality, VectorSelector};

use crate::fragment::FragmentMode;
use tessera_model::METRIC_NAME;

/// A node the planner pushed: its path from the root and how it merges.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pushed {
    pub path: Vec<u32>,
    pub mode: FragmentMode,
}

/// The children of `e` in the fixed order fragment paths use: a paren's or unary's
/// operand; a binary's left then right side; an aggregation's input then its parameter;
/// a call's arguments; a subquery's inner expression. Selectors and literals have none.
pub fn children(e: &Expr) -> Vec<&Expr> {
    match e {
        Expr::Paren(p) => vec![&p.expr],
        Expr::Unary(u) => vec![&u.expr],
        Expr::Binary(b) => vec![&b.lhs, &b.rhs],
        Expr::Aggregate(a) => {
            let mut v: Vec<&Expr> = vec![&a.expr];
            if let Some(p) = &a.param {
                v.push(p);
            }
            v
        }
        Expr::Call(c) => c.args.args.iter().map(|a| a.as_ref()).collect(),
        Expr::Subquery(s) => vec![&s.expr],
        Expr::VectorSelector(_)
        | Expr::MatrixSelector(_)
        | Expr::NumberLiteral(_)
        | Expr::StringLiteral(_)
        | Expr::Extension(_) => Vec::new(),
    }
}

/// The node at `path` below `root`, if the path is valid.
pub fn node_at<'a>(root: &'a Expr, path: &[u32]) -> Option<&'a Expr> {
    let mut e = root;
    for &i in path {
        e = *children(e).get(i as usize)?;
    }
    Some(e)
}

/// The address key of a node (the evaluator walks the same tree, so it finds a pushed
/// node by address).
pub(crate) fn key(e: &Expr) -> usize {
    e as *const Expr as usize
}

/// The highest pushable nodes of `root`, keyed by address. `instant` says the query is
/// an instant query: only then is a vector ⊕ vector operation outside subqueries
/// evaluated on one step, where its output order is its left side's label order.
pub(crate) fn plan(root: &Expr, instant: bool) -> HashMap<usize, Pushed> {
    let mut out = HashMap::new();
    walk(root, instant, &mut Vec::new(), &mut out);
    out
}

fn walk(e: &Expr, vector_matching: bool, path: &mut Vec<u32>, out: &mut HashMap<usize, Pushed>) {
    if let Some(mode) = pushable(e, vector_matching) {
        out.insert(key(e), Pushed { path: path.clone(), mode });
        return;
    }
    // Below a subquery every node is evaluated on the subquery's (multi-step) grid.
    let vector_matching = vector_matching && !matches!(e, Expr::Subquery(_));
    for (i, c) in children(e).into_iter().enumerate() {
        path.push(i as u32);
        walk(c, vector_matching, path, out);
        path.pop();
    }
}

/// Aggregations that merge as partial states or per-shard candidates.
const PARTIAL_AGGREGATIONS: &[&str] =
    &["sum", "count", "group", "min", "max", "avg", "quantile", "topk", "bottomk", "count_values"];

/// How `e` would run on the shards, if it can; `vm`: whether vector ⊕ vector operations
/// may be pushed (see [`plan`]).
pub(crate) fn pushable(e: &Expr, vm: bool) -> Option<FragmentMode> {
    match e {
        // A paren is pushed through its content (the evaluator reaches it next).
        Expr::Paren(_) => None,
        Expr::Aggregate(a) => {
            let op = a.op.to_string();
            (PARTIAL_AGGREGATIONS.contains(&op.as_str()) && shard_local(&a.expr, vm)).then_some(FragmentMode::Partial)
        }
        _ => shard_local(e, vm).then_some(FragmentMode::Concat),
    }
}

/// Range functions that are not per series.
const NOT_PER_SERIES_RANGE: &[&str] = &["absent_over_time"];

/// Per-sample functions over one vector argument, with data-independent scalar arguments.
const PER_SAMPLE: &[&str] = &["round", "clamp", "clamp_min", "clamp_max", "timestamp"];

/// Date functions: per sample when given a vector.
const DATE_FNS: &[&str] =
    &["day_of_month", "day_of_week", "day_of_year", "days_in_month", "hour", "minute", "month", "year"];

/// Whether evaluating `e` per shard and concatenating gives the single node's instant
/// vector: every output series derives from input series of one shard only, and the
/// single node's order of them is label order (which the merge restores). `vm`: whether
/// a vector ⊕ vector operation may be part of it (one-step grids only: over many steps
/// its output is ordered by first appearance, which the merge cannot restore).
pub(crate) fn shard_local(e: &Expr, vm: bool) -> bool {
    match e {
        Expr::VectorSelector(_) => true,
        Expr::Paren(p) => shard_local(&p.expr, vm),
        Expr::Unary(u) => shard_local(&u.expr, vm),
        Expr::Call(c) => {
            let name = c.func.name;
            let args: Vec<&Expr> = c.args.args.iter().map(|a| a.as_ref()).collect();
            if crate::functions::range::is_range_fn(name) && !NOT_PER_SERIES_RANGE.contains(&name) {
                // Exactly one range argument (the matrix selector or subquery); the
                // others must be scalars the shard can compute itself.
                let mut ranges = 0;
                for a in &args {
                    match unwrap_parens(a) {
                        Expr::MatrixSelector(_) => ranges += 1,
                        Expr::Subquery(sq) if shard_local(&sq.expr, false) => ranges += 1,
                        other if data_independent_scalar(other) => {}
                        _ => return false,
                    }
                }
                return ranges == 1;
            }
            let per_sample = PER_SAMPLE.contains(&name)
                || (DATE_FNS.contains(&name) && !args.is_empty())
                || crate::functions::math::is_scalar_fn(name) && !DATE_FNS.contains(&name);
            per_sample
                && !args.is_empty()
                && shard_local(args[0], vm)
                && args[1..].iter().all(|a| data_independent_scalar(a))
        }
        Expr::Binary(b) => {
            let (l, r) = (b.lhs.value_type(), b.rhs.value_type());
            match (l, r) {
                (ValueType::Vector, ValueType::Scalar) => shard_local(&b.lhs, vm) && data_independent_scalar(&b.rhs),
                (ValueType::Scalar, ValueType::Vector) => data_independent_scalar(&b.lhs) && shard_local(&b.rhs, vm),
                (ValueType::Vector, ValueType::Vector) => {
                    let default_matching = b.modifier.as_ref().is_none_or(|m| {
                        m.matching.is_none()
                            && matches!(m.card, VectorMatchCardinality::OneToOne | VectorMatchCardinality::ManyToMany)
                            && m.fill_values.lhs.is_none()
                            && m.fill_values.rhs.is_none()
                    });
                    // `or` is left to the querier: its output order (left side, then
                    // the right side's unmatched series) cannot be rebuilt from shard
                    // outputs, and concatenating its inputs costs as much.
                    vm && default_matching
                        && b.op.to_string() != "or"
                        && shard_local(&b.lhs, vm)
                        && shard_local(&b.rhs, vm)
                        && matches!((single_metric(&b.lhs), single_metric(&b.rhs)), (Some(a), Some(c)) if a == c)
                }
                _ => false,
            }
        }
        Expr::Aggregate(_)
        | Expr::MatrixSelector(_)
        | Expr::Subquery(_)
        | Expr::NumberLiteral(_)
        | Expr::StringLiteral(_)
        | Expr::Extension(_) => false,
    }
}

/// The one metric name every series of a shard-local `e` carries (in its labels, even
/// when the name is to be dropped), when the selectors prove it: `__name__` equality
/// and no `or` alternatives.
fn single_metric(e: &Expr) -> Option<&str> {
    match e {
        Expr::VectorSelector(vs) => selector_metric(vs),
        Expr::MatrixSelector(ms) => selector_metric(&ms.vs),
        Expr::Paren(p) => single_metric(&p.expr),
        Expr::Unary(u) => single_metric(&u.expr),
        Expr::Subquery(sq) => single_metric(&sq.expr),
        Expr::Call(c) => {
            // The argument that carries the series (the range or vector argument).
            let mut names = c.args.args.iter().filter(|a| !data_independent_scalar(a)).map(|a| single_metric(a));
            let first = names.next()??;
            names.next().is_none().then_some(first)
        }
        Expr::Binary(b) => match (b.lhs.value_type(), b.rhs.value_type()) {
            (ValueType::Vector, ValueType::Scalar) => single_metric(&b.lhs),
            (ValueType::Scalar, ValueType::Vector) => single_metric(&b.rhs),
            (ValueType::Vector, ValueType::Vector) => {
                let l = single_metric(&b.lhs)?;
                (single_metric(&b.rhs)? == l).then_some(l)
            }
            _ => None,
        },
        _ => None,
    }
}

fn selector_metric(vs: &VectorSelector) -> Option<&str> {
    if !vs.matchers.or_matchers.is_empty() {
        return None;
    }
    let eq =
        vs.matchers.matchers.iter().find(|m| m.name == METRIC_NAME && m.op == MatchOp::Equal).map(|m| m.value.as_str());
    match (vs.name.as_deref(), eq) {
        // `x{__name__="y"}` selects nothing unless x == y; either way one name.
        (Some(n), _) | (None, Some(n)) => Some(n),
        (None, None) => None,
    }
}

/// A scalar expression that reads no data (literals, `time()`, `pi()`, arithmetic of
/// those): a shard computes the same values as the querier. String literals count too
/// (e.g. a function's text argument).
pub(crate) fn data_independent_scalar(e: &Expr) -> bool {
    matches!(e.value_type(), ValueType::Scalar | ValueType::String) && !reads_data(e)
}

fn reads_data(e: &Expr) -> bool {
    matches!(e, Expr::VectorSelector(_) | Expr::MatrixSelector(_)) || children(e).into_iter().any(reads_data)
}

fn unwrap_parens(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => unwrap_parens(&p.expr),
        other => other,
    }
}

#[cfg(test)]
mod tests;

//! Select hints: for every selector of a query, the function or aggregation it feeds and
//! the grouping of the aggregation above it, found once before evaluation by walking the
//! tree as Prometheus' `populateSeries` does (`extractFuncFromPath`,
//! `extractGroupsFromPath`). The evaluator adds the time range, step and range of each
//! select and hands the result to the [`Queryable`](crate::Queryable).

use std::collections::HashMap;

use promql_parser::parser::{Expr, LabelModifier, VectorSelector};

/// What the tree says about one selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SelectorContext {
    /// The nearest enclosing call or aggregation, unless a binary operator comes first.
    pub func: Option<String>,
    /// The nearest enclosing aggregation's grouping labels and whether they are `by`.
    pub grouping: Vec<String>,
    pub by: bool,
}

/// The context of every selector of `e`, keyed by the selector's address in the tree
/// (the evaluator walks the same tree, so it finds its selector by address).
pub(crate) fn collect(e: &Expr) -> HashMap<usize, SelectorContext> {
    let mut out = HashMap::new();
    walk(e, &mut Vec::new(), &mut out);
    out
}

/// The address key of a selector.
pub(crate) fn key(vs: &VectorSelector) -> usize {
    vs as *const VectorSelector as usize
}

/// One step on the way from the root to a selector.
enum Step<'a> {
    Call(&'static str),
    Aggregate { op: String, modifier: Option<&'a LabelModifier> },
    Binary,
}

fn walk<'a>(e: &'a Expr, path: &mut Vec<Step<'a>>, out: &mut HashMap<usize, SelectorContext>) {
    match e {
        Expr::VectorSelector(vs) => {
            out.insert(key(vs), context(path));
        }
        Expr::MatrixSelector(ms) => {
            out.insert(key(&ms.vs), context(path));
        }
        Expr::Aggregate(a) => {
            path.push(Step::Aggregate { op: a.op.to_string(), modifier: a.modifier.as_ref() });
            walk(&a.expr, path, out);
            if let Some(p) = &a.param {
                walk(p, path, out);
            }
            path.pop();
        }
        Expr::Call(c) => {
            path.push(Step::Call(c.func.name));
            for a in &c.args.args {
                walk(a, path, out);
            }
            path.pop();
        }
        Expr::Binary(b) => {
            path.push(Step::Binary);
            walk(&b.lhs, path, out);
            walk(&b.rhs, path, out);
            path.pop();
        }
        Expr::Unary(u) => walk(&u.expr, path, out),
        Expr::Paren(p) => walk(&p.expr, path, out),
        Expr::Subquery(s) => walk(&s.expr, path, out),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

fn context(path: &[Step<'_>]) -> SelectorContext {
    // The nearest call or aggregation names the function; a binary operator nearer
    // than either means the selector feeds an operator, not a function.
    // Only calls, aggregations and binary operators are on the path (the other nodes
    // are transparent), so the nearest of them is the last step.
    let func = path.last().and_then(|s| match s {
        Step::Call(name) => Some((*name).to_owned()),
        Step::Aggregate { op, .. } => Some(op.clone()),
        Step::Binary => None,
    });
    // The nearest aggregation, whatever lies between, gives the grouping.
    let (by, grouping) = path
        .iter()
        .rev()
        .find_map(|s| match s {
            Step::Aggregate { modifier, .. } => Some(match modifier {
                Some(LabelModifier::Include(l)) => (true, l.labels.clone()),
                Some(LabelModifier::Exclude(l)) => (false, l.labels.clone()),
                None => (false, Vec::new()),
            }),
            _ => None,
        })
        .unwrap_or((false, Vec::new()));
    SelectorContext { func, grouping, by }
}

#[cfg(test)]
mod tests;

//! The selects a query will make, found before evaluation (Prometheus' `populateSeries`
//! pre-pass), so a data source can start fetching them all at once.
//!
//! The walk mirrors evaluation node by node: the same step-invariance rule, the same
//! subquery grids ([`Evaluator::subquery_grid`]), the same selector windows
//! ([`Evaluator::window`]) and hints ([`Evaluator::hints`]), so a planned select is
//! exactly the call evaluation makes later (the promqltest suite checks this for every
//! upstream eval). Evaluation may make fewer calls when it stops early on an error.

use promql_parser::parser::{Expr, MatrixSelector, VectorSelector};

use super::eval::{dur_ms, is_literal, step_invariant, Evaluator};
use crate::model::PlannedSelect;

impl Evaluator<'_> {
    /// Appends the selects evaluating `e` on this grid makes (as [`Evaluator::eval`]).
    pub(crate) fn plan(&self, e: &Expr, out: &mut Vec<PlannedSelect>) {
        if self.n_steps() > 1 && !is_literal(e) && step_invariant(e) {
            Evaluator::new(self.q, self.ctx, self.start, self.start, self.step).plan_node(e, out);
        } else {
            self.plan_node(e, out);
        }
    }

    /// As [`Evaluator::eval_node`].
    fn plan_node(&self, e: &Expr, out: &mut Vec<PlannedSelect>) {
        match e {
            Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
            Expr::Paren(p) => self.plan(&p.expr, out),
            Expr::Unary(u) => self.plan(&u.expr, out),
            Expr::VectorSelector(vs) => self.plan_vector_selector(vs, out),
            Expr::MatrixSelector(ms) => self.plan_matrix_selector(ms, out),
            Expr::Subquery(_) => self.plan_range_arg(e, out),
            Expr::Binary(b) => {
                self.plan(&b.lhs, out);
                self.plan(&b.rhs, out);
            }
            Expr::Aggregate(a) => {
                if let Some(p) = &a.param {
                    self.plan(p, out);
                }
                self.plan(&a.expr, out);
            }
            Expr::Call(c) => {
                // A call evaluates a range-vector argument directly (`eval_range_arg`),
                // `timestamp` its selector argument directly, and every other argument
                // through `eval`.
                for a in &c.args.args {
                    match unwrap_parens(a) {
                        Expr::MatrixSelector(_) | Expr::Subquery(_) => self.plan_range_arg(a, out),
                        Expr::VectorSelector(vs) if c.func.name == "timestamp" => self.plan_vector_selector(vs, out),
                        _ => self.plan(a, out),
                    }
                }
            }
        }
    }

    /// As [`Evaluator::eval_range_arg`].
    fn plan_range_arg(&self, e: &Expr, out: &mut Vec<PlannedSelect>) {
        match e {
            Expr::MatrixSelector(ms) => self.plan_matrix_selector(ms, out),
            Expr::Paren(p) => self.plan_range_arg(&p.expr, out),
            Expr::Subquery(sq) => {
                let g = self.subquery_grid(sq);
                if g.start <= g.end {
                    Evaluator::new(self.q, self.ctx, g.start, g.end, g.step).plan(&sq.expr, out);
                }
            }
            _ => {}
        }
    }

    /// As [`Evaluator::eval_vector_selector`].
    fn plan_vector_selector(&self, vs: &VectorSelector, out: &mut Vec<PlannedSelect>) {
        let (_, _, rmin, rmax) = self.window(vs);
        self.plan_select(vs, rmin - self.ctx.lookback + 1, rmax, 0, out);
    }

    /// As [`Evaluator::eval_matrix_selector`].
    fn plan_matrix_selector(&self, ms: &MatrixSelector, out: &mut Vec<PlannedSelect>) {
        let (_, _, rmin, rmax) = self.window(&ms.vs);
        let range = dur_ms(&ms.range);
        self.plan_select(&ms.vs, rmin - range + 1, rmax, range, out);
    }

    /// As [`Evaluator::select`]: one select per `or` alternative. A selector whose
    /// matchers do not compile is left out; its evaluation reports the error.
    fn plan_select(&self, vs: &VectorSelector, mint: i64, maxt: i64, range: i64, out: &mut Vec<PlannedSelect>) {
        let hints = self.hints(vs, mint, maxt, range);
        let Ok(sets) = self.matchers_of(vs) else { return };
        for matchers in sets {
            out.push(PlannedSelect { matchers, hints: hints.clone() });
        }
    }
}

fn unwrap_parens(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => unwrap_parens(&p.expr),
        other => other,
    }
}

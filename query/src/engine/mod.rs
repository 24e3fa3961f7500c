//! The PromQL evaluator: parses a query with `promql-parser` and evaluates the AST over
//! a [`Queryable`] with Prometheus 3.x semantics.
//!
//! Every expression is evaluated for all steps of the query at once (as Prometheus'
//! `rangeEval` does): a selector is read once for the whole range, and instant-vector
//! values are carried as series of points at the step timestamps. An instant query is a
//! range query with one step.

mod aggregate;
mod binary;
mod bounds;
mod call;
mod eval;
mod fragments;
mod hints;
mod labels_util;
pub mod limits;
mod plan;
mod pushdown;
mod selector;
mod stream;
mod types;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use crate::error::{ErrorKind, QueryError};
use crate::functions::range::rate::RateTables;
use crate::model::{Queryable, Series};
use crate::value::{QueryOutput, Value, VectorElem};

use eval::{Ctx, Evaluator};
use types::Val;

pub use limits::TextLimits;
pub use pushdown::{children, node_at};
pub use selector::selector_matchers;

/// Engine-wide limits and defaults.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// How far back (ms) an instant selector looks for the latest sample. Default 300_000 (5m).
    pub lookback_delta_ms: i64,
    /// The step (ms) of a subquery written without one (`x[1h:]`): Prometheus takes its
    /// `global.evaluation_interval`. Default 60_000 (1m, Prometheus' default).
    pub default_subquery_step_ms: i64,
    /// Most samples held in memory at once by one query: points of intermediate
    /// vectors, decoded samples of the series being read (all selected series for a
    /// selector evaluated whole, one series for a streamed one) and aggregation states
    /// (one per group and step). Samples scanned and dropped do not count. A pushed-down
    /// fragment may hold its share (see `Fragment::max_samples`). Default 50_000_000.
    pub max_samples: usize,
    /// Most points per series a range query may return. Default 11_000.
    pub max_points_per_series: usize,
    /// Length and nesting bounds of the query text, checked before parsing
    /// (see [`limits`]). Default 256 KiB and 256 levels.
    pub text: TextLimits,
    /// Evaluate the shapes dashboards use series by series from a stream
    /// ([`Queryable::select_stream`], see `engine/stream.rs`) instead of materialising
    /// every selected sample first. Default true; false keeps every query on the
    /// materialising path (the differential tests compare the two).
    pub streaming: bool,
}

/// What one evaluation cost (Prometheus reports the same as `stats.samples`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueryStats {
    /// The most samples held at once, as counted against `max_samples` (Prometheus'
    /// `peakSamples`).
    pub peak_samples: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            lookback_delta_ms: 300_000,
            default_subquery_step_ms: DEFAULT_SUBQUERY_STEP_MS,
            max_samples: 50_000_000,
            max_points_per_series: 11_000,
            text: TextLimits::default(),
            streaming: true,
        }
    }
}

/// Per-query controls: a deadline and a cancellation flag, both checked periodically
/// (per step of a range window scan and per series).
#[derive(Debug, Clone, Default)]
pub struct QueryOptions {
    pub deadline: Option<Instant>,
    pub cancel: Option<Arc<AtomicBool>>,
    /// `rate`/`increase` tables shared by the evaluations that get these options (the
    /// fragments [`crate::ShardEvaluator::eval_all`] runs side by side); `None`: each
    /// evaluation keeps its own.
    pub rate_tables: Option<Arc<RateTables>>,
}

/// The PromQL engine. Stateless between queries; cheap to share.
#[derive(Debug, Clone, Default)]
pub struct Engine {
    opts: EngineOptions,
}

/// The step of a subquery without an explicit resolution (`x[5m:]`) unless
/// [`EngineOptions::default_subquery_step_ms`] says otherwise: Prometheus' default
/// global evaluation interval, 1 minute.
pub const DEFAULT_SUBQUERY_STEP_MS: i64 = 60_000;

impl Engine {
    pub fn new(opts: EngineOptions) -> Engine {
        Engine { opts }
    }

    pub fn options(&self) -> &EngineOptions {
        &self.opts
    }

    /// Evaluates `expr` at `time_ms`. The result is a scalar, string, vector, or (for a
    /// range selector or subquery at the top) a matrix of raw samples.
    pub fn instant_query(
        &self,
        q: &dyn Queryable,
        expr: &str,
        time_ms: i64,
        opts: &QueryOptions,
    ) -> Result<QueryOutput, QueryError> {
        self.instant_query_stats(q, expr, time_ms, opts).map(|(out, _)| out)
    }

    /// [`Engine::instant_query`] with what the evaluation cost.
    pub fn instant_query_stats(
        &self,
        q: &dyn Queryable,
        expr: &str,
        time_ms: i64,
        opts: &QueryOptions,
    ) -> Result<(QueryOutput, QueryStats), QueryError> {
        bounds::check_time("time", time_ms)?;
        let ast = parse_with_limits(expr, &self.opts.text)?;
        let mut ctx = Ctx::new(&self.opts, opts, expr, time_ms, time_ms);
        ctx.selectors = hints::collect(&ast);
        if q.shard_evaluator().is_some() {
            ctx.pushdown = pushdown::plan(&ast, true);
        }
        let mut ev = Evaluator::new(q, &ctx, time_ms, time_ms, 1);
        announce_selects(&ev, &ast, opts);
        let val = ev.eval(&ast)?;
        let value = match val {
            Val::Scalar(v) => Value::Scalar { t: time_ms, v: v[0] },
            Val::Str(s) => Value::String { t: time_ms, s },
            Val::Vector(series) => {
                let series = types::finalize_names(series)?;
                let mut out = Vec::with_capacity(series.len());
                for s in series {
                    if let Some(&(_, v)) = s.pts.first() {
                        out.push(VectorElem { labels: s.labels, t: time_ms, v });
                    }
                }
                Value::Vector(out)
            }
            Val::Range(series) => Value::Matrix(into_matrix(series)?),
        };
        let stats = QueryStats { peak_samples: ctx.peak_samples() };
        Ok((ctx.into_output(value), stats))
    }

    /// Evaluates `expr` at every `step_ms` from `start_ms` to `end_ms` (inclusive). The
    /// result is a matrix with series sorted by labels.
    pub fn range_query(
        &self,
        q: &dyn Queryable,
        expr: &str,
        start_ms: i64,
        end_ms: i64,
        step_ms: i64,
        opts: &QueryOptions,
    ) -> Result<QueryOutput, QueryError> {
        self.range_query_stats(q, expr, start_ms, end_ms, step_ms, opts).map(|(out, _)| out)
    }

    /// [`Engine::range_query`] with what the evaluation cost.
    pub fn range_query_stats(
        &self,
        q: &dyn Queryable,
        expr: &str,
        start_ms: i64,
        end_ms: i64,
        step_ms: i64,
        opts: &QueryOptions,
    ) -> Result<(QueryOutput, QueryStats), QueryError> {
        if step_ms <= 0 {
            return Err(QueryError::bad_data(
                "zero or negative query resolution step widths are not accepted. Try a positive integer",
            ));
        }
        if end_ms < start_ms {
            return Err(QueryError::bad_data("end timestamp must not be before start time"));
        }
        bounds::check_time("start", start_ms)?;
        bounds::check_time("end", end_ms)?;
        bounds::check_time("step", step_ms)?;
        let points = (end_ms - start_ms) / step_ms + 1;
        if points as u128 > self.opts.max_points_per_series as u128 {
            return Err(QueryError::bad_data(format!(
                "exceeded maximum resolution of {} points per timeseries. Try decreasing the query resolution (?step=XX)",
                self.opts.max_points_per_series
            )));
        }
        let ast = parse_with_limits(expr, &self.opts.text)?;
        match ast.value_type() {
            promql_parser::parser::value::ValueType::Scalar | promql_parser::parser::value::ValueType::Vector => {}
            other => {
                return Err(QueryError::bad_data(format!(
                    "invalid expression type \"{}\" for range query, must be Scalar or instant Vector",
                    value_type_name(other)
                )))
            }
        }
        let mut ctx = Ctx::new(&self.opts, opts, expr, start_ms, end_ms);
        ctx.query_step = step_ms;
        ctx.selectors = hints::collect(&ast);
        if q.shard_evaluator().is_some() {
            ctx.pushdown = pushdown::plan(&ast, false);
        }
        let mut ev = Evaluator::new(q, &ctx, start_ms, end_ms, step_ms);
        announce_selects(&ev, &ast, opts);
        let val = ev.eval(&ast)?;
        let value = match val {
            Val::Scalar(v) => {
                let samples = v
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| tessera_model::Sample { t: start_ms + i as i64 * step_ms, v })
                    .collect();
                Value::Matrix(vec![Series { labels: Default::default(), samples }])
            }
            Val::Vector(series) | Val::Range(series) => Value::Matrix(into_matrix(series)?),
            Val::Str(_) => {
                return Err(QueryError::bad_data(
                    "invalid expression type \"string\" for range query, must be Scalar or instant Vector",
                ))
            }
        };
        let stats = QueryStats { peak_samples: ctx.peak_samples() };
        Ok((ctx.into_output(value), stats))
    }
}

/// Tells the data source every select the evaluation of `ast` will make (see
/// [`Queryable::prepare`]).
fn announce_selects(ev: &Evaluator<'_>, ast: &promql_parser::parser::Expr, opts: &QueryOptions) {
    let mut selects = Vec::new();
    ev.plan(ast, &mut selects);
    if !selects.is_empty() {
        ev.q.prepare(&selects, opts);
    }
}

fn value_type_name(t: promql_parser::parser::value::ValueType) -> &'static str {
    use promql_parser::parser::value::ValueType;
    match t {
        ValueType::Vector => "vector",
        ValueType::Scalar => "scalar",
        ValueType::Matrix => "range vector",
        ValueType::String => "string",
    }
}

/// Final names, empty series dropped, sorted by labels: a matrix as the API returns it.
fn into_matrix(series: Vec<types::StepSeries>) -> Result<Vec<Series>, QueryError> {
    let mut out: Vec<Series> = types::finalize_names(series)?
        .into_iter()
        .filter(|s| !s.pts.is_empty())
        .map(|s| Series { labels: s.labels, samples: types::to_samples(s.pts) })
        .collect();
    out.sort_by(|a, b| a.labels.cmp(&b.labels));
    Ok(out)
}

/// Parses a query under the default [`TextLimits`]; parser errors are `bad_data`.
pub fn parse(expr: &str) -> Result<promql_parser::parser::Expr, QueryError> {
    parse_with_limits(expr, &TextLimits::default())
}

/// Parses a query after checking its text against `limits`, so that neither the parser
/// nor anything that walks (or drops) the tree can run out of stack.
pub fn parse_with_limits(expr: &str, limits: &TextLimits) -> Result<promql_parser::parser::Expr, QueryError> {
    limits::check_text(expr, limits)?;
    let ast = promql_parser::parser::parse(expr)
        .map_err(|e| QueryError::new(ErrorKind::BadData, format!("parse error: {e}")))?;
    bounds::check_expr(&ast)?;
    Ok(ast)
}

#[cfg(test)]
mod tests;

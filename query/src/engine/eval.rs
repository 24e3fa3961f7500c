//! The evaluator core: context (limits, cancellation, annotations), the step grid, and
//! the dispatch over AST nodes.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use promql_parser::parser::{AtModifier, Expr, Offset};

use super::types::{StepSeries, Val};
use super::{EngineOptions, QueryOptions, DEFAULT_SUBQUERY_STEP_MS};
use crate::error::{ErrorKind, QueryError};
use crate::functions::range::rate::{RateTables, RateWindowCache};
use crate::model::Queryable;
use crate::value::{QueryOutput, Value};
use tessera_model::Sample;

/// Annotations (warnings or infos) in the order raised, each once. A query raises one
/// per series in some cases (`rate` over a gauge names the metric), so repeats are
/// found in a set, not by comparing with every earlier message.
#[derive(Debug, Default)]
struct Notes {
    list: Vec<String>,
    seen: HashSet<String>,
}

impl Notes {
    fn add(&mut self, msg: String) {
        if !self.seen.contains(&msg) {
            self.seen.insert(msg.clone());
            self.list.push(msg);
        }
    }
}

/// State shared by every evaluator of one query (subqueries get their own
/// [`Evaluator`] but the same context).
pub(crate) struct Ctx {
    pub lookback: i64,
    /// The step of a subquery written without one.
    pub subquery_step: i64,
    max_samples: usize,
    deadline: Option<std::time::Instant>,
    cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// The query's shared `rate` tables, if its evaluators share them.
    pub rate_tables: Option<std::sync::Arc<RateTables>>,
    /// Samples currently held by live intermediate values (Prometheus' `currentSamples`).
    cur_samples: Cell<usize>,
    /// The most samples held at once so far: the largest count checked against the limit.
    peak_samples: Cell<usize>,
    /// Whether the shapes `engine/stream.rs` knows are evaluated series by series.
    pub streaming: bool,
    /// Calls to `check_interrupt` since the clock was last read; reading the clock per
    /// sample would cost more than the work it guards.
    ticks: Cell<u32>,
    warnings: RefCell<Notes>,
    infos: RefCell<Notes>,
    /// Metric names already given the "might not be a counter" info: `rate` over
    /// 30,000 gauges would otherwise format and look up the same message per series.
    non_counters: RefCell<HashSet<String>>,
    pub query: String,
    /// The top-level query's start and end, which `@ start()` / `@ end()` refer to
    /// even inside subqueries.
    pub query_start: i64,
    pub query_end: i64,
    /// The top-level step (ms); 0 for instant queries.
    pub query_step: i64,
    /// What the tree says about each selector (function, grouping), for select hints.
    pub selectors: std::collections::HashMap<usize, super::hints::SelectorContext>,
    /// Each selector's compiled matcher sets (same key as `selectors`), compiled on first
    /// use so the planning pass and the evaluation share them.
    pub matchers: RefCell<std::collections::HashMap<usize, Vec<Vec<tessera_model::Matcher>>>>,
    /// The nodes the planner pushes to the shards, by address (empty unless the source
    /// is a [`crate::ShardEvaluator`]).
    pub pushdown: std::collections::HashMap<usize, super::pushdown::Pushed>,
}

impl Ctx {
    pub fn new(eo: &EngineOptions, qo: &QueryOptions, query: &str, start: i64, end: i64) -> Self {
        Ctx {
            lookback: if eo.lookback_delta_ms > 0 { eo.lookback_delta_ms } else { 300_000 },
            subquery_step: if eo.default_subquery_step_ms > 0 {
                eo.default_subquery_step_ms
            } else {
                DEFAULT_SUBQUERY_STEP_MS
            },
            max_samples: eo.max_samples,
            deadline: qo.deadline,
            cancel: qo.cancel.clone(),
            rate_tables: qo.rate_tables.clone(),
            cur_samples: Cell::new(0),
            peak_samples: Cell::new(0),
            streaming: eo.streaming,
            ticks: Cell::new(0),
            warnings: RefCell::default(),
            infos: RefCell::default(),
            non_counters: RefCell::default(),
            query: query.to_string(),
            query_start: start,
            query_end: end,
            query_step: 0,
            selectors: std::collections::HashMap::new(),
            matchers: RefCell::new(std::collections::HashMap::new()),
            pushdown: std::collections::HashMap::new(),
        }
    }

    /// Fails when the query was canceled or ran past its deadline. Cheap enough to call
    /// per series or per step: the clock is read every 64th call.
    pub fn check_interrupt(&self) -> Result<(), QueryError> {
        let n = self.ticks.get().wrapping_add(1);
        self.ticks.set(n);
        if !n.is_multiple_of(64) {
            return Ok(());
        }
        self.check_interrupt_now()
    }

    pub fn check_interrupt_now(&self) -> Result<(), QueryError> {
        if let Some(c) = &self.cancel {
            if c.load(Ordering::Relaxed) {
                return Err(QueryError::new(ErrorKind::Canceled, "query was canceled in expression evaluation"));
            }
        }
        if let Some(d) = self.deadline {
            if std::time::Instant::now() >= d {
                return Err(QueryError::new(ErrorKind::Timeout, "query timed out in expression evaluation"));
            }
        }
        Ok(())
    }

    /// The query's deadline and cancel flag, for data sources that can stop a long read.
    pub fn controls(&self) -> QueryOptions {
        QueryOptions { deadline: self.deadline, cancel: self.cancel.clone(), rate_tables: self.rate_tables.clone() }
    }

    /// How many more samples the query may hold (a fragment's budget).
    pub fn remaining_samples(&self) -> usize {
        self.max_samples.saturating_sub(self.cur_samples())
    }

    pub fn cur_samples(&self) -> usize {
        self.cur_samples.get()
    }

    pub fn set_cur_samples(&self, n: usize) -> Result<(), QueryError> {
        self.cur_samples.set(n);
        self.check_samples(n)
    }

    /// Fails, before anything is allocated, when a step grid of `steps` points would not
    /// fit next to the samples already held: every expression on a grid holds at least
    /// one point per step (a literal, `time()` or `vector()` fills them all), so a grid
    /// larger than the sample limit can never be evaluated. This is what stops a
    /// subquery such as `x[1000d:1ms]` (86 billion steps) before it allocates.
    pub fn check_grid(&self, steps: i64) -> Result<(), QueryError> {
        let steps = usize::try_from(steps.max(0)).unwrap_or(usize::MAX);
        self.check_samples(self.cur_samples().saturating_add(steps))
    }

    /// Fails when `n` samples would be held at once. The message starts with
    /// Prometheus' (`ErrTooManySamples`), which clients match on, and says what is
    /// counted: samples held in memory at one time, not samples read.
    pub fn check_samples(&self, n: usize) -> Result<(), QueryError> {
        if n > self.peak_samples.get() {
            self.peak_samples.set(n);
        }
        if n > self.max_samples {
            return Err(QueryError::execution(format!(
                "query processing would load too many samples into memory in query execution: more than {} samples \
                 held in memory at once (the limit counts samples held, not samples scanned)",
                self.max_samples
            )));
        }
        Ok(())
    }

    /// The most samples the query held at once (as counted for the limit).
    pub fn peak_samples(&self) -> usize {
        self.peak_samples.get()
    }

    pub fn warn(&self, msg: String) {
        self.warnings.borrow_mut().add(msg);
    }

    pub fn info(&self, msg: String) {
        self.infos.borrow_mut().add(msg);
    }

    /// Prometheus' info that `metric`, given to `rate`/`increase`, might not be a
    /// counter (its name lacks a counter suffix), once per metric name.
    pub fn info_not_counter(&self, metric: &str) {
        if self.non_counters.borrow().contains(metric) {
            return;
        }
        self.non_counters.borrow_mut().insert(metric.to_string());
        let p = self.pos_of(metric, 0);
        self.info(format!(
            "PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket: {metric:?} {p}"
        ));
    }

    /// `(line:col)` of the first occurrence of `needle` in the query at or after byte
    /// `from`, for annotation messages. The parser keeps no positions, so the position
    /// is recovered from the query text.
    pub fn pos_of(&self, needle: &str, from: usize) -> String {
        let from = from.min(self.query.len());
        let at = if needle.is_empty() {
            None
        } else {
            self.query.get(from..).and_then(|s| s.find(needle)).map(|i| i + from)
        };
        let idx = at.unwrap_or(0);
        let before = &self.query[..idx];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map(|s| s.chars().count()).unwrap_or(0) + 1;
        format!("({line}:{col})")
    }

    /// The position of the first argument of the first call of `func` (what
    /// Prometheus reports for annotations about a parameter).
    pub fn pos_of_first_arg(&self, func: &str) -> String {
        let Some(fi) = self.query.find(func) else { return self.pos_of("", 0) };
        let after = fi + func.len();
        let Some(pi) = self.query[after..].find('(') else { return self.pos_of("", 0) };
        let start = after + pi + 1;
        let ws = self.query[start..].len() - self.query[start..].trim_start().len();
        self.pos_at(start + ws)
    }

    fn pos_at(&self, idx: usize) -> String {
        let before = &self.query[..idx.min(self.query.len())];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map(|s| s.chars().count()).unwrap_or(0) + 1;
        format!("({line}:{col})")
    }

    /// Whether `s` came from a string literal whose `\x` escapes spell bytes that are
    /// not valid UTF-8 (Go keeps such bytes; the parser maps them to chars U+0080..U+00FF).
    pub fn has_invalid_utf8(&self, s: &str) -> bool {
        if !s.chars().any(|c| ('\u{80}'..='\u{ff}').contains(&c)) {
            return false;
        }
        // Rebuild the bytes Go would hold and check them.
        let bytes: Vec<u8> = s
            .chars()
            .flat_map(|c| {
                if ('\u{80}'..='\u{ff}').contains(&c)
                    && self.query.to_ascii_lowercase().contains(&format!("\\x{:02x}", c as u32))
                {
                    vec![c as u32 as u8]
                } else {
                    let mut b = [0u8; 4];
                    c.encode_utf8(&mut b).as_bytes().to_vec()
                }
            })
            .collect();
        std::str::from_utf8(&bytes).is_err()
    }

    /// Go's `%q` of a string that may hold bytes from `\x` escapes (see
    /// `has_invalid_utf8`): those are written back as `\xNN`.
    pub fn go_quote(&self, s: &str) -> String {
        let lower = self.query.to_ascii_lowercase();
        let mut out = String::from("\"");
        for c in s.chars() {
            let code = c as u32;
            if (0x80..=0xff).contains(&code) && lower.contains(&format!("\\x{code:02x}")) {
                out.push_str(&format!("\\x{code:02x}"));
            } else if c == '"' || c == '\\' {
                out.push('\\');
                out.push(c);
            } else {
                out.push(c);
            }
        }
        out.push('"');
        out
    }

    /// The warnings and infos raised so far.
    pub fn into_annotations(self) -> (Vec<String>, Vec<String>) {
        (self.warnings.into_inner().list, self.infos.into_inner().list)
    }

    pub fn into_output(self, value: Value) -> QueryOutput {
        QueryOutput { value, warnings: self.warnings.into_inner().list, infos: self.infos.into_inner().list }
    }
}

/// Evaluates expressions on one step grid `start, start+step, ..., <= end`.
pub(crate) struct Evaluator<'a> {
    pub q: &'a dyn Queryable,
    pub ctx: &'a Ctx,
    pub start: i64,
    pub end: i64,
    pub step: i64,
    /// `rate`/`increase` windows of the timestamp sets seen on this grid (up to a budget).
    pub rate_windows: RefCell<RateWindowCache>,
}

/// Milliseconds of a parser duration.
pub(crate) fn dur_ms(d: &Duration) -> i64 {
    d.as_millis() as i64
}

pub(crate) fn offset_ms(o: &Option<Offset>) -> i64 {
    match o {
        None => 0,
        Some(Offset::Pos(d)) => dur_ms(d),
        Some(Offset::Neg(d)) => -dur_ms(d),
    }
}

fn system_time_ms(t: &SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis() as i64,
        Err(e) => -(e.duration().as_millis() as i64),
    }
}

impl<'a> Evaluator<'a> {
    pub fn new(q: &'a dyn Queryable, ctx: &'a Ctx, start: i64, end: i64, step: i64) -> Self {
        let step = step.max(1);
        let rate_windows = RefCell::new(RateWindowCache::sharing(ctx.rate_tables.clone(), start, end, step));
        Evaluator { q, ctx, start, end, step, rate_windows }
    }

    pub fn n_steps(&self) -> usize {
        if self.end < self.start {
            0
        } else {
            ((self.end - self.start) / self.step + 1) as usize
        }
    }

    pub fn ts(&self, i: usize) -> i64 {
        self.start + i as i64 * self.step
    }

    /// The fixed evaluation time an `@` modifier pins, if any.
    pub fn resolve_at(&self, at: &Option<AtModifier>) -> Option<i64> {
        match at {
            None => None,
            Some(AtModifier::Start) => Some(self.ctx.query_start),
            Some(AtModifier::End) => Some(self.ctx.query_end),
            Some(AtModifier::At(t)) => Some(system_time_ms(t)),
        }
    }

    /// Evaluates `e` on this grid, accounting the samples it holds.
    pub fn eval(&mut self, e: &Expr) -> Result<Val, QueryError> {
        self.ctx.check_interrupt()?;
        let before = self.ctx.cur_samples();
        let v = if self.n_steps() > 1 && !is_literal(e) && step_invariant(e) {
            // Prometheus evaluates step-invariant expressions (everything pinned by
            // `@`) once, at the start, and repeats the result at every step.
            let mut once = Evaluator::new(self.q, self.ctx, self.start, self.start, self.step);
            let v = once.eval_node(e)?;
            self.expand(v)?
        } else {
            self.eval_node(e)?
        };
        // The children's values are consumed now; only this node's output stays live.
        self.ctx.set_cur_samples(before + v.points())?;
        Ok(v)
    }

    /// Repeats a one-step value at every step of this grid.
    fn expand(&self, v: Val) -> Result<Val, QueryError> {
        let n = self.n_steps();
        // Checked before allocating: n points per series of a one-step scalar or vector.
        let expanded = match &v {
            Val::Scalar(_) | Val::Vector(_) => n.saturating_mul(v.points()),
            Val::Str(_) | Val::Range(_) => 0,
        };
        self.ctx.check_samples(self.ctx.cur_samples().saturating_add(expanded))?;
        Ok(match v {
            Val::Scalar(s) => Val::Scalar(vec![s.first().copied().unwrap_or(f64::NAN); n]),
            Val::Vector(series) => Val::Vector(
                series
                    .into_iter()
                    .filter_map(|s| {
                        let v = s.pts.first()?.1;
                        Some(StepSeries {
                            labels: s.labels,
                            drop_name: s.drop_name,
                            pts: (0..n).map(|i| (self.ts(i), v)).collect(),
                        })
                    })
                    .collect(),
            ),
            other => other,
        })
    }

    fn eval_node(&mut self, e: &Expr) -> Result<Val, QueryError> {
        if !self.ctx.pushdown.is_empty() {
            if let (Some(p), Some(se)) = (self.ctx.pushdown.get(&super::pushdown::key(e)), self.q.shard_evaluator()) {
                return self.eval_pushed(se, e, p);
            }
        }
        if let Some(v) = self.eval_streamed(e)? {
            return Ok(v);
        }
        match e {
            Expr::NumberLiteral(n) => {
                self.ctx.check_samples(self.ctx.cur_samples().saturating_add(self.n_steps()))?;
                Ok(Val::Scalar(vec![n.val; self.n_steps()]))
            }
            Expr::StringLiteral(s) => Ok(Val::Str(s.val.clone())),
            Expr::Paren(p) => self.eval(&p.expr),
            Expr::Unary(u) => match self.eval(&u.expr)? {
                Val::Scalar(v) => Ok(Val::Scalar(v.into_iter().map(|x| -x).collect())),
                Val::Vector(mut series) => {
                    series.iter_mut().for_each(negate);
                    Ok(Val::Vector(series))
                }
                other => Err(QueryError::execution(format!(
                    "unary expression only allowed on expressions of type scalar or instant vector, got {}",
                    other.type_name()
                ))),
            },
            Expr::VectorSelector(vs) => Ok(Val::Vector(self.eval_vector_selector(vs, false)?)),
            Expr::MatrixSelector(ms) => {
                let ra = self.eval_matrix_selector(ms)?;
                Ok(Val::Range(self.range_result(ra)))
            }
            Expr::Subquery(sq) => {
                let ra = self.eval_subquery(sq)?;
                Ok(Val::Range(self.range_result(ra)))
            }
            Expr::Binary(b) => self.eval_binary(b),
            Expr::Aggregate(a) => self.eval_aggregate(a),
            Expr::Call(c) => self.eval_call(c),
            Expr::Extension(_) => Err(QueryError::execution("unsupported expression extension")),
        }
    }

    /// A range vector as a query result: the raw samples of each series in the window
    /// of the (single) evaluation step.
    fn range_result(&self, ra: RangeArg) -> Vec<StepSeries> {
        let t = self.start;
        let r = ra.at.unwrap_or(t) - ra.offset;
        let lo = r - ra.range;
        ra.series
            .into_iter()
            .filter_map(|s| {
                let pts: Vec<(i64, f64)> =
                    s.samples.iter().filter(|p| p.t > lo && p.t <= r).map(|p| (p.t, p.v)).collect();
                if pts.is_empty() {
                    None
                } else {
                    Some(StepSeries { labels: s.labels, drop_name: s.drop_name, pts })
                }
            })
            .collect()
    }

    /// The grid a subquery's inner expression is evaluated on, from this grid.
    pub fn subquery_grid(&self, sq: &promql_parser::parser::SubqueryExpr) -> SubqueryGrid {
        let offset = offset_ms(&sq.offset);
        let at = self.resolve_at(&sq.at);
        let range = dur_ms(&sq.range);
        let step = sq.step.as_ref().map(dur_ms).filter(|s| *s > 0).unwrap_or(self.ctx.subquery_step);
        let (base_start, base_end) = match at {
            Some(a) => (a, a),
            None => (self.start, self.end),
        };
        // The first timestamp after `start - offset - range` that is a multiple of the
        // step (Go's truncating division, as Prometheus computes it).
        let lo = base_start - offset - range;
        let mut start = step * (lo / step);
        if start <= lo {
            start += step;
        }
        SubqueryGrid { offset, at, range, start, end: base_end - offset, step }
    }

    /// Evaluates a subquery's inner expression on its own grid and returns its points
    /// as the samples of a range argument.
    pub fn eval_subquery(&mut self, sq: &promql_parser::parser::SubqueryExpr) -> Result<RangeArg, QueryError> {
        let SubqueryGrid { offset, at, range, start: s, end: e, step } = self.subquery_grid(sq);
        let mut series = Vec::new();
        if s <= e {
            // The subquery's grid is bounded by the sample limit before anything on it
            // is evaluated (its literals and functions allocate one point per step).
            self.ctx.check_grid((e - s) / step + 1)?;
            let mut sub = Evaluator::new(self.q, self.ctx, s, e, step);
            match sub.eval(&sq.expr)? {
                Val::Vector(v) => {
                    for x in v {
                        if !x.pts.is_empty() {
                            series.push(RangeSeries {
                                labels: x.labels,
                                drop_name: x.drop_name,
                                samples: x.pts.into_iter().map(|(t, v)| Sample { t, v }).collect(),
                            });
                        }
                    }
                }
                Val::Scalar(v) => {
                    let samples = v.into_iter().enumerate().map(|(i, v)| Sample { t: sub.ts(i), v }).collect();
                    series.push(RangeSeries { labels: Default::default(), drop_name: false, samples });
                }
                other => {
                    return Err(QueryError::execution(format!(
                        "subquery is only allowed on instant vector, got {}",
                        other.type_name()
                    )))
                }
            }
        }
        Ok(RangeArg { series, range, offset, at })
    }

    /// Evaluates an argument that must be a range vector (matrix selector or subquery).
    pub fn eval_range_arg(&mut self, e: &Expr) -> Result<RangeArg, QueryError> {
        match e {
            Expr::MatrixSelector(ms) => self.eval_matrix_selector(ms),
            Expr::Subquery(sq) => self.eval_subquery(sq),
            Expr::Paren(p) => self.eval_range_arg(&p.expr),
            _ => Err(QueryError::execution("expected a range vector argument")),
        }
    }

    /// Evaluates an expression that must be a scalar: one value per step.
    pub fn eval_scalar(&mut self, e: &Expr) -> Result<Vec<f64>, QueryError> {
        match self.eval(e)? {
            Val::Scalar(v) => Ok(v),
            other => Err(QueryError::execution(format!("expected scalar, got {}", other.type_name()))),
        }
    }

    pub fn eval_vector(&mut self, e: &Expr) -> Result<Vec<StepSeries>, QueryError> {
        match self.eval(e)? {
            Val::Vector(v) => Ok(v),
            other => Err(QueryError::execution(format!("expected instant vector, got {}", other.type_name()))),
        }
    }

    pub fn eval_string(&mut self, e: &Expr) -> Result<String, QueryError> {
        match self.eval(e)? {
            Val::Str(s) => Ok(s),
            other => Err(QueryError::execution(format!("expected string, got {}", other.type_name()))),
        }
    }

    /// Calls `f(window, series, step index, window start, window end)` for each series
    /// and step with a non-empty window `(ref - range, ref]`.
    pub fn for_each_window(
        &self,
        ra: &RangeArg,
        mut f: impl FnMut(&[tessera_model::Sample], usize, usize, i64, i64) -> Result<(), QueryError>,
    ) -> Result<(), QueryError> {
        for (si, s) in ra.series.iter().enumerate() {
            self.ctx.check_interrupt()?;
            self.windows_of(&s.samples, ra.range, ra.offset, ra.at, |w, k, ws, we| f(w, si, k, ws, we))?;
        }
        Ok(())
    }

    /// Calls `f(window, step index, window start, window end)` for each step whose
    /// window `(ref - range, ref]` over one series' `samples` is not empty; `ref` is the
    /// step's time (or `at`) minus `offset`.
    pub fn windows_of(
        &self,
        samples: &[tessera_model::Sample],
        range: i64,
        offset: i64,
        at: Option<i64>,
        mut f: impl FnMut(&[tessera_model::Sample], usize, i64, i64) -> Result<(), QueryError>,
    ) -> Result<(), QueryError> {
        self.window_bounds_of(samples, range, offset, at, |lo, hi, k, ws, we| f(&samples[lo..hi], k, ws, we))
    }

    /// The steps whose window `(ref - range, ref]` (`ref` as in [`Evaluator::windows_of`])
    /// can hold one of `samples` (in time order); the steps before and after see none.
    /// A series often lives for a small part of a long range (pods churn: over a week at
    /// a 10-minute step a notebook's series spans ~50 of 1,008 steps), so its windows are
    /// looked for in its own span, not at every step of the query.
    pub(crate) fn steps_seeing(
        &self,
        samples: &[tessera_model::Sample],
        range: i64,
        offset: i64,
        at: Option<i64>,
    ) -> std::ops::Range<usize> {
        let n = self.n_steps();
        let (Some(first), Some(last), None) = (samples.first(), samples.last(), at) else {
            // An `@` pins every step's window to the same one.
            return if samples.is_empty() { 0..0 } else { 0..n };
        };
        // The first step at or after time `t`, as i128 so that no offset overflows.
        let step_from = |t: i128| -> usize {
            let (start, step) = (i128::from(self.start), i128::from(self.step.max(1)));
            if t <= start {
                0
            } else {
                ((t - start + step - 1) / step).min(n as i128) as usize
            }
        };
        let (offset, range) = (i128::from(offset), i128::from(range));
        // Before `from` a window ends before the first sample; from `to` on it starts at
        // or after the last one (the start is exclusive).
        let from = step_from(i128::from(first.t) + offset);
        let to = step_from(i128::from(last.t) + offset + range);
        from..to.max(from)
    }

    /// Where the windows of a range selector start: step `k`'s window starts at
    /// `first + k * step` (exclusive) and ends `range` later, as [`Evaluator::window_bounds_of`]
    /// hands them over. Under `@` every step sees the same window (`step` 0).
    pub fn window_starts(&self, range: i64, offset: i64, at: Option<i64>) -> (i64, i64) {
        match at {
            Some(at) => (at - offset - range, 0),
            None => (self.start - offset - range, self.step),
        }
    }

    /// [`Evaluator::windows_of`] handing over each window as the index range `lo..hi`
    /// of `samples`, for a caller that keeps per-sample prefix data of the series.
    pub fn window_bounds_of(
        &self,
        samples: &[tessera_model::Sample],
        range: i64,
        offset: i64,
        at: Option<i64>,
        mut f: impl FnMut(usize, usize, usize, i64, i64) -> Result<(), QueryError>,
    ) -> Result<(), QueryError> {
        let base = self.ctx.cur_samples();
        let (mut lo, mut hi) = (0usize, 0usize);
        let (mut moved_lo, mut moved_hi) = (0usize, 0usize);
        let (first, step) = self.window_starts(range, offset, at);
        for k in self.steps_seeing(samples, range, offset, at) {
            let ws = first + k as i64 * step;
            let r = ws + range;
            // Regular scrapes move both bounds by the same count each step: try that first.
            let (was_lo, was_hi) = (lo, hi);
            hi = skip_through_guessing(samples, hi, r, moved_hi);
            lo = skip_through_guessing(&samples[..hi], lo, ws, moved_lo);
            (moved_lo, moved_hi) = (lo - was_lo, hi - was_hi);
            if lo >= hi {
                continue;
            }
            self.ctx.check_samples(base + (hi - lo))?;
            // The window is a slice of the series: no copy per step.
            f(lo, hi, k, ws, r)?;
        }
        Ok(())
    }
}

/// The first index from `i` on whose sample is after `t` (`samples` in time order).
/// A window's bounds move by the samples between two steps: one or two at a 15 s step,
/// twenty at a 10-minute one over 30 s scrapes. A few are walked, farther ones found by
/// galloping then bisecting, so a long step costs a few comparisons, not one per sample.
#[inline]
pub(super) fn skip_through(samples: &[tessera_model::Sample], mut i: usize, t: i64) -> usize {
    for _ in 0..4 {
        match samples.get(i) {
            Some(s) if s.t <= t => i += 1,
            _ => return i,
        }
    }
    // Gallop: `samples[i - 1].t <= t`; double the stride while still not past `t`.
    let mut stride = 4;
    while i + stride < samples.len() && samples[i + stride - 1].t <= t {
        i += stride;
        stride *= 2;
    }
    let end = (i + stride).min(samples.len());
    i + samples[i..end].partition_point(|s| s.t <= t)
}

/// [`skip_through`], trying `i + guess` first (checked with two comparisons).
#[inline]
pub(super) fn skip_through_guessing(samples: &[tessera_model::Sample], i: usize, t: i64, guess: usize) -> usize {
    let g = i + guess;
    if guess > 0 && g <= samples.len() && samples[g - 1].t <= t && samples.get(g).is_none_or(|s| s.t > t) {
        return g;
    }
    skip_through(samples, i, t)
}

/// A range-vector argument: samples (stale markers removed) covering every window the
/// steps will ask for, and how to place the window for a step.
pub(crate) struct RangeArg {
    pub series: Vec<RangeSeries>,
    pub range: i64,
    pub offset: i64,
    pub at: Option<i64>,
}

/// Where a subquery's inner expression is evaluated: `start..=end` by `step` (empty
/// when `start > end`), and the subquery's own range, offset and `@` time.
pub(crate) struct SubqueryGrid {
    pub offset: i64,
    pub at: Option<i64>,
    pub range: i64,
    pub start: i64,
    pub end: i64,
    pub step: i64,
}

pub(crate) struct RangeSeries {
    pub labels: tessera_model::Labels,
    pub drop_name: bool,
    pub samples: Vec<Sample>,
}

/// Unary minus on one series: values negated, the name to be dropped.
pub(crate) fn negate(s: &mut StepSeries) {
    s.drop_name = true;
    for p in s.pts.iter_mut() {
        p.1 = -p.1;
    }
}

pub(crate) fn is_literal(e: &Expr) -> bool {
    matches!(e, Expr::NumberLiteral(_) | Expr::StringLiteral(_))
}

/// Functions whose value depends on the evaluation time itself, so an `@` on their
/// argument does not make them step invariant (Prometheus' `AtModifierUnsafeFunctions`).
const AT_UNSAFE: &[&str] = &[
    "days_in_month",
    "day_of_month",
    "day_of_week",
    "day_of_year",
    "hour",
    "minute",
    "month",
    "year",
    "predict_linear",
    "time",
    "timestamp",
];

/// Whether `e` has the same value at every step (Prometheus' preprocessing rules).
pub(crate) fn step_invariant(e: &Expr) -> bool {
    match e {
        Expr::VectorSelector(vs) => vs.at.is_some(),
        Expr::MatrixSelector(ms) => ms.vs.at.is_some(),
        Expr::Subquery(sq) => sq.at.is_some(),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) => true,
        Expr::Paren(p) => step_invariant(&p.expr),
        Expr::Unary(u) => step_invariant(&u.expr),
        Expr::Aggregate(a) => step_invariant(&a.expr) && a.param.as_ref().is_none_or(|p| step_invariant(p)),
        Expr::Binary(b) => step_invariant(&b.lhs) && step_invariant(&b.rhs),
        Expr::Call(c) => !AT_UNSAFE.contains(&c.func.name) && c.args.args.iter().all(|a| step_invariant(a)),
        Expr::Extension(_) => false,
    }
}

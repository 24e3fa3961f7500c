//! Series-at-a-time evaluation: the shapes dashboards use read their selector as a
//! stream ([`crate::Queryable::select_stream`]) and fold each series into the step
//! results before the next one is read, so a query holds the series in flight and its
//! results (groups × steps), not every sample it scans.
//!
//! A **chain** is a per-series expression over one selector: the selector itself, a
//! range function (every one but `absent_over_time`) over a matrix selector or over a
//! subquery of a chain (`max_over_time(rate(x[5m])[1h:1m])`: the inner chain runs on the
//! subquery's grid, and each inner series goes through the range function as soon as
//! it is complete), and over either any number of math and date functions (`abs`, `round(x, 5)`, `clamp*`,
//! `hour(x)`), unary minus, and operators with a data-independent scalar (`x * 8`,
//! `x > bool 1`). Each selected series becomes at most one output series with the same
//! labels, so a chain can be evaluated one series at a time. What streams:
//!
//! - a chain on its own: its output series are collected (the raw samples are not);
//! - `sum`, `count`, `group`, `min`, `max`, `avg`, `stddev`, `stdvar`, `quantile` (with
//!   `by` or `without`) over a chain: each output series is folded into one accumulator
//!   per group and step, then dropped; the steps finish with the materialising path's
//!   code (`quantile`'s accumulator keeps the values of its group and step);
//! - the same aggregations as a shard's partial fragment (their states become the
//!   fragment's partial groups), a chain as a per-series fragment, and `topk`/`bottomk`
//!   over a chain as a shard's candidates ([`TopK`]).
//!
//! The answers are the materialising path's: every per-series step is the same
//! function, and each group's accumulator at each step receives the same values. When
//! the source streams in label order (the order `select` results are sorted in, and the
//! test store's) they arrive in the same order too and the answers are equal bit for
//! bit (the promqltest split check asserts it). The local shards stream in storage
//! order, which is much faster to read (see `tessera_storage::SeriesCursor`); then
//! sums and averages add the same values in another order, with Kahan compensation as
//! Prometheus does, which can move the last bits. Groups and chain outputs still come out
//! in the materialising path's order: a group is ordered by its smallest input labels,
//! chain outputs are sorted by labels. `topk` keeps the first of equal values to arrive,
//! so its tie choices follow the source's order.
//!
//! Anything else (subqueries of anything but a chain, `@` over many steps, vector ⊕ vector, other
//! aggregations, `or` selectors read as a union) takes the materialising path. A source
//! with pushdown streams inside the fragments its shards evaluate, not at the querier.

use std::collections::HashMap;

use promql_parser::parser::value::ValueType;
use promql_parser::parser::{AggregateExpr, Expr, MatrixSelector, SubqueryExpr, VectorSelector};

use super::aggregate::{k_of, k_overflow, k_slot, Acc, Grouping, KSlot};
use super::call::{range_fn_args, RangeFnPlan};
use super::eval::{dur_ms, Evaluator, RangeSeries, SubqueryGrid};
use super::labels_util::is_histogram_marker;
use super::pushdown::data_independent_scalar;
use super::selector::range_series;
use super::types::{to_samples, StepSeries, Val};
use crate::error::QueryError;
use crate::fragment::GroupPartial;
use crate::functions;
use crate::functions::range::rate::RateWindows;
use crate::functions::range::rate_sums::{RateScratch, RateSums};
use crate::functions::stats::{kahan_inc, kahan_inc_branch_free, KahanSum};
use tessera_model::{holds_marker, Labels, Sample, HISTOGRAM_MARKER_BITS, METRIC_NAME};

/// Aggregations whose state per group and step is one [`Acc`], folded series by series.
/// (`quantile`'s state is every value of the group at the step, which is still less than
/// its input: no labels, no timestamps, no per-series buffers.)
const FOLDED: &[&str] = &["sum", "count", "group", "min", "max", "avg", "stddev", "stdvar", "quantile"];

/// Whether `e` is a chain (see the module doc). With `one_step` (an instant grid) a
/// selector may carry `@`; on a longer grid an `@` makes its chain step invariant, which
/// the materialising path evaluates once and repeats.
fn is_chain(e: &Expr, one_step: bool) -> bool {
    match e {
        Expr::Paren(p) => is_chain(&p.expr, one_step),
        Expr::VectorSelector(vs) => vs.at.is_none() || one_step,
        Expr::Unary(u) => is_chain(&u.expr, one_step),
        Expr::Call(c) => {
            let name = c.func.name;
            let args: Vec<&Expr> = c.args.args.iter().map(|a| a.as_ref()).collect();
            if functions::range::is_range_fn(name) {
                let (range_idx, scalar_idx) = range_fn_args(name);
                let range_arg = match args.get(range_idx).map(|a| unwrap_parens(a)) {
                    Some(Expr::MatrixSelector(ms)) => ms.vs.at.is_none() || one_step,
                    // The inner chain runs on the subquery's own (many-step) grid.
                    Some(Expr::Subquery(sq)) => (sq.at.is_none() || one_step) && is_chain(&sq.expr, false),
                    _ => false,
                };
                name != "absent_over_time"
                    && args.len() == scalar_idx.len() + 1
                    && range_arg
                    && args.iter().enumerate().all(|(i, a)| i == range_idx || data_independent_scalar(a))
            } else {
                functions::math::is_scalar_fn(name)
                    && !args.is_empty()
                    && is_chain(args[0], one_step)
                    && args[1..].iter().all(|a| data_independent_scalar(a))
            }
        }
        Expr::Binary(b) => match (b.lhs.value_type(), b.rhs.value_type()) {
            (ValueType::Vector, ValueType::Scalar) => is_chain(&b.lhs, one_step) && data_independent_scalar(&b.rhs),
            (ValueType::Scalar, ValueType::Vector) => data_independent_scalar(&b.lhs) && is_chain(&b.rhs, one_step),
            _ => false,
        },
        _ => false,
    }
}

fn unwrap_parens(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => unwrap_parens(&p.expr),
        other => other,
    }
}

/// A chain ready to run: its selector (with the range function over it, if any) and
/// the per-series steps above it, outermost first, their scalar arguments evaluated.
struct Chain<'e> {
    leaf: Leaf<'e>,
    links: Vec<Link>,
}

enum Leaf<'e> {
    Instant(&'e VectorSelector),
    Range(&'e MatrixSelector, RangeFnPlan),
    /// A range function over a subquery whose inner expression is a chain: the inner
    /// chain runs on the subquery's grid, and each of its output series goes through
    /// the range function as soon as it is complete ([`SubqueryOutput`]).
    Subquery(&'e SubqueryExpr, RangeFnPlan),
}

enum Link {
    /// A math or date function with its scalar arguments' values per step.
    Map {
        name: &'static str,
        sargs: Vec<Vec<f64>>,
    },
    Neg,
    /// `series op s`, or `s op series` when `swap`.
    Scalar {
        op: String,
        s: Vec<f64>,
        swap: bool,
        return_bool: bool,
    },
}

/// Where a chain's output series go, one at a time.
trait Sink {
    /// Samples this sink holds now (for the sample limit).
    fn held(&self) -> usize;
    fn take(&mut self, ev: &Evaluator<'_>, s: StepSeries) -> Result<(), QueryError>;
    /// The only labels of its input series this sink reads, if it reads few and never
    /// tells series apart by them (the chain's own steps read the metric name at most);
    /// the selector then asks for these alone ([`crate::SelectHints::only_labels`]).
    fn only_labels(&self) -> Option<Vec<String>> {
        None
    }
    /// Whether this sink adds `rate`/`increase` series per table now
    /// ([`Sink::take_rate`]): `sum` does, until its sums' budget is spent.
    fn takes_rates(&self) -> bool {
        false
    }
    /// Adds a `rate`/`increase` series (its name dropped, as the function drops it)
    /// whose windows are those of kept table `table` (number `id`) per sample
    /// ([`RateSums`]); false when it does not (the chain then applies the function
    /// window by window and hands over the result).
    fn take_rate(&mut self, _: &Labels, _: usize, _: &RateWindows, _: &[Sample]) -> bool {
        false
    }
}

/// A chain's output series, kept.
#[derive(Default)]
struct Collect {
    series: Vec<StepSeries>,
    points: usize,
}

impl Sink for Collect {
    fn held(&self) -> usize {
        self.points
    }
    fn take(&mut self, _: &Evaluator<'_>, s: StepSeries) -> Result<(), QueryError> {
        self.points += s.pts.len();
        self.series.push(s);
        Ok(())
    }
}

/// An aggregation's accumulators: one per group and step (`cells[group * steps + step]`),
/// groups numbered in order of arrival. Each group also keeps the smallest labels of its
/// input series: its first input series in label order, by which the materialising path
/// orders groups (`finish_fold` and the pushdown merge order by it), whatever order the
/// source streams in.
struct Fold {
    op: String,
    grouping: Grouping,
    steps: usize,
    index: HashMap<Labels, usize>,
    /// Per group: its labels and the smallest labels of its input series.
    groups: Vec<(Labels, Labels)>,
    cells: Cells,
    /// Values kept by `quantile`'s accumulators (the others keep a fixed state).
    values: usize,
    /// `sum`'s `rate`/`increase` series added per table, until [`Fold::flush_rates`].
    rates: Option<RateFold>,
}

/// `sum`'s series of `rate`/`increase` added per group and kept table of windows
/// ([`RateSums`]). A pair's first series goes window by window (most groups of a
/// `sum by` over many labels have one series per table, for which a column per sample
/// would cost more than it saves); from its second on, each series that qualifies is
/// added to the pair's sums.
#[derive(Default)]
struct RateFold {
    /// By (group, table number): the pair's sums in `sums`, once it has a second series.
    pairs: HashMap<(usize, usize), Option<usize>, foldhash::fast::RandomState>,
    /// Group, table number, sums.
    sums: Vec<(usize, usize, RateSums)>,
    scratch: RateScratch,
    /// Values the sums hold.
    held: usize,
}

impl RateFold {
    /// Values held in sums beyond which new pairs go window by window: 64 MiB. (They
    /// also count towards the query's sample limit.)
    const BUDGET: usize = 8 << 20;
}

/// A fold's accumulators, one per group and step.
enum Cells {
    /// `sum` (dashboards' commonest aggregation, usually over the most input series): a
    /// compensated sum and two counts per cell, added in a loop without the general
    /// accumulator's dispatch on its operator and state per value, which was a tenth of
    /// `sum(rate(...))`'s time over 27,728 series (and with `min` and `max` below, a
    /// sixth of `max by (Hostname) (max_over_time(...))`'s), and kept as columns
    /// ([`SumColumns`]).
    Sum(SumColumns),
    /// `count` and `group`: the counts alone.
    Counts(Vec<Cell<()>>),
    /// `max` (`max` true) and `min`: the extreme so far and the same counts.
    Extremes {
        max: bool,
        cells: Vec<Cell<f64>>,
    },
    Accs(Vec<Option<Acc>>),
}

/// What [`Acc::fold_in`] would hold for `count`/`group` (no `state`: they only count;
/// `sum` keeps its state in [`SumColumns`]) or `min`/`max` (`state` the extreme): built
/// back into an `Acc` by [`Acc::of_sum`] or [`Acc::of_extreme`] when the step is finished
/// or exported.
#[derive(Clone, Copy, Default)]
struct Cell<S> {
    state: S,
    floats: f64,
    hist: usize,
    drop_name: bool,
}

/// `sum`'s cells as columns: per cell the compensated sum (`sum` and `c`, as in
/// [`KahanSum`]), the float and histogram counts and whether the name is to drop. A series
/// with a point at every step of its span and no native histogram (nearly all) is added
/// to its span in one loop over the columns without a branch, which the compiler turns
/// into packed arithmetic, two cells at a time; per cell [`KahanSum::add`]'s arithmetic,
/// operation for operation, so every sum is the same. Measured: BENCHMARKS.md, "Label sets
/// stepped over, sums added as columns".
#[derive(Default)]
struct SumColumns {
    sum: Vec<f64>,
    c: Vec<f64>,
    floats: Vec<f64>,
    hist: Vec<usize>,
    drop_name: Vec<bool>,
}

impl SumColumns {
    fn len(&self) -> usize {
        self.sum.len()
    }

    fn grow(&mut self, steps: usize) {
        let n = self.len() + steps;
        self.sum.resize(n, 0.0);
        self.c.resize(n, 0.0);
        self.floats.resize(n, 0.0);
        self.hist.resize(n, 0);
        self.drop_name.resize(n, false);
    }

    /// Adds `v`, the sum of `floats` floats, to cell `i`: the cell's first float seeds it.
    fn add_value(&mut self, i: usize, v: f64, floats: f64) {
        (self.sum[i], self.c[i]) = match self.floats[i] == 0.0 {
            true => (v, 0.0),
            false => kahan_inc(v, self.sum[i], self.c[i]),
        };
        self.floats[i] += floats;
    }

    fn take(&mut self, i: usize) -> Option<Acc> {
        let sum = KahanSum::from_parts(std::mem::take(&mut self.sum[i]), std::mem::take(&mut self.c[i]));
        let (floats, hist) = (std::mem::take(&mut self.floats[i]), std::mem::take(&mut self.hist[i]));
        Acc::of_sum("sum", sum, floats, hist, std::mem::take(&mut self.drop_name[i]))
    }

    /// Adds one series' points (on the step grid, in time order) to the row of cells
    /// `row`: a native histogram is only counted, the first float of a cell seeds it.
    fn add(&mut self, ev: &Evaluator<'_>, row: std::ops::Range<usize>, pts: &[(i64, f64)], drop_name: bool) {
        let histograms = holds_marker(pts.iter().map(|p| p.1), HISTOGRAM_MARKER_BITS);
        let dense = ev.dense_steps(pts, row.len()).filter(|_| !histograms);
        let Some(span) = dense else {
            for (k, v) in ev.points_by_step(pts, row.len()) {
                let i = row.start + k;
                self.drop_name[i] |= drop_name;
                if is_histogram_marker(v) {
                    self.hist[i] += 1;
                    continue;
                }
                self.add_value(i, v, 1.0);
            }
            return;
        };
        let cells = row.start + span.start..row.start + span.end;
        if drop_name {
            self.drop_name[cells.clone()].fill(true);
        }
        let (sum, c, floats) = (&mut self.sum[cells.clone()], &mut self.c[cells.clone()], &mut self.floats[cells]);
        for (((sum, c), floats), &(_, v)) in sum.iter_mut().zip(c.iter_mut()).zip(floats.iter_mut()).zip(pts) {
            let (t, next_c) = kahan_inc_branch_free(v, *sum, *c);
            // The cell's first float seeds it.
            let first = *floats == 0.0;
            *sum = if first { v } else { t };
            *c = if first { 0.0 } else { next_c };
            *floats += 1.0;
        }
    }
}

/// Folds one series' points (on the step grid, in time order) into its group's row: a
/// native histogram is only counted; a float goes to `add(state, first, value)`,
/// `first` when it is the cell's first float.
fn fold_row<S>(
    ev: &Evaluator<'_>,
    row: &mut [Cell<S>],
    pts: &[(i64, f64)],
    drop_name: bool,
    mut add: impl FnMut(&mut S, bool, f64),
) {
    let mut fold = |cell: &mut Cell<S>, v: f64| {
        cell.drop_name |= drop_name;
        if is_histogram_marker(v) {
            cell.hist += 1;
            return;
        }
        add(&mut cell.state, cell.floats == 0.0, v);
        cell.floats += 1.0;
    };
    match ev.dense_steps(pts, row.len()) {
        // A point at every step of its span (the usual case): cells and points are
        // walked together, without a step number and a bounds check per point.
        Some(span) => row[span].iter_mut().zip(pts).for_each(|(cell, &(_, v))| fold(cell, v)),
        None => ev.points_by_step(pts, row.len()).for_each(|(k, v)| fold(&mut row[k], v)),
    }
}

impl Cells {
    fn len(&self) -> usize {
        match self {
            Cells::Counts(c) => c.len(),
            Cells::Sum(c) => c.len(),
            Cells::Extremes { cells, .. } => cells.len(),
            Cells::Accs(c) => c.len(),
        }
    }

    /// Adds the cells of a new group.
    fn grow(&mut self, steps: usize) {
        match self {
            Cells::Counts(c) => c.resize(c.len() + steps, Cell::default()),
            Cells::Sum(c) => c.grow(steps),
            Cells::Extremes { cells, .. } => cells.resize(cells.len() + steps, Cell::default()),
            Cells::Accs(c) => c.resize(c.len() + steps, None),
        }
    }

    /// Takes cell `i`'s accumulator (`None` when no value reached it).
    fn take(&mut self, op: &str, i: usize) -> Option<Acc> {
        match self {
            Cells::Counts(c) => {
                let cell = std::mem::take(&mut c[i]);
                Acc::of_sum(op, KahanSum::new(), cell.floats, cell.hist, cell.drop_name)
            }
            Cells::Sum(c) => c.take(i),
            Cells::Extremes { max, cells } => {
                let cell = std::mem::take(&mut cells[i]);
                Acc::of_extreme(*max, cell.state, cell.floats, cell.hist, cell.drop_name)
            }
            Cells::Accs(c) => c[i].take(),
        }
    }
}

impl Fold {
    fn new(a: &AggregateExpr, steps: usize) -> Fold {
        let op = a.op.to_string();
        let cells = match op.as_str() {
            "sum" => Cells::Sum(SumColumns::default()),
            "count" | "group" => Cells::Counts(Vec::new()),
            "max" | "min" => Cells::Extremes { max: op == "max", cells: Vec::new() },
            _ => Cells::Accs(Vec::new()),
        };
        let rates = (op == "sum").then(RateFold::default);
        Fold {
            op,
            grouping: Grouping::of(a),
            steps,
            index: HashMap::new(),
            groups: Vec::new(),
            cells,
            values: 0,
            rates,
        }
    }

    /// The group of an input series with `labels`, numbered in order of arrival; its
    /// smallest input labels so far are kept.
    fn group_of(&mut self, labels: &Labels) -> usize {
        let key = self.grouping.labels(labels);
        match self.index.get(&key) {
            Some(&g) => {
                let first = &mut self.groups[g].1;
                if *labels < *first {
                    first.clone_from(labels);
                }
                g
            }
            None => {
                self.index.insert(key.clone(), self.groups.len());
                self.groups.push((key, labels.clone()));
                self.cells.grow(self.steps);
                self.groups.len() - 1
            }
        }
    }

    /// Adds the `rate`/`increase` sums ([`RateFold`]) to the cells: each window's sum
    /// over a pair's series is one compensated addition to its group's cell at the
    /// window's step, counting as many floats as series it sums (whose names `rate`
    /// dropped).
    fn flush_rates(&mut self, ev: &Evaluator<'_>) -> Result<(), QueryError> {
        let (Some(rates), Cells::Sum(cells)) = (self.rates.take(), &mut self.cells) else { return Ok(()) };
        let tables = ev.rate_windows.borrow();
        for (g, id, sums) in &rates.sums {
            let table = tables.table(*id).ok_or_else(|| QueryError::internal("a kept rate table is gone"))?;
            let row = g * self.steps;
            for (k, v, floats) in sums.values(table) {
                cells.drop_name[row + k] = true;
                cells.add_value(row + k, v, floats);
            }
        }
        Ok(())
    }
}

impl Sink for Fold {
    fn held(&self) -> usize {
        self.cells.len() + self.values + self.rates.as_ref().map_or(0, |r| r.held)
    }
    /// Into one group, series are folded without their labels: the group's are empty,
    /// and its first input series orders nothing. The metric name is still read, by
    /// the annotations that name it (`rate` over what may not be a counter). Measured:
    /// BENCHMARKS.md, "Labels left undecoded".
    fn only_labels(&self) -> Option<Vec<String>> {
        self.grouping.is_one_group().then(|| vec![METRIC_NAME.to_string()])
    }
    fn take(&mut self, ev: &Evaluator<'_>, s: StepSeries) -> Result<(), QueryError> {
        if self.op == "quantile" {
            self.values += s.pts.len();
        }
        let g = self.group_of(&s.labels);
        let row = g * self.steps..(g + 1) * self.steps;
        match &mut self.cells {
            // `count` and `group` only count.
            Cells::Counts(cells) => fold_row(ev, &mut cells[row], &s.pts, s.drop_name, |_, _, _| {}),
            Cells::Sum(cells) => cells.add(ev, row, &s.pts, s.drop_name),
            Cells::Extremes { max, cells } => {
                let max = *max;
                fold_row(ev, &mut cells[row], &s.pts, s.drop_name, |m, first, v| {
                    // The first value seeds the cell; a NaN is replaced by any later one.
                    let better = if max { *m < v } else { *m > v };
                    if first || better || m.is_nan() {
                        *m = v;
                    }
                });
            }
            Cells::Accs(accs) => {
                let row = &mut accs[row];
                for (k, v) in ev.points_by_step(&s.pts, self.steps) {
                    row[k].get_or_insert_with(Acc::new).fold_in(&self.op, v, s.drop_name);
                }
            }
        }
        // Folded: the points' buffer serves the next series' range function.
        super::types::give_back_points(s.pts);
        Ok(())
    }
    /// Until the sums' budget is spent: past it, series go window by window without the
    /// kept-table lookup an offer costs.
    fn takes_rates(&self) -> bool {
        self.rates.as_ref().is_some_and(|r| r.held <= RateFold::BUDGET)
    }
    fn take_rate(&mut self, labels: &Labels, id: usize, table: &RateWindows, samples: &[Sample]) -> bool {
        if !self.takes_rates() {
            return false;
        }
        let g = self.group_of(labels);
        let (Some(rates), Cells::Sum(cells)) = (&mut self.rates, &mut self.cells) else { return false };
        let at = match rates.pairs.get(&(g, id)) {
            None => {
                rates.pairs.insert((g, id), None);
                return false;
            }
            Some(Some(at)) => *at,
            Some(None) => {
                let sums = RateSums::new(samples.len());
                rates.held += sums.held();
                rates.sums.push((g, id, sums));
                rates.pairs.insert((g, id), Some(rates.sums.len() - 1));
                rates.sums.len() - 1
            }
        };
        // A window whose value is not surely its change times its factor is computed
        // as the window-by-window way computes it and goes to the cell itself.
        let row = g * self.steps;
        rates.sums[at].2.add(table, samples, &mut rates.scratch, |k, v| {
            cells.drop_name[row + k] = true;
            cells.add_value(row + k, v, 1.0);
        })
    }
}

/// `topk`/`bottomk` over a chain, series by series: per group and step the k best points
/// so far, kept by the materialising path's rule (`aggregate_k`: the first k enter, then
/// a point replaces the worst kept one if it ranks strictly better, NaN last), and the
/// labels of the series that entered. It holds candidates, not its input: over 80,000
/// series × 1,008 steps a shard's part of `topk(10, …)` holds its k per step.
/// Among equal values the first to arrive is kept, so answers match the materialising
/// path's when the source streams in label order, and are one of the tie choices
/// Prometheus allows otherwise.
struct TopK {
    /// `topk` (else `bottomk`).
    top: bool,
    op: String,
    pos: String,
    grouping: Grouping,
    steps: usize,
    /// Per step: k (0 when the parameter is below 1: no output at that step), `None`
    /// when the parameter overflows int64 (an error once the step has input).
    k: Vec<Option<usize>>,
    /// The earliest step with input whose parameter overflows.
    overflow_at: Option<usize>,
    index: HashMap<Labels, usize>,
    /// Per group: its labels and the smallest labels of its input series with a float.
    groups: Vec<(Labels, Option<Labels>)>,
    /// `heaps[group * steps + step]`: (candidate, value).
    heaps: Vec<Vec<(u32, f64)>>,
    /// Series that entered a heap: labels and whether the name is still to drop.
    candidates: Vec<(Labels, bool)>,
    held: usize,
}

impl Sink for TopK {
    fn held(&self) -> usize {
        self.held
    }
    fn take(&mut self, ev: &Evaluator<'_>, s: StepSeries) -> Result<(), QueryError> {
        let key = self.grouping.labels(&s.labels);
        let g = match self.index.get(&key) {
            Some(&g) => g,
            None => {
                self.index.insert(key.clone(), self.groups.len());
                self.groups.push((key, None));
                self.heaps.resize(self.heaps.len() + self.steps, Vec::new());
                self.groups.len() - 1
            }
        };
        if s.pts.iter().any(|p| !is_histogram_marker(p.1)) {
            let first = &mut self.groups[g].1;
            if first.as_ref().is_none_or(|f| s.labels < *f) {
                *first = Some(s.labels.clone());
            }
        }
        let mut id: Option<u32> = None;
        for (k, v) in ev.points_by_step(&s.pts, self.steps) {
            let Some(kk) = self.k[k] else {
                self.overflow_at = Some(self.overflow_at.map_or(k, |o| o.min(k)));
                continue;
            };
            if kk == 0 {
                continue;
            }
            if is_histogram_marker(v) {
                ev.ctx.info(format!("PromQL info: ignored histogram in {} aggregation {}", self.op, self.pos));
                continue;
            }
            let Some(slot) = k_slot(&self.heaps[g * self.steps + k], kk, self.top, v) else { continue };
            let c = *id.get_or_insert_with(|| {
                self.candidates.push((s.labels.clone(), s.drop_name));
                (self.candidates.len() - 1) as u32
            });
            let h = &mut self.heaps[g * self.steps + k];
            match slot {
                KSlot::Push => {
                    h.push((c, v));
                    self.held += 1;
                }
                KSlot::Replace(w) => h[w] = (c, v),
            }
        }
        Ok(())
    }
}

/// The inner chain's sink of a [`Leaf::Subquery`]: each inner output series (its points
/// on the subquery's grid) becomes the range function's input, as the materialising
/// path's subquery hands it over, and the function's output goes up the outer chain.
struct SubqueryOutput<'o, 'a> {
    outer: &'o Evaluator<'a>,
    plan: &'o RangeFnPlan,
    grid: SubqueryGrid,
    links: &'o [Link],
    sink: &'o mut dyn Sink,
}

impl Sink for SubqueryOutput<'_, '_> {
    fn held(&self) -> usize {
        self.sink.held()
    }
    fn take(&mut self, _: &Evaluator<'_>, s: StepSeries) -> Result<(), QueryError> {
        let rs = RangeSeries { labels: s.labels, drop_name: s.drop_name, samples: to_samples(s.pts) };
        let g = &self.grid;
        let out = self.outer.apply_range_fn(self.plan, rs, g.range, g.offset, g.at)?;
        self.outer.feed(self.links, out, &mut *self.sink)
    }
}

impl Evaluator<'_> {
    /// Whether this evaluation streams: the option is on and no node is pushed down (a
    /// querier over shards streams inside the shards' fragments instead).
    fn streams(&self) -> bool {
        self.ctx.streaming && self.ctx.pushdown.is_empty()
    }

    /// The step index of grid timestamp `t`.
    fn step_of(&self, t: i64) -> usize {
        ((t - self.start) / self.step) as usize
    }

    /// The steps of a series' points (on the step grid, in time order) when it has one
    /// at every step of its span, as most series do; `None` otherwise.
    fn dense_steps(&self, pts: &[(i64, f64)], steps: usize) -> Option<std::ops::Range<usize>> {
        let (&(first, _), &(last, _)) = (pts.first()?, pts.last()?);
        let (first, last) = (self.step_of(first), self.step_of(last));
        (last < steps && last.checked_sub(first) == Some(pts.len() - 1)).then_some(first..last + 1)
    }

    /// `(step index, value)` of a series' points, which lie on the step grid in time
    /// order (`steps` of them): one division finds the first one's step (a series may
    /// start late in a long range), then a walk each next one's, instead of a division
    /// per point (which costs more than the fold it feeds).
    ///
    /// A series with a point at every step of its span (the usual case) is told by its
    /// last point's step, and its points are numbered without the walk.
    fn points_by_step<'p>(&'p self, pts: &'p [(i64, f64)], steps: usize) -> impl Iterator<Item = (usize, f64)> + 'p {
        let first = pts.first().map_or(0, |&(t, _)| self.step_of(t).min(steps.saturating_sub(1)));
        let dense = pts.last().is_some_and(|&(t, _)| self.step_of(t) == first + pts.len() - 1);
        let mut k = first;
        pts.iter().enumerate().map(move |(i, &(t, v))| {
            if dense {
                k = first + i;
            } else {
                while k + 1 < steps && self.ts(k + 1) <= t {
                    k += 1;
                }
            }
            debug_assert_eq!(k, self.step_of(t));
            (k, v)
        })
    }

    /// Evaluates `e` series by series when it is a chain or a folded aggregation over
    /// one; `None` when it is neither (the caller evaluates it materialised).
    pub(crate) fn eval_streamed(&mut self, e: &Expr) -> Result<Option<Val>, QueryError> {
        if !self.streams() {
            return Ok(None);
        }
        let one_step = self.n_steps() == 1;
        match e {
            Expr::Aggregate(a) if self.folds(a) => {
                // As the materialising path: the parameter first, then the input.
                let (param, _) = self.aggregate_params(a)?;
                let fold = self.fold(a)?;
                if let Some(p) = &param {
                    self.warn_quantile_params("quantile", p, false);
                }
                Ok(Some(Val::Vector(self.finish_fold(fold, param.as_deref())?)))
            }
            Expr::VectorSelector(_) | Expr::Call(_) | Expr::Unary(_) | Expr::Binary(_) if is_chain(e, one_step) => {
                let chain = self.chain(e)?;
                let mut out = Collect::default();
                self.run_chain(&chain, &mut out)?;
                // In label order, as the materialising path answers.
                out.series.sort_by(|a, b| a.labels.cmp(&b.labels));
                Ok(Some(Val::Vector(out.series)))
            }
            _ => Ok(None),
        }
    }

    /// A shard's partial groups of a folded aggregation, streamed; `None` when `a` is
    /// not one (the caller evaluates its input materialised).
    pub(crate) fn partial_streamed(&mut self, a: &AggregateExpr) -> Result<Option<Vec<GroupPartial>>, QueryError> {
        if !self.streams() || !self.folds(a) {
            return Ok(None);
        }
        let fold = self.fold(a)?;
        let (n, op) = (fold.steps, fold.op);
        let mut cells = fold.cells;
        let mut out = Vec::with_capacity(fold.groups.len());
        for (g, (labels, first)) in fold.groups.into_iter().enumerate() {
            let steps: Vec<_> =
                (0..n).filter_map(|k| cells.take(&op, g * n + k).map(|acc| acc.into_partial(self.ts(k)))).collect();
            if !steps.is_empty() {
                out.push(GroupPartial { labels, first, steps });
            }
        }
        Ok(Some(out))
    }

    /// A shard's `topk`/`bottomk` candidates, streamed (see [`TopK`]): the series that
    /// are among the k best of their group at some step, with their points at those
    /// steps, and per group its first float input series (by labels); `None` when `a`'s
    /// input is not a chain (the caller evaluates it materialised). `k` holds the
    /// parameter per step (one per step of the grid), evaluated by the querier.
    pub(crate) fn top_streamed(
        &mut self,
        a: &AggregateExpr,
        k: &[f64],
    ) -> Result<Option<(Vec<StepSeries>, Vec<GroupPartial>)>, QueryError> {
        let op = a.op.to_string();
        if !self.streams() || !matches!(op.as_str(), "topk" | "bottomk") || !is_chain(&a.expr, self.n_steps() == 1) {
            return Ok(None);
        }
        let n = self.n_steps();
        // As the materialising path: a NaN parameter fails at any step, input or not.
        if k.iter().any(|p| p.is_nan()) {
            return Err(QueryError::execution("Parameter value is NaN"));
        }
        let mut sink = TopK {
            top: op == "topk",
            pos: self.ctx.pos_of_first_arg(&op),
            op,
            grouping: Grouping::of(a),
            steps: n,
            k: k.iter().map(|&p| k_of(p)).collect(),
            overflow_at: None,
            index: HashMap::new(),
            groups: Vec::new(),
            heaps: Vec::new(),
            candidates: Vec::new(),
            held: 0,
        };
        let chain = self.chain(&a.expr)?;
        self.run_chain(&chain, &mut sink)?;
        if let Some(at) = sink.overflow_at {
            return Err(k_overflow(k[at]));
        }
        let mut out: Vec<StepSeries> =
            sink.candidates.into_iter().map(|(labels, drop_name)| StepSeries::new(labels, drop_name)).collect();
        for step in 0..n {
            let t = self.ts(step);
            for g in 0..sink.groups.len() {
                for &(c, v) in &sink.heaps[g * n + step] {
                    out[c as usize].pts.push((t, v));
                }
            }
        }
        out.retain(|s| !s.pts.is_empty());
        let groups = sink
            .groups
            .into_iter()
            .filter_map(|(labels, first)| Some(GroupPartial { labels, first: first?, steps: Vec::new() }))
            .collect();
        Ok(Some((out, groups)))
    }

    fn folds(&self, a: &AggregateExpr) -> bool {
        let op = a.op.to_string();
        (a.param.is_none() || op == "quantile")
            && FOLDED.contains(&op.as_str())
            && is_chain(&a.expr, self.n_steps() == 1)
    }

    /// Streams `a`'s input chain into one accumulator per group and step.
    fn fold(&mut self, a: &AggregateExpr) -> Result<Fold, QueryError> {
        let chain = self.chain(&a.expr)?;
        let mut fold = Fold::new(a, self.n_steps());
        self.run_chain(&chain, &mut fold)?;
        fold.flush_rates(self)?;
        Ok(fold)
    }

    /// Finishes every step of a fold with the materialising path's code (mix rule,
    /// annotations, results), step by step as it does; `param`: `quantile`'s per step.
    fn finish_fold(&self, fold: Fold, param: Option<&[f64]>) -> Result<Vec<StepSeries>, QueryError> {
        let name_in_group = fold.grouping.name_in_group();
        // Groups in order of their first input series in label order, as the
        // materialising path numbers them, whatever order the source streamed in.
        let mut order: Vec<usize> = (0..fold.groups.len()).collect();
        order.sort_by(|&a, &b| fold.groups[a].1.cmp(&fold.groups[b].1));
        let mut out: Vec<StepSeries> =
            order.iter().map(|&g| StepSeries::new(fold.groups[g].0.clone(), false)).collect();
        let (n, ng) = (fold.steps, out.len());
        let mut cells = fold.cells;
        let mut column: Vec<Option<Acc>> = vec![None; ng];
        for k in 0..n {
            self.ctx.check_interrupt()?;
            let mut any = false;
            for (slot, &g) in column.iter_mut().zip(&order) {
                *slot = cells.take(&fold.op, g * n + k);
                any |= slot.is_some();
            }
            if any {
                let q = param.map_or(0.0, |p| super::labels_util::at_step(p, k));
                self.finish_step(&fold.op, self.ts(k), q, name_in_group, &mut column, &mut out);
            }
        }
        out.retain(|s| !s.pts.is_empty());
        Ok(out)
    }

    /// Resolves chain `e` (checked with [`is_chain`]): evaluates the scalar arguments
    /// of its nodes and finds its selector.
    fn chain<'e>(&mut self, e: &'e Expr) -> Result<Chain<'e>, QueryError> {
        let mut links = Vec::new();
        let mut e = e;
        loop {
            match e {
                Expr::Paren(p) => e = &p.expr,
                Expr::VectorSelector(vs) => return Ok(Chain { leaf: Leaf::Instant(vs), links }),
                Expr::Unary(u) => {
                    links.push(Link::Neg);
                    e = &u.expr;
                }
                Expr::Call(c) => {
                    let name = c.func.name;
                    let args: Vec<&'e Expr> = c.args.args.iter().map(|a| a.as_ref()).collect();
                    if functions::range::is_range_fn(name) {
                        let (plan, range_expr) = self.range_fn_plan(name, &args)?;
                        let leaf = match unwrap_parens(range_expr) {
                            Expr::MatrixSelector(ms) => Leaf::Range(ms, plan),
                            Expr::Subquery(sq) => Leaf::Subquery(sq, plan),
                            _ => {
                                return Err(QueryError::internal(format!(
                                    "{name}() streamed without a matrix selector or subquery"
                                )))
                            }
                        };
                        return Ok(Chain { leaf, links });
                    }
                    let sargs = self.map_args(name, &args)?;
                    links.push(Link::Map { name, sargs });
                    e = args
                        .first()
                        .ok_or_else(|| QueryError::internal(format!("{name}() streamed without a vector")))?;
                }
                Expr::Binary(b) => {
                    let op = b.op.to_string();
                    let return_bool = b.modifier.as_ref().is_some_and(|m| m.return_bool);
                    if b.lhs.value_type() == ValueType::Vector {
                        let s = self.eval_scalar(&b.rhs)?;
                        links.push(Link::Scalar { op, s, swap: false, return_bool });
                        e = &b.lhs;
                    } else {
                        let s = self.eval_scalar(&b.lhs)?;
                        links.push(Link::Scalar { op, s, swap: true, return_bool });
                        e = &b.rhs;
                    }
                }
                _ => return Err(QueryError::internal("a streamed expression is not a per-series chain")),
            }
        }
    }

    /// Reads the chain's selector as a stream and hands every non-empty output series to
    /// `sink`. Held at once: what the query held before, what the sink holds, and the
    /// series being read.
    fn run_chain(&self, chain: &Chain<'_>, sink: &mut dyn Sink) -> Result<(), QueryError> {
        let base = self.ctx.cur_samples();
        match &chain.leaf {
            Leaf::Instant(vs) => {
                let (offset, at, rmin, rmax) = self.window(vs);
                self.select_each(vs, (rmin - self.ctx.lookback + 1, rmax, 0), sink.only_labels(), false, |s| {
                    self.ctx.check_interrupt()?;
                    self.ctx.check_samples(base + sink.held() + s.samples.len())?;
                    self.feed(&chain.links, self.instant_points(s, offset, at, false), sink)
                })
            }
            Leaf::Range(ms, plan) => {
                let (offset, at, rmin, rmax) = self.window(&ms.vs);
                let range = dur_ms(&ms.range);
                // Series added per table: those of one target best come together.
                let per_table = chain.links.is_empty() && sink.takes_rates() && plan.sums_per_table();
                self.select_each(&ms.vs, (rmin - range + 1, rmax, range), sink.only_labels(), per_table, |s| {
                    self.ctx.check_interrupt()?;
                    self.ctx.check_samples(base + sink.held() + s.samples.len())?;
                    let Some(mut rs) = range_series(s) else { return Ok(()) };
                    if chain.links.is_empty() && sink.takes_rates() {
                        let take = |labels: &Labels, id, table: &RateWindows, samples: &[Sample]| {
                            sink.take_rate(labels, id, table, samples)
                        };
                        match self.offer_rate(plan, rs, range, offset, at, take)? {
                            Some(back) => rs = back,
                            None => return Ok(()),
                        }
                    }
                    self.feed(&chain.links, self.apply_range_fn(plan, rs, range, offset, at)?, sink)
                })
            }
            Leaf::Subquery(sq, plan) => {
                // As `eval_subquery`: the grid is bounded before anything runs on it.
                let grid = self.subquery_grid(sq);
                if grid.start > grid.end {
                    return Ok(());
                }
                self.ctx.check_grid((grid.end - grid.start) / grid.step + 1)?;
                let mut inner_ev = Evaluator::new(self.q, self.ctx, grid.start, grid.end, grid.step);
                let inner = inner_ev.chain(&sq.expr)?;
                let mut out = SubqueryOutput { outer: self, plan, grid, links: &chain.links, sink };
                inner_ev.run_chain(&inner, &mut out)
            }
        }
    }

    /// Applies the chain's steps above its selector to one series and hands what is
    /// left to `sink`.
    fn feed(&self, links: &[Link], s: Option<StepSeries>, sink: &mut dyn Sink) -> Result<(), QueryError> {
        if let Some(s) = s {
            if let Some(s) = self.apply_links(links, s)? {
                sink.take(self, s)?;
            }
        }
        Ok(())
    }

    /// The chain's steps above its selector, innermost first; `None` once a step leaves
    /// the series without points (the materialising path drops it there).
    fn apply_links(&self, links: &[Link], mut s: StepSeries) -> Result<Option<StepSeries>, QueryError> {
        for link in links.iter().rev() {
            match link {
                Link::Neg => super::eval::negate(&mut s),
                Link::Map { name, sargs } => self.map_series(&mut s, name, sargs)?,
                Link::Scalar { op, s: sv, swap, return_bool } => {
                    self.scalar_op_series(op, &mut s, sv, *swap, *return_bool)?
                }
            }
            if s.pts.is_empty() {
                return Ok(None);
            }
        }
        Ok(Some(s))
    }
}

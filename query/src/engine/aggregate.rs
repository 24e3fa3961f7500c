//! Aggregation operators with `by` / `without`, evaluated per step over groups that
//! are computed once per input series.

use std::collections::HashMap;

use promql_parser::parser::{AggregateExpr, LabelModifier};

use super::binary::StepCursor;
use super::eval::Evaluator;
use super::labels_util::{self, is_histogram_marker};
use super::types::{StepSeries, Val};
use crate::error::QueryError;
use crate::fragment::{GroupPartial, PartialState, StepPartial};
use crate::functions;
use crate::functions::format::{format_go_decimal, format_go_g};
use crate::functions::order;
use crate::functions::sampling::{clamp_ratio, limit_ratio_keeps};
use crate::functions::stats::{quantile, AvgAccumulator, KahanSum, StdvarAccumulator};
use tessera_model::{Labels, HISTOGRAM_MARKER_BITS, METRIC_NAME};

/// The running state of one group at one step. The numeric work is done by the tested
/// accumulators in `functions::stats`; this only dispatches on the operator.
#[derive(Clone)]
pub(crate) struct Acc {
    /// Samples added (for `count` and `group`, native histograms included).
    count: f64,
    state: AccState,
    drop_name: bool,
    /// Native histogram samples seen (not aggregated, see `is_histogram_marker`).
    hist: usize,
}

#[derive(Clone)]
pub(crate) enum AccState {
    /// No float sample yet.
    Empty,
    Sum(KahanSum),
    Avg(AvgAccumulator),
    Min(f64),
    Max(f64),
    Stdvar(StdvarAccumulator),
    Quantile(Vec<f64>),
    /// `count` and `group` need nothing beyond `count`.
    Counted,
}

impl Acc {
    /// This step's state as plain data, for a shard's partial result.
    pub(crate) fn into_partial(self, t: i64) -> StepPartial {
        let state = match self.state {
            AccState::Empty => PartialState::Empty,
            AccState::Sum(ref k) => PartialState::Sum { sum: k.raw_sum(), c: k.compensation() },
            AccState::Avg(a) => {
                let (sum, c, mean, count, incremental) = a.parts();
                PartialState::Avg { sum, c, mean, count, incremental }
            }
            AccState::Min(m) => PartialState::Min(m),
            AccState::Max(m) => PartialState::Max(m),
            AccState::Quantile(v) => PartialState::Values(v),
            // Stdvar is never pushed down (the planner keeps it at the querier), so its
            // state never needs to travel; counted ops carry none.
            AccState::Stdvar(_) | AccState::Counted => PartialState::Counted,
        };
        StepPartial { t, count: self.count, histograms: self.hist as u64, drop_name: self.drop_name, state }
    }

    /// Rebuilds an accumulator from a shard's partial state.
    pub(crate) fn from_partial(p: StepPartial) -> Self {
        let state = match p.state {
            PartialState::Empty => AccState::Empty,
            PartialState::Sum { sum, c } => AccState::Sum(KahanSum::from_parts(sum, c)),
            PartialState::Avg { sum, c, mean, count, incremental } => {
                AccState::Avg(AvgAccumulator::from_parts(sum, c, mean, count, incremental))
            }
            PartialState::Min(m) => AccState::Min(m),
            PartialState::Max(m) => AccState::Max(m),
            PartialState::Counted => AccState::Counted,
            PartialState::Values(v) => AccState::Quantile(v),
        };
        Acc { count: p.count, state, drop_name: p.drop_name, hist: usize::try_from(p.histograms).unwrap_or(usize::MAX) }
    }

    /// Adds another shard's state of the same group and step: what folding both
    /// shards' samples into one accumulator gives (sums within float rounding).
    pub(crate) fn merge(&mut self, o: Acc) {
        self.count += o.count;
        self.hist = self.hist.saturating_add(o.hist);
        self.drop_name |= o.drop_name;
        match (&mut self.state, o.state) {
            (_, AccState::Empty) => {}
            (AccState::Empty, s) => self.state = s,
            (AccState::Sum(a), AccState::Sum(b)) => a.merge(&b),
            (AccState::Avg(a), AccState::Avg(b)) => a.merge(&b),
            // The rule of `add`: a NaN is replaced by any later value.
            (AccState::Min(m), AccState::Min(f)) if *m > f || m.is_nan() => *m = f,
            (AccState::Max(m), AccState::Max(f)) if *m < f || m.is_nan() => *m = f,
            // The quantile sorts all values, so their order does not matter.
            (AccState::Quantile(a), AccState::Quantile(b)) => a.extend(b),
            _ => {}
        }
    }

    pub(crate) fn new() -> Self {
        Acc { count: 0.0, state: AccState::Empty, drop_name: false, hist: 0 }
    }

    /// The accumulator of `op` (`sum`, `count` or `group`) that [`Acc::fold_in`] leaves
    /// after `floats` float values, summed in `sum` (seeded with the first), and `hist`
    /// native histograms; `None` when nothing was folded in.
    pub(crate) fn of_sum(op: &str, sum: KahanSum, floats: f64, hist: usize, drop_name: bool) -> Option<Acc> {
        if floats == 0.0 && hist == 0 {
            return None;
        }
        let (count, state) = match op {
            // A histogram is only counted (see `fold_in`).
            "sum" if floats > 0.0 => (floats, AccState::Sum(sum)),
            "sum" => (floats, AccState::Empty),
            // `count` and `group` count histograms as values.
            _ => (floats + hist as f64, AccState::Counted),
        };
        Some(Acc { count, state, drop_name, hist })
    }

    /// The accumulator of `max` (`max` true) or `min` that [`Acc::fold_in`] leaves after
    /// `floats` float values whose extreme is `v`, and `hist` native histograms; `None`
    /// when nothing was folded in.
    pub(crate) fn of_extreme(max: bool, v: f64, floats: f64, hist: usize, drop_name: bool) -> Option<Acc> {
        if floats == 0.0 && hist == 0 {
            return None;
        }
        let state = match (floats > 0.0, max) {
            (false, _) => AccState::Empty,
            (true, true) => AccState::Max(v),
            (true, false) => AccState::Min(v),
        };
        Some(Acc { count: floats, state, drop_name, hist })
    }

    /// Adds one input value of a series (`drop_name`: whether the series still carries
    /// a name to drop): floats are aggregated, a native histogram is only counted.
    pub(crate) fn fold_in(&mut self, op: &str, v: f64, drop_name: bool) {
        self.drop_name |= drop_name;
        if is_histogram_marker(v) {
            self.hist += 1;
            if op == "count" || op == "group" {
                self.add(op, 0.0);
            }
            return;
        }
        self.add(op, v);
    }

    fn add(&mut self, op: &str, f: f64) {
        self.count += 1.0;
        match &mut self.state {
            AccState::Empty => {
                // Prometheus seeds each group with its first value.
                self.state = match op {
                    "sum" => AccState::Sum(KahanSum::seeded(f)),
                    "avg" => AccState::Avg(AvgAccumulator::new(f)),
                    "min" => AccState::Min(f),
                    "max" => AccState::Max(f),
                    "stddev" | "stdvar" => AccState::Stdvar(StdvarAccumulator::new(f)),
                    "quantile" => AccState::Quantile(vec![f]),
                    _ => AccState::Counted,
                }
            }
            AccState::Sum(k) => k.add(f),
            AccState::Avg(a) => a.add(f),
            AccState::Min(m) => {
                if *m > f || m.is_nan() {
                    *m = f;
                }
            }
            AccState::Max(m) => {
                if *m < f || m.is_nan() {
                    *m = f;
                }
            }
            AccState::Stdvar(a) => a.add(f),
            AccState::Quantile(v) => v.push(f),
            AccState::Counted => {}
        }
    }

    fn result(&mut self, op: &str, param: f64) -> f64 {
        match (&mut self.state, op) {
            (_, "count") => self.count,
            (_, "group") => 1.0,
            (AccState::Sum(k), _) => k.value(),
            (AccState::Avg(a), _) => a.value(),
            (AccState::Min(m) | AccState::Max(m), _) => *m,
            (AccState::Stdvar(a), "stdvar") => a.stdvar(),
            (AccState::Stdvar(a), _) => a.stddev(),
            (AccState::Quantile(v), _) => quantile(param, v),
            _ => f64::NAN,
        }
    }
}

/// How an aggregation groups its input: `by` (keep the listed labels) or `without`
/// (drop them and the metric name).
pub(crate) struct Grouping {
    without: bool,
    names: Vec<String>,
}

impl Grouping {
    pub fn of(a: &AggregateExpr) -> Self {
        let (without, names) = match &a.modifier {
            Some(LabelModifier::Include(l)) => (false, l.labels.clone()),
            Some(LabelModifier::Exclude(l)) => (true, l.labels.clone()),
            // No modifier: one group over everything, as `by ()`.
            None => (false, Vec::new()),
        };
        Grouping { without, names }
    }

    /// The group a series with labels `l` falls into.
    pub fn labels(&self, l: &Labels) -> Labels {
        if self.without {
            labels_util::drop(&labels_util::without_name(l), &self.names)
        } else {
            labels_util::keep(l, &self.names)
        }
    }

    /// Whether every series falls into one group (no modifier, or `by ()`).
    pub fn is_one_group(&self) -> bool {
        !self.without && self.names.is_empty()
    }

    /// Whether `by` keeps the metric name (then a name to drop marks the output).
    pub fn name_in_group(&self) -> bool {
        !self.without && self.names.iter().any(|n| n == METRIC_NAME)
    }

    /// The group index of every input series, groups numbered in order of first
    /// appearance; each group's labels; and each group's first input series.
    pub fn assign(&self, input: &[StepSeries]) -> (Vec<usize>, Vec<Labels>, Vec<usize>) {
        let mut gindex: HashMap<Labels, usize> = HashMap::new();
        let mut glabels: Vec<Labels> = Vec::new();
        let mut first: Vec<usize> = Vec::new();
        let series_group = input
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let g = self.labels(&s.labels);
                *gindex.entry(g.clone()).or_insert_with(|| {
                    glabels.push(g);
                    first.push(i);
                    glabels.len() - 1
                })
            })
            .collect();
        (series_group, glabels, first)
    }
}

impl Evaluator<'_> {
    pub(crate) fn eval_aggregate(&mut self, a: &AggregateExpr) -> Result<Val, QueryError> {
        let (fparam, sparam) = self.aggregate_params(a)?;
        let input = self.eval_vector(&a.expr)?;
        self.aggregate(a, fparam, sparam, input)
    }

    /// An aggregation's parameter: the per-step number (`topk`, `quantile`, ...) or
    /// `count_values`' label.
    pub(crate) fn aggregate_params(
        &mut self,
        a: &AggregateExpr,
    ) -> Result<(Option<Vec<f64>>, Option<String>), QueryError> {
        let mut fparam: Option<Vec<f64>> = None;
        let mut sparam: Option<String> = None;
        if let Some(p) = &a.param {
            if a.op.to_string() == "count_values" {
                sparam = Some(self.eval_string(p)?);
            } else {
                fparam = Some(self.eval_scalar(p)?);
            }
        }
        Ok((fparam, sparam))
    }

    /// Aggregates an evaluated input.
    pub(crate) fn aggregate(
        &mut self,
        a: &AggregateExpr,
        fparam: Option<Vec<f64>>,
        sparam: Option<String>,
        input: Vec<StepSeries>,
    ) -> Result<Val, QueryError> {
        let op = a.op.to_string();
        let grouping = Grouping::of(a);
        let (series_group, glabels, _) = grouping.assign(&input);
        let pos = self.ctx.pos_of_first_arg(&op);
        match op.as_str() {
            "topk" | "bottomk" | "limitk" | "limit_ratio" => {
                let param = fparam.unwrap_or_default();
                self.aggregate_k(&op, &input, &series_group, glabels.len(), &param, &pos).map(Val::Vector)
            }
            "count_values" => {
                let label = sparam.unwrap_or_default();
                if !functions::labels::is_valid_label_name(&label) || self.ctx.has_invalid_utf8(&label) {
                    return Err(QueryError::execution(format!("invalid label name {}", self.ctx.go_quote(&label))));
                }
                self.count_values(&label, &input, &series_group, &glabels).map(|(v, _)| Val::Vector(v))
            }
            _ => {
                if op == "quantile" {
                    self.warn_quantile_params("quantile", fparam.as_deref().unwrap_or_default(), false);
                }
                let name_in_group = grouping.name_in_group();
                let mut out: Vec<StepSeries> = glabels.iter().map(|l| StepSeries::new(l.clone(), false)).collect();
                self.fold_steps(&op, &input, &series_group, glabels.len(), |ev, k, t, accs| {
                    let param = fparam.as_ref().map(|p| labels_util::at_step(p, k)).unwrap_or(0.0);
                    ev.finish_step(&op, t, param, name_in_group, accs, &mut out);
                    Ok(())
                })?;
                out.retain(|s| !s.pts.is_empty());
                Ok(Val::Vector(out))
            }
        }
    }

    /// Prometheus' warning for a quantile parameter outside [0, 1] (NaN included) of
    /// function or operator `func`: for every such value, or (`first_only`, as
    /// `quantile_over_time` and `histogram_quantile` warn) for the first.
    pub(crate) fn warn_quantile_params(&self, func: &str, params: &[f64], first_only: bool) {
        let pos = self.ctx.pos_of_first_arg(func);
        for &q in params.iter().filter(|q| q.is_nan() || !(0.0..=1.0).contains(*q)) {
            self.ctx.warn(format!(
                "PromQL warning: quantile value should be between 0 and 1, got {} {}",
                format_go_g(q),
                pos
            ));
            if first_only {
                break;
            }
        }
    }

    /// Folds the input into one accumulator per group at every step with input, and
    /// hands each step's accumulators to `step(evaluator, step index, t, accs)`, which
    /// must take them (finish or export them).
    pub(crate) fn fold_steps(
        &self,
        op: &str,
        input: &[StepSeries],
        series_group: &[usize],
        ngroups: usize,
        mut step: impl FnMut(&Self, usize, i64, &mut [Option<Acc>]) -> Result<(), QueryError>,
    ) -> Result<(), QueryError> {
        let mut cur = StepCursor::new(input);
        let mut present = Vec::new();
        let mut accs: Vec<Option<Acc>> = vec![None; ngroups];
        for k in 0..self.n_steps() {
            self.ctx.check_interrupt()?;
            let t = self.ts(k);
            cur.at(input, t, &mut present);
            if present.is_empty() {
                continue;
            }
            for &(i, v) in &present {
                accs[series_group[i]].get_or_insert_with(Acc::new).fold_in(op, v, input[i].drop_name);
            }
            step(self, k, t, &mut accs)?;
        }
        Ok(())
    }

    /// Finishes one step: takes every group's accumulator and appends the group's value
    /// at `t` to `out` (same index as the group), with Prometheus' rules for native
    /// histograms and their annotations. Shared by the single-node path and the merge of
    /// shard partials.
    pub(crate) fn finish_step(
        &self,
        op: &str,
        t: i64,
        param: f64,
        name_in_group: bool,
        accs: &mut [Option<Acc>],
        out: &mut [StepSeries],
    ) {
        for (g, acc) in accs.iter_mut().enumerate() {
            if let Some(mut a) = acc.take() {
                if a.hist > 0 && op != "count" && op != "group" {
                    // Native histograms are not aggregated here: a mix with
                    // floats is refused by sum/avg and ignored by the others.
                    if a.count > 0.0 && (op == "sum" || op == "avg") {
                        self.ctx.warn(format!(
                            "PromQL warning: encountered a mix of histograms and floats for aggregation {}",
                            self.ctx.pos_of_first_arg(op)
                        ));
                        continue;
                    }
                    if a.count == 0.0 && (op == "sum" || op == "avg") {
                        // Only histograms: the result is a histogram, kept opaque.
                        out[g].pts.push((t, f64::from_bits(HISTOGRAM_MARKER_BITS)));
                        continue;
                    }
                    if op != "sum" && op != "avg" {
                        self.ctx.info(format!(
                            "PromQL info: ignored histogram in {op} aggregation {}",
                            self.ctx.pos_of_first_arg(op)
                        ));
                    }
                    if a.count == 0.0 || op == "sum" || op == "avg" {
                        continue;
                    }
                }
                let v = a.result(op, param);
                out[g].pts.push((t, v));
                if name_in_group && a.drop_name {
                    out[g].drop_name = true;
                }
            }
        }
    }

    /// `count_values`: the output series in order of creation, and for each the input
    /// series that created it.
    fn count_values(
        &self,
        label: &str,
        input: &[StepSeries],
        series_group: &[usize],
        glabels: &[Labels],
    ) -> Result<(Vec<StepSeries>, Vec<usize>), QueryError> {
        let mut index: HashMap<Labels, usize> = HashMap::new();
        let mut out: Vec<StepSeries> = Vec::new();
        let mut creators: Vec<usize> = Vec::new();
        let mut cur = StepCursor::new(input);
        let mut present = Vec::new();
        for k in 0..self.n_steps() {
            self.ctx.check_interrupt()?;
            let t = self.ts(k);
            cur.at(input, t, &mut present);
            let mut counts: Vec<(usize, f64)> = Vec::new();
            let mut at_step: HashMap<Labels, usize> = HashMap::new();
            for &(i, v) in &present {
                if is_histogram_marker(v) {
                    continue;
                }
                let l = functions::labels::set_label(&glabels[series_group[i]], label, &format_go_decimal(v));
                let idx = *index.entry(l.clone()).or_insert_with(|| {
                    out.push(StepSeries::new(l.clone(), false));
                    creators.push(i);
                    out.len() - 1
                });
                let n = at_step.entry(l).or_insert_with(|| {
                    counts.push((idx, 0.0));
                    counts.len() - 1
                });
                counts[*n].1 += 1.0;
            }
            for (idx, c) in counts {
                out[idx].pts.push((t, c));
            }
        }
        Ok((out, creators))
    }

    /// A shard's `count_values`: per output series its counts (as counted partials) and
    /// the input series that created it (`first`), which orders the merged output as the
    /// single node orders it (by the step and input position of creation).
    pub(crate) fn count_values_partial(
        &self,
        a: &AggregateExpr,
        label: &str,
        input: &[StepSeries],
    ) -> Result<Vec<GroupPartial>, QueryError> {
        if !functions::labels::is_valid_label_name(label) || self.ctx.has_invalid_utf8(label) {
            return Err(QueryError::execution(format!("invalid label name {}", self.ctx.go_quote(label))));
        }
        let (series_group, glabels, _) = Grouping::of(a).assign(input);
        let (out, creators) = self.count_values(label, input, &series_group, &glabels)?;
        Ok(out
            .into_iter()
            .zip(creators)
            .map(|(s, i)| GroupPartial {
                labels: s.labels,
                first: input[i].labels.clone(),
                steps: s
                    .pts
                    .into_iter()
                    .map(|(t, c)| StepPartial {
                        t,
                        count: c,
                        histograms: 0,
                        drop_name: false,
                        state: PartialState::Counted,
                    })
                    .collect(),
            })
            .collect())
    }

    /// topk, bottomk, limitk and limit_ratio: they select input series, keeping their
    /// labels.
    fn aggregate_k(
        &self,
        op: &str,
        input: &[StepSeries],
        series_group: &[usize],
        ngroups: usize,
        param: &[f64],
        pos: &str,
    ) -> Result<Vec<StepSeries>, QueryError> {
        let n = self.n_steps();
        let mut out: Vec<StepSeries> = input.iter().map(|s| StepSeries::new(s.labels.clone(), s.drop_name)).collect();
        // For instant queries the output order matters (topk sorts its result).
        let mut instant_order: Vec<usize> = Vec::new();
        let mut cur = StepCursor::new(input);
        let mut present = Vec::new();
        for k in 0..n {
            self.ctx.check_interrupt()?;
            let t = self.ts(k);
            cur.at(input, t, &mut present);
            let p = param.get(k).copied().unwrap_or(f64::NAN);
            // The parameter is validated at every step, even with no input.
            if p.is_nan() {
                return Err(QueryError::execution(if op == "limit_ratio" {
                    "Ratio value is NaN"
                } else {
                    "Parameter value is NaN"
                }));
            }
            if present.is_empty() {
                continue;
            }
            if op == "limit_ratio" {
                let (ratio, capped) = clamp_ratio(p);
                if capped {
                    self.ctx.warn(format!(
                        "PromQL warning: ratio value should be between -1 and 1, got {}, capping to {} {}",
                        format_go_g(p),
                        format_go_g(ratio),
                        pos
                    ));
                }
                for &(i, v) in &present {
                    if limit_ratio_keeps(ratio, &input[i].labels) {
                        out[i].pts.push((t, v));
                        if n == 1 {
                            instant_order.push(i);
                        }
                    }
                }
                continue;
            }
            let kk = k_of(p).ok_or_else(|| k_overflow(p))?;
            if kk == 0 {
                continue;
            }
            let mut groups: Vec<Vec<(usize, f64)>> = vec![Vec::new(); ngroups];
            let mut gorder: Vec<usize> = Vec::new();
            for &(i, v) in &present {
                if is_histogram_marker(v) && op != "limitk" {
                    self.ctx.info(format!("PromQL info: ignored histogram in {op} aggregation {pos}"));
                    continue;
                }
                let g = series_group[i];
                let h = &mut groups[g];
                if h.is_empty() {
                    gorder.push(g);
                }
                match op {
                    "limitk" => {
                        if h.len() < kk {
                            h.push((i, v));
                        }
                    }
                    _ => match k_slot(h, kk, op == "topk", v) {
                        Some(KSlot::Push) => h.push((i, v)),
                        Some(KSlot::Replace(w)) => h[w] = (i, v),
                        None => {}
                    },
                }
            }
            for g in gorder {
                let h = &mut groups[g];
                if op != "limitk" {
                    // topk is by value descending, bottomk ascending; NaN last either way.
                    let cmp = if op == "topk" { order::sort_desc_cmp } else { order::sort_asc_cmp };
                    h.sort_by(|a, b| cmp(a.1, b.1));
                }
                for &(i, v) in h.iter() {
                    out[i].pts.push((t, v));
                    if n == 1 {
                        instant_order.push(i);
                    }
                }
            }
        }
        if n == 1 {
            let mut ordered = Vec::with_capacity(instant_order.len());
            for i in instant_order {
                ordered.push(std::mem::replace(&mut out[i], StepSeries::new(Labels::default(), false)));
            }
            return Ok(ordered);
        }
        out.retain(|s| !s.pts.is_empty());
        Ok(out)
    }
}

/// `topk`/`bottomk`'s k at one step from its parameter: 0 below 1 (nothing kept), `None`
/// when it overflows int64 (an error, see [`k_overflow`], once the step has input).
pub(crate) fn k_of(p: f64) -> Option<usize> {
    (-9.223372036854776e18..9.223372036854776e18).contains(&p).then(|| (p as i64).max(0) as usize)
}

/// The error for a `topk`/`bottomk` parameter that overflows int64.
pub(crate) fn k_overflow(p: f64) -> QueryError {
    QueryError::execution(format!("Scalar value {} overflows int64", format_go_g(p)))
}

/// Where a `topk`/`bottomk` point goes among the `k` a group keeps at one step.
pub(crate) enum KSlot {
    Push,
    /// Replaces the kept point at this index.
    Replace(usize),
}

/// Prometheus' rule for one group at one step: the first `k` points enter; after that a
/// point replaces the worst kept one (the first of equally bad ones) if it ranks strictly
/// better. `top`: by value descending (`topk`), else ascending; NaN ranks last either
/// way. `None`: the point is not kept.
pub(crate) fn k_slot<I>(kept: &[(I, f64)], k: usize, top: bool, v: f64) -> Option<KSlot> {
    if kept.len() < k {
        return Some(KSlot::Push);
    }
    // `better(a, b)`: a ranks before b.
    let better = |a: f64, b: f64| !a.is_nan() && (b.is_nan() || if top { a > b } else { a < b });
    let mut worst = 0;
    for j in 1..kept.len() {
        if better(kept[worst].1, kept[j].1) {
            worst = j;
        }
    }
    better(v, kept[worst].1).then_some(KSlot::Replace(worst))
}

//! Both halves of pushdown inside the engine: the querier side ([`Evaluator::eval_pushed`]:
//! build a [`Fragment`] for a node the planner pushed, have every shard evaluate it, and
//! merge the results exactly as the single node would have finished them) and the shard
//! side ([`Engine::eval_fragment`]: evaluate one fragment over one shard's data).

use std::collections::{HashMap, HashSet};

use promql_parser::parser::{AggregateExpr, Expr};

use super::aggregate::{Acc, Grouping};
use super::eval::{Ctx, Evaluator};
use super::labels_util::is_histogram_marker;
use super::pushdown::{node_at, Pushed};
use super::types::{StepSeries, Val};
use super::{hints, parse_with_limits, Engine, EngineOptions, QueryOptions};
use crate::error::QueryError;
use crate::fragment::{
    Fragment, FragmentData, FragmentMode, FragmentOutput, GroupPartial, PartialSeries, ShardEvaluator, StepPartial,
};
use crate::model::Queryable;
use tessera_model::{Labels, Sample};

impl Evaluator<'_> {
    /// Evaluates a node the planner pushed: every shard evaluates it as a fragment on
    /// this grid, and the results merge here.
    pub(crate) fn eval_pushed(&mut self, se: &dyn ShardEvaluator, e: &Expr, p: &Pushed) -> Result<Val, QueryError> {
        let mut frag = Fragment {
            query: self.ctx.query.clone(),
            path: p.path.clone(),
            mode: p.mode,
            start: self.start,
            end: self.end,
            step: self.step,
            query_start: self.ctx.query_start,
            query_end: self.ctx.query_end,
            query_step: self.ctx.query_step,
            lookback_delta_ms: self.ctx.lookback,
            default_subquery_step_ms: self.ctx.subquery_step,
            // The shards' outputs are all held here at once before they merge (and a
            // local source runs its fragments side by side): each may hold its share of
            // what the query has left, so together they stay within the limit.
            max_samples: (self.ctx.remaining_samples() / se.shard_count().max(1)) as u64,
            param: Vec::new(),
            string_param: None,
        };
        let ctl = self.ctx.controls();
        match (p.mode, e) {
            (FragmentMode::Concat, _) => {
                let outs = self.run_fragment(se, &frag, &ctl)?;
                let mut all = Vec::new();
                for o in outs {
                    all.extend(series_of(o.data)?);
                }
                // Shard-local chains keep each input series' labels and the input came
                // sorted by labels: sorting restores the single node's order.
                all.sort_by(|a, b| a.labels.cmp(&b.labels));
                Ok(Val::Vector(all))
            }
            (FragmentMode::Partial, Expr::Aggregate(a)) => {
                let op = a.op.to_string();
                // The parameter is evaluated here, once, before the input, as on a single
                // node; the shards get its values.
                let (fparam, sparam) = self.aggregate_params(a)?;
                match op.as_str() {
                    "topk" | "bottomk" => {
                        frag.param = fparam.clone().unwrap_or_default();
                        let mut candidates = Vec::new();
                        // Each group's first float input series over all shards.
                        let mut first: HashMap<Labels, Labels> = HashMap::new();
                        for o in self.run_fragment(se, &frag, &ctl)? {
                            let FragmentData::Candidates { series, groups } = o.data else {
                                return Err(QueryError::internal(format!(
                                    "a shard answered the {op} fragment without candidates"
                                )));
                            };
                            candidates.extend(series_of(FragmentData::Series(series))?);
                            for g in groups {
                                match first.get_mut(&g.labels) {
                                    Some(f) if *f <= g.first => {}
                                    Some(f) => *f = g.first,
                                    None => {
                                        first.insert(g.labels, g.first);
                                    }
                                }
                            }
                        }
                        // Each shard's top k per group and step contains every series of
                        // that shard in the global top k: the same selection over the
                        // candidates, in the single node's input order, is the answer.
                        candidates.sort_by(|a, b| a.labels.cmp(&b.labels));
                        let out = self.aggregate(a, fparam, None, candidates)?;
                        match out {
                            // An instant query lists groups in the order of their first
                            // input series, which the candidates alone do not show.
                            Val::Vector(mut v) if self.n_steps() == 1 => {
                                let grouping = Grouping::of(a);
                                v.sort_by_cached_key(|s| first.get(&grouping.labels(&s.labels)).cloned());
                                Ok(Val::Vector(v))
                            }
                            other => Ok(other),
                        }
                    }
                    "count_values" => {
                        frag.string_param = sparam;
                        let outs = self.run_fragment(se, &frag, &ctl)?;
                        self.merge_counts(outs).map(Val::Vector)
                    }
                    _ => {
                        // `quantile`'s parameter stays here: the shards only collect values.
                        if let Some(p) = &fparam {
                            self.warn_quantile_params("quantile", p, false);
                        }
                        let outs = self.run_fragment(se, &frag, &ctl)?;
                        let mut parts = Vec::with_capacity(outs.len());
                        for o in outs {
                            match o.data {
                                FragmentData::Groups(g) => parts.push(g),
                                FragmentData::Series(_) | FragmentData::Candidates { .. } => {
                                    return Err(QueryError::internal(format!(
                                        "a shard answered the {op} fragment with series instead of partial groups"
                                    )))
                                }
                            }
                        }
                        self.merge_groups(a, fparam.as_deref(), parts).map(Val::Vector)
                    }
                }
            }
            (FragmentMode::Partial, _) => Err(QueryError::internal("a partial fragment must be an aggregation")),
        }
    }

    /// Every shard's output for `frag`, its annotations taken over into this query's.
    fn run_fragment(
        &self,
        se: &dyn ShardEvaluator,
        frag: &Fragment,
        ctl: &QueryOptions,
    ) -> Result<Vec<FragmentOutput>, QueryError> {
        let outs = se.eval_all(frag, ctl)?;
        for o in &outs {
            for w in &o.warnings {
                self.ctx.warn(w.clone());
            }
            for i in &o.infos {
                self.ctx.info(i.clone());
            }
        }
        Ok(outs)
    }

    /// Finishes `sum`/`count`/`group`/`min`/`max`/`avg`/`quantile` from the shards'
    /// partial groups: per step, the states of one group merge in shard order and then
    /// finish with the single node's code (`param`: `quantile`'s per step). Groups are
    /// numbered by their first input series, as the single node numbers them by first
    /// appearance. A group may come in several pieces from one shard (a remote shard
    /// cuts a large one by steps).
    fn merge_groups(
        &self,
        a: &AggregateExpr,
        param: Option<&[f64]>,
        parts: Vec<Vec<GroupPartial>>,
    ) -> Result<Vec<StepSeries>, QueryError> {
        let op = a.op.to_string();
        let grouping = Grouping::of(a);
        let mut index: HashMap<Labels, usize> = HashMap::new();
        let mut groups: Vec<(Labels, Labels)> = Vec::new(); // (first input series, group labels)
        let n = self.n_steps();
        let mut entries = 0usize;
        for shard in &parts {
            for g in shard {
                entries += g.steps.iter().map(StepPartial::held).sum::<usize>();
                match index.get(&g.labels) {
                    Some(&i) => {
                        if g.first < groups[i].0 {
                            groups[i].0 = g.first.clone();
                        }
                    }
                    None => {
                        index.insert(g.labels.clone(), groups.len());
                        groups.push((g.first.clone(), g.labels.clone()));
                    }
                }
            }
        }
        // Where the partials wait for their step to finish: in a table of every group at
        // every step when they fill most of it (a dashboard's groups, each at every step;
        // merging in place moves each partial once), else in a list per step holding only
        // what arrived (many groups over a few steps each, like short-lived pods, which a
        // table would hold many times over). The table counts as held.
        let table = groups.len().saturating_mul(n);
        let dense = table <= entries.saturating_mul(2);
        let held = entries.saturating_add(if dense { table } else { 0 });
        self.ctx.check_samples(self.ctx.cur_samples().saturating_add(held))?;
        // Final position of every group.
        let mut order: Vec<usize> = (0..groups.len()).collect();
        order.sort_by(|&x, &y| groups[x].0.cmp(&groups[y].0));
        let mut pos = vec![0usize; groups.len()];
        for (p, &g) in order.iter().enumerate() {
            pos[g] = p;
        }
        // The table is step by step (`table[step * groups + group]`). Either way a group's
        // partials at one step merge in shard order.
        let width = groups.len();
        let mut table: Vec<Option<Acc>> = if dense { vec![None; width * n] } else { Vec::new() };
        let mut by_step: Vec<Vec<(usize, Acc)>> = if dense { Vec::new() } else { vec![Vec::new(); n] };
        for shard in parts {
            for g in shard {
                let gi = pos[index[&g.labels]];
                for sp in g.steps {
                    let k = self.step_index(sp.t)?;
                    let acc = Acc::from_partial(sp);
                    if dense {
                        merge_into(&mut table[k * width + gi], acc);
                    } else {
                        by_step[k].push((gi, acc));
                    }
                }
            }
        }
        let mut out: Vec<StepSeries> = order.iter().map(|&g| StepSeries::new(groups[g].1.clone(), false)).collect();
        let name_in_group = grouping.name_in_group();
        let mut row: Vec<Option<Acc>> = if dense { Vec::new() } else { vec![None; width] };
        for k in 0..n {
            let step: &mut [Option<Acc>] = if dense {
                let step = &mut table[k * width..(k + 1) * width];
                if step.iter().all(Option::is_none) {
                    continue;
                }
                step
            } else {
                if by_step[k].is_empty() {
                    continue;
                }
                for (g, acc) in std::mem::take(&mut by_step[k]) {
                    merge_into(&mut row[g], acc);
                }
                &mut row
            };
            self.ctx.check_interrupt()?;
            let q = param.map_or(0.0, |p| super::labels_util::at_step(p, k));
            self.finish_step(&op, self.ts(k), q, name_in_group, step, &mut out);
        }
        out.retain(|s| !s.pts.is_empty());
        Ok(out)
    }

    /// `count_values` from per-shard counts: the counts of one output series at one step
    /// add up (they are integers, so exactly); the series are ordered by where the single
    /// node would have created them (first step, then first input series).
    fn merge_counts(&self, outs: Vec<FragmentOutput>) -> Result<Vec<StepSeries>, QueryError> {
        let mut index: HashMap<Labels, usize> = HashMap::new();
        let mut out: Vec<((i64, Labels), StepSeries)> = Vec::new();
        for o in outs {
            let FragmentData::Groups(groups) = o.data else {
                return Err(QueryError::internal("a shard answered the count_values fragment without counts"));
            };
            for g in groups {
                let created = (g.steps.first().map(|s| s.t).unwrap_or(i64::MAX), g.first);
                let pts = g.steps.iter().map(|s| (s.t, s.count));
                match index.get(&g.labels) {
                    Some(&i) => {
                        let (key, s) = &mut out[i];
                        if created < *key {
                            *key = created;
                        }
                        s.pts.extend(pts);
                    }
                    None => {
                        index.insert(g.labels.clone(), out.len());
                        let mut s = StepSeries::new(g.labels, false);
                        s.pts.extend(pts);
                        out.push((created, s));
                    }
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        let mut series: Vec<StepSeries> = out.into_iter().map(|(_, s)| s).collect();
        for s in series.iter_mut() {
            s.pts.sort_by_key(|p| p.0);
            s.pts.dedup_by(|later, first| {
                if later.0 == first.0 {
                    first.1 += later.1;
                    true
                } else {
                    false
                }
            });
        }
        Ok(series)
    }

    /// The index of grid timestamp `t`; a shard answering off this grid is a bug.
    fn step_index(&self, t: i64) -> Result<usize, QueryError> {
        let k = (t - self.start) / self.step;
        if t < self.start || t > self.end || (t - self.start) % self.step != 0 {
            return Err(QueryError::internal(format!(
                "a shard answered for t={t}, which is not on the fragment's grid"
            )));
        }
        Ok(k as usize)
    }

    /// A shard's partial aggregation: each group's accumulator at every step with input,
    /// not finished.
    fn partial_groups(&self, a: &AggregateExpr, input: &[StepSeries]) -> Result<Vec<GroupPartial>, QueryError> {
        let op = a.op.to_string();
        let (series_group, glabels, first) = Grouping::of(a).assign(input);
        let mut groups: Vec<GroupPartial> = glabels
            .into_iter()
            .zip(first)
            .map(|(labels, f)| GroupPartial { labels, first: input[f].labels.clone(), steps: Vec::new() })
            .collect();
        self.fold_steps(&op, input, &series_group, groups.len(), |_, _, t, accs| {
            for (g, acc) in accs.iter_mut().enumerate() {
                if let Some(acc) = acc.take() {
                    groups[g].steps.push(acc.into_partial(t));
                }
            }
            Ok(())
        })?;
        groups.retain(|g| !g.steps.is_empty());
        Ok(groups)
    }
}

/// Each group's first input series that has a float value (not only native histograms,
/// which `topk`/`bottomk` skip), as a group partial without steps.
fn first_float_series(a: &AggregateExpr, input: &[StepSeries]) -> Vec<GroupPartial> {
    let grouping = Grouping::of(a);
    let mut seen: HashSet<Labels> = HashSet::new();
    let mut out = Vec::new();
    for s in input {
        if s.pts.iter().all(|p| is_histogram_marker(p.1)) {
            continue;
        }
        let g = grouping.labels(&s.labels);
        if seen.insert(g.clone()) {
            out.push(GroupPartial { labels: g, first: s.labels.clone(), steps: Vec::new() });
        }
    }
    out
}

/// A shard's per-series result as the evaluator's series.
fn series_of(d: FragmentData) -> Result<Vec<StepSeries>, QueryError> {
    match d {
        FragmentData::Series(v) => Ok(v
            .into_iter()
            .map(|s| StepSeries {
                labels: s.labels,
                drop_name: s.drop_name,
                pts: s.points.into_iter().map(|p| (p.t, p.v)).collect(),
            })
            .collect()),
        FragmentData::Groups(_) | FragmentData::Candidates { .. } => {
            Err(QueryError::internal("a shard answered a per-series fragment with partial aggregates"))
        }
    }
}

fn to_partial_series(v: Vec<StepSeries>) -> Vec<PartialSeries> {
    v.into_iter()
        .map(|s| PartialSeries {
            labels: s.labels,
            drop_name: s.drop_name,
            points: s.pts.into_iter().map(|(t, v)| Sample { t, v }).collect(),
        })
        .collect()
}

impl Engine {
    /// Evaluates `frag` over `q` (one shard's data): what a shard does with a fragment
    /// the querier's planner sent, in process or behind an RPC. The node is found by its
    /// path in the parsed query text; the grid, the query's times, the lookback and the
    /// sample budget all come from the fragment. Bad fragments (an unparsable query, a
    /// path that names no node or a node of the wrong kind, an empty or oversized grid)
    /// are `bad_data` errors.
    pub fn eval_fragment(
        &self,
        q: &dyn Queryable,
        frag: &Fragment,
        ctl: &QueryOptions,
    ) -> Result<FragmentOutput, QueryError> {
        if frag.step <= 0 || frag.end < frag.start {
            return Err(QueryError::bad_data(format!(
                "fragment grid {}..{} step {} is empty",
                frag.start, frag.end, frag.step
            )));
        }
        super::bounds::check_time("start", frag.start)?;
        super::bounds::check_time("end", frag.end)?;
        let ast = parse_with_limits(&frag.query, &self.opts.text)?;
        let node = node_at(&ast, &frag.path)
            .ok_or_else(|| QueryError::bad_data(format!("fragment path {:?} names no node of the query", frag.path)))?;
        let eo = EngineOptions {
            lookback_delta_ms: frag.lookback_delta_ms,
            // A querier that does not send it (0) gets this engine's.
            default_subquery_step_ms: if frag.default_subquery_step_ms > 0 {
                frag.default_subquery_step_ms
            } else {
                self.opts.default_subquery_step_ms
            },
            max_samples: usize::try_from(frag.max_samples).unwrap_or(usize::MAX),
            ..self.opts.clone()
        };
        let mut ctx = Ctx::new(&eo, ctl, &frag.query, frag.query_start, frag.query_end);
        ctx.query_step = frag.query_step;
        ctx.selectors = hints::collect(&ast);
        ctx.check_grid((frag.end - frag.start) / frag.step + 1)?;
        let mut ev = Evaluator::new(q, &ctx, frag.start, frag.end, frag.step);
        let mut selects = Vec::new();
        ev.plan(node, &mut selects);
        if !selects.is_empty() {
            q.prepare(&selects, ctl);
        }
        let data = match (frag.mode, node) {
            (FragmentMode::Concat, _) => FragmentData::Series(to_partial_series(ev.eval_vector(node)?)),
            (FragmentMode::Partial, Expr::Aggregate(a)) => {
                let op = a.op.to_string();
                let partial = matches!(op.as_str(), "sum" | "count" | "group" | "min" | "max" | "avg" | "quantile");
                if let Some(groups) = if partial { ev.partial_streamed(a)? } else { None } {
                    let (warnings, infos) = ctx.into_annotations();
                    return Ok(FragmentOutput { data: FragmentData::Groups(groups), warnings, infos });
                }
                if matches!(op.as_str(), "topk" | "bottomk") && frag.param.len() == ev.n_steps() {
                    if let Some((series, groups)) = ev.top_streamed(a, &frag.param)? {
                        let (warnings, infos) = ctx.into_annotations();
                        let data = FragmentData::Candidates { series: to_partial_series(series), groups };
                        return Ok(FragmentOutput { data, warnings, infos });
                    }
                }
                let input = ev.eval_vector(&a.expr)?;
                match op.as_str() {
                    "topk" | "bottomk" => {
                        let k = frag.param.clone();
                        if k.len() != ev.n_steps() {
                            return Err(QueryError::bad_data(format!(
                                "fragment has {} parameter values for {} steps",
                                k.len(),
                                ev.n_steps()
                            )));
                        }
                        let groups = first_float_series(a, &input);
                        match ev.aggregate(a, Some(k), None, input)? {
                            Val::Vector(v) => FragmentData::Candidates { series: to_partial_series(v), groups },
                            other => return Err(QueryError::internal(format!("{op} returned {}", other.type_name()))),
                        }
                    }
                    "count_values" => {
                        let label = frag
                            .string_param
                            .clone()
                            .ok_or_else(|| QueryError::bad_data("count_values fragment without its label"))?;
                        FragmentData::Groups(ev.count_values_partial(a, &label, &input)?)
                    }
                    "sum" | "count" | "group" | "min" | "max" | "avg" | "quantile" => {
                        FragmentData::Groups(ev.partial_groups(a, &input)?)
                    }
                    _ => {
                        return Err(QueryError::bad_data(format!("{op} cannot be evaluated as a partial aggregation")))
                    }
                }
            }
            (FragmentMode::Partial, _) => {
                return Err(QueryError::bad_data("a partial fragment must name an aggregation"));
            }
        };
        let (warnings, infos) = ctx.into_annotations();
        Ok(FragmentOutput { data, warnings, infos })
    }
}

/// Merges a shard's state of a group at a step into what earlier shards gave.
fn merge_into(slot: &mut Option<Acc>, acc: Acc) {
    match slot {
        Some(have) => have.merge(acc),
        None => *slot = Some(acc),
    }
}

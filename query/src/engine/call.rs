//! Function calls: argument evaluation, dispatch to the pure functions in
//! `crate::functions`, label handling (delayed `__name__` removal) and annotations.

use std::collections::HashMap;

use promql_parser::label::MatchOp as PMatchOp;
use promql_parser::parser::{Call, Expr};

use super::binary::StepCursor;
use super::eval::{Evaluator, RangeSeries};
use super::labels_util::{self, is_histogram_marker};
use super::types::{StepSeries, Val};
use crate::error::QueryError;
use crate::functions;
use crate::functions::format::parse_go_float;
use crate::functions::order;
use crate::functions::range::over_time::{BlockExtremes, ExactSums, PairCounts, SlidingExtreme};
use crate::functions::range::rate::{counter_change, RateWindows, ResetIndex};
use crate::functions::range::RangeFn;
use tessera_model::{holds_marker, Label, Labels, HISTOGRAM_MARKER_BITS, METRIC_NAME};

/// `max_over_time`/`min_over_time` slide over windows (`SlidingExtreme`) instead of
/// scanning each when a sample sits in at least this many windows (range ÷ step); below
/// it, a range that is a whole number of steps is cut into step-long blocks
/// (`BlockExtremes`).
const SLIDE_FROM_OVERLAP: i64 = 16;

/// Time functions: with no argument they read the evaluation time.
const TIME_FNS: &[&str] =
    &["day_of_month", "day_of_week", "day_of_year", "days_in_month", "hour", "minute", "month", "year"];

fn unwrap_parens(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => unwrap_parens(&p.expr),
        other => other,
    }
}

impl Evaluator<'_> {
    pub(crate) fn eval_call(&mut self, c: &Call) -> Result<Val, QueryError> {
        let name = c.func.name;
        let args: Vec<&Expr> = c.args.args.iter().map(|b| b.as_ref()).collect();
        let n = self.n_steps();
        let arg = |i: usize| -> Result<&Expr, QueryError> {
            args.get(i)
                .copied()
                .ok_or_else(|| QueryError::bad_data(format!("wrong number of arguments for function {name}()")))
        };
        match name {
            "time" => Ok(Val::Scalar((0..n).map(|k| self.ts(k) as f64 / 1000.0).collect())),
            "pi" => Ok(Val::Scalar(vec![std::f64::consts::PI; n])),
            // Experimental query-parameter functions (seconds).
            "step" => Ok(Val::Scalar(vec![self.ctx.query_step as f64 / 1000.0; n])),
            "range" => Ok(Val::Scalar(vec![(self.ctx.query_end - self.ctx.query_start) as f64 / 1000.0; n])),
            "start" => Ok(Val::Scalar(vec![self.ctx.query_start as f64 / 1000.0; n])),
            "end" => Ok(Val::Scalar(vec![self.ctx.query_end as f64 / 1000.0; n])),
            "vector" => {
                let s = self.eval_scalar(arg(0)?)?;
                let mut ss = StepSeries::new(Labels::default(), false);
                ss.pts = s.into_iter().enumerate().map(|(k, v)| (self.ts(k), v)).collect();
                Ok(Val::Vector(vec![ss]))
            }
            "scalar" => {
                let v = self.eval_vector(arg(0)?)?;
                let mut cur = StepCursor::new(&v);
                let mut present = Vec::new();
                let mut out = Vec::with_capacity(n);
                for k in 0..n {
                    cur.at(&v, self.ts(k), &mut present);
                    // Only float samples count; a histogram is not a scalar.
                    present.retain(|p| !is_histogram_marker(p.1));
                    out.push(if present.len() == 1 { present[0].1 } else { f64::NAN });
                }
                Ok(Val::Scalar(out))
            }
            "timestamp" => {
                let a = arg(0)?;
                let mut v = match unwrap_parens(a) {
                    Expr::VectorSelector(vs) => self.eval_vector_selector(vs, true)?,
                    _ => {
                        let mut v = self.eval_vector(a)?;
                        for s in v.iter_mut() {
                            for p in s.pts.iter_mut() {
                                p.1 = p.0 as f64 / 1000.0;
                            }
                        }
                        v
                    }
                };
                v.iter_mut().for_each(|s| s.drop_name = true);
                Ok(Val::Vector(v))
            }
            "absent" => {
                let a = arg(0)?;
                let v = self.eval_vector(a)?;
                let labels = absent_labels(a);
                let mut cur = StepCursor::new(&v);
                let mut present = Vec::new();
                let mut ss = StepSeries::new(labels, false);
                for k in 0..n {
                    cur.at(&v, self.ts(k), &mut present);
                    if present.is_empty() {
                        ss.pts.push((self.ts(k), 1.0));
                    }
                }
                Ok(Val::Vector(if ss.pts.is_empty() { vec![] } else { vec![ss] }))
            }
            "absent_over_time" => {
                let a = arg(0)?;
                let ra = self.eval_range_arg(a)?;
                let mut seen = vec![false; n];
                self.for_each_window(&ra, |_, _, k, _, _| {
                    if let Some(s) = seen.get_mut(k) {
                        *s = true;
                    }
                    Ok(())
                })?;
                let mut ss = StepSeries::new(absent_labels(a), false);
                for (k, s) in seen.iter().enumerate() {
                    if !s {
                        ss.pts.push((self.ts(k), 1.0));
                    }
                }
                Ok(Val::Vector(if ss.pts.is_empty() { vec![] } else { vec![ss] }))
            }
            "label_replace" => {
                let dst = self.eval_string(arg(1)?)?;
                let repl = self.eval_string(arg(2)?)?;
                let src = self.eval_string(arg(3)?)?;
                let re = self.eval_string(arg(4)?)?;
                // As Prometheus' evalLabelReplace: the regex is compiled once per call and
                // both it and `dst` are checked before the vector is evaluated.
                let re = functions::labels::compile_replace_regex(&re)?;
                functions::labels::check_replace_dst(&dst)?;
                if self.ctx.has_invalid_utf8(&dst) {
                    return Err(QueryError::execution(format!(
                        "invalid destination label name in label_replace(): {dst}"
                    )));
                }
                let v = self.eval_vector(arg(0)?)?;
                let mut out = Vec::with_capacity(v.len());
                for mut s in v {
                    let nl = functions::labels::label_replace_with(&s.labels, &dst, &repl, &src, &re)?;
                    if dst == METRIC_NAME {
                        s.drop_name = false;
                    }
                    s.labels = nl;
                    out.push(s);
                }
                Ok(Val::Vector(merge_checked(out)?))
            }
            "label_join" => {
                let v = self.eval_vector(arg(0)?)?;
                let dst = self.eval_string(arg(1)?)?;
                let sep = self.eval_string(arg(2)?)?;
                let mut srcs = Vec::new();
                for a in args.iter().skip(3) {
                    srcs.push(self.eval_string(a)?);
                }
                let mut out = Vec::with_capacity(v.len());
                for mut s in v {
                    let nl = functions::labels::label_join(&s.labels, &dst, &sep, &srcs)?;
                    if dst == METRIC_NAME {
                        s.drop_name = false;
                    }
                    s.labels = nl;
                    out.push(s);
                }
                Ok(Val::Vector(merge_checked(out)?))
            }
            "sort" | "sort_desc" | "sort_by_label" | "sort_by_label_desc" => {
                let mut v = self.eval_vector(arg(0)?)?;
                // sort* ignore native histograms.
                for s in v.iter_mut() {
                    s.pts.retain(|p| !is_histogram_marker(p.1));
                }
                v.retain(|s| !s.pts.is_empty());
                let mut by = Vec::new();
                for a in args.iter().skip(1) {
                    by.push(self.eval_string(a)?);
                }
                if n > 1 {
                    let pos = self.ctx.pos_of(name, 0);
                    self.ctx.warn(format!(
                        "PromQL warning: sort is ineffective for range queries since results are always ordered by labels {pos}"
                    ));
                    return Ok(Val::Vector(v));
                }
                let val = |s: &StepSeries| s.pts.first().map(|p| p.1).unwrap_or(f64::NAN);
                match name {
                    "sort" => v.sort_by(|a, b| order::sort_asc_cmp(val(a), val(b))),
                    "sort_desc" => v.sort_by(|a, b| order::sort_desc_cmp(val(a), val(b))),
                    _ => {
                        let desc = name == "sort_by_label_desc";
                        v.sort_by(|a, b| order::sort_by_label_cmp(&a.labels, &b.labels, &by, desc));
                    }
                }
                Ok(Val::Vector(v))
            }
            "histogram_quantile" => {
                let q = self.eval_scalar(arg(0)?)?;
                let v = self.eval_vector(arg(1)?)?;
                self.histogram_quantile(&q, v).map(Val::Vector)
            }
            "histogram_quantiles" => {
                let v = self.eval_vector(arg(0)?)?;
                let label = self.eval_string(arg(1)?)?;
                let mut qs = Vec::new();
                for a in args.iter().skip(2) {
                    qs.push(self.eval_scalar(a)?);
                }
                let mut out = Vec::new();
                for q in &qs {
                    let res = self.histogram_quantile(q, v.clone())?;
                    let qlabel = functions::format::format_openmetrics_float(q[0]);
                    for mut s in res {
                        s.labels = functions::labels::set_label(&s.labels, &label, &qlabel);
                        out.push(s);
                    }
                }
                Ok(Val::Vector(merge_checked(out)?))
            }
            "histogram_count" | "histogram_sum" | "histogram_avg" | "histogram_stddev" | "histogram_stdvar" => {
                // These read native histograms only; float samples are ignored.
                let _ = self.eval_vector(arg(0)?)?;
                Ok(Val::Vector(Vec::new()))
            }
            "histogram_fraction" => {
                let lo = self.eval_scalar(arg(0)?)?;
                let hi = self.eval_scalar(arg(1)?)?;
                let v = self.eval_vector(arg(2)?)?;
                self.classic_buckets(v, |k, b| {
                    (
                        functions::histogram::bucket_fraction(
                            labels_util::at_step(&lo, k),
                            labels_util::at_step(&hi, k),
                            b,
                        ),
                        false,
                    )
                })
                .map(Val::Vector)
            }
            "min_of" | "max_of" => {
                let a = self.eval_scalar(arg(0)?)?;
                let b = self.eval_scalar(arg(1)?)?;
                let out = a
                    .iter()
                    .zip(&b)
                    .map(|(&x, &y)| {
                        if x.is_nan() || y.is_nan() {
                            f64::NAN
                        } else if name == "min_of" {
                            x.min(y)
                        } else {
                            x.max(y)
                        }
                    })
                    .collect();
                Ok(Val::Scalar(out))
            }
            // The experimental info() joins info metrics (target_info) into its input;
            // refusing it is better than silently returning the input unenriched.
            "info" => Err(QueryError::bad_data("function \"info\" is not supported")),
            "round" | "clamp" | "clamp_min" | "clamp_max" => {
                let v = self.eval_vector(arg(0)?)?;
                let sargs = self.map_args(name, &args)?;
                self.map_points(v, name, &sargs)
            }
            _ if TIME_FNS.contains(&name) => {
                if args.is_empty() {
                    let mut ss = StepSeries::new(Labels::default(), true);
                    for k in 0..n {
                        let t = self.ts(k);
                        if let Some(v) = functions::math::eval_scalar_fn(name, t as f64 / 1000.0, &[]) {
                            ss.pts.push((t, v));
                        }
                    }
                    Ok(Val::Vector(vec![ss]))
                } else {
                    let v = self.eval_vector(arg(0)?)?;
                    self.map_points(v, name, &[])
                }
            }
            _ if functions::range::is_range_fn(name) => self.eval_range_fn(name, &args),
            _ => {
                if !functions::math::is_scalar_fn(name) {
                    return Err(QueryError::bad_data(format!("unknown function with name {name:?}")));
                }
                let v = self.eval_vector(arg(0)?)?;
                self.map_points(v, name, &[])
            }
        }
    }

    /// Applies a per-sample math function; the result drops the metric name.
    fn map_points(&self, mut v: Vec<StepSeries>, name: &str, sargs: &[Vec<f64>]) -> Result<Val, QueryError> {
        for s in v.iter_mut() {
            self.ctx.check_interrupt()?;
            self.map_series(s, name, sargs)?;
        }
        v.retain(|s| !s.pts.is_empty());
        Ok(Val::Vector(v))
    }

    /// [`Evaluator::map_points`] on one series (which may be left without points).
    pub(crate) fn map_series(&self, s: &mut StepSeries, name: &str, sargs: &[Vec<f64>]) -> Result<(), QueryError> {
        let mut a = vec![0.0; sargs.len()];
        s.drop_name = true;
        let mut pts = Vec::with_capacity(s.pts.len());
        for &(t, x) in &s.pts {
            // Float functions drop native histogram samples.
            if is_histogram_marker(x) {
                continue;
            }
            let k = ((t - self.start) / self.step) as usize;
            for (i, sa) in sargs.iter().enumerate() {
                a[i] = labels_util::at_step(sa, k);
            }
            // clamp with min > max returns no sample.
            if name == "clamp" && a.len() == 2 && a[0] > a[1] {
                continue;
            }
            match functions::math::eval_scalar_fn(name, x, &a) {
                Some(y) => pts.push((t, y)),
                None => return Err(QueryError::bad_data(format!("unknown function with name {name:?}"))),
            }
        }
        s.pts = pts;
        Ok(())
    }

    /// The scalar arguments of a per-sample function call after its vector (`round`'s
    /// nearest, 1 when left out; `clamp*`'s bounds), one value per step.
    pub(crate) fn map_args(&mut self, name: &str, args: &[&Expr]) -> Result<Vec<Vec<f64>>, QueryError> {
        let mut sargs: Vec<Vec<f64>> = Vec::new();
        for a in args.iter().skip(1) {
            sargs.push(self.eval_scalar(a)?);
        }
        if name == "round" && sargs.is_empty() {
            sargs.push(vec![1.0; self.n_steps()]);
        }
        Ok(sargs)
    }

    fn eval_range_fn(&mut self, name: &'static str, args: &[&Expr]) -> Result<Val, QueryError> {
        let (plan, range_expr) = self.range_fn_plan(name, args)?;
        let ra = self.eval_range_arg(range_expr)?;
        let mut out = Vec::with_capacity(ra.series.len());
        for s in ra.series {
            self.ctx.check_interrupt()?;
            out.extend(self.apply_range_fn(&plan, s, ra.range, ra.offset, ra.at)?);
        }
        Ok(Val::Vector(out))
    }

    /// Everything a range function needs before it sees a series: its scalar arguments
    /// (evaluated here, before the range argument, as Prometheus does) and its rules;
    /// also the range argument's expression.
    pub(crate) fn range_fn_plan<'e>(
        &mut self,
        name: &'static str,
        args: &[&'e Expr],
    ) -> Result<(RangeFnPlan, &'e Expr), QueryError> {
        let (range_idx, scalar_idx) = range_fn_args(name);
        let mut scalars = Vec::new();
        for &i in scalar_idx {
            let e = args
                .get(i)
                .ok_or_else(|| QueryError::bad_data(format!("wrong number of arguments for function {name}()")))?;
            scalars.push(self.eval_scalar(e)?);
        }
        let range_expr = args
            .get(range_idx)
            .ok_or_else(|| QueryError::bad_data(format!("wrong number of arguments for function {name}()")))?;
        if name == "quantile_over_time" {
            self.warn_quantile_params(name, &scalars[0], true);
        }
        // Resolved once: the per-window call is then a plain match.
        let func = functions::range::RangeFn::from_name(name)
            .ok_or_else(|| QueryError::bad_data(format!("unknown function with name {name:?}")))?;
        Ok((RangeFnPlan { name, func, scalars }, range_expr))
    }

    /// `rate` and `increase` note a metric whose name does not say it is a counter.
    fn note_if_not_counter(&self, plan: &RangeFnPlan, labels: &Labels) {
        if matches!(plan.func, RangeFn::Rate | RangeFn::Increase) {
            if let Some(metric) = labels.get(METRIC_NAME) {
                if !["_total", "_sum", "_count", "_bucket"].iter().any(|suf| metric.ends_with(suf)) {
                    self.ctx.info_not_counter(metric);
                }
            }
        }
    }

    /// `sum`'s shortcut for `rate`/`increase` ([`functions::range::rate_sums`]): a
    /// series whose windows are those of a kept table (another series with its
    /// timestamps built it; tables are kept only where windows overlap, see
    /// `range_fn_by_helper`) is offered to `take`, with the table and its number, which
    /// adds it to its group's sums or refuses it. Returns the series when it was not
    /// taken (the caller applies the function window by window).
    pub(crate) fn offer_rate(
        &self,
        plan: &RangeFnPlan,
        s: RangeSeries,
        range: i64,
        offset: i64,
        at: Option<i64>,
        take: impl FnOnce(&Labels, usize, &RateWindows, &[tessera_model::Sample]) -> bool,
    ) -> Result<Option<RangeSeries>, QueryError> {
        if !plan.sums_per_table() {
            return Ok(Some(s));
        }
        let mut cache = self.rate_windows.borrow_mut();
        let Some((id, table)) = cache.kept(&s.samples, (range, offset, at, plan.func == RangeFn::Rate)) else {
            return Ok(Some(s));
        };
        // As the window-by-window way: its walk would have counted the samples.
        self.ctx.check_samples(self.ctx.cur_samples() + table.most())?;
        if !take(&s.labels, id, table, &s.samples) {
            return Ok(Some(s));
        }
        self.note_if_not_counter(plan, &s.labels);
        // Given back for storage to decode the next series into.
        drop(tessera_model::spare::GiveBack(s.samples));
        Ok(None)
    }

    /// One series of a range function's result: `plan`'s function over every step's
    /// window of `s`; `None` when no step has a value.
    pub(crate) fn apply_range_fn(
        &self,
        plan: &RangeFnPlan,
        s: RangeSeries,
        range: i64,
        offset: i64,
        at: Option<i64>,
    ) -> Result<Option<StepSeries>, QueryError> {
        let name = plan.name;
        self.note_if_not_counter(plan, &s.labels);
        let keep_name = matches!(name, "last_over_time" | "first_over_time");
        let mut out = StepSeries::with_room(s.labels, s.drop_name || !keep_name, self.n_steps());
        let mut fargs = vec![0.0; plan.scalars.len()];
        // Functions that look at every sample, float or histogram.
        let all_types = matches!(
            name,
            "count_over_time"
                | "present_over_time"
                | "last_over_time"
                | "first_over_time"
                | "ts_of_last_over_time"
                | "ts_of_first_over_time"
        );
        // Functions that refuse a mix of floats and histograms (warning, no result);
        // the others ignore the histograms (info).
        let refuse_mix = matches!(name, "rate" | "increase" | "delta" | "sum_over_time" | "avg_over_time");
        let mut floats_buf: Vec<tessera_model::Sample> = Vec::new();
        let ctx = self.ctx;
        // Given back when this series is done, for storage to decode the next one into.
        let samples = tessera_model::spare::GiveBack(s.samples);
        let samples = &samples.0[..];
        // A per-series fact that spares each window a scan of its samples (windows
        // overlap, so a scan per window reads every sample range/step times): whether
        // the series has a native histogram sample at all.
        let any_histogram = !all_types && holds_marker(samples.iter().map(|s| s.v), HISTOGRAM_MARKER_BITS);
        if !any_histogram && self.range_fn_by_helper(plan.func, samples, range, offset, at, &mut out.pts)? {
            return Ok((!out.pts.is_empty()).then_some(out));
        }
        let is_predict_linear = name == "predict_linear";
        self.window_bounds_of(samples, range, offset, at, |lo, hi, k, ws, we| {
            for (i, sc) in plan.scalars.iter().enumerate() {
                fargs[i] = labels_util::at_step(sc, k);
            }
            let mut win = &samples[lo..hi];
            if any_histogram && win.iter().any(|s| is_histogram_marker(s.v)) {
                floats_buf.clear();
                floats_buf.extend(win.iter().filter(|s| !is_histogram_marker(s.v)).copied());
                if floats_buf.is_empty() {
                    // Only histograms: the functions that map histograms to histograms
                    // produce one (kept opaque); the others produce nothing.
                    if matches!(name, "rate" | "increase" | "delta" | "irate" | "idelta" | "sum_over_time" | "avg_over_time") {
                        out.pts.push((self.ts(k), f64::from_bits(HISTOGRAM_MARKER_BITS)));
                    }
                    return Ok(());
                }
                let metric = out.labels.get(METRIC_NAME).unwrap_or("");
                let p = ctx.pos_of_first_arg(name);
                if refuse_mix {
                    ctx.warn(format!(
                        "PromQL warning: encountered a mix of histograms and floats for metric name {metric:?} {p}"
                    ));
                    return Ok(());
                }
                ctx.info(format!(
                    "PromQL info: ignored histograms in a range containing both floats and histograms for metric name {metric:?} {p}"
                ));
                win = &floats_buf;
            }
            // predict_linear extrapolates from the evaluation time, not from the
            // window end (they differ under `@` and `offset`).
            let we = if is_predict_linear { self.ts(k) } else { we };
            if let Some(v) = plan.func.eval(win, ws, we, &fargs)? {
                out.pts.push((self.ts(k), v));
            }
            Ok(())
        })?;
        Ok((!out.pts.is_empty()).then_some(out))
    }

    /// Range functions whose windows a per-series helper answers without walking each
    /// window's samples (windows overlap: at a 15 s step, `rate(x[5m])` would walk every
    /// sample 20 times), each the walk's answer bit for bit: `rate`/`increase`
    /// (`ResetIndex` when windows overlap; the windows' bounds and factors from a table
    /// shared by series with the same timestamps: `RateWindows`),
    /// `changes`/`resets` (`PairCounts`), `sum`/`avg_over_time` over an integer series
    /// (`ExactSums`), `max`/`min_over_time` over windows that overlap enough
    /// (`SlidingExtreme`) or are whole numbers of steps (`BlockExtremes`). Pushes a float
    /// series' points into `pts` and returns true, or returns false when the function or
    /// the series does not qualify.
    fn range_fn_by_helper(
        &self,
        func: RangeFn,
        samples: &[tessera_model::Sample],
        range: i64,
        offset: i64,
        at: Option<i64>,
        pts: &mut Vec<(i64, f64)>,
    ) -> Result<bool, QueryError> {
        let overlap = if self.n_steps() > 1 { range / self.step.max(1) } else { 0 };
        match func {
            RangeFn::Rate | RangeFn::Increase => {
                // Windows that overlap share an index of the resets; others (an instant
                // query's one window, a step longer than the range) are scanned.
                let resets = (overlap >= 2).then(|| ResetIndex::new(samples));
                let is_rate = func == RangeFn::Rate;
                let base = self.ctx.cur_samples();
                let change = |lo: usize, hi: usize| match &resets {
                    Some(resets) => resets.change(samples, lo, hi),
                    None => counter_change(&samples[lo..hi]),
                };
                let mut cache = self.rate_windows.borrow_mut();
                // A table is worth keeping when windows overlap: then a series pays for
                // its windows more than for its samples. Otherwise it is built and used.
                let keep = overlap >= 2;
                let (windows, kept) = cache.windows_of(samples, (range, offset, at, is_rate), keep, |w| {
                    let (first_start, step) = self.window_starts(range, offset, at);
                    let steps = self.steps_seeing(samples, range, offset, at).len();
                    w.start(first_start, step, range, is_rate, steps);
                    self.window_bounds_of(samples, range, offset, at, |lo, hi, k, _, we| {
                        w.push(samples, lo, hi, k, we, || change(lo, hi));
                        Ok(())
                    })?;
                    w.finish(samples);
                    Ok::<_, QueryError>(())
                })?;
                pts.reserve(windows.len());
                if kept {
                    // The windows' walk would have counted them.
                    self.ctx.check_samples(base + windows.most())?;
                    pts.extend(windows.counter_values(samples, change).map(|(k, v)| (self.ts(k), v)));
                } else {
                    pts.extend(windows.values().map(|(k, v)| (self.ts(k), v)));
                }
            }
            RangeFn::Changes | RangeFn::Resets if overlap >= 2 => {
                let counts = PairCounts::new(samples, func == RangeFn::Resets);
                self.window_bounds_of(samples, range, offset, at, |lo, hi, k, _, _| {
                    pts.push((self.ts(k), counts.count(lo, hi)));
                    Ok(())
                })?;
            }
            RangeFn::SumOverTime | RangeFn::AvgOverTime if overlap >= 2 => {
                let Some(sums) = ExactSums::new(samples) else { return Ok(false) };
                let avg = func == RangeFn::AvgOverTime;
                self.window_bounds_of(samples, range, offset, at, |lo, hi, k, _, _| {
                    pts.push((self.ts(k), if avg { sums.avg(lo, hi) } else { sums.sum(lo, hi) }));
                    Ok(())
                })?;
            }
            RangeFn::MaxOverTime | RangeFn::MinOverTime
                if (2..SLIDE_FROM_OVERLAP).contains(&overlap) && at.is_none() && range % self.step == 0 =>
            {
                let mut blocks = BlockExtremes::new(func == RangeFn::MaxOverTime, overlap as usize);
                self.window_bounds_of(samples, range, offset, at, |lo, hi, k, _, we| {
                    pts.push((self.ts(k), blocks.window(samples, lo, hi, k, we, self.step)));
                    Ok(())
                })?;
            }
            RangeFn::MaxOverTime | RangeFn::MinOverTime if overlap >= SLIDE_FROM_OVERLAP => {
                let mut extreme = SlidingExtreme::new(func == RangeFn::MaxOverTime);
                self.window_bounds_of(samples, range, offset, at, |lo, hi, k, _, _| {
                    pts.push((self.ts(k), extreme.slide(samples, lo, hi)));
                    Ok(())
                })?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// `histogram_quantile` over classic buckets.
    fn histogram_quantile(&mut self, q: &[f64], v: Vec<StepSeries>) -> Result<Vec<StepSeries>, QueryError> {
        self.warn_quantile_params("histogram_quantile", q, true);
        self.classic_buckets(v, |k, b| functions::histogram::bucket_quantile(labels_util::at_step(q, k), b))
    }

    /// Groups classic histogram buckets (series that differ only in `le`) and calls
    /// `f(step, buckets)` per group and step; `f` returns the value and whether the
    /// buckets had to be fixed for monotonicity.
    fn classic_buckets(
        &mut self,
        v: Vec<StepSeries>,
        mut f: impl FnMut(usize, &mut Vec<(f64, f64)>) -> (f64, bool),
    ) -> Result<Vec<StepSeries>, QueryError> {
        let le_name = ["le".to_string()];
        // Group of each series (None when `le` is missing or malformed).
        let mut gindex: HashMap<Labels, usize> = HashMap::new();
        let mut out: Vec<StepSeries> = Vec::new();
        let mut series_info: Vec<Option<(usize, f64)>> = Vec::with_capacity(v.len());
        for s in &v {
            // A native histogram series has no `le` and needs none.
            if s.pts.iter().all(|p| is_histogram_marker(p.1)) {
                series_info.push(None);
                continue;
            }
            let le = s.labels.get("le").unwrap_or("");
            match parse_go_float(le) {
                Some(ub) => {
                    let key = labels_util::drop(&s.labels, &le_name);
                    let g = *gindex.entry(key.clone()).or_insert_with(|| {
                        out.push(StepSeries::new(key, true));
                        out.len() - 1
                    });
                    series_info.push(Some((g, ub)));
                }
                None => {
                    let metric = s.labels.get(METRIC_NAME).unwrap_or("");
                    let p = self.ctx.pos_of(metric, 0);
                    self.ctx.warn(format!(
                        "PromQL warning: bucket label \"le\" is missing or has a malformed value of {le:?} for metric name {metric:?} {p}"
                    ));
                    series_info.push(None);
                }
            }
        }
        let mut cur = StepCursor::new(&v);
        let mut present = Vec::new();
        let mut buckets: Vec<Vec<(f64, f64)>> = vec![Vec::new(); out.len()];
        let mut native_out: HashMap<usize, usize> = HashMap::new();
        let mut extra: Vec<StepSeries> = Vec::new();
        for k in 0..self.n_steps() {
            self.ctx.check_interrupt()?;
            let t = self.ts(k);
            cur.at(&v, t, &mut present);
            for &(i, val) in &present {
                if is_histogram_marker(val) {
                    // A native histogram gives one (opaque) result of its own.
                    let idx = *native_out.entry(i).or_insert_with(|| {
                        extra.push(StepSeries::new(v[i].labels.clone(), true));
                        extra.len() - 1
                    });
                    extra[idx].pts.push((t, val));
                    continue;
                }
                if let Some((g, ub)) = series_info[i] {
                    buckets[g].push((ub, val));
                }
            }
            for (g, b) in buckets.iter_mut().enumerate() {
                if b.is_empty() {
                    continue;
                }
                let (res, forced) = f(k, b);
                if forced {
                    let metric = out[g].labels.get(METRIC_NAME).unwrap_or("").to_string();
                    let p = self.ctx.pos_of(&metric, 0);
                    self.ctx.info(format!(
                        "PromQL info: input to histogram_quantile needed to be fixed for monotonicity (see https://prometheus.io/docs/prometheus/latest/querying/functions/#histogram_quantile) for metric name {metric:?} {p}"
                    ));
                }
                out[g].pts.push((t, res));
                b.clear();
            }
        }
        out.extend(extra);
        out.retain(|s| !s.pts.is_empty());
        Ok(out)
    }
}

/// A range function's rules and evaluated scalar arguments (see
/// [`Evaluator::range_fn_plan`]).
pub(crate) struct RangeFnPlan {
    name: &'static str,
    func: functions::range::RangeFn,
    /// The scalar arguments' values per step, in argument order.
    scalars: Vec<Vec<f64>>,
}

impl RangeFnPlan {
    /// Whether the function is `rate` or `increase`, whose series a `sum` may add per
    /// table of windows ([`Evaluator::offer_rate`]).
    pub(crate) fn sums_per_table(&self) -> bool {
        matches!(self.func, RangeFn::Rate | RangeFn::Increase)
    }
}

/// Which argument of range function `name` is the range vector, and which are scalars.
pub(crate) fn range_fn_args(name: &str) -> (usize, &'static [usize]) {
    match name {
        "quantile_over_time" => (1, &[0]),
        "predict_linear" => (0, &[1]),
        "double_exponential_smoothing" | "holt_winters" => (0, &[1, 2]),
        _ => (0, &[]),
    }
}

/// The labels `absent()` reports: the equality matchers of a plain selector argument
/// (a label named twice is left out, as Prometheus does).
fn absent_labels(e: &Expr) -> Labels {
    let vs = match e {
        Expr::VectorSelector(vs) => vs,
        Expr::MatrixSelector(ms) => &ms.vs,
        _ => return Labels::default(),
    };
    let mut set: Vec<Label> = Vec::new();
    let mut has: Vec<String> = Vec::new();
    for m in &vs.matchers.matchers {
        if m.name == METRIC_NAME {
            continue;
        }
        if matches!(m.op, PMatchOp::Equal) && !has.contains(&m.name) {
            set.retain(|l| l.name != m.name);
            set.push(Label::new(m.name.as_str(), m.value.as_str()));
            has.push(m.name.clone());
        } else {
            set.retain(|l| l.name != m.name);
        }
    }
    Labels::from_pairs(set.into_iter().map(|l| (l.name, l.value)))
}

/// After a label function, two series may have become one label set: that is an error
/// when they overlap in time, and otherwise they are one series.
fn merge_checked(v: Vec<StepSeries>) -> Result<Vec<StepSeries>, QueryError> {
    let mut index: HashMap<(Labels, bool), usize> = HashMap::new();
    let mut out: Vec<StepSeries> = Vec::with_capacity(v.len());
    for s in v {
        let key = (s.labels.clone(), s.drop_name);
        match index.get(&key) {
            Some(&i) => {
                let merged = &mut out[i].pts;
                merged.extend(s.pts);
                merged.sort_by_key(|p| p.0);
                if merged.windows(2).any(|w| w[0].0 == w[1].0) {
                    return Err(QueryError::execution("vector cannot contain metrics with the same labelset"));
                }
            }
            None => {
                index.insert(key, out.len());
                out.push(s);
            }
        }
    }
    Ok(out)
}

//! Vector and matrix selectors: one `select` per selector for the whole query range,
//! then the lookback (instant) or window (range) logic per step.

use std::collections::BTreeMap;

use promql_parser::label::MatchOp as PMatchOp;
use promql_parser::parser::{MatrixSelector, VectorSelector};

use super::eval::{dur_ms, offset_ms, Evaluator, RangeArg, RangeSeries};
use super::types::StepSeries;
use crate::error::QueryError;
use crate::model::{SelectHints, Series};
use tessera_model::{holds_marker, is_stale_nan, Labels, MatchOp, Matcher, METRIC_NAME, STALE_NAN_BITS};

/// Compiles a selector's matchers (plus the metric name, which promql-parser keeps
/// apart) into the `Queryable` contract's matcher sets, one per `or` alternative: the
/// one place the parser's matchers become `tessera_model::Matcher`s, for the engine and
/// for the API's `match[]` parameters. Each matcher is compiled once and then tested
/// against every series. promql-parser has already checked the regexes in Rust's
/// syntax; one that Go's dialect refuses is [`tessera_model::Error::InvalidRegex`].
pub fn selector_matchers(vs: &VectorSelector) -> Result<Vec<Vec<Matcher>>, tessera_model::Error> {
    let compile = |m: &promql_parser::label::Matcher| {
        let op = match m.op {
            PMatchOp::Equal => MatchOp::Equal,
            PMatchOp::NotEqual => MatchOp::NotEqual,
            PMatchOp::Re(_) => MatchOp::Regex,
            PMatchOp::NotRe(_) => MatchOp::NotRegex,
        };
        Matcher::new(&m.name, op, &m.value)
    };
    let name = vs.name.as_ref().map(|n| Matcher::equal(METRIC_NAME, n.as_str()));
    let base: Vec<Matcher> =
        name.into_iter().map(Ok).chain(vs.matchers.matchers.iter().map(compile)).collect::<Result<_, _>>()?;
    if vs.matchers.or_matchers.is_empty() {
        return Ok(vec![base]);
    }
    vs.matchers
        .or_matchers
        .iter()
        .map(|alt| base.iter().cloned().map(Ok).chain(alt.iter().map(compile)).collect())
        .collect()
}

impl Evaluator<'_> {
    /// The compiled matcher sets of `vs` ([`selector_matchers`]): compiled once per query
    /// and cached in its context, for the planning pass and the evaluation to share.
    pub(crate) fn matchers_of(&self, vs: &VectorSelector) -> Result<Vec<Vec<Matcher>>, QueryError> {
        let key = super::hints::key(vs);
        if let Some(sets) = self.ctx.matchers.borrow().get(&key) {
            return Ok(sets.clone());
        }
        let sets = selector_matchers(vs).map_err(|e| QueryError::bad_data(e.to_string()))?;
        self.ctx.matchers.borrow_mut().insert(key, sets.clone());
        Ok(sets)
    }

    /// The offset, `@` time and the span `[rmin, rmax]` of reference times a selector
    /// is evaluated at on this grid (one time when `@` pins it). The select reaches back
    /// from `rmin` by the lookback delta or the matrix range.
    pub(crate) fn window(&self, vs: &VectorSelector) -> (i64, Option<i64>, i64, i64) {
        let offset = offset_ms(&vs.offset);
        let at = self.resolve_at(&vs.at);
        let (rmin, rmax) = match at {
            Some(a) => (a - offset, a - offset),
            None => (self.start - offset, self.end - offset),
        };
        (offset, at, rmin, rmax)
    }

    /// The hints of a select of `vs` for samples in `[mint, maxt]` on this grid.
    pub(crate) fn hints(&self, vs: &VectorSelector, mint: i64, maxt: i64, range: i64) -> SelectHints {
        let place = self.ctx.selectors.get(&super::hints::key(vs)).cloned().unwrap_or_default();
        SelectHints {
            start: mint,
            end: maxt,
            // An instant evaluation has no step, as in Prometheus' hints.
            step: if self.start == self.end { 0 } else { self.step },
            range,
            func: place.func,
            grouping: place.grouping,
            by: place.by,
            only_labels: None,
            same_times_together: false,
        }
    }

    /// Reads every series matching `vs` with samples in `[mint, maxt]`, sorted by labels.
    /// `range` is the matrix selector's range (ms), 0 for an instant selector; with the
    /// grid's step and the selector's place in the tree it makes the select's hints. The
    /// source's warnings become the query's.
    pub(crate) fn select(
        &self,
        vs: &VectorSelector,
        mint: i64,
        maxt: i64,
        range: i64,
    ) -> Result<Vec<Series>, QueryError> {
        self.ctx.check_interrupt_now()?;
        let sets = self.matchers_of(vs)?;
        let ctl = self.ctx.controls();
        let hints = self.hints(vs, mint, maxt, range);
        let read = |set: &[Matcher]| -> Result<Vec<Series>, QueryError> {
            let r = self.q.select(set, &hints, &ctl)?;
            for w in r.warnings {
                self.ctx.warn(w);
            }
            Ok(r.data)
        };
        let mut out = if sets.len() == 1 {
            read(&sets[0])?
        } else {
            // `{a="x" or b="y"}`: the union of the alternatives, each series once.
            let mut by_labels: BTreeMap<Labels, Series> = BTreeMap::new();
            for set in &sets {
                for s in read(set)? {
                    by_labels.entry(s.labels.clone()).or_insert(s);
                }
            }
            by_labels.into_values().collect()
        };
        out.sort_by(|a, b| a.labels.cmp(&b.labels));
        let loaded: usize = out.iter().map(|s| s.samples.len()).sum();
        self.ctx.check_samples(self.ctx.cur_samples() + loaded)?;
        Ok(out)
    }

    /// An instant-vector selector at every step: the latest sample in
    /// `(ref - lookback, ref]`, unless it is a staleness marker. With `ts_as_value` the
    /// value is the sample's timestamp in seconds (what `timestamp()` returns).
    pub(crate) fn eval_vector_selector(
        &self,
        vs: &VectorSelector,
        ts_as_value: bool,
    ) -> Result<Vec<StepSeries>, QueryError> {
        let (offset, at, rmin, rmax) = self.window(vs);
        let series = self.select(vs, rmin - self.ctx.lookback + 1, rmax, 0)?;
        let mut out = Vec::with_capacity(series.len());
        for s in series {
            self.ctx.check_interrupt()?;
            out.extend(self.instant_points(s, offset, at, ts_as_value));
        }
        Ok(out)
    }

    /// One selected series as an instant vector's series on this grid (see
    /// [`Evaluator::eval_vector_selector`]); `None` when no step sees a sample.
    pub(crate) fn instant_points(
        &self,
        s: Series,
        offset: i64,
        at: Option<i64>,
        ts_as_value: bool,
    ) -> Option<StepSeries> {
        let lookback = self.ctx.lookback;
        let mut ss = StepSeries::new(s.labels, false);
        // `i`: the number of samples with `t <= ref`. A sample is seen by the steps within
        // the lookback after it, as by a window of that length: only those are visited.
        let mut i = 0usize;
        let steps = self.steps_seeing(&s.samples, lookback, offset, at);
        ss.pts.reserve(steps.len());
        for k in steps {
            let t = self.ts(k);
            let r = at.unwrap_or(t) - offset;
            i = super::eval::skip_through(&s.samples, i, r);
            if i == 0 {
                continue;
            }
            let smp = s.samples[i - 1];
            if smp.t <= r - lookback || is_stale_nan(smp.v) {
                continue;
            }
            let v = if ts_as_value { smp.t as f64 / 1000.0 } else { smp.v };
            ss.pts.push((t, v));
        }
        (!ss.pts.is_empty()).then_some(ss)
    }

    /// A matrix selector's samples for every window the steps need, with staleness
    /// markers removed.
    pub(crate) fn eval_matrix_selector(&self, ms: &MatrixSelector) -> Result<RangeArg, QueryError> {
        let vs = &ms.vs;
        let (offset, at, rmin, rmax) = self.window(vs);
        let range = dur_ms(&ms.range);
        let series = self.select(vs, rmin - range + 1, rmax, range)?;
        let series = series.into_iter().filter_map(range_series).collect();
        Ok(RangeArg { series, range, offset, at })
    }

    /// Hands every series matching `vs` with samples in `[mint, maxt]` to `f`, one at a
    /// time in the source's order, from its [`crate::Queryable::select_stream`]: the
    /// series-at-a-time path (`engine/stream.rs`). A selector with `or` alternatives
    /// reads them all first (their union is de-duplicated by labels). `only_labels`:
    /// the only labels `f` reads ([`SelectHints::only_labels`]), if it reads few;
    /// `together`: whether series with the same timestamps may come together
    /// ([`SelectHints::same_times_together`]).
    pub(crate) fn select_each(
        &self,
        vs: &VectorSelector,
        (mint, maxt, range): (i64, i64, i64),
        only_labels: Option<Vec<String>>,
        together: bool,
        mut f: impl FnMut(Series) -> Result<(), QueryError>,
    ) -> Result<(), QueryError> {
        let sets = self.matchers_of(vs)?;
        if sets.len() != 1 {
            return self.select(vs, mint, maxt, range)?.into_iter().try_for_each(f);
        }
        self.ctx.check_interrupt_now()?;
        let hints = SelectHints { only_labels, same_times_together: together, ..self.hints(vs, mint, maxt, range) };
        let r = self.q.select_stream(&sets[0], &hints, &self.ctx.controls())?;
        for w in r.warnings {
            self.ctx.warn(w);
        }
        r.data.into_iter().try_for_each(|s| f(s?))
    }
}

/// A selected series as a range argument's: staleness markers removed; `None` when
/// nothing is left.
pub(crate) fn range_series(s: Series) -> Option<RangeSeries> {
    let mut samples = s.samples;
    // Most series hold no marker; one that does mostly got it when it ended, as its last
    // sample (half of a churning fleet's series over two hours). So: any NaN at all (a
    // loop without an early exit, which the compiler packs), then markers off the end,
    // and only if a NaN is left a search for the marker's bits and a `retain` (which,
    // over every sample of those series, was 2 % of `dcgm_all_rate`'s CPU).
    if samples.iter().fold(false, |any, p| any | p.v.is_nan()) {
        while samples.last().is_some_and(|p| is_stale_nan(p.v)) {
            samples.pop();
        }
        if holds_marker(samples.iter().map(|p| p.v), STALE_NAN_BITS) {
            samples.retain(|p| !is_stale_nan(p.v));
        }
    }
    (!samples.is_empty()).then_some(RangeSeries { labels: s.labels, drop_name: false, samples })
}

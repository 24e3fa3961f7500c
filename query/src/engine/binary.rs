//! Binary operators: scalar/scalar, vector/scalar and vector/vector with Prometheus'
//! vector matching (`on`, `ignoring`, `group_left`, `group_right`, `bool`) and the set
//! operators `and`, `or`, `unless`.

use std::collections::{HashMap, HashSet};

use promql_parser::parser::{BinaryExpr, LabelModifier, VectorMatchCardinality};

use super::eval::Evaluator;
use super::labels_util::{self, is_histogram_marker, signature};
use super::types::{StepSeries, Val};
use crate::error::QueryError;
use crate::functions;
use tessera_model::Labels;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Card {
    OneToOne,
    ManyToOne,
    OneToMany,
    ManyToMany,
}

fn is_comparison(op: &str) -> bool {
    matches!(op, "==" | "!=" | ">" | "<" | ">=" | "<=")
}

/// Applies a float operator. Returns the value and, for comparisons, whether the
/// comparison held (arithmetic always "keeps").
pub(crate) fn float_binop(op: &str, l: f64, r: f64) -> Result<(f64, bool), QueryError> {
    match float_op(op) {
        Some(f) => Ok(f(l, r)),
        None => Err(QueryError::execution(format!("operator \"{op}\" not allowed for float operations"))),
    }
}

/// A float operator: the value and whether a comparison held (see [`float_binop`]).
type FloatOp = fn(f64, f64) -> (f64, bool);

/// [`float_binop`]'s operator, resolved once for a loop over many points.
fn float_op(op: &str) -> Option<FloatOp> {
    Some(match op {
        "+" => |l, r| (l + r, true),
        "-" => |l, r| (l - r, true),
        "*" => |l, r| (l * r, true),
        "/" => |l, r| (l / r, true),
        "%" => |l, r| (l % r, true),
        "^" => |l: f64, r| (l.powf(r), true),
        "atan2" => |l: f64, r| (l.atan2(r), true),
        "==" => |l, r| (l, l == r),
        "!=" => |l, r| (l, l != r),
        ">" => |l, r| (l, l > r),
        "<" => |l, r| (l, l < r),
        ">=" => |l, r| (l, l >= r),
        "<=" => |l, r| (l, l <= r),
        _ => return None,
    })
}

/// Tests compare the series-by-series join of vector operations with the step-by-step
/// walk: they can turn the join off, and count the joins taken, on their own thread.
pub(crate) mod test_hooks {
    #[cfg(test)]
    thread_local! {
        pub static STEP_WALK_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        pub static JOINS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    #[inline]
    pub fn step_walk_only() -> bool {
        #[cfg(test)]
        return STEP_WALK_ONLY.with(|c| c.get());
        #[cfg(not(test))]
        false
    }

    #[inline]
    pub fn joined() {
        #[cfg(test)]
        JOINS.with(|c| c.set(c.get() + 1));
    }
}

/// The two sides of a vector operation with their signature ids (see
/// [`signature_ids`]).
#[derive(Clone, Copy)]
struct Sides<'a> {
    many: &'a [StepSeries],
    one: &'a [StepSeries],
    many_sid: &'a [usize],
    one_sid: &'a [usize],
    n_sigs: usize,
}

/// Output series being assembled step by step. Label sets are interned once (a dense
/// label id per distinct set), so the per-point work is an index into a vector.
struct OutSeries {
    label_ids: HashMap<Labels, usize>,
    labels: Vec<Labels>,
    /// Per label id, the output series with `drop_name` false and true.
    index: Vec<[Option<usize>; 2]>,
    series: Vec<StepSeries>,
}

impl OutSeries {
    fn new() -> Self {
        OutSeries { label_ids: HashMap::new(), labels: Vec::new(), index: Vec::new(), series: Vec::new() }
    }
    fn intern(&mut self, l: Labels) -> usize {
        if let Some(&id) = self.label_ids.get(&l) {
            return id;
        }
        self.labels.push(l.clone());
        self.index.push([None, None]);
        self.label_ids.insert(l, self.labels.len() - 1);
        self.labels.len() - 1
    }
    fn push(&mut self, label_id: usize, drop_name: bool, t: i64, v: f64) {
        let slot = &mut self.index[label_id][usize::from(drop_name)];
        let idx = match *slot {
            Some(i) => i,
            None => {
                self.series.push(StepSeries::new(self.labels[label_id].clone(), drop_name));
                *slot = Some(self.series.len() - 1);
                self.series.len() - 1
            }
        };
        self.series[idx].pts.push((t, v));
    }
}

/// Dense ids for the match signatures of both sides of a vector operation, so that the
/// per-step bookkeeping indexes vectors instead of hashing signature bytes.
fn signature_ids(many: &[Vec<u8>], one: &[Vec<u8>]) -> (Vec<usize>, Vec<usize>, usize) {
    fn side<'a>(sigs: &'a [Vec<u8>], ids: &mut HashMap<&'a [u8], usize>) -> Vec<usize> {
        sigs.iter()
            .map(|s| {
                let n = ids.len();
                *ids.entry(s.as_slice()).or_insert(n)
            })
            .collect()
    }
    let mut ids: HashMap<&[u8], usize> = HashMap::new();
    let many_ids = side(many, &mut ids);
    let one_ids = side(one, &mut ids);
    (many_ids, one_ids, ids.len())
}

/// Walks the points of many step series in step order: `present(k)` lists, for step
/// `k`, each series that has a point there with its value, in series order. Only the
/// series alive at a step are looked at (those whose first point is at or before it and
/// whose last is not before it): with pods replaced every few minutes a long range
/// holds many times more series than any one step, and a walk over all of them at
/// every step cost series × steps.
pub(crate) struct StepCursor {
    pos: Vec<usize>,
    /// Series not started yet, by their first point's time, latest first (the next to
    /// start is last).
    pending: Vec<(i64, usize)>,
    /// Started series with points left, ascending.
    alive: Vec<usize>,
}

impl StepCursor {
    pub fn new(series: &[StepSeries]) -> Self {
        let mut pending: Vec<(i64, usize)> =
            series.iter().enumerate().filter_map(|(i, s)| s.pts.first().map(|p| (p.0, i))).collect();
        pending.sort_unstable_by(|a, b| b.cmp(a));
        StepCursor { pos: vec![0; series.len()], pending, alive: Vec::new() }
    }

    /// Fills `out` with `(series index, value)` for the series that have a point at `t`.
    /// Must be called with increasing `t`, with the series given to `new`.
    pub fn at(&mut self, series: &[StepSeries], t: i64, out: &mut Vec<(usize, f64)>) {
        out.clear();
        let mut started = false;
        while let Some(&(first, i)) = self.pending.last() {
            if first > t {
                break;
            }
            self.alive.push(i);
            self.pending.pop();
            started = true;
        }
        if started {
            self.alive.sort_unstable();
        }
        let mut ended = false;
        for &i in &self.alive {
            let (p, pts) = (&mut self.pos[i], &series[i].pts);
            while *p < pts.len() && pts[*p].0 < t {
                *p += 1;
            }
            match pts.get(*p) {
                Some(&(pt, v)) if pt == t => out.push((i, v)),
                Some(_) => {}
                None => ended = true,
            }
        }
        if ended {
            let pos = &self.pos;
            self.alive.retain(|&i| pos[i] < series[i].pts.len());
        }
    }
}

impl Evaluator<'_> {
    pub(crate) fn eval_binary(&mut self, b: &BinaryExpr) -> Result<Val, QueryError> {
        let op = b.op.to_string();
        let return_bool = b.modifier.as_ref().is_some_and(|m| m.return_bool);
        let lhs = self.eval(&b.lhs)?;
        let rhs = self.eval(&b.rhs)?;
        match (lhs, rhs) {
            (Val::Scalar(l), Val::Scalar(r)) => {
                let mut out = Vec::with_capacity(l.len());
                for (a, c) in l.into_iter().zip(r) {
                    let (v, keep) = float_binop(&op, a, c)?;
                    out.push(if is_comparison(&op) {
                        if keep {
                            1.0
                        } else {
                            0.0
                        }
                    } else {
                        v
                    });
                }
                Ok(Val::Scalar(out))
            }
            (Val::Vector(l), Val::Scalar(r)) => self.vector_scalar(&op, l, &r, false, return_bool).map(Val::Vector),
            (Val::Scalar(l), Val::Vector(r)) => self.vector_scalar(&op, r, &l, true, return_bool).map(Val::Vector),
            (Val::Vector(l), Val::Vector(r)) => {
                let (on, names) = match b.modifier.as_ref().and_then(|m| m.matching.as_ref()) {
                    Some(LabelModifier::Include(ls)) => (true, ls.labels.clone()),
                    Some(LabelModifier::Exclude(ls)) => (false, ls.labels.clone()),
                    None => (false, Vec::new()),
                };
                let (card, include) = match b.modifier.as_ref().map(|m| &m.card) {
                    Some(VectorMatchCardinality::ManyToOne(ls)) => (Card::ManyToOne, ls.labels.clone()),
                    Some(VectorMatchCardinality::OneToMany(ls)) => (Card::OneToMany, ls.labels.clone()),
                    Some(VectorMatchCardinality::ManyToMany) => (Card::ManyToMany, Vec::new()),
                    _ => (Card::OneToOne, Vec::new()),
                };
                match op.as_str() {
                    "and" | "or" | "unless" => self.set_op(&op, l, r, on, &names).map(Val::Vector),
                    _ => {
                        let card = if card == Card::ManyToMany { Card::OneToOne } else { card };
                        let fill =
                            b.modifier.as_ref().map(|m| (m.fill_values.lhs, m.fill_values.rhs)).unwrap_or((None, None));
                        self.vector_binop(&op, l, r, on, &names, card, &include, return_bool, fill).map(Val::Vector)
                    }
                }
            }
            (l, r) => Err(QueryError::execution(format!(
                "binary expression must contain only scalar and instant vector types, got {} and {}",
                l.type_name(),
                r.type_name()
            ))),
        }
    }

    fn incompatible(&self, op: &str) {
        self.ctx.info(format!(
            "PromQL info: incompatible sample types encountered for binary operator {op:?} {}",
            self.ctx.pos_of("", 0)
        ));
    }

    fn vector_scalar(
        &self,
        op: &str,
        mut v: Vec<StepSeries>,
        s: &[f64],
        swap: bool,
        return_bool: bool,
    ) -> Result<Vec<StepSeries>, QueryError> {
        for ser in v.iter_mut() {
            self.scalar_op_series(op, ser, s, swap, return_bool)?;
        }
        v.retain(|s| !s.pts.is_empty());
        Ok(v)
    }

    /// `series ⊕ s` (`s ⊕ series` when `swap`) on one series, `s` a value per step: what
    /// [`Evaluator::vector_scalar`] does to each series (which may be left without points).
    pub(crate) fn scalar_op_series(
        &self,
        op: &str,
        ser: &mut StepSeries,
        s: &[f64],
        swap: bool,
        return_bool: bool,
    ) -> Result<(), QueryError> {
        let cmp = is_comparison(op);
        let mut pts = Vec::with_capacity(ser.pts.len());
        for &(t, x) in &ser.pts {
            if is_histogram_marker(x) {
                // Native histograms are not evaluated; a comparison with a float is
                // an incompatible pair in Prometheus too.
                if cmp {
                    self.incompatible(op);
                }
                continue;
            }
            let k = ((t - self.start) / self.step) as usize;
            let sv = labels_util::at_step(s, k);
            let (l, r) = if swap { (sv, x) } else { (x, sv) };
            let (mut val, mut keep) = float_binop(op, l, r)?;
            // A comparison keeps the vector element's value even when the vector
            // is on the right-hand side.
            if cmp && swap {
                val = r;
            }
            if return_bool {
                val = if keep { 1.0 } else { 0.0 };
                keep = true;
            }
            if keep {
                pts.push((t, val));
            }
        }
        ser.pts = pts;
        if !cmp || return_bool {
            ser.drop_name = true;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn vector_binop(
        &self,
        op: &str,
        lhs: Vec<StepSeries>,
        rhs: Vec<StepSeries>,
        on: bool,
        names: &[String],
        card: Card,
        include: &[String],
        return_bool: bool,
        fill: (Option<f64>, Option<f64>),
    ) -> Result<Vec<StepSeries>, QueryError> {
        let any_fill = fill.0.is_some() || fill.1.is_some();
        if !any_fill && (lhs.is_empty() || rhs.is_empty()) {
            return Ok(Vec::new());
        }
        let cmp = is_comparison(op);
        // For one-to-many, swap the sides so the right side is always the "one".
        let (many, one) = if card == Card::OneToMany { (rhs, lhs) } else { (lhs, rhs) };
        // Fill values for a missing many-side / one-side element (experimental
        // `fill`, `fill_left`, `fill_right` modifiers; given for the original sides).
        let (fill_many, fill_one) = if card == Card::OneToMany { (fill.1, fill.0) } else { (fill.0, fill.1) };
        let many_sig: Vec<Vec<u8>> = many.iter().map(|s| signature(&s.labels, on, names)).collect();
        let one_sig: Vec<Vec<u8>> = one.iter().map(|s| signature(&s.labels, on, names)).collect();
        let (many_sid, one_sid, n_sigs) = signature_ids(&many_sig, &one_sig);
        let Some(apply) = float_op(op) else {
            return Err(QueryError::execution(format!("operator \"{op}\" not allowed for float operations")));
        };
        if !any_fill && !test_hooks::step_walk_only() {
            let sides = Sides { many: &many, one: &one, many_sid: &many_sid, one_sid: &one_sid, n_sigs };
            if let Some(out) = self.vector_binop_by_series(op, apply, sides, on, names, card, include, return_bool)? {
                return Ok(out);
            }
        }
        // Result label id of each (many, one) pair, computed on first use: the pair a
        // many-side series matched last (almost always the same one at every step), then
        // a map for the rest.
        let mut last_pair: Vec<Option<(usize, usize)>> = vec![None; many.len()];
        let mut result_labels: HashMap<(usize, usize), usize> = HashMap::new();
        let mut out = OutSeries::new();
        let mut cur_many = StepCursor::new(&many);
        let mut cur_one = StepCursor::new(&one);
        let (mut pm, mut po) = (Vec::new(), Vec::new());
        // Per signature id, valid when its stamp is this step's: the one-side series with
        // that signature, and the result label ids matched to it.
        let mut one_stamp: Vec<usize> = vec![0; n_sigs];
        let mut one_by_sig: Vec<usize> = vec![0; n_sigs];
        let mut matched_stamp: Vec<usize> = vec![0; n_sigs];
        let mut matched: Vec<Vec<usize>> = vec![Vec::new(); n_sigs];
        let mut one_vals: Vec<f64> = vec![0.0; one.len()];
        for k in 0..self.n_steps() {
            self.ctx.check_interrupt()?;
            let t = self.ts(k);
            let stamp = k + 1;
            cur_many.at(&many, t, &mut pm);
            cur_one.at(&one, t, &mut po);
            if !any_fill && (pm.is_empty() || po.is_empty()) {
                continue;
            }
            for &(i, v) in &po {
                let sid = one_sid[i];
                if one_stamp[sid] == stamp {
                    let prev = one_by_sig[sid];
                    let side = if card == Card::OneToMany { "left" } else { "right" };
                    let matched_labels = if on {
                        labels_util::keep(&one[i].labels, names)
                    } else {
                        labels_util::drop(&labels_util::without_name(&one[i].labels), names)
                    };
                    return Err(QueryError::execution(format!(
                        "found duplicate series for the match group {} on the {side} hand-side of the operation: [{}, {}];many-to-many matching not allowed: matching labels must be unique on one side",
                        fmt_labels_braces(&matched_labels),
                        fmt_labels_braces(&one[prev].labels),
                        fmt_labels_braces(&one[i].labels),
                    )));
                }
                one_stamp[sid] = stamp;
                one_by_sig[sid] = i;
                one_vals[i] = v;
            }
            for &(mi, mv) in &pm {
                let sid = many_sid[mi];
                if one_stamp[sid] != stamp {
                    continue;
                }
                let oi = one_by_sig[sid];
                let ov = one_vals[oi];
                // Matching errors are raised before comparisons filter elements, so a
                // bad match fails even when every element would be filtered away.
                let labels = match last_pair[mi] {
                    Some((o, id)) if o == oi => id,
                    _ => {
                        let id = match result_labels.get(&(mi, oi)) {
                            Some(&id) => id,
                            None => {
                                let id = out.intern(result_metric(
                                    &many[mi].labels,
                                    &one[oi].labels,
                                    on,
                                    names,
                                    card,
                                    include,
                                ));
                                result_labels.insert((mi, oi), id);
                                id
                            }
                        };
                        last_pair[mi] = Some((oi, id));
                        id
                    }
                };
                if matched_stamp[sid] != stamp {
                    matched_stamp[sid] = stamp;
                    matched[sid].clear();
                }
                let entry = &mut matched[sid];
                if card == Card::OneToOne {
                    if !entry.is_empty() {
                        return Err(QueryError::execution(
                            "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)",
                        ));
                    }
                } else if entry.contains(&labels) {
                    return Err(QueryError::execution(
                        "multiple matches for labels: grouping labels must ensure unique matches",
                    ));
                }
                entry.push(labels);
                let Some(val) = self.pair_value(op, apply, card, return_bool, mv, ov) else { continue };
                let drop_name = return_bool || !cmp || many[mi].drop_name;
                out.push(labels, drop_name, t, val);
            }
            if any_fill {
                // Elements without a partner on the other side, paired with the fill value.
                // A native histogram is skipped without an annotation (the fill is a float).
                let mut emit = |src: &StepSeries, x: f64, x_is_many: bool, fillv: f64| {
                    let (mv, ov) = if x_is_many { (x, fillv) } else { (fillv, x) };
                    if is_histogram_marker(x) {
                        return;
                    }
                    let Some(val) = self.pair_value(op, apply, card, return_bool, mv, ov) else { return };
                    let labels = out.intern(result_metric(&src.labels, &src.labels, on, names, card, &[]));
                    out.push(labels, return_bool || !cmp || src.drop_name, t, val);
                };
                if let Some(f) = fill_one {
                    for &(mi, mv) in &pm {
                        if one_stamp[many_sid[mi]] != stamp {
                            emit(&many[mi], mv, true, f);
                        }
                    }
                }
                if let Some(f) = fill_many {
                    for &(oi, ov) in &po {
                        if matched_stamp[one_sid[oi]] != stamp {
                            emit(&one[oi], ov, false, f);
                        }
                    }
                }
            }
        }
        Ok(out.series)
    }

    /// [`Evaluator::vector_binop`] series by series, when no step can raise a matching
    /// error and no two pairs share an output series: every signature has at most one
    /// series on the "one" side (and on the "many" side for one-to-one), and every
    /// matched pair has its own result labels. Then each many-side series pairs with
    /// the same one-side series at every step, and their points are joined by
    /// timestamp: no walk over every series at every step, no lookup per point (that
    /// walk was 40 % of `sum by (cluster) (A) / sum by (cluster) (A + B)`, on one
    /// thread). Output series come in many-side order, the order Prometheus emits each
    /// step's elements in. `None` when a signature is shared (the step-by-step walk
    /// then checks each step's matches).
    #[allow(clippy::too_many_arguments)]
    fn vector_binop_by_series(
        &self,
        op: &str,
        apply: FloatOp,
        sides: Sides<'_>,
        on: bool,
        names: &[String],
        card: Card,
        include: &[String],
        return_bool: bool,
    ) -> Result<Option<Vec<StepSeries>>, QueryError> {
        let Sides { many, one, many_sid, one_sid, n_sigs } = sides;
        const NONE: usize = usize::MAX;
        let mut one_of_sig = vec![NONE; n_sigs];
        for (i, &sid) in one_sid.iter().enumerate() {
            if one_of_sig[sid] != NONE {
                return Ok(None);
            }
            one_of_sig[sid] = i;
        }
        if card == Card::OneToOne {
            let mut seen = vec![false; n_sigs];
            for &sid in many_sid {
                if std::mem::replace(&mut seen[sid], true) {
                    return Ok(None);
                }
            }
        }
        let cmp = is_comparison(op);
        // Result labels of every pair, which must all differ (else two pairs would
        // interleave their points in one output series, or a step could hold a match
        // error: group_left over series that differ only in their name).
        let mut pairs = Vec::new();
        let mut distinct: HashSet<(Labels, bool)> = HashSet::new();
        for (mi, &sid) in many_sid.iter().enumerate() {
            let oi = one_of_sig[sid];
            if oi == NONE {
                continue;
            }
            let labels = result_metric(&many[mi].labels, &one[oi].labels, on, names, card, include);
            let drop_name = return_bool || !cmp || many[mi].drop_name;
            if !distinct.insert((labels.clone(), drop_name)) {
                return Ok(None);
            }
            pairs.push((mi, oi, labels, drop_name));
        }
        let mut out = Vec::new();
        for (mi, oi, labels, drop_name) in pairs {
            self.ctx.check_interrupt()?;
            let (a, b) = (&many[mi].pts, &one[oi].pts);
            let mut pts = Vec::with_capacity(a.len().min(b.len()));
            let (mut i, mut j) = (0, 0);
            while i < a.len() && j < b.len() {
                let ((ta, mv), (tb, ov)) = (a[i], b[j]);
                if ta != tb {
                    if ta < tb {
                        i += 1;
                    } else {
                        j += 1;
                    }
                    continue;
                }
                i += 1;
                j += 1;
                if let Some(val) = self.pair_value(op, apply, card, return_bool, mv, ov) {
                    pts.push((ta, val));
                }
            }
            if !pts.is_empty() {
                let mut s = StepSeries::new(labels, drop_name);
                s.pts = pts;
                out.push(s);
            }
        }
        test_hooks::joined();
        Ok(Some(out))
    }

    /// The element of a matched pair (`mv` the many side's value, `ov` the one side's):
    /// `None` when a comparison without `bool` drops it, or when a native histogram
    /// takes part (opaque here; ordering them is undefined in Prometheus too: an info
    /// annotation when the pair mixes kinds or compares, no result).
    fn pair_value(&self, op: &str, apply: FloatOp, card: Card, return_bool: bool, mv: f64, ov: f64) -> Option<f64> {
        if is_histogram_marker(mv) || is_histogram_marker(ov) {
            if is_histogram_marker(mv) != is_histogram_marker(ov) || matches!(op, ">" | "<" | ">=" | "<=") {
                self.incompatible(op);
            }
            return None;
        }
        let (l, r) = if card == Card::OneToMany { (ov, mv) } else { (mv, ov) };
        let (val, keep) = apply(l, r);
        if return_bool {
            Some(if keep { 1.0 } else { 0.0 })
        } else {
            keep.then_some(val)
        }
    }

    fn set_op(
        &self,
        op: &str,
        lhs: Vec<StepSeries>,
        rhs: Vec<StepSeries>,
        on: bool,
        names: &[String],
    ) -> Result<Vec<StepSeries>, QueryError> {
        let lsig: Vec<Vec<u8>> = lhs.iter().map(|s| signature(&s.labels, on, names)).collect();
        let rsig: Vec<Vec<u8>> = rhs.iter().map(|s| signature(&s.labels, on, names)).collect();
        let (lsid, rsid, n_sigs) = signature_ids(&lsig, &rsig);
        match op {
            "and" | "unless" => {
                let want = op == "and";
                let mut out = lhs;
                let times = times_by_signature(&rhs, &rsid, n_sigs);
                for (i, s) in out.iter_mut().enumerate() {
                    let mut on_right = TimeSet::new(&times[lsid[i]]);
                    s.pts.retain(|p| on_right.contains(p.0) == want);
                }
                out.retain(|s| !s.pts.is_empty());
                Ok(out)
            }
            _ => {
                // or: every left element, plus right elements whose signature is absent
                // on the left at that step.
                let times = times_by_signature(&lhs, &lsid, n_sigs);
                let mut extra = Vec::new();
                for (i, s) in rhs.iter().enumerate() {
                    let mut on_left = TimeSet::new(&times[rsid[i]]);
                    let pts: Vec<(i64, f64)> = s.pts.iter().filter(|p| !on_left.contains(p.0)).copied().collect();
                    if !pts.is_empty() {
                        extra.push(StepSeries { labels: s.labels.clone(), drop_name: s.drop_name, pts });
                    }
                }
                let mut out = lhs;
                out.extend(extra);
                Ok(merge_same_labels(out))
            }
        }
    }
}

/// Per signature id, the steps (ascending timestamps) at which some series of `series`
/// with that signature has a point: what a set operator matches against, found once
/// per series instead of a set of signatures per step (hashing every element twice).
fn times_by_signature(series: &[StepSeries], sid: &[usize], n_sigs: usize) -> Vec<Vec<i64>> {
    let mut times: Vec<Vec<i64>> = vec![Vec::new(); n_sigs];
    let mut shared = vec![false; n_sigs];
    for (s, &id) in series.iter().zip(sid) {
        shared[id] |= !times[id].is_empty();
        times[id].extend(s.pts.iter().map(|p| p.0));
    }
    for (t, shared) in times.iter_mut().zip(shared) {
        if shared {
            t.sort_unstable();
            t.dedup();
        }
    }
    times
}

/// Membership in ascending timestamps, asked in ascending order (a series' points).
struct TimeSet<'a> {
    times: &'a [i64],
}

impl<'a> TimeSet<'a> {
    fn new(times: &'a [i64]) -> Self {
        TimeSet { times }
    }

    fn contains(&mut self, t: i64) -> bool {
        let skip = self.times.iter().take_while(|&&x| x < t).count();
        self.times = &self.times[skip..];
        self.times.first() == Some(&t)
    }
}

/// Series with identical labels and name flags (e.g. from both sides of `or` at
/// different steps) become one series.
fn merge_same_labels(series: Vec<StepSeries>) -> Vec<StepSeries> {
    let mut index: HashMap<(Labels, bool), usize> = HashMap::new();
    let mut out: Vec<StepSeries> = Vec::with_capacity(series.len());
    for s in series {
        let key = (s.labels.clone(), s.drop_name);
        if let Some(&i) = index.get(&key) {
            out[i].pts.extend(s.pts);
            out[i].pts.sort_by_key(|p| p.0);
        } else {
            index.insert(key, out.len());
            out.push(s);
        }
    }
    out
}

/// The labels of a vector/vector result element (Prometheus' `resultMetric`).
fn result_metric(many: &Labels, one: &Labels, on: bool, names: &[String], card: Card, include: &[String]) -> Labels {
    let mut l = many.clone();
    if card == Card::OneToOne {
        l = if on { labels_util::keep(&l, names) } else { labels_util::drop(&l, names) };
    }
    for name in include {
        l = functions::labels::set_label(&l, name, one.get(name).unwrap_or(""));
    }
    l
}

/// Prometheus' `labels.String()`: `{a="b", c="d"}` including `__name__`.
pub(crate) fn fmt_labels_braces(l: &Labels) -> String {
    let parts: Vec<String> = l.iter().map(|x| format!("{}={:?}", x.name, x.value)).collect();
    format!("{{{}}}", parts.join(", "))
}

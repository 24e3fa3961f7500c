//! The evaluator's intermediate values.

use std::collections::HashSet;

use crate::error::QueryError;
use tessera_model::{spare, Labels, Sample};

/// One series of an intermediate result: its labels and its points. For an instant
/// vector the points sit at step timestamps (at most one per step, in step order); for
/// a range vector they are raw sample timestamps.
#[derive(Debug, Clone)]
pub(crate) struct StepSeries {
    pub labels: Labels,
    /// Prometheus 3.x delayed name removal: the series still carries `__name__` (so
    /// `label_replace` and `by (__name__)` can see it) but the name is dropped from the
    /// final result.
    pub drop_name: bool,
    pub pts: Vec<(i64, f64)>,
}

impl StepSeries {
    pub fn new(labels: Labels, drop_name: bool) -> Self {
        StepSeries { labels, drop_name, pts: Vec::new() }
    }

    /// [`StepSeries::new`] with room for `steps` points, in the buffer a sink that folded
    /// an earlier series on this thread gave back ([`give_back_points`]) when it is big
    /// enough: a streamed range function makes one such series per selected series.
    pub fn with_room(labels: Labels, drop_name: bool, steps: usize) -> Self {
        StepSeries { labels, drop_name, pts: spare::take(&SPARE_POINTS, steps) }
    }
}

thread_local! {
    static SPARE_POINTS: std::cell::RefCell<Vec<(i64, f64)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Keeps `pts`' buffer for this thread's next [`StepSeries::with_room`]
/// (`tessera_model::spare`), if it holds at most 64 Ki points (a query's steps are
/// limited to 11,000 by default).
pub(crate) fn give_back_points(pts: Vec<(i64, f64)>) {
    spare::give(&SPARE_POINTS, pts, 1 << 16);
}

/// The value of an evaluated expression over all steps.
#[derive(Debug, Clone)]
pub(crate) enum Val {
    /// One value per step.
    Scalar(Vec<f64>),
    Str(String),
    /// An instant vector over the steps.
    Vector(Vec<StepSeries>),
    /// A range vector (only as the whole result of an instant query).
    Range(Vec<StepSeries>),
}

impl Val {
    /// How many samples this value holds, for the max-samples limit.
    pub fn points(&self) -> usize {
        match self {
            Val::Scalar(v) => v.len(),
            Val::Str(_) => 0,
            Val::Vector(s) | Val::Range(s) => s.iter().map(|s| s.pts.len()).sum(),
        }
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Val::Scalar(_) => "scalar",
            Val::Str(_) => "string",
            Val::Vector(_) => "instant vector",
            Val::Range(_) => "range vector",
        }
    }
}

/// Applies delayed name removal and then checks that no two series share a label set
/// at the same timestamp, as Prometheus does at the end of evaluation.
pub(crate) fn finalize_names(mut series: Vec<StepSeries>) -> Result<Vec<StepSeries>, QueryError> {
    let mut any_dropped = false;
    for s in series.iter_mut() {
        if s.drop_name {
            any_dropped = true;
            s.labels = super::labels_util::without_name(&s.labels);
            s.drop_name = false;
        }
    }
    if !any_dropped {
        return Ok(series);
    }
    // Merge series that became equal after the name was dropped, failing when they
    // overlap in time (the same label set twice at one timestamp).
    let mut order: Vec<usize> = (0..series.len()).collect();
    order.sort_by(|&a, &b| series[a].labels.cmp(&series[b].labels));
    let mut has_dup = false;
    for w in order.windows(2) {
        if series[w[0]].labels == series[w[1]].labels {
            has_dup = true;
            break;
        }
    }
    if !has_dup {
        return Ok(series);
    }
    let mut out: Vec<StepSeries> = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let mut j = i + 1;
        while j < order.len() && series[order[j]].labels == series[order[i]].labels {
            j += 1;
        }
        if j - i == 1 {
            out.push(series[order[i]].clone());
        } else {
            let mut seen: HashSet<i64> = HashSet::new();
            let mut merged = StepSeries::new(series[order[i]].labels.clone(), false);
            for &k in &order[i..j] {
                for &(t, v) in &series[k].pts {
                    if !seen.insert(t) {
                        return Err(QueryError::execution("vector cannot contain metrics with the same labelset"));
                    }
                    merged.pts.push((t, v));
                }
            }
            merged.pts.sort_by_key(|p| p.0);
            out.push(merged);
        }
        i = j;
    }
    Ok(out)
}

pub(crate) fn to_samples(pts: Vec<(i64, f64)>) -> Vec<Sample> {
    pts.into_iter().map(|(t, v)| Sample { t, v }).collect()
}

//! Every conversion between the internal API's wire types (`tessera_proto::ingester`)
//! and the Rust types of storage, the query engine and the shards, in one place, plus
//! the mapping of [`ShardError`] to gRPC status codes and back, and of the engine's
//! errors (an `Eval` answer) to a status and back with their class kept.

use std::sync::Arc;

use tessera_model::{Label, Labels, MatchOp, Matcher, Sample};
use tessera_proto::ingester as pb;
use tessera_query::{
    ErrorKind, Fragment, FragmentData, FragmentMode, FragmentOutput, GroupPartial, PartialSeries, PartialState,
    QueryError, StepPartial,
};
use tessera_storage::chunk::Encoding;
use tessera_storage::{ChunkSamples, RawChunk, RejectReason, SeriesSamples};
use tonic::{Code, Status};

use super::identity::Identity;
use crate::metadata::MetadataEntry;
use crate::shards::{FirstRejection, PushOutcome, PushSeries, ShardError, ShardErrorKind, ShardId, TENANT_LABEL};

pub fn identity_to_pb(id: &Identity) -> pb::ClusterIdentity {
    pb::ClusterIdentity {
        cluster_name: id.name.clone(),
        shard_count: id.shards,
        hash_version: id.hash_version.clone(),
        placement_algorithm: id.algorithm.clone(),
        placement_epoch: id.epoch,
    }
}

pub fn identity_from_pb(id: &pb::ClusterIdentity) -> Identity {
    Identity {
        name: id.cluster_name.clone(),
        shards: id.shard_count,
        hash_version: id.hash_version.clone(),
        algorithm: id.placement_algorithm.clone(),
        epoch: id.placement_epoch,
    }
}

fn label_to_pb(l: &Label) -> pb::Label {
    pb::Label { name: l.name.to_string(), value: l.value.to_string() }
}

fn labels_from_pb(labels: Vec<pb::Label>) -> Vec<Label> {
    labels.into_iter().map(|l| Label::new(l.name, l.value)).collect()
}

/// One series of a push, for shard `shard`.
pub fn push_series_to_pb(s: &PushSeries, shard: ShardId) -> pb::Series {
    pb::Series {
        labels: s.labels.iter().map(label_to_pb).collect(),
        timestamps: s.samples.iter().map(|p| p.t).collect(),
        values: s.samples.iter().map(|p| p.v).collect(),
        shard: shard.0,
    }
}

/// A pushed series as the shards take it: labels sorted and unique, no tenant label,
/// as many values as timestamps; `hash` recomputed here, never trusted from the wire.
pub fn push_series_from_pb(tenant: &str, s: pb::Series) -> Result<(ShardId, PushSeries), String> {
    if s.timestamps.len() != s.values.len() {
        return Err(format!("series has {} timestamps but {} values", s.timestamps.len(), s.values.len()));
    }
    let labels = labels_from_pb(s.labels);
    if labels.windows(2).any(|w| w[0].name >= w[1].name) {
        return Err("series labels are not sorted by name and unique".into());
    }
    if labels.iter().any(|l| l.name == TENANT_LABEL) {
        return Err(format!("label name {TENANT_LABEL:?} is reserved"));
    }
    let samples = s.timestamps.into_iter().zip(s.values).map(|(t, v)| Sample { t, v }).collect();
    let hash = crate::shards::series_hash(tenant, &labels);
    Ok((ShardId(s.shard), PushSeries { labels, samples, hash }))
}

/// The logical shard of `tenant`'s metric family `metric`, where its metadata lives:
/// the shard of the series whose only label is `__name__ = metric`.
pub fn metadata_shard(tenant: &str, metric: &str, total: u32) -> ShardId {
    ShardId::of(crate::shards::series_hash(tenant, &[Label::new(tessera_model::METRIC_NAME, metric)]), total)
}

/// One metadata entry of family `metric` on the wire (`shard`: Push's routing; 0 elsewhere).
pub fn metadata_to_pb(metric: &str, e: &MetadataEntry, shard: ShardId) -> pb::MetricMetadata {
    pb::MetricMetadata {
        metric: metric.to_owned(),
        r#type: e.kind.to_owned(),
        help: e.help.clone(),
        unit: e.unit.clone(),
        shard: shard.0,
    }
}

/// A metadata entry from the wire: a family name and a known type are required.
pub fn metadata_from_pb(m: pb::MetricMetadata) -> Result<(String, MetadataEntry), String> {
    if m.metric.is_empty() {
        return Err("metadata entry without a metric family name".into());
    }
    let kind = crate::metadata::kind_named(&m.r#type).ok_or_else(|| {
        format!(
            "metadata of {:?} has unknown type {:?} (expected one of {})",
            m.metric,
            m.r#type,
            crate::metadata::KINDS.join(", ")
        )
    })?;
    Ok((m.metric, MetadataEntry { kind, help: m.help, unit: m.unit }))
}

/// A series with decoded samples (Repair's frames).
pub fn series_to_pb(s: SeriesSamples) -> pb::Series {
    pb::Series {
        labels: s.labels.iter().map(label_to_pb).collect(),
        timestamps: s.samples.iter().map(|p| p.t).collect(),
        values: s.samples.iter().map(|p| p.v).collect(),
        shard: 0,
    }
}

pub fn chunk_to_pb(c: RawChunk) -> pb::Chunk {
    pb::Chunk { encoding: c.encoding as u32, min_time_ms: c.mint, max_time_ms: c.maxt, data: c.bytes }
}

/// Bytes a chunk takes on the wire, roughly (for framing).
pub fn chunk_wire_size(c: &RawChunk) -> usize {
    c.bytes.len() + 32
}

/// Decodes one series' chunks as an ingester sent them (all pieces, in order) into its
/// samples within `[min_time, maxt]`, under storage's rules ([`ChunkSamples`]). An
/// unknown encoding or a chunk that does not decode is an error naming it.
pub fn samples_from_chunks<'a>(
    chunks: impl IntoIterator<Item = &'a pb::Chunk>,
    min_time: i64,
    maxt: i64,
) -> Result<Vec<Sample>, String> {
    let mut out = ChunkSamples::new(min_time, maxt);
    for c in chunks {
        let enc = u8::try_from(c.encoding)
            .ok()
            .and_then(Encoding::from_byte)
            .ok_or_else(|| format!("chunk at {} ms has unknown encoding {}", c.min_time_ms, c.encoding))?;
        out.add(enc, &c.data).map_err(|e| format!("chunk at {} ms does not decode: {e}", c.min_time_ms))?;
    }
    Ok(out.finish())
}

/// Bytes a series takes on the wire, roughly (for framing streamed answers).
pub fn wire_size(labels: &[Label], samples: usize) -> usize {
    labels.iter().map(|l| l.name.len() + l.value.len() + 6).sum::<usize>() + samples * 17 + 8
}

pub fn label_set_to_pb(labels: &[Label]) -> pb::LabelSet {
    pb::LabelSet { labels: labels.iter().map(label_to_pb).collect() }
}

/// Wire labels as a label set (the ingester sends them sorted and unique; `from_pairs`
/// sorts anyway, so a misbehaving peer cannot break the sorted-labels invariant).
pub fn labels_from_pb_set(labels: Vec<pb::Label>) -> Labels {
    Labels::from_pairs(labels.into_iter().map(|l| (l.name, l.value)))
}

pub fn matcher_to_pb(m: &Matcher) -> pb::Matcher {
    use pb::matcher::Type;
    let t = match m.op() {
        MatchOp::Equal => Type::Eq,
        MatchOp::NotEqual => Type::Neq,
        MatchOp::Regex => Type::Re,
        MatchOp::NotRegex => Type::Nre,
    };
    pb::Matcher { r#type: t as i32, name: m.name().to_owned(), value: m.value().to_owned() }
}

/// A wire matcher compiled for storage; a bad regex or type is `INVALID_ARGUMENT`.
pub fn matcher_from_pb(m: &pb::Matcher) -> Result<Matcher, Status> {
    use pb::matcher::Type;
    let op = match Type::try_from(m.r#type) {
        Ok(Type::Eq) => MatchOp::Equal,
        Ok(Type::Neq) => MatchOp::NotEqual,
        Ok(Type::Re) => MatchOp::Regex,
        Ok(Type::Nre) => MatchOp::NotRegex,
        Err(_) => return Err(Status::invalid_argument(format!("unknown matcher type {}", m.r#type))),
    };
    Matcher::new(&m.name, op, &m.value).map_err(|e| Status::invalid_argument(e.to_string()))
}

/// One shard's push outcome on the wire; `index_in_request` maps the shard part's
/// series index to the request's.
pub fn outcome_to_pb(
    shard: ShardId,
    r: Result<PushOutcome, ShardError>,
    index_in_request: &[usize],
) -> pb::ShardOutcome {
    let o = match r {
        Ok(o) => o,
        Err(e) => return pb::ShardOutcome { shard: shard.0, error: e.message, ..Default::default() },
    };
    let first_rejection = o.first_rejection.map(|f| {
        let (kind, min_allowed_t, cause) = match &f.reason {
            RejectReason::TooOld { min_allowed_t } => (pb::RejectKind::TooOld, *min_allowed_t, String::new()),
            RejectReason::Duplicate => (pb::RejectKind::Duplicate, 0, String::new()),
            RejectReason::OutOfOrderChunkFull => (pb::RejectKind::OutOfOrderChunkFull, 0, String::new()),
            RejectReason::Unreadable { cause } => (pb::RejectKind::Unreadable, 0, cause.to_string()),
        };
        let idx = index_in_request.get(f.index).copied().unwrap_or(f.index);
        pb::FirstRejection {
            series_index: u32::try_from(idx).unwrap_or(u32::MAX),
            timestamp: f.t,
            kind: kind as i32,
            min_allowed_t,
            cause,
        }
    });
    pb::ShardOutcome {
        shard: shard.0,
        error: String::new(),
        accepted: o.accepted,
        appended: o.appended,
        rejected_too_old: o.rejected_too_old,
        rejected_duplicate: o.rejected_duplicate,
        rejected_unreadable: o.rejected_unreadable,
        first_rejection,
    }
}

/// A shard's acknowledged outcome as the distributor's; `series` is what was sent to
/// that ingester (for the labels and request index of the first rejection).
pub fn outcome_from_pb(o: &pb::ShardOutcome, sent: &[usize], series: &[PushSeries]) -> PushOutcome {
    let first_rejection = o.first_rejection.as_ref().and_then(|f| {
        let index = *sent.get(f.series_index as usize)?;
        let reason = match pb::RejectKind::try_from(f.kind) {
            Ok(pb::RejectKind::TooOld) => RejectReason::TooOld { min_allowed_t: f.min_allowed_t },
            Ok(pb::RejectKind::Duplicate) => RejectReason::Duplicate,
            Ok(pb::RejectKind::OutOfOrderChunkFull) => RejectReason::OutOfOrderChunkFull,
            _ => RejectReason::Unreadable { cause: Arc::from(f.cause.as_str()) },
        };
        Some(FirstRejection { index, labels: series[index].labels.clone(), t: f.timestamp, reason })
    });
    PushOutcome {
        accepted: o.accepted,
        appended: o.appended,
        rejected_too_old: o.rejected_too_old,
        rejected_duplicate: o.rejected_duplicate,
        rejected_unreadable: o.rejected_unreadable,
        first_rejection,
        ..PushOutcome::default()
    }
}

/// A shard error as a gRPC status: bad data → `INVALID_ARGUMENT`, unavailable →
/// `UNAVAILABLE`, timeout → `DEADLINE_EXCEEDED`, canceled → `CANCELLED`, internal →
/// `INTERNAL`.
pub fn status_from_shard_error(e: ShardError) -> Status {
    let code = match e.kind {
        ShardErrorKind::BadData => Code::InvalidArgument,
        ShardErrorKind::Unavailable => Code::Unavailable,
        ShardErrorKind::Timeout => Code::DeadlineExceeded,
        ShardErrorKind::Canceled => Code::Cancelled,
        ShardErrorKind::Internal => Code::Internal,
    };
    Status::new(code, e.message)
}

/// A failed call to ingester `who` as the engine's error, classified by its code.
pub fn query_error_from_status(who: &str, s: &Status) -> tessera_query::QueryError {
    let kind = match s.code() {
        Code::InvalidArgument => ErrorKind::BadData,
        Code::DeadlineExceeded => ErrorKind::Timeout,
        Code::Cancelled => ErrorKind::Canceled,
        Code::Internal | Code::DataLoss => ErrorKind::Internal,
        _ => ErrorKind::Unavailable,
    };
    tessera_query::QueryError::new(kind, format!("ingester {who}: {}", status_text(s)))
}

/// `CODE: message` of a status, for messages that name peers.
pub fn status_text(s: &Status) -> String {
    format!("{:?}: {}", s.code(), s.message())
}

/// Status metadata naming the engine's error class of a failed `Eval` (`bad_data`,
/// `execution`, ...), so that the querier reports what a single node would.
pub const ERROR_KIND_HEADER: &str = "tessera-error-kind";

fn kind_name(k: ErrorKind) -> &'static str {
    match k {
        ErrorKind::BadData => "bad_data",
        ErrorKind::Execution => "execution",
        ErrorKind::Canceled => "canceled",
        ErrorKind::Timeout => "timeout",
        ErrorKind::Unavailable => "unavailable",
        ErrorKind::Internal => "internal",
    }
}

fn kind_of_name(n: &str) -> Option<ErrorKind> {
    Some(match n {
        "bad_data" => ErrorKind::BadData,
        "execution" => ErrorKind::Execution,
        "canceled" => ErrorKind::Canceled,
        "timeout" => ErrorKind::Timeout,
        "unavailable" => ErrorKind::Unavailable,
        "internal" => ErrorKind::Internal,
        _ => return None,
    })
}

/// An evaluation error as a gRPC status: the code by class (bad data →
/// `INVALID_ARGUMENT`, execution → `FAILED_PRECONDITION`, timeout →
/// `DEADLINE_EXCEEDED`, canceled → `CANCELLED`, unavailable → `UNAVAILABLE`, internal →
/// `INTERNAL`), the message unchanged, and the class in [`ERROR_KIND_HEADER`].
pub fn status_from_query_error(e: QueryError) -> Status {
    let code = match e.kind {
        ErrorKind::BadData => Code::InvalidArgument,
        ErrorKind::Execution => Code::FailedPrecondition,
        ErrorKind::Timeout => Code::DeadlineExceeded,
        ErrorKind::Canceled => Code::Cancelled,
        ErrorKind::Unavailable => Code::Unavailable,
        ErrorKind::Internal => Code::Internal,
    };
    let mut md = tonic::metadata::MetadataMap::new();
    md.insert(ERROR_KIND_HEADER, tonic::metadata::MetadataValue::from_static(kind_name(e.kind)));
    Status::with_metadata(code, e.message, md)
}

/// The engine's error an `Eval` answer carried: its class and message as the ingester's
/// engine raised them, when the status names its class ([`status_from_query_error`]);
/// `None` for any other failure of the call (transport, identity, a peer without the
/// header), which says nothing about the query.
pub fn query_error_from_eval_status(s: &Status) -> Option<QueryError> {
    let kind = s.metadata().get(ERROR_KIND_HEADER)?.to_str().ok().and_then(kind_of_name)?;
    Some(QueryError::new(kind, s.message()))
}

pub fn fragment_to_pb(f: &Fragment) -> pb::Fragment {
    pb::Fragment {
        query: f.query.clone(),
        path: f.path.clone(),
        mode: match f.mode {
            FragmentMode::Concat => pb::FragmentMode::Concat,
            FragmentMode::Partial => pb::FragmentMode::Partial,
        } as i32,
        start_ms: f.start,
        end_ms: f.end,
        step_ms: f.step,
        query_start_ms: f.query_start,
        query_end_ms: f.query_end,
        query_step_ms: f.query_step,
        lookback_delta_ms: f.lookback_delta_ms,
        default_subquery_step_ms: f.default_subquery_step_ms,
        max_samples: f.max_samples,
        param: f.param.clone(),
        string_param: f.string_param.clone(),
    }
}

/// A fragment from the wire; an unknown mode is an error naming it (the engine checks
/// the rest: grid, path, node kind).
pub fn fragment_from_pb(f: pb::Fragment) -> Result<Fragment, String> {
    let mode = match pb::FragmentMode::try_from(f.mode) {
        Ok(pb::FragmentMode::Concat) => FragmentMode::Concat,
        Ok(pb::FragmentMode::Partial) => FragmentMode::Partial,
        Err(_) => return Err(format!("unknown fragment mode {}", f.mode)),
    };
    Ok(Fragment {
        query: f.query,
        path: f.path,
        mode,
        start: f.start_ms,
        end: f.end_ms,
        step: f.step_ms,
        query_start: f.query_start_ms,
        query_end: f.query_end_ms,
        query_step: f.query_step_ms,
        lookback_delta_ms: f.lookback_delta_ms,
        default_subquery_step_ms: f.default_subquery_step_ms,
        max_samples: f.max_samples,
        param: f.param,
        string_param: f.string_param,
    })
}

fn partial_series_to_pb(s: PartialSeries) -> pb::PartialSeries {
    pb::PartialSeries {
        labels: s.labels.iter().map(label_to_pb).collect(),
        drop_name: s.drop_name,
        timestamps: s.points.iter().map(|p| p.t).collect(),
        values: s.points.iter().map(|p| p.v).collect(),
    }
}

fn partial_series_from_pb(s: pb::PartialSeries) -> Result<PartialSeries, String> {
    if s.timestamps.len() != s.values.len() {
        return Err(format!("series has {} timestamps but {} values", s.timestamps.len(), s.values.len()));
    }
    let points = s.timestamps.into_iter().zip(s.values).map(|(t, v)| Sample { t, v }).collect();
    Ok(PartialSeries { labels: labels_from_pb_set(s.labels), drop_name: s.drop_name, points })
}

fn step_to_pb(s: StepPartial) -> pb::StepPartial {
    use pb::step_partial::State;
    let state = match s.state {
        PartialState::Empty => State::Empty(pb::NoState {}),
        PartialState::Sum { sum, c } => State::Sum(pb::SumState { sum: Some(sum), c: Some(c) }),
        PartialState::Avg { sum, c, mean, count, incremental } => {
            State::Avg(pb::AvgState { sum: Some(sum), c: Some(c), mean: Some(mean), count: Some(count), incremental })
        }
        PartialState::Min(v) => State::Min(v),
        PartialState::Max(v) => State::Max(v),
        PartialState::Counted => State::Counted(pb::NoState {}),
        PartialState::Values(values) => State::Values(pb::ValuesState { values }),
    };
    pb::StepPartial {
        t_ms: s.t,
        count: Some(s.count),
        histograms: s.histograms,
        drop_name: s.drop_name,
        state: Some(state),
    }
}

fn step_from_pb(s: pb::StepPartial) -> Result<StepPartial, String> {
    use pb::step_partial::State;
    let state = match s.state {
        Some(State::Empty(_)) => PartialState::Empty,
        Some(State::Sum(x)) => PartialState::Sum { sum: x.sum.unwrap_or(0.0), c: x.c.unwrap_or(0.0) },
        Some(State::Avg(x)) => PartialState::Avg {
            sum: x.sum.unwrap_or(0.0),
            c: x.c.unwrap_or(0.0),
            mean: x.mean.unwrap_or(0.0),
            count: x.count.unwrap_or(0.0),
            incremental: x.incremental,
        },
        Some(State::Min(v)) => PartialState::Min(v),
        Some(State::Max(v)) => PartialState::Max(v),
        Some(State::Counted(_)) => PartialState::Counted,
        Some(State::Values(x)) => PartialState::Values(x.values),
        None => return Err(format!("partial state at {} ms has no state", s.t_ms)),
    };
    Ok(StepPartial {
        t: s.t_ms,
        count: s.count.unwrap_or(0.0),
        histograms: s.histograms,
        drop_name: s.drop_name,
        state,
    })
}

fn group_to_pb(g: GroupPartial) -> pb::GroupPartial {
    pb::GroupPartial {
        labels: g.labels.iter().map(label_to_pb).collect(),
        first: g.first.iter().map(label_to_pb).collect(),
        steps: g.steps.into_iter().map(step_to_pb).collect(),
    }
}

fn group_from_pb(g: pb::GroupPartial) -> Result<GroupPartial, String> {
    Ok(GroupPartial {
        labels: labels_from_pb_set(g.labels),
        first: labels_from_pb_set(g.first),
        steps: g.steps.into_iter().map(step_from_pb).collect::<Result<_, _>>()?,
    })
}

fn labels_wire_size(labels: &Labels) -> usize {
    labels.iter().map(|l| l.name.len() + l.value.len() + 6).sum()
}

/// `items` in consecutive batches of at most about `budget` bytes as `size` estimates
/// them (an item larger than that travels alone): the frames of every streamed answer.
pub fn batches<I>(items: Vec<I>, budget: usize, size: fn(&I) -> usize) -> impl Iterator<Item = Vec<I>> {
    let mut it = items.into_iter().peekable();
    std::iter::from_fn(move || {
        it.peek()?;
        let (mut batch, mut bytes) = (Vec::new(), 0);
        while let Some(item) = it.next_if(|i| batch.is_empty() || bytes + size(i) <= budget) {
            bytes += size(&item);
            batch.push(item);
        }
        Some(batch)
    })
}

/// One item of an `Eval` answer: the series come before the groups.
enum EvalItem {
    Series(PartialSeries),
    Group(GroupPartial),
}

fn eval_item_size(item: &EvalItem) -> usize {
    match item {
        EvalItem::Series(s) => labels_wire_size(&s.labels) + s.points.len() * 17 + 8,
        EvalItem::Group(g) => {
            labels_wire_size(&g.labels)
                + labels_wire_size(&g.first)
                + g.steps.iter().map(step_wire_size).sum::<usize>()
                + 8
        }
    }
}

fn step_wire_size(s: &StepPartial) -> usize {
    match &s.state {
        PartialState::Values(v) => 40 + v.len() * 8,
        _ => 48,
    }
}

/// `g` cut by steps into pieces of about `budget` bytes at most (a step larger than
/// that travels alone), each with the group's labels: `quantile`'s values per step can
/// make one group larger than a message may be. The querier's merge joins the pieces.
fn split_group(g: GroupPartial, budget: usize) -> Vec<GroupPartial> {
    let head = labels_wire_size(&g.labels) + labels_wire_size(&g.first) + 8;
    if head + g.steps.iter().map(step_wire_size).sum::<usize>() <= budget {
        return vec![g];
    }
    let mut pieces = Vec::new();
    let mut steps = Vec::new();
    let mut bytes = head;
    for s in g.steps {
        let size = step_wire_size(&s);
        if !steps.is_empty() && bytes + size > budget {
            pieces.push(GroupPartial {
                labels: g.labels.clone(),
                first: g.first.clone(),
                steps: std::mem::take(&mut steps),
            });
            bytes = head;
        }
        bytes += size;
        steps.push(s);
    }
    pieces.push(GroupPartial { labels: g.labels, first: g.first, steps });
    pieces
}

/// A fragment's output as the frames of an `Eval` answer, each about `budget` bytes at
/// most (one item larger than that travels alone), the last one with the annotations
/// and `last` set. Always at least one frame.
pub fn eval_frames(out: FragmentOutput, budget: usize) -> Vec<pb::EvalResponse> {
    let (kind, series, groups) = match out.data {
        FragmentData::Series(s) => (pb::EvalDataKind::Series, s, Vec::new()),
        FragmentData::Groups(g) => (pb::EvalDataKind::Groups, Vec::new(), g),
        FragmentData::Candidates { series, groups } => (pb::EvalDataKind::Candidates, series, groups),
    };
    let items: Vec<EvalItem> = series
        .into_iter()
        .map(EvalItem::Series)
        .chain(groups.into_iter().flat_map(|g| split_group(g, budget)).map(EvalItem::Group))
        .collect();
    let mut frames: Vec<pb::EvalResponse> = batches(items, budget, eval_item_size)
        .map(|batch| {
            let mut frame = pb::EvalResponse { kind: kind as i32, ..Default::default() };
            for item in batch {
                match item {
                    EvalItem::Series(s) => frame.series.push(partial_series_to_pb(s)),
                    EvalItem::Group(g) => frame.groups.push(group_to_pb(g)),
                }
            }
            frame
        })
        .collect();
    if frames.is_empty() {
        frames.push(pb::EvalResponse { kind: kind as i32, ..Default::default() });
    }
    if let Some(last) = frames.last_mut() {
        last.warnings = out.warnings;
        last.infos = out.infos;
        last.last = true;
    }
    frames
}

/// Collects the frames of one `Eval` answer back into the fragment's output.
#[derive(Default)]
pub struct EvalAnswer {
    kind: Option<pb::EvalDataKind>,
    series: Vec<PartialSeries>,
    groups: Vec<GroupPartial>,
    warnings: Vec<String>,
    infos: Vec<String>,
    last: bool,
}

impl EvalAnswer {
    /// Takes the next frame; a frame of another kind than the first, one after the last,
    /// or malformed contents is an error naming the problem.
    pub fn add(&mut self, f: pb::EvalResponse) -> Result<(), String> {
        if self.last {
            return Err("a frame came after the last one".into());
        }
        let kind = pb::EvalDataKind::try_from(f.kind).map_err(|_| format!("unknown answer kind {}", f.kind))?;
        match self.kind {
            Some(k) if k != kind => return Err(format!("a {kind:?} frame in a {k:?} answer")),
            _ => self.kind = Some(kind),
        }
        if kind == pb::EvalDataKind::Groups && !f.series.is_empty() {
            return Err("a partial-aggregate answer carries series".into());
        }
        if kind == pb::EvalDataKind::Series && !f.groups.is_empty() {
            return Err("a per-series answer carries groups".into());
        }
        for s in f.series {
            self.series.push(partial_series_from_pb(s)?);
        }
        for g in f.groups {
            self.groups.push(group_from_pb(g)?);
        }
        self.warnings.extend(f.warnings);
        self.infos.extend(f.infos);
        self.last = f.last;
        Ok(())
    }

    /// The output, once the last frame came; an answer cut short is an error.
    pub fn finish(self) -> Result<FragmentOutput, String> {
        if !self.last {
            return Err("the answer ended before its last frame".into());
        }
        let data = match self.kind.unwrap_or(pb::EvalDataKind::Series) {
            pb::EvalDataKind::Series => FragmentData::Series(self.series),
            pb::EvalDataKind::Groups => FragmentData::Groups(self.groups),
            pb::EvalDataKind::Candidates => FragmentData::Candidates { series: self.series, groups: self.groups },
        };
        Ok(FragmentOutput { data, warnings: self.warnings, infos: self.infos })
    }
}

#[cfg(test)]
mod tests;

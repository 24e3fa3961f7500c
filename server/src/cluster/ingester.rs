//! The ingester's gRPC service: the internal API (`tessera.ingester.v1.Ingester`) over
//! the local shards this ingester holds by placement.
//!
//! Every call first compares the request's cluster identity with this ingester's and
//! refuses a difference with `FAILED_PRECONDITION` (see `identity.rs`). Reads take
//! their deadline from the `grpc-timeout` header (capped by [`MAX_READ`]) and stop the
//! storage scans when it passes or when the caller goes away: the handler future holds
//! the scans' cancel guard, and tonic drops that future when the client cancels or the
//! deadline passes. Streamed answers are cut into frames of at most [`FRAME_BYTES`]
//! and half the message-size limit.
//!
//! Select answers raw chunks: each series' stored Gorilla XOR chunks as storage holds
//! them (persisted chunks and the head's, its open chunk included), not decoded and not
//! trimmed to the range; the querier decodes them. Measured: about 3.5 bytes per
//! sample, labels included, instead of 14.5 for decoded samples (ARCHITECTURE.md), and
//! no decoding on the ingester.
//!
//! Holes (`holes.rs`): every read answer carries the `tessera-holes` header naming the
//! holes of this ingester's shards that overlap the request's range; a shard that is
//! catching up after a restart refuses its part of a push (the other replicas take
//! it), and a shard part that storage fails records a hole over its samples. `Repair`
//! streams one shard's data (all tenants) to a replica that is catching up, reading it
//! in time slices of [`REPAIR_SLICE_MS`] so memory stays bounded by one slice, after
//! the metric metadata of the shard's families.
//!
//! Pushes carry metric metadata for the shards they name (kept in the ingester's
//! `MetadataStore`, answered by `Metadata`); `Cardinality` counts a tenant's series
//! per label pair shard by shard. A push honours its `grpc-timeout`: past it on arrival,
//! or while a part waits for storage, the part is refused unwritten
//! (`DEADLINE_EXCEEDED`) and leaves a hole; an append that started runs to completion.
//!
//! `Eval` (pushdown) evaluates one planner fragment over the tenant's series in the
//! shards the querier named, with the engine `tessera serve` uses
//! ([`tessera_query::Engine::eval_fragment`]), on a query thread of the ingester's own
//! [`Executor`] (`[query] max_concurrent_queries` at once, waiting counts against the
//! deadline), its reads through the same shard views and storage read slots as every
//! other read. Headers go out at once and the frames when the evaluation is done, so a
//! querier can tell a slow ingester (no headers) from a slow query. A select of the
//! evaluation whose range overlaps a hole of a named shard fails the call
//! (`UNAVAILABLE`, the querier asks another replica): an `Eval` answer is complete for
//! every shard it covers. Before evaluating, an `Eval` waits for the pushes that had
//! arrived before it to finish (a write acknowledged by the other replicas while this
//! one was still appending is then seen). Engine errors travel with their class
//! (`convert::status_from_query_error`), so the querier answers as a single node would.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use tessera_model::{Labels, Matcher};
use tessera_proto::ingester as pb;
use tessera_storage::{Interrupt, RawChunk, SeriesChunks, SeriesSamples};
use tonic::{Request, Response, Status};

use tessera_query::{
    ErrorKind, QueryError, QueryOptions, Queryable, ReadResult, SelectHints, SelectResult, SeriesStream,
};

use super::convert;
use super::holes::{self, Hole, HoleBook, ShardHole};
use super::identity::Identity;
use crate::http::query_api::{CardinalityCounter, Executor};
use crate::metadata::{MetadataEntry, MetadataStore};
use crate::shards::{
    request_controls, PushSeries, ShardError, ShardErrorKind, ShardId, Shards, TenantView, TENANT_LABEL,
};

/// Longest a read may run, and a push may wait before its append starts, when the
/// caller sent no deadline.
pub const MAX_READ: Duration = Duration::from_secs(120);
/// Target size of one streamed answer frame.
pub const FRAME_BYTES: usize = 1 << 20;
/// Time slice a `Repair` answer reads at once, ms (bounds the source's memory).
pub const REPAIR_SLICE_MS: i64 = 15 * 60 * 1000;
/// Longest one slice read of a `Repair` answer may take.
const REPAIR_SLICE_TIMEOUT: Duration = Duration::from_secs(60);

type FrameStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// The service; cheap to clone.
#[derive(Clone)]
pub struct IngesterService {
    id: String,
    identity: Identity,
    shards: Arc<Shards>,
    holes: Arc<HoleBook>,
    /// Metric metadata received with pushes (and by repair), per tenant.
    metadata: Arc<MetadataStore>,
    /// Target size of one Select frame: [`FRAME_BYTES`], or half the message-size limit
    /// when that is smaller.
    frame_bytes: usize,
    /// Evaluates `Eval` fragments (text limits; the rest comes with each fragment).
    engine: Arc<tessera_query::Engine>,
    /// Query threads for `Eval`, bounded.
    executor: Arc<Executor>,
    /// Pushes in progress, which an `Eval` waits for.
    pushes: Arc<PushGate>,
}

impl IngesterService {
    /// A service whose shards have no holes (see [`IngesterService::with_holes`]).
    pub fn new(id: String, identity: Identity, shards: Arc<Shards>) -> Self {
        let holes = Arc::new(HoleBook::none(shards.ids()));
        let l = crate::config::Limits::default();
        let metadata = Arc::new(MetadataStore::new(
            l.max_metadata_per_tenant,
            l.max_metadata_bytes_per_tenant,
            l.max_metadata_text_bytes,
        ));
        let q = crate::http::query_api::QueryLimits::default();
        IngesterService {
            id,
            identity,
            shards,
            holes,
            metadata,
            frame_bytes: FRAME_BYTES,
            engine: Arc::new(crate::http::query_api::engine_for(&q)),
            executor: Arc::new(Executor::new(q.concurrency())),
            pushes: Arc::default(),
        }
    }

    /// Evaluates `Eval` fragments under `limits` (the ingester's `[query]` table: text
    /// limits, and how many evaluations run at once).
    pub fn with_query_limits(mut self, limits: &crate::http::query_api::QueryLimits) -> Self {
        self.engine = Arc::new(crate::http::query_api::engine_for(limits));
        self.executor = Arc::new(Executor::new(limits.concurrency()));
        self
    }

    /// Keeps metadata in `store` (the ingester's, with its `[limits]`, shared with its
    /// repair task).
    pub fn with_metadata(mut self, store: Arc<MetadataStore>) -> Self {
        self.metadata = store;
        self
    }

    /// Uses `holes` (the ingester's, shared with its repair task).
    pub fn with_holes(mut self, holes: Arc<HoleBook>) -> Self {
        self.holes = holes;
        self
    }

    /// The `tessera-holes` header for an answer about `[start, end]`, if any hole overlaps.
    fn holes_header(&self, start: i64, end: i64) -> Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>> {
        let hs = self.holes.all_overlapping(start, end);
        if hs.is_empty() {
            return None;
        }
        holes::encode_header(&hs).parse().ok()
    }

    /// `resp` naming `holes` (from [`Self::holes_header`], taken *before* the read: a
    /// hole that repair clears while the read runs is still named, so the querier never
    /// counts a pre-repair answer as complete).
    fn naming_holes<T>(
        mut resp: Response<T>,
        holes: Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>,
    ) -> Response<T> {
        if let Some(v) = holes {
            resp.metadata_mut().insert(holes::HOLES_HEADER, v);
        }
        resp
    }

    /// Keeps Select's frames within `max` (`[cluster] grpc_max_message_bytes`).
    pub fn with_max_message_bytes(mut self, max: usize) -> Self {
        self.frame_bytes = FRAME_BYTES.min(max / 2).max(1);
        self
    }

    fn check(&self, theirs: Option<&pb::ClusterIdentity>) -> Result<(), Status> {
        let Some(theirs) = theirs else {
            return Err(Status::failed_precondition("request carries no cluster identity"));
        };
        match self.identity.mismatch(&convert::identity_from_pb(theirs), &format!("ingester {:?}", self.id)) {
            None => Ok(()),
            Some(msg) => Err(Status::failed_precondition(msg)),
        }
    }

    /// `Ok` when `shard` is placed on this ingester.
    fn owned(&self, shard: ShardId) -> Result<(), Status> {
        if self.shards.ids().any(|id| id == shard) {
            return Ok(());
        }
        Err(Status::failed_precondition(format!("shard {shard} is not placed on ingester {:?}", self.id)))
    }

    /// Writes each shard's part (in parallel, so one failing shard costs only its own
    /// acknowledgement), records the holes of the parts that failed, and answers one
    /// outcome per shard, plus whether every part failed because `deadline` passed
    /// before its append started.
    async fn push_parts(
        &self,
        tenant: String,
        parts: BTreeMap<ShardId, Part>,
        deadline: Instant,
    ) -> (Vec<pb::ShardOutcome>, bool) {
        let tenant = tenant.as_str();
        let tasks = parts.into_iter().map(|(shard, part)| async move {
            if self.holes.refuses_writes(shard) {
                let e = ShardError::unavailable(format!(
                    "shard {shard} on ingester {:?} is catching up on writes it missed (repair from its peers) and \
                     takes no writes until it has",
                    self.id
                ));
                return (convert::outcome_to_pb(shard, Err(e), &part.index), None, false);
            }
            let span = part.span();
            let Part { series, index, metadata } = part;
            let r = if series.is_empty() {
                if Instant::now() >= deadline {
                    Err(ShardError::new(ShardErrorKind::Timeout, "the push's deadline passed; metadata not recorded"))
                } else {
                    Ok(crate::shards::PushOutcome::default())
                }
            } else {
                self.shards.push_before(tenant, series, Some(deadline)).await
            };
            if r.is_ok() {
                self.metadata.record(tenant, metadata);
            }
            let late = r.as_ref().is_err_and(|e| e.kind == ShardErrorKind::Timeout);
            // A part not stored is a hole here: the other replicas may have it.
            let hole = r.is_err().then_some((shard, span));
            (convert::outcome_to_pb(shard, r, &index), hole, late)
        });
        let results = futures::future::join_all(tasks).await;
        let all_late = !results.is_empty() && results.iter().all(|(_, _, late)| *late);
        let mut holes = Vec::new();
        let mut shards = Vec::with_capacity(results.len());
        for (outcome, hole, _) in results {
            if let Some(h) = hole {
                tracing::warn!(shard = h.0 .0, error = %outcome.error, "push failed on this shard: recorded a hole for repair");
                holes.push(h);
            }
            shards.push(outcome);
        }
        if !holes.is_empty() {
            self.record_holes(holes, "push part not stored").await;
        }
        (shards, all_late)
    }

    /// Adds `holes` to the book and saves it (off the runtime).
    async fn record_holes(&self, holes: Vec<(ShardId, Hole)>, why: &str) {
        for (shard, h) in holes {
            tracing::warn!(shard = shard.0, from = h.from, to = h.to, why, "recorded a hole for repair");
            self.holes.add(shard, h);
        }
        let (book, st) = (Arc::clone(&self.holes), Arc::clone(&self.shards));
        let saved = tokio::task::spawn_blocking(move || book.save(&st)).await;
        if let Ok(Err(e)) | Err(e) = saved.map_err(anyhow::Error::new) {
            tracing::error!(error = %e, "cannot save the repair state file");
        }
    }

    fn tenant_ok(tenant: &str) -> Result<(), Status> {
        if tenant.is_empty() {
            return Err(Status::invalid_argument("request has no tenant"));
        }
        Ok(())
    }
}

/// One shard's part of a push.
#[derive(Default)]
struct Part {
    series: Vec<PushSeries>,
    /// Index of each series in the request.
    index: Vec<usize>,
    metadata: Vec<(String, MetadataEntry)>,
}

impl Part {
    /// The sample time the part covers (a hole if it is not stored); a part of metadata
    /// only covers the current millisecond, so that it still leaves a hole (metadata
    /// reads count any hole of the shard).
    fn span(&self) -> Hole {
        let mut times = self.series.iter().flat_map(|s| s.samples.iter().map(|p| p.t));
        match times.next() {
            Some(first) => {
                let (from, to) = times.fold((first, first), |(lo, hi), t| (lo.min(t), hi.max(t)));
                Hole { from, to }
            }
            None => {
                let now = holes::now_ms();
                Hole { from: now, to: now }
            }
        }
    }
}

/// The caller's deadline from the `grpc-timeout` header (`<digits><H|M|S|m|u|n>`),
/// capped at [`MAX_READ`]; [`MAX_READ`] when absent or unreadable.
pub fn deadline_of<T>(req: &Request<T>) -> Instant {
    let timeout = req
        .metadata()
        .get("grpc-timeout")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_grpc_timeout)
        .map_or(MAX_READ, |t| t.min(MAX_READ));
    Instant::now() + timeout
}

/// Parses a `grpc-timeout` value, e.g. `1500m` = 1.5 s.
pub fn parse_grpc_timeout(v: &str) -> Option<Duration> {
    if v.len() < 2 || v.len() > 9 {
        return None;
    }
    let (digits, unit) = v.split_at(v.len() - 1);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// Runs a blocking shard read off the async workers. The read stops at `deadline`, or
/// when this future is dropped (the client went away): the cancel flag is raised then.
async fn blocking_read<T: Send + 'static>(
    shards: &Arc<Shards>,
    deadline: Instant,
    read: impl FnOnce(&Shards, &Interrupt) -> crate::shards::Result<T> + Send + 'static,
) -> Result<T, Status> {
    let (ctl, _cancel_on_drop) = request_controls(deadline);
    let stop = Interrupt::new(ctl.deadline, ctl.cancel.clone());
    let shards = Arc::clone(shards);
    tokio::task::spawn_blocking(move || read(&shards, &stop))
        .await
        .map_err(|e| Status::internal(format!("read task failed: {e}")))?
        .map_err(convert::status_from_shard_error)
}

fn storage_matchers(ms: &[pb::Matcher]) -> Result<Vec<Matcher>, Status> {
    ms.iter().map(convert::matcher_from_pb).collect()
}

/// Select's frames, built lazily: series with their chunks (moved, not copied) packed up
/// to `budget` bytes. A series whose chunks do not fit continues in the next frame with
/// the same labels; a single chunk larger than `budget` travels alone.
pub fn chunk_frames(series: Vec<SeriesChunks>, budget: usize) -> FrameStream<pb::SelectResponse> {
    type Open = (Vec<pb::Label>, i64, std::iter::Peekable<std::vec::IntoIter<RawChunk>>);
    let mut rest = series.into_iter();
    let mut open: Option<Open> = None;
    let iter = std::iter::from_fn(move || {
        let mut frame: Vec<pb::ChunkedSeries> = Vec::new();
        let mut bytes = 0;
        while bytes < budget {
            let (labels, min_time, chunks) = match open.as_mut() {
                Some(o) => o,
                None => match rest.next() {
                    Some(s) => open.insert((
                        convert::label_set_to_pb(s.labels.as_slice()).labels,
                        s.min_time,
                        s.chunks.into_iter().peekable(),
                    )),
                    None => break,
                },
            };
            let mut piece = pb::ChunkedSeries { labels: Vec::new(), chunks: Vec::new(), min_time_ms: *min_time };
            bytes += labels.iter().map(|l| l.name.len() + l.value.len() + 6).sum::<usize>() + 16;
            while let Some(c) = chunks.next_if(|c| {
                (frame.is_empty() && piece.chunks.is_empty()) || bytes + convert::chunk_wire_size(c) <= budget
            }) {
                bytes += convert::chunk_wire_size(&c);
                piece.chunks.push(convert::chunk_to_pb(c));
            }
            let done = chunks.peek().is_none();
            if !piece.chunks.is_empty() {
                piece.labels = if done { std::mem::take(labels) } else { labels.clone() };
                frame.push(piece);
            }
            if done {
                open = None;
            } else {
                break;
            }
        }
        (!frame.is_empty()).then(|| Ok(pb::SelectResponse { series: frame }))
    });
    Box::pin(futures::stream::iter(iter))
}

/// Shard `shard`'s counts as pieces of about `budget` bytes each (at least one piece,
/// so a shard without series of the tenant still reports its zero).
pub fn cardinality_pieces(shard: ShardId, counter: &CardinalityCounter, budget: usize) -> Vec<pb::ShardCardinality> {
    let series = counter.series();
    let piece = || pb::ShardCardinality { shard: shard.0, series, pairs: Vec::new() };
    let mut out = vec![piece()];
    let mut bytes = 0;
    for (name, value, n) in counter.pairs() {
        let size = name.len() + value.len() + 16;
        if bytes + size > budget && out.last().is_some_and(|p| !p.pairs.is_empty()) {
            out.push(piece());
            bytes = 0;
        }
        bytes += size;
        if let Some(p) = out.last_mut() {
            p.pairs.push(pb::LabelPairCount { name: name.to_owned(), value: value.to_owned(), series: n });
        }
    }
    out
}

/// Frames of about `budget` bytes, built lazily from `items`.
fn frames<I, T, F>(items: Vec<I>, budget: usize, size: fn(&I) -> usize, wrap: F) -> FrameStream<T>
where
    I: Send + 'static,
    T: Send + 'static,
    F: Fn(Vec<I>) -> T + Send + 'static,
{
    Box::pin(futures::stream::iter(convert::batches(items, budget, size).map(move |batch| Ok(wrap(batch)))))
}

#[tonic::async_trait]
impl pb::ingester_server::Ingester for IngesterService {
    async fn push(&self, request: Request<pb::PushRequest>) -> Result<Response<pb::PushResponse>, Status> {
        let deadline = deadline_of(&request);
        let req = request.into_inner();
        self.check(req.cluster.as_ref())?;
        Self::tenant_ok(&req.tenant)?;
        let mut parts: BTreeMap<ShardId, Part> = BTreeMap::new();
        for (i, s) in req.series.into_iter().enumerate() {
            let (shard, series) = convert::push_series_from_pb(&req.tenant, s)
                .map_err(|e| Status::invalid_argument(format!("series {i}: {e}")))?;
            let actual = ShardId::of(series.hash, self.identity.shards);
            if actual != shard {
                return Err(Status::invalid_argument(format!(
                    "series {i} was sent for shard {shard} but hashes to shard {actual}"
                )));
            }
            self.owned(shard)?;
            let part = parts.entry(shard).or_default();
            part.series.push(series);
            part.index.push(i);
        }
        for (i, m) in req.metadata.into_iter().enumerate() {
            let sent = ShardId(m.shard);
            let (metric, entry) =
                convert::metadata_from_pb(m).map_err(|e| Status::invalid_argument(format!("metadata {i}: {e}")))?;
            let actual = convert::metadata_shard(&req.tenant, &metric, self.identity.shards);
            if actual != sent {
                return Err(Status::invalid_argument(format!(
                    "metadata {i} ({metric:?}) was sent for shard {sent} but belongs to shard {actual}"
                )));
            }
            self.owned(actual)?;
            parts.entry(actual).or_default().metadata.push((metric, entry));
        }
        if Instant::now() >= deadline {
            // The caller has given up: write nothing. The other replicas may have taken
            // it, so this one may now miss it: a hole, which repair fills.
            let holes: Vec<(ShardId, Hole)> = parts.iter().map(|(&shard, p)| (shard, p.span())).collect();
            self.record_holes(holes, "the push arrived after its deadline").await;
            return Err(Status::deadline_exceeded(
                "the push's deadline (grpc-timeout) had passed when it arrived; nothing was written",
            ));
        }
        // Run detached: tonic drops this handler when the caller's deadline passes, but
        // an append that started must finish, and a part refused or failed must still
        // leave its hole.
        let svc = self.clone();
        let tenant = req.tenant;
        let in_progress = self.pushes.enter();
        let (shards, all_late) = tokio::spawn(async move {
            let r = svc.push_parts(tenant, parts, deadline).await;
            drop(in_progress);
            r
        })
        .await
        .map_err(|e| Status::internal(format!("push task failed: {e}")))?;
        if all_late {
            return Err(Status::deadline_exceeded(format!(
                "the push's deadline (grpc-timeout) passed while it waited for storage; nothing was written ({})",
                shards.iter().map(|o| o.error.as_str()).collect::<Vec<_>>().join("; ")
            )));
        }
        Ok(Response::new(pb::PushResponse { shards }))
    }

    type SelectStream = FrameStream<pb::SelectResponse>;

    async fn select(&self, request: Request<pb::SelectRequest>) -> Result<Response<Self::SelectStream>, Status> {
        let deadline = deadline_of(&request);
        let req = request.into_inner();
        self.check(req.cluster.as_ref())?;
        Self::tenant_ok(&req.tenant)?;
        let ms = storage_matchers(&req.matchers)?;
        // The guard lives in this future: dropped (client gone, deadline) = scans stop.
        let (tenant, start, end) = (req.tenant, req.start_ms, req.end_ms);
        let holes = self.holes_header(start, end);
        let series =
            blocking_read(&self.shards, deadline, move |sh, stop| sh.select_chunks(&tenant, &ms, start, end, stop))
                .await?;
        Ok(Self::naming_holes(Response::new(chunk_frames(series, self.frame_bytes)), holes))
    }

    async fn label_names(
        &self,
        request: Request<pb::LabelNamesRequest>,
    ) -> Result<Response<pb::LabelNamesResponse>, Status> {
        let deadline = deadline_of(&request);
        let req = request.into_inner();
        self.check(req.cluster.as_ref())?;
        Self::tenant_ok(&req.tenant)?;
        let ms = storage_matchers(&req.matchers)?;
        let (tenant, start, end) = (req.tenant, req.start_ms, req.end_ms);
        let holes = self.holes_header(start, end);
        let names =
            blocking_read(&self.shards, deadline, move |sh, stop| sh.label_names(None, &tenant, &ms, start, end, stop))
                .await?;
        Ok(Self::naming_holes(Response::new(pb::LabelNamesResponse { names }), holes))
    }

    async fn label_values(
        &self,
        request: Request<pb::LabelValuesRequest>,
    ) -> Result<Response<pb::LabelValuesResponse>, Status> {
        let deadline = deadline_of(&request);
        let req = request.into_inner();
        self.check(req.cluster.as_ref())?;
        Self::tenant_ok(&req.tenant)?;
        let ms = storage_matchers(&req.matchers)?;
        let (tenant, name, start, end) = (req.tenant, req.name, req.start_ms, req.end_ms);
        let holes = self.holes_header(start, end);
        let values = blocking_read(&self.shards, deadline, move |sh, stop| {
            sh.label_values(None, &tenant, &name, &ms, start, end, stop)
        })
        .await?;
        Ok(Self::naming_holes(Response::new(pb::LabelValuesResponse { values }), holes))
    }

    type SeriesStream = FrameStream<pb::SeriesResponse>;

    async fn series(&self, request: Request<pb::SeriesRequest>) -> Result<Response<Self::SeriesStream>, Status> {
        let deadline = deadline_of(&request);
        let req = request.into_inner();
        self.check(req.cluster.as_ref())?;
        Self::tenant_ok(&req.tenant)?;
        let ms = storage_matchers(&req.matchers)?;
        let (tenant, start, end) = (req.tenant, req.start_ms, req.end_ms);
        let holes = self.holes_header(start, end);
        let sets =
            blocking_read(&self.shards, deadline, move |sh, stop| sh.series(None, &tenant, &ms, start, end, stop))
                .await?;
        let size: fn(&Labels) -> usize = |l| convert::wire_size(l.as_slice(), 0);
        let resp = Response::new(frames(sets, self.frame_bytes, size, |batch| pb::SeriesResponse {
            series: batch.iter().map(|l| convert::label_set_to_pb(l.as_slice())).collect(),
        }));
        Ok(Self::naming_holes(resp, holes))
    }

    async fn status(&self, request: Request<pb::StatusRequest>) -> Result<Response<pb::StatusResponse>, Status> {
        let req = request.into_inner();
        self.check(req.cluster.as_ref())?;
        let shards = Arc::clone(&self.shards);
        // Engine stats read RocksDB properties: off the runtime.
        let stats: BTreeMap<ShardId, u64> = tokio::task::spawn_blocking(move || {
            shards.stats().into_iter().map(|(id, s)| (id, s.total_series)).collect()
        })
        .await
        .map_err(|e| Status::internal(format!("stats task failed: {e}")))?;
        let states = self.holes.states();
        let shard_status = stats
            .iter()
            .map(|(id, &series)| {
                let st = states.get(id).cloned().unwrap_or_default();
                pb::ShardStatus {
                    shard: id.0,
                    series,
                    holes: st.holes.iter().map(|h| pb::HoleRange { from_ms: h.from, to_ms: h.to }).collect(),
                    refusing_writes: st.refuse_writes,
                    repaired_samples: st.repaired_samples,
                    last_error: st.last_error.unwrap_or_default(),
                }
            })
            .collect();
        Ok(Response::new(pb::StatusResponse {
            ingester_id: self.id.clone(),
            cluster: Some(convert::identity_to_pb(&self.identity)),
            shards: self.shards.ids().map(|s| s.0).collect(),
            series: stats.values().sum(),
            shard_status,
        }))
    }

    async fn metadata(&self, request: Request<pb::MetadataRequest>) -> Result<Response<pb::MetadataResponse>, Status> {
        let req = request.into_inner();
        self.check(req.cluster.as_ref())?;
        Self::tenant_ok(&req.tenant)?;
        // Metadata has no time range: every hole of a shard may have cost it entries.
        let holes = self.holes_header(i64::MIN, i64::MAX);
        let store = Arc::clone(&self.metadata);
        let limit = (req.limit > 0).then(|| usize::try_from(req.limit).unwrap_or(usize::MAX));
        // Copying up to the tenant's byte bound of texts: off the runtime.
        let families = tokio::task::spawn_blocking(move || {
            let metric = (!req.metric.is_empty()).then_some(req.metric.as_str());
            store
                .query(&req.tenant, metric, limit, None)
                .into_iter()
                .map(|(metric, entries)| pb::MetricMetadataFamily {
                    entries: entries.iter().map(|e| convert::metadata_to_pb(&metric, e, ShardId(0))).collect(),
                    metric,
                })
                .collect()
        })
        .await
        .map_err(|e| Status::internal(format!("metadata task failed: {e}")))?;
        Ok(Self::naming_holes(Response::new(pb::MetadataResponse { families }), holes))
    }

    type CardinalityStream = FrameStream<pb::CardinalityResponse>;

    async fn cardinality(
        &self,
        request: Request<pb::CardinalityRequest>,
    ) -> Result<Response<Self::CardinalityStream>, Status> {
        let deadline = deadline_of(&request);
        let req = request.into_inner();
        self.check(req.cluster.as_ref())?;
        Self::tenant_ok(&req.tenant)?;
        // All time: every hole of a shard may have cost it series.
        let holes = self.holes_header(i64::MIN, i64::MAX);
        let (tenant, budget) = (req.tenant, self.frame_bytes);
        let pieces = blocking_read(&self.shards, deadline, move |sh, stop| {
            let ids: Vec<ShardId> = sh.ids().collect();
            let mut pieces = Vec::new();
            for id in ids {
                // One shard at a time: memory holds one shard's label sets.
                let series = sh.series(Some(&[id]), &tenant, &[], i64::MIN, i64::MAX, stop)?;
                let mut counter = CardinalityCounter::default();
                for (i, labels) in series.iter().enumerate() {
                    if i % 4096 == 0 {
                        stop.check("counting series per label pair").map_err(ShardError::from)?;
                    }
                    counter.add(labels);
                }
                pieces.extend(cardinality_pieces(id, &counter, budget));
            }
            Ok(pieces)
        })
        .await?;
        let size: fn(&pb::ShardCardinality) -> usize = |p| prost::Message::encoded_len(p);
        let resp = Response::new(frames(pieces, budget, size, |shards| pb::CardinalityResponse { shards }));
        Ok(Self::naming_holes(resp, holes))
    }

    type RepairStream = FrameStream<pb::RepairResponse>;

    async fn repair(&self, request: Request<pb::RepairRequest>) -> Result<Response<Self::RepairStream>, Status> {
        let req = request.into_inner();
        self.check(req.cluster.as_ref())?;
        let shard = ShardId(req.shard);
        if !self.shards.ids().any(|id| id == shard) {
            return Err(Status::failed_precondition(format!("shard {shard} is not placed on ingester {:?}", self.id)));
        }
        if req.start_ms > req.end_ms {
            return Err(Status::invalid_argument(format!(
                "repair range starts at {} ms, after its end {} ms",
                req.start_ms, req.end_ms
            )));
        }
        tracing::info!(shard = shard.0, requester = %req.requester, from = req.start_ms, to = req.end_ms,
            "serving a repair fetch");
        let holes: Vec<ShardHole> = self
            .holes
            .overlapping(shard, req.start_ms, req.end_ms)
            .into_iter()
            .map(|hole| ShardHole { shard: shard.0, hole })
            .collect();
        // Bounded: the reader waits while two frames are unsent.
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        // First frame: the metadata of the shard's metric families (in memory, small:
        // bounded by the tenants' metadata limits).
        let total = self.identity.shards;
        let metadata: Vec<pb::RepairMetadata> = self
            .metadata
            .export(|tenant, metric| convert::metadata_shard(tenant, metric, total) == shard)
            .into_iter()
            .map(|(tenant, families)| pb::RepairMetadata {
                tenant,
                entries: families
                    .iter()
                    .flat_map(|(metric, list)| list.iter().map(|e| convert::metadata_to_pb(metric, e, shard)))
                    .collect(),
            })
            .collect();
        if !metadata.is_empty() {
            let _ = tx.send(Ok(pb::RepairResponse { series: Vec::new(), metadata })).await;
        }
        let shards = Arc::clone(&self.shards);
        let (start, end) = (req.start_ms, req.end_ms);
        tokio::task::spawn_blocking(move || repair_slices(&shards, shard, start, end, &tx));
        let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) });
        let mut resp = Response::new(Box::pin(stream) as Self::RepairStream);
        if !holes.is_empty() {
            if let Ok(v) = holes::encode_header(&holes).parse() {
                resp.metadata_mut().insert(holes::HOLES_HEADER, v);
            }
        }
        Ok(resp)
    }

    type EvalStream = FrameStream<pb::EvalResponse>;

    async fn eval(&self, request: Request<pb::EvalRequest>) -> Result<Response<Self::EvalStream>, Status> {
        let deadline = deadline_of(&request);
        let req = request.into_inner();
        self.check(req.cluster.as_ref())?;
        Self::tenant_ok(&req.tenant)?;
        let fragment = req.fragment.ok_or_else(|| Status::invalid_argument("Eval request carries no fragment"))?;
        let fragment = convert::fragment_from_pb(fragment).map_err(Status::invalid_argument)?;
        let mut ids: Vec<ShardId> = req.shards.iter().map(|&s| ShardId(s)).collect();
        ids.sort();
        ids.dedup();
        if ids.is_empty() {
            return Err(Status::invalid_argument("Eval request names no shard"));
        }
        for &id in &ids {
            self.owned(id)?;
        }
        let view = HoleCheckedView {
            inner: TenantView::new(Arc::clone(&self.shards), &req.tenant).restricted_to(&ids),
            ids,
            holes: Arc::clone(&self.holes),
            ingester: self.id.clone(),
        };
        let (engine, executor, pushes) =
            (Arc::clone(&self.engine), Arc::clone(&self.executor), Arc::clone(&self.pushes));
        let budget = self.frame_bytes;
        // The whole evaluation lives in the answer's stream: tonic sends the headers now
        // and polls the stream for the frames; dropping it (the querier went away, or the
        // deadline passed) raises the evaluation's cancel flag.
        let work = async move {
            pushes.wait_for_earlier(deadline).await;
            executor
                .run(deadline, move |ctl| {
                    let opts = QueryOptions {
                        deadline: Some(ctl.deadline),
                        cancel: Some(Arc::clone(&ctl.cancel)),
                        ..Default::default()
                    };
                    engine.eval_fragment(&view, &fragment, &opts)
                })
                .await
        };
        let stream = futures::stream::once(work).flat_map(move |r| {
            let frames: Vec<Result<pb::EvalResponse, Status>> = match r {
                Ok(out) => convert::eval_frames(out, budget).into_iter().map(Ok).collect(),
                Err(e) => vec![Err(convert::status_from_query_error(e))],
            };
            futures::stream::iter(frames)
        });
        Ok(Response::new(Box::pin(stream) as Self::EvalStream))
    }
}

/// Pushes in progress on this ingester, in arrival order, so that an `Eval` can wait
/// for those that arrived before it: a write the other replicas acknowledged while this
/// replica was still appending it is then part of the evaluation.
#[derive(Default)]
pub struct PushGate {
    /// Sequence number of the next push, and those still running.
    state: parking_lot::Mutex<(u64, std::collections::BTreeSet<u64>)>,
    done: tokio::sync::Notify,
}

/// A push in progress; dropping it ends it.
pub struct PushInProgress {
    gate: Arc<PushGate>,
    seq: u64,
}

impl Drop for PushInProgress {
    fn drop(&mut self) {
        self.gate.state.lock().1.remove(&self.seq);
        self.gate.done.notify_waiters();
    }
}

impl PushGate {
    pub fn enter(self: &Arc<Self>) -> PushInProgress {
        let mut st = self.state.lock();
        let seq = st.0;
        st.0 += 1;
        st.1.insert(seq);
        PushInProgress { gate: Arc::clone(self), seq }
    }

    /// Waits until every push that entered before this call has ended, or `deadline`.
    pub async fn wait_for_earlier(&self, deadline: Instant) {
        let before = self.state.lock().0;
        loop {
            let notified = self.done.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.state.lock().1.first().is_none_or(|&oldest| oldest >= before) {
                return;
            }
            if tokio::time::timeout_at(deadline.into(), notified).await.is_err() {
                return;
            }
        }
    }
}

/// An ingester's view for one `Eval`: the tenant's series in the named shards, every
/// read refused (`unavailable`) when its range overlaps a hole of one of them, so that
/// an answer is only ever complete.
struct HoleCheckedView {
    inner: TenantView,
    ids: Vec<ShardId>,
    holes: Arc<HoleBook>,
    ingester: String,
}

impl HoleCheckedView {
    fn check(&self, start: i64, end: i64) -> Result<(), QueryError> {
        for &id in &self.ids {
            if let Some(h) = self.holes.overlapping(id, start, end).first() {
                return Err(QueryError::new(
                    ErrorKind::Unavailable,
                    format!(
                        "ingester {:?} may be missing writes of shard {id} in {h} (repairing from its peers)",
                        self.ingester
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl Queryable for HoleCheckedView {
    fn select(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<SelectResult, QueryError> {
        self.check(hints.start, hints.end)?;
        self.inner.select(matchers, hints, ctl)
    }

    fn select_stream<'a>(
        &'a self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<SeriesStream<'a>>, QueryError> {
        self.check(hints.start, hints.end)?;
        self.inner.select_stream(matchers, hints, ctl)
    }

    fn series(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<Vec<Labels>>, QueryError> {
        self.check(hints.start, hints.end)?;
        self.inner.series(matchers, hints, ctl)
    }

    fn label_names(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<Vec<String>>, QueryError> {
        self.check(hints.start, hints.end)?;
        self.inner.label_names(matchers, hints, ctl)
    }

    fn label_values(
        &self,
        name: &str,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<Vec<String>>, QueryError> {
        self.check(hints.start, hints.end)?;
        self.inner.label_values(name, matchers, hints, ctl)
    }
}

/// Reads shard `shard`'s data in `[start, end]` slice by slice (from its oldest day,
/// up to its newest sample as it grows meanwhile) and sends it as frames on `tx`.
/// Blocking; stops when the receiver is gone (the caller cancelled).
fn repair_slices(
    shards: &Shards,
    shard: ShardId,
    start: i64,
    end: i64,
    tx: &tokio::sync::mpsc::Sender<Result<pb::RepairResponse, Status>>,
) {
    let Some((oldest, _)) = shards.time_bounds(shard) else { return };
    let mut lo = start.max(oldest);
    loop {
        // Re-read each time: writes arriving during the stream extend it.
        let newest = shards.time_bounds(shard).map_or(i64::MIN, |(_, n)| n);
        let hi_limit = end.min(newest);
        if lo > hi_limit {
            return;
        }
        let hi = lo.saturating_add(REPAIR_SLICE_MS - 1).min(hi_limit);
        let (ctl, _cancel) = request_controls(Instant::now() + REPAIR_SLICE_TIMEOUT);
        let stop = Interrupt::new(ctl.deadline, ctl.cancel.clone());
        let series = match shards.select_shard(shard, lo, hi, &stop) {
            Ok(s) => s,
            Err(e) => {
                let _ = tx.blocking_send(Err(convert::status_from_shard_error(e)));
                return;
            }
        };
        let (mut frame, mut bytes) = (Vec::new(), 0);
        for s in series {
            if tx.is_closed() {
                return;
            }
            let tenant = s.labels.get(TENANT_LABEL).unwrap_or_default().to_owned();
            let labels = crate::shards::strip_tenant(s.labels);
            bytes += convert::wire_size(labels.as_slice(), s.samples.len());
            let series = convert::series_to_pb(SeriesSamples { labels, samples: s.samples });
            frame.push(pb::RepairSeries { tenant, series: Some(pb::Series { shard: shard.0, ..series }) });
            if bytes >= FRAME_BYTES {
                bytes = 0;
                let series = std::mem::take(&mut frame);
                if tx.blocking_send(Ok(pb::RepairResponse { series, metadata: Vec::new() })).is_err() {
                    return;
                }
            }
        }
        if !frame.is_empty()
            && tx.blocking_send(Ok(pb::RepairResponse { series: frame, metadata: Vec::new() })).is_err()
        {
            return;
        }
        if hi == i64::MAX {
            return;
        }
        lo = hi + 1;
    }
}

#[cfg(test)]
mod tests;

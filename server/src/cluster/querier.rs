//! [`ClusterQueryable`]: one tenant's data in the cluster as the query engine's
//! [`Queryable`]: every read fans out to the ingesters over gRPC and merges.
//!
//! **The read rule.** A read asks every ingester (each answers for all the shards it
//! holds) and is complete once every shard has been answered by R = RF − W + 1 of its
//! replicas. Any R replicas of a shard include at least one of the W that acknowledged
//! each write, so the union of their answers holds every acknowledged sample, even when
//! one of them missed writes while it was down. Series are merged by label set and
//! their samples by timestamp (equal timestamps: the first ingester in config order
//! wins, so the answer is deterministic). As soon as every shard has R answers the read
//! stops waiting: a slow or hung replica beyond the quorum does not hold the query.
//!
//! **Select decodes here.** Ingesters send each series' stored chunks (raw Gorilla XOR,
//! see `ingester.rs`); the merge decodes every replica's chunks with storage's
//! `ChunkSamples` (the rule storage's own `select` uses for overlapping chunks), trims
//! them to the range and to the series' `min_time_ms` (the ingester's retention
//! watermark), and only then merges replicas as above. The decoding runs on the
//! calling (engine or blocking) thread after the fan-out, never on a runtime worker.
//!
//! A shard with fewer than R answering replicas fails the read with "unavailable" (503)
//! naming the shards and why each replica failed; with `partial_response` (a view made
//! per request: the query API's switch, the index endpoints and remote read all read
//! the parameter) the read answers what it has and says in a warning which shards may
//! be incomplete. Each such read is counted in
//! `tessera_cluster_shard_coverage_failures_total`, and every call in the
//! `tessera_cluster_grpc_*` metrics (`metrics.rs`).
//!
//! **Holes.** An ingester knows the time ranges each of its shards may be missing (it
//! was down, restarted, or a push failed; `holes.rs`) and names those that overlap a
//! request's range in the answer's `tessera-holes` header. A replica counts towards a
//! shard's R only if it answered *and* names no hole of that shard overlapping the
//! query's `[start, end]` ([`complete_replicas`]); its data is still merged (it may
//! hold samples the others lack). So a replica that came back after missing writes
//! never completes a read of the range it missed, even when it is the only one left:
//! the read waits for others, or fails (or warns, with `partial_response`) naming the
//! hole. Once repair (`repair.rs`) has filled the hole from the other replicas, the
//! replica counts again.
//!
//! The trait is synchronous (the engine evaluates on its own thread, the index API on
//! the blocking pool); the fan-out runs on the runtime the view was made on, via
//! [`tokio::runtime::Handle::block_on`]. The request's deadline becomes every call's
//! `grpc-timeout`, and the cancel flag is polled: when it fires, the calls are dropped,
//! which cancels them on the ingesters and stops their storage scans.
//!
//! **Pushdown.** A view made [`ClusterQueryable::with_pushdown`] is also the engine's
//! `ShardEvaluator`: the planner's fragments are evaluated on one complete replica per
//! logical shard (`Eval`), falling back to the `Select` path above for shards no
//! replica can evaluate (`pushdown.rs`).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use tessera_model::{Labels, Matcher, Sample};
use tessera_proto::ingester as pb;
use tessera_query::{ErrorKind, QueryError, QueryOptions, Queryable, ReadResult, SelectHints, SelectResult, Series};
use tonic::Status;

use super::convert;
use super::holes::{self, ShardHole};
use super::metrics::Shortfall;
use super::peers::Peers;
use crate::http::query_api::CardinalityCounter;
use crate::metadata::{MetadataEntry, MAX_ENTRIES_PER_METRIC};

/// Longest a read waits when the request has no deadline.
pub(super) const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(120);
/// How often a running fan-out looks at the request's cancel flag.
pub(super) const CANCEL_POLL: Duration = Duration::from_millis(20);

/// A tenant-scoped, synchronous read view of the cluster.
pub struct ClusterQueryable {
    pub(super) peers: Arc<Peers>,
    pub(super) tenant: String,
    /// Answer with warnings instead of failing when a shard lacks R replicas.
    partial: bool,
    pub(super) runtime: tokio::runtime::Handle,
    /// Pushes query fragments down to the ingesters (`pushdown.rs`) when set: the
    /// engine that evaluates here what no replica could.
    pub(super) engine: Option<Arc<tessera_query::Engine>>,
}

/// What every ingester answered to one read.
struct FanOut<T> {
    /// Per ingester (config order): its answer, if it gave one.
    answers: Vec<Option<T>>,
    /// Per ingester: why it did not answer.
    errors: Vec<Option<String>>,
    /// Per ingester: the holes its answer named.
    holes: Vec<Vec<ShardHole>>,
}

/// How many of a shard's `replicas` (indexes into the per-ingester vectors) count
/// towards its read quorum for a read of `[start, end]`: those that answered and named
/// no hole of `shard` overlapping the range.
pub fn complete_replicas(
    replicas: &[usize],
    answered: &[bool],
    holes: &[Vec<ShardHole>],
    shard: u32,
    (start, end): (i64, i64),
) -> usize {
    replicas
        .iter()
        .filter(|&&i| answered[i] && !holes[i].iter().any(|h| h.shard == shard && h.hole.overlaps(start, end)))
        .count()
}

/// The holes an ingester's answer names (its `tessera-holes` header); a header that
/// cannot be read counts as a hole over every shard it holds, so it never completes a
/// read it might not.
fn holes_of<M>(resp: &tonic::Response<M>, ingester: usize, peers: &Peers) -> Vec<ShardHole> {
    let Some(v) = resp.metadata().get(holes::HOLES_HEADER) else { return Vec::new() };
    match v.to_str().map_err(|e| e.to_string()).and_then(holes::parse_header) {
        Ok(h) => h,
        Err(e) => {
            tracing::warn!(ingester = %peers.peers[ingester].id, error = %e, "unreadable holes header");
            let all = holes::Hole { from: i64::MIN, to: i64::MAX };
            peers.placement.shards_of(ingester).into_iter().map(|shard| ShardHole { shard, hole: all }).collect()
        }
    }
}

impl ClusterQueryable {
    pub fn new(peers: Arc<Peers>, tenant: &str, partial: bool, runtime: tokio::runtime::Handle) -> Self {
        ClusterQueryable { peers, tenant: tenant.to_owned(), partial, runtime, engine: None }
    }

    /// This view, pushing the planner's fragments down to the ingesters (`Eval`), with
    /// `engine` evaluating here the shards no replica could.
    pub fn with_pushdown(mut self, engine: Arc<tessera_query::Engine>) -> Self {
        self.engine = Some(engine);
        self
    }

    /// Calls `call` on every ingester in parallel until every shard has R answers (or
    /// every call ended), under the request's deadline and cancel flag; then checks the
    /// shards' coverage (error, or warnings when partial).
    /// `range` is the read's `[start, end]` (ms), for the hole rule.
    fn fan_out<T, F, Fut>(
        &self,
        ctl: &QueryOptions,
        method: &'static str,
        range: (i64, i64),
        call: F,
    ) -> Result<(FanOut<T>, Vec<String>), QueryError>
    where
        T: Send + 'static,
        F: Fn(usize, Duration) -> Fut,
        Fut: Future<Output = Result<(T, Vec<ShardHole>), Status>> + Send + 'static,
    {
        let peers = &self.peers;
        let deadline = ctl.deadline.unwrap_or_else(|| Instant::now() + DEFAULT_READ_TIMEOUT);
        let timeout = deadline.saturating_duration_since(Instant::now());
        if timeout.is_zero() {
            return Err(QueryError::new(ErrorKind::Timeout, "query timed out before reading the ingesters"));
        }
        let n = peers.peers.len();
        let r = peers.read_quorum();
        let mut out =
            FanOut { answers: (0..n).map(|_| None).collect(), errors: vec![None; n], holes: vec![Vec::new(); n] };
        let calls: FuturesUnordered<_> = (0..n)
            .map(|i| {
                let fut = call(i, timeout);
                let peer = &peers.peers[i].id;
                let call = async move {
                    match tokio::time::timeout(timeout, fut).await {
                        Ok(r) => r,
                        Err(_) => {
                            Err(Status::deadline_exceeded(format!("no answer within {} ms", timeout.as_millis())))
                        }
                    }
                };
                async move { (i, peers.metrics.track(peer, method, call).await) }
            })
            .collect();
        let cancel = ctl.cancel.clone();
        let covered = |out: &FanOut<T>| {
            let answered: Vec<bool> = out.answers.iter().map(Option::is_some).collect();
            peers
                .placement
                .replicas
                .iter()
                .enumerate()
                .all(|(s, reps)| complete_replicas(reps, &answered, &out.holes, s as u32, range) >= r)
        };
        let outcome: Result<(), QueryError> = self.runtime.block_on(async {
            let mut calls = calls;
            let mut poll = tokio::time::interval(CANCEL_POLL);
            loop {
                tokio::select! {
                    next = calls.next() => {
                        let Some((i, res)) = next else { return Ok(()) };
                        match res {
                            Ok((v, holes)) => {
                                out.answers[i] = Some(v);
                                out.holes[i] = holes;
                            }
                            Err(status) => {
                                if status.code() == tonic::Code::InvalidArgument {
                                    return Err(convert::query_error_from_status(&peers.peers[i].id, &status));
                                }
                                out.errors[i] = Some(convert::status_text(&status));
                            }
                        }
                        if covered(&out) {
                            // Replicas beyond the quorum are not waited for; dropping
                            // their calls cancels them on the ingesters.
                            return Ok(());
                        }
                    }
                    _ = poll.tick() => {
                        if cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
                            return Err(QueryError::new(ErrorKind::Canceled, "query was canceled while reading the ingesters"));
                        }
                        if Instant::now() >= deadline {
                            return Err(QueryError::new(ErrorKind::Timeout, "query timed out reading the ingesters"));
                        }
                    }
                }
            }
        });
        outcome?;
        let warnings = self.coverage(&out, range)?;
        Ok((out, warnings))
    }

    /// Shards with fewer than R answering replicas: an error naming them, or (partial)
    /// one warning naming them.
    fn coverage<T>(&self, out: &FanOut<T>, range: (i64, i64)) -> Result<Vec<String>, QueryError> {
        let peers = &self.peers;
        let r = peers.read_quorum();
        let answered: Vec<bool> = out.answers.iter().map(Option::is_some).collect();
        let mut short = Vec::new();
        for (s, reps) in peers.placement.replicas.iter().enumerate() {
            let ok = complete_replicas(reps, &answered, &out.holes, s as u32, range);
            if ok < r {
                short.push((s, ok));
            }
        }
        if short.is_empty() {
            return Ok(Vec::new());
        }
        let shards: Vec<String> = short.iter().map(|(s, ok)| format!("{s} ({ok} of {r})")).collect();
        let mut why: Vec<String> = Vec::new();
        for (i, e) in out.errors.iter().enumerate() {
            if let Some(e) = e {
                why.push(format!("{}: {e}", peers.peers[i].id));
            }
        }
        for (i, hs) in out.holes.iter().enumerate() {
            let short_holes: Vec<String> = hs
                .iter()
                .filter(|h| short.iter().any(|&(s, _)| s as u32 == h.shard) && h.hole.overlaps(range.0, range.1))
                .map(|h| format!("shard {} in {}", h.shard, h.hole))
                .collect();
            if !short_holes.is_empty() {
                why.push(format!(
                    "{} may be missing writes (repairing from its peers): {}",
                    peers.peers[i].id,
                    short_holes.join(", ")
                ));
            }
        }
        let detail = format!(
            "shards {} could not be read from the {r} replica(s) a complete answer needs (read quorum = \
             replication factor {} - write quorum {} + 1){}",
            shards.join(", "),
            peers.config.replication_factor,
            peers.write_quorum(),
            if why.is_empty() { String::new() } else { format!("; {}", why.join("; ")) }
        );
        let what = if self.partial { Shortfall::Partial } else { Shortfall::Failed };
        peers.metrics.shortfall("read", short.len(), what);
        if self.partial {
            Ok(vec![format!("partial response: {detail}; their data may be missing or incomplete")])
        } else {
            Err(QueryError::new(
                ErrorKind::Unavailable,
                format!("{detail}; add partial_response=true to answer from the replicas that did"),
            ))
        }
    }

    /// Decodes every replica's chunks (trimmed to `[start, end]` and to each series'
    /// `min_time_ms`) and merges the replicas per series: union by timestamp, the first
    /// ingester in config order winning an equal timestamp. A replica whose chunks do
    /// not decode fails the read (it sent data that is not what storage holds).
    fn merge_chunked(
        &self,
        answers: Vec<Option<Vec<pb::ChunkedSeries>>>,
        start: i64,
        end: i64,
    ) -> Result<Vec<Series>, QueryError> {
        let mut merged: BTreeMap<Labels, Vec<Vec<Sample>>> = BTreeMap::new();
        for (i, answer) in answers.into_iter().enumerate() {
            let Some(answer) = answer else { continue };
            // One replica: its pieces per series, in the order they came (a series cut
            // across frames arrives as consecutive pieces).
            let mut per_series: BTreeMap<Labels, (i64, Vec<pb::Chunk>)> = BTreeMap::new();
            for piece in answer {
                let e =
                    per_series.entry(convert::labels_from_pb_set(piece.labels)).or_insert((piece.min_time_ms, vec![]));
                e.0 = e.0.max(piece.min_time_ms);
                e.1.extend(piece.chunks);
            }
            for (labels, (min_time, chunks)) in per_series {
                let samples = convert::samples_from_chunks(&chunks, min_time.max(start), end).map_err(|e| {
                    QueryError::new(
                        ErrorKind::Internal,
                        format!("ingester {}: series {labels}: {e}", self.peers.peers[i].id),
                    )
                })?;
                if !samples.is_empty() {
                    merged.entry(labels).or_default().push(samples);
                }
            }
        }
        Ok(merged.into_iter().map(|(labels, parts)| Series { labels, samples: merge_samples(parts) }).collect())
    }

    /// The tenant's metric metadata from the ingesters (`/api/v1/metadata`): the read
    /// rule above with an all-time range (metadata lives in memory, so any hole of a
    /// shard may have cost a replica entries), families merged across replicas with
    /// identical entries once, then Prometheus' `limit` (families, by name) and
    /// `limit_per_metric` (entries) exactly as the single node applies them. Entries of
    /// a family keep the order of the first replica (config order) that has each:
    /// newest first when the replicas agree.
    pub fn metadata(
        &self,
        metric: Option<&str>,
        limit: Option<usize>,
        limit_per_metric: Option<usize>,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<BTreeMap<String, Vec<MetadataEntry>>>, QueryError> {
        if limit == Some(0) {
            return Ok(ReadResult::new(BTreeMap::new()));
        }
        let cluster = self.peers.pb_identity();
        let peers = Arc::clone(&self.peers);
        // The first `limit` families of the union are among each replica's first `limit`.
        let wire_limit = limit.map_or(0, |l| l as u64);
        let (out, warnings) = self.fan_out(ctl, "Metadata", (i64::MIN, i64::MAX), |i, timeout| {
            let mut client = self.peers.peers[i].client.clone();
            let peers = Arc::clone(&peers);
            let req = pb::MetadataRequest {
                cluster: Some(cluster.clone()),
                tenant: self.tenant.clone(),
                metric: metric.unwrap_or_default().to_owned(),
                limit: wire_limit,
            };
            async move {
                let resp = client.metadata(with_timeout(req, timeout)).await?;
                let holes = holes_of(&resp, i, &peers);
                Ok((resp.into_inner().families, holes))
            }
        })?;
        let mut merged: BTreeMap<String, Vec<MetadataEntry>> = BTreeMap::new();
        for family in out.answers.into_iter().flatten().flatten() {
            let list = merged.entry(family.metric).or_default();
            for m in family.entries {
                let (_, e) = convert::metadata_from_pb(m).map_err(|e| QueryError::new(ErrorKind::Internal, e))?;
                if list.len() < MAX_ENTRIES_PER_METRIC && !list.contains(&e) {
                    list.push(e);
                }
            }
        }
        let per = limit_per_metric.unwrap_or(usize::MAX);
        let data = merged
            .into_iter()
            .filter(|(name, _)| metric.is_none_or(|m| m == name))
            .take(limit.unwrap_or(usize::MAX))
            .map(|(name, mut list)| {
                list.truncate(per);
                (name, list)
            })
            .collect();
        Ok(ReadResult { data, warnings })
    }

    /// The tenant's cardinality (`/api/v1/status/tsdb`): every ingester counts, per
    /// shard, the tenant's series and series per label pair; per shard the counts of
    /// ONE replica are taken (series of a shard are on all of its replicas, so adding
    /// replicas would count them RF times): the replica with the most series among
    /// those that count towards the read quorum (answered, no hole of the shard at
    /// all), or with `partial_response` and none such, among those that answered.
    /// Shards are disjoint, so the chosen shards' counts add up exactly: series, series
    /// per pair, and from the merged pairs every other figure (distinct values per
    /// name, distinct pairs, bytes per name) as one node would count them.
    pub fn cardinality(&self, ctl: &QueryOptions) -> Result<ReadResult<CardinalityCounter>, QueryError> {
        let cluster = self.peers.pb_identity();
        let peers = Arc::clone(&self.peers);
        let all_time = (i64::MIN, i64::MAX);
        let (out, warnings) = self.fan_out(ctl, "Cardinality", all_time, |i, timeout| {
            let mut client = self.peers.peers[i].client.clone();
            let peers = Arc::clone(&peers);
            let req = pb::CardinalityRequest { cluster: Some(cluster.clone()), tenant: self.tenant.clone() };
            async move {
                let resp = client.cardinality(with_timeout(req, timeout)).await?;
                let holes = holes_of(&resp, i, &peers);
                let mut stream = resp.into_inner();
                let mut pieces = Vec::new();
                while let Some(frame) = stream.message().await? {
                    let bytes = prost::Message::encoded_len(&frame) as u64;
                    peers.metrics.response_bytes.inc_by(&[&peers.peers[i].id, "Cardinality"], bytes);
                    pieces.extend(frame.shards);
                }
                Ok((pieces, holes))
            }
        })?;
        let answered: Vec<bool> = out.answers.iter().map(Option::is_some).collect();
        // Per ingester: shard → (series, its pieces' pairs).
        let mut per_ingester: Vec<BTreeMap<u32, (u64, Vec<pb::LabelPairCount>)>> =
            vec![BTreeMap::new(); out.answers.len()];
        for (i, answer) in out.answers.into_iter().enumerate() {
            for piece in answer.into_iter().flatten() {
                let e = per_ingester[i].entry(piece.shard).or_insert((piece.series, Vec::new()));
                e.1.extend(piece.pairs);
            }
        }
        let mut counter = CardinalityCounter::default();
        for (s, reps) in self.peers.placement.replicas.iter().enumerate() {
            let shard = s as u32;
            let series_of = |i: usize| per_ingester[i].get(&shard).map(|(n, _)| *n);
            let best = |candidates: Vec<usize>| {
                // Most series; ties to the first in config order.
                candidates.into_iter().filter(|&i| series_of(i).is_some()).fold(None, |best: Option<usize>, i| {
                    match best {
                        Some(b) if series_of(b) >= series_of(i) => Some(b),
                        _ => Some(i),
                    }
                })
            };
            let complete: Vec<usize> = reps
                .iter()
                .copied()
                .filter(|&i| complete_replicas(&[i], &answered, &out.holes, shard, all_time) == 1)
                .collect();
            let chosen = best(complete).or_else(|| best(reps.clone()));
            let Some(i) = chosen else { continue };
            if let Some((n, pairs)) = per_ingester[i].remove(&shard) {
                counter.add_series(n);
                for p in pairs {
                    counter.add_pair(&p.name, &p.value, p.series);
                }
            }
        }
        Ok(ReadResult { data: counter, warnings })
    }

    fn request_parts(&self, matchers: &[Matcher]) -> (pb::ClusterIdentity, Vec<pb::Matcher>) {
        (self.peers.pb_identity(), matchers.iter().map(convert::matcher_to_pb).collect())
    }
}

/// Merges one series' samples from several replicas: time order, one sample per
/// timestamp (the first replica's, in config order).
fn merge_samples(mut parts: Vec<Vec<Sample>>) -> Vec<Sample> {
    if parts.len() == 1 {
        return parts.pop().unwrap_or_default();
    }
    let mut all: Vec<Sample> = parts.into_iter().flatten().collect();
    // Stable: equal timestamps keep replica order, and dedup keeps the first.
    all.sort_by_key(|s| s.t);
    all.dedup_by_key(|s| s.t);
    all
}

/// The replicas' answers as one sorted list without repeats.
fn sorted_union<T: Ord>(answers: impl Iterator<Item = T>) -> Vec<T> {
    let mut all: Vec<T> = answers.collect();
    all.sort();
    all.dedup();
    all
}

fn with_timeout<T>(msg: T, timeout: Duration) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.set_timeout(timeout);
    r
}

/// Reads ingester `i`'s streamed answer to its end, each frame's bytes counted for
/// `method` and its items taken by `items`, with the holes its response reported.
async fn drain<F, T>(
    resp: tonic::Response<tonic::Streaming<F>>,
    i: usize,
    peers: &Peers,
    method: &str,
    mut items: impl FnMut(F) -> Vec<T>,
) -> Result<(Vec<T>, Vec<ShardHole>), Status>
where
    F: prost::Message + Default,
{
    let holes = holes_of(&resp, i, peers);
    let mut stream = resp.into_inner();
    let mut out = Vec::new();
    while let Some(frame) = stream.message().await? {
        let bytes = prost::Message::encoded_len(&frame) as u64;
        peers.metrics.response_bytes.inc_by(&[&peers.peers[i].id, method], bytes);
        out.extend(items(frame));
    }
    Ok((out, holes))
}

impl Queryable for ClusterQueryable {
    fn select(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<SelectResult, QueryError> {
        let (cluster, ms) = self.request_parts(matchers);
        let (start, end) = (hints.start, hints.end);
        let peers = Arc::clone(&self.peers);
        let (out, warnings) = self.fan_out(ctl, "Select", (start, end), |i, timeout| {
            let mut client = self.peers.peers[i].client.clone();
            let peers = Arc::clone(&peers);
            let req = pb::SelectRequest {
                cluster: Some(cluster.clone()),
                tenant: self.tenant.clone(),
                matchers: ms.clone(),
                start_ms: start,
                end_ms: end,
            };
            async move {
                let resp = client.select(with_timeout(req, timeout)).await?;
                drain(resp, i, &peers, "Select", |frame| frame.series).await
            }
        })?;
        let data = self.merge_chunked(out.answers, start, end)?;
        Ok(ReadResult { data, warnings })
    }

    fn series(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<Vec<Labels>>, QueryError> {
        let (cluster, ms) = self.request_parts(matchers);
        let (start, end) = (hints.start, hints.end);
        let peers = Arc::clone(&self.peers);
        let (out, warnings) = self.fan_out(ctl, "Series", (start, end), |i, timeout| {
            let mut client = self.peers.peers[i].client.clone();
            let peers = Arc::clone(&peers);
            let req = pb::SeriesRequest {
                cluster: Some(cluster.clone()),
                tenant: self.tenant.clone(),
                matchers: ms.clone(),
                start_ms: start,
                end_ms: end,
            };
            async move {
                let resp = client.series(with_timeout(req, timeout)).await?;
                drain(resp, i, &peers, "Series", |frame| frame.series).await
            }
        })?;
        let sets = out.answers.into_iter().flatten().flatten().map(|s| convert::labels_from_pb_set(s.labels));
        Ok(ReadResult { data: sorted_union(sets), warnings })
    }

    fn label_names(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<Vec<String>>, QueryError> {
        let (cluster, ms) = self.request_parts(matchers);
        let (start, end) = (hints.start, hints.end);
        let peers = Arc::clone(&self.peers);
        let (out, warnings) = self.fan_out(ctl, "LabelNames", (start, end), |i, timeout| {
            let mut client = self.peers.peers[i].client.clone();
            let peers = Arc::clone(&peers);
            let req = pb::LabelNamesRequest {
                cluster: Some(cluster.clone()),
                tenant: self.tenant.clone(),
                matchers: ms.clone(),
                start_ms: start,
                end_ms: end,
            };
            async move {
                let resp = client.label_names(with_timeout(req, timeout)).await?;
                let holes = holes_of(&resp, i, &peers);
                Ok((resp.into_inner().names, holes))
            }
        })?;
        Ok(ReadResult { data: sorted_union(out.answers.into_iter().flatten().flatten()), warnings })
    }

    fn label_values(
        &self,
        name: &str,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<Vec<String>>, QueryError> {
        let (cluster, ms) = self.request_parts(matchers);
        let (start, end) = (hints.start, hints.end);
        let peers = Arc::clone(&self.peers);
        let (out, warnings) = self.fan_out(ctl, "LabelValues", (start, end), |i, timeout| {
            let mut client = self.peers.peers[i].client.clone();
            let peers = Arc::clone(&peers);
            let req = pb::LabelValuesRequest {
                cluster: Some(cluster.clone()),
                tenant: self.tenant.clone(),
                name: name.to_owned(),
                matchers: ms.clone(),
                start_ms: start,
                end_ms: end,
            };
            async move {
                let resp = client.label_values(with_timeout(req, timeout)).await?;
                let holes = holes_of(&resp, i, &peers);
                Ok((resp.into_inner().values, holes))
            }
        })?;
        Ok(ReadResult { data: sorted_union(out.answers.into_iter().flatten().flatten()), warnings })
    }

    fn shard_evaluator(&self) -> Option<&dyn tessera_query::ShardEvaluator> {
        self.engine.is_some().then_some(self as &dyn tessera_query::ShardEvaluator)
    }
}

#[cfg(test)]
mod tests;

//! Pushdown in cluster mode: [`ClusterQueryable`] as the engine's [`ShardEvaluator`].
//! The planner's shard-local fragments (`tessera_query`'s pushdown rules) go to the
//! ingesters in `Eval` calls and come back as partial results the engine merges, so a
//! querier receives per-group partial aggregates or per-series step values instead of
//! every raw chunk.
//!
//! **One replica per shard.** Partial results of two replicas of one shard cannot be
//! merged (they would count its series twice), so each logical shard's part of a
//! fragment is evaluated on exactly one replica, and that replica must be complete for
//! everything the evaluation reads: the ingester refuses an `Eval` whose reads overlap a
//! hole of one of its shards (`ingester.rs`), and the querier then asks another replica.
//! Replicas are tried per shard in this order: up and without holes at the last health
//! check (`Status`) first, then the others; among equals, rotated by shard id, so the
//! shards of a fragment spread over all ingesters. The shards whose chosen replica is
//! the same ingester go in one `Eval` (one evaluation, one partial, per ingester), with
//! that many shards' share of the sample budget.
//!
//! **Slow and failed replicas.** An ingester sends its answer's headers before it
//! evaluates; one that has not done so within `[cluster] eval_hedge_ms` is slow (a
//! congested or stalled path, not a long query), and its shards are also asked of their
//! next replicas. The first complete answer for a set of shards wins; an answer
//! overlapping shards already answered is dropped (never two replicas' partials for one
//! shard). A failed call (unavailable, a hole, an unknown fragment, a cut stream) moves
//! its shards to their next replicas. An error of the query itself (the engine's
//! `execution` class: too many samples, duplicate series) fails the query with the
//! engine's message, as on a single node.
//!
//! **Fallback.** Shards that no replica could evaluate are evaluated here, the
//! fragment over a `Select` of their series from R replicas (the quorum read of
//! `querier.rs`, filtered to those shards): the answer is the same, and a shard that
//! cannot be read at all fails the query (503) or, with `partial_response`, answers
//! with the same warning as a `Select`.
//!
//! **What a pushed-down read sees.** Every write acknowledged before the query whose
//! push has reached the chosen replica: an ingester's `Eval` first waits for the pushes
//! that arrived before it. A write acknowledged by W other replicas whose push to the
//! chosen one is still on its way (or lost without that replica knowing, e.g. a
//! network partition with the ingester up, which leaves no hole) is not in that shard's
//! part; `Select`'s quorum read would see it. `[cluster] query_pushdown = false` turns
//! pushdown off.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use tessera_model::{Labels, Matcher};
use tessera_proto::ingester as pb;
use tessera_query::{
    ErrorKind, Fragment, FragmentOutput, QueryError, QueryOptions, Queryable, ReadResult, SelectHints, SelectResult,
    ShardEvaluator,
};
use tonic::Status;

use super::convert;
use super::querier::{ClusterQueryable, CANCEL_POLL, DEFAULT_READ_TIMEOUT};
use crate::shards::{series_hash, ShardId};

/// One `Eval` call in flight: an ingester and the shards it evaluates.
struct Attempt {
    ingester: usize,
    shards: Vec<u32>,
    started: Instant,
    /// The ingester sent its answer's headers (it is evaluating).
    accepted: Arc<AtomicBool>,
    /// Its shards were also asked of other replicas.
    hedged: bool,
}

impl ClusterQueryable {
    /// The replicas to try for `shard`, best first (see the module doc).
    fn eval_candidates(&self, shard: u32) -> Vec<usize> {
        let reps = &self.peers.placement.replicas[shard as usize];
        let n = reps.len().max(1);
        let mut order: Vec<(u8, usize, usize)> = reps
            .iter()
            .enumerate()
            .map(|(pos, &i)| {
                let h = self.peers.peers[i].health.lock();
                let holey = h.shards.iter().any(|s| s.shard == shard && !s.holes.is_empty());
                let rank = match (h.up, holey) {
                    (true, false) => 0,
                    (true, true) => 1,
                    (false, _) => 2,
                };
                (rank, (pos + n - shard as usize % n) % n, i)
            })
            .collect();
        order.sort();
        order.into_iter().map(|(_, _, i)| i).collect()
    }

    /// Evaluates `frag` over the logical shards `shards` (each fragment budget is per
    /// shard): one output per successful `Eval`, plus one for the shards evaluated here
    /// over `Select` when no replica could.
    fn eval_shards(
        &self,
        frag: &Fragment,
        shards: &[u32],
        ctl: &QueryOptions,
    ) -> Result<Vec<FragmentOutput>, QueryError> {
        let (mut outs, rest) = self.eval_remote(frag, shards, ctl)?;
        if !rest.is_empty() {
            outs.push(self.eval_here(frag, &rest, ctl)?);
        }
        Ok(outs)
    }

    /// The fragment over `shards`' series at the querier, read with `Select`.
    fn eval_here(&self, frag: &Fragment, shards: &[u32], ctl: &QueryOptions) -> Result<FragmentOutput, QueryError> {
        let engine =
            self.engine.as_ref().ok_or_else(|| QueryError::internal("this view does not evaluate fragments"))?;
        self.peers.metrics.eval_fallback_shards.inc_by(&[], shards.len() as u64);
        let mut f = frag.clone();
        f.max_samples = frag.max_samples.saturating_mul(shards.len() as u64);
        let only = ShardFiltered { inner: self, keep: shards.iter().copied().collect() };
        engine.eval_fragment(&only, &f, ctl)
    }

    /// `Eval` calls for `shards` until each was answered by one replica, or has no
    /// replica left to ask: the outputs, and the shards left.
    fn eval_remote(
        &self,
        frag: &Fragment,
        shards: &[u32],
        ctl: &QueryOptions,
    ) -> Result<(Vec<FragmentOutput>, Vec<u32>), QueryError> {
        let peers = &self.peers;
        let deadline = ctl.deadline.unwrap_or_else(|| Instant::now() + DEFAULT_READ_TIMEOUT);
        if deadline <= Instant::now() {
            return Err(QueryError::new(ErrorKind::Timeout, "query timed out before evaluating on the ingesters"));
        }
        let hedge = (peers.config.eval_hedge_ms > 0).then(|| Duration::from_millis(peers.config.eval_hedge_ms));
        let candidates: BTreeMap<u32, Vec<usize>> = shards.iter().map(|&s| (s, self.eval_candidates(s))).collect();
        let cluster = peers.pb_identity();
        let pb_frag = convert::fragment_to_pb(frag);
        let mut tried: BTreeMap<u32, HashSet<usize>> = BTreeMap::new();
        let mut done: BTreeSet<u32> = BTreeSet::new();
        let mut attempts: Vec<Attempt> = Vec::new();
        let mut running: BTreeSet<usize> = BTreeSet::new();
        let mut outs: Vec<FragmentOutput> = Vec::new();
        let mut why: Vec<String> = Vec::new();

        let start_call = |ingester: usize, group: Vec<u32>, attempts: &mut Vec<Attempt>| {
            let id = attempts.len();
            let accepted = Arc::new(AtomicBool::new(false));
            let mut f = pb_frag.clone();
            f.max_samples = frag.max_samples.saturating_mul(group.len() as u64);
            let req = pb::EvalRequest {
                cluster: Some(cluster.clone()),
                tenant: self.tenant.clone(),
                shards: group.clone(),
                fragment: Some(f),
            };
            let timeout = deadline.saturating_duration_since(Instant::now());
            let mut client = peers.peers[ingester].client.clone();
            let flag = Arc::clone(&accepted);
            let peers2 = Arc::clone(peers);
            let call = async move {
                let mut r = tonic::Request::new(req);
                r.set_timeout(timeout);
                let resp = client.eval(r).await?;
                flag.store(true, Ordering::Relaxed);
                let mut stream = resp.into_inner();
                let mut answer = convert::EvalAnswer::default();
                while let Some(frame) = stream.message().await? {
                    let bytes = prost::Message::encoded_len(&frame) as u64;
                    peers2.metrics.response_bytes.inc_by(&[&peers2.peers[ingester].id, "Eval"], bytes);
                    answer.add(frame).map_err(Status::internal)?;
                }
                answer.finish().map_err(Status::internal)
            };
            let peer = peers.peers[ingester].id.clone();
            let peers3 = Arc::clone(peers);
            let fut = async move {
                let r = match tokio::time::timeout(timeout, peers3.metrics.track(&peer, "Eval", call)).await {
                    Ok(r) => r,
                    Err(_) => Err(Status::deadline_exceeded(format!("no answer within {} ms", timeout.as_millis()))),
                };
                (id, r)
            };
            attempts.push(Attempt { ingester, shards: group, started: Instant::now(), accepted, hedged: false });
            fut
        };

        // Asks the next untried replica of each of `want` that is neither answered nor
        // being asked by a call other than `hedge_of`; returns the calls started. A
        // shard with no replica left stays unanswered (the caller evaluates it here).
        let mut calls = FuturesUnordered::new();
        let launch = |want: &[u32],
                      hedge_of: Option<usize>,
                      tried: &mut BTreeMap<u32, HashSet<usize>>,
                      attempts: &mut Vec<Attempt>,
                      running: &mut BTreeSet<usize>,
                      done: &BTreeSet<u32>,
                      calls: &mut FuturesUnordered<_>| {
            let mut groups: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
            for &s in want {
                let in_flight = running.iter().any(|&a| Some(a) != hedge_of && attempts[a].shards.contains(&s));
                if done.contains(&s) || in_flight {
                    continue;
                }
                let t = tried.entry(s).or_default();
                if let Some(&i) = candidates[&s].iter().find(|i| !t.contains(i)) {
                    t.insert(i);
                    groups.entry(i).or_default().push(s);
                }
            }
            for (i, group) in groups {
                running.insert(attempts.len());
                calls.push(start_call(i, group, attempts));
            }
        };
        launch(shards, None, &mut tried, &mut attempts, &mut running, &done, &mut calls);

        let cancel = ctl.cancel.clone();
        let outcome: Result<(), QueryError> = self.runtime.block_on(async {
            let mut poll = tokio::time::interval(CANCEL_POLL);
            loop {
                // Done when every shard has its answer (calls still running are hedged
                // duplicates: returning drops them, which cancels them on the ingesters)
                // or nothing is left to wait for.
                if running.is_empty() || shards.iter().all(|s| done.contains(s)) {
                    return Ok(());
                }
                tokio::select! {
                    next = calls.next() => {
                        let Some((a, r)) = next else { return Ok(()) };
                        running.remove(&a);
                        let shards_of = attempts[a].shards.clone();
                        let who = peers.peers[attempts[a].ingester].id.clone();
                        match r {
                            Ok(out) if shards_of.iter().all(|s| !done.contains(s)) => {
                                done.extend(shards_of.iter().copied());
                                outs.push(out);
                                continue;
                            }
                            // Some of its shards were answered by a hedge: dropped.
                            Ok(_) => {}
                            Err(status) => {
                                if let Some(e) = convert::query_error_from_eval_status(&status) {
                                    if e.kind == ErrorKind::Execution {
                                        return Err(e);
                                    }
                                }
                                why.push(format!("{who}: {}", convert::status_text(&status)));
                            }
                        }
                        launch(&shards_of, None, &mut tried, &mut attempts, &mut running, &done, &mut calls);
                    }
                    _ = poll.tick() => {
                        if cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
                            return Err(QueryError::new(ErrorKind::Canceled, "query was canceled while evaluating on the ingesters"));
                        }
                        if Instant::now() >= deadline {
                            return Err(QueryError::new(ErrorKind::Timeout, "query timed out evaluating on the ingesters"));
                        }
                        let Some(hedge) = hedge else { continue };
                        let slow: Vec<usize> = running
                            .iter()
                            .copied()
                            .filter(|&a| {
                                let at = &attempts[a];
                                !at.hedged && !at.accepted.load(Ordering::Relaxed) && at.started.elapsed() >= hedge
                            })
                            .collect();
                        for a in slow {
                            attempts[a].hedged = true;
                            let shards_of = attempts[a].shards.clone();
                            launch(&shards_of, Some(a), &mut tried, &mut attempts, &mut running, &done, &mut calls);
                        }
                    }
                }
            }
        });
        outcome?;
        let rest: Vec<u32> = shards.iter().copied().filter(|s| !done.contains(s)).collect();
        if !rest.is_empty() {
            tracing::debug!(shards = ?rest, failures = %why.join("; "), "no replica could evaluate a fragment: evaluating it over Select");
        }
        Ok((outs, rest))
    }
}

impl ShardEvaluator for ClusterQueryable {
    /// The cluster's logical shards.
    fn shard_count(&self) -> usize {
        self.peers.placement.replicas.len()
    }

    /// One logical shard's part of `fragment`, from one complete replica (or `Select`).
    fn eval_fragment(
        &self,
        fragment: &Fragment,
        shard: usize,
        ctl: &QueryOptions,
    ) -> Result<FragmentOutput, QueryError> {
        let s = u32::try_from(shard).map_err(|_| QueryError::internal(format!("no logical shard {shard}")))?;
        let mut outs = self.eval_shards(fragment, &[s], ctl)?;
        match (outs.pop(), outs.is_empty()) {
            (Some(o), true) => Ok(o),
            _ => Err(QueryError::internal(format!("logical shard {shard} was answered more than once"))),
        }
    }

    /// Every logical shard at once, grouped into one `Eval` per chosen ingester.
    fn eval_all(&self, fragment: &Fragment, ctl: &QueryOptions) -> Result<Vec<FragmentOutput>, QueryError> {
        let all: Vec<u32> = (0..self.shard_count() as u32).collect();
        self.eval_shards(fragment, &all, ctl)
    }
}

/// The cluster's series of some logical shards only (a fragment evaluated at the
/// querier for shards no replica could evaluate): every read is the cluster's quorum
/// read, filtered by each series' shard.
struct ShardFiltered<'a> {
    inner: &'a ClusterQueryable,
    keep: HashSet<u32>,
}

impl ShardFiltered<'_> {
    fn kept(&self, labels: &Labels) -> bool {
        let total = self.inner.peers.identity.shards;
        self.keep.contains(&ShardId::of(series_hash(&self.inner.tenant, labels.as_slice()), total).0)
    }
}

impl Queryable for ShardFiltered<'_> {
    fn select(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<SelectResult, QueryError> {
        let mut r = self.inner.select(matchers, hints, ctl)?;
        r.data.retain(|s| self.kept(&s.labels));
        Ok(r)
    }

    fn series(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<Vec<Labels>>, QueryError> {
        let mut r = self.inner.series(matchers, hints, ctl)?;
        r.data.retain(|l| self.kept(l));
        Ok(r)
    }

    fn label_names(
        &self,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<Vec<String>>, QueryError> {
        self.inner.label_names(matchers, hints, ctl)
    }

    fn label_values(
        &self,
        name: &str,
        matchers: &[Matcher],
        hints: &SelectHints,
        ctl: &QueryOptions,
    ) -> Result<ReadResult<Vec<String>>, QueryError> {
        self.inner.label_values(name, matchers, hints, ctl)
    }
}

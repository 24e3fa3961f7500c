//! [`ClusterWriter`]: the distributor's [`ShardWriter`] in cluster mode. It sends each
//! series to every replica of its logical shard and acknowledges only when every shard
//! of the request is durable on at least W replicas.
//!
//! Metric metadata travels in the same pushes: each entry to the replicas of its
//! family's shard (`convert::metadata_shard`), acknowledged per shard like samples, so
//! the ingesters answer `/api/v1/metadata` (`ClusterQueryable::metadata`).
//!
//! Pushes are gzip-compressed when `[cluster] grpc_compression = "gzip"`.
//!
//! One `Push` per ingester carries all of that ingester's shards; all pushes run in
//! parallel, each bounded by `[cluster] push_timeout_ms`. The answer is given as soon
//! as every shard has W acknowledgements, or once every push has finished or failed.
//! Pushes still running then are not cancelled: they run on (spawned) so that the
//! remaining replicas get the data too, which keeps replicas alike without making the
//! client wait for the slowest one.
//!
//! A shard with fewer than W acknowledgements fails the request with "unavailable"
//! (503), naming every such shard and why each replica did not acknowledge. The sender
//! retries the whole request; that is harmless because storage stores an identical
//! re-sent sample once (same timestamp, same value: accepted, not duplicated).
//!
//! Counts and the first per-sample refusal come, per shard, from the first replica to
//! acknowledge. Replicas can disagree on refusals (each measures the out-of-order window
//! from its own newest sample); this round does not reconcile that.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tessera_proto::ingester as pb;

use super::config::GrpcCompression;
use super::convert;
use super::metrics::Shortfall;
use super::peers::Peers;
use crate::distributor::ShardWriter;
use crate::metadata::MetadataEntry;
use crate::shards::{PushOutcome, PushSeries, ShardError, ShardId};

/// Writes through the ingesters that hold each shard.
pub struct ClusterWriter {
    peers: Arc<Peers>,
}

impl ClusterWriter {
    pub fn new(peers: Arc<Peers>) -> Self {
        ClusterWriter { peers }
    }

    async fn push_all(
        &self,
        tenant: &str,
        series: Vec<PushSeries>,
        metadata: Vec<(String, MetadataEntry)>,
    ) -> Result<PushOutcome, ShardError> {
        let peers = &self.peers;
        let s_total = peers.identity.shards;
        let series = Arc::new(series);
        // Shard of each series, and per ingester the request indexes it must receive.
        let shard_of: Vec<ShardId> = series.iter().map(|s| ShardId::of(s.hash, s_total)).collect();
        let mut per_peer: Vec<Vec<usize>> = vec![Vec::new(); peers.peers.len()];
        let mut needed: BTreeMap<ShardId, usize> = BTreeMap::new();
        for (i, &shard) in shard_of.iter().enumerate() {
            needed.entry(shard).or_insert(0);
            for &p in &peers.placement.replicas[shard.0 as usize] {
                per_peer[p].push(i);
            }
        }
        // Metadata goes to the replicas of its family's shard, in request order.
        let mut meta_per_peer: Vec<Vec<pb::MetricMetadata>> = vec![Vec::new(); peers.peers.len()];
        for (metric, entry) in &metadata {
            let shard = convert::metadata_shard(tenant, metric, s_total);
            needed.entry(shard).or_insert(0);
            let m = convert::metadata_to_pb(metric, entry, shard);
            for &p in &peers.placement.replicas[shard.0 as usize] {
                meta_per_peer[p].push(m.clone());
            }
        }
        let w = peers.write_quorum();
        let timeout = Duration::from_millis(peers.config.push_timeout_ms);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut pending = 0;
        for (p, (idx, meta)) in per_peer.into_iter().zip(meta_per_peer).enumerate() {
            if idx.is_empty() && meta.is_empty() {
                continue;
            }
            pending += 1;
            let meta_shards: Vec<ShardId> = meta.iter().map(|m| ShardId(m.shard)).collect();
            let req = pb::PushRequest {
                cluster: Some(peers.pb_identity()),
                tenant: tenant.to_owned(),
                series: idx.iter().map(|&i| convert::push_series_to_pb(&series[i], shard_of[i])).collect(),
                metadata: meta,
            };
            let mut client = peers.peers[p].client.clone();
            if peers.config.grpc_compression == GrpcCompression::Gzip {
                client = client.send_compressed(tonic::codec::CompressionEncoding::Gzip);
            }
            let tx = tx.clone();
            let peers = Arc::clone(peers);
            // Spawned: runs to completion (or its timeout) even after the client has its
            // answer, so the slower replicas still receive the data.
            tokio::spawn(async move {
                let start = Instant::now();
                let mut request = tonic::Request::new(req);
                request.set_timeout(timeout);
                let call = async {
                    match tokio::time::timeout(timeout, client.push(request)).await {
                        Ok(r) => r,
                        Err(_) => Err(tonic::Status::deadline_exceeded(format!(
                            "no answer within cluster.push_timeout_ms = {} ms",
                            timeout.as_millis()
                        ))),
                    }
                };
                let r = match peers.metrics.track(&peers.peers[p].id, "Push", call).await {
                    Ok(resp) => Ok(resp.into_inner()),
                    Err(status) => Err(convert::status_text(&status)),
                };
                let _ = tx.send((p, idx, meta_shards, r, start.elapsed().as_secs_f64()));
            });
        }
        drop(tx);

        let mut acks: BTreeMap<ShardId, usize> = needed.keys().map(|&s| (s, 0)).collect();
        let mut outcomes: BTreeMap<ShardId, PushOutcome> = BTreeMap::new();
        let mut seconds: BTreeMap<ShardId, f64> = BTreeMap::new();
        // Per shard, why each replica did not acknowledge (for the 503).
        let mut failures: BTreeMap<ShardId, Vec<String>> = BTreeMap::new();
        while pending > 0 && acks.values().any(|&n| n < w) {
            let Some((p, idx, meta_shards, r, secs)) = rx.recv().await else { break };
            pending -= 1;
            let peer = &peers.peers[p].id;
            match r {
                Ok(resp) => {
                    for o in &resp.shards {
                        let shard = ShardId(o.shard);
                        if !acks.contains_key(&shard) {
                            continue;
                        }
                        if !o.error.is_empty() {
                            failures.entry(shard).or_default().push(format!("{peer}: {}", o.error));
                            continue;
                        }
                        *acks.entry(shard).or_insert(0) += 1;
                        outcomes.entry(shard).or_insert_with(|| convert::outcome_from_pb(o, &idx, &series));
                        seconds.entry(shard).or_insert(secs);
                    }
                }
                Err(e) => {
                    let mut shards: Vec<ShardId> = idx.iter().map(|&i| shard_of[i]).chain(meta_shards).collect();
                    shards.sort();
                    shards.dedup();
                    for shard in shards {
                        failures.entry(shard).or_default().push(format!("{peer}: {e}"));
                    }
                }
            }
        }
        let short: Vec<String> = acks
            .iter()
            .filter(|(_, &n)| n < w)
            .map(|(s, &n)| {
                let why = failures.get(s).map(|f| f.join("; ")).unwrap_or_else(|| "no answer".into());
                format!("shard {s}: {n} of {w} required acknowledgements ({why})")
            })
            .collect();
        if !short.is_empty() {
            peers.metrics.shortfall("write", short.len(), Shortfall::Failed);
            let mut e = ShardError::unavailable(format!(
                "write not durable on enough replicas (write quorum {w} of replication factor {}): {}; \
                 retry the request (re-sent samples are stored once)",
                peers.config.replication_factor,
                short.join(", ")
            ));
            e.retry_after_secs = Some(1);
            return Err(e);
        }
        let mut total = PushOutcome::default();
        for (shard, o) in outcomes {
            total.accepted += o.accepted;
            total.appended += o.appended;
            total.rejected_too_old += o.rejected_too_old;
            total.rejected_duplicate += o.rejected_duplicate;
            total.rejected_unreadable += o.rejected_unreadable;
            if let Some(f) = o.first_rejection {
                if total.first_rejection.as_ref().is_none_or(|t| f.index < t.index) {
                    total.first_rejection = Some(f);
                }
            }
            if let Some(&secs) = seconds.get(&shard) {
                total.shard_seconds.push((shard, secs));
            }
        }
        Ok(total)
    }
}

impl ShardWriter for ClusterWriter {
    fn push<'a>(&'a self, tenant: &'a str, series: Vec<PushSeries>) -> BoxFuture<'a, Result<PushOutcome, ShardError>> {
        Box::pin(self.push_all(tenant, series, Vec::new()))
    }

    fn forwards_metadata(&self) -> bool {
        true
    }

    fn push_with_metadata<'a>(
        &'a self,
        tenant: &'a str,
        series: Vec<PushSeries>,
        metadata: Vec<(String, MetadataEntry)>,
    ) -> BoxFuture<'a, Result<PushOutcome, ShardError>> {
        Box::pin(self.push_all(tenant, series, metadata))
    }
}

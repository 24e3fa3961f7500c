//! [`Peers`]: a front end's (distributor, querier, gateway) view of the cluster: the
//! placement, one gRPC client per ingester, and each ingester's health.
//!
//! Health is runtime state only: a periodic `Status` call per ingester (every
//! `[cluster] health_check_interval_ms`) records whether it answered and what it said.
//! It never changes placement and never decides where a write goes; it feeds
//! `/-/ready` and `/api/v1/status/cluster` (which shows each ingester's shards with
//! their holes and repair state, as the `Status` answer carries them). Writes and
//! reads go to every replica regardless and count who answered.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tessera_proto::ingester as pb;
use tessera_proto::ingester::ingester_client::IngesterClient;
use tonic::transport::{Channel, Endpoint};

use super::convert;
use super::identity::Identity;
use super::metrics::ClusterMetrics;
use super::{ClusterConfig, Placement};
use crate::http::json::{write_str_array, ObjectWriter};

/// How long a connection attempt to an ingester may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// The last health check of one ingester.
#[derive(Clone, Debug, Default)]
pub struct Health {
    /// Answered the last `Status` call with a matching identity.
    pub up: bool,
    /// Why not, when not up (the gRPC status or the identity mismatch).
    pub error: Option<String>,
    /// When the last check finished.
    pub checked: Option<Instant>,
    /// Series it reported.
    pub series: u64,
    /// Per shard: its series and repair state (holes), as it reported them; empty
    /// when it did not answer the last check.
    pub shards: Vec<pb::ShardStatus>,
}

/// One ingester.
pub struct Peer {
    pub id: String,
    pub addr: String,
    pub zone: String,
    pub client: IngesterClient<Channel>,
    pub health: Mutex<Health>,
}

/// The cluster as a front end sees it.
pub struct Peers {
    pub config: ClusterConfig,
    pub identity: Identity,
    pub placement: Placement,
    /// In placement member order (`placement.replicas` indexes into it).
    pub peers: Vec<Peer>,
    /// Every call to the ingesters, counted (`tessera_cluster_*`).
    pub metrics: ClusterMetrics,
}

impl Peers {
    /// Clients for every ingester of a validated `[cluster]` table. Connections are made
    /// lazily (and re-made after a failure) on first use, so this needs no ingester up.
    pub fn new(config: &ClusterConfig) -> anyhow::Result<Peers> {
        let placement = config.placement().map_err(|e| anyhow::anyhow!("cluster: {e}"))?;
        let max = config.grpc_max_message_bytes;
        let mut peers = Vec::new();
        for e in config.ingesters() {
            let endpoint = Endpoint::from_shared(format!("http://{}", e.addr))
                .map_err(|err| anyhow::anyhow!("ingester {:?}: bad address {:?}: {err}", e.id, e.addr))?
                .connect_timeout(CONNECT_TIMEOUT)
                .tcp_nodelay(true)
                .http2_keep_alive_interval(Duration::from_secs(10))
                .keep_alive_timeout(Duration::from_secs(5));
            let client = IngesterClient::new(endpoint.connect_lazy())
                .max_decoding_message_size(max)
                .max_encoding_message_size(max);
            peers.push(Peer { id: e.id, addr: e.addr, zone: e.zone, client, health: Mutex::new(Health::default()) });
        }
        let metrics = ClusterMetrics::default();
        Ok(Peers { identity: Identity::of(config), placement, peers, config: config.clone(), metrics })
    }

    pub fn pb_identity(&self) -> pb::ClusterIdentity {
        convert::identity_to_pb(&self.identity)
    }

    /// W.
    pub fn write_quorum(&self) -> usize {
        self.config.write_quorum() as usize
    }

    /// R = RF - W + 1 (see `ClusterConfig::read_quorum`).
    pub fn read_quorum(&self) -> usize {
        self.config.read_quorum() as usize
    }

    /// Shards that have fewer than `need` replicas up by the last health check, with how
    /// many are up.
    pub fn short_shards(&self, need: usize) -> Vec<(u32, usize)> {
        let up: Vec<bool> = self.peers.iter().map(|p| p.health.lock().up).collect();
        let mut short = Vec::new();
        for (s, replicas) in self.placement.replicas.iter().enumerate() {
            let n = replicas.iter().filter(|&&i| up[i]).count();
            if n < need {
                short.push((s as u32, n));
            }
        }
        short
    }

    /// Per shard, the replicas up by the last health check whose shard reported no hole,
    /// with the series each holds in it.
    fn complete_by_health(&self) -> Vec<Vec<(usize, u64)>> {
        let mut out = vec![Vec::new(); self.placement.replicas.len()];
        for (i, p) in self.peers.iter().enumerate() {
            let h = p.health.lock();
            if !h.up {
                continue;
            }
            for st in &h.shards {
                if st.holes.is_empty() {
                    if let Some(v) = out.get_mut(st.shard as usize) {
                        v.push((i, st.series));
                    }
                }
            }
        }
        out
    }

    /// Series of the whole cluster (all tenants), as the last health checks saw them:
    /// per shard the largest count among its replicas that were up and had no hole
    /// (series of different shards are disjoint, so shards add up; replicas do not).
    /// `None` while some shard has no such replica.
    pub fn total_series(&self) -> Option<u64> {
        self.complete_by_health().iter().map(|reps| reps.iter().map(|&(_, n)| n).max()).sum()
    }

    /// One round of `Status` calls to every ingester, in parallel.
    pub async fn check_health(&self) {
        let timeout = Duration::from_millis(self.config.health_check_interval_ms)
            .clamp(Duration::from_millis(200), Duration::from_secs(5));
        let calls = self.peers.iter().map(|p| async move {
            let mut req = tonic::Request::new(pb::StatusRequest { cluster: Some(self.pb_identity()) });
            req.set_timeout(timeout);
            let call = async {
                match tokio::time::timeout(timeout, p.client.clone().status(req)).await {
                    Ok(r) => r,
                    Err(_) => Err(tonic::Status::deadline_exceeded("health check timed out")),
                }
            };
            let r = tokio::time::timeout(timeout, self.metrics.track(&p.id, "Status", call)).await;
            let mut h = p.health.lock();
            h.checked = Some(Instant::now());
            match r {
                Ok(Ok(resp)) => {
                    let resp = resp.into_inner();
                    h.series = resp.series;
                    h.shards = resp.shard_status;
                    if resp.ingester_id != p.id {
                        h.up = false;
                        h.error = Some(format!(
                            "the ingester at {} says it is {:?}, not {:?}: check cluster.ingesters",
                            p.addr, resp.ingester_id, p.id
                        ));
                    } else {
                        h.up = true;
                        h.error = None;
                    }
                }
                Ok(Err(status)) => {
                    h.up = false;
                    h.shards.clear();
                    h.error = Some(convert::status_text(&status));
                }
                Err(_) => {
                    h.up = false;
                    h.shards.clear();
                    h.error = Some(format!("no answer to Status within {} ms", timeout.as_millis()));
                }
            }
        });
        futures::future::join_all(calls).await;
    }

    /// Checks health now and then every `health_check_interval_ms` until `stop`.
    pub async fn health_loop(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let mut tick = tokio::time::interval(Duration::from_millis(self.config.health_check_interval_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => self.check_health().await,
                _ = stop.cancelled() => return,
            }
        }
    }

    /// `/api/v1/status/cluster` data (JSON): identity, placement and each ingester's health.
    pub fn status_json(&self, role: &str) -> String {
        let up: Vec<bool> = self.peers.iter().map(|p| p.health.lock().up).collect();
        let complete = self.complete_by_health();
        let mut out = String::new();
        let mut o = ObjectWriter::new(&mut out);
        o.str("role", role)
            .raw("cluster", |out| identity_json(out, &self.identity))
            .int("replication_factor", i64::from(self.config.replication_factor))
            .int("write_quorum", self.write_quorum() as i64)
            .int("read_quorum", self.read_quorum() as i64)
            .raw("ingesters", |out| {
                out.push('[');
                for (i, p) in self.peers.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let h = p.health.lock().clone();
                    let mut e = ObjectWriter::new(out);
                    e.str("id", &p.id).str("addr", &p.addr).str("zone", &p.zone).bool("up", h.up);
                    match &h.error {
                        Some(err) => e.str("error", err),
                        None => e.null("error"),
                    };
                    match h.checked {
                        Some(t) => e.int("last_check_ms_ago", t.elapsed().as_millis() as i64),
                        None => e.null("last_check_ms_ago"),
                    };
                    e.int("series", h.series as i64);
                    e.raw("shards", |out| write_ints(out, self.placement.shards_of(i).iter().map(|&s| s as i64)));
                    e.raw("repair", |out| repair_json(out, &h));
                    e.finish();
                }
                out.push(']');
            })
            .raw("shards", |out| {
                out.push('[');
                for (s, r) in self.placement.replicas.iter().enumerate() {
                    if s > 0 {
                        out.push(',');
                    }
                    let ids: Vec<String> = r.iter().map(|&i| self.peers[i].id.clone()).collect();
                    let mut e = ObjectWriter::new(out);
                    e.int("shard", s as i64)
                        .raw("replicas", |out| write_str_array(out, &ids))
                        .int("replicas_up", r.iter().filter(|&&i| up[i]).count() as i64)
                        .int("replicas_complete", complete.get(s).map_or(0, Vec::len) as i64);
                    e.finish();
                }
                out.push(']');
            });
        o.finish();
        out
    }
}

/// An ingester's repair state as its last health check reported it, in the shape of
/// the ingester's own `/api/v1/status/cluster` `repair` object (plus each shard's
/// series); `null` when it did not answer that check.
fn repair_json(out: &mut String, h: &Health) {
    if !h.up {
        out.push_str("null");
        return;
    }
    let pending = h.shards.iter().filter(|s| !s.holes.is_empty()).count();
    let mut o = ObjectWriter::new(out);
    o.int("pending_shards", pending as i64).bool("repaired", pending == 0).raw("shards", |out| {
        out.push('[');
        for (i, st) in h.shards.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let mut e = ObjectWriter::new(out);
            e.int("shard", i64::from(st.shard))
                .str("state", if st.holes.is_empty() { "complete" } else { "repairing" })
                .bool("refusing_writes", st.refusing_writes)
                .raw("holes", |out| {
                    out.push('[');
                    for (j, hole) in st.holes.iter().enumerate() {
                        if j > 0 {
                            out.push(',');
                        }
                        let mut ho = ObjectWriter::new(out);
                        ho.int("from_ms", hole.from_ms).int("to_ms", hole.to_ms);
                        ho.finish();
                    }
                    out.push(']');
                })
                .int("repaired_samples", st.repaired_samples as i64)
                .int("series", st.series as i64);
            match st.last_error.as_str() {
                "" => e.null("last_error"),
                err => e.str("last_error", err),
            };
            e.finish();
        }
        out.push(']');
    });
    o.finish();
}

fn write_ints(out: &mut String, items: impl Iterator<Item = i64>) {
    out.push('[');
    for (i, v) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&v.to_string());
    }
    out.push(']');
}

/// The identity as JSON (epoch in hex, as error messages print it).
pub fn identity_json(out: &mut String, id: &Identity) {
    let mut o = ObjectWriter::new(out);
    o.str("name", &id.name)
        .int("shards", i64::from(id.shards))
        .str("hash_version", &id.hash_version)
        .str("placement_algorithm", &id.algorithm)
        .str("placement_epoch", &format!("{:016x}", id.epoch));
    o.finish();
}

//! [`Peers`]: a front end's (distributor, querier, gateway) view of the cluster: the
//! placement, one gRPC client per ingester, and each ingester's health.
//!
//! Health is runtime state only: a periodic `Status` call per ingester (every
//! `[cluster] health_check_interval_ms`) records whether it answered and what it said.
//! It never changes placement and never decides where a write goes; it feeds
//! `/-/ready` and `/api/v1/status/cluster`. Writes and reads go to every replica
//! regardless and count who answered.

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
                    h.error = Some(convert::status_text(&status));
                }
                Err(_) => {
                    h.up = false;
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
                        .int("replicas_up", r.iter().filter(|&&i| up[i]).count() as i64);
                    e.finish();
                }
                out.push(']');
            });
        o.finish();
        out
    }
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

//! The `[cluster]` table: logical shard count, replication, and the membership list
//! that placement takes as input.

use serde::Deserialize;

use super::placement::{Member, Placement, ALGORITHM};

/// One ingester of a static membership list.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct IngesterEntry {
    /// Stable id: the input to placement. Changing it moves data.
    pub id: String,
    /// gRPC address (`host:port`; the host may be a DNS name, resolved on connect).
    pub addr: String,
    /// Failure domain; empty = none. With at least RF distinct zones (and a zone on
    /// every ingester), each shard's replicas go to distinct zones.
    #[serde(default)]
    pub zone: String,
}

/// `[cluster]`: ignored by `tessera serve`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// Name of the cluster, part of its identity: every internal request carries it and
    /// an ingester refuses requests for another name; it is recorded in each ingester's
    /// data directory. Default `tessera`. Must not be empty.
    pub name: String,
    /// Logical shards S of the cluster. Fixed at cluster creation (series are placed by
    /// hash mod S). Default 64. Must be in 1..=65536.
    pub shards: u32,
    /// Replicas of every shard, RF. Default 3. Must be ≥ 1 and ≤ the ingester count.
    pub replication_factor: u32,
    /// Replicas that must acknowledge a write before the distributor answers 2xx, W.
    /// Default 0 = a majority, floor(RF/2)+1. Must be ≤ RF.
    pub write_quorum: u32,
    /// Placement algorithm; only `hrw-bounded-v1` exists.
    pub placement: String,
    /// Static membership. Leave empty to use `ingester_count` and the templates.
    pub ingesters: Vec<IngesterEntry>,
    /// Kubernetes StatefulSet form: number of ingesters (ordinals 0..count).
    /// Default 0 = use `ingesters`.
    pub ingester_count: u32,
    /// Id of ingester `{i}` in the StatefulSet form. Default `tessera-ingester-{i}`
    /// (the pod name).
    pub ingester_id_template: String,
    /// gRPC address of ingester `{i}` in the StatefulSet form, e.g.
    /// `tessera-ingester-{i}.tessera-ingester.tessera.svc:9095` (DNS only resolves it).
    pub ingester_addr_template: String,
    /// Default of the `partial_response` query parameter of `/api/v1/query` and
    /// `/api/v1/query_range`: when true, a query whose shards cannot all be read from
    /// enough replicas answers 200 with warnings naming them instead of 503. Default false.
    pub allow_partial_response: bool,
    /// How long a distributor waits for an ingester to make one push durable, ms. A
    /// replica that has not answered by then counts as not acknowledging. Default 5000.
    /// Must be > 0.
    pub push_timeout_ms: u64,
    /// Largest gRPC message an ingester or its clients send or accept, bytes (a push of
    /// one remote-write request, one frame of a streamed answer, a label list).
    /// Default 67108864 (64 MiB). Must be ≥ 1048576.
    pub grpc_max_message_bytes: usize,
    /// How often distributors, queriers and gateways ask every ingester for its status
    /// (health shown by `/api/v1/status/cluster` and used by `/-/ready`), ms.
    /// Default 2000. Must be > 0.
    pub health_check_interval_ms: u64,
    /// How long a restarted ingester refuses writes to a shard while it catches up on
    /// what it missed from the shard's other replicas, ms. Refusing lets the catch-up
    /// append in time order, so a gap longer than the out-of-order window is repaired
    /// too; the other replicas take the writes meanwhile. When catching up takes longer
    /// (no complete source reachable), writes are accepted again and the shard keeps its
    /// hole (reported to queriers) until a later repair round fills it. Default 60000.
    /// 0 = never refuse writes (repair then only fills what the out-of-order window of
    /// `[storage]` still admits).
    pub repair_block_writes_ms: u64,
    /// Compression of the pushes distributors and gateways send to the ingesters:
    /// `"none"` or `"gzip"`. A push repeats every label string to each of the RF
    /// replicas; gzip shrinks that on the wire at some CPU cost on both sides.
    /// Ingesters accept both whatever they are configured with, so a rolling change is
    /// safe. Other calls (reads, health checks, repair) are not compressed. Default
    /// `"none"`.
    pub grpc_compression: GrpcCompression,
    /// Whether queriers and gateways push PromQL fragments down to the ingesters (the
    /// `Eval` call: aggregations and per-series functions evaluated on one complete
    /// replica per shard, partial results merged) instead of pulling every selected raw
    /// chunk from R replicas and evaluating the whole query. Default true.
    pub query_pushdown: bool,
    /// How long a querier waits for an ingester to accept a pushed-down fragment (its
    /// answer's headers, sent before it evaluates) before also asking the next replicas
    /// of its shards; the first complete answer wins. ms. Default 250. 0 = never ask a
    /// second replica while the first has not failed.
    pub eval_hedge_ms: u64,
}

/// `[cluster] grpc_compression`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum GrpcCompression {
    #[default]
    None,
    Gzip,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            name: "tessera".to_owned(),
            shards: 64,
            replication_factor: 3,
            write_quorum: 0,
            placement: ALGORITHM.to_owned(),
            ingesters: Vec::new(),
            ingester_count: 0,
            ingester_id_template: "tessera-ingester-{i}".to_owned(),
            ingester_addr_template: String::new(),
            allow_partial_response: false,
            push_timeout_ms: 5000,
            grpc_max_message_bytes: 64 << 20,
            health_check_interval_ms: 2000,
            repair_block_writes_ms: 60_000,
            grpc_compression: GrpcCompression::None,
            query_pushdown: true,
            eval_hedge_ms: 250,
        }
    }
}

impl ClusterConfig {
    /// W with the 0 default resolved.
    pub fn write_quorum(&self) -> u32 {
        if self.write_quorum == 0 {
            self.replication_factor / 2 + 1
        } else {
            self.write_quorum
        }
    }

    /// R, the replicas of a shard a read must hear from: RF - W + 1. Any R replicas
    /// include at least one of the W that acknowledged each write, so their union holds
    /// every acknowledged sample.
    pub fn read_quorum(&self) -> u32 {
        (self.replication_factor + 1).saturating_sub(self.write_quorum()).max(1)
    }

    /// The ingesters, from the static list or the StatefulSet templates.
    pub fn ingesters(&self) -> Vec<IngesterEntry> {
        if self.ingester_count == 0 {
            return self.ingesters.clone();
        }
        (0..self.ingester_count)
            .map(|i| IngesterEntry {
                id: self.ingester_id_template.replace("{i}", &i.to_string()),
                addr: self.ingester_addr_template.replace("{i}", &i.to_string()),
                zone: String::new(),
            })
            .collect()
    }

    /// Checks the table; the message names the key to fix.
    pub fn validate(&self) -> Result<(), String> {
        if self.name.is_empty() {
            return Err("cluster.name must not be empty".into());
        }
        if self.push_timeout_ms == 0 {
            return Err("cluster.push_timeout_ms must be > 0".into());
        }
        if self.health_check_interval_ms == 0 {
            return Err("cluster.health_check_interval_ms must be > 0".into());
        }
        if self.grpc_max_message_bytes < 1 << 20 {
            return Err(format!(
                "cluster.grpc_max_message_bytes must be >= 1048576 (1 MiB), got {}",
                self.grpc_max_message_bytes
            ));
        }
        if self.shards == 0 || self.shards > 65_536 {
            return Err(format!("cluster.shards must be in 1..=65536, got {}", self.shards));
        }
        if self.replication_factor == 0 {
            return Err("cluster.replication_factor must be >= 1".into());
        }
        if self.write_quorum > self.replication_factor {
            return Err(format!(
                "cluster.write_quorum ({}) must be <= cluster.replication_factor ({})",
                self.write_quorum, self.replication_factor
            ));
        }
        if self.placement != ALGORITHM {
            return Err(format!(
                "cluster.placement {:?} is unknown; the only algorithm is {ALGORITHM:?}",
                self.placement
            ));
        }
        match (self.ingester_count, self.ingesters.is_empty()) {
            (0, true) => {
                return Err("no ingesters: set cluster.ingesters = [{ id, addr }, ...] or cluster.ingester_count".into())
            }
            (n, false) if n > 0 => {
                return Err("set either cluster.ingesters or cluster.ingester_count, not both".into());
            }
            (n, true) if n > 0 => {
                if !self.ingester_id_template.contains("{i}") {
                    return Err("cluster.ingester_id_template must contain {i} (the StatefulSet ordinal)".into());
                }
                if !self.ingester_addr_template.contains("{i}") {
                    return Err("cluster.ingester_addr_template must contain {i}, e.g. \
                                \"tessera-ingester-{i}.tessera-ingester.NAMESPACE.svc:9095\""
                        .into());
                }
            }
            _ => {}
        }
        for e in self.ingesters() {
            if e.addr.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok()).is_none() {
                return Err(format!("ingester {:?}: addr {:?} is not host:port", e.id, e.addr));
            }
        }
        self.placement().map(|_| ()).map_err(|e| format!("cluster: {e}"))
    }

    /// The placement table of this membership.
    pub fn placement(&self) -> Result<Placement, super::PlacementError> {
        let members: Vec<Member> = self.ingesters().into_iter().map(|e| Member { id: e.id, zone: e.zone }).collect();
        Placement::compute(self.shards, self.replication_factor, &members)
    }
}

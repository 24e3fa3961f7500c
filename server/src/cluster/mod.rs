//! Cluster mode: the `[cluster]` configuration, membership and placement of logical
//! shards on ingesters, the cluster identity, and the roles that use them over gRPC
//! (`tessera ingester`, `distributor`, `querier`, `gateway`).
//!
//! | file | what |
//! |---|---|
//! | `config.rs` | the `[cluster]` table, W and R |
//! | `placement.rs` | `hrw-bounded-v1`: shard → replicas |
//! | `identity.rs` | the identity every internal request carries; its data-dir record |
//! | `convert.rs` | every conversion between the wire types and ours; error ↔ gRPC code |
//! | `ingester.rs` | the gRPC service over an ingester's local shards |
//! | `holes.rs` | what each shard of an ingester may be missing (holes), persisted |
//! | `repair.rs` | an ingester fetching what it missed from the other replicas |
//! | `peers.rs` | a front end's clients and health checks of the ingesters |
//! | `metrics.rs` | a front end's `tessera_cluster_*` metrics of its gRPC calls |
//! | `writer.rs` | the distributor's writer: every replica, W acknowledgements per shard |
//! | `querier.rs` | the read view: R replicas per shard, merged |
//! | `pushdown.rs` | the read view as the engine's shard evaluator: `Eval` on one complete replica per shard |
//! | `roles.rs` | the processes: start-up, readiness, routes, shutdown |
//!
//! Must not know: storage internals (it reaches storage through `shards` only).
//! Placement depends on ids and zones only.

pub mod config;
pub mod convert;
pub mod holes;
pub mod identity;
pub mod ingester;
pub mod metrics;
pub mod peers;
pub mod placement;
pub mod pushdown;
pub mod querier;
pub mod repair;
pub mod roles;
pub mod writer;

pub use config::{ClusterConfig, IngesterEntry};
pub use placement::{Member, Placement, PlacementError};
pub use roles::{check_cluster_config, Frontend, FrontendRole, MetadataQuery};

//! Cluster mode (in progress): the `[cluster]` configuration, membership and
//! placement of logical shards on ingesters. The roles that use them (ingester,
//! distributor, querier, gateway over gRPC) are not built yet; `tessera cluster
//! placement` prints the table this module computes.
//!
//! Must not know: HTTP, storage internals. Placement depends on ids and zones only.

pub mod config;
pub mod placement;

pub use config::{ClusterConfig, IngesterEntry};
pub use placement::{Member, Placement, PlacementError};

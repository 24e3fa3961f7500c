//! The write path before storage: decoding remote-write bodies (`decode`), validating
//! series (`validate`) into compact label sets (`series_labels`), the accepted time window of samples (`window`) and per-tenant
//! limits (`limits`). The `distributor` strings them together; sharding and durability
//! are `shards`. Nothing here knows a protocol: refusals are domain errors
//! (`decode::DecodeError`), mapped to HTTP in `crate::error`.

pub mod decode;
pub mod limits;
pub mod series_labels;
pub mod validate;
pub mod window;

/// The float samples of one series in a write request. A Prometheus agent sends one or
/// two samples per series per request, and these stay inline: no allocation per series.
pub type Samples = smallvec::SmallVec<[tessera_model::Sample; 2]>;

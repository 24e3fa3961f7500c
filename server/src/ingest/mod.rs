//! The write path before storage: decoding remote-write bodies (`decode`), validating
//! series (`validate`), the accepted time window of samples (`window`) and per-tenant
//! limits (`limits`). The HTTP handler that strings them together is `http/write.rs`;
//! sharding and durability are `shards`.

pub mod decode;
pub mod limits;
pub mod validate;
pub mod window;

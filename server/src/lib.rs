//! tessera-server (skeleton being filled in).

pub mod http;

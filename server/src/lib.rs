//! tessera-server (skeleton being filled in).

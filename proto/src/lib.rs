//! tessera-proto (skeleton being filled in).

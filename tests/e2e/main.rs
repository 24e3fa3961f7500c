//! End-to-end tests: each boots the real `tessera` binary on an ephemeral loopback
//! port (see `harness`) and talks to it only over HTTP, as users and Prometheus do.

mod bad_input;
mod durability;
mod harness;
mod import;
mod prometheus_agent;
mod query_api;
mod remote_write;

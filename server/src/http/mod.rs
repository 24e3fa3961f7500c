//! The HTTP front end: axum routers for the Prometheus-compatible API.

pub mod query_api;

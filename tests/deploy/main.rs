//! The deployment files, checked offline: `deploy/kubernetes/` rendered the way
//! `kustomize build` renders it (resources, the generated ConfigMap, the namespace),
//! `deploy/compose/compose.yaml`, the `Dockerfile` and its health-check helper.
//!
//! What must hold: the config each one carries passes the real binary's
//! `tessera check-config` for every role that runs with it; probes point at endpoints
//! the role serves; container ports, Service ports, probe ports, the ingester address
//! template's port and the config's listen ports agree; the StatefulSet's serviceName
//! is its headless Service; grace periods outlast the shutdown timeout.
//! Nothing here needs a cluster, Docker or the network.

mod check_config_cli;
mod compose;
#[path = "../e2e/harness.rs"]
#[allow(dead_code)] // the e2e helpers this suite does not call
mod harness;
mod image;
mod kubernetes;
mod manifests;

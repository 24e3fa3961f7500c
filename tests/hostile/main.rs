//! The hostile-input suite: every class of attack or accident from issue 12, run
//! against the real `tessera` binary (booted on a loopback port by the end-to-end
//! harness). Each test is one attack and asserts that the server answers it with a
//! clear error and stays reachable; cargo's closing line (`N passed`) is the count.
//!
//! | module | class |
//! |---|---|
//! | `connections` | connection floods: half-open, idle, over the cap |
//! | `query` | PromQL built to crash (depth, allocation) or to starve (slow parsing) |
//! | `write` | write and remote-read amplification, the time window, contract violations |
//! | `floods` | many clients sending expensive legal requests at once |
//! | `faults` | a damaged SST block, a flipped WAL byte, scans next to an ancient sample |
//!
//! Every flood test probes the server while the flood runs (`probe`): `/-/ready`,
//! `/metrics` and a one-sample remote write each answer within a second.

#[path = "../e2e/harness.rs"]
#[allow(dead_code)]
mod harness;

mod connections;
mod faults;
mod floods;
mod probe;
mod query;
mod write;

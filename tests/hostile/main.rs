//! The hostile-input suite: every class of attack or accident from issue 12, run
//! against the real `tessera` binary (booted on a loopback port by the end-to-end
//! harness). Each test is one attack and asserts that the server answers it with a
//! clear error and stays reachable; cargo's closing line (`N passed`) is the count.
//!
//! | module | class |
//! |---|---|
//! | `connections` | connection floods: half-open, idle, over the cap |

#[path = "../e2e/harness.rs"]
#[allow(dead_code)]
mod harness;

mod connections;

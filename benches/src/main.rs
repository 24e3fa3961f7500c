//! tessera-bench: the GPU-fleet load generator and query-load driver.
mod fleet;
mod rng;
fn main() {}

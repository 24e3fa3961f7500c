//! End-to-end test crate; see e2e/.

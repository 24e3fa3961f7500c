//! Home of the end-to-end tests' sources (`e2e/`: one binary, one module per area).
//!
//! The test target itself is declared in `server/Cargo.toml` (`[[test]] name = "e2e"`,
//! `path = "../tests/e2e/main.rs"`): only a package's own integration tests make
//! `cargo test --workspace` build that package's binary first and tell the tests where
//! it is (`CARGO_BIN_EXE_tessera`). This crate has no code of its own; it keeps the
//! folder a workspace member as DESIGN.md lays out.

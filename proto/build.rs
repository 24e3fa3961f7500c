//! Compiles the `.proto` files under `proto/` into Rust with prost.
//!
//! `protox` parses the schemas in pure Rust, so the build never needs a system
//! `protoc`. Every `bytes` field becomes `bytes::Bytes`, which prost fills with
//! zero-copy slices when the input buffer is itself a `Bytes`.
//!
//! Only Tessera's internal API (`tessera/ingester/v1/ingester.proto`) gets tonic client
//! and server code; the Prometheus schemas are messages only.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files =
        ["proto/prometheus/types.proto", "proto/prometheus/remote.proto", "proto/io/prometheus/write/v2/types.proto"];
    for f in &files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure().build_client(false).build_server(false).bytes(".").compile_fds(fds)?;

    let internal = ["proto/tessera/ingester/v1/ingester.proto"];
    for f in &internal {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(internal, ["proto"])?;
    tonic_prost_build::configure().build_client(true).build_server(true).compile_fds(fds)?;
    Ok(())
}

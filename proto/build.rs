//! Compiles the `.proto` files under `proto/` into Rust with prost.
//!
//! `protox` parses the schemas in pure Rust, so the build never needs a system
//! `protoc`. Every `bytes` field becomes `bytes::Bytes`, which prost fills with
//! zero-copy slices when the input buffer is itself a `Bytes`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files =
        ["proto/prometheus/types.proto", "proto/prometheus/remote.proto", "proto/io/prometheus/write/v2/types.proto"];
    for f in &files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure().build_client(false).build_server(false).bytes(".").compile_fds(fds)?;
    Ok(())
}

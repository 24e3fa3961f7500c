//! `cargo run --example promqltest -- FILE...`: the conformance runner without the server.
fn main() {
    let paths: Vec<std::path::PathBuf> = std::env::args_os().skip(1).map(Into::into).collect();
    std::process::exit(tessera_query::promqltest::run_cli(&paths));
}

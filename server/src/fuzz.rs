//! Fuzz targets for every decoder a request reaches before any limit could help:
//! remote write 1.0 and 2.0 (snappy + protobuf), remote read, the HTTP form and
//! `match[]` parameters, and the PromQL entry points.
//!
//! Each target is a function of raw bytes that must return (an `Ok` or a clean error),
//! never panic, never overflow the stack. They run under `cargo test` as proptests: a
//! checked-in corpus (`server/fuzz/corpus/<target>/`: valid requests and the inputs
//! that once crashed the server) is mutated (bit flips, byte overwrites, insertions,
//! truncation, splicing) and pure random bytes are mixed in. The number of cases is
//! bounded (`TESSERA_FUZZ_CASES`, default 2000 per target, a few seconds each), so CI
//! time stays fixed; set it higher to fuzz for longer locally. This is not
//! coverage-guided (cargo-fuzz needs a nightly compiler, and would rebuild RocksDB
//! instrumented); the corpus is what carries knowledge between runs: add every input
//! that ever failed.

use std::path::PathBuf;

use proptest::prelude::*;

/// The corpus of one target: every file under `server/fuzz/corpus/<target>/`.
pub fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir =
        PathBuf::from(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs tests"))
            .join("fuzz/corpus")
            .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("fuzz corpus {} missing: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .collect();
    files.sort();
    let seeds: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).expect("read corpus file")).collect();
    assert!(!seeds.is_empty(), "fuzz corpus {} is empty", dir.display());
    seeds
}

/// Cases per target (`TESSERA_FUZZ_CASES`, default 2000).
pub fn cases() -> u32 {
    std::env::var("TESSERA_FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(2000)
}

/// One edit of a byte string.
#[derive(Clone, Debug)]
enum Edit {
    FlipBit(usize, u8),
    Overwrite(usize, u8),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
    Truncate(usize),
    /// Appends a slice of another seed (structure from elsewhere in the corpus).
    Splice(usize, usize, usize),
    /// Repeats a slice several times (nesting, long lists).
    Repeat(usize, usize, u16),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(p, b)| Edit::FlipBit(p, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Edit::Overwrite(p, b)),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16)).prop_map(|(p, b)| Edit::Insert(p, b)),
        (any::<usize>(), 1usize..64).prop_map(|(p, n)| Edit::Remove(p, n)),
        any::<usize>().prop_map(Edit::Truncate),
        (any::<usize>(), any::<usize>(), 1usize..256).prop_map(|(s, p, n)| Edit::Splice(s, p, n)),
        (any::<usize>(), 1usize..32, 2u16..3000).prop_map(|(p, n, k)| Edit::Repeat(p, n, k)),
    ]
}

fn apply(seeds: &[Vec<u8>], mut b: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let len = b.len();
        match e {
            Edit::FlipBit(p, bit) if len > 0 => b[p % len] ^= 1 << bit,
            Edit::Overwrite(p, v) if len > 0 => b[p % len] = *v,
            Edit::Insert(p, bytes) => {
                let at = p % (len + 1);
                b.splice(at..at, bytes.iter().copied());
            }
            Edit::Remove(p, n) if len > 0 => {
                let at = p % len;
                b.drain(at..(at + n).min(len));
            }
            Edit::Truncate(p) => b.truncate(p % (len + 1)),
            Edit::Splice(s, p, n) => {
                let other = &seeds[s % seeds.len()];
                if !other.is_empty() {
                    let at = p % other.len();
                    b.extend_from_slice(&other[at..(at + n).min(other.len())]);
                }
            }
            Edit::Repeat(p, n, k) if len > 0 => {
                let at = p % len;
                let piece = b[at..(at + n).min(len)].to_vec();
                let mut rep = Vec::with_capacity(piece.len() * *k as usize);
                for _ in 0..*k {
                    rep.extend_from_slice(&piece);
                }
                b.splice(at..at, rep);
            }
            _ => {}
        }
    }
    b
}

/// Inputs for a target: mutated corpus entries (most) and pure random bytes.
pub fn inputs(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let n = seeds.len();
    let seeds = std::sync::Arc::new(seeds);
    prop_oneof![
        9 => (0..n, prop::collection::vec(edit(), 0..6)).prop_map(move |(i, edits)| apply(&seeds, seeds[i].clone(), &edits)),
        1 => prop::collection::vec(any::<u8>(), 0..512),
    ]
}

/// A proptest config with [`cases`] cases and no persisted failure files (a failing
/// input is printed; add it to the corpus).
pub fn config() -> ProptestConfig {
    ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() }
}

#[cfg(test)]
mod tests;

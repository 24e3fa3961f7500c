//! Chunk encodings: Gorilla XOR for floats, in Prometheus' exact layout and in a
//! variant with jitter-friendly timestamp buckets (what the engine writes). The stored
//! value in the `chunks` column family carries the encoding byte.

mod bits;
mod xor;

pub use xor::{decode, decode_into, num_samples, Encoding, XorAppender, XorIter, MAX_SAMPLES};

#[cfg(test)]
mod tests;

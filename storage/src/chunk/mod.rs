//! Chunk encodings. Only the float XOR encoding exists today; the stored value in the
//! `chunks` column family carries an encoding byte so others can be added.

mod bits;
mod xor;

pub use xor::{decode, decode_into, num_samples, XorAppender, XorIter, MAX_SAMPLES};

#[cfg(test)]
mod tests;

//! Chunk encodings: Gorilla XOR for floats, in Prometheus' exact layout and in a
//! variant with jitter-friendly timestamp buckets, the decimal encoding (scaled
//! integers, timestamps as interval + exceptions) that the engine stores instead when it
//! is smaller, and the head's open chunk (`open`: a byte stream while values are
//! decimal, else XOR), which is sealed into a stored form ([`sealed_form`]). The stored
//! value in the `chunks` column family carries the encoding byte; [`decode_into`] reads
//! any of them.

mod bits;
pub mod decimal;
mod open;
mod xor;

pub use open::OpenAppender;
pub use xor::{num_samples, Encoding, XorAppender, XorIter, MAX_SAMPLES};

use crate::error::Result;
use tessera_model::Sample;

/// Decodes a whole chunk of any encoding, appending its samples to `out`.
pub fn decode_into(chunk: &[u8], enc: Encoding, out: &mut Vec<Sample>) -> Result<()> {
    match enc {
        Encoding::Xor | Encoding::XorJitter => xor::decode_into(chunk, enc, out),
        Encoding::Decimal => decimal::decode_into(chunk, out),
        Encoding::OpenDecimal => open::decode_into(chunk, out),
    }
}

/// What a read decodes of each sample.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Decode {
    /// Timestamps and values.
    #[default]
    Full,
    /// Timestamps and staleness markers, for a reader that only counts samples
    /// (`count_over_time`). Where the encoding keeps values apart from timestamps (the
    /// decimal one) the values are not decoded and read as `0.0`; staleness markers
    /// stay markers. XOR chunks interleave the two and are decoded fully.
    Timestamps,
}

/// [`decode_into`] that decodes only what `what` asks for.
pub fn decode_part_into(chunk: &[u8], enc: Encoding, what: Decode, out: &mut Vec<Sample>) -> Result<()> {
    match (enc, what) {
        (Encoding::Decimal, Decode::Timestamps) => decimal::decode_timestamps_into(chunk, out),
        _ => decode_into(chunk, enc, out),
    }
}

/// Decodes a whole chunk of any encoding into a new vector.
pub fn decode(chunk: &[u8], enc: Encoding) -> Result<Vec<Sample>> {
    let mut out = Vec::new();
    decode_into(chunk, enc, &mut out)?;
    Ok(out)
}

/// What the engine stores for `samples`: their decimal encoding when that is smaller
/// than their XOR-jitter one, else the XOR-jitter one.
pub fn stored_form(samples: &[Sample]) -> Result<(Encoding, Vec<u8>)> {
    let xor = XorAppender::encode(Encoding::DEFAULT, samples)?;
    Ok(match smaller_decimal(samples, xor.len()) {
        Some(decimal) => (Encoding::Decimal, decimal),
        None => (Encoding::DEFAULT, xor),
    })
}

/// The stored form of a head chunk being sealed: an XOR chunk as [`compact_form`]
/// chooses (its bytes kept when decimal is not smaller), the open byte form as
/// [`stored_form`] chooses for its samples. `scratch` is reused between calls.
pub fn sealed_form(bytes: Vec<u8>, enc: Encoding, scratch: &mut Vec<Sample>) -> Result<(Encoding, Vec<u8>)> {
    if enc != Encoding::OpenDecimal {
        return Ok(match compact_form(&bytes, enc, scratch) {
            Some(decimal) => (Encoding::Decimal, decimal),
            None => (enc, bytes),
        });
    }
    scratch.clear();
    open::decode_into(&bytes, scratch)?;
    stored_form(scratch)
}

/// The decimal encoding of `samples` if there is one shorter than `xor_len` bytes: the
/// one rule for choosing the stored encoding.
fn smaller_decimal(samples: &[Sample], xor_len: usize) -> Option<Vec<u8>> {
    decimal::encode(samples).filter(|d| d.len() < xor_len)
}

/// The smallest stored form of a sealed XOR chunk: the decimal encoding of its samples
/// when that is smaller, else the chunk as it is. `scratch` is reused between calls.
/// Returns `None` to keep the XOR bytes. A chunk that does not decode is kept as it is
/// (the head built it; the read path reports it).
pub fn compact_form(xor: &[u8], enc: Encoding, scratch: &mut Vec<Sample>) -> Option<Vec<u8>> {
    if enc == Encoding::Decimal {
        return None;
    }
    scratch.clear();
    xor::decode_into(xor, enc, scratch).ok()?;
    smaller_decimal(scratch, xor.len())
}

#[cfg(test)]
mod tests;

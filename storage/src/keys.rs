//! Byte encodings of RocksDB keys and values (diagrams in `FORMAT.md`).
//!
//! Integers in keys are big-endian so RocksDB's bytewise order is numeric order; signed
//! integers have their sign bit flipped so negative times sort before positive ones.

use crate::chunk::Encoding;
use crate::error::{Error, Result};
use crate::varint;

pub const MS_PER_DAY: i64 = 86_400_000;

/// Day number (UTC) of a millisecond timestamp, clamped into i32 (±5.8 million years).
pub fn day_of(t: i64) -> i32 {
    t.div_euclid(MS_PER_DAY).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

fn flip64(v: i64) -> [u8; 8] {
    ((v as u64) ^ (1 << 63)).to_be_bytes()
}

fn unflip64(b: [u8; 8]) -> i64 {
    (u64::from_be_bytes(b) ^ (1 << 63)) as i64
}

fn flip32(v: i32) -> [u8; 4] {
    ((v as u32) ^ (1 << 31)).to_be_bytes()
}

fn unflip32(b: [u8; 4]) -> i32 {
    (u32::from_be_bytes(b) ^ (1 << 31)) as i32
}

// ---- series ----------------------------------------------------------------------

/// `series` CF key: the series id. The value is the canonical label encoding
/// (`labels_codec`).
pub fn series_key(id: u32) -> [u8; 4] {
    id.to_be_bytes()
}

pub fn parse_series_key(k: &[u8]) -> Result<u32> {
    let b: [u8; 4] = k.try_into().map_err(|_| Error::corrupt("series key", format!("{} bytes", k.len())))?;
    Ok(u32::from_be_bytes(b))
}

/// `series_by_hash` CF key: label-set hash then id, so colliding label sets coexist.
pub fn series_hash_key(hash: u64, id: u32) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..8].copy_from_slice(&hash.to_be_bytes());
    k[8..].copy_from_slice(&id.to_be_bytes());
    k
}

// ---- series ends -----------------------------------------------------------------

/// `series_ends` CF value (key: [`series_key`]): the last timestamp of the series'
/// stored chunks, big-endian.
pub fn encode_series_end(t: i64) -> [u8; 8] {
    t.to_be_bytes()
}

/// The end a `series_ends` value holds; `None` for anything but 8 bytes (an empty
/// value: no valid end was ever merged).
pub fn parse_series_end(v: &[u8]) -> Option<i64> {
    Some(i64::from_be_bytes(v.try_into().ok()?))
}

// ---- chunks ----------------------------------------------------------------------

/// `chunks` CF key: series id then the chunk's first timestamp.
pub fn chunk_key(id: u32, mint: i64) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..4].copy_from_slice(&id.to_be_bytes());
    k[4..].copy_from_slice(&flip64(mint));
    k
}

pub fn parse_chunk_key(k: &[u8]) -> Result<(u32, i64)> {
    if k.len() != 12 {
        return Err(Error::corrupt("chunk key", format!("{} bytes", k.len())));
    }
    let id = u32::from_be_bytes(k[..4].try_into().expect("4 bytes"));
    let mint = unflip64(k[4..].try_into().expect("8 bytes"));
    Ok((id, mint))
}

/// `chunks` CF value: `encoding u8, maxt - mint uvarint, chunk bytes, crc32 LE` where the
/// CRC (IEEE) covers everything before it. `maxt` lets a reader skip a chunk without
/// decoding it. Encoding 1 is Prometheus' XOR (same number as Prometheus uses), 2 the
/// jitter-friendly variant.
pub fn encode_chunk_value(enc: Encoding, mint: i64, maxt: i64, chunk: &[u8]) -> Vec<u8> {
    debug_assert_ne!(enc, Encoding::OpenDecimal, "the head's open form is sealed before it is stored");
    let mut v = Vec::with_capacity(chunk.len() + 10);
    v.push(enc as u8);
    varint::put_uvarint(&mut v, (maxt as u64).wrapping_sub(mint as u64));
    v.extend_from_slice(chunk);
    let crc = crc32fast::hash(&v);
    v.extend_from_slice(&crc.to_le_bytes());
    v
}

/// Checks the CRC and returns `(encoding, maxt, chunk bytes)`.
pub fn decode_chunk_value(mint: i64, v: &[u8]) -> Result<(Encoding, i64, &[u8])> {
    if v.len() < 1 + 1 + 2 + 4 {
        return Err(Error::corrupt("chunk value", format!("only {} bytes", v.len())));
    }
    let (body, crc) = v.split_at(v.len() - 4);
    let want = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
    if crc32fast::hash(body) != want {
        return Err(Error::corrupt("chunk value", "checksum mismatch"));
    }
    let enc = Encoding::from_byte(body[0])
        .ok_or_else(|| Error::corrupt("chunk value", format!("unknown encoding {}", body[0])))?;
    let (span, n) = varint::read_uvarint(&body[1..])?;
    Ok((enc, (mint as u64).wrapping_add(span) as i64, &body[1 + n..]))
}

// ---- postings --------------------------------------------------------------------

/// Prefix of every postings key of one day.
pub fn day_prefix(day: i32) -> [u8; 4] {
    flip32(day)
}

pub fn parse_day(k: &[u8]) -> Result<i32> {
    let b: [u8; 4] = k
        .get(..4)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| Error::corrupt("postings key", "shorter than 4 bytes"))?;
    Ok(unflip32(b))
}

/// `postings` CF key: `day (i32, sign-flipped BE) · name_len u16 BE · name · value`.
/// Label names are length-prefixed so any byte may appear in them; the value is the
/// rest of the key. Name length 0 is the "all series of the day" key.
pub fn postings_key(day: i32, name: &str, value: &str) -> Result<Vec<u8>> {
    let mut k = postings_name_prefix(day, name)?;
    k.extend_from_slice(value.as_bytes());
    Ok(k)
}

pub fn postings_name_prefix(day: i32, name: &str) -> Result<Vec<u8>> {
    let len = u16::try_from(name.len()).map_err(|_| {
        let head: String = name.chars().take(32).collect();
        Error::InvalidInput(format!("label name longer than 65535 bytes: {head}…"))
    })?;
    let mut k = Vec::with_capacity(6 + name.len() + 16);
    k.extend_from_slice(&flip32(day));
    k.extend_from_slice(&len.to_be_bytes());
    k.extend_from_slice(name.as_bytes());
    Ok(k)
}

/// Key of the day's all-series postings list.
pub fn all_postings_key(day: i32) -> [u8; 6] {
    let mut k = [0u8; 6];
    k[..4].copy_from_slice(&flip32(day));
    k
}

/// Splits a postings key into `(day, name, value)`.
pub fn parse_postings_key(k: &[u8]) -> Result<(i32, &[u8], &[u8])> {
    let day = parse_day(k)?;
    let len = k
        .get(4..6)
        .map(|b| u16::from_be_bytes([b[0], b[1]]) as usize)
        .ok_or_else(|| Error::corrupt("postings key", "missing name length"))?;
    let name = k.get(6..6 + len).ok_or_else(|| Error::corrupt("postings key", "name truncated"))?;
    Ok((day, name, &k[6 + len..]))
}

/// The smallest key greater than every key starting with `prefix` (None if all 0xff).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xff {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

// ---- meta ------------------------------------------------------------------------

pub const META_SCHEMA_VERSION: &[u8] = b"schema_version";
pub const META_RETENTION_WATERMARK: &[u8] = b"retention_watermark";
pub const META_NEXT_SERIES_ID: &[u8] = b"next_series_id";
/// Present (value empty) when `series_ends` has recorded every chunk write since the
/// shard's `chunks` column family was empty, so that its records can be trusted.
pub const META_SERIES_ENDS_COMPLETE: &[u8] = b"series_ends_complete";
pub const SCHEMA_VERSION: u32 = 1;

pub fn encode_i64(v: i64) -> [u8; 8] {
    v.to_be_bytes()
}

pub fn decode_i64(b: &[u8]) -> Result<i64> {
    let a: [u8; 8] = b.try_into().map_err(|_| Error::corrupt("meta value", "expected 8 bytes"))?;
    Ok(i64::from_be_bytes(a))
}

#[cfg(test)]
mod tests;

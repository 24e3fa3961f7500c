//! The WAL's record framing and the batch record payload (diagram in `FORMAT.md`).
//!
//! Frame: `len u32 LE · crc32 u32 LE · type u8 · payload`, where `len` counts the type
//! byte plus the payload and the CRC (IEEE, `crc32fast`) covers the same bytes.

use crate::error::{Error, Result};
use crate::labels_codec;
use crate::varint::{self, Cursor};
use tessera_model::Label;

/// Header bytes before the type byte.
pub const FRAME_HEADER: usize = 8;
/// Record type of a batch (new series + samples of one `append` call).
pub const TYPE_BATCH: u8 = 1;
/// Largest record we accept when reading (a corrupt length must not allocate GiBs).
pub const MAX_RECORD: usize = 1 << 30;

/// One new series in a batch record.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesEntry {
    pub id: u32,
    pub labels: Vec<Label>,
}

/// One accepted sample in a batch record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleEntry {
    pub id: u32,
    pub t: i64,
    pub v: f64,
}

/// Encodes a batch record payload (without frame):
/// `n_series uvarint, (id uvarint, labels)*, n_samples uvarint,
///  (id uvarint, t - prev_t zig-zag varint, value bits u64 LE)*`.
pub fn encode_batch(series: &[(u32, &[u8])], samples: &[SampleEntry], out: &mut Vec<u8>) {
    varint::put_uvarint(out, series.len() as u64);
    for (id, encoded_labels) in series {
        varint::put_uvarint(out, u64::from(*id));
        out.extend_from_slice(encoded_labels);
    }
    varint::put_uvarint(out, samples.len() as u64);
    let mut prev_t = 0i64;
    for s in samples {
        varint::put_uvarint(out, u64::from(s.id));
        varint::put_varint(out, s.t.wrapping_sub(prev_t));
        out.extend_from_slice(&s.v.to_bits().to_le_bytes());
        prev_t = s.t;
    }
}

pub fn decode_batch(payload: &[u8]) -> Result<(Vec<SeriesEntry>, Vec<SampleEntry>)> {
    let mut c = Cursor::new(payload, "wal record");
    let n_series = c.uvarint()?;
    if n_series > payload.len() as u64 {
        return Err(Error::corrupt("wal record", "series count exceeds record"));
    }
    let mut series = Vec::with_capacity(n_series as usize);
    for _ in 0..n_series {
        let id = read_id(&mut c)?;
        let labels = labels_codec::decode_labels_from(&mut c)?;
        series.push(SeriesEntry { id, labels });
    }
    let n_samples = c.uvarint()?;
    // Each sample takes at least 10 bytes; bound the allocation by what is there.
    if n_samples > payload.len() as u64 / 10 + 1 {
        return Err(Error::corrupt("wal record", "sample count exceeds record"));
    }
    let mut samples = Vec::with_capacity(n_samples as usize);
    let mut prev_t = 0i64;
    for _ in 0..n_samples {
        let id = read_id(&mut c)?;
        let t = prev_t.wrapping_add(c.varint()?);
        let v = f64::from_bits(c.u64_le()?);
        samples.push(SampleEntry { id, t, v });
        prev_t = t;
    }
    if !c.is_empty() {
        return Err(Error::corrupt("wal record", "trailing bytes"));
    }
    Ok((series, samples))
}

fn read_id(c: &mut Cursor<'_>) -> Result<u32> {
    u32::try_from(c.uvarint()?).map_err(|_| Error::corrupt("wal record", "series id exceeds u32"))
}

/// Frames a payload: returns the bytes to append to a segment.
pub fn frame(typ: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FRAME_HEADER + 1 + payload.len());
    let len = (payload.len() + 1) as u32;
    let mut h = crc32fast::Hasher::new();
    h.update(&[typ]);
    h.update(payload);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&h.finalize().to_le_bytes());
    out.push(typ);
    out.extend_from_slice(payload);
    out
}

/// Outcome of reading one frame at the start of `buf`.
pub enum Frame<'a> {
    /// A valid record: type, payload, total bytes consumed.
    Record(u8, &'a [u8], usize),
    /// The buffer ends cleanly here.
    End,
    /// The bytes here are not a valid record (torn write or corruption).
    Bad {
        reason: String,
        /// When the header's length was plausible and the whole frame is present but its
        /// checksum fails: the frame's total size and its (untrusted) type and payload,
        /// so the reader can skip exactly this record and count what it held.
        damaged: Option<(usize, u8, &'a [u8])>,
    },
}

pub fn read_frame(buf: &[u8]) -> Frame<'_> {
    if buf.is_empty() {
        return Frame::End;
    }
    let bad = |reason: String| Frame::Bad { reason, damaged: None };
    if buf.len() < FRAME_HEADER + 1 {
        return bad(format!("torn frame header ({} bytes)", buf.len()));
    }
    let len = u32::from_le_bytes(buf[..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(buf[4..8].try_into().expect("4 bytes"));
    if len == 0 || len > MAX_RECORD {
        return bad(format!("implausible record length {len}"));
    }
    let Some(body) = buf.get(FRAME_HEADER..FRAME_HEADER + len) else {
        return bad(format!("torn record: length {len}, only {} bytes left", buf.len() - FRAME_HEADER));
    };
    if crc32fast::hash(body) != crc {
        return Frame::Bad {
            reason: "record checksum mismatch".into(),
            damaged: Some((FRAME_HEADER + len, body[0], &body[1..])),
        };
    }
    Frame::Record(body[0], &body[1..], FRAME_HEADER + len)
}

/// The offset (relative to `buf`) of the first valid frame of a known record type at or
/// after `buf[1..]`, for resuming after damage whose length field cannot be trusted.
/// Candidates are filtered by type byte and length before their checksum is computed;
/// `budget` bounds the bytes checksummed (candidates longer than what is left of it are
/// passed over); a garbage candidate passes with odds of 2^-32. `None`: no frame found.
pub fn resync(buf: &[u8], mut budget: usize) -> Option<usize> {
    for start in 1..buf.len() {
        let rest = &buf[start..];
        if rest.len() < FRAME_HEADER + 1 || rest[FRAME_HEADER] != TYPE_BATCH {
            continue;
        }
        let len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
        if len == 0 || len > MAX_RECORD || FRAME_HEADER + len > rest.len() {
            continue;
        }
        if len > budget {
            continue;
        }
        budget -= len;
        if let Frame::Record(..) = read_frame(rest) {
            return Some(start);
        }
    }
    None
}

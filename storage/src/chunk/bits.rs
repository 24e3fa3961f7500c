//! Big-endian bit stream writer and reader for the XOR chunk encoding.
//!
//! Bits are packed from the most significant bit of each byte down, as in Prometheus'
//! `bstream`, so a chunk written here is byte-compatible with a Prometheus XOR chunk.

use crate::error::{Error, Result};

/// Appends bits to a growable byte buffer.
#[derive(Clone, Debug, Default)]
pub struct BitWriter {
    pub(crate) buf: Vec<u8>,
    /// Free bits left in the last byte of `buf` (0 when `buf` is empty or byte-aligned).
    pub(crate) free: u8,
}

impl BitWriter {
    pub fn with_capacity(bytes: usize) -> BitWriter {
        BitWriter { buf: Vec::with_capacity(bytes), free: 0 }
    }

    /// Writes whole bytes; only valid while the stream is byte-aligned (header fields).
    pub fn write_aligned(&mut self, bytes: &[u8]) {
        debug_assert_eq!(self.free, 0, "aligned write on an unaligned stream");
        self.buf.extend_from_slice(bytes);
    }

    #[inline]
    pub fn write_bit(&mut self, bit: bool) {
        if self.free == 0 {
            self.buf.push(0);
            self.free = 8;
        }
        self.free -= 1;
        if bit {
            let last = self.buf.len() - 1;
            self.buf[last] |= 1 << self.free;
        }
    }

    /// Writes the low `n` bits of `v`, most significant first. `n` is at most 64.
    #[inline]
    pub fn write_bits(&mut self, v: u64, n: u32) {
        debug_assert!(n <= 64);
        let mut n = n;
        while n > 0 {
            if self.free == 0 {
                self.buf.push(0);
                self.free = 8;
            }
            // Take as many of the remaining high bits as fit in the current byte.
            let take = n.min(self.free as u32);
            let shift = n - take;
            let chunk = ((v >> shift) & ((1u64 << take) - 1)) as u8;
            self.free -= take as u8;
            let last = self.buf.len() - 1;
            self.buf[last] |= chunk << self.free;
            n -= take;
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }
}

/// Reads bits from a byte slice; running past the end is an error, never a panic.
///
/// The reader keeps only a bit position. [`BitReader::peek`] loads the 8 bytes under it
/// big-endian and shifts off the bits already consumed, so a read of up to 57 bits is one
/// load, a shift and a mask, without a refill loop. The checked reads (`read_*`) fail as
/// soon as a read would pass the end; the hot decode loop uses `peek`/`consume` and asks
/// [`BitReader::overran`] once per sample instead (bits past the end read as zeros).
#[derive(Clone, Debug)]
pub struct BitReader<'a> {
    data: &'a [u8],
    /// Bits consumed so far (may pass the end of `data` after unchecked `consume`s).
    pos: usize,
}

/// How many of [`BitReader::peek`]'s bits are always the stream's (the rest are zeros).
pub const PEEK_BITS: u32 = 57;

impl<'a> BitReader<'a> {
    pub fn new(data: &'a [u8]) -> BitReader<'a> {
        BitReader { data, pos: 0 }
    }

    pub(crate) fn eof() -> Error {
        Error::corrupt("chunk", "truncated bit stream")
    }

    /// Bits left before the end (0 once past it).
    #[inline]
    fn remaining(&self) -> usize {
        (self.data.len() * 8).saturating_sub(self.pos)
    }

    /// The next 64 bits, most significant first, without consuming them. At least the
    /// top [`PEEK_BITS`] are the stream's; bits past the end of the data read as zeros.
    #[inline]
    pub fn peek(&self) -> u64 {
        let byte = self.pos >> 3;
        let w = match self.data.get(byte..byte + 8) {
            Some(b) => u64::from_be_bytes(b.try_into().expect("8 bytes")),
            None => {
                // The last 7 bytes of the data: pad with zeros.
                let rest = self.data.get(byte..).unwrap_or(&[]);
                let mut buf = [0u8; 8];
                buf[..rest.len()].copy_from_slice(rest);
                u64::from_be_bytes(buf)
            }
        };
        w << (self.pos & 7)
    }

    /// Consumes `n` bits unchecked; see [`BitReader::overran`].
    #[inline]
    pub fn consume(&mut self, n: u32) {
        self.pos += n as usize;
    }

    /// True when unchecked reads went past the end of the data (the bits they returned
    /// were padding, so what was decoded from them is not the stream's).
    #[inline]
    pub fn overran(&self) -> bool {
        self.pos > self.data.len() * 8
    }

    /// Reads `n` (1..=64) bits unchecked, most significant first.
    #[inline]
    pub fn take(&mut self, n: u32) -> u64 {
        debug_assert!((1..=64).contains(&n));
        if n <= PEEK_BITS {
            let v = self.peek() >> (64 - n);
            self.consume(n);
            v
        } else {
            let hi = self.peek() >> 32;
            self.consume(32);
            let lo_n = n - 32;
            let lo = self.peek() >> (64 - lo_n);
            self.consume(lo_n);
            (hi << lo_n) | lo
        }
    }

    /// Fills `out` with consecutive `w`-bit (1..=64) fields, unchecked like [`take`]
    /// (fields past the end read as zeros). Fields of up to [`PEEK_BITS`] bits are read
    /// in a loop without the end-of-data branch: those whose 8-byte window lies inside
    /// the data from the data, the last few (starting within 8 bytes of the end) from a
    /// zero-padded copy of those bytes, which is what [`take`] reads there. In a chunk of
    /// 120 samples the tail is up to a fifth of a stream's fields.
    ///
    /// [`take`]: BitReader::take
    #[inline]
    pub fn unpack(&mut self, w: u32, out: &mut [u64]) {
        debug_assert!((1..=64).contains(&w));
        let mut done = 0;
        if w <= PEEK_BITS {
            if self.data.len() >= 8 {
                // Field i starts at bit pos + i·w; its window [byte, byte + 8) fits while
                // the start is at most this bit.
                let last_start = (self.data.len() - 8) * 8 + 7;
                let fit = last_start.checked_sub(self.pos).map_or(0, |room| room / w as usize + 1);
                done = fit.min(out.len());
                let mut groups = 0;
                if self.pos.is_multiple_of(8) && unpack_groups(self.data, self.pos / 8, w, &mut out[..done / 8 * 8]) {
                    groups = done / 8 * 8;
                    self.pos += groups * w as usize;
                }
                self.pos = unpack_from(self.data, 0, self.pos, w, &mut out[groups..done]);
            }
            if done < out.len() {
                // The rest start in the last 8 bytes (or the data is shorter): a copy of
                // those bytes padded with zeros holds their windows, up to 16 bytes on.
                let start = (self.pos >> 3).min(self.data.len());
                let rest = &self.data[start..];
                if rest.len() <= 8 {
                    let mut pad = [0u8; 24];
                    pad[..rest.len()].copy_from_slice(rest);
                    let room = (16 * 8 + start * 8).saturating_sub(self.pos) / w as usize;
                    let n = room.min(out.len() - done);
                    self.pos = unpack_from(&pad, start * 8, self.pos, w, &mut out[done..done + n]);
                    done += n;
                }
            }
        }
        for r in &mut out[done..] {
            *r = self.take(w);
        }
    }

    /// Reads `n` (1..=64) bits as an unsigned integer, most significant first.
    #[inline]
    pub fn read_bits(&mut self, n: u32) -> Result<u64> {
        debug_assert!((1..=64).contains(&n));
        if n as usize > self.remaining() {
            return Err(Self::eof());
        }
        Ok(self.take(n))
    }

    /// Byte offset of the read position; only meaningful while byte-aligned.
    fn aligned_pos(&self) -> usize {
        debug_assert_eq!(self.pos % 8, 0, "aligned read on an unaligned stream");
        self.pos.div_ceil(8)
    }

    /// Reads whole bytes; only valid while byte-aligned (header fields).
    pub fn read_aligned(&mut self, n: usize) -> Result<&'a [u8]> {
        let start = self.aligned_pos();
        let bytes = self.data.get(start..start + n).ok_or_else(Self::eof)?;
        self.pos = (start + n) * 8;
        Ok(bytes)
    }

    /// Reads a Go-style unsigned varint (LEB128) at a byte-aligned position.
    pub fn read_uvarint(&mut self) -> Result<u64> {
        let start = self.aligned_pos();
        let (v, used) = crate::varint::read_uvarint(self.data.get(start..).unwrap_or(&[]))?;
        self.pos = (start + used) * 8;
        Ok(v)
    }
}

/// Reads `out.len()` consecutive `w`-bit fields (`w` ≤ [`PEEK_BITS`]) starting at bit
/// `pos` of a stream whose byte 0 is `bytes[0]` at stream bit `base` (a multiple of 8);
/// every field's 8-byte window must lie in `bytes` (a missing one reads as zeros).
/// Returns the bit after the last field.
/// Fills `out` (a multiple of 8 fields) with the `w`-bit fields that start at byte
/// `byte`, every field's 8-byte window inside `bytes`, 8 fields at a time: 8 fields of
/// `w` bits are `w` bytes, so within a group that starts on a byte every field's byte
/// and shift are constants of its width, and the loads, shifts and stores run without
/// the variable shifts and the dependent position of [`unpack_from`] (the decimal
/// decode benches went 1.5–2.5× faster with it). False, with nothing read, for a width
/// above [`PEEK_BITS`].
fn unpack_groups(bytes: &[u8], byte: usize, w: u32, out: &mut [u64]) -> bool {
    macro_rules! by_width {
        ($($w:literal)*) => {
            match w {
                $($w => unpack_groups_of::<$w>(bytes, byte, out),)*
                _ => return false,
            }
        };
    }
    by_width!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29
        30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57);
    true
}

#[inline(always)]
fn unpack_groups_of<const W: usize>(bytes: &[u8], mut byte: usize, out: &mut [u64]) {
    for group in out.chunks_exact_mut(8) {
        // The last field starts at bit 7·W: its window ends at byte 7·W/8 + 8.
        let window = &bytes[byte..byte + 7 * W / 8 + 8];
        for (j, r) in group.iter_mut().enumerate() {
            let (at, shift) = (j * W / 8, j * W % 8);
            let word = u64::from_be_bytes(window[at..at + 8].try_into().expect("8 bytes"));
            *r = (word << shift) >> (64 - W);
        }
        byte += W;
    }
}

#[inline(always)]
fn unpack_from(bytes: &[u8], base: usize, mut pos: usize, w: u32, out: &mut [u64]) -> usize {
    for r in out {
        let at = (pos - base) >> 3;
        let word = bytes.get(at..).and_then(|d| d.first_chunk::<8>()).map_or(0, |b| u64::from_be_bytes(*b));
        *r = (word << (pos & 7)) >> (64 - w);
        pos += w as usize;
    }
    pos
}

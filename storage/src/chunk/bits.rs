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
#[derive(Clone, Debug)]
pub struct BitReader<'a> {
    data: &'a [u8],
    /// Position in bits from the start of `data`.
    pos: usize,
}

impl<'a> BitReader<'a> {
    pub fn new(data: &'a [u8]) -> BitReader<'a> {
        BitReader { data, pos: 0 }
    }

    fn eof() -> Error {
        Error::corrupt("chunk", "truncated bit stream")
    }

    #[inline]
    pub fn read_bit(&mut self) -> Result<bool> {
        let byte = *self.data.get(self.pos / 8).ok_or_else(Self::eof)?;
        let bit = (byte >> (7 - (self.pos % 8))) & 1;
        self.pos += 1;
        Ok(bit == 1)
    }

    /// Reads `n` (1..=64) bits as an unsigned integer, most significant first.
    #[inline]
    pub fn read_bits(&mut self, n: u32) -> Result<u64> {
        debug_assert!((1..=64).contains(&n));
        let end = self.pos + n as usize;
        if end > self.data.len() * 8 {
            return Err(Self::eof());
        }
        let first = self.pos / 8;
        let off = (self.pos % 8) as u32;
        // At most 9 bytes cover an unaligned 64-bit read; load them left-aligned into a
        // u128 and shift the wanted bits down. Missing bytes past the end are zeros and
        // never reach the result because of the bound check above.
        let mut word = [0u8; 16];
        let avail = (self.data.len() - first).min(9);
        word[..avail].copy_from_slice(&self.data[first..first + avail]);
        let acc = u128::from_be_bytes(word);
        let v = (acc << off) >> (128 - n);
        self.pos = end;
        Ok(v as u64)
    }

    /// Reads whole bytes; only valid while byte-aligned (header fields).
    pub fn read_aligned(&mut self, n: usize) -> Result<&'a [u8]> {
        debug_assert_eq!(self.pos % 8, 0);
        let start = self.pos / 8;
        let bytes = self.data.get(start..start + n).ok_or_else(Self::eof)?;
        self.pos += n * 8;
        Ok(bytes)
    }

    /// Reads a Go-style unsigned varint (LEB128) at a byte-aligned position.
    pub fn read_uvarint(&mut self) -> Result<u64> {
        debug_assert_eq!(self.pos % 8, 0);
        let (v, used) = crate::varint::read_uvarint(&self.data[(self.pos / 8).min(self.data.len())..])?;
        self.pos += used * 8;
        Ok(v)
    }
}

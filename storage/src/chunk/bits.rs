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
/// Bits are buffered left-aligned in a u64 accumulator refilled a byte at a time, so
/// most reads are a shift and a mask.
#[derive(Clone, Debug)]
pub struct BitReader<'a> {
    data: &'a [u8],
    /// Next byte of `data` to load into the accumulator.
    next: usize,
    acc: u64,
    /// Valid bits in `acc`, counted from its most significant bit.
    acc_bits: u32,
}

impl<'a> BitReader<'a> {
    pub fn new(data: &'a [u8]) -> BitReader<'a> {
        BitReader { data, next: 0, acc: 0, acc_bits: 0 }
    }

    fn eof() -> Error {
        Error::corrupt("chunk", "truncated bit stream")
    }

    #[inline]
    fn refill(&mut self) {
        if self.acc_bits == 0 && self.next + 8 <= self.data.len() {
            // Fast path: a whole word.
            let w = u64::from_be_bytes(self.data[self.next..self.next + 8].try_into().expect("8 bytes"));
            self.acc = w;
            self.acc_bits = 64;
            self.next += 8;
            return;
        }
        while self.acc_bits <= 56 && self.next < self.data.len() {
            self.acc |= u64::from(self.data[self.next]) << (56 - self.acc_bits);
            self.acc_bits += 8;
            self.next += 1;
        }
    }

    /// Takes `n` (1..=acc_bits) bits off the accumulator.
    #[inline]
    fn take(&mut self, n: u32) -> u64 {
        let v = self.acc >> (64 - n);
        self.acc = if n == 64 { 0 } else { self.acc << n };
        self.acc_bits -= n;
        v
    }

    #[inline]
    pub fn read_bit(&mut self) -> Result<bool> {
        if self.acc_bits == 0 {
            self.refill();
            if self.acc_bits == 0 {
                return Err(Self::eof());
            }
        }
        Ok(self.take(1) == 1)
    }

    /// Reads a unary prefix of up to `max` one-bits (1..=8): the number of leading ones,
    /// consuming the terminating zero unless `max` ones were read. One shift instead of
    /// a bit-by-bit loop on the hot decode path.
    #[inline]
    pub fn read_ones(&mut self, max: u32) -> Result<u32> {
        debug_assert!((1..=8).contains(&max));
        if self.acc_bits < max {
            self.refill();
        }
        if self.acc_bits >= max {
            let ones = (!self.acc).leading_zeros().min(max);
            self.take(if ones < max { ones + 1 } else { max });
            return Ok(ones);
        }
        // Near the end of the data: fall back to single bits.
        let mut ones = 0;
        while ones < max && self.read_bit()? {
            ones += 1;
        }
        Ok(ones)
    }

    /// Reads `n` (1..=64) bits as an unsigned integer, most significant first.
    #[inline]
    pub fn read_bits(&mut self, n: u32) -> Result<u64> {
        debug_assert!((1..=64).contains(&n));
        if n > self.acc_bits {
            self.refill();
        }
        if n <= self.acc_bits {
            return Ok(self.take(n));
        }
        // The accumulator holds fewer than `n` bits even after a refill: either the
        // data ends, or `n` is large and the accumulator is not byte-aligned. Read in
        // two parts.
        if self.next >= self.data.len() || self.acc_bits == 0 {
            return Err(Self::eof());
        }
        let hi_n = self.acc_bits;
        let hi = self.take(hi_n);
        self.refill();
        let lo_n = n - hi_n;
        if lo_n > self.acc_bits {
            return Err(Self::eof());
        }
        Ok((hi << lo_n) | self.take(lo_n))
    }

    /// Byte offset of the read position; only meaningful while byte-aligned.
    fn aligned_pos(&mut self) -> usize {
        debug_assert_eq!(self.acc_bits % 8, 0, "aligned read on an unaligned stream");
        // Give back the whole bytes still buffered.
        let pos = self.next - (self.acc_bits / 8) as usize;
        self.next = pos;
        self.acc = 0;
        self.acc_bits = 0;
        pos
    }

    /// Reads whole bytes; only valid while byte-aligned (header fields).
    pub fn read_aligned(&mut self, n: usize) -> Result<&'a [u8]> {
        let start = self.aligned_pos();
        let bytes = self.data.get(start..start + n).ok_or_else(Self::eof)?;
        self.next = start + n;
        Ok(bytes)
    }

    /// Reads a Go-style unsigned varint (LEB128) at a byte-aligned position.
    pub fn read_uvarint(&mut self) -> Result<u64> {
        let start = self.aligned_pos();
        let (v, used) = crate::varint::read_uvarint(&self.data[start.min(self.data.len())..])?;
        self.next = start + used;
        Ok(v)
    }
}

//! LEB128 varints as Go's `encoding/binary` writes them (`PutUvarint`, `PutVarint`
//! with zig-zag), used in chunk headers, WAL records and index values.

use crate::error::{Error, Result};

pub fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn put_varint(out: &mut Vec<u8>, v: i64) {
    put_uvarint(out, zigzag(v));
}

#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
pub fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// Decodes an unsigned varint; returns the value and the number of bytes used.
/// Truncated input or a varint longer than 10 bytes / overflowing u64 is an error.
pub fn read_uvarint(buf: &[u8]) -> Result<(u64, usize)> {
    let mut v: u64 = 0;
    for (i, &b) in buf.iter().enumerate().take(10) {
        if i == 9 && b > 1 {
            return Err(Error::corrupt("varint", "overflows 64 bits"));
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Ok((v, i + 1));
        }
    }
    Err(Error::corrupt("varint", "truncated"))
}

/// A cursor over a byte slice for decoding records; every read is bounds-checked.
#[derive(Clone)]
pub struct Cursor<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
    what: &'static str,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8], what: &'static str) -> Cursor<'a> {
        Cursor { buf, pos: 0, what }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn uvarint(&mut self) -> Result<u64> {
        let (v, n) = read_uvarint(&self.buf[self.pos.min(self.buf.len())..])
            .map_err(|e| Error::corrupt(self.what, e.to_string()))?;
        self.pos += n;
        Ok(v)
    }

    pub fn varint(&mut self) -> Result<i64> {
        Ok(unzigzag(self.uvarint()?))
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or_else(|| Error::corrupt(self.what, "length overflow"))?;
        let b = self.buf.get(self.pos..end).ok_or_else(|| Error::corrupt(self.what, "truncated"))?;
        self.pos = end;
        Ok(b)
    }

    pub fn u64_le(&mut self) -> Result<u64> {
        let b = self.bytes(8)?;
        Ok(u64::from_le_bytes(b.try_into().expect("bytes(8) returns 8 bytes")))
    }

    /// A uvarint length followed by that many bytes, as UTF-8.
    pub fn string(&mut self) -> Result<&'a str> {
        let len = self.uvarint()?;
        let len = usize::try_from(len).map_err(|_| Error::corrupt(self.what, "string length"))?;
        let b = self.bytes(len)?;
        std::str::from_utf8(b).map_err(|_| Error::corrupt(self.what, "label is not UTF-8"))
    }
}

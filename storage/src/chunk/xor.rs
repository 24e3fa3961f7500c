//! Gorilla XOR chunk encoding: Prometheus' `chunkenc.XORChunk` byte for byte (`Encoding::Xor`)
//! and a variant with smaller timestamp buckets for jittered scrapes (`Encoding::XorJitter`).
//!
//! Layout (see `storage/FORMAT.md` for the diagram and the two timestamp bucket tables):
//! a big-endian u16 sample count, then
//! `t0` as a zig-zag varint, `v0` as 64 raw bits, `t1 - t0` as a uvarint, then per sample
//! a variable-width delta-of-delta timestamp and a XOR'd value. All timestamp arithmetic
//! wraps, so any i64 sequence (even non-monotonic, even spanning i64::MIN..i64::MAX)
//! round-trips exactly; values are compared as raw bits, so NaN payloads (the Prometheus
//! stale marker 0x7ff0000000000002), -0.0, ±Inf and subnormals survive unchanged.

use super::bits::{BitReader, BitWriter, PEEK_BITS};
use crate::error::{Error, Result};
use crate::varint;
use tessera_model::Sample;

/// Most samples one chunk can hold (the header count is a u16).
pub const MAX_SAMPLES: usize = u16::MAX as usize;

/// The two XOR variants. They differ only in the payload widths of the timestamp
/// delta-of-delta buckets (prefixes `10`, `110`, `1110`; `0` is dod = 0 and `1111` is a
/// full 64-bit dod in both).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// Prometheus' XOR chunk, byte for byte: buckets of 14, 17 and 20 bits.
    Xor = 1,
    /// Same layout with buckets of 6, 13 and 20 bits. Scrapes every 15 s with a few
    /// milliseconds of jitter have |dod| < 32 almost always: 8 bits per timestamp
    /// instead of 16, which is half the size of a constant series' chunk. This is
    /// what the engine writes.
    XorJitter = 2,
    /// Not an XOR chunk: values as scaled decimal integers, timestamps as interval +
    /// exceptions (`decimal.rs`). The engine stores it in place of an XOR chunk when it
    /// is smaller; [`XorIter`] does not read it (use `chunk::decode_into`).
    Decimal = 3,
    /// The head's open chunk while its values are decimal (`chunk::open`): a byte
    /// stream of timestamp and value changes. Never stored or sent: sealing turns it
    /// into one of the others, so [`Encoding::from_byte`] does not read it.
    OpenDecimal = 4,
}

impl Encoding {
    /// What the engine writes.
    pub const DEFAULT: Encoding = Encoding::XorJitter;

    #[inline]
    fn buckets(self) -> [u32; 3] {
        match self {
            Encoding::Xor => [14, 17, 20],
            // Decimal and OpenDecimal are not XOR encodings: the decoder refuses them,
            // and an XOR appender is only ever made with XOR-jitter or Prometheus' XOR.
            Encoding::XorJitter | Encoding::Decimal | Encoding::OpenDecimal => [6, 13, 20],
        }
    }

    /// The encoding stored in a chunk value's first byte.
    pub fn from_byte(b: u8) -> Option<Encoding> {
        match b {
            1 => Some(Encoding::Xor),
            2 => Some(Encoding::XorJitter),
            3 => Some(Encoding::Decimal),
            _ => None,
        }
    }
}

/// An open chunk being appended to. Appending is O(1); the bytes are always a valid chunk.
#[derive(Clone, Debug)]
pub struct XorAppender {
    enc: Encoding,
    w: BitWriter,
    count: u16,
    t: i64,
    /// Previous timestamp delta (wrapping), for delta-of-delta.
    delta: u64,
    v: u64,
    /// Leading/trailing zero window of the previous XOR; `leading == 0xff` means none yet.
    leading: u8,
    trailing: u8,
}

impl Default for XorAppender {
    fn default() -> Self {
        Self::new(Encoding::DEFAULT)
    }
}

impl XorAppender {
    pub fn new(enc: Encoding) -> XorAppender {
        // Starts small; the buffer doubles as samples arrive and is trimmed when sealed.
        let mut w = BitWriter::with_capacity(32);
        w.write_aligned(&[0, 0]);
        XorAppender { enc, w, count: 0, t: 0, delta: 0, v: 0, leading: 0xff, trailing: 0 }
    }

    pub fn encoding(&self) -> Encoding {
        self.enc
    }

    /// Encodes a whole sample slice into a fresh chunk.
    pub fn encode(enc: Encoding, samples: &[Sample]) -> Result<Vec<u8>> {
        Ok(Self::encode_appender(enc, samples)?.into_bytes())
    }

    /// An appender holding `samples`, to append more to.
    pub fn encode_appender(enc: Encoding, samples: &[Sample]) -> Result<XorAppender> {
        let mut a = XorAppender::new(enc);
        for s in samples {
            a.append(s.t, s.v)?;
        }
        Ok(a)
    }

    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Last appended timestamp (meaningless when empty).
    pub fn last_t(&self) -> i64 {
        self.t
    }

    /// The chunk bytes so far (a complete, decodable chunk).
    pub fn bytes(&self) -> &[u8] {
        self.w.bytes()
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.w.buf
    }

    /// Heap bytes held, for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        self.w.buf.capacity()
    }

    /// Appends one sample. Fails only when the chunk already holds `MAX_SAMPLES`.
    pub fn append(&mut self, t: i64, v: f64) -> Result<()> {
        if self.count as usize >= MAX_SAMPLES {
            return Err(Error::InvalidInput(format!("chunk is full ({MAX_SAMPLES} samples)")));
        }
        let vbits = v.to_bits();
        match self.count {
            0 => {
                let mut tmp = Vec::with_capacity(10);
                varint::put_varint(&mut tmp, t);
                self.w.write_aligned(&tmp);
                self.w.write_bits(vbits, 64);
            }
            1 => {
                let delta = (t as u64).wrapping_sub(self.t as u64);
                // The uvarint is written bit-wise because after v0 the stream is still
                // byte-aligned (2 + varint + 8 bytes), so this keeps the Prometheus layout.
                let mut tmp = Vec::with_capacity(10);
                varint::put_uvarint(&mut tmp, delta);
                for b in tmp {
                    self.w.write_bits(u64::from(b), 8);
                }
                self.delta = delta;
                self.write_xor(vbits);
            }
            _ => {
                let delta = (t as u64).wrapping_sub(self.t as u64);
                let dod = delta.wrapping_sub(self.delta) as i64;
                let [b0, b1, b2] = self.enc.buckets();
                if dod == 0 {
                    self.w.write_bit(false);
                } else if bit_range(dod, b0) {
                    self.w.write_bits(0b10, 2);
                    self.w.write_bits(dod as u64 & mask(b0), b0);
                } else if bit_range(dod, b1) {
                    self.w.write_bits(0b110, 3);
                    self.w.write_bits(dod as u64 & mask(b1), b1);
                } else if bit_range(dod, b2) {
                    self.w.write_bits(0b1110, 4);
                    self.w.write_bits(dod as u64 & mask(b2), b2);
                } else {
                    self.w.write_bits(0b1111, 4);
                    self.w.write_bits(dod as u64, 64);
                }
                self.delta = delta;
                self.write_xor(vbits);
            }
        }
        self.t = t;
        self.v = vbits;
        self.count += 1;
        self.w.buf[..2].copy_from_slice(&self.count.to_be_bytes());
        Ok(())
    }

    fn write_xor(&mut self, vbits: u64) {
        let delta = vbits ^ self.v;
        if delta == 0 {
            self.w.write_bit(false);
            return;
        }
        self.w.write_bit(true);
        // Leading zeros are stored in 5 bits, so clamp to 31 (the extra zeros are then
        // part of the significant bits), exactly as Prometheus does.
        let leading = (delta.leading_zeros() as u8).min(31);
        let trailing = delta.trailing_zeros() as u8;
        if self.leading != 0xff && leading >= self.leading && trailing >= self.trailing {
            // The new XOR fits in the previous window: reuse it.
            self.w.write_bit(false);
            let sig = 64 - u32::from(self.leading) - u32::from(self.trailing);
            self.w.write_bits(delta >> self.trailing, sig);
            return;
        }
        self.leading = leading;
        self.trailing = trailing;
        self.w.write_bit(true);
        self.w.write_bits(u64::from(leading), 5);
        let sig = 64 - u32::from(leading) - u32::from(trailing);
        // 64 significant bits do not fit in 6 bits; 0 stands for 64 (sig is never 0).
        self.w.write_bits(u64::from(sig) & 0x3f, 6);
        self.w.write_bits(delta >> trailing, sig);
    }
}

#[inline]
fn mask(bits: u32) -> u64 {
    (1u64 << bits) - 1
}

/// True when `x` fits the `nbits` two's-complement bucket the way Prometheus checks it
/// (the range is asymmetric: -(2^(n-1) - 1) ..= 2^(n-1)).
#[inline]
fn bit_range(x: i64, nbits: u32) -> bool {
    let half = 1i64 << (nbits - 1);
    -(half - 1) <= x && x <= half
}

/// Number of samples in an encoded chunk, from its header.
pub fn num_samples(chunk: &[u8]) -> Result<usize> {
    match chunk {
        [a, b, ..] => Ok(u16::from_be_bytes([*a, *b]) as usize),
        _ => Err(Error::corrupt("chunk", "shorter than its 2-byte header")),
    }
}

/// The decoding state of one chunk, shared by [`XorIter`] and [`decode_into`].
struct Decoder<'a> {
    /// Payload bits of the timestamp buckets by their count of prefix ones k (0..=3),
    /// in byte k: a shift in a register instead of a table load on the bit position's
    /// critical path.
    payload: u32,
    r: BitReader<'a>,
    /// Samples in the chunk, from its header.
    count: u16,
    read: u16,
    t: i64,
    delta: u64,
    v: u64,
    /// Leading zeros and width of the current XOR window (`sig == 0`: none yet).
    leading: u32,
    sig: u32,
}

impl<'a> Decoder<'a> {
    fn new(chunk: &'a [u8], enc: Encoding) -> Result<Decoder<'a>> {
        if enc == Encoding::Decimal {
            return Err(Error::corrupt("chunk", "a decimal chunk given to the XOR decoder"));
        }
        let mut r = BitReader::new(chunk);
        let h = r.read_aligned(2).map_err(|_| Error::corrupt("chunk", "shorter than its 2-byte header"))?;
        let [b0, b1, b2] = enc.buckets();
        Ok(Decoder {
            payload: (b0 << 8) | (b1 << 16) | (b2 << 24),
            r,
            count: u16::from_be_bytes([h[0], h[1]]),
            read: 0,
            t: 0,
            delta: 0,
            v: 0,
            leading: 0,
            sig: 0,
        })
    }

    /// Decodes the next sample (the caller checks `read < count`).
    #[inline]
    fn next_sample(&mut self) -> Result<Sample> {
        if self.read < 2 {
            self.head_sample()?;
        } else {
            self.read_sample()?;
            if self.r.overran() {
                return Err(BitReader::eof());
            }
        }
        self.read += 1;
        Ok(Sample { t: self.t, v: f64::from_bits(self.v) })
    }

    /// Decodes one sample into each of `slots` (at most the samples left). Bits past
    /// the end read as zeros, so the overrun check runs once, after the loop: a sample
    /// decoded from them is never handed out, because the caller drops them all.
    fn fill(&mut self, slots: &mut [Sample]) -> Result<()> {
        let mut slots = slots.iter_mut();
        while self.read < 2 {
            let Some(slot) = slots.next() else { return Ok(()) };
            *slot = self.next_sample()?;
        }
        for slot in slots {
            self.read_sample()?;
            *slot = Sample { t: self.t, v: f64::from_bits(self.v) };
        }
        if self.r.overran() {
            return Err(BitReader::eof());
        }
        Ok(())
    }

    /// The first two samples: byte-aligned header fields, then the first XOR.
    #[cold]
    fn head_sample(&mut self) -> Result<()> {
        if self.read == 0 {
            self.t = varint::unzigzag(self.r.read_uvarint()?);
            self.v = self.r.read_bits(64)?;
            return Ok(());
        }
        // The delta uvarint sits at a byte boundary (see the appender).
        let mut v: u64 = 0;
        let mut done = false;
        for i in 0..10 {
            let b = self.r.read_bits(8)? as u8;
            if i == 9 && b > 1 {
                return Err(Error::corrupt("chunk", "t1 delta varint overflows"));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                done = true;
                break;
            }
        }
        if !done {
            return Err(Error::corrupt("chunk", "t1 delta varint too long"));
        }
        self.delta = v;
        self.t = (self.t as u64).wrapping_add(v) as i64;
        self.read_xor_after(self.r.peek(), 0)?;
        if self.r.overran() {
            return Err(BitReader::eof());
        }
        Ok(())
    }

    /// A sample after the first two: the timestamp, a delta-of-delta behind a unary
    /// bucket prefix of at most 4 ones, then the value. Both are usually decoded from
    /// one peek: the timestamp takes at most 24 of its 57 bits, and the value's control
    /// bits and window often fit in the rest. (A second load of the stream, dependent on
    /// where the timestamp ended, lengthened each sample's chain of dependent steps.)
    /// Unchecked reads; the caller checks for an overrun.
    #[inline(always)]
    fn read_sample(&mut self) -> Result<()> {
        let w = self.r.peek();
        let ones = (!w).leading_zeros();
        if ones < 4 {
            // Prefix and payload (at most 4 + 20 bits) lie inside the peek; `0` has an
            // empty payload, which the double shift turns into 0.
            let n = (self.payload >> ((ones & 3) * 8)) & 0xff;
            let bits = ((w << (ones + 1)) >> 1) >> (63 - n);
            // Prometheus' two's complement: above 2^(n-1) is negative.
            let full = 1u64 << n;
            self.advance(bits.wrapping_sub(if bits > full >> 1 { full } else { 0 }));
            self.read_xor_after(w, ones + 1 + n)
        } else {
            self.r.consume(4);
            let dod = self.r.take(64);
            self.advance(dod);
            self.read_xor_after(self.r.peek(), 0)
        }
    }

    #[inline(always)]
    fn advance(&mut self, dod: u64) {
        self.delta = self.delta.wrapping_add(dod);
        self.t = (self.t as u64).wrapping_add(self.delta) as i64;
    }

    /// The value: `0` same value, `10` XOR in the previous window, `11` new window
    /// (5 bits leading zeros, 6 bits width, 0 meaning 64). `w` is a peek at the reader's
    /// position whose first `used` bits (at most 24) were decoded but not consumed; the
    /// value follows them. Unchecked reads.
    #[inline(always)]
    fn read_xor_after(&mut self, w: u64, used: u32) -> Result<()> {
        let x = w << used;
        if x >> 63 == 0 {
            self.r.consume(used + 1);
            return Ok(());
        }
        let head = if (x >> 62) & 1 == 0 {
            if self.sig == 0 {
                return Err(Error::corrupt("chunk", "xor window reused before it was set"));
            }
            2
        } else {
            // The 13 bits of the new window's header lie inside the peek (24 + 13 < 57).
            let leading = ((x >> 57) & 0x1f) as u32;
            let sig = match ((x >> 51) & 0x3f) as u32 {
                0 => 64,
                n => n,
            };
            if leading + sig > 64 {
                return Err(Error::corrupt("chunk", "xor window exceeds 64 bits"));
            }
            self.leading = leading;
            self.sig = sig;
            13
        };
        let sig = self.sig;
        let bits = if used + head + sig <= PEEK_BITS {
            self.r.consume(used + head + sig);
            (x << head) >> (64 - sig)
        } else {
            self.r.consume(used + head);
            self.r.take(sig)
        };
        // The window ends `64 - leading - sig` bits above the least significant bit.
        self.v ^= bits << (64 - self.leading - sig);
        Ok(())
    }
}

/// Iterates the samples of an encoded chunk. Corrupt or truncated input yields one
/// `Err` and then ends; it never panics.
pub struct XorIter<'a> {
    dec: Option<Decoder<'a>>,
    /// The header error, reported once.
    header: Option<Error>,
}

impl<'a> XorIter<'a> {
    pub fn new(chunk: &'a [u8], enc: Encoding) -> XorIter<'a> {
        match Decoder::new(chunk, enc) {
            Ok(dec) => XorIter { dec: Some(dec), header: None },
            Err(e) => XorIter { dec: None, header: Some(e) },
        }
    }
}

impl Iterator for XorIter<'_> {
    type Item = Result<Sample>;

    fn next(&mut self) -> Option<Result<Sample>> {
        if let Some(e) = self.header.take() {
            return Some(Err(e));
        }
        let dec = self.dec.as_mut()?;
        if dec.read >= dec.count {
            return None;
        }
        let r = dec.next_sample();
        if r.is_err() {
            self.dec = None;
        }
        Some(r)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.dec.as_ref().map_or(0, |d| d.count.saturating_sub(d.read) as usize);
        (0, Some(n + usize::from(self.header.is_some())))
    }
}

/// Decodes a whole chunk, appending its samples to `out`. On an error `out` is left as
/// it was.
pub fn decode_into(chunk: &[u8], enc: Encoding, out: &mut Vec<Sample>) -> Result<()> {
    let mut dec = Decoder::new(chunk, enc)?;
    let before = out.len();
    out.resize(before + dec.count as usize, Sample { t: 0, v: 0.0 });
    let r = dec.fill(&mut out[before..]);
    if r.is_err() {
        out.truncate(before);
    }
    r
}

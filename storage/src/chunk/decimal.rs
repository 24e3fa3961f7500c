//! The decimal chunk encoding (`Encoding::Decimal`): timestamps as "interval + exceptions"
//! and values as scaled integers, for chunks whose every value is a decimal number with
//! at most [`MAX_SCALE`] digits after the point (integers, `250.125` W, `0.731524`
//! ratios: what exporters print and remote write carries).
//!
//! Each value `v` is stored as the integer `m` with `v == m / 10^k` *bit for bit* (IEEE
//! division by an exact power of ten is correctly rounded, so decoding gives back the very
//! bits that were encoded; the encoder checks every sample and refuses the chunk
//! otherwise, e.g. for NaN, ±Inf, `-0.0` or values beyond 2^53 · 10^-k). The integers go
//! as deltas (gauges) or deltas of deltas (counters), whichever is smaller; timestamps go
//! as their deltas minus the chunk's median delta. Both residual streams are zig-zagged
//! and written with one bit width per stream chosen to minimise the chunk, wider
//! residuals as exceptions. The engine writes this kind when it is smaller than the XOR
//! chunk of the same samples (`persist.rs`). Layout in `storage/FORMAT.md`.

use super::bits::{BitReader, BitWriter};
use super::MAX_SAMPLES;
use crate::error::{Error, Result};
use crate::varint;
use tessera_model::Sample;

/// Most digits after the decimal point a value may have (10^18 is exact in an f64).
pub const MAX_SCALE: u8 = 18;

/// Powers of ten up to 10^MAX_SCALE, all exactly representable as f64.
const POW10: [f64; MAX_SCALE as usize + 1] =
    [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18];

/// Integers whose magnitude is at most this are exact in an f64.
const MAX_EXACT: f64 = 9_007_199_254_740_992.0; // 2^53

/// Width byte meaning "every residual of this stream is zero; no bits are stored".
const ALL_ZERO: u8 = 0xff;

/// Flag in the scale byte: the value residuals are deltas of deltas (else deltas).
const ORDER2: u8 = 0x80;

/// The integer `m` with `m / 10^k == v` bit for bit, if there is one within 2^53.
#[inline]
fn scaled(v: f64, k: u8) -> Option<i64> {
    let p = POW10[k as usize];
    let x = (v * p).round();
    if !(x.abs() <= MAX_EXACT) {
        return None; // also NaN
    }
    // Checked on the integer the decoder will see, so `-0.0` (integer 0) is refused.
    let m = x as i64;
    ((m as f64 / p).to_bits() == v.to_bits()).then_some(m)
}

/// Encodes `samples` as a decimal chunk, or `None` when some value is not a decimal
/// number this encoding represents exactly (or there are no samples, or too many).
pub fn encode(samples: &[Sample]) -> Option<Vec<u8>> {
    let n = samples.len();
    if n == 0 || n > MAX_SAMPLES {
        return None;
    }
    // The smallest scale that fits every value: raise it while values need more digits.
    let mut k = 0u8;
    for s in samples {
        if scaled(s.v, k).is_none() {
            k = (k + 1..=MAX_SCALE).find(|&k2| scaled(s.v, k2).is_some())?;
        }
    }
    let mut ints = Vec::with_capacity(n);
    for s in samples {
        ints.push(scaled(s.v, k)?);
    }

    // Timestamps: deltas minus the median delta.
    let mut deltas: Vec<u64> = samples.windows(2).map(|w| (w[1].t as u64).wrapping_sub(w[0].t as u64)).collect();
    let interval = {
        let mut sorted = deltas.clone();
        sorted.sort_unstable_by_key(|&d| d as i64);
        sorted.get(sorted.len() / 2).copied().unwrap_or(0)
    };
    for d in &mut deltas {
        *d = varint::zigzag(d.wrapping_sub(interval) as i64);
    }
    let ts_res = deltas;

    // Values: deltas, or deltas of deltas (the first one against a delta of 0).
    let mut order1 = Vec::with_capacity(n - 1);
    let mut order2 = Vec::with_capacity(n - 1);
    let mut prev_d = 0i64;
    for w in ints.windows(2) {
        let d = w[1].wrapping_sub(w[0]);
        order1.push(varint::zigzag(d));
        order2.push(varint::zigzag(d.wrapping_sub(prev_d)));
        prev_d = d;
    }
    let (w1, c1) = best_width(&order1);
    let (w2, c2) = best_width(&order2);
    let (v_res, v_width, v_bits, order) = if c2 < c1 { (order2, w2, c2, ORDER2) } else { (order1, w1, c1, 0) };
    let (ts_width, ts_bits) = best_width(&ts_res);

    let mut out = Vec::with_capacity(24 + (ts_bits + v_bits).div_ceil(8) as usize);
    out.extend_from_slice(&(n as u16).to_be_bytes());
    varint::put_varint(&mut out, samples[0].t);
    varint::put_uvarint(&mut out, interval);
    out.push(k | order);
    varint::put_varint(&mut out, ints[0]);
    out.push(ts_width);
    out.push(v_width);
    let ts_stream = write_stream(&ts_res, ts_width);
    varint::put_uvarint(&mut out, ts_stream.len() as u64);
    out.extend_from_slice(&ts_stream);
    out.extend_from_slice(&write_stream(&v_res, v_width));
    Some(out)
}

/// Bits needed for `x` (0 for 0).
#[inline]
fn bit_len(x: u64) -> u32 {
    64 - x.leading_zeros()
}

/// The width minimising the stream's size, and that size in bits. Each residual costs
/// `1 + w` bits when it fits in `w` bits, else `1 + 6 + its length` (an exception).
fn best_width(res: &[u64]) -> (u8, u64) {
    if res.iter().all(|&r| r == 0) {
        return (ALL_ZERO, 0);
    }
    let mut hist = [0u64; 65];
    for &r in res {
        hist[bit_len(r) as usize] += 1;
    }
    let n = res.len() as u64;
    let mut best = (0u8, u64::MAX);
    for w in 0..=64u32 {
        let exceptions: u64 = (w as usize + 1..=64).map(|l| hist[l] * (7 + l as u64)).sum();
        let fitting: u64 = (0..=w as usize).map(|l| hist[l]).sum();
        let cost = fitting * (1 + u64::from(w)) + exceptions;
        debug_assert!(fitting <= n);
        if cost < best.1 {
            best = (w as u8, cost);
        }
    }
    best
}

fn write_stream(res: &[u64], width: u8) -> Vec<u8> {
    if width == ALL_ZERO {
        return Vec::new();
    }
    let w = u32::from(width);
    let mut bw = BitWriter::with_capacity(res.len() * (w as usize + 1) / 8 + 8);
    for &r in res {
        let len = bit_len(r);
        if len <= w {
            bw.write_bit(false);
            if w > 0 {
                bw.write_bits(r, w);
            }
        } else {
            bw.write_bit(true);
            // len is 1..=64; 64 is stored as 0.
            bw.write_bits(u64::from(len) & 0x3f, 6);
            bw.write_bits(r, len);
        }
    }
    bw.buf
}

/// One residual stream being read.
struct Stream<'a> {
    r: BitReader<'a>,
    /// Bit width of ordinary residuals, or `ALL_ZERO`.
    width: u8,
}

impl Stream<'_> {
    #[inline]
    fn next(&mut self) -> Result<u64> {
        if self.width == ALL_ZERO {
            return Ok(0);
        }
        if !self.r.read_bit()? {
            return if self.width == 0 { Ok(0) } else { self.r.read_bits(u32::from(self.width)) };
        }
        let len = match self.r.read_bits(6)? {
            0 => 64,
            l => l as u32,
        };
        self.r.read_bits(len)
    }
}

fn check_width(w: u8) -> Result<u8> {
    if w <= 64 || w == ALL_ZERO {
        Ok(w)
    } else {
        Err(Error::corrupt("decimal chunk", format!("bit width {w}")))
    }
}

/// Iterates the samples of a decimal chunk. Corrupt or truncated input yields one `Err`
/// and then ends; it never panics.
pub struct DecimalIter<'a> {
    state: std::result::Result<Decoder<'a>, Option<Error>>,
}

struct Decoder<'a> {
    remaining: u16,
    read: u16,
    t: i64,
    interval: u64,
    m: i64,
    d: i64,
    order2: bool,
    p: f64,
    ts: Stream<'a>,
    vs: Stream<'a>,
}

impl<'a> DecimalIter<'a> {
    pub fn new(chunk: &'a [u8]) -> DecimalIter<'a> {
        DecimalIter { state: Decoder::new(chunk).map_err(Some) }
    }
}

impl<'a> Decoder<'a> {
    fn new(chunk: &'a [u8]) -> Result<Decoder<'a>> {
        let short = || Error::corrupt("decimal chunk", "header truncated");
        let (head, rest) = chunk.split_first_chunk::<2>().ok_or_else(short)?;
        let n = u16::from_be_bytes(*head);
        if n == 0 {
            return Ok(Decoder {
                remaining: 0,
                read: 0,
                t: 0,
                interval: 0,
                m: 0,
                d: 0,
                order2: false,
                p: 1.0,
                ts: Stream { r: BitReader::new(&[]), width: ALL_ZERO },
                vs: Stream { r: BitReader::new(&[]), width: ALL_ZERO },
            });
        }
        let mut c = varint::Cursor::new(rest, "decimal chunk");
        let t0 = c.varint()?;
        let interval = c.uvarint()?;
        let scale = *c.bytes(1)?.first().ok_or_else(short)?;
        let k = scale & !ORDER2;
        if k > MAX_SCALE {
            return Err(Error::corrupt("decimal chunk", format!("scale {k} above {MAX_SCALE}")));
        }
        let m0 = c.varint()?;
        let widths = c.bytes(2)?;
        let (ts_width, v_width) = (check_width(widths[0])?, check_width(widths[1])?);
        let ts_len = usize::try_from(c.uvarint()?).map_err(|_| short())?;
        let ts_bytes = c.bytes(ts_len)?;
        let v_bytes = c.buf.get(c.pos..).unwrap_or_default();
        Ok(Decoder {
            remaining: n,
            read: 0,
            t: t0,
            interval,
            m: m0,
            d: 0,
            order2: scale & ORDER2 != 0,
            p: POW10[k as usize],
            ts: Stream { r: BitReader::new(ts_bytes), width: ts_width },
            vs: Stream { r: BitReader::new(v_bytes), width: v_width },
        })
    }

    #[inline]
    fn next_sample(&mut self) -> Result<Sample> {
        if self.read > 0 {
            let dt = self.interval.wrapping_add(varint::unzigzag(self.ts.next()?) as u64);
            self.t = (self.t as u64).wrapping_add(dt) as i64;
            let r = varint::unzigzag(self.vs.next()?);
            if self.order2 {
                self.d = self.d.wrapping_add(r);
                self.m = self.m.wrapping_add(self.d);
            } else {
                self.m = self.m.wrapping_add(r);
            }
        }
        self.read += 1;
        Ok(Sample { t: self.t, v: self.m as f64 / self.p })
    }
}

impl Iterator for DecimalIter<'_> {
    type Item = Result<Sample>;

    #[inline]
    fn next(&mut self) -> Option<Result<Sample>> {
        match &mut self.state {
            Err(e) => e.take().map(Err),
            Ok(d) if d.read >= d.remaining => None,
            Ok(d) => match d.next_sample() {
                Ok(s) => Some(Ok(s)),
                Err(e) => {
                    self.state = Err(None);
                    Some(Err(e))
                }
            },
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.state {
            Ok(d) => (0, Some(d.remaining.saturating_sub(d.read) as usize)),
            Err(_) => (0, Some(1)),
        }
    }
}

#[cfg(test)]
mod tests;

//! The decimal chunk encoding (`Encoding::Decimal`): timestamps as "interval + exceptions"
//! and values as scaled integers, for chunks whose every value is a decimal number with
//! at most [`MAX_SCALE`] digits after the point (integers, `250.125` W, `0.731524`
//! ratios: what exporters print and remote write carries).
//!
//! Each value `v` is stored as the integer `m` with `v == m / 10^k` *bit for bit* (IEEE
//! division by an exact power of ten is correctly rounded, so decoding gives back the very
//! bits that were encoded; the encoder checks every sample and refuses the chunk
//! otherwise, e.g. for NaN, ±Inf, `-0.0` or values beyond 2^53 · 10^-k). Staleness
//! markers, the one NaN every series ends with when its pod goes away, are listed by
//! position instead, their value slots repeating the value before them. The integers go
//! as deltas (gauges) or deltas of deltas (counters), whichever is smaller; timestamps go
//! as their deltas minus the chunk's median delta, or as offsets from a regular grid,
//! whichever is smaller ("interval + exceptions"). Each residual stream is zig-zagged
//! and bit-packed at one width chosen to minimise it, the high bits of the residuals that
//! do not fit listed as exceptions (patched frame of reference). The engine stores this
//! kind when it is smaller than the XOR chunk of the same samples (`chunk::compact_form`).
//! Layout in `storage/FORMAT.md`.

use super::bits::{BitReader, BitWriter};
use super::MAX_SAMPLES;
use crate::error::{Error, Result};
use crate::varint;
use tessera_model::{is_stale_nan, Sample, STALE_NAN_BITS};

/// Most digits after the decimal point a value may have (10^18 is exact in an f64).
pub const MAX_SCALE: u8 = 18;

/// Powers of ten up to 10^MAX_SCALE, all exactly representable as f64.
pub(super) const POW10: [f64; MAX_SCALE as usize + 1] =
    [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18];

/// Integers whose magnitude is at most this are exact in an f64.
const MAX_EXACT: f64 = 9_007_199_254_740_992.0; // 2^53

/// Width byte meaning "every residual of this stream is zero; nothing else is stored".
const ALL_ZERO: u8 = 0xff;

/// Bit of the modes byte: the value residuals are deltas of deltas (else deltas).
const VALUE_ORDER2: u8 = 0x01;
/// Bit of the modes byte: timestamps are offsets from a grid (else deltas minus the interval).
const TS_GRID: u8 = 0x02;
/// Bit of the modes byte: some samples are Prometheus' staleness marker, listed by
/// position; their slots in the value stream repeat the value before them.
const STALE_MARKERS: u8 = 0x04;

/// The fewest digits after the point that `v` needs (see [`scaled`]); `None` when it
/// has no decimal form within 2^53 at any scale up to [`MAX_SCALE`].
pub(super) fn smallest_scale(v: f64) -> Option<u8> {
    (0..=MAX_SCALE).find(|&k| scaled(v, k).is_some())
}

/// The integer `m` with `m / 10^k == v` bit for bit, if there is one within 2^53.
#[inline]
pub(super) fn scaled(v: f64, k: u8) -> Option<i64> {
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
    // Staleness markers (a series' last sample when its target or pod goes away) are
    // listed by position; their value slots repeat the value before them (the first
    // value's slot takes the first real value), which costs a delta of 0.
    let stale: Vec<usize> = (0..n).filter(|&i| is_stale_nan(samples[i].v)).collect();
    let first_real = samples.iter().find(|s| !is_stale_nan(s.v))?.v;
    // The smallest scale that fits every value: raise it while values need more digits.
    let mut k = 0u8;
    for s in samples.iter().filter(|s| !is_stale_nan(s.v)) {
        if scaled(s.v, k).is_none() {
            k = (k + 1..=MAX_SCALE).find(|&k2| scaled(s.v, k2).is_some())?;
        }
    }
    let mut ints = Vec::with_capacity(n);
    let mut prev = scaled(first_real, k)?;
    for s in samples {
        if !is_stale_nan(s.v) {
            prev = scaled(s.v, k)?;
        }
        ints.push(prev);
    }
    let t0 = samples[0].t;

    // Timestamps, two ways; the smaller is kept.
    // (a) deltas minus the median delta (a missed scrape costs one exception);
    let mut deltas: Vec<u64> = samples.windows(2).map(|w| (w[1].t as u64).wrapping_sub(w[0].t as u64)).collect();
    let median = {
        let mut sorted = deltas.clone();
        sorted.sort_unstable_by_key(|&d| d as i64);
        sorted.get(sorted.len() / 2).copied().unwrap_or(0)
    };
    for d in &mut deltas {
        *d = varint::zigzag(d.wrapping_sub(median) as i64);
    }
    let by_delta = Plan::new(deltas);
    // (b) offsets from the grid `t0 + offset + i · interval`, the interval being the mean
    // delta and the offset the median offset (independent jitter costs half as much).
    let span = i128::from(samples[n - 1].t) - i128::from(t0);
    let mean = if n > 1 { (span + (n as i128 - 1) / 2).div_euclid(n as i128 - 1) as i64 as u64 } else { 0 };
    let raw: Vec<u64> = samples
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, s)| (s.t as u64).wrapping_sub(t0 as u64).wrapping_sub(mean.wrapping_mul(i as u64)))
        .collect();
    let offset = {
        let mut sorted = raw.clone();
        sorted.sort_unstable_by_key(|&d| d as i64);
        sorted.get(sorted.len() / 2).copied().unwrap_or(0)
    };
    let mut by_grid = Plan::new(raw.into_iter().map(|r| varint::zigzag(r.wrapping_sub(offset) as i64)).collect());
    by_grid.bits += 8 * uvarint_len(varint::zigzag(offset as i64));
    let (ts, interval, grid) =
        if by_grid.bits < by_delta.bits { (by_grid, mean, true) } else { (by_delta, median, false) };

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
    let (o1, o2) = (Plan::new(order1), Plan::new(order2));
    let (vals, order2) = if o2.bits < o1.bits { (o2, true) } else { (o1, false) };

    let mut out = Vec::with_capacity(32 + (ts.bits + vals.bits).div_ceil(8) as usize);
    out.extend_from_slice(&(n as u16).to_be_bytes());
    varint::put_varint(&mut out, t0);
    varint::put_uvarint(&mut out, interval);
    let stale_bit = if stale.is_empty() { 0 } else { STALE_MARKERS };
    out.push(if order2 { VALUE_ORDER2 } else { 0 } | if grid { TS_GRID } else { 0 } | stale_bit);
    if grid {
        varint::put_varint(&mut out, offset as i64);
    }
    if !stale.is_empty() {
        varint::put_uvarint(&mut out, stale.len() as u64);
        let mut next = 0;
        for &i in &stale {
            varint::put_uvarint(&mut out, (i - next) as u64);
            next = i + 1;
        }
    }
    out.push(k);
    varint::put_varint(&mut out, ints[0]);
    ts.write(&mut out);
    vals.write(&mut out);
    Some(out)
}

/// Bits needed for `x` (0 for 0).
#[inline]
fn bit_len(x: u64) -> u32 {
    64 - x.leading_zeros()
}

/// Bytes of `x` as a uvarint.
#[inline]
fn uvarint_len(x: u64) -> u64 {
    u64::from(bit_len(x).max(1).div_ceil(7))
}

/// How one residual stream is written: every residual in `width` bits ("frame of
/// reference"), the high bits of the few that do not fit listed as exceptions.
struct Plan {
    res: Vec<u64>,
    width: u8,
    /// Estimated size in bits (exception positions counted as one byte each).
    bits: u64,
}

impl Plan {
    /// Picks the width that minimises the stream (the narrowest of equal costs).
    fn new(res: Vec<u64>) -> Plan {
        let mut hist = [0u64; 65];
        for &r in &res {
            hist[bit_len(r) as usize] += 1;
        }
        let n = res.len() as u64;
        if hist[0] == n {
            return Plan { res, width: ALL_ZERO, bits: 8 };
        }
        // Only the bit lengths that occur cost exceptions, and no width beyond the
        // longest can be cheaper than the longest itself (it has no exceptions).
        let mut present = [(0u32, 0u64); 64];
        let mut kinds = 0;
        for (l, &count) in hist.iter().enumerate().skip(1) {
            if count > 0 {
                present[kinds] = (l as u32, count);
                kinds += 1;
            }
        }
        let present = &present[..kinds];
        let longest = present[kinds - 1].0;
        let mut best = (0u8, u64::MAX);
        for w in 0..=longest {
            // An exception: a 1-byte position gap (usually) and its high bits as a uvarint.
            let exceptions: u64 = present
                .iter()
                .filter(|&&(l, _)| l > w)
                .map(|&(l, count)| count * 8 * (1 + u64::from((l - w).div_ceil(7))))
                .sum();
            let cost = 16 + n * u64::from(w) + exceptions;
            if cost < best.1 {
                best = (w as u8, cost);
            }
        }
        Plan { res, width: best.0, bits: best.1 }
    }

    /// `width u8 | exceptions' byte length uvarint | (gap uvarint, high uvarint)… |
    /// n × width bits, padded to a byte`.
    fn write(&self, out: &mut Vec<u8>) {
        out.push(self.width);
        if self.width == ALL_ZERO {
            return;
        }
        let w = u32::from(self.width);
        let mut exc = Vec::new();
        let mut next_pos = 0u64;
        for (i, &r) in self.res.iter().enumerate() {
            if bit_len(r) > w {
                varint::put_uvarint(&mut exc, i as u64 - next_pos);
                varint::put_uvarint(&mut exc, r >> w);
                next_pos = i as u64 + 1;
            }
        }
        varint::put_uvarint(out, exc.len() as u64);
        out.extend_from_slice(&exc);
        if w > 0 {
            let mut bw = BitWriter::with_capacity((self.res.len() * w as usize).div_ceil(8));
            let mask = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
            for &r in &self.res {
                bw.write_bits(r & mask, w);
            }
            out.extend_from_slice(&bw.buf);
        }
    }
}

/// One residual stream being read.
struct Stream<'a> {
    bits: BitReader<'a>,
    width: u8,
    /// Exceptions not yet applied: `(gap uvarint, high uvarint)` pairs.
    exc: varint::Cursor<'a>,
    /// Index of the next residual and of the next exception (`u64::MAX`: none left).
    pos: u64,
    next_exc: u64,
    next_high: u64,
}

impl<'a> Stream<'a> {
    fn zero() -> Stream<'a> {
        Stream {
            bits: BitReader::new(&[]),
            width: ALL_ZERO,
            exc: varint::Cursor::new(&[], "decimal chunk"),
            pos: 0,
            next_exc: u64::MAX,
            next_high: 0,
        }
    }

    /// Parses a stream of `count` residuals at the cursor and moves past it.
    fn parse(c: &mut varint::Cursor<'a>, count: usize) -> Result<Stream<'a>> {
        let width = c.bytes(1)?[0];
        if width == ALL_ZERO {
            return Ok(Stream::zero());
        }
        if width > 64 {
            return Err(Error::corrupt("decimal chunk", format!("bit width {width}")));
        }
        let exc_len = usize::try_from(c.uvarint()?).map_err(|_| Error::corrupt("decimal chunk", "length"))?;
        let exc = varint::Cursor::new(c.bytes(exc_len)?, "decimal chunk");
        let packed = c.bytes((count * width as usize).div_ceil(8))?;
        let mut s = Stream { bits: BitReader::new(packed), width, exc, pos: 0, next_exc: u64::MAX, next_high: 0 };
        s.load_exception(0)?;
        Ok(s)
    }

    /// Reads the next exception, positioned `from` + its gap.
    fn load_exception(&mut self, from: u64) -> Result<()> {
        if self.exc.is_empty() {
            self.next_exc = u64::MAX;
            return Ok(());
        }
        let gap = self.exc.uvarint()?;
        self.next_exc = from.checked_add(gap).ok_or_else(|| Error::corrupt("decimal chunk", "exception position"))?;
        self.next_high = self.exc.uvarint()?;
        if self.next_high == 0 || u32::from(self.width) + bit_len(self.next_high) > 64 {
            return Err(Error::corrupt("decimal chunk", "exception out of range"));
        }
        Ok(())
    }

    /// The next `out.len()` residuals: the packed bits in one tight loop, then the
    /// exceptions that fall among them. Reads are not bounds-checked one by one: `parse`
    /// took exactly `count × width` bits for the stream, so the first `count` reads stay
    /// inside it (and the decoder reads no more). An exception past the last residual
    /// is corrupt (the decoder's last block finds it).
    #[inline(always)]
    fn read_block(&mut self, out: &mut [u64], last: bool) -> Result<()> {
        match self.width {
            ALL_ZERO | 0 => out.fill(0),
            w => self.bits.unpack(u32::from(w), out),
        }
        let end = self.pos + out.len() as u64;
        while self.next_exc < end {
            // `load_exception` allows no exception on a 64-bit width, so the shift fits.
            out[(self.next_exc - self.pos) as usize] |= self.next_high << self.width;
            self.load_exception(self.next_exc + 1)?;
        }
        self.pos = end;
        if last && self.next_exc != u64::MAX {
            return Err(Error::corrupt("decimal chunk", "exception past the last sample"));
        }
        Ok(())
    }
}

/// Samples decoded per block: the residuals of a block are unpacked into two arrays
/// first, then turned into samples in a loop without branches.
const BLOCK: usize = 128;

/// A parsed chunk header and its two residual streams.
struct Decoder<'a> {
    count: u16,
    t0: i64,
    interval: u64,
    /// Grid mode: the grid's offset from `t0` (else unused).
    grid: Option<u64>,
    /// The first value, scaled.
    m: i64,
    /// Positions of staleness markers: `(count, gaps)` as stored (count 0: none).
    stale: (u64, varint::Cursor<'a>),
    order2: bool,
    p: f64,
    ts: Stream<'a>,
    vs: Stream<'a>,
}

impl<'a> Decoder<'a> {
    fn new(chunk: &'a [u8]) -> Result<Decoder<'a>> {
        let mut c = varint::Cursor::new(chunk, "decimal chunk");
        let head = c.bytes(2)?;
        let n = u16::from_be_bytes([head[0], head[1]]);
        let mut d = Decoder {
            count: n,
            t0: 0,
            interval: 0,
            grid: None,
            m: 0,
            stale: (0, varint::Cursor::new(&[], "decimal chunk")),
            order2: false,
            p: 1.0,
            ts: Stream::zero(),
            vs: Stream::zero(),
        };
        if n == 0 {
            return Ok(d);
        }
        d.t0 = c.varint()?;
        d.interval = c.uvarint()?;
        let modes = c.bytes(1)?[0];
        if modes & !(VALUE_ORDER2 | TS_GRID | STALE_MARKERS) != 0 {
            return Err(Error::corrupt("decimal chunk", format!("unknown modes {modes:#04x}")));
        }
        d.order2 = modes & VALUE_ORDER2 != 0;
        if modes & TS_GRID != 0 {
            d.grid = Some(c.varint()? as u64);
        }
        if modes & STALE_MARKERS != 0 {
            // Checked here, so applying them after the fill cannot fail or go out of range.
            let count = c.uvarint()?;
            let start = c.clone();
            let mut next = 0u64;
            for _ in 0..count {
                next = next
                    .checked_add(c.uvarint()?)
                    .filter(|&p| p < u64::from(n))
                    .ok_or_else(|| Error::corrupt("decimal chunk", "staleness marker past the last sample"))?
                    + 1;
            }
            if count == 0 || count >= u64::from(n) {
                return Err(Error::corrupt("decimal chunk", format!("{count} staleness markers in {n} samples")));
            }
            d.stale = (count, start);
        }
        let k = c.bytes(1)?[0];
        if k > MAX_SCALE {
            return Err(Error::corrupt("decimal chunk", format!("scale {k} above {MAX_SCALE}")));
        }
        d.p = POW10[k as usize];
        d.m = c.varint()?;
        let count = n as usize - 1;
        d.ts = Stream::parse(&mut c, count)?;
        d.vs = Stream::parse(&mut c, count)?;
        if !c.is_empty() {
            return Err(Error::corrupt("decimal chunk", "bytes after the value stream"));
        }
        Ok(d)
    }
}

/// Decodes a whole decimal chunk, appending its samples to `out`; on error `out` is
/// left as it was. The output is sized once from the header and filled with the
/// timestamp and value modes chosen outside the loop.
pub fn decode_into(chunk: &[u8], out: &mut Vec<Sample>) -> Result<()> {
    decode_with(chunk, out, true)
}

/// [`decode_into`] without the values: every sample's value is `0.0`, except that
/// staleness markers are markers. The value stream is not read (so damage inside it
/// goes unnoticed, and does not matter to a reader that only counts samples).
pub fn decode_timestamps_into(chunk: &[u8], out: &mut Vec<Sample>) -> Result<()> {
    decode_with(chunk, out, false)
}

fn decode_with(chunk: &[u8], out: &mut Vec<Sample>, values: bool) -> Result<()> {
    let d = Decoder::new(chunk)?;
    let stale = d.stale.clone();
    let before = out.len();
    out.resize(before + d.count as usize, Sample { t: 0, v: 0.0 });
    let slots = &mut out[before..];
    // Scale 0 (integers: counters, temperatures, utilisation) skips the division, the
    // loop's slowest instruction; dividing by 1.0 would give the same bits. Without
    // values only the timestamp mode matters.
    let r = match (d.grid.is_some(), d.order2, d.p != 1.0, values) {
        (false, _, _, false) => d.fill::<false, false, false, false>(slots),
        (true, _, _, false) => d.fill::<true, false, false, false>(slots),
        (false, false, false, true) => d.fill::<false, false, false, true>(slots),
        (false, false, true, true) => d.fill::<false, false, true, true>(slots),
        (false, true, false, true) => d.fill::<false, true, false, true>(slots),
        (false, true, true, true) => d.fill::<false, true, true, true>(slots),
        (true, false, false, true) => d.fill::<true, false, false, true>(slots),
        (true, false, true, true) => d.fill::<true, false, true, true>(slots),
        (true, true, false, true) => d.fill::<true, true, false, true>(slots),
        (true, true, true, true) => d.fill::<true, true, true, true>(slots),
    };
    match r {
        Ok(()) => {
            let (count, mut gaps) = stale;
            let mut next = 0usize;
            for _ in 0..count {
                // Validated by `Decoder::new`.
                let at = next + gaps.uvarint()? as usize;
                slots[at].v = f64::from_bits(STALE_NAN_BITS);
                next = at + 1;
            }
            Ok(())
        }
        Err(e) => {
            out.truncate(before);
            Err(e)
        }
    }
}

impl Decoder<'_> {
    /// Fills `out` (exactly the chunk's sample count) from a freshly parsed decoder;
    /// without `VALUES` only the timestamps (the value stream is not read and the
    /// values stay as `out` has them).
    #[inline(always)]
    fn fill<const GRID: bool, const ORDER2: bool, const SCALED: bool, const VALUES: bool>(
        mut self,
        out: &mut [Sample],
    ) -> Result<()> {
        let Some((first, rest)) = out.split_first_mut() else { return Ok(()) };
        let p = self.p;
        let value = |m: i64| if SCALED { m as f64 / p } else { m as f64 };
        first.t = self.t0;
        if VALUES {
            first.v = value(self.m);
        }
        let (t0, interval, off) = (self.t0 as u64, self.interval, self.grid.unwrap_or(0));
        let (mut t, mut m, mut d) = (t0, self.m, 0i64);
        let (mut rts, mut rvs) = ([0u64; BLOCK], [0u64; BLOCK]);
        let blocks = rest.len().div_ceil(BLOCK);
        for (b, block) in rest.chunks_mut(BLOCK).enumerate() {
            let n = block.len();
            let last = b + 1 == blocks;
            self.ts.read_block(&mut rts[..n], last)?;
            if VALUES {
                self.vs.read_block(&mut rvs[..n], last)?;
            }
            let base = (b * BLOCK) as u64 + 1;
            for (j, ((slot, &zt), &zv)) in block.iter_mut().zip(&rts[..n]).zip(&rvs[..n]).enumerate() {
                let rt = varint::unzigzag(zt) as u64;
                t = if GRID {
                    t0.wrapping_add(off).wrapping_add(interval.wrapping_mul(base + j as u64)).wrapping_add(rt)
                } else {
                    t.wrapping_add(interval).wrapping_add(rt)
                };
                slot.t = t as i64;
                if VALUES {
                    let rv = varint::unzigzag(zv);
                    if ORDER2 {
                        d = d.wrapping_add(rv);
                        m = m.wrapping_add(d);
                    } else {
                        m = m.wrapping_add(rv);
                    }
                    slot.v = value(m);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

//! The head's open chunk ([`OpenAppender`]): what a series appends to until its chunk is
//! cut. It is never stored: at cut time the head seals it into a stored form (decimal or
//! XOR, whichever is smaller, `chunk::sealed_form`), and a cluster read that ships raw
//! chunks re-encodes it as XOR first.
//!
//! Every read of a live series decodes its open chunk whole, however short the range: a
//! 15-minute dashboard query over the compare dataset spent 20 % of its CPU decoding open
//! XOR chunks (BENCHMARKS.md, "Probes of where `dcgm_all_rate`'s time goes"). So while
//! every value so far has an exact decimal form (as [`decimal`] defines it: `m / 10^k`
//! bit for bit), the open chunk is a byte stream that decodes without bit arithmetic
//! (`Encoding::OpenDecimal`):
//!
//! ```text
//! count u16 BE | scale k u8 | t0 varint (zig-zag) | code0 uvarint | (step uvarint | code uvarint?)*
//! ```
//!
//! `code` is 0 for Prometheus' staleness marker (whose slot keeps the previous integer)
//! and otherwise the zig-zagged change of the scaled integer `m`, plus one (`m` starts at
//! 0). `step` is the zig-zagged change of the timestamp delta (`dod`; the first delta's
//! "change" is the delta itself) shifted left by one, its low bit set when the value did
//! not change (code 1), which then is not written: a sample of an unchanged value on a
//! scrape's jitter (|dod| < 32 ms) takes one byte. Series that hold a value for hours
//! are common (kube-state-metrics, `up`, clock and limit gauges, idle counters); with a
//! byte each for `dod` and `code` they took 2.1 bytes a sample in the open chunk against
//! XOR-jitter's 1.3 on the benchmark fleet's data, now 1.1 (BENCHMARKS.md, "The open
//! chunk's unchanged values in one byte"); XOR-jitter still goes below a byte where the
//! jitter is small and regular, which a byte stream cannot.
//!
//! A value without a decimal form at the chunk's scale raises the scale (the chunk is
//! rebuilt) or, failing that, turns the chunk into an XOR chunk for good; so does a `dod`
//! of 2^62 ms or more, which the shifted `step` cannot hold.

use super::decimal::{scaled, smallest_scale, POW10};
use super::xor::{Encoding, XorAppender, MAX_SAMPLES};
use crate::error::{Error, Result};
use crate::varint::{self, unzigzag, zigzag};
use tessera_model::{is_stale_nan, Sample, STALE_NAN_BITS};

/// Bytes before the first sample: the count and the scale.
const HEADER: usize = 3;

/// An open chunk: a decimal byte stream while every value fits one, else XOR.
#[derive(Debug, Clone)]
pub struct OpenAppender {
    mode: Mode,
}

#[derive(Debug, Clone)]
enum Mode {
    Decimal(DecimalStream),
    Xor(XorAppender),
}

/// The byte form; its count and scale live in its header (`buf[..HEADER]`) alone.
#[derive(Debug, Clone)]
struct DecimalStream {
    buf: Vec<u8>,
    /// Last timestamp, last delta, last scaled integer.
    t: i64,
    delta: i64,
    m: i64,
}

impl Default for OpenAppender {
    fn default() -> Self {
        Self::new()
    }
}

impl OpenAppender {
    pub fn new() -> OpenAppender {
        OpenAppender { mode: Mode::Decimal(DecimalStream::new(0)) }
    }

    /// An open chunk holding `samples`, to append more to (the head's rewrite after an
    /// out-of-order sample; benchmarks).
    pub fn from_samples(samples: &[Sample]) -> Result<OpenAppender> {
        let mut a = OpenAppender::new();
        for s in samples {
            a.append(s.t, s.v)?;
        }
        Ok(a)
    }

    /// The chunk's encoding: `OpenDecimal`, or the XOR one it turned into.
    pub fn encoding(&self) -> Encoding {
        match &self.mode {
            Mode::Decimal(_) => Encoding::OpenDecimal,
            Mode::Xor(x) => x.encoding(),
        }
    }

    pub fn len(&self) -> usize {
        match &self.mode {
            Mode::Decimal(d) => usize::from(d.count()),
            Mode::Xor(x) => x.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Last appended timestamp (meaningless when empty).
    pub fn last_t(&self) -> i64 {
        match &self.mode {
            Mode::Decimal(d) => d.t,
            Mode::Xor(x) => x.last_t(),
        }
    }

    /// The chunk bytes so far (a complete chunk of [`OpenAppender::encoding`]).
    pub fn bytes(&self) -> &[u8] {
        match &self.mode {
            Mode::Decimal(d) => &d.buf,
            Mode::Xor(x) => x.bytes(),
        }
    }

    pub fn into_bytes(self) -> Vec<u8> {
        match self.mode {
            Mode::Decimal(d) => d.buf,
            Mode::Xor(x) => x.into_bytes(),
        }
    }

    /// Heap bytes held, for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        match &self.mode {
            Mode::Decimal(d) => d.buf.capacity(),
            Mode::Xor(x) => x.heap_bytes(),
        }
    }

    /// Appends one sample. Fails only when the chunk already holds `MAX_SAMPLES`.
    pub fn append(&mut self, t: i64, v: f64) -> Result<()> {
        if self.len() >= MAX_SAMPLES {
            return Err(Error::InvalidInput(format!("chunk is full ({MAX_SAMPLES} samples)")));
        }
        let d = match &mut self.mode {
            Mode::Xor(x) => return x.append(t, v),
            Mode::Decimal(d) => d,
        };
        if d.push(t, v) {
            return Ok(());
        }
        // No decimal form at this scale (a chunk starts at scale 0): rebuild at the
        // smallest scale that fits every value, or go over to XOR.
        let mut samples = Vec::with_capacity(usize::from(d.count()) + 1);
        decode_into(&d.buf, &mut samples)?;
        samples.push(Sample { t, v });
        let scale =
            samples.iter().filter(|s| !is_stale_nan(s.v)).try_fold(0u8, |k, s| smallest_scale(s.v).map(|k2| k.max(k2)));
        if let Some(k) = scale {
            let mut rebuilt = DecimalStream::new(k);
            if samples.iter().all(|s| rebuilt.push(s.t, s.v)) {
                self.mode = Mode::Decimal(rebuilt);
                return Ok(());
            }
        }
        self.mode = Mode::Xor(XorAppender::encode_appender(Encoding::DEFAULT, &samples)?);
        Ok(())
    }
}

impl DecimalStream {
    fn new(scale: u8) -> DecimalStream {
        let mut buf = Vec::with_capacity(32);
        buf.extend_from_slice(&[0, 0, scale]);
        DecimalStream { buf, t: 0, delta: 0, m: 0 }
    }

    fn count(&self) -> u16 {
        u16::from_be_bytes([self.buf[0], self.buf[1]])
    }

    /// Appends a sample; false (and nothing appended) when `v` has no decimal form at
    /// this scale or the timestamps' `dod` is too large for a `step`.
    fn push(&mut self, t: i64, v: f64) -> bool {
        let (m, code) = if is_stale_nan(v) {
            (self.m, 0)
        } else {
            let Some(m) = scaled(v, self.buf[2]) else { return false };
            (m, zigzag(m.wrapping_sub(self.m)).wrapping_add(1))
        };
        let count = self.count();
        if count == 0 {
            varint::put_varint(&mut self.buf, t);
            varint::put_uvarint(&mut self.buf, code);
        } else {
            let delta = t.wrapping_sub(self.t);
            let dod = zigzag(delta.wrapping_sub(self.delta));
            if dod >> 63 != 0 {
                return false;
            }
            let unchanged = code == 1;
            varint::put_uvarint(&mut self.buf, dod << 1 | u64::from(unchanged));
            if !unchanged {
                varint::put_uvarint(&mut self.buf, code);
            }
            self.delta = delta;
        }
        (self.t, self.m) = (t, m);
        self.buf[..2].copy_from_slice(&(count + 1).to_be_bytes());
        true
    }
}

/// Decodes an `OpenDecimal` chunk, appending its samples to `out`; on an error `out` is
/// left as it was.
pub fn decode_into(chunk: &[u8], out: &mut Vec<Sample>) -> Result<()> {
    let corrupt = |what: &str| Error::corrupt("open chunk", what.to_owned());
    if chunk.len() < HEADER {
        return Err(corrupt("shorter than its header"));
    }
    let count = usize::from(u16::from_be_bytes([chunk[0], chunk[1]]));
    let scale = *POW10.get(usize::from(chunk[2])).ok_or_else(|| corrupt("scale out of range"))?;
    let before = out.len();
    out.reserve(count);
    let mut r = Bytes { b: chunk, at: HEADER };
    let (mut t, mut delta, mut m) = (0i64, 0i64, 0i64);
    for i in 0..count {
        let Some(x) = r.uvarint() else {
            out.truncate(before);
            return Err(corrupt("truncated"));
        };
        let code = if i == 0 {
            t = unzigzag(x);
            r.uvarint()
        } else {
            delta = delta.wrapping_add(unzigzag(x >> 1));
            t = t.wrapping_add(delta);
            if x & 1 == 1 {
                Some(1)
            } else {
                r.uvarint()
            }
        };
        let Some(code) = code else {
            out.truncate(before);
            return Err(corrupt("truncated"));
        };
        let v = if code == 0 {
            f64::from_bits(STALE_NAN_BITS)
        } else {
            m = m.wrapping_add(unzigzag(code - 1));
            m as f64 / scale
        };
        out.push(Sample { t, v });
    }
    if r.at != chunk.len() {
        out.truncate(before);
        return Err(corrupt("trailing bytes"));
    }
    Ok(())
}

/// A reader of uvarints, one byte at a time on the common path (lengths below 128).
struct Bytes<'a> {
    b: &'a [u8],
    at: usize,
}

impl Bytes<'_> {
    #[inline(always)]
    fn uvarint(&mut self) -> Option<u64> {
        let first = *self.b.get(self.at)?;
        if first < 0x80 {
            self.at += 1;
            return Some(u64::from(first));
        }
        let (v, n) = varint::read_uvarint(&self.b[self.at..]).ok()?;
        self.at += n;
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn roundtrip(samples: &[Sample]) -> (Encoding, Vec<Sample>) {
        let a = OpenAppender::from_samples(samples).expect("append");
        assert_eq!(a.len(), samples.len());
        let mut out = Vec::new();
        super::super::decode_into(a.bytes(), a.encoding(), &mut out).expect("decodes");
        (a.encoding(), out)
    }

    fn same(a: &[Sample], b: &[Sample]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.t == y.t && x.v.to_bits() == y.v.to_bits())
    }

    #[test]
    fn gauges_counters_and_staleness_markers_stay_decimal_and_come_back_bit_for_bit() {
        let stale = f64::from_bits(STALE_NAN_BITS);
        let samples: Vec<Sample> = [0.731524, 0.5, 12.0, stale, 13.25, 1e9 + 0.5, 0.0, 7.0]
            .iter()
            .enumerate()
            .map(|(i, &v)| Sample { t: 1_700_000_000_000 + i as i64 * 15_000 + (i as i64 % 3) * 4, v })
            .collect();
        let (enc, out) = roundtrip(&samples);
        assert_eq!(enc, Encoding::OpenDecimal);
        assert!(same(&samples, &out), "{out:?}");
    }

    #[test]
    fn a_value_without_a_decimal_form_turns_the_chunk_into_xor() {
        // 0.1 + 0.2 is 0.30000000000000004: 17 digits, beyond 2^53 as an integer.
        let samples: Vec<Sample> =
            [1.0, 2.0, 0.1 + 0.2, 4.0].iter().enumerate().map(|(i, &v)| Sample { t: i as i64, v }).collect();
        let (enc, out) = roundtrip(&samples);
        assert_eq!(enc, Encoding::DEFAULT);
        assert!(same(&samples, &out));
        let (enc, out) = roundtrip(&[Sample { t: 5, v: f64::INFINITY }, Sample { t: 6, v: 1.0 }]);
        assert_eq!(enc, Encoding::DEFAULT);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn an_unchanged_value_on_a_jittered_scrape_takes_one_byte() {
        let mut a = OpenAppender::new();
        for i in 0..120i64 {
            let jitter = (i * 7_919) % 15 - 7;
            a.append(1_700_000_000_000 + i * 15_000 + jitter, 1.0).expect("append");
        }
        assert_eq!(a.encoding(), Encoding::OpenDecimal);
        // Header, the first sample (t0 6 bytes, code 1), the first step (the delta), then
        // one byte each.
        assert!(a.bytes().len() <= HEADER + 7 + 3 + 118, "{} bytes", a.bytes().len());
        let mut out = Vec::new();
        decode_into(a.bytes(), &mut out).expect("decodes");
        assert!(out.iter().all(|s| s.v == 1.0) && out.len() == 120);
    }

    #[test]
    fn a_timestamp_jump_beyond_a_step_turns_the_chunk_into_xor() {
        let samples = [Sample { t: i64::MIN + 1, v: 1.0 }, Sample { t: -1, v: 1.0 }, Sample { t: i64::MAX, v: 2.0 }];
        let (enc, out) = roundtrip(&samples);
        assert_eq!(enc, Encoding::DEFAULT);
        assert!(same(&samples, &out), "{out:?}");
    }

    #[test]
    fn truncated_or_padded_bytes_are_errors_that_leave_the_output_alone() {
        let mut a = OpenAppender::new();
        // Values changing and held (a flagged step), so a cut lands in both kinds.
        for i in 0..8 {
            a.append(i * 15_000, (i / 2) as f64 * 1.5).expect("append");
        }
        let bytes = a.bytes().to_vec();
        let mut out = vec![Sample { t: 1, v: 1.0 }];
        for cut in 0..bytes.len() {
            assert!(decode_into(&bytes[..cut], &mut out).is_err(), "cut at {cut}");
            assert_eq!(out.len(), 1);
        }
        let mut padded = bytes.clone();
        padded.push(0);
        assert!(decode_into(&padded, &mut out).is_err());
        assert_eq!(out.len(), 1);
    }

    proptest! {
        /// Any floats (repeated ones, decimal ones, fractions of growing precision,
        /// staleness markers, NaNs, infinities, -0) on any increasing timestamps (scrapes'
        /// jitter, gaps, jumps of up to 2^50 ms) decode to the same bits.
        #[test]
        fn every_sample_comes_back_bit_for_bit(
            values in proptest::collection::vec(prop_oneof![
                4 => Just(42.0),
                6 => (-1_000_000i64..1_000_000).prop_map(|m| m as f64),
                3 => (-1_000_000i64..1_000_000, 0u32..7).prop_map(|(m, k)| m as f64 / 10f64.powi(k as i32)),
                1 => Just(f64::from_bits(STALE_NAN_BITS)),
                1 => any::<f64>(),
            ], 1..300),
            steps in proptest::collection::vec(prop_oneof![
                8 => 14_980i64..15_020,
                4 => 1i64..100_000,
                1 => 1i64..(1 << 50),
            ], 300),
        ) {
            let mut t = -5_000i64;
            let samples: Vec<Sample> = values.iter().zip(&steps).map(|(&v, &d)| { t += d; Sample { t, v } }).collect();
            let (_, out) = roundtrip(&samples);
            prop_assert!(same(&samples, &out));
        }
    }
}

use super::*;
use crate::chunk::{compact_form, decode, Encoding, XorAppender};
use proptest::prelude::*;

fn roundtrip(samples: &[Sample]) -> Vec<u8> {
    let bytes = encode(samples).expect("decimal encoding applies");
    let back = decode(&bytes, Encoding::Decimal).expect("decode");
    assert_bit_exact(samples, &back);
    bytes
}

fn assert_bit_exact(a: &[Sample], b: &[Sample]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.t, y.t);
        assert_eq!(x.v.to_bits(), y.v.to_bits(), "value bits differ at t={}: {} vs {}", x.t, x.v, y.v);
    }
}

/// `(modes, scale, offset of the scale byte)` from a chunk's header.
fn header(bytes: &[u8]) -> (u8, u8, usize) {
    let mut c = varint::Cursor::new(bytes, "test");
    c.bytes(2).expect("count");
    c.varint().expect("t0");
    c.uvarint().expect("interval");
    let modes = c.bytes(1).expect("modes")[0];
    if modes & TS_GRID != 0 {
        c.varint().expect("grid offset");
    }
    if modes & STALE_MARKERS != 0 {
        for _ in 0..c.uvarint().expect("stale count") {
            c.uvarint().expect("stale gap");
        }
    }
    let at = c.pos;
    (modes, c.bytes(1).expect("scale")[0], at)
}

fn xor_len(samples: &[Sample]) -> usize {
    XorAppender::encode(Encoding::XorJitter, samples).expect("xor").len()
}

/// 15 s scrapes with uniform, independent ±5 ms of jitter, like the benchmark's generator.
fn jittered(n: usize, f: impl Fn(usize) -> f64) -> Vec<Sample> {
    (0..n)
        .map(|i| {
            // splitmix64's finaliser as a hash of i.
            let mut h = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            h ^= h >> 31;
            Sample::new(1_700_000_000_000 + i as i64 * 15_000 + (h % 11) as i64 - 5, f(i))
        })
        .collect()
}

#[test]
fn worked_example_is_frozen() {
    // count 3 | t0 1000 (zig-zag varint d0 0f) | interval = median delta 15003 (9b 75) |
    // modes 00 (timestamp deltas, value deltas) | scale 0 | m0 1 (zig-zag 02) |
    // timestamp stream: width 3, no exceptions (00), residuals -3 (zig-zag 5) and 0 as
    // `101 000` = a0 | value stream: ff (every residual 0).
    let samples = [Sample::new(1000, 1.0), Sample::new(16000, 1.0), Sample::new(31003, 1.0)];
    let frozen: &[u8] = &[0x00, 0x03, 0xd0, 0x0f, 0x9b, 0x75, 0x00, 0x00, 0x02, 0x03, 0x00, 0xa0, 0xff];
    assert_eq!(roundtrip(&samples), frozen);
    assert!(frozen.len() < xor_len(&samples));

    // The same with the last value a staleness marker: modes 04 | 1 marker (01) at gap 2
    // (02), i.e. position 2 | the rest as above, its value slot repeating 1.0.
    let stale = f64::from_bits(tessera_model::STALE_NAN_BITS);
    let samples = [Sample::new(1000, 1.0), Sample::new(16000, 1.0), Sample::new(31003, stale)];
    let frozen: &[u8] = &[0x00, 0x03, 0xd0, 0x0f, 0x9b, 0x75, 0x04, 0x01, 0x02, 0x00, 0x02, 0x03, 0x00, 0xa0, 0xff];
    assert_eq!(roundtrip(&samples), frozen);
    assert!(frozen.len() < xor_len(&samples));
}

#[test]
fn integer_gauges_are_much_smaller_than_xor() {
    let util = jittered(120, |i| ((i * 37) % 100) as f64);
    let temp = jittered(120, |i| 60.0 + (i / 30) as f64);
    for s in [&util, &temp] {
        let d = roundtrip(s).len();
        assert!(d < xor_len(s), "decimal {d} bytes, xor {}", xor_len(s));
    }
    // A slowly moving integer gauge: deltas are mostly 0, timestamps cost ~5 bits.
    assert!(roundtrip(&temp).len() < 120, "{} bytes", roundtrip(&temp).len());
}

#[test]
fn fixed_decimal_values_use_the_smallest_scale() {
    let power = jittered(120, |i| ((250_000 + (i * 7_919) % 3_000) as f64) / 1000.0);
    let bytes = roundtrip(&power);
    assert_eq!(header(&bytes).1, 3);
    assert!(bytes.len() * 2 < xor_len(&power), "decimal {} vs xor {}", bytes.len(), xor_len(&power));

    let ratio = jittered(120, |i| ((500_000 + (i * 104_729) % 400_000) as f64) / 1e6);
    roundtrip(&ratio);
}

#[test]
fn counters_pick_delta_of_delta() {
    // A counter growing by a near-constant amount: second differences are small.
    let energy = jittered(120, |i| 1e9 + (i as f64) * 4_500_000.0 + ((i * i * 7_919) % 1_000) as f64);
    let bytes = roundtrip(&energy);
    let (modes, k, _) = header(&bytes);
    assert_eq!((modes & VALUE_ORDER2, k), (VALUE_ORDER2, 0), "scale 0, delta-of-delta order");
    assert!(bytes.len() < xor_len(&energy));
}

#[test]
fn regular_timestamps_and_constant_values_cost_no_bits_per_sample() {
    let s: Vec<Sample> = (0..120).map(|i| Sample::new(i * 30_000, 1.0)).collect();
    let bytes = roundtrip(&s);
    assert!(bytes.len() <= 12, "{} bytes: {bytes:02x?}", bytes.len());
}

#[test]
fn values_without_an_exact_decimal_form_are_refused() {
    // Other NaN payloads than the staleness marker, too.
    let other_nan = f64::from_bits(tessera_model::STALE_NAN_BITS + 1);
    for bad in
        [other_nan, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 1e300, f64::from_bits(1), 2f64.powi(60) + 2048.0]
    {
        let s = [Sample::new(0, 1.0), Sample::new(15_000, bad)];
        assert!(encode(&s).is_none(), "{bad:e} ({:#x}) was encoded", bad.to_bits());
    }
    assert!(encode(&[]).is_none());
    // 0.1 + 0.2 is not the double nearest to any decimal with <= 18 digits.
    assert!(encode(&[Sample::new(0, 0.1 + 0.2)]).is_none());
}

/// A series' last sample is its staleness marker when its pod goes away: listed by
/// position, not a reason to store the chunk as XOR. A chunk of markers only has no
/// value to repeat and is refused.
#[test]
fn staleness_markers_are_listed_by_position() {
    let stale = f64::from_bits(tessera_model::STALE_NAN_BITS);
    let mut s = jittered(120, |i| (i % 7) as f64);
    s[119].v = stale;
    let with = roundtrip(&s);
    assert_eq!(header(&with).0 & STALE_MARKERS, STALE_MARKERS);
    let without = encode(&s[..119]).expect("encodes");
    // The list (2 bytes), one more timestamp and a repeated value (a few bits each).
    assert!(with.len() <= without.len() + 5, "{} bytes against {}", with.len(), without.len());
    // Anywhere, several, the first one included.
    for at in [vec![0], vec![0, 1, 2], vec![5, 60, 118, 119], vec![1]] {
        let mut s = jittered(120, |i| 1.5 + i as f64);
        for &i in &at {
            s[i].v = stale;
        }
        roundtrip(&s);
    }
    assert!(encode(&[Sample::new(0, stale)]).is_none());
    assert!(encode(&[Sample::new(0, stale), Sample::new(1, stale)]).is_none());
    roundtrip(&[Sample::new(0, stale), Sample::new(1, 2.0)]);
}

#[test]
fn bad_staleness_lists_are_corrupt() {
    let stale = f64::from_bits(tessera_model::STALE_NAN_BITS);
    let s = [Sample::new(0, 1.0), Sample::new(15_000, 2.0), Sample::new(30_000, stale)];
    let good = encode(&s).expect("encodes");
    let at = header(&good).2; // the scale byte; the list (count 1, gap 2) is just before it
    assert_eq!(&good[at - 2..at], &[1, 2]);
    for (count, gap, why) in [(0u8, 2u8, "no markers"), (1, 3, "past the end"), (3, 0, "every sample")] {
        let mut bad = good.clone();
        bad[at - 2] = count;
        bad[at - 1] = gap;
        let mut out = vec![Sample::new(-1, 0.0)];
        let err = decode_into(&bad, &mut out);
        assert!(err.is_err(), "{why}: {bad:02x?}");
        assert_eq!(out.len(), 1, "{why}: output left as it was");
    }
}

#[test]
fn extreme_timestamps_and_integers_round_trip() {
    let t = [i64::MIN, i64::MAX, 0, -1, i64::MIN + 1, i64::MAX];
    let v = [1.0, -2.5, 0.0, 1e-9, -123.456, 5.0];
    let s: Vec<Sample> = t.iter().zip(v).map(|(&t, v)| Sample::new(t, v)).collect();
    roundtrip(&s);
    roundtrip(&s[..1]);
    let big = [9_007_199_254_740_992.0, -9_007_199_254_740_992.0, 0.0, 1.0];
    roundtrip(&big.iter().enumerate().map(|(i, &v)| Sample::new(i as i64, v)).collect::<Vec<_>>());
    let tiny = [1e-18, -1e-18, 0.0, 123_456_789e-18];
    roundtrip(&tiny.iter().enumerate().map(|(i, &v)| Sample::new(i as i64, v)).collect::<Vec<_>>());
}

#[test]
fn compact_form_keeps_xor_when_decimal_is_not_smaller_or_not_possible() {
    let mut scratch = Vec::new();
    let nan = jittered(10, |i| if i == 9 { f64::NAN } else { i as f64 });
    let x = XorAppender::encode(Encoding::XorJitter, &nan).expect("xor");
    assert!(compact_form(&x, Encoding::XorJitter, &mut scratch).is_none());
    let util = jittered(120, |i| ((i * 37) % 100) as f64);
    let x = XorAppender::encode(Encoding::XorJitter, &util).expect("xor");
    let d = compact_form(&x, Encoding::XorJitter, &mut scratch).expect("smaller");
    assert!(d.len() < x.len());
    assert_bit_exact(&util, &decode(&d, Encoding::Decimal).expect("decode"));
    assert!(compact_form(&d, Encoding::Decimal, &mut scratch).is_none(), "already decimal");
}

#[test]
fn truncated_chunk_is_an_error_not_a_panic() {
    let kinds: [Vec<Sample>; 3] = [
        jittered(120, |i| ((i * 37) % 100) as f64),
        (0..120).map(|i| Sample::new(i * 30_000, 1.0)).collect(),
        jittered(120, |i| ((500_000 + (i * 104_729) % 400_000) as f64) / 1e6),
    ];
    for s in &kinds {
        let bytes = roundtrip(s);
        for cut in 0..bytes.len() {
            let r = decode(&bytes[..cut], Encoding::Decimal);
            assert!(matches!(r, Err(crate::Error::Corrupt { .. })), "cut at {cut} decoded: {r:?}");
        }
        // Bytes after the value stream are not part of any sample: corrupt, not ignored.
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(decode(&longer, Encoding::Decimal), Err(crate::Error::Corrupt { .. })));
        // Nor is a decimal chunk an XOR chunk.
        assert!(crate::chunk::XorIter::new(&bytes, Encoding::Decimal).next().is_some_and(|r| r.is_err()));
    }
}

#[test]
fn corrupt_headers_are_errors() {
    let bytes = roundtrip(&jittered(20, |i| i as f64 / 4.0));
    let (_, k, at) = header(&bytes);
    assert_eq!(k, 2);
    let mut bad_scale = bytes.clone();
    bad_scale[at] = 19;
    assert!(decode(&bad_scale, Encoding::Decimal).is_err());
    let mut bad_modes = bytes.clone();
    // count (2) + t0 varint (6) + interval varint (2): the modes byte.
    bad_modes[10] |= 0x40;
    assert!(decode(&bad_modes, Encoding::Decimal).is_err());
    let mut bad_width = bytes.clone();
    // The scale byte, m0 (1 byte), then the timestamp stream's width.
    bad_width[at + 2] = 65;
    assert!(decode(&bad_width, Encoding::Decimal).is_err());
}

#[test]
fn jittered_timestamps_use_the_grid_and_gaps_use_deltas() {
    let s = jittered(120, |i| i as f64);
    assert_eq!(header(&roundtrip(&s)).0 & TS_GRID, TS_GRID);
    // Missed scrapes every 10 samples: the grid would shift, deltas take one exception each.
    let gappy: Vec<Sample> = (0..120).map(|i| Sample::new(i * 15_000 + (i / 10) * 15_000, 1.0)).collect();
    assert_eq!(header(&roundtrip(&gappy)).0 & TS_GRID, 0);
}

#[test]
fn rare_changes_are_exceptions_over_a_zero_width() {
    // A gauge that changes twice in 120 samples: width 0, two exceptions.
    let s: Vec<Sample> =
        (0..120).map(|i| Sample::new(i * 15_000, if (40..80).contains(&i) { 7.0 } else { 3.0 })).collect();
    let bytes = roundtrip(&s);
    assert!(bytes.len() <= 20, "{} bytes: {bytes:02x?}", bytes.len());
}

/// Decimal-looking values: integer mantissas below 2^50 with one scale for the chunk.
fn decimal_values(len: std::ops::Range<usize>) -> impl Strategy<Value = Vec<f64>> {
    (0u8..=9).prop_flat_map(move |k| {
        proptest::collection::vec(
            (-(1i64 << 50)..(1i64 << 50)).prop_map(move |m| m as f64 / POW10[k as usize]),
            len.clone(),
        )
    })
}

/// One decimal-looking value (any scale up to 9).
fn decimal_value() -> impl Strategy<Value = f64> {
    (-(1i64 << 40)..(1i64 << 40), 0u8..=9).prop_map(|(m, k)| m as f64 / POW10[k as usize])
}

/// Decoding `bytes` returns: samples, or an error that says the bytes are corrupt.
fn decodes_or_is_corrupt(bytes: &[u8]) -> std::result::Result<(), TestCaseError> {
    for r in [decode(bytes, Encoding::Decimal).map(|_| ()), decode_timestamps_into(bytes, &mut Vec::new())] {
        match r {
            Ok(()) | Err(crate::Error::Corrupt { .. }) => {}
            Err(e) => return Err(TestCaseError::fail(format!("not a corruption error: {e}"))),
        }
    }
    Ok(())
}

/// The width choice by brute force over all 65 widths: what `Plan::new` must pick.
fn cheapest_width(res: &[u64]) -> (u8, u64) {
    if res.iter().all(|&r| r == 0) {
        return (ALL_ZERO, 8);
    }
    let mut best = (0u8, u64::MAX);
    for w in 0..=64u32 {
        let exceptions: u64 =
            res.iter().filter(|&&r| bit_len(r) > w).map(|&r| 8 * (1 + u64::from((bit_len(r) - w).div_ceil(7)))).sum();
        let cost = 16 + res.len() as u64 * u64::from(w) + exceptions;
        if cost < best.1 {
            best = (w as u8, cost);
        }
    }
    best
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_width_is_the_cheapest_of_all_widths(
        res in proptest::collection::vec(prop_oneof![Just(0u64), 0u64..16, 0u64..5000, any::<u64>()], 1..200),
        shift in 0u32..64,
    ) {
        for res in [res.clone(), res.iter().map(|r| r >> shift).collect()] {
            let plan = Plan::new(res.clone());
            prop_assert_eq!((plan.width, plan.bits), cheapest_width(&res));
        }
    }

    #[test]
    fn decimal_values_always_encode_and_round_trip(vals in decimal_values(1..300), ts in any::<[i64; 4]>()) {
        let samples: Vec<Sample> = vals.iter().enumerate().map(|(i, &v)| Sample::new(ts[i % 4], v)).collect();
        let bytes = encode(&samples);
        prop_assert!(bytes.is_some());
        let bytes = bytes.unwrap_or_default();
        let back = decode(&bytes, Encoding::Decimal).expect("decode");
        prop_assert_eq!(back.len(), samples.len());
        for (x, y) in samples.iter().zip(&back) {
            prop_assert_eq!(x.t, y.t);
            prop_assert_eq!(x.v.to_bits(), y.v.to_bits());
        }
    }

    #[test]
    fn decimal_values_with_staleness_markers_round_trip(
        vals in decimal_values(1..300),
        marks in proptest::collection::vec(any::<bool>(), 300),
        ts in any::<[i64; 4]>(),
    ) {
        let stale = f64::from_bits(tessera_model::STALE_NAN_BITS);
        let samples: Vec<Sample> = vals
            .iter()
            .enumerate()
            .map(|(i, &v)| Sample::new(ts[i % 4], if marks[i] { stale } else { v }))
            .collect();
        let bytes = encode(&samples);
        prop_assert_eq!(bytes.is_some(), samples.iter().any(|s| !tessera_model::is_stale_nan(s.v)));
        if let Some(bytes) = bytes {
            let back = decode(&bytes, Encoding::Decimal).expect("decode");
            prop_assert_eq!(back.len(), samples.len());
            for (x, y) in samples.iter().zip(&back) {
                prop_assert_eq!(x.t, y.t);
                prop_assert_eq!(x.v.to_bits(), y.v.to_bits());
            }
        }
    }

    #[test]
    fn any_f64_bits_round_trip_or_are_refused(raw in proptest::collection::vec((any::<i64>(), any::<u64>()), 1..300)) {
        let samples: Vec<Sample> = raw.iter().map(|&(t, v)| Sample::new(t, f64::from_bits(v))).collect();
        if let Some(bytes) = encode(&samples) {
            let back = decode(&bytes, Encoding::Decimal).expect("decode");
            for (x, y) in samples.iter().zip(&back) {
                prop_assert_eq!(x.t, y.t);
                prop_assert_eq!(x.v.to_bits(), y.v.to_bits());
            }
        }
        // Whatever compact_form stores decodes to the same bits.
        let xor = XorAppender::encode(Encoding::XorJitter, &samples).expect("xor");
        let mut scratch = Vec::new();
        if let Some(d) = compact_form(&xor, Encoding::XorJitter, &mut scratch) {
            prop_assert!(d.len() < xor.len());
            let back = decode(&d, Encoding::Decimal).expect("decode");
            prop_assert_eq!(back.len(), samples.len());
            for (x, y) in samples.iter().zip(&back) {
                prop_assert_eq!(x.v.to_bits(), y.v.to_bits());
            }
        }
    }

    #[test]
    fn mixed_special_values_round_trip_through_compact_form(
        vals in proptest::collection::vec(prop_oneof![
            decimal_value(),
            Just(f64::from_bits(tessera_model::STALE_NAN_BITS)),
            Just(-0.0),
            Just(f64::INFINITY),
            Just(f64::from_bits(0xfff8_0000_0000_0001)),
        ], 1..200)
    ) {
        let samples: Vec<Sample> = vals.iter().enumerate().map(|(i, &v)| Sample::new(i as i64 * 15_000, v)).collect();
        let xor = XorAppender::encode(Encoding::XorJitter, &samples).expect("xor");
        let (enc, bytes) = match compact_form(&xor, Encoding::XorJitter, &mut Vec::new()) {
            Some(d) => (Encoding::Decimal, d),
            None => (Encoding::XorJitter, xor),
        };
        let back = decode(&bytes, enc).expect("decode");
        for (x, y) in samples.iter().zip(&back) {
            prop_assert_eq!(x.v.to_bits(), y.v.to_bits());
        }
    }

    /// What `count_over_time` reads: every timestamp and every staleness marker exactly
    /// as the full decode has them, the other values `0.0`, on the grid (jittered
    /// scrapes) and on deltas (arbitrary times).
    #[test]
    fn timestamps_only_decoding_keeps_times_and_staleness_markers(
        vals in decimal_values(1..300),
        marks in proptest::collection::vec(prop_oneof![9 => Just(false), 1 => Just(true)], 300),
        jitter in proptest::collection::vec(-50i64..50, 300),
        wild in proptest::collection::vec(any::<i64>(), 300),
        regular in any::<bool>(),
    ) {
        let stale = f64::from_bits(tessera_model::STALE_NAN_BITS);
        let samples: Vec<Sample> = vals
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let t = if regular { 1_700_000_000_000 + i as i64 * 15_000 + jitter[i] } else { wild[i] };
                Sample::new(t, if marks[i] { stale } else { v })
            })
            .collect();
        let Some(bytes) = encode(&samples) else { return Ok(()) };
        let full = decode(&bytes, Encoding::Decimal).expect("decode");
        let mut part = vec![Sample::new(7, 7.0)];
        crate::chunk::decode_part_into(&bytes, Encoding::Decimal, crate::chunk::Decode::Timestamps, &mut part)
            .expect("decode timestamps");
        prop_assert_eq!(part[0], Sample::new(7, 7.0), "appends after what the buffer holds");
        prop_assert_eq!(part.len(), full.len() + 1);
        for (x, y) in full.iter().zip(&part[1..]) {
            prop_assert_eq!(x.t, y.t);
            let want = if tessera_model::is_stale_nan(x.v) { stale } else { 0.0 };
            prop_assert_eq!(y.v.to_bits(), want.to_bits());
        }
    }

    #[test]
    fn corrupted_bytes_never_panic(vals in decimal_values(1..50),
                                   flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let samples: Vec<Sample> = vals.iter().enumerate().map(|(i, &v)| Sample::new(i as i64 * 15_000, v)).collect();
        let mut bytes = encode(&samples).expect("decimal");
        for &(pos, x) in &flips {
            let i = pos % bytes.len();
            bytes[i] ^= x;
        }
        decodes_or_is_corrupt(&bytes)?;
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        decodes_or_is_corrupt(&bytes)?;
    }
}

use super::*;
use proptest::prelude::*;
use tessera_model::Sample;

const BOTH: [Encoding; 2] = [Encoding::Xor, Encoding::XorJitter];

/// Round-trips through both encodings; they must agree.
fn roundtrip(samples: &[Sample]) -> Vec<Sample> {
    let mut results = Vec::new();
    for enc in BOTH {
        let bytes = XorAppender::encode(enc, samples).expect("encode");
        assert_eq!(num_samples(&bytes).expect("header"), samples.len());
        results.push(decode(&bytes, enc).expect("decode"));
    }
    let v2 = results.pop().expect("two results");
    let v1 = results.pop().expect("two results");
    assert_bit_exact(&v1, &v2);
    v2
}

fn assert_bit_exact(a: &[Sample], b: &[Sample]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.t, y.t);
        assert_eq!(x.v.to_bits(), y.v.to_bits(), "value bits differ at t={}", x.t);
    }
}

#[test]
fn special_floats_round_trip_bit_exact() {
    let stale = f64::from_bits(0x7ff0_0000_0000_0002);
    let vals = [
        1.0,
        stale,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        0.0,
        f64::from_bits(1),
        f64::MIN_POSITIVE / 2.0,
        f64::NAN,
        f64::from_bits(0xfff8_0000_0000_0001),
        f64::MAX,
        f64::MIN,
        stale,
        stale,
        42.0,
    ];
    let samples: Vec<Sample> =
        vals.iter().enumerate().map(|(i, &v)| Sample::new(1_700_000_000_000 + i as i64 * 15_000, v)).collect();
    assert_bit_exact(&samples, &roundtrip(&samples));
}

#[test]
fn extreme_timestamps_round_trip() {
    let samples = vec![
        Sample::new(i64::MIN, 1.0),
        Sample::new(i64::MAX, 2.0),
        Sample::new(0, 3.0),
        Sample::new(-1, 4.0),
        Sample::new(i64::MIN + 1, 5.0),
        Sample::new(i64::MAX, 6.0),
    ];
    assert_bit_exact(&samples, &roundtrip(&samples));
}

#[test]
fn empty_and_single_sample_chunks_round_trip() {
    assert!(roundtrip(&[]).is_empty());
    let one = [Sample::new(-5, f64::from_bits(0x7ff0_0000_0000_0002))];
    assert_bit_exact(&one, &roundtrip(&one));
}

#[test]
fn dod_bucket_edges_round_trip() {
    // Deltas chosen so the delta-of-delta lands exactly on each bucket boundary.
    let mut t = 1_000_000i64;
    let mut delta = 15_000i64;
    let mut samples = vec![Sample::new(t, 0.0)];
    for dod in
        [0i64, 8192, -8191, -8192, 8193, 65536, -65535, -65536, 524288, -524287, -524288, 524289, 1 << 40, -(1 << 40)]
    {
        delta += dod;
        t += delta;
        samples.push(Sample::new(t, dod as f64));
    }
    assert_bit_exact(&samples, &roundtrip(&samples));
}

#[test]
fn frozen_v1_fixture_decodes() {
    let samples = [Sample::new(1000, 1.0), Sample::new(16000, 1.0), Sample::new(31000, 2.5)];
    let bytes = XorAppender::encode(Encoding::Xor, &samples).expect("encode");
    // Derived by hand from the Prometheus XOR layout: count=3, varint(1000)=d0 0f,
    // 1.0 as 8 raw bytes, uvarint(15000)=98 75, then bits 0 (v1 unchanged), 0 (dod 0),
    // 11 00001 001101 1111111111101 (new xor window: leading 1, 13 significant bits).
    let frozen: &[u8] =
        &[0x00, 0x03, 0xd0, 0x0f, 0x3f, 0xf0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x98, 0x75, 0x30, 0x9b, 0xff, 0xd0];
    if bytes != frozen {
        panic!("encoding changed: {bytes:02x?}");
    }
    assert_bit_exact(&samples, &decode(frozen, Encoding::Xor).expect("decode"));
}

#[test]
fn frozen_fixtures_show_the_smaller_jitter_bucket() {
    // Third sample 3 ms late: dod = 3. Prometheus XOR spends `10` + 14 bits on it, the
    // jitter variant `10` + 6 bits. Bits after `98 75`: 0 (v1 same), dod, 0 (v2 same).
    let samples = [Sample::new(1000, 1.0), Sample::new(16000, 1.0), Sample::new(31003, 1.0)];
    let head: &[u8] = &[0x00, 0x03, 0xd0, 0x0f, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0x98, 0x75];
    let v1: Vec<u8> = [head, &[0x40, 0x01, 0x80]].concat(); // 0 10 00000000000011 0
    let v2: Vec<u8> = [head, &[0x41, 0x80]].concat(); // 0 10 000011 0
    assert_eq!(XorAppender::encode(Encoding::Xor, &samples).expect("encode"), v1);
    assert_eq!(XorAppender::encode(Encoding::XorJitter, &samples).expect("encode"), v2);
    assert_bit_exact(&samples, &decode(&v1, Encoding::Xor).expect("decode v1"));
    assert_bit_exact(&samples, &decode(&v2, Encoding::XorJitter).expect("decode v2"));
}

#[test]
fn truncated_chunk_is_an_error_not_a_panic() {
    let samples: Vec<Sample> = (0..120).map(|i| Sample::new(i * 15_000 + (i % 7), (i as f64).sin())).collect();
    for enc in BOTH {
        let bytes = XorAppender::encode(enc, &samples).expect("encode");
        for cut in 0..bytes.len() {
            let r = decode(&bytes[..cut], enc);
            assert!(matches!(r, Err(crate::Error::Corrupt { .. })), "{enc:?} cut at {cut} decoded: {r:?}");
        }
    }
}

#[test]
fn a_failed_decode_leaves_the_output_as_it_was() {
    let samples: Vec<Sample> = (0..120).map(|i| Sample::new(i * 15_000, (i as f64).sqrt())).collect();
    for enc in BOTH {
        let bytes = XorAppender::encode(enc, &samples).expect("encode");
        let mut out = vec![Sample::new(-1, 7.0)];
        let r = decode_into(&bytes[..bytes.len() - 3], enc, &mut out);
        assert!(matches!(r, Err(crate::Error::Corrupt { .. })), "{r:?}");
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].t, -1);
    }
}

#[test]
fn values_wider_than_one_peek_round_trip() {
    // XORs with 58..=64 significant bits take the two-part read, in a new window (13
    // header bits) and in a reused one (2 header bits).
    let vals = [
        0u64,
        u64::MAX,
        1,
        u64::MAX - 1,
        1 << 63,
        0x8000_0000_0000_0001,
        0x7fff_ffff_ffff_fffe,
        3,
        0x5555_5555_5555_5555,
    ];
    let samples: Vec<Sample> =
        vals.iter().enumerate().map(|(i, &v)| Sample::new(i as i64 * 15_000, f64::from_bits(v))).collect();
    assert_bit_exact(&samples, &roundtrip(&samples));
}

/// What the iterator yields: the samples up to the first error, and whether one came.
fn iterate(bytes: &[u8], enc: Encoding) -> (Vec<Sample>, bool) {
    let mut out = Vec::new();
    for s in XorIter::new(bytes, enc) {
        match s {
            Ok(s) => out.push(s),
            Err(_) => return (out, true),
        }
    }
    (out, false)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_iterator_and_the_bulk_decoder_agree_even_on_corrupt_bytes(
        raw in proptest::collection::vec((any::<i64>(), any::<u64>()), 1..80),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        cut in any::<usize>(),
    ) {
        let samples: Vec<Sample> = raw.iter().map(|&(t, v)| Sample::new(t, f64::from_bits(v))).collect();
        for enc in BOTH {
            let mut bytes = XorAppender::encode(enc, &samples).expect("encode");
            for &(pos, x) in &flips {
                let i = pos % bytes.len();
                bytes[i] ^= x;
            }
            bytes.truncate(bytes.len() - cut % 3);
            let (iterated, failed) = iterate(&bytes, enc);
            match decode(&bytes, enc) {
                Ok(all) => {
                    prop_assert!(!failed);
                    assert_bit_exact(&all, &iterated);
                }
                Err(_) => prop_assert!(failed),
            }
        }
    }

    #[test]
    fn any_i64_and_f64_bits_round_trip(raw in proptest::collection::vec((any::<i64>(), any::<u64>()), 0..300)) {
        let samples: Vec<Sample> = raw.iter().map(|&(t, v)| Sample::new(t, f64::from_bits(v))).collect();
        let back = roundtrip(&samples);
        prop_assert_eq!(back.len(), samples.len());
        for (x, y) in samples.iter().zip(&back) {
            prop_assert_eq!(x.t, y.t);
            prop_assert_eq!(x.v.to_bits(), y.v.to_bits());
        }
    }

    #[test]
    fn jittered_scrapes_round_trip(start in -1i64 << 50..1i64 << 50, jitter in proptest::collection::vec(-500i64..500, 1..240),
                                   vals in proptest::collection::vec(0u32..100, 240)) {
        let samples: Vec<Sample> = jitter.iter().enumerate()
            .map(|(i, j)| Sample::new(start + i as i64 * 15_000 + j, f64::from(vals[i]))).collect();
        let back = roundtrip(&samples);
        for (x, y) in samples.iter().zip(&back) {
            prop_assert_eq!(x.t, y.t);
            prop_assert_eq!(x.v.to_bits(), y.v.to_bits());
        }
    }

    #[test]
    fn corrupted_bytes_never_panic(raw in proptest::collection::vec((any::<i64>(), any::<u64>()), 1..50),
                                   flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let samples: Vec<Sample> = raw.iter().map(|&(t, v)| Sample::new(t, f64::from_bits(v))).collect();
        for enc in BOTH {
            let mut bytes = XorAppender::encode(enc, &samples).expect("encode");
            for &(pos, x) in &flips {
                let i = pos % bytes.len();
                bytes[i] ^= x;
            }
            // Either an error or some samples; the point is that it returns.
            let _ = decode(&bytes, enc);
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(&bytes, Encoding::Xor);
        let _ = decode(&bytes, Encoding::XorJitter);
    }
}

proptest! {
    /// The bulk unpack reads the same fields as one `take` each, from any start (byte
    /// aligned ones take the 8-fields-at-a-time path), for any width, including fields
    /// that run past the end of the data (zeros).
    #[test]
    fn unpack_reads_what_take_reads(
        data in proptest::collection::vec(any::<u8>(), 0..400),
        skip in prop_oneof![Just(0u32), Just(8), 0u32..64],
        w in 1u32..=64,
        n in 0usize..200,
    ) {
        let mut a = super::bits::BitReader::new(&data);
        let mut b = super::bits::BitReader::new(&data);
        if skip > 0 {
            a.take(skip);
            b.take(skip);
        }
        let mut bulk = vec![0u64; n];
        a.unpack(w, &mut bulk);
        let one_by_one: Vec<u64> = (0..n).map(|_| b.take(w)).collect();
        prop_assert_eq!(bulk, one_by_one);
        prop_assert_eq!(a.overran(), b.overran());
    }
}

/// A peek anywhere, inside the data, within its last 8 bytes or past its end, reads the
/// stream's bits followed by zeros: what a zero-padded copy of the data holds there.
#[test]
fn peek_reads_zeros_past_the_end_at_every_position() {
    for len in 0..20usize {
        let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(97) ^ 0xa5).collect();
        let mut padded = data.clone();
        padded.resize(len + 40, 0);
        for pos in 0..(len * 8 + 200) as u32 {
            let mut r = super::bits::BitReader::new(&data);
            r.consume(pos);
            let byte = pos as usize / 8;
            let want = match padded.get(byte..byte + 8) {
                Some(b) => u64::from_be_bytes(b.try_into().unwrap()) << (pos % 8),
                None => 0,
            };
            assert_eq!(r.peek(), want, "len {len}, bit {pos}");
        }
    }
}

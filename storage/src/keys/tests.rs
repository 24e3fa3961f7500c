use super::*;

#[test]
fn chunk_keys_sort_by_series_then_time() {
    let mut keys =
        [chunk_key(2, -5), chunk_key(1, 10), chunk_key(1, -10), chunk_key(1, i64::MIN), chunk_key(2, i64::MAX)];
    keys.sort();
    let parsed: Vec<_> = keys.iter().map(|k| parse_chunk_key(k).expect("key")).collect();
    assert_eq!(parsed, vec![(1, i64::MIN), (1, -10), (1, 10), (2, -5), (2, i64::MAX)]);
}

#[test]
fn chunk_value_detects_corruption() {
    let v = encode_chunk_value(Encoding::XorJitter, 100, 200, &[0, 1, 2, 3]);
    assert_eq!(decode_chunk_value(100, &v).expect("valid"), (Encoding::XorJitter, 200, &[0u8, 1, 2, 3][..]));
    for i in 0..v.len() {
        let mut bad = v.clone();
        bad[i] ^= 0x10;
        assert!(matches!(decode_chunk_value(100, &bad), Err(Error::Corrupt { .. })));
    }
}

#[test]
fn postings_keys_round_trip_and_sort_by_day() {
    let k = postings_key(-3, "gpu", "7").expect("key");
    let (d, n, v) = parse_postings_key(&k).expect("parse");
    assert_eq!((d, n, v), (-3, &b"gpu"[..], &b"7"[..]));
    assert!(postings_key(-3, "zzz", "").expect("key") < postings_key(-2, "a", "").expect("key"));
    assert!(all_postings_key(5).as_slice() < postings_key(5, "a", "").expect("key").as_slice());
}

#[test]
fn day_of_handles_negative_and_extreme_times() {
    assert_eq!(day_of(-1), -1);
    assert_eq!(day_of(0), 0);
    assert_eq!(day_of(MS_PER_DAY), 1);
    assert_eq!(day_of(i64::MIN), i32::MIN);
    assert_eq!(day_of(i64::MAX), i32::MAX);
}

use super::*;

#[test]
fn labels_round_trip_and_reject_garbage() {
    let labels = vec![Label::new("__name__", "up"), Label::new("job", "ünïcode")];
    let mut b = Vec::new();
    encode_labels(&labels, &mut b);
    assert_eq!(decode_labels(&b).expect("decode"), labels);
    assert!(decode_labels(&b[..b.len() - 1]).is_err());
    assert!(decode_labels(&[0xff, 0xff, 0xff]).is_err());
}

#[test]
fn a_stored_set_decodes_as_labels_only_when_sorted_and_unique() {
    let mut b = Vec::new();
    encode_labels(&[Label::new("__name__", "up"), Label::new("job", "a")], &mut b);
    assert_eq!(decode_label_set(&b).expect("sorted").get("job"), Some("a"));
    for bad in [
        vec![Label::new("job", "a"), Label::new("__name__", "up")],
        vec![Label::new("job", "a"), Label::new("job", "b")],
    ] {
        let mut b = Vec::new();
        encode_labels(&bad, &mut b);
        assert!(matches!(decode_label_set(&b), Err(Error::Corrupt { .. })), "{bad:?}");
    }
}

#[test]
fn only_canonical_encodings_pass_the_check() {
    let mut good = Vec::new();
    encode_labels(&[Label::new("__name__", "up"), Label::new("job", "ünï")], &mut good);
    assert_eq!(check_canonical(&good), Ok(()));
    let mut unsorted = Vec::new();
    encode_labels(&[Label::new("job", "a"), Label::new("__name__", "up")], &mut unsorted);
    let mut dup = Vec::new();
    encode_labels(&[Label::new("job", "a"), Label::new("job", "b")], &mut dup);
    let mut not_utf8 = Vec::new();
    put_count(&mut not_utf8, 1);
    put_pair(&mut not_utf8, b"job", b"\xff");
    // A name ending in the first byte of "é" whose value's 2-byte length starts with the
    // character's second byte: the whole buffer is valid UTF-8, the name is not.
    let mut split_char = Vec::new();
    put_count(&mut split_char, 1);
    put_pair(&mut split_char, b"job\xc3", &[b'v'; 169]);
    assert_eq!(split_char[6..8], [0xa9, 0x01], "the value length as laid out");
    assert!(std::str::from_utf8(&split_char).is_ok());
    let mut long_name = Vec::new();
    put_count(&mut long_name, 1);
    put_pair(&mut long_name, "n".repeat(65_536).as_bytes(), b"v");
    let mut trailing = good.clone();
    trailing.push(0);
    for (bad, why) in [
        (&unsorted, "sorted"),
        (&dup, "sorted"),
        (&not_utf8, "UTF-8"),
        (&split_char, "UTF-8"),
        (&long_name, "65535"),
        (&trailing, "trailing"),
        (&good[..good.len() - 1].to_vec(), "truncated"),
    ] {
        let err = check_canonical(bad).expect_err(why);
        assert!(err.contains(why), "{err} should mention {why}");
    }
}

proptest::proptest! {
    /// The check that keeps a stored set encoded accepts exactly what decoding it would:
    /// random bytes, and valid encodings with a byte changed or cut off.
    #[test]
    fn validating_a_stored_set_agrees_with_decoding_it(
        pairs in proptest::collection::vec(("[a-z_é]{0,6}", "[a-zA-Z0-9\u{e9}\u{1f600}]{0,6}"), 0..5),
        flip in proptest::option::of((0usize..64, proptest::prelude::any::<u8>())),
        cut in 0usize..4,
        random in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24),
    ) {
        let labels: Vec<Label> = pairs.into_iter().map(|(n, v)| Label::new(n, v)).collect();
        let mut b = Vec::new();
        encode_labels(&labels, &mut b);
        if let Some((at, byte)) = flip {
            if !b.is_empty() {
                let i = at % b.len();
                b[i] = byte;
            }
        }
        b.truncate(b.len().saturating_sub(cut));
        for bytes in [&b, &random] {
            proptest::prop_assert_eq!(validate_label_set(bytes).is_ok(), decode_label_set(bytes).is_ok(), "{:?}", bytes);
            // A set checked while decoding holds what decoding string by string gives.
            if let Ok(set) = decode_label_set(bytes) {
                let one_by_one = decode_labels(bytes).unwrap();
                proptest::prop_assert_eq!(set.as_slice(), one_by_one.as_slice(), "{:?}", bytes);
            }
            // A subset of a set that decodes holds the labels named. Of one that does
            // not, it is refused unless the framing holds (the labels it does not keep
            // are stepped over unread).
            for only in [&[][..], &["b".to_string()][..], &["a".to_string(), "zz".to_string()][..]] {
                let subset = decode_label_subset(bytes, Some(only));
                match (subset, decode_label_set(bytes)) {
                    (Ok(subset), Ok(set)) => {
                        let kept: Vec<Label> = set.iter().filter(|l| only.iter().any(|n| *n == l.name)).cloned().collect();
                        proptest::prop_assert_eq!(subset.as_slice(), kept.as_slice(), "{:?}", bytes);
                    }
                    (Err(e), Ok(_)) => proptest::prop_assert!(false, "subset refused ({e}) of a set that decodes: {:?}", bytes),
                    (Ok(subset), Err(_)) => {
                        proptest::prop_assert!(walk_pairs(bytes, |_, _| Ok(())).is_ok(), "framing broken: {:?}", bytes);
                        proptest::prop_assert!(subset.iter().all(|l| only.iter().any(|n| *n == l.name)), "{:?}", bytes);
                    }
                    (Err(_), Err(_)) => {}
                }
                // The subset a cursor keeps of a set that decodes is the encoding of
                // the labels kept, appended after what the buffer held, and decodes to
                // the same subset.
                if let Ok(set) = decode_label_set(bytes) {
                    let mut out = vec![7u8];
                    proptest::prop_assert!(put_subset(bytes, only, &mut out), "{:?}", bytes);
                    let kept: Vec<Label> = set.iter().filter(|l| only.iter().any(|n| *n == l.name)).cloned().collect();
                    let mut expected = vec![7u8];
                    encode_labels(&kept, &mut expected);
                    proptest::prop_assert_eq!(&out, &expected, "{:?}", bytes);
                    let again = decode_label_subset(&out[1..], Some(only)).expect("a subset decodes");
                    proptest::prop_assert_eq!(again.as_slice(), kept.as_slice(), "{:?}", bytes);
                }
            }
            // One UTF-8 check over the whole decodes what string-by-string checks do.
            let mut c = crate::varint::Cursor::new(bytes, "labels");
            let one_by_one = decode_labels_from(&mut c).ok().filter(|_| c.is_empty());
            proptest::prop_assert_eq!(decode_labels(bytes).ok(), one_by_one, "{:?}", bytes);
        }
    }
}

#[test]
fn metric_name_is_found_wherever_it_sorts() {
    let enc = |pairs: &[(&str, &str)]| {
        let mut out = Vec::new();
        encode_labels(&pairs.iter().map(|(n, v)| Label::new(*n, *v)).collect::<Vec<_>>(), &mut out);
        out
    };
    assert_eq!(metric_name(&enc(&[("__name__", "up"), ("job", "a")])), b"up");
    // An upper-case name sorts before `__name__`.
    assert_eq!(metric_name(&enc(&[("Hostname", "h1"), ("__name__", "DCGM_FI_DEV_GPU_TEMP")])), b"DCGM_FI_DEV_GPU_TEMP");
    assert_eq!(metric_name(&enc(&[("job", "a")])), b"");
    assert_eq!(metric_name(&[0x05, 0x01]), b"", "a truncated encoding has no name");
}

#[test]
fn a_subset_reads_the_labels_it_keeps_and_steps_over_the_rest() {
    let mut b = Vec::new();
    encode_labels(&[Label::new("Hostname", "h1"), Label::new("__name__", "up"), Label::new("job", "a")], &mut b);
    let name = ["__name__".to_string()];
    let subset = decode_label_subset(&b, Some(&name)).expect("a well-formed set");
    assert_eq!(subset.as_slice(), &[Label::new("__name__", "up")]);

    // A byte of `job`'s value that is not UTF-8: the set is refused, a subset that
    // does not keep `job` is not; one that keeps it is.
    let mut bad_job = b.clone();
    *bad_job.last_mut().unwrap() = 0xff;
    assert!(decode_label_set(&bad_job).is_err());
    assert_eq!(decode_label_subset(&bad_job, Some(&name)).expect("job stepped over").as_slice(), subset.as_slice());
    let err = decode_label_subset(&bad_job, Some(&["job".to_string()])).expect_err("job is read");
    assert!(err.to_string().contains("labels"), "{err}");

    // Framing is checked whatever is kept: cut off, or with a byte too many.
    for broken in [&b[..b.len() - 1], &[&b[..], &[0u8][..]].concat()[..]] {
        let err = decode_label_subset(broken, Some(&name)).expect_err("broken framing");
        assert!(err.to_string().contains("labels"), "{err}");
    }
}

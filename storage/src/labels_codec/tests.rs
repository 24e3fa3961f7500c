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

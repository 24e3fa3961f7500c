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

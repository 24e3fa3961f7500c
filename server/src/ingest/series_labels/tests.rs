use super::*;
use tessera_storage::labels_codec::{decode_labels, encode_labels};

fn l(n: &str, v: &str) -> Label {
    Label::new(n, v)
}

#[test]
fn the_tenant_label_is_encoded_in_its_sorted_place() {
    // Upper-case names sort before `__tenant__`, `__name__` too, lower-case ones after.
    for labels in [
        vec![l("Hostname", "n1"), l("UUID", "GPU-1"), l("__name__", "DCGM_FI_DEV_GPU_UTIL"), l("gpu", "0")],
        vec![l("__name__", "up")],
        vec![l("a", "b")],
        vec![l("ZZ", "x")],
    ] {
        let set = SeriesLabels::from_labels(&labels);
        let mut got = Vec::new();
        set.encode_with_tenant("team-a", &mut got);
        let mut want_labels = labels.clone();
        want_labels.push(l(TENANT_LABEL, "team-a"));
        want_labels.sort();
        let mut want = Vec::new();
        encode_labels(&want_labels, &mut want);
        assert_eq!(got, want, "{labels:?}");
        assert_eq!(decode_labels(&got).expect("decodes"), want_labels);
        assert_eq!(set.to_labels(), labels);
        assert_eq!(set.len(), labels.len());
    }
}

#[test]
fn empty_values_are_left_out_and_long_strings_survive() {
    let long = "v".repeat(300);
    let pairs: Vec<(&[u8], &[u8])> =
        vec![(b"__name__", b"up"), (b"env", b""), (b"job", long.as_bytes()), (b"zone", "ünï".as_bytes())];
    let set = SeriesLabels::from_sorted_pairs(pairs.iter().copied());
    assert_eq!(set.to_labels(), vec![l("__name__", "up"), l("job", &long), l("zone", "ünï")]);
    assert_eq!(set.iter().count(), 3);
    let mut enc = Vec::new();
    set.encode_with_tenant("t", &mut enc);
    assert!(tessera_storage::labels_codec::check_canonical(&enc).is_ok());
    assert_eq!(format!("{set:?}"), format!("{{\"__name__\": \"up\", \"job\": \"{long}\", \"zone\": \"ünï\"}}"));
}

#[test]
fn uvarint_lengths_match_the_encoder() {
    for n in [0usize, 1, 127, 128, 16383, 16384, 1 << 21, usize::MAX] {
        let mut v = Vec::new();
        let mut x = n as u64;
        while x >= 0x80 {
            v.push(x as u8 | 0x80);
            x >>= 7;
        }
        v.push(x as u8);
        assert_eq!(uvarint_len(n), v.len(), "{n}");
    }
}

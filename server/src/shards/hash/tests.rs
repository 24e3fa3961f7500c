use super::*;

fn l(n: &str, v: &str) -> Label {
    Label { name: n.into(), value: v.into() }
}

/// Frozen values: if this test fails, the hash changed and stored data would be
/// routed to the wrong shard. Do not update the constants; fix the code.
#[test]
fn series_hash_is_frozen() {
    let labels = [l("__name__", "up"), l("job", "node")];
    let expected_stream = b"anonymous\xff__name__\xffup\xffjob\xffnode\xff";
    assert_eq!(series_hash("anonymous", &labels), xxhash_rust::xxh3::xxh3_64(expected_stream));
    assert_eq!(series_hash("anonymous", &labels), 0x7cfb_1973_3e25_03ff);
    assert_eq!(shard_of(0x7cfb_1973_3e25_03ff, 16), 15);
}

#[test]
fn field_boundaries_change_the_hash() {
    assert_ne!(series_hash("t", &[l("a", "bc")]), series_hash("t", &[l("ab", "c")]));
    assert_ne!(series_hash("t1", &[l("a", "b")]), series_hash("t", &[l("1a", "b")]));
}

#[test]
fn tenants_with_identical_series_hash_differently() {
    let labels = [l("__name__", "up")];
    assert_ne!(series_hash("team-a", &labels), series_hash("team-b", &labels));
}

#[test]
fn hashing_pairs_in_one_call_gives_the_frozen_hash() {
    let labels = [l("UUID", "GPU-1"), l("__name__", "up"), l("job", "node")];
    let pairs = labels.iter().map(|x| (x.name.as_bytes(), x.value.as_bytes()));
    let mut scratch = b"left over".to_vec();
    assert_eq!(series_hash_pairs("anonymous", pairs, &mut scratch), series_hash("anonymous", &labels));
    let up = [l("__name__", "up"), l("job", "node")];
    let pairs = up.iter().map(|x| (x.name.as_bytes(), x.value.as_bytes()));
    assert_eq!(series_hash_pairs("anonymous", pairs, &mut scratch), 0x7cfb_1973_3e25_03ff);
}

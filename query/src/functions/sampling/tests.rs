use super::*;

fn series(i: usize) -> Labels {
    Labels::from_pairs([("__name__", "http_requests".to_string()), ("instance", i.to_string())])
}

#[test]
fn empty_label_set_hashes_like_xxhash64_of_nothing() {
    assert_eq!(labels_hash(&Labels::default()), 0xef46db3751d8e999);
}

#[test]
fn hash_separates_names_from_values() {
    let a = Labels::from_pairs([("ab", "c")]);
    let b = Labels::from_pairs([("a", "bc")]);
    assert_ne!(labels_hash(&a), labels_hash(&b));
}

#[test]
fn ratio_and_its_complement_partition_the_series() {
    for r in [0.2, 0.5, 0.9] {
        for i in 0..200 {
            let l = series(i);
            assert_ne!(limit_ratio_keeps(r, &l), limit_ratio_keeps(r - 1.0, &l), "r={r} i={i}");
        }
    }
}

#[test]
fn full_and_empty_ratios() {
    for i in 0..50 {
        let l = series(i);
        assert!(limit_ratio_keeps(1.0, &l));
        assert!(limit_ratio_keeps(-1.0, &l));
        assert!(!limit_ratio_keeps(0.0, &l));
        assert!(!limit_ratio_keeps(f64::NAN, &l));
    }
    assert_eq!(clamp_ratio(1.1), (1.0, true));
    assert_eq!(clamp_ratio(-1.1), (-1.0, true));
    assert_eq!(clamp_ratio(0.3), (0.3, false));
}

#[test]
fn half_ratio_keeps_roughly_half() {
    let kept = (0..1000).filter(|i| limit_ratio_keeps(0.5, &series(*i))).count();
    assert!((400..600).contains(&kept), "{kept}");
}

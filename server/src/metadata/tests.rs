use super::*;

fn e(kind: &'static str, help: &str) -> MetadataEntry {
    MetadataEntry { kind, help: help.into(), unit: String::new() }
}

#[test]
fn tenants_do_not_see_each_others_metadata() {
    let s = MetadataStore::new(10, 0, 0);
    s.record("a", vec![("up".into(), e("gauge", "a's"))]);
    assert_eq!(s.query("a", None, None, None).len(), 1);
    assert!(s.query("b", None, None, None).is_empty());
}

#[test]
fn repeated_entries_are_deduplicated_and_limits_apply() {
    let s = MetadataStore::new(2, 0, 0);
    s.record(
        "t",
        vec![("x".into(), e("counter", "1")), ("x".into(), e("counter", "1")), ("x".into(), e("counter", "2"))],
    );
    assert_eq!(s.query("t", Some("x"), None, None)["x"].len(), 2);
    assert_eq!(s.query("t", Some("x"), None, Some(1))["x"], vec![e("counter", "2")]);
    s.record("t", vec![("y".into(), e("gauge", "")), ("z".into(), e("gauge", ""))]);
    assert_eq!(s.query("t", None, None, None).len(), 2, "third family is over the per-tenant limit");
    assert_eq!(s.query("t", None, Some(1), None).len(), 1);
}

/// Five requests of long help texts used to keep ~98 MB: texts are cut and the tenant's
/// bytes are bounded, whatever the number of families.
#[test]
fn metadata_bytes_are_bounded_per_tenant_and_texts_are_cut() {
    let s = MetadataStore::new(100_000, 10_000, 100);
    let long = "h".repeat(1_000_000);
    let entries: Vec<(String, MetadataEntry)> = (0..1000).map(|i| (format!("m{i}"), e("gauge", &long))).collect();
    s.record("t", entries);
    assert!(s.bytes("t") <= 10_000, "{} bytes kept", s.bytes("t"));
    let kept = s.query("t", None, None, None);
    assert!(!kept.is_empty() && kept.len() < 1000, "{} families kept", kept.len());
    assert!(kept.values().all(|l| l[0].help.len() == 100), "help texts are cut to 100 bytes");
    // Another tenant has its own budget.
    s.record("u", vec![("x".into(), e("gauge", "short"))]);
    assert_eq!(s.query("u", None, None, None).len(), 1);
}

/// Replacing entries beyond the per-family count gives their bytes back, so a family
/// whose help changes every minute does not creep towards the bound.
#[test]
fn evicted_entries_are_no_longer_charged() {
    let s = MetadataStore::new(10, 0, 0);
    for i in 0..100 {
        s.record("t", vec![("x".into(), e("gauge", &format!("help {i:03}")))]);
    }
    let expected = FAMILY_OVERHEAD_BYTES + 1 + MAX_ENTRIES_PER_METRIC * (ENTRY_OVERHEAD_BYTES + "help 000".len());
    assert_eq!(s.bytes("t"), expected);
}

#[test]
fn cut_len_respects_character_boundaries() {
    assert_eq!(cut_len("abc", 0), 3);
    assert_eq!(cut_len("abc", 2), 2);
    assert_eq!(cut_len("aé", 2), 1, "é is two bytes and is not split");
}

#[test]
fn families_exported_and_recorded_elsewhere_keep_their_newest_first_order() {
    let s = MetadataStore::new(10, 0, 0);
    s.record("t", vec![("x".into(), e("counter", "old")), ("x".into(), e("counter", "new"))]);
    s.record("t", vec![("y".into(), e("gauge", "y"))]);
    s.record("u", vec![("x".into(), e("gauge", "u's"))]);
    let only_x = s.export(|_, metric| metric == "x");
    assert_eq!(only_x.len(), 2, "both tenants have x");
    assert_eq!(only_x[0].0, "t");
    assert_eq!(only_x[0].1, vec![("x".to_string(), vec![e("counter", "new"), e("counter", "old")])]);

    let copy = MetadataStore::new(10, 0, 0);
    copy.record("t", vec![("x".into(), e("counter", "mine"))]);
    for (tenant, families) in only_x {
        copy.record_families(&tenant, families);
    }
    assert_eq!(
        copy.query("t", Some("x"), None, None)["x"],
        vec![e("counter", "new"), e("counter", "old"), e("counter", "mine")],
        "the copied entries go first, newest first"
    );
    assert!(copy.query("t", Some("y"), None, None).is_empty(), "filtered out");
    assert_eq!(kind_named("gaugehistogram"), Some("gaugehistogram"));
    assert_eq!(kind_named("Counter"), None);
}

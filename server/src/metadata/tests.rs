use super::*;

fn e(kind: &'static str, help: &str) -> MetadataEntry {
    MetadataEntry { kind, help: help.into(), unit: String::new() }
}

#[test]
fn tenants_do_not_see_each_others_metadata() {
    let s = MetadataStore::new(10);
    s.record("a", vec![("up".into(), e("gauge", "a's"))]);
    assert_eq!(s.query("a", None, None, None).len(), 1);
    assert!(s.query("b", None, None, None).is_empty());
}

#[test]
fn repeated_entries_are_deduplicated_and_limits_apply() {
    let s = MetadataStore::new(2);
    s.record("t", vec![("x".into(), e("counter", "1")), ("x".into(), e("counter", "1")), ("x".into(), e("counter", "2"))]);
    assert_eq!(s.query("t", Some("x"), None, None)["x"].len(), 2);
    assert_eq!(s.query("t", Some("x"), None, Some(1))["x"], vec![e("counter", "2")]);
    s.record("t", vec![("y".into(), e("gauge", "")), ("z".into(), e("gauge", ""))]);
    assert_eq!(s.query("t", None, None, None).len(), 2, "third family is over the per-tenant limit");
    assert_eq!(s.query("t", None, Some(1), None).len(), 1);
}

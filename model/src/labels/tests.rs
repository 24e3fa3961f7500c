//! Label sets: canonical order, lookups, removal, text form.

use super::*;

#[test]
fn from_pairs_sorts_keeps_the_last_duplicate_and_drops_empty_values() {
    let ls = Labels::from_pairs([("b", "1"), ("a", "x"), ("b", "2"), ("c", "")]);
    assert_eq!(ls.as_slice(), &[Label::new("a", "x"), Label::new("b", "2")]);
}

#[test]
fn sets_order_and_compare_by_their_sorted_pairs() {
    let a = Labels::from_pairs([("job", "a"), ("__name__", "up")]);
    let b = Labels::from_sorted(vec![Label::new("__name__", "up"), Label::new("job", "a")]);
    assert_eq!(a, b);
    let c = Labels::from_pairs([("__name__", "up"), ("job", "b")]);
    assert!(a < c);
}

#[test]
fn get_and_without_find_labels_by_name() {
    let ls = Labels::from_pairs([("__tenant__", "t"), ("__name__", "up"), ("gpu", "0")]);
    assert_eq!(ls.get("gpu"), Some("0"));
    assert_eq!(ls.get("missing"), None);
    let stripped = ls.clone().without("__tenant__");
    assert_eq!(stripped, Labels::from_pairs([("__name__", "up"), ("gpu", "0")]));
    assert_eq!(stripped.clone().without("absent"), stripped);
}

#[test]
fn display_is_prometheus_text_form() {
    let ls = Labels::from_pairs([("__name__", "up"), ("job", "a\"b"), ("gpu", "0")]);
    assert_eq!(ls.to_string(), r#"up{gpu="0", job="a\"b"}"#);
    assert_eq!(Labels::default().to_string(), "{}");
}

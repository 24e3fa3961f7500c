//! Orderings from the `sort_by_label` section of `functions.test`.

use super::*;

fn sorted(values: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = values.iter().map(|s| s.to_string()).collect();
    v.sort_by(|a, b| {
        if a == b {
            Ordering::Equal
        } else if natural_less(a, b) {
            Ordering::Less
        } else {
            Ordering::Greater
        }
    });
    v
}

#[test]
fn natural_order_compares_digit_runs_numerically() {
    assert_eq!(
        sorted(&["0", "1", "10", "100", "11", "12", "2", "20", "21", "3"]),
        ["0", "1", "2", "3", "10", "11", "12", "20", "21", "100"]
    );
    assert_eq!(sorted(&["4m600", "4m5", "4m1000"]), ["4m5", "4m600", "4m1000"]);
    assert_eq!(sorted(&["1.111.3", "1.2.3", "1.11.3"]), ["1.2.3", "1.11.3", "1.111.3"]);
    assert_eq!(sorted(&["production", "canary"]), ["canary", "production"]);
}

#[test]
fn natural_order_prefix_sorts_first() {
    assert!(natural_less("cpu", "cpu1"));
    assert!(!natural_less("cpu1", "cpu"));
}

#[test]
fn sort_by_label_falls_back_to_full_label_sets() {
    let a = Labels::from_pairs([("group", "canary"), ("instance", "0"), ("job", "api-server")]);
    let b = Labels::from_pairs([("group", "canary"), ("instance", "0"), ("job", "app-server")]);
    let c = Labels::from_pairs([("group", "production"), ("instance", "0"), ("job", "api-server")]);
    let d = Labels::from_pairs([("group", "canary"), ("instance", "1"), ("job", "api-server")]);
    let names = vec!["instance".to_string()];
    let mut v = vec![d.clone(), c.clone(), b.clone(), a.clone()];
    v.sort_by(|x, y| sort_by_label_cmp(x, y, &names, false));
    assert_eq!(v, [a.clone(), b.clone(), c.clone(), d.clone()]);
    v.sort_by(|x, y| sort_by_label_cmp(x, y, &names, true));
    assert_eq!(v, [d, c, b, a]);
}

#[test]
fn value_sorts_put_nan_last_both_ways() {
    let mut v = [2., f64::NAN, 1., 3.];
    v.sort_by(|a, b| sort_asc_cmp(*a, *b));
    assert_eq!(&v[..3], &[1., 2., 3.]);
    assert!(v[3].is_nan());
    v.sort_by(|a, b| sort_desc_cmp(*a, *b));
    assert_eq!(&v[..3], &[3., 2., 1.]);
    assert!(v[3].is_nan());
}

#[test]
fn sort_by_label_puts_a_series_lacking_the_label_last_and_first_descending() {
    let a = Labels::from_pairs([("__name__", "m"), ("x", "a")]);
    let b = Labels::from_pairs([("__name__", "m"), ("x", "b")]);
    let none = Labels::from_pairs([("__name__", "m"), ("y", "1")]);
    let names = vec!["x".to_string()];
    let mut v = vec![none.clone(), b.clone(), a.clone()];
    v.sort_by(|p, q| sort_by_label_cmp(p, q, &names, false));
    assert_eq!(v, [a.clone(), b.clone(), none.clone()]);
    v.sort_by(|p, q| sort_by_label_cmp(p, q, &names, true));
    assert_eq!(v, [none, b, a]);
}

#[test]
fn natural_cmp_is_a_total_order_where_natsort_is_not() {
    // natsort says "less" both ways for equal-valued digit runs.
    assert!(natural_less("a01", "a1") && natural_less("a1", "a01"));
    assert_eq!(natural_cmp("a01", "a1"), Ordering::Equal);
    assert_eq!(natural_cmp("cpu2", "cpu10"), Ordering::Less);
    assert_eq!(natural_cmp("cpu10", "cpu2"), Ordering::Greater);
    // Ties fall through to the full label set, so the sort is still deterministic.
    let p = Labels::from_pairs([("x", "01")]);
    let q = Labels::from_pairs([("x", "1")]);
    let names = vec!["x".to_string()];
    assert_eq!(sort_by_label_cmp(&p, &q, &names, false), p.cmp(&q));
}

mod props {
    use proptest::prelude::*;

    use super::*;

    /// A series with label `x` from a small alphabet of digits and letters, or none.
    fn series() -> impl Strategy<Value = Labels> {
        (proptest::option::of("[0a1b]{0,4}"), 0u8..3).prop_map(|(x, id)| match x {
            Some(x) if !x.is_empty() => Labels::from_pairs([("id", id.to_string()), ("x", x)]),
            _ => Labels::from_pairs([("id", id.to_string())]),
        })
    }

    proptest! {
        /// `sort_by_label_cmp` is a total order (Rust's sort may panic on one that is not):
        /// antisymmetric and transitive, in both directions.
        #[test]
        fn sort_by_label_cmp_is_a_total_order(a in series(), b in series(), c in series(), desc in any::<bool>()) {
            let names = vec!["x".to_string()];
            let cmp = |p: &Labels, q: &Labels| sort_by_label_cmp(p, q, &names, desc);
            prop_assert_eq!(cmp(&a, &b), cmp(&b, &a).reverse());
            if cmp(&a, &b) != Ordering::Greater && cmp(&b, &c) != Ordering::Greater {
                prop_assert_ne!(cmp(&a, &c), Ordering::Greater);
            }
        }
    }
}

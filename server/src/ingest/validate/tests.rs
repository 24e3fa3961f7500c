use super::*;

fn check(pairs: &[(&str, &str)]) -> Result<Vec<Label>, String> {
    validate_labels(pairs.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())), &Limits::default())
}

#[test]
fn sorted_valid_labels_pass_and_empty_values_are_dropped() {
    let out = check(&[("__name__", "up"), ("env", ""), ("job", "node")]).expect("valid");
    assert_eq!(out.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), vec!["__name__", "job"]);
}

#[test]
fn uppercase_label_names_sort_before_the_metric_name() {
    // 'U' (0x55) < '_' (0x5f): DCGM's UUID label comes first in a sorted set.
    assert!(check(&[("Hostname", "n1"), ("UUID", "GPU-1"), ("__name__", "DCGM_FI_DEV_GPU_UTIL")]).is_ok());
}

#[test]
fn each_bad_label_set_is_refused_with_a_reason() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[], "no labels"),
        (&[("", "x"), ("__name__", "up")], "empty label name"),
        (&[("__name__", "up"), ("job", "a"), ("job", "b")], "duplicate label name \"job\""),
        (&[("__name__", "up"), ("zone", "a"), ("job", "b")], "not sorted"),
        (&[("job", "a")], "missing metric name"),
        (&[("__name__", "1up")], "invalid metric name"),
        (&[("__name__", "up"), ("bad-name", "x")], "invalid label name \"bad-name\""),
        (&[("__name__", "up"), ("__tenant__", "x")], "reserved"),
    ];
    for (pairs, want) in cases {
        let err = check(pairs).expect_err("must be refused");
        assert!(err.contains(want), "{pairs:?}: got {err:?}, want {want:?}");
    }
}

#[test]
fn limits_on_count_and_length_are_enforced() {
    let limits = Limits { max_labels_per_series: 2, max_label_value_bytes: 5, ..Limits::default() };
    let three = [("__name__", "up"), ("a", "1"), ("b", "2")];
    let err = validate_labels(three.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())), &limits).expect_err("too many");
    assert!(err.contains("3 labels, more than the limit of 2"), "{err}");
    let long = [("__name__", "up"), ("a", "123456")];
    let err = validate_labels(long.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())), &limits).expect_err("too long");
    assert!(err.contains("6 bytes long"), "{err}");
}

#[test]
fn invalid_utf8_is_refused_not_panicking() {
    let pairs: [(&[u8], &[u8]); 2] = [(b"__name__", b"up"), (b"job", b"\xff\xfe")];
    let err = validate_labels(pairs.into_iter(), &Limits::default()).expect_err("bad utf8");
    assert!(err.contains("not valid UTF-8"), "{err}");
}

#[test]
fn utf8_mode_accepts_dotted_names() {
    let limits = Limits { name_validation: NameValidation::Utf8, ..Limits::default() };
    let pairs = [("__name__", "http.server.duration"), ("service.name", "api")];
    assert!(validate_labels(pairs.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())), &limits).is_ok());
}

#[test]
fn describe_prints_prometheus_text_form() {
    let pairs = [("__name__", "up"), ("job", "node")];
    assert_eq!(describe(pairs.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes()))), "up{job=\"node\"}");
}

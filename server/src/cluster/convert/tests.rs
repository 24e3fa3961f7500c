use super::*;

fn series(labels: &[(&str, &str)]) -> PushSeries {
    let labels: Vec<Label> = labels.iter().map(|(n, v)| Label::new(*n, *v)).collect();
    let hash = crate::shards::series_hash("t", &labels);
    PushSeries { labels, samples: vec![Sample { t: 1, v: 2.0 }, Sample { t: 2, v: 3.0 }], hash }
}

#[test]
fn pushed_series_round_trip_and_the_hash_is_recomputed() {
    let s = series(&[("__name__", "up"), ("job", "a")]);
    let mut wire = push_series_to_pb(&s, ShardId(3));
    wire.shard = 3;
    let (shard, back) = push_series_from_pb("t", wire.clone()).expect("valid");
    assert_eq!(shard, ShardId(3));
    assert_eq!(back.labels, s.labels);
    assert_eq!(back.samples, s.samples);
    assert_eq!(back.hash, s.hash);
    let (_, other_tenant) = push_series_from_pb("u", wire).expect("valid");
    assert_ne!(other_tenant.hash, s.hash, "the hash includes the tenant the ingester was told");
}

#[test]
fn malformed_pushed_series_are_refused_with_the_reason() {
    let s = series(&[("__name__", "up"), ("job", "a")]);
    let mut unsorted = push_series_to_pb(&s, ShardId(0));
    unsorted.labels.reverse();
    assert!(push_series_from_pb("t", unsorted).expect_err("unsorted").contains("not sorted"));
    let mut short = push_series_to_pb(&s, ShardId(0));
    short.values.pop();
    assert!(push_series_from_pb("t", short).expect_err("short").contains("2 timestamps but 1 values"));
    let tenant = series(&[("__name__", "up"), ("__tenant__", "x")]);
    assert!(push_series_from_pb("t", push_series_to_pb(&tenant, ShardId(0))).expect_err("tenant").contains("reserved"));
}

#[test]
fn matchers_round_trip_and_a_bad_regex_is_invalid_argument() {
    for op in [MatchOp::Equal, MatchOp::NotEqual, MatchOp::Regex, MatchOp::NotRegex] {
        let m = Matcher::new("job", op, "a.*").expect("valid");
        let s = matcher_from_pb(&matcher_to_pb(&m)).expect("compiles");
        assert_eq!((s.name(), s.op(), s.value()), ("job", op, "a.*"));
    }
    // A peer may send what no local Matcher could hold: a regex that does not compile.
    let bad = pb::Matcher { r#type: pb::matcher::Type::Re as i32, name: "job".into(), value: "(".into() };
    assert_eq!(matcher_from_pb(&bad).expect_err("bad regex").code(), Code::InvalidArgument);
}

#[test]
fn a_rejection_travels_with_its_request_index_and_reason() {
    let sent = vec![series(&[("__name__", "a")]), series(&[("__name__", "b")])];
    let outcome = PushOutcome {
        accepted: 1,
        rejected_too_old: 1,
        first_rejection: Some(FirstRejection {
            index: 0,
            labels: Vec::new(),
            t: 5,
            reason: RejectReason::TooOld { min_allowed_t: 9 },
        }),
        ..PushOutcome::default()
    };
    // The shard part held request series 1 only.
    let wire = outcome_to_pb(ShardId(2), Ok(outcome), &[1]);
    let back = outcome_from_pb(&wire, &[0, 1], &sent);
    let f = back.first_rejection.expect("kept");
    assert_eq!((f.index, f.t), (1, 5));
    assert_eq!(f.labels, sent[1].labels);
    assert!(matches!(f.reason, RejectReason::TooOld { min_allowed_t: 9 }));
    let failed = outcome_to_pb(ShardId(2), Err(ShardError::unavailable("poisoned")), &[]);
    assert_eq!(failed.error, "poisoned");
}

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

/// A fragment output as comparable data: every float by its bits (NaN payloads, stale
/// markers and signed zeros included), which `PartialEq` on f64 cannot compare.
fn bits(o: &FragmentOutput) -> String {
    fn f(v: f64) -> String {
        format!("{:#x}", v.to_bits())
    }
    fn series(s: &PartialSeries) -> String {
        let pts: Vec<String> = s.points.iter().map(|p| format!("{}:{}", p.t, f(p.v))).collect();
        format!("{}|{}|{}", s.labels, s.drop_name, pts.join(","))
    }
    fn group(g: &GroupPartial) -> String {
        let steps: Vec<String> = g
            .steps
            .iter()
            .map(|s| {
                let st = match &s.state {
                    PartialState::Empty => "e".to_owned(),
                    PartialState::Sum { sum, c } => format!("s{},{}", f(*sum), f(*c)),
                    PartialState::Avg { sum, c, mean, count, incremental } => {
                        format!("a{},{},{},{},{incremental}", f(*sum), f(*c), f(*mean), f(*count))
                    }
                    PartialState::Min(v) => format!("m{}", f(*v)),
                    PartialState::Max(v) => format!("M{}", f(*v)),
                    PartialState::Counted => "c".to_owned(),
                    PartialState::Values(v) => format!("v{:?}", v.iter().map(|&x| f(x)).collect::<Vec<_>>()),
                };
                format!("{}:{}:{}:{}:{st}", s.t, f(s.count), s.histograms, s.drop_name)
            })
            .collect();
        format!("{}|{}|{}", g.labels, g.first, steps.join(","))
    }
    /// A group cut into pieces by steps (large groups travel so) reads as one group.
    fn groups(gs: &[GroupPartial]) -> Vec<String> {
        let mut joined: Vec<GroupPartial> = Vec::new();
        for g in gs {
            match joined.last_mut() {
                Some(p) if p.labels == g.labels && p.first == g.first => p.steps.extend(g.steps.iter().cloned()),
                _ => joined.push(g.clone()),
            }
        }
        joined.iter().map(group).collect()
    }
    let data = match &o.data {
        FragmentData::Series(s) => format!("S{:?}", s.iter().map(series).collect::<Vec<_>>()),
        FragmentData::Groups(g) => format!("G{:?}", groups(g)),
        FragmentData::Candidates { series: s, groups: g } => {
            format!("C{:?}{:?}", s.iter().map(series).collect::<Vec<_>>(), groups(g))
        }
    };
    format!("{data} W{:?} I{:?}", o.warnings, o.infos)
}

mod round_trip {
    use super::*;
    use proptest::prelude::*;

    fn float() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<u64>().prop_map(f64::from_bits),
            Just(f64::from_bits(0x7ff0_0000_0000_0002)),
            Just(f64::NAN),
            Just(-0.0),
            Just(f64::INFINITY),
            any::<f64>(),
        ]
    }

    fn labels() -> impl Strategy<Value = Labels> {
        proptest::collection::btree_map("[a-z_]{1,6}", ".{0,8}", 0..4).prop_map(Labels::from_pairs)
    }

    fn series() -> impl Strategy<Value = PartialSeries> {
        (labels(), any::<bool>(), proptest::collection::vec((any::<i64>(), float()), 0..6)).prop_map(
            |(labels, drop_name, pts)| PartialSeries {
                labels,
                drop_name,
                points: pts.into_iter().map(|(t, v)| Sample { t, v }).collect(),
            },
        )
    }

    fn state() -> impl Strategy<Value = PartialState> {
        prop_oneof![
            Just(PartialState::Empty),
            (float(), float()).prop_map(|(sum, c)| PartialState::Sum { sum, c }),
            (float(), float(), float(), float(), any::<bool>())
                .prop_map(|(sum, c, mean, count, incremental)| PartialState::Avg { sum, c, mean, count, incremental }),
            float().prop_map(PartialState::Min),
            float().prop_map(PartialState::Max),
            Just(PartialState::Counted),
            proptest::collection::vec(float(), 0..40).prop_map(PartialState::Values),
        ]
    }

    fn group() -> impl Strategy<Value = GroupPartial> {
        let step = (any::<i64>(), float(), any::<u64>(), any::<bool>(), state()).prop_map(
            |(t, count, histograms, drop_name, state)| StepPartial { t, count, histograms, drop_name, state },
        );
        (labels(), labels(), proptest::collection::vec(step, 0..5)).prop_map(|(labels, first, steps)| GroupPartial {
            labels,
            first,
            steps,
        })
    }

    fn output() -> impl Strategy<Value = FragmentOutput> {
        let data = prop_oneof![
            proptest::collection::vec(series(), 0..5).prop_map(FragmentData::Series),
            proptest::collection::vec(group(), 0..5).prop_map(FragmentData::Groups),
            (proptest::collection::vec(series(), 0..4), proptest::collection::vec(group(), 0..4))
                .prop_map(|(series, groups)| FragmentData::Candidates { series, groups }),
        ];
        let text = proptest::collection::vec(".{0,12}", 0..3);
        (data, text.clone(), text).prop_map(|(data, warnings, infos)| FragmentOutput { data, warnings, infos })
    }

    fn fragment() -> impl Strategy<Value = Fragment> {
        (
            ".{0,20}",
            proptest::collection::vec(any::<u32>(), 0..4),
            any::<bool>(),
            proptest::array::uniform6(any::<i64>()),
            (any::<i64>(), any::<i64>(), any::<u64>()),
            proptest::collection::vec(float(), 0..4),
            proptest::option::of(".{0,6}"),
        )
            .prop_map(
                |(
                    query,
                    path,
                    partial,
                    g,
                    (lookback_delta_ms, default_subquery_step_ms, max_samples),
                    param,
                    string_param,
                )| {
                    Fragment {
                        query,
                        path,
                        mode: if partial { FragmentMode::Partial } else { FragmentMode::Concat },
                        start: g[0],
                        end: g[1],
                        step: g[2],
                        query_start: g[3],
                        query_end: g[4],
                        query_step: g[5],
                        lookback_delta_ms,
                        default_subquery_step_ms,
                        max_samples,
                        param,
                        string_param,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn every_field_of_a_fragment_survives_the_wire(f in fragment()) {
            let back = fragment_from_pb(fragment_to_pb(&f)).expect("valid");
            let bits_of = |p: &[f64]| p.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits_of(&back.param), bits_of(&f.param));
            let (mut a, mut b) = (back, f);
            a.param.clear();
            b.param.clear();
            prop_assert_eq!(a, b);
        }

        #[test]
        fn every_field_of_an_output_survives_the_frames_bit_for_bit(o in output(), budget in 1usize..400) {
            let want = bits(&o);
            let frames = eval_frames(o, budget);
            prop_assert!(frames.last().is_some_and(|f| f.last));
            let mut answer = EvalAnswer::default();
            for f in frames {
                // Through the encoding too, as tonic sends it.
                let f = <pb::EvalResponse as prost::Message>::decode(prost::Message::encode_to_vec(&f).as_slice())
                    .expect("decodes");
                answer.add(f).expect("valid frame");
            }
            prop_assert_eq!(bits(&answer.finish().expect("complete")), want);
        }
    }
}

#[test]
fn a_cut_or_mixed_eval_answer_is_an_error_naming_the_problem() {
    let out = FragmentOutput {
        data: FragmentData::Series(vec![PartialSeries {
            labels: Labels::from_pairs([("a", "1")]),
            drop_name: false,
            points: vec![Sample { t: 1, v: 2.0 }],
        }]),
        warnings: vec!["w".into()],
        infos: vec![],
    };
    let mut frames = eval_frames(out, 1 << 20);
    assert_eq!(frames.len(), 1);
    let mut cut = frames[0].clone();
    cut.last = false;
    let mut a = EvalAnswer::default();
    a.add(cut).expect("frame");
    assert!(a.finish().expect_err("cut").contains("before its last frame"));
    let mut a = EvalAnswer::default();
    a.add(frames[0].clone()).expect("frame");
    assert!(a.add(frames[0].clone()).expect_err("after last").contains("after the last"));
    let mut groups = frames.remove(0);
    groups.kind = pb::EvalDataKind::Groups as i32;
    assert!(EvalAnswer::default().add(groups).expect_err("mixed").contains("carries series"));
    let mut bad = pb::EvalResponse { kind: 7, ..Default::default() };
    bad.last = true;
    assert!(EvalAnswer::default().add(bad).expect_err("kind").contains("unknown answer kind 7"));
}

#[test]
fn engine_errors_keep_their_class_and_message_across_the_wire() {
    for kind in [
        ErrorKind::BadData,
        ErrorKind::Execution,
        ErrorKind::Canceled,
        ErrorKind::Timeout,
        ErrorKind::Unavailable,
        ErrorKind::Internal,
    ] {
        let s = status_from_query_error(QueryError::new(kind, "query processing would load too many samples"));
        let back = query_error_from_eval_status(&s).expect("classified");
        assert_eq!(back.kind, kind);
        assert_eq!(back.message, "query processing would load too many samples");
    }
    // A status without the class (transport failure, identity mismatch) is not the query's.
    assert!(query_error_from_eval_status(&Status::unavailable("connection refused")).is_none());
    assert_eq!(
        fragment_from_pb(pb::Fragment { mode: 9, ..Default::default() }).expect_err("mode"),
        "unknown fragment mode 9"
    );
}

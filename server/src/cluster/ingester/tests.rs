use super::*;
use tessera_model::Label;
use tessera_proto::ingester::ingester_server::Ingester;
use tessera_storage::EngineConfig;

use crate::cluster::{ClusterConfig, IngesterEntry};

#[test]
fn grpc_timeout_values_parse_in_every_unit() {
    assert_eq!(parse_grpc_timeout("1500m"), Some(Duration::from_millis(1500)));
    assert_eq!(parse_grpc_timeout("2S"), Some(Duration::from_secs(2)));
    assert_eq!(parse_grpc_timeout("1M"), Some(Duration::from_secs(60)));
    assert_eq!(parse_grpc_timeout("1H"), Some(Duration::from_secs(3600)));
    assert_eq!(parse_grpc_timeout("7u"), Some(Duration::from_micros(7)));
    assert_eq!(parse_grpc_timeout("7n"), Some(Duration::from_nanos(7)));
    assert_eq!(parse_grpc_timeout("5x"), None);
    assert_eq!(parse_grpc_timeout("S"), None);
    assert_eq!(parse_grpc_timeout("1234567890S"), None, "at most 8 digits");
}

fn cluster() -> ClusterConfig {
    ClusterConfig {
        shards: 4,
        replication_factor: 1,
        ingesters: vec![IngesterEntry { id: "i0".into(), addr: "127.0.0.1:1".into(), zone: String::new() }],
        ..ClusterConfig::default()
    }
}

fn series(name: &str, shards: u32) -> pb::Series {
    let labels = vec![Label::new("__name__", name)];
    let hash = crate::shards::series_hash("t", &labels);
    pb::Series {
        labels: vec![pb::Label { name: "__name__".into(), value: name.into() }],
        timestamps: vec![1000, 2000],
        values: vec![1.0, 2.0],
        shard: ShardId::of(hash, shards).0,
    }
}

#[tokio::test]
async fn push_then_select_round_trips_and_misrouted_or_foreign_requests_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = cluster();
    let id = Identity::of(&cfg);
    let all: Vec<ShardId> = (0..4).map(ShardId).collect();
    let shards = Shards::open_ids(dir.path(), 4, &all, &EngineConfig::default(), 2, &|_, _| {}).expect("open");
    let svc = IngesterService::new("i0".into(), id.clone(), Arc::new(shards));
    let me = Some(convert::identity_to_pb(&id));

    let push = |cluster: Option<pb::ClusterIdentity>, series: Vec<pb::Series>| {
        Request::new(pb::PushRequest { cluster, tenant: "t".into(), series, metadata: vec![] })
    };
    let resp = svc.push(push(me.clone(), vec![series("a", 4), series("b", 4)])).await.expect("push").into_inner();
    let accepted: u64 = resp.shards.iter().map(|o| o.accepted).sum();
    assert_eq!(accepted, 4);
    assert!(resp.shards.iter().all(|o| o.error.is_empty()));
    // The same request again: stored once (retries are harmless).
    let again = svc.push(push(me.clone(), vec![series("a", 4), series("b", 4)])).await.expect("push").into_inner();
    assert_eq!(again.shards.iter().map(|o| o.appended).sum::<u64>(), 0);

    let mut wrong = series("a", 4);
    wrong.shard = (wrong.shard + 1) % 4;
    let err = svc.push(push(me.clone(), vec![wrong])).await.expect_err("misrouted");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("hashes to shard"), "{}", err.message());

    let mut other = cluster();
    other.shards = 8;
    let err = svc.push(push(Some(convert::identity_to_pb(&Identity::of(&other))), vec![])).await.expect_err("foreign");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert!(err.message().contains("shard count: request 8, ingester \"i0\" 4"), "{}", err.message());

    let sel = pb::SelectRequest { cluster: me, tenant: "t".into(), matchers: vec![], start_ms: 0, end_ms: 10_000 };
    let mut stream = svc.select(Request::new(sel)).await.expect("select").into_inner();
    let mut names = Vec::new();
    while let Some(frame) = futures::StreamExt::next(&mut stream).await {
        for s in frame.expect("frame").series {
            let samples = convert::samples_from_chunks(&s.chunks, s.min_time_ms, 10_000).expect("decodes");
            assert_eq!(samples.iter().map(|p| p.t).collect::<Vec<_>>(), vec![1000, 2000]);
            names.push(s.labels[0].value.clone());
        }
    }
    names.sort();
    assert_eq!(names, vec!["a", "b"]);
}

fn raw(mint: i64, len: usize) -> RawChunk {
    RawChunk { encoding: tessera_storage::chunk::Encoding::Xor, mint, maxt: mint + 1, bytes: vec![7; len] }
}

async fn collect(stream: FrameStream<pb::SelectResponse>) -> Vec<pb::SelectResponse> {
    futures::StreamExt::collect::<Vec<_>>(stream).await.into_iter().map(|f| f.expect("frame")).collect()
}

#[tokio::test]
async fn select_frames_stay_within_the_budget_and_split_a_long_series_into_ordered_pieces() {
    let budget = 10_000;
    let long = SeriesChunks {
        labels: Labels::from_pairs([("__name__", "long")]),
        min_time: 5,
        chunks: (0..25).map(|i| raw(i * 10, 1_000)).collect(),
    };
    let short =
        SeriesChunks { labels: Labels::from_pairs([("__name__", "short")]), min_time: 0, chunks: vec![raw(0, 10)] };
    let frames = collect(chunk_frames(vec![long, short], budget)).await;
    assert!(frames.len() >= 3, "25 KB of chunks in 10 KB frames: {} frames", frames.len());
    for f in &frames {
        let size: usize = f.series.iter().flat_map(|s| &s.chunks).map(|c| c.data.len() + 32).sum();
        assert!(size <= budget, "frame of {size} bytes");
        assert!(
            prost::Message::encoded_len(f) <= budget + 200,
            "encoded frame of {} bytes",
            prost::Message::encoded_len(f)
        );
    }
    let pieces: Vec<&pb::ChunkedSeries> = frames.iter().flat_map(|f| &f.series).collect();
    let long_starts: Vec<i64> = pieces
        .iter()
        .filter(|p| p.labels[0].value == "long")
        .inspect(|p| assert_eq!(p.min_time_ms, 5, "every piece carries the series' min time"))
        .flat_map(|p| p.chunks.iter().map(|c| c.min_time_ms))
        .collect();
    assert_eq!(long_starts, (0..25).map(|i| i * 10).collect::<Vec<_>>(), "every chunk once, in order");
    assert_eq!(pieces.last().map(|p| p.labels[0].value.as_str()), Some("short"));
}

#[tokio::test]
async fn a_chunk_larger_than_the_frame_budget_travels_alone() {
    let s = SeriesChunks {
        labels: Labels::from_pairs([("__name__", "big")]),
        min_time: 0,
        chunks: vec![raw(0, 50), raw(10, 5_000), raw(20, 50)],
    };
    let frames = collect(chunk_frames(vec![s], 1_000)).await;
    let per_frame: Vec<usize> = frames.iter().map(|f| f.series.iter().map(|s| s.chunks.len()).sum()).collect();
    assert_eq!(per_frame, vec![1, 1, 1]);
    assert!(collect(chunk_frames(Vec::new(), 1_000)).await.is_empty(), "no series: no frame");
}

#[tokio::test]
async fn a_read_whose_grpc_timeout_has_passed_answers_deadline_exceeded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = cluster();
    let id = Identity::of(&cfg);
    let all: Vec<ShardId> = (0..4).map(ShardId).collect();
    let shards = Shards::open_ids(dir.path(), 4, &all, &EngineConfig::default(), 2, &|_, _| {}).expect("open");
    let svc = IngesterService::new("i0".into(), id.clone(), Arc::new(shards));
    let me = Some(convert::identity_to_pb(&id));
    let mut req = Request::new(pb::LabelNamesRequest {
        cluster: me,
        tenant: "t".into(),
        matchers: vec![],
        start_ms: 0,
        end_ms: 10_000,
    });
    req.metadata_mut().insert("grpc-timeout", "1n".parse().expect("metadata value"));
    std::thread::sleep(Duration::from_millis(2));
    let err = svc.label_names(req).await.expect_err("deadline passed");
    assert_eq!(err.code(), tonic::Code::DeadlineExceeded, "{err:?}");
}

#[tokio::test]
async fn a_restarted_ingester_refuses_writes_names_its_holes_and_streams_a_shard_to_a_repairing_peer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = cluster();
    let id = Identity::of(&cfg);
    let me = Some(convert::identity_to_pb(&id));
    let all: Vec<ShardId> = (0..4).map(ShardId).collect();
    let open =
        || Arc::new(Shards::open_ids(dir.path(), 4, &all, &EngineConfig::default(), 2, &|_, _| {}).expect("open"));
    let push = |series: Vec<pb::Series>| {
        Request::new(pb::PushRequest { cluster: me.clone(), tenant: "t".into(), series, metadata: vec![] })
    };

    // First start: no holes; a write and a select answer without the header.
    let shards = open();
    let book = Arc::new(HoleBook::open(dir.path(), &all, &shards, 600_000, true).expect("book"));
    let svc = IngesterService::new("i0".into(), id.clone(), Arc::clone(&shards)).with_holes(book);
    let resp = svc.push(push(vec![series("a", 4)])).await.expect("push").into_inner();
    assert!(resp.shards.iter().all(|o| o.error.is_empty() && o.accepted == 2));
    let sel = |start_ms, end_ms| pb::SelectRequest {
        cluster: me.clone(),
        tenant: "t".into(),
        matchers: vec![],
        start_ms,
        end_ms,
    };
    let answer = svc.select(Request::new(sel(0, 10_000))).await.expect("select");
    assert!(answer.metadata().get(holes::HOLES_HEADER).is_none());
    drop((svc, answer));
    drop(shards);

    // Restart: shard of "a" has a hole from its newest sample (2000) minus the window,
    // refuses writes, and names the hole to reads that overlap it only.
    let shards = open();
    let book = Arc::new(HoleBook::open(dir.path(), &all, &shards, 600_000, true).expect("book"));
    let svc = IngesterService::new("i0".into(), id.clone(), Arc::clone(&shards)).with_holes(Arc::clone(&book));
    let resp = svc.push(push(vec![series("b", 4)])).await.expect("push").into_inner();
    assert!(resp.shards.iter().all(|o| o.error.contains("catching up") && o.accepted == 0), "{resp:?}");
    let answer = svc.select(Request::new(sel(0, 10_000))).await.expect("select");
    let header = answer.metadata().get(holes::HOLES_HEADER).expect("holes header").to_str().expect("ascii");
    let named = holes::parse_header(header).expect("parse");
    let a_shard = series("a", 4).shard;
    assert!(
        named.contains(&ShardHole { shard: a_shard, hole: Hole { from: 2000 - 600_000, to: i64::MAX } }),
        "{named:?}"
    );

    // The Repair stream of that shard carries its series with the tenant.
    let req = pb::RepairRequest {
        cluster: me.clone(),
        shard: a_shard,
        start_ms: 0,
        end_ms: i64::MAX,
        requester: "i1".into(),
    };
    let mut stream = svc.repair(Request::new(req)).await.expect("repair").into_inner();
    let mut got = Vec::new();
    while let Some(frame) = futures::StreamExt::next(&mut stream).await {
        for s in frame.expect("frame").series {
            let series = s.series.expect("series");
            got.push((s.tenant, series.labels[0].value.clone(), series.timestamps));
        }
    }
    assert_eq!(got, vec![("t".to_string(), "a".to_string(), vec![1000, 2000])]);
    let bad = pb::RepairRequest { cluster: me.clone(), shard: a_shard, start_ms: 5, end_ms: 4, requester: "i1".into() };
    assert_eq!(svc.repair(Request::new(bad)).await.err().map(|e| e.code()), Some(tonic::Code::InvalidArgument));

    // Once repaired, writes are taken and reads name no hole.
    for id in &all {
        book.accept_writes(*id);
        book.clear(*id, &book.holes(*id));
    }
    let resp = svc.push(push(vec![series("b", 4)])).await.expect("push").into_inner();
    assert!(resp.shards.iter().all(|o| o.error.is_empty()), "{resp:?}");
    let answer = svc.select(Request::new(sel(0, 10_000))).await.expect("select");
    assert!(answer.metadata().get(holes::HOLES_HEADER).is_none());
}

fn open_all(dir: &std::path::Path) -> Arc<Shards> {
    let all: Vec<ShardId> = (0..4).map(ShardId).collect();
    Arc::new(Shards::open_ids(dir, 4, &all, &EngineConfig::default(), 2, &|_, _| {}).expect("open"))
}

async fn stored(svc: &IngesterService, me: &Option<pb::ClusterIdentity>) -> usize {
    let sel =
        pb::SelectRequest { cluster: me.clone(), tenant: "t".into(), matchers: vec![], start_ms: 0, end_ms: 10_000 };
    let mut stream = svc.select(Request::new(sel)).await.expect("select").into_inner();
    let mut n = 0;
    while let Some(frame) = futures::StreamExt::next(&mut stream).await {
        n += frame.expect("frame").series.len();
    }
    n
}

#[tokio::test]
async fn a_push_past_its_deadline_on_arrival_or_while_queued_is_refused_unwritten_and_leaves_a_hole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let id = Identity::of(&cluster());
    let me = Some(convert::identity_to_pb(&id));
    let shards = open_all(dir.path());
    let book = Arc::new(HoleBook::none(shards.ids()));
    let svc = IngesterService::new("i0".into(), id.clone(), Arc::clone(&shards)).with_holes(Arc::clone(&book));
    let push = |timeout: &str| {
        let mut r = Request::new(pb::PushRequest {
            cluster: me.clone(),
            tenant: "t".into(),
            series: vec![series("a", 4)],
            metadata: vec![],
        });
        r.metadata_mut().insert("grpc-timeout", timeout.parse().expect("metadata value"));
        r
    };
    let a_shard = ShardId(series("a", 4).shard);

    // Arrived late: refused before anything is written; the shard now knows it may
    // miss those samples (the other replicas may have taken them).
    let late = push("1n");
    std::thread::sleep(Duration::from_millis(2));
    let err = svc.push(late).await.expect_err("deadline passed on arrival");
    assert_eq!(err.code(), tonic::Code::DeadlineExceeded, "{err:?}");
    assert_eq!(stored(&svc, &me).await, 0, "nothing appended");
    assert_eq!(book.holes(a_shard), vec![Hole { from: 1000, to: 2000 }]);
    book.clear(a_shard, &book.holes(a_shard));

    // Deadline passes while the push waits for a storage permit: refused the same way.
    let stall = shards.stall_appends().await;
    let svc2 = svc.clone();
    let req = push("150m");
    let queued = tokio::spawn(async move { svc2.push(req).await });
    tokio::time::sleep(Duration::from_millis(400)).await;
    drop(stall);
    let err = queued.await.expect("task").expect_err("deadline passed while queued");
    assert_eq!(err.code(), tonic::Code::DeadlineExceeded, "{err:?}");
    assert!(err.message().contains("waiting for a storage permit"), "{}", err.message());
    assert_eq!(stored(&svc, &me).await, 0, "nothing appended after the deadline");
    assert_eq!(book.holes(a_shard), vec![Hole { from: 1000, to: 2000 }]);

    // In time: written.
    let resp = svc.push(push("5S")).await.expect("in time").into_inner();
    assert!(resp.shards.iter().all(|o| o.error.is_empty() && o.accepted == 2), "{resp:?}");
    assert_eq!(stored(&svc, &me).await, 1);
}

fn meta(tenant: &str, metric: &str, help: &str) -> pb::MetricMetadata {
    pb::MetricMetadata {
        metric: metric.into(),
        r#type: "counter".into(),
        help: help.into(),
        unit: String::new(),
        shard: convert::metadata_shard(tenant, metric, 4).0,
    }
}

#[tokio::test]
async fn metadata_pushed_to_its_shard_is_answered_misrouted_metadata_refused_and_repair_carries_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let id = Identity::of(&cluster());
    let me = Some(convert::identity_to_pb(&id));
    let shards = open_all(dir.path());
    let svc = IngesterService::new("i0".into(), id.clone(), Arc::clone(&shards));
    let push = |metadata: Vec<pb::MetricMetadata>| {
        Request::new(pb::PushRequest { cluster: me.clone(), tenant: "t".into(), series: vec![], metadata })
    };
    let resp = svc
        .push(push(vec![meta("t", "x_total", "old"), meta("t", "x_total", "new"), meta("t", "y_total", "y")]))
        .await
        .expect("metadata-only push")
        .into_inner();
    assert!(!resp.shards.is_empty() && resp.shards.iter().all(|o| o.error.is_empty()), "{resp:?}");

    let mut wrong = meta("t", "x_total", "h");
    wrong.shard = (wrong.shard + 1) % 4;
    let err = svc.push(push(vec![wrong])).await.expect_err("misrouted");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("belongs to shard"), "{}", err.message());
    let mut bad = meta("t", "x_total", "h");
    bad.r#type = "bogus".into();
    assert_eq!(svc.push(push(vec![bad])).await.err().map(|e| e.code()), Some(tonic::Code::InvalidArgument));

    let ask = |metric: &str, limit: u64| {
        Request::new(pb::MetadataRequest { cluster: me.clone(), tenant: "t".into(), metric: metric.into(), limit })
    };
    let all = svc.metadata(ask("", 0)).await.expect("metadata").into_inner().families;
    let names: Vec<&str> = all.iter().map(|f| f.metric.as_str()).collect();
    assert_eq!(names, vec!["x_total", "y_total"]);
    let helps: Vec<&str> = all[0].entries.iter().map(|e| e.help.as_str()).collect();
    assert_eq!(helps, vec!["new", "old"], "newest first");
    assert_eq!(svc.metadata(ask("y_total", 0)).await.expect("one").into_inner().families.len(), 1);
    assert_eq!(svc.metadata(ask("", 1)).await.expect("limit").into_inner().families.len(), 1);

    // The Repair stream of x_total's shard starts with its metadata.
    let x_shard = meta("t", "x_total", "").shard;
    let req = pb::RepairRequest {
        cluster: me.clone(),
        shard: x_shard,
        start_ms: 0,
        end_ms: i64::MAX,
        requester: "i1".into(),
    };
    let mut stream = svc.repair(Request::new(req)).await.expect("repair").into_inner();
    let first = futures::StreamExt::next(&mut stream).await.expect("a frame").expect("ok");
    assert_eq!(first.metadata.len(), 1);
    assert_eq!(first.metadata[0].tenant, "t");
    assert!(first.metadata[0].entries.iter().any(|e| e.metric == "x_total" && e.help == "new"));
    assert!(first.metadata[0].entries.iter().all(|e| e.shard == x_shard));
}

#[tokio::test]
async fn cardinality_counts_each_shard_of_the_tenant_apart_and_status_reports_holes_per_shard() {
    let dir = tempfile::tempdir().expect("tempdir");
    let id = Identity::of(&cluster());
    let me = Some(convert::identity_to_pb(&id));
    let shards = open_all(dir.path());
    let book = Arc::new(HoleBook::none(shards.ids()));
    let svc = IngesterService::new("i0".into(), id.clone(), Arc::clone(&shards)).with_holes(Arc::clone(&book));
    let names = ["a", "b", "c", "d", "e", "f"];
    let req = pb::PushRequest {
        cluster: me.clone(),
        tenant: "t".into(),
        series: names.iter().map(|n| series(n, 4)).collect(),
        metadata: vec![],
    };
    svc.push(Request::new(req)).await.expect("push");
    let other = pb::PushRequest { cluster: me.clone(), tenant: "u".into(), series: vec![], metadata: vec![] };
    svc.push(Request::new(other)).await.expect("empty push of another tenant");

    let req = pb::CardinalityRequest { cluster: me.clone(), tenant: "t".into() };
    let resp = svc.cardinality(Request::new(req)).await.expect("cardinality");
    assert!(resp.metadata().get(holes::HOLES_HEADER).is_none());
    let mut stream = resp.into_inner();
    let mut per_shard: BTreeMap<u32, (u64, Vec<(String, String, u64)>)> = BTreeMap::new();
    while let Some(frame) = futures::StreamExt::next(&mut stream).await {
        for p in frame.expect("frame").shards {
            let e = per_shard.entry(p.shard).or_insert((p.series, Vec::new()));
            e.1.extend(p.pairs.into_iter().map(|c| (c.name, c.value, c.series)));
        }
    }
    assert_eq!(per_shard.len(), 4, "every shard answers, empty ones with zero");
    assert_eq!(per_shard.values().map(|(n, _)| n).sum::<u64>(), 6);
    for name in names {
        let shard = series(name, 4).shard;
        let (_, pairs) = &per_shard[&shard];
        assert!(pairs.contains(&("__name__".into(), name.into(), 1)), "{name} counted in its own shard {shard}");
    }

    book.add(ShardId(1), Hole { from: 5, to: i64::MAX });
    let st = svc.status(Request::new(pb::StatusRequest { cluster: me.clone() })).await.expect("status").into_inner();
    assert_eq!(st.shard_status.len(), 4);
    assert_eq!(st.shard_status.iter().map(|s| s.series).sum::<u64>(), st.series);
    assert_eq!(st.shard_status[1].holes, vec![pb::HoleRange { from_ms: 5, to_ms: i64::MAX }]);
    assert!(st.shard_status.iter().filter(|s| s.shard != 1).all(|s| s.holes.is_empty()));
    let req = pb::CardinalityRequest { cluster: me.clone(), tenant: "t".into() };
    let resp = svc.cardinality(Request::new(req)).await.expect("cardinality");
    assert_eq!(resp.metadata().get(holes::HOLES_HEADER).and_then(|v| v.to_str().ok()), Some("1:5:9223372036854775807"));
}

#[test]
fn cardinality_pieces_split_a_shards_pairs_within_the_budget_and_keep_them_all() {
    let mut counter = CardinalityCounter::default();
    for i in 0..500 {
        counter.add(&Labels::from_pairs([("__name__", "m"), ("instance", &format!("host-{i:04}"))]));
    }
    let pieces = cardinality_pieces(ShardId(3), &counter, 1_000);
    assert!(pieces.len() > 5, "{} pieces", pieces.len());
    assert!(pieces.iter().all(|p| p.shard == 3 && p.series == 500));
    assert!(pieces.iter().all(|p| prost::Message::encoded_len(p) < 1_300));
    let pairs: usize = pieces.iter().map(|p| p.pairs.len()).sum();
    assert_eq!(pairs, 501);
    let empty = cardinality_pieces(ShardId(0), &CardinalityCounter::default(), 1_000);
    assert_eq!(empty.len(), 1, "an empty shard still reports its zero");
}

/// The frames of an `Eval` answer collected, or its error status.
async fn eval(svc: &IngesterService, req: pb::EvalRequest) -> Result<tessera_query::FragmentOutput, Status> {
    let mut stream = svc.eval(Request::new(req)).await?.into_inner();
    let mut answer = convert::EvalAnswer::default();
    while let Some(frame) = futures::StreamExt::next(&mut stream).await {
        answer.add(frame?).map_err(Status::internal)?;
    }
    answer.finish().map_err(Status::internal)
}

#[tokio::test]
async fn eval_evaluates_a_fragment_over_the_named_shards_and_refuses_holes_and_overspending() {
    let dir = tempfile::tempdir().expect("tempdir");
    let id = Identity::of(&cluster());
    let me = Some(convert::identity_to_pb(&id));
    let shards = open_all(dir.path());
    let book = Arc::new(HoleBook::none(shards.ids()));
    let svc = IngesterService::new("i0".into(), id.clone(), Arc::clone(&shards)).with_holes(Arc::clone(&book));
    let names: Vec<String> = (0..12).map(|i| format!("m{i}")).collect();
    let sent: Vec<pb::Series> = names.iter().map(|n| series(n, 4)).collect();
    let per_shard = |s: u32| sent.iter().filter(|x| x.shard == s).count();
    let resp = svc
        .push(Request::new(pb::PushRequest {
            cluster: me.clone(),
            tenant: "t".into(),
            series: sent.clone(),
            metadata: vec![],
        }))
        .await
        .expect("push")
        .into_inner();
    assert!(resp.shards.iter().all(|o| o.error.is_empty()), "{resp:?}");
    // `count({__name__=~"m.*"})` at t = 2000 as the querier's planner sends it.
    let fragment = |max_samples: u64, mode: tessera_query::FragmentMode, query: &str| tessera_query::Fragment {
        query: query.into(),
        path: vec![],
        mode,
        start: 2000,
        end: 2000,
        step: 1,
        query_start: 2000,
        query_end: 2000,
        query_step: 0,
        lookback_delta_ms: 300_000,
        default_subquery_step_ms: 60_000,
        max_samples,
        param: vec![],
        string_param: None,
    };
    let count = "count({__name__=~\"m.*\"})";
    let req = |shards: Vec<u32>, f: tessera_query::Fragment| pb::EvalRequest {
        cluster: me.clone(),
        tenant: "t".into(),
        shards,
        fragment: Some(convert::fragment_to_pb(&f)),
    };
    let counted = |o: tessera_query::FragmentOutput| match o.data {
        tessera_query::FragmentData::Groups(g) => g.iter().flat_map(|g| g.steps.iter().map(|s| s.count)).sum::<f64>(),
        other => panic!("not partial groups: {other:?}"),
    };
    let all = eval(&svc, req(vec![0, 1, 2, 3], fragment(1000, tessera_query::FragmentMode::Partial, count)))
        .await
        .expect("eval");
    assert_eq!(counted(all), 12.0);
    let busy = (0..4).find(|&s| per_shard(s) > 0).expect("a shard with series");
    let one =
        eval(&svc, req(vec![busy], fragment(1000, tessera_query::FragmentMode::Partial, count))).await.expect("eval");
    assert_eq!(counted(one), per_shard(busy) as f64, "only the named shard's series");

    // More samples than the fragment may hold: the engine's error with its class.
    let err =
        eval(&svc, req(vec![0, 1, 2, 3], fragment(2, tessera_query::FragmentMode::Concat, "{__name__=~\"m.*\"}")))
            .await
            .expect_err("over the sample budget");
    let e = convert::query_error_from_eval_status(&err).expect("an engine error");
    assert_eq!(e.kind, tessera_query::ErrorKind::Execution);
    assert!(e.message.contains("too many samples"), "{e}");

    // A malformed fragment is the caller's error.
    let mut bad = fragment(1000, tessera_query::FragmentMode::Partial, count);
    bad.path = vec![7];
    let err = eval(&svc, req(vec![0], bad)).await.expect_err("bad path");
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err}");

    // A hole of a named shard overlapping what the evaluation reads fails the call; the
    // other shards still evaluate.
    book.add(ShardId(busy), Hole { from: 1500, to: 1600 });
    let err = eval(&svc, req(vec![busy], fragment(1000, tessera_query::FragmentMode::Partial, count)))
        .await
        .expect_err("hole");
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err}");
    assert!(err.message().contains("may be missing writes"), "{err}");
    let others: Vec<u32> = (0..4).filter(|&s| s != busy).collect();
    let rest =
        eval(&svc, req(others, fragment(1000, tessera_query::FragmentMode::Partial, count))).await.expect("eval");
    assert_eq!(counted(rest), (12 - per_shard(busy)) as f64);
    // No shard, or one placed elsewhere: refused.
    let err =
        eval(&svc, req(vec![], fragment(1000, tessera_query::FragmentMode::Partial, count))).await.expect_err("none");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    let err =
        eval(&svc, req(vec![9], fragment(1000, tessera_query::FragmentMode::Partial, count))).await.expect_err("9");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
}

#[tokio::test]
async fn an_eval_waits_for_the_pushes_that_arrived_before_it() {
    let gate = Arc::new(PushGate::default());
    let first = gate.enter();
    let waiter = {
        let gate = Arc::clone(&gate);
        tokio::spawn(async move { gate.wait_for_earlier(Instant::now() + Duration::from_secs(10)).await })
    };
    // Let the evaluation arrive; a push that arrives later does not hold it.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let _later = gate.enter();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiter.is_finished(), "the evaluation waits for the earlier push");
    drop(first);
    tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("released").expect("task");
}

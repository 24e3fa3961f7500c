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
        Request::new(pb::PushRequest { cluster, tenant: "t".into(), series })
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
    let push =
        |series: Vec<pb::Series>| Request::new(pb::PushRequest { cluster: me.clone(), tenant: "t".into(), series });

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

use std::sync::Arc;

use tessera_model::{Label, MatchOp, Matcher, Sample};
use tessera_query::Queryable;
use tessera_storage::{EngineConfig, Interrupt};

use super::*;

// Tests of the tenancy and fan-out layer over real engines in temporary directories.

fn labels(pairs: &[(&str, &str)]) -> Vec<Label> {
    pairs.iter().map(|(n, v)| Label { name: (*n).into(), value: (*v).into() }).collect()
}

fn series(tenant: &str, pairs: &[(&str, &str)], samples: &[(i64, f64)]) -> PushSeries {
    let labels = labels(pairs);
    let hash = series_hash(tenant, &labels);
    PushSeries { labels, samples: samples.iter().map(|&(t, v)| Sample { t, v }).collect(), hash }
}

/// Opens `n` shards with default engine settings and 4 blocking permits.
fn open(dir: &std::path::Path, n: usize) -> Arc<Shards> {
    Arc::new(Shards::open(dir, n, &EngineConfig::default(), 4, &|_, _| {}).expect("shards open"))
}

/// A request's storage interrupt (see [`request_controls`]) and its cancel guard.
fn interrupt(deadline: std::time::Instant) -> (Interrupt, CancelOnDrop) {
    let (ctl, guard) = request_controls(deadline);
    (Interrupt::new(ctl.deadline, ctl.cancel), guard)
}

fn name_eq(v: &str) -> Matcher {
    Matcher::new("__name__", MatchOp::Equal, v).expect("matcher")
}

/// A push spread over several shards reads back complete, sorted, and tenant-free.
#[tokio::test]
async fn pushed_series_are_read_back_without_the_tenant_label() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shards = open(dir.path(), 4);
    let batch: Vec<PushSeries> = (0..20)
        .map(|i| series("a", &[("__name__", "gpu_util"), ("gpu", &i.to_string())], &[(1000, i as f64)]))
        .collect();
    let out = shards.push("a", batch).await.expect("push");
    assert_eq!(out.accepted, 20);
    assert!(out.shard_seconds.len() > 1, "20 series should spread over several of 4 shards");
    let got = shards.select(None, "a", &[name_eq("gpu_util")], 0, 2000, &Interrupt::none()).expect("select");
    assert_eq!(got.len(), 20);
    assert!(got.iter().all(|s| s.labels.iter().all(|l| l.name != TENANT_LABEL)));
    assert!(got.windows(2).all(|w| w[0].labels < w[1].labels), "sorted by labels");
}

/// The tenant matcher is added on every read and the label stripped from every answer,
/// including the index reads that never touch samples.
#[tokio::test]
async fn tenants_never_see_each_others_series_labels_or_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shards = open(dir.path(), 2);
    shards
        .push("a", vec![series("a", &[("__name__", "up"), ("secret", "a-only")], &[(1, 1.0)])])
        .await
        .expect("push a");
    shards.push("b", vec![series("b", &[("__name__", "up"), ("job", "b")], &[(1, 2.0)])]).await.expect("push b");
    let b = shards.select(None, "b", &[name_eq("up")], 0, 10, &Interrupt::none()).expect("select");
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].samples[0].v, 2.0);
    let names = shards.label_names(None, "b", &[], i64::MIN, i64::MAX, &Interrupt::none()).expect("names");
    assert_eq!(names, vec!["__name__", "job"]);
    assert!(shards
        .label_values(None, "b", "secret", &[], i64::MIN, i64::MAX, &Interrupt::none())
        .expect("values")
        .is_empty());
    assert!(shards
        .label_values(None, "a", TENANT_LABEL, &[], i64::MIN, i64::MAX, &Interrupt::none())
        .expect("values")
        .is_empty());
    assert!(shards
        .series(None, "c", &[name_eq("up")], i64::MIN, i64::MAX, &Interrupt::none())
        .expect("series")
        .is_empty());
}

/// `{__tenant__="b"}` from tenant "a" could only be an attempt to read another tenant.
#[tokio::test]
async fn matcher_on_the_tenant_label_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shards = open(dir.path(), 1);
    let m = Matcher::new(TENANT_LABEL, MatchOp::Equal, "b").expect("matcher");
    let err = shards.select(None, "a", &[m], 0, 10, &Interrupt::none()).expect_err("reserved");
    assert!(err.message.contains("reserved"));
}

/// Storage reports rejections per shard batch; `push` maps them back to the caller's
/// index so the 400 names the right series.
#[tokio::test]
async fn rejected_samples_are_reported_with_their_request_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shards = open(dir.path(), 2);
    let s = |v: f64| series("a", &[("__name__", "x")], &[(5000, v)]);
    shards.push("a", vec![s(1.0)]).await.expect("first push");
    let ok = series("a", &[("__name__", "y")], &[(5000, 1.0)]);
    let out = shards.push("a", vec![ok, s(2.0)]).await.expect("second push");
    assert_eq!(out.rejected_duplicate, 1);
    assert_eq!(out.accepted, 1);
    let first = out.first_rejection.expect("a rejection");
    assert_eq!(first.index, 1);
    assert_eq!(first.labels, labels(&[("__name__", "x")]));
}

/// The synchronous `Queryable` view is what the PromQL engine calls from its blocking
/// pool; it must see only its tenant's series.
#[tokio::test]
async fn tenant_view_serves_the_query_engine_from_a_blocking_thread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shards = open(dir.path(), 3);
    shards
        .push("a", vec![series("a", &[("__name__", "up"), ("job", "n")], &[(10, 1.0), (20, 0.0)])])
        .await
        .expect("push");
    shards.push("b", vec![series("b", &[("__name__", "up"), ("job", "n")], &[(10, 9.0)])]).await.expect("push");
    let view = shards.tenant_view("a");
    let got = tokio::task::spawn_blocking(move || {
        let m = Matcher::equal("__name__", "up");
        view.select(&[m], &tessera_query::SelectHints::range(0, 100), &Default::default())
    })
    .await
    .expect("join")
    .expect("select")
    .data;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].labels.get("job"), Some("n"));
    assert_eq!(got[0].labels.get(TENANT_LABEL), None);
    assert_eq!(got[0].samples.len(), 2);
}

/// Storage requires sorted labels; uppercase names sort before `__name__` and the
/// tenant label, lower-case ones after it.
#[tokio::test]
async fn tenant_label_is_stored_at_its_sorted_position() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shards = open(dir.path(), 2);
    let pairs = [("UUID", "x"), ("__name__", "m"), ("job", "j")];
    let out = shards.push("t", vec![series("t", &pairs, &[(10, 1.0)])]).await.expect("push");
    assert_eq!(out.accepted, 1);
    let view = shards.tenant_view("t");
    let got = tokio::task::spawn_blocking(move || {
        view.select(&[Matcher::equal("UUID", "x")], &tessera_query::SelectHints::range(0, 100), &Default::default())
    })
    .await
    .expect("join")
    .expect("select")
    .data;
    assert_eq!(got.len(), 1);
    let names: Vec<&str> = got[0].labels.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, vec!["UUID", "__name__", "job"]);
}

/// An index call whose deadline passed (or whose request went away) stops in storage
/// with a timeout (canceled) error and frees its storage slot: with one slot, the next
/// call still runs.
#[tokio::test]
async fn index_scans_stop_at_their_deadline_or_cancel_and_free_their_slot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shards = Arc::new(Shards::open(dir.path(), 2, &EngineConfig::default(), 1, &|_, _| {}).expect("open"));
    // One sample from the far past next to a recent one: the day range spans ~2^31 days.
    let ancient = series("a", &[("__name__", "old")], &[(-(1i64 << 62), 1.0)]);
    let recent = series("a", &[("__name__", "new")], &[(1_700_000_000_000, 1.0)]);
    shards.push("a", vec![ancient, recent]).await.expect("push");

    let (expired, _guard) = interrupt(std::time::Instant::now());
    let err = shards.label_names(None, "a", &[], i64::MIN, i64::MAX, &expired).expect_err("deadline passed");
    assert_eq!(err.kind, ShardErrorKind::Timeout, "{}", err.message);

    let (stop, guard) = interrupt(std::time::Instant::now() + std::time::Duration::from_secs(60));
    drop(guard);
    let err = shards.series(None, "a", &[name_eq("new")], i64::MIN, i64::MAX, &stop).expect_err("canceled");
    assert_eq!(err.kind, ShardErrorKind::Canceled, "{}", err.message);

    // Bounded by the data that exists, a scan over all time is quick and complete.
    let started = std::time::Instant::now();
    let (stop, _guard) = interrupt(std::time::Instant::now() + std::time::Duration::from_secs(60));
    let values = shards.label_values(None, "a", "__name__", &[], i64::MIN, i64::MAX, &stop).expect("values");
    assert_eq!(values, vec!["new", "old"]);
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "took {:?}", started.elapsed());
}

/// The query engine's deadline reaches storage through `select`'s controls.
#[tokio::test]
async fn tenant_view_select_stops_at_the_query_deadline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shards = open(dir.path(), 2);
    shards.push("a", vec![series("a", &[("__name__", "up")], &[(10, 1.0)])]).await.expect("push");
    let view = shards.tenant_view("a");
    let err = tokio::task::spawn_blocking(move || {
        let m = Matcher::equal("__name__", "up");
        let ctl = tessera_query::QueryOptions {
            deadline: Some(std::time::Instant::now()),
            cancel: None,
            ..Default::default()
        };
        view.select(&[m], &tessera_query::SelectHints::range(0, 100), &ctl)
    })
    .await
    .expect("join")
    .expect_err("deadline passed");
    assert_eq!(err.kind, tessera_query::ErrorKind::Timeout, "{}", err.message);
}

/// Shards are addressed by their logical id: a process that opens shards 1 and 3 of 4
/// stores into `shard-0001` and `shard-0003`, takes the series that hash there, and
/// refuses (unavailable, nothing written) a push with a series of a shard it does not
/// serve.
#[tokio::test]
async fn a_process_owning_some_shards_serves_only_those() {
    let dir = tempfile::tempdir().expect("tempdir");
    let owned = [ShardId(1), ShardId(3)];
    let shards = Shards::open_ids(dir.path(), 4, &owned, &EngineConfig::default(), 2, &|_, _| {}).expect("open");
    assert_eq!(shards.len(), 2);
    assert_eq!(shards.total(), 4);
    assert_eq!(shards.ids().collect::<Vec<_>>(), owned);
    assert!(dir.path().join("shard-0001").is_dir() && dir.path().join("shard-0003").is_dir());
    assert!(!dir.path().join("shard-0000").exists());

    // One series of each of the 4 shards.
    let mut by_shard: Vec<Option<PushSeries>> = vec![None, None, None, None];
    for i in 0.. {
        let s = series("a", &[("__name__", "m"), ("i", &i.to_string())], &[(1000, 1.0)]);
        let id = ShardId::of(s.hash, 4);
        by_shard[id.0 as usize].get_or_insert(s);
        if by_shard.iter().all(Option::is_some) {
            break;
        }
    }
    let by_shard: Vec<PushSeries> = by_shard.into_iter().flatten().collect();
    let out = shards.push("a", vec![by_shard[1].clone(), by_shard[3].clone()]).await.expect("owned shards");
    assert_eq!(out.accepted, 2);
    let ids: Vec<ShardId> = out.shard_seconds.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, owned, "each part went to its logical shard");

    let err = shards.push("a", vec![by_shard[1].clone(), by_shard[0].clone()]).await.expect_err("shard 0 not here");
    assert_eq!(err.kind, ShardErrorKind::Unavailable);
    assert!(err.message.contains("shard 0 is not served"), "{}", err.message);
    let got = shards.series(None, "a", &[name_eq("m")], 0, 2000, &Interrupt::none()).expect("series");
    assert_eq!(got.len(), 2, "the refused push wrote nothing, the owned series are there");

    let bad = Shards::open_ids(dir.path(), 4, &[ShardId(4)], &EngineConfig::default(), 2, &|_, _| {});
    assert!(bad.is_err(), "shard 4 does not exist among 4");
}

/// The PromQL engine sees a shard that cannot serve now as unavailable (503), and
/// lasting damage as internal (500), not everything as internal.
#[test]
fn storage_failures_reach_the_query_engine_with_their_class() {
    let poisoned = tessera_storage::Error::Poisoned { cause: "a WAL fsync failed".into() };
    let e = tenant_view::query_error(ShardError::from_storage(Some(ShardId(2)), &poisoned));
    assert_eq!(e.kind, tessera_query::ErrorKind::Unavailable, "{}", e.message);
    assert!(e.message.contains("shard 2"), "{}", e.message);
    let corrupt = tessera_storage::Error::Corrupt { what: "chunk", detail: "bad crc".into() };
    let e = tenant_view::query_error(ShardError::from_storage(Some(ShardId(0)), &corrupt));
    assert_eq!(e.kind, tessera_query::ErrorKind::Internal);
}

/// The index reads of the read trait answer from the index, for the view's tenant only,
/// from a blocking thread.
#[tokio::test]
async fn tenant_view_serves_series_label_names_and_values_through_the_read_trait() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shards = open(dir.path(), 3);
    shards.push("a", vec![series("a", &[("__name__", "up"), ("job", "x")], &[(10, 1.0)])]).await.expect("push");
    shards.push("a", vec![series("a", &[("__name__", "up"), ("job", "y")], &[(10, 1.0)])]).await.expect("push");
    shards.push("b", vec![series("b", &[("__name__", "up"), ("zone", "z")], &[(10, 1.0)])]).await.expect("push");
    let view = shards.tenant_view("a");
    let (series, names, values) = tokio::task::spawn_blocking(move || {
        let hints = tessera_query::SelectHints::range(0, 100);
        let ctl = tessera_query::QueryOptions::default();
        let up = [Matcher::equal("__name__", "up")];
        (
            view.series(&up, &hints, &ctl).expect("series").data,
            view.label_names(&[], &hints, &ctl).expect("names").data,
            view.label_values("job", &[], &hints, &ctl).expect("values").data,
        )
    })
    .await
    .expect("join");
    let jobs: Vec<Option<&str>> = series.iter().map(|ls| ls.get("job")).collect();
    assert_eq!(jobs, vec![Some("x"), Some("y")]);
    assert!(series.iter().all(|ls| ls.get(TENANT_LABEL).is_none()));
    assert_eq!(names, vec!["__name__", "job"], "no zone (tenant b), no __tenant__");
    assert_eq!(values, vec!["x", "y"]);
}

/// However many reads arrive at once (PromQL selects, remote read and index reads all
/// go through the tenant view), at most `permits` shard reads run at once, and the
/// parts of one read still overlap. The readers are plain threads: no runtime needed.
#[tokio::test]
async fn concurrent_reads_never_run_more_shard_reads_than_the_read_slots() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shards = Arc::new(Shards::open(dir.path(), 8, &EngineConfig::default(), 2, &|_, _| {}).expect("open"));
    let batch: Vec<PushSeries> = (0..400)
        .map(|i| {
            let samples: Vec<(i64, f64)> = (0..100).map(|k| (k * 1000, k as f64)).collect();
            series("a", &[("__name__", "m"), ("i", &i.to_string())], &samples)
        })
        .collect();
    shards.push("a", batch).await.expect("push");
    let readers: Vec<_> = (0..8)
        .map(|r| {
            let view = shards.tenant_view("a");
            std::thread::spawn(move || {
                let m = [Matcher::equal("__name__", "m")];
                let hints = tessera_query::SelectHints::range(0, 100_000);
                let ctl = tessera_query::QueryOptions::default();
                for _ in 0..5 {
                    if r % 2 == 0 {
                        assert_eq!(view.select(&m, &hints, &ctl).expect("select").data.len(), 400);
                    } else {
                        assert_eq!(view.series(&m, &hints, &ctl).expect("series").data.len(), 400);
                    }
                }
            })
        })
        .collect();
    for r in readers {
        r.join().expect("reader");
    }
    assert_eq!(shards.read_slots.peak(), 2, "bounded by the 2 read slots, and both used");
    assert_eq!(shards.reads_in_flight(), 0, "every slot freed");
}

/// A read whose deadline passes while every read slot is taken ends with a timeout
/// naming the wait, instead of running anyway or waiting past its deadline.
#[tokio::test]
async fn a_read_waits_for_a_read_slot_only_until_its_deadline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shards = Arc::new(Shards::open(dir.path(), 2, &EngineConfig::default(), 1, &|_, _| {}).expect("open"));
    shards.push("a", vec![series("a", &[("__name__", "up")], &[(10, 1.0)])]).await.expect("push");
    let view = shards.tenant_view("a");
    let held = shards.read_slots.acquire(&Interrupt::none()).expect("the only slot");
    let started = std::time::Instant::now();
    let err = std::thread::scope(|s| {
        s.spawn(|| {
            let m = [Matcher::equal("__name__", "up")];
            let deadline = std::time::Instant::now() + std::time::Duration::from_millis(200);
            let ctl = tessera_query::QueryOptions { deadline: Some(deadline), cancel: None, ..Default::default() };
            view.select(&m, &tessera_query::SelectHints::range(0, 100), &ctl)
        })
        .join()
        .expect("join")
    })
    .expect_err("no slot before the deadline");
    assert_eq!(err.kind, tessera_query::ErrorKind::Timeout, "{}", err.message);
    assert!(err.message.contains("read slot"), "{}", err.message);
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
    drop(held);
    let view = shards.tenant_view("a");
    let m = [Matcher::equal("__name__", "up")];
    assert_eq!(
        view.select(&m, &tessera_query::SelectHints::range(0, 100), &Default::default()).expect("select").data.len(),
        1
    );
}

/// The streamed select gives the series `select` gives (shard after shard in storage
/// order, where `select` sorts by labels after the tenant label is stripped), holds no
/// read slot between series, and stops when canceled.
#[tokio::test]
async fn a_streamed_select_reads_the_select_series_one_slot_at_a_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shards = open(dir.path(), 4);
    let mut batch: Vec<PushSeries> = (0..30)
        .map(|i| series("a", &[("__name__", "m"), ("gpu", &format!("{i:02}"))], &[(1000, i as f64), (2000, 1.0)]))
        .collect();
    // `__scheme__` sorts before `__tenant__`: stored, this series comes before the one
    // without it; stripped, after it.
    batch.push(series("a", &[("__name__", "m"), ("__scheme__", "x")], &[(1000, 7.0)]));
    batch.push(series("a", &[("__name__", "m")], &[(1000, 8.0)]));
    batch.push(series("a", &[("__name__", "m"), ("gpu", "old")], &[(10, 8.0)]));
    shards.push("a", batch).await.expect("push");
    shards.push("b", vec![series("b", &[("__name__", "m")], &[(1000, 9.0)])]).await.expect("push");
    let want = shards.select(None, "a", &[name_eq("m")], 500, 2000, &Interrupt::none()).expect("select");
    assert_eq!(want.len(), 32, "30 gpus, the two plain ones; not the old one or tenant b's");
    let mut stream = shards
        .select_stream(None, "a", &[name_eq("m")], (500, 2000), Decode::Full, None, false, Interrupt::none())
        .expect("stream");
    let mut got = Vec::new();
    for s in stream.by_ref() {
        assert_eq!(shards.reads_in_flight(), 0, "no slot held between series");
        got.push(s.expect("series"));
    }
    // Shard after shard, each in storage order: the same series as select, which sorts.
    got.sort_by(|a, b| a.labels.cmp(&b.labels));
    assert_eq!(got, want);
    // A group of shards streams only its own series.
    let ids: Vec<ShardId> = shards.ids().take(2).collect();
    let part = shards
        .select_stream(Some(&ids), "a", &[name_eq("m")], (500, 2000), Decode::Full, None, false, Interrupt::none())
        .expect("stream");
    let part: Vec<_> = part.map(|s| s.expect("series")).collect();
    assert!(!part.is_empty() && part.len() < want.len());
    assert!(part.iter().all(|s| want.contains(s)));
    // Asked for two labels only: the same series and samples, each with those labels
    // alone (the tenant label is not among them either way).
    let only = ["__name__".to_string(), "gpu".to_string()];
    let mut named: Vec<_> = shards
        .select_stream(None, "a", &[name_eq("m")], (500, 2000), Decode::Full, Some(&only), false, Interrupt::none())
        .expect("stream")
        .map(|s| s.expect("series"))
        .map(|s| (s.labels.into_vec(), s.samples))
        .collect();
    let mut projected: Vec<_> = want
        .iter()
        .map(|s| {
            (
                s.labels.iter().filter(|l| only.contains(&l.name.to_string())).cloned().collect::<Vec<_>>(),
                s.samples.clone(),
            )
        })
        .collect();
    // Two series are named `m` alone now: their samples tell them apart.
    let key =
        |s: &(Vec<Label>, Vec<Sample>)| (s.0.clone(), s.1.iter().map(|x| (x.t, x.v.to_bits())).collect::<Vec<_>>());
    named.sort_by_key(key);
    projected.sort_by_key(key);
    assert_eq!(named, projected);
    assert!(named.iter().any(|(l, _)| l.len() == 1) && named.iter().any(|(l, _)| l.len() == 2));

    let (stop, guard) = interrupt(std::time::Instant::now() + std::time::Duration::from_secs(60));
    let mut stream =
        shards.select_stream(None, "a", &[name_eq("m")], (500, 2000), Decode::Full, None, false, stop).expect("stream");
    assert!(stream.next().expect("first").is_ok());
    drop(guard);
    let err = stream.next().expect("an error item").expect_err("canceled");
    assert_eq!(err.kind, ShardErrorKind::Canceled, "{}", err.message);
    assert!(stream.next().is_none(), "the stream ends after its error");
}

/// `count_over_time` and its kin read timestamps only, so decimal chunks skip decoding
/// their values (`SelectHints::reads_values`): the counts still leave out staleness
/// markers, and a function that reads values in the same query still gets them.
#[tokio::test]
async fn counting_functions_over_stored_chunks_skip_values_but_not_staleness_markers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shards = open(dir.path(), 2);
    let stale = f64::from_bits(tessera_model::STALE_NAN_BITS);
    // Two series of 15 s scrapes over an hour (decimal chunks once flushed): integers
    // and three-digit decimals, each with staleness markers where its target went away
    // and came back.
    let mut batch = Vec::new();
    let mut want = std::collections::BTreeMap::new();
    for (gpu, scale) in [("0", 1.0), ("1", 1000.0)] {
        let samples: Vec<(i64, f64)> = (0..240i64)
            .map(|i| {
                let v = if i % 50 == 49 { stale } else { ((i * 37) % 1000) as f64 / scale };
                (i * 15_000, v)
            })
            .collect();
        want.insert(gpu.to_string(), samples.clone());
        batch.push(series("a", &[("__name__", "m"), ("gpu", gpu)], &samples));
    }
    shards.push("a", batch).await.expect("push");
    let flushing = Arc::clone(&shards);
    tokio::task::spawn_blocking(move || flushing.flush_all()).await.expect("join").expect("flush");
    let view = shards.tenant_view("a");
    let engine = tessera_query::Engine::new(Default::default());
    let (start, end, step, range) = (60_000, 3_585_000, 45_000, 60_000);
    let query = |expr: &str| {
        let out = engine.range_query(&view, expr, start, end, step, &Default::default()).expect(expr);
        let tessera_query::Value::Matrix(series) = out.value else { panic!("{expr}: not a matrix") };
        series
            .into_iter()
            .map(|s| (s.labels.get("gpu").expect("gpu label").to_string(), s.samples))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    // What each window (t - 1m, t] holds, by the function.
    let expect = |f: &dyn Fn(&[f64]) -> f64| {
        want.iter()
            .map(|(gpu, samples)| {
                let pts = (start..=end)
                    .step_by(step as usize)
                    .map(|t| {
                        let vals: Vec<f64> = samples
                            .iter()
                            .filter(|&&(st, v)| st > t - range && st <= t && !tessera_model::is_stale_nan(v))
                            .map(|&(_, v)| v)
                            .collect();
                        Sample { t, v: f(&vals) }
                    })
                    .collect::<Vec<_>>();
                (gpu.clone(), pts)
            })
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let streamed_before = view.streamed_selects();
    assert_eq!(query("count_over_time(m[1m])"), expect(&|v| v.len() as f64));
    assert_eq!(query("present_over_time(m[1m])"), expect(&|_| 1.0));
    // Sums of decimals: the engine's compensated sum may differ in the last bit.
    let (got, sums) = (query("sum_over_time(m[1m])"), expect(&|v| v.iter().sum()));
    assert_eq!(got.keys().collect::<Vec<_>>(), sums.keys().collect::<Vec<_>>());
    for (gpu, pts) in &got {
        assert_eq!(pts.len(), sums[gpu].len());
        for (a, b) in pts.iter().zip(&sums[gpu]) {
            assert!(a.t == b.t && (a.v - b.v).abs() <= 1e-9 * b.v.abs().max(1.0), "gpu {gpu}: {a:?} vs {b:?}");
        }
    }
    assert!(view.streamed_selects() > streamed_before, "the queries read through the streamed select");
    // Each series' first 120 samples (two markers among them) are a decimal chunk,
    // whose values were skipped; the open chunk is read from the head (shipped as XOR).
    let stored = shards.select_chunks("a", &[name_eq("m")], 0, 4_000_000, &Interrupt::none()).expect("chunks");
    let encs: Vec<_> = stored.iter().flat_map(|s| &s.chunks).map(|c| (c.encoding, c.mint, c.maxt)).collect();
    let decimal = (tessera_storage::chunk::Encoding::Decimal, 0, 119 * 15_000);
    assert_eq!(encs.iter().filter(|&&c| c == decimal).count(), 2, "{encs:?}");
}

use std::sync::Arc;

use tessera_query::Queryable;
use tessera_storage::{EngineConfig, Label, MatchOp, Matcher, Sample};

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
    let got = shards.select("a", &[name_eq("gpu_util")], 0, 2000).await.expect("select");
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
    let b = shards.select("b", &[name_eq("up")], 0, 10).await.expect("select");
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].samples[0].v, 2.0);
    let names = shards.label_names("b", &[], i64::MIN, i64::MAX).await.expect("names");
    assert_eq!(names, vec!["__name__", "job"]);
    assert!(shards.label_values("b", "secret", &[], i64::MIN, i64::MAX).await.expect("values").is_empty());
    assert!(shards.label_values("a", TENANT_LABEL, &[], i64::MIN, i64::MAX).await.expect("values").is_empty());
    assert!(shards.series("c", &[name_eq("up")], i64::MIN, i64::MAX).await.expect("series").is_empty());
}

/// `{__tenant__="b"}` from tenant "a" could only be an attempt to read another tenant.
#[tokio::test]
async fn matcher_on_the_tenant_label_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shards = open(dir.path(), 1);
    let m = Matcher::new(TENANT_LABEL, MatchOp::Equal, "b").expect("matcher");
    let err = shards.select("a", &[m], 0, 10).await.expect_err("reserved");
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
        let m =
            tessera_query::Matcher { name: "__name__".into(), op: tessera_query::MatchOp::Equal, value: "up".into() };
        view.select(&[m], 0, 100)
    })
    .await
    .expect("join")
    .expect("select");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].labels.get("job"), Some("n"));
    assert_eq!(got[0].labels.get(TENANT_LABEL), None);
    assert_eq!(got[0].samples.len(), 2);
}

/// Storage requires sorted labels; uppercase names sort before `__name__`.
#[test]
fn tenant_label_is_inserted_at_its_sorted_position() {
    let out = with_tenant("t", labels(&[("UUID", "x"), ("__name__", "m"), ("job", "j")]));
    let names: Vec<&str> = out.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, vec!["UUID", "__name__", "__tenant__", "job"]);
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

    let (expired, _guard) = request_interrupt(std::time::Instant::now());
    let err = shards.label_names_until("a", &[], i64::MIN, i64::MAX, expired).await.expect_err("deadline passed");
    assert_eq!(err.kind, ShardErrorKind::Timeout, "{}", err.message);

    let (stop, guard) = request_interrupt(std::time::Instant::now() + std::time::Duration::from_secs(60));
    drop(guard);
    let err = shards.series_until("a", &[name_eq("new")], i64::MIN, i64::MAX, stop).await.expect_err("canceled");
    assert_eq!(err.kind, ShardErrorKind::Canceled, "{}", err.message);

    // Bounded by the data that exists, a scan over all time is quick and complete.
    let started = std::time::Instant::now();
    let (stop, _guard) = request_interrupt(std::time::Instant::now() + std::time::Duration::from_secs(60));
    let values = shards.label_values_until("a", "__name__", &[], i64::MIN, i64::MAX, stop).await.expect("values");
    assert_eq!(values, vec!["new", "old"]);
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "took {:?}", started.elapsed());
}

/// The query engine's deadline reaches storage through `select_controlled`.
#[tokio::test]
async fn tenant_view_select_stops_at_the_query_deadline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shards = open(dir.path(), 2);
    shards.push("a", vec![series("a", &[("__name__", "up")], &[(10, 1.0)])]).await.expect("push");
    let view = shards.tenant_view("a");
    let err = tokio::task::spawn_blocking(move || {
        let m =
            tessera_query::Matcher { name: "__name__".into(), op: tessera_query::MatchOp::Equal, value: "up".into() };
        let ctl = tessera_query::QueryOptions { deadline: Some(std::time::Instant::now()), cancel: None };
        view.select_controlled(&[m], 0, 100, &ctl)
    })
    .await
    .expect("join")
    .expect_err("deadline passed");
    assert_eq!(err.kind, tessera_query::ErrorKind::Timeout, "{}", err.message);
}

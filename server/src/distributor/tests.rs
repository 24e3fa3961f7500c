use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use prost::Message;
use tessera_proto::prometheus;
use tessera_storage::RejectReason;

use super::*;
use crate::shards::{series_hash, FirstRejection};

// The write pipeline over a scripted `ShardWriter`: what it sends, how it counts and
// names refusals, and how shard failures become domain errors.

/// A writer that records what it was given and answers with a scripted result.
struct Scripted {
    answer: Box<dyn Fn(&[PushSeries]) -> Result<PushOutcome, ShardError> + Send + Sync>,
    seen: Mutex<Vec<Vec<PushSeries>>>,
}

impl ShardWriter for Scripted {
    fn push<'a>(&'a self, _tenant: &'a str, series: Vec<PushSeries>) -> BoxFuture<'a, Result<PushOutcome, ShardError>> {
        let r = (self.answer)(&series);
        self.seen.lock().push(series);
        Box::pin(async move { r })
    }
}

fn scripted(answer: impl Fn(&[PushSeries]) -> Result<PushOutcome, ShardError> + Send + Sync + 'static) -> Scripted {
    Scripted { answer: Box::new(answer), seen: Mutex::new(Vec::new()) }
}

fn distributor(config: &Config) -> (Distributor, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    let d = Distributor::new(
        config,
        Arc::new(ActiveSeries::new(&config.limits)),
        Arc::new(MetadataStore::new(100, 1 << 20, 1024)),
        Arc::clone(&metrics),
    );
    (d, metrics)
}

/// A snappy-compressed remote-write 1.0 body of `n` series `up{i="<k>"}` with one
/// sample each, at the current time.
fn body(n: usize) -> Bytes {
    let t = now_ms();
    let req = prometheus::WriteRequest {
        timeseries: (0..n)
            .map(|i| prometheus::TimeSeries {
                labels: vec![prometheus::Label::new("__name__", "up"), prometheus::Label::new("i", i.to_string())],
                samples: vec![prometheus::Sample { value: 1.0, timestamp: t }],
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    Bytes::from(snap::raw::Encoder::new().compress_vec(&req.encode_to_vec()).expect("compress"))
}

#[tokio::test]
async fn valid_series_reach_the_writer_with_their_hash_and_the_outcome_counts_them() {
    let (d, metrics) = distributor(&Config::default());
    let w = scripted(|s| Ok(PushOutcome { accepted: s.len() as u64, appended: s.len() as u64, ..Default::default() }));
    let out = d.push(&w, "t", Version::V1, body(3)).await.expect("written");
    assert_eq!(out.samples, 3);
    let seen = w.seen.lock();
    assert_eq!(seen.len(), 1);
    for s in &seen[0] {
        assert_eq!(s.hash, series_hash("t", &s.labels), "hash of tenant and labels");
    }
    assert_eq!(metrics.samples_written.load(Ordering::Relaxed), 3);
}

/// Samples storage refuses because their series' chunks are unreadable are counted
/// under their own reason and in the 400's accounting, not silently dropped.
#[tokio::test]
async fn unreadable_samples_are_counted_and_named_in_the_rejection() {
    let (d, metrics) = distributor(&Config::default());
    let w = scripted(|s| {
        Ok(PushOutcome {
            accepted: s.len() as u64 - 1,
            appended: s.len() as u64 - 1,
            rejected_unreadable: 1,
            first_rejection: Some(FirstRejection {
                index: 1,
                labels: s[1].labels.clone(),
                t: s[1].samples[0].t,
                reason: RejectReason::Unreadable { cause: "Corruption: block checksum mismatch".into() },
            }),
            ..Default::default()
        })
    });
    let err = d.push(&w, "t", Version::V1, body(3)).await.expect_err("one series refused");
    let IngestError::Rejected { message, written } = &err else { panic!("not Rejected: {err:?}") };
    assert_eq!(*written, 2);
    assert!(message.contains("i=\"1\""), "names the series: {message}");
    assert!(message.contains("checksum mismatch"), "names the cause: {message}");
    assert!(message.contains("1 of 3 series had problems; 2 of 3 float samples"), "{message}");
    assert_eq!(metrics.samples_rejected.get(&["unreadable"]), 1);
    assert_eq!(err.written(), 2);
}

#[tokio::test]
async fn an_unavailable_shard_is_an_unavailable_ingest_error_counted_as_storage_error() {
    let (d, metrics) = distributor(&Config::default());
    let w = scripted(|_| Err(ShardError::unavailable("shard 3: storage engine refuses writes until restarted")));
    let err = d.push(&w, "t", Version::V1, body(2)).await.expect_err("shard down");
    assert!(matches!(err, IngestError::Unavailable { .. }), "{err:?}");
    assert_eq!(metrics.samples_rejected.get(&["storage_error"]), 2);
    let corrupt = scripted(|_| Err(ShardError::internal("shard 1: storage: corrupt chunk: bad crc")));
    let err = d.push(&corrupt, "t", Version::V1, body(1)).await.expect_err("shard broken");
    assert_eq!(err, IngestError::Internal("shard 1: storage: corrupt chunk: bad crc".into()));
}

#[tokio::test]
async fn over_the_rate_limit_nothing_is_written() {
    let mut config = Config::default();
    config.limits.ingestion_rate_samples_per_sec = 1.0;
    config.limits.ingestion_burst_samples = 1;
    let (d, metrics) = distributor(&config);
    let w = scripted(|s| Ok(PushOutcome { accepted: s.len() as u64, ..Default::default() }));
    d.push(&w, "t", Version::V1, body(1)).await.expect("within the burst");
    let err = d.push(&w, "t", Version::V1, body(5)).await.expect_err("over the rate");
    let IngestError::RateLimited { message, retry_after_secs } = &err else { panic!("{err:?}") };
    assert!(message.contains("no sample of this request was written"), "{message}");
    assert!(*retry_after_secs >= 1);
    assert_eq!(w.seen.lock().len(), 1, "the refused request never reached the writer");
    assert_eq!(metrics.samples_rejected.get(&["rate_limited"]), 5);
}

#[tokio::test]
async fn a_body_that_is_not_snappy_is_invalid() {
    let (d, _) = distributor(&Config::default());
    let w = scripted(|_| Ok(PushOutcome::default()));
    let err = d.push(&w, "t", Version::V1, Bytes::from_static(b"\xff\xff\xff\xff")).await.expect_err("garbage");
    assert!(matches!(&err, IngestError::Invalid(m) if m.contains("snappy")), "{err:?}");
}

/// A remote-write 1.0 body of one sample at `t` for each series `up{i="<name>"}`.
fn body_at(names: &[&str], t: i64, v: f64) -> Bytes {
    let req = prometheus::WriteRequest {
        timeseries: names
            .iter()
            .map(|n| prometheus::TimeSeries {
                labels: vec![prometheus::Label::new("__name__", "up"), prometheus::Label::new("i", n.to_string())],
                samples: vec![prometheus::Sample { value: v, timestamp: t }],
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    Bytes::from(snap::raw::Encoder::new().compress_vec(&req.encode_to_vec()).expect("compress"))
}

/// `up{i=name}`'s samples in tenant `t` of `shards`.
fn stored(shards: &Shards, name: &str) -> Vec<(i64, f64)> {
    let m = [
        tessera_model::Matcher::new("__name__", tessera_model::MatchOp::Equal, "up").expect("matcher"),
        tessera_model::Matcher::new("i", tessera_model::MatchOp::Equal, name).expect("matcher"),
    ];
    let stop = tessera_storage::Interrupt::none();
    let got = shards.select(None, "t", &m, i64::MIN, i64::MAX, &stop).expect("select");
    got.iter().flat_map(|s| s.samples.iter().map(|x| (x.t, x.v))).collect()
}

fn local_shards(dir: &std::path::Path, count: usize, cfg: tessera_storage::EngineConfig) -> Shards {
    Shards::open(dir, count, &cfg, 4, &|_, _| {}).expect("shards open")
}

/// The second request naming a series with the same bytes appends by id; the samples
/// land in the same series as through its labels, and refusals still name the series.
#[tokio::test]
async fn series_sent_again_are_written_by_id_to_the_same_series() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shards = local_shards(dir.path(), 3, tessera_storage::EngineConfig::default());
    let (d, metrics) = distributor(&Config::default());
    let t = now_ms() - 60_000;
    d.push(&shards, "t", Version::V1, body_at(&["a", "b", "c"], t, 1.0)).await.expect("first");
    assert_eq!(d.series_refs.len(), 3, "every written series is remembered");
    assert_eq!(metrics.series_remembered.load(Ordering::Relaxed), 3);
    assert!(metrics.series_remembered_bytes.load(Ordering::Relaxed) >= 3 * 33, "a slot per series at least");
    d.push(&shards, "t", Version::V1, body_at(&["a", "b", "c"], t + 15_000, 2.0)).await.expect("by id");
    for n in ["a", "b", "c"] {
        assert_eq!(stored(&shards, n), vec![(t, 1.0), (t + 15_000, 2.0)], "series {n}");
    }
    // Another tenant's identical bytes are another series.
    d.push(&shards, "u", Version::V1, body_at(&["a"], t, 9.0)).await.expect("other tenant");
    assert_eq!(stored(&shards, "a"), vec![(t, 1.0), (t + 15_000, 2.0)]);
    // A refused sample of a series written by id names that series.
    let err = d.push(&shards, "t", Version::V1, body_at(&["b"], t, 5.0)).await.expect_err("duplicate");
    let IngestError::Rejected { message, written } = &err else { panic!("not Rejected: {err:?}") };
    assert_eq!(*written, 0);
    assert!(message.contains("up{i=\"b\"}"), "names the series: {message}");
}

/// A series that left the head (idle) is no longer found by id: its samples are sent
/// again with its labels and stored, and it is remembered under its new lookup.
#[tokio::test]
async fn a_series_evicted_from_the_head_is_written_through_its_labels() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = tessera_storage::EngineConfig { head_idle_timeout_ms: 60_000, ..Default::default() };
    let shards = local_shards(dir.path(), 1, cfg);
    let (d, _) = distributor(&Config::default());
    let t0 = now_ms() - 600_000;
    d.push(&shards, "t", Version::V1, body_at(&["a", "b"], t0, 1.0)).await.expect("first");
    // Only `b` moves on: past the sweep period and the idle timeout, `a` leaves the head.
    d.push(&shards, "t", Version::V1, body_at(&["b"], t0 + 200_000, 2.0)).await.expect("b");
    assert_eq!(shards.stats()[0].1.head_series, 1, "`a` left the head");
    let out = d.push(&shards, "t", Version::V1, body_at(&["a"], t0 + 210_000, 3.0)).await.expect("a again");
    assert_eq!(out.samples, 1, "written through its labels");
    assert_eq!(stored(&shards, "a"), vec![(t0, 1.0), (t0 + 210_000, 3.0)]);
    assert_eq!(stored(&shards, "b"), vec![(t0, 1.0), (t0 + 200_000, 2.0)]);
    let out = d.push(&shards, "t", Version::V1, body_at(&["a"], t0 + 225_000, 4.0)).await.expect("by id again");
    assert_eq!(out.samples, 1);
    assert_eq!(stored(&shards, "a").len(), 3);
}

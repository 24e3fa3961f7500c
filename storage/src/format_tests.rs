//! Frozen bytes of every persisted format, checked against files in `storage/testdata/`:
//!
//! - `format-v1.hex`: one framed WAL batch record and every RocksDB key and value kind
//!   (`series`, `series_by_hash`, `postings`, all-series postings, `chunks`, `meta`), one
//!   `name hex` line each.
//! - `shard-v1/`: a tiny shard directory (four series, a few compacted chunks, postings,
//!   meta, and a WAL segment holding one batch record) that the engine must open and
//!   read back sample for sample.
//!
//! Any change to a persisted format fails these tests. If it is deliberate, bump
//! `keys::SCHEMA_VERSION`, teach `Engine::open` what to do with the old directories
//! (the `shard-v1` directory stays, as the old format's witness), and write the new
//! fixtures with the ignored generator:
//!
//! ```text
//! cargo test --workspace -- --ignored write_format_fixtures
//! ```
//!
//! The generator writes `format-v<N>.hex` and `shard-v<N>/` for the current
//! `SCHEMA_VERSION`; it never touches the fixtures of older versions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicI64;
use std::sync::Arc;

use roaring::RoaringBitmap;

use crate::chunk::{Encoding, XorAppender};
use crate::db::{self, CF_META, CF_SERIES, CF_SERIES_BY_HASH, CF_SERIES_ENDS};
use crate::keys;
use crate::labels_codec;
use crate::wal::record::{self, Frame, SampleEntry};
use crate::{Engine, EngineConfig, SeriesAppend, WalFsync};
use tessera_model::{Label, MatchOp, Matcher, Sample};

fn testdata() -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs tests"))
        .join("testdata")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length: {s}");
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit")).collect()
}

// ---- the values every frozen byte string is written from -------------------------

const T0: i64 = 1_700_000_000_000;
const STALE: f64 = f64::from_bits(tessera_model::STALE_NAN_BITS);

fn labels(pairs: &[(&str, &str)]) -> Vec<Label> {
    pairs.iter().map(|(n, v)| Label::new(*n, *v)).collect()
}

fn up_api() -> Vec<Label> {
    labels(&[("__name__", "up"), ("job", "api")])
}

fn wal_series() -> Vec<(u32, Vec<Label>)> {
    vec![(1, up_api()), (2, labels(&[("__name__", "gpu_temp"), ("gpu", "0"), ("host", "nödé-1")]))]
}

/// Samples with a negative time delta, a staleness marker, `-0.0` and a time before 1970.
fn wal_samples() -> Vec<SampleEntry> {
    vec![
        SampleEntry { id: 1, t: T0, v: 1.5 },
        SampleEntry { id: 2, t: T0 + 15_000, v: STALE },
        SampleEntry { id: 1, t: T0 - 1_000, v: -0.0 },
        SampleEntry { id: 2, t: -86_400_001, v: 1e300 },
    ]
}

fn chunk_bytes() -> Vec<u8> {
    let samples = [Sample::new(1000, 1.0), Sample::new(16000, 1.0), Sample::new(31003, 2.5)];
    XorAppender::encode(Encoding::XorJitter, &samples).expect("encode chunk")
}

/// Integers, a 3-decimal value and jittered timestamps: scale 3, one exception.
fn decimal_samples() -> Vec<Sample> {
    vec![Sample::new(1000, 250.125), Sample::new(16000, 250.0), Sample::new(31003, 251.5)]
}

fn decimal_chunk_bytes() -> Vec<u8> {
    crate::chunk::decimal::encode(&decimal_samples()).expect("decimal chunk")
}

fn postings_ids() -> RoaringBitmap {
    [1u32, 7, 70_000].into_iter().collect()
}

/// Every frozen byte string, by name (the names are the lines of `format-v<N>.hex`).
fn current_bytes() -> BTreeMap<&'static str, Vec<u8>> {
    let mut m = BTreeMap::new();
    let encoded: Vec<(u32, Vec<u8>)> = wal_series()
        .into_iter()
        .map(|(id, l)| {
            let mut b = Vec::new();
            labels_codec::encode_labels(&l, &mut b);
            (id, b)
        })
        .collect();
    let refs: Vec<(u32, &[u8])> = encoded.iter().map(|(id, b)| (*id, b.as_slice())).collect();
    let mut payload = Vec::new();
    record::encode_batch(&refs, &wal_samples(), &mut payload);
    m.insert("wal_frame_batch", record::frame(record::TYPE_BATCH, &payload));

    let mut series_value = Vec::new();
    labels_codec::encode_labels(&up_api(), &mut series_value);
    m.insert("series_key", keys::series_key(7).to_vec());
    m.insert("series_value", series_value.clone());
    m.insert("series_by_hash_key", keys::series_hash_key(labels_codec::labels_hash(&series_value), 7).to_vec());
    m.insert("postings_key", keys::postings_key(keys::day_of(T0), "job", "api").expect("key"));
    m.insert("postings_key_before_1970", keys::postings_key(keys::day_of(-1), "gpu", "0").expect("key"));
    m.insert("postings_all_series_key", keys::all_postings_key(keys::day_of(T0)).to_vec());
    m.insert("postings_value", db::encode_bitmap(&postings_ids()));
    m.insert("chunk_key", keys::chunk_key(7, T0).to_vec());
    m.insert("chunk_key_before_1970", keys::chunk_key(7, -1_000).to_vec());
    m.insert("chunk_value", keys::encode_chunk_value(Encoding::XorJitter, 1000, 31003, &chunk_bytes()));
    // Encoding 3, added within schema 1 (old files stay readable; this line was added).
    m.insert("chunk_value_decimal", keys::encode_chunk_value(Encoding::Decimal, 1000, 31003, &decimal_chunk_bytes()));
    // The engine writes the next series id as a big-endian u32 (`Engine`'s id save).
    m.insert("meta_next_series_id_key", keys::META_NEXT_SERIES_ID.to_vec());
    m.insert("meta_next_series_id_value", 8u32.to_be_bytes().to_vec());
    m.insert("meta_schema_version_key", keys::META_SCHEMA_VERSION.to_vec());
    m.insert("meta_schema_version_value", keys::SCHEMA_VERSION.to_be_bytes().to_vec());
    m.insert("meta_retention_watermark_key", keys::META_RETENTION_WATERMARK.to_vec());
    m.insert("meta_retention_watermark_value", keys::encode_i64(T0).to_vec());
    m
}

fn hex_fixture_path() -> PathBuf {
    testdata().join(format!("format-v{}.hex", keys::SCHEMA_VERSION))
}

fn read_hex_fixture() -> BTreeMap<String, Vec<u8>> {
    let path = hex_fixture_path();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (name, h) = l.split_once(' ').unwrap_or_else(|| panic!("bad fixture line {l:?}"));
            (name.to_string(), unhex(h.trim()))
        })
        .collect()
}

#[test]
fn persisted_bytes_match_the_frozen_fixture() {
    let frozen = read_hex_fixture();
    let now = current_bytes();
    let frozen_names: Vec<&str> = frozen.keys().map(String::as_str).collect();
    let now_names: Vec<&str> = now.keys().copied().collect();
    assert_eq!(frozen_names, now_names, "the fixture lists other byte strings than this test writes");
    for (name, bytes) in &now {
        assert_eq!(hex(bytes), hex(&frozen[*name]), "{name}: persisted bytes changed (see the module doc)");
    }
}

#[test]
fn frozen_bytes_decode_to_the_values_they_were_written_from() {
    let f = read_hex_fixture();
    let Frame::Record(typ, payload, used) = record::read_frame(&f["wal_frame_batch"]) else {
        panic!("frozen WAL frame does not read as a record")
    };
    assert_eq!((typ, used), (record::TYPE_BATCH, f["wal_frame_batch"].len()));
    let (series, samples) = record::decode_batch(payload).expect("decode frozen batch");
    let series: Vec<(u32, Vec<Label>)> = series.into_iter().map(|s| (s.id, s.labels)).collect();
    assert_eq!(series, wal_series());
    let bits = |s: &[SampleEntry]| s.iter().map(|e| (e.id, e.t, e.v.to_bits())).collect::<Vec<_>>();
    assert_eq!(bits(&samples), bits(&wal_samples()), "samples (values compared as bits)");

    assert_eq!(keys::parse_series_key(&f["series_key"]).expect("series key"), 7);
    assert_eq!(labels_codec::decode_labels(&f["series_value"]).expect("series value"), up_api());
    let by_hash = &f["series_by_hash_key"];
    assert_eq!(by_hash.len(), 12);
    assert_eq!(by_hash[..8], labels_codec::labels_hash(&f["series_value"]).to_be_bytes());
    assert_eq!(by_hash[8..], 7u32.to_be_bytes());

    let (day, name, value) = keys::parse_postings_key(&f["postings_key"]).expect("postings key");
    assert_eq!((day, name, value), (keys::day_of(T0), &b"job"[..], &b"api"[..]));
    let (day, name, value) = keys::parse_postings_key(&f["postings_key_before_1970"]).expect("postings key");
    assert_eq!((day, name, value), (-1, &b"gpu"[..], &b"0"[..]));
    let (day, name, value) = keys::parse_postings_key(&f["postings_all_series_key"]).expect("all-series key");
    assert_eq!((day, name, value), (keys::day_of(T0), &b""[..], &b""[..]));
    assert_eq!(db::decode_bitmap(&f["postings_value"]).expect("bitmap"), postings_ids());

    assert_eq!(keys::parse_chunk_key(&f["chunk_key"]).expect("chunk key"), (7, T0));
    assert_eq!(keys::parse_chunk_key(&f["chunk_key_before_1970"]).expect("chunk key"), (7, -1_000));
    let (enc, maxt, chunk) = keys::decode_chunk_value(1000, &f["chunk_value"]).expect("chunk value");
    assert_eq!((enc, maxt), (Encoding::XorJitter, 31003));
    let decoded = crate::chunk::decode(chunk, enc).expect("chunk");
    assert_eq!(decoded, vec![Sample::new(1000, 1.0), Sample::new(16000, 1.0), Sample::new(31003, 2.5)]);
    let (enc, maxt, chunk) = keys::decode_chunk_value(1000, &f["chunk_value_decimal"]).expect("decimal chunk value");
    assert_eq!((enc, maxt), (Encoding::Decimal, 31003));
    let decoded = crate::chunk::decode(chunk, enc).expect("decimal chunk");
    let sample_bits = |s: &[Sample]| s.iter().map(|x| (x.t, x.v.to_bits())).collect::<Vec<_>>();
    assert_eq!(sample_bits(&decoded), sample_bits(&decimal_samples()));

    assert_eq!(f["meta_next_series_id_key"], keys::META_NEXT_SERIES_ID);
    assert_eq!(f["meta_next_series_id_value"], 8u32.to_be_bytes());
    assert_eq!(f["meta_schema_version_key"], keys::META_SCHEMA_VERSION);
    assert_eq!(f["meta_schema_version_value"], keys::SCHEMA_VERSION.to_be_bytes());
    assert_eq!(f["meta_retention_watermark_key"], keys::META_RETENTION_WATERMARK);
    assert_eq!(keys::decode_i64(&f["meta_retention_watermark_value"]).expect("watermark"), T0);
}

// ---- the tiny shard directory ----------------------------------------------------

/// An info-log sink for a RocksDB opened directly.
fn bg() -> Arc<db::Background> {
    Arc::new(db::Background::new(Path::new("format-test")))
}

fn shard_config() -> EngineConfig {
    EngineConfig {
        // Small chunks, so a few samples make several persisted chunks.
        chunk_target_samples: 8,
        wal_fsync: WalFsync::Always,
        memtable_bytes: 64 << 10,
        ..EngineConfig::default()
    }
}

fn shard_series() -> Vec<Vec<Label>> {
    vec![
        labels(&[("__name__", "fixture_up"), ("instance", "a"), ("job", "api")]),
        labels(&[("__name__", "fixture_up"), ("instance", "b"), ("job", "api")]),
        labels(&[("__name__", "fixture_temp"), ("gpu", "0")]),
        labels(&[("__name__", "fixture_temp"), ("gpu", "1")]),
    ]
}

/// First batch (cut into chunks, flushed and compacted): 20 samples each of series 0–2,
/// 15 s apart with a few ms of jitter.
fn shard_batch_1() -> Vec<Vec<Sample>> {
    (0..3)
        .map(|j| (0..20).map(|i| Sample::new(T0 + i * 15_000 + (i * 7 + j) % 5, (i * (j + 1)) as f64 / 4.0)).collect())
        .collect()
}

/// Second batch (only in the WAL and RocksDB's own log): five more samples of series 0
/// ending in a staleness marker, and the first two of series 3, which the WAL record
/// defines.
fn shard_batch_2() -> Vec<Vec<Sample>> {
    let s0 = (20..25).map(|i| Sample::new(T0 + i * 15_000, if i == 24 { STALE } else { i as f64 })).collect();
    vec![s0, vec![], vec![], vec![Sample::new(T0 + 300_000, 41.0), Sample::new(T0 + 315_000, -273.15)]]
}

fn append(engine: &Engine, batch: &[Vec<Sample>]) {
    let series = shard_series();
    let appends: Vec<SeriesAppend<'_>> = series
        .iter()
        .zip(batch)
        .filter(|(_, s)| !s.is_empty())
        .map(|(labels, samples)| SeriesAppend { labels, samples })
        .collect();
    let report = engine.append(&appends).expect("append");
    assert_eq!(report.appended, batch.iter().map(|s| s.len() as u64).sum::<u64>(), "{report:?}");
}

fn shard_fixture_dir() -> PathBuf {
    testdata().join(format!("shard-v{}", keys::SCHEMA_VERSION))
}

/// Copies `src` into `dst` recursively, leaving out RocksDB's info logs, lock file and
/// options snapshots (not part of the format: RocksDB opens without them and writes
/// fresh ones).
fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).expect("create dir");
    for entry in std::fs::read_dir(src).expect("read dir") {
        let entry = entry.expect("dir entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "LOCK" || name == "LOG" || name.starts_with("LOG.old") || name.starts_with("OPTIONS-") {
            continue;
        }
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &dst.join(&name));
        } else {
            std::fs::copy(entry.path(), dst.join(&name)).expect("copy file");
        }
    }
}

/// Writes `format-v<N>.hex` and `shard-v<N>/` for the current schema version.
#[test]
#[ignore = "writes the checked-in fixtures; run by hand after a deliberate format change"]
fn write_format_fixtures() {
    let mut text = format!(
        "# Frozen persisted bytes of schema version {}: `name hex` per line. Written by\n\
         # `cargo test --workspace -- --ignored write_format_fixtures` (storage/src/format_tests.rs).\n",
        keys::SCHEMA_VERSION
    );
    for (name, bytes) in current_bytes() {
        text.push_str(&format!("{name} {}\n", hex(&bytes)));
    }
    std::fs::write(hex_fixture_path(), text).expect("write hex fixture");

    let tmp = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(tmp.path(), shard_config()).expect("open");
    append(&engine, &shard_batch_1());
    engine.flush().expect("flush");
    engine.compact().expect("compact");
    append(&engine, &shard_batch_2());
    // Dropped, not closed: the second batch stays in the WAL segment (and in RocksDB's
    // own log), as after a crash, so opening the fixture replays a WAL record.
    drop(engine);
    let out = shard_fixture_dir();
    if out.exists() {
        std::fs::remove_dir_all(&out).expect("remove old fixture");
    }
    copy_dir(tmp.path(), &out);
}

/// A fresh copy of the checked-in shard: RocksDB writes into the directory it opens.
fn shard_copy() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    copy_dir(&shard_fixture_dir(), tmp.path());
    tmp
}

#[test]
fn the_frozen_shard_directory_opens_and_reads_back_exactly() {
    let tmp = shard_copy();
    let engine = Engine::open(tmp.path(), shard_config()).expect("open the frozen shard");
    let rep = engine.replay_report();
    assert!(!rep.found_damage(), "{rep:?}");
    assert_eq!((rep.records, rep.samples, rep.series_created), (1, 7, 0), "{rep:?}");

    let m = Matcher::new("__name__", MatchOp::Regex, "fixture_.*").expect("matcher");
    let got = engine.select(&[m], i64::MIN, i64::MAX).expect("select");
    let mut want: Vec<(Vec<Label>, Vec<Sample>)> = shard_series()
        .into_iter()
        .zip(shard_batch_1().into_iter().chain(std::iter::repeat(vec![])))
        .zip(shard_batch_2())
        .map(|((l, mut a), b)| {
            a.extend(b);
            (l, a)
        })
        .collect();
    want.sort_by(|a, b| a.0.cmp(&b.0));
    let bits = |s: &[Sample]| s.iter().map(|x| (x.t, x.v.to_bits())).collect::<Vec<_>>();
    let mut got: Vec<_> = got.into_iter().map(|s| (s.labels.into_vec(), bits(&s.samples))).collect();
    got.sort();
    let want: Vec<_> = want.into_iter().map(|(l, s)| (l, bits(&s))).collect();
    assert_eq!(got, want);

    assert_eq!(
        engine.label_values("gpu", &[], i64::MIN, i64::MAX).expect("label values"),
        vec!["0".to_string(), "1".to_string()]
    );
    assert_eq!(engine.stats().total_series, 4);
    engine.close().expect("close");
}

#[test]
fn the_frozen_shard_holds_the_schema_version_and_a_hash_entry_per_series() {
    let tmp = shard_copy();
    let dbh =
        db::open(&tmp.path().join("db"), &shard_config(), Arc::new(AtomicI64::new(i64::MIN)), bg()).expect("open db");
    let meta = dbh.cf_handle(CF_META).expect("meta cf");
    let version = dbh.get_cf(meta, keys::META_SCHEMA_VERSION).expect("get").expect("schema version present");
    assert_eq!(version, 1u32.to_be_bytes());

    let scan = |cf: &str| -> Vec<(Vec<u8>, Vec<u8>)> {
        dbh.iterator_cf(dbh.cf_handle(cf).expect("cf"), rocksdb::IteratorMode::Start)
            .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).expect("iterate"))
            .collect()
    };
    let mut from_series: Vec<(u64, u32)> = scan(CF_SERIES)
        .iter()
        .map(|(k, v)| (labels_codec::labels_hash(v), keys::parse_series_key(k).expect("series key")))
        .collect();
    from_series.sort();
    let from_hash: Vec<(u64, u32)> = scan(CF_SERIES_BY_HASH)
        .iter()
        .map(|(k, v)| {
            assert!(v.is_empty());
            let hash = u64::from_be_bytes(k[..8].try_into().expect("8 bytes"));
            (hash, u32::from_be_bytes(k[8..].try_into().expect("4 bytes")))
        })
        .collect();
    assert_eq!(from_series.len(), 4);
    assert_eq!(from_hash, from_series, "series_by_hash must map every series' label hash to its id");
}

/// The frozen shard predates the `series_ends` column family: its usage is reported
/// without it; its first open adds it, and records the chunks written from then on,
/// but does not mark the records complete (its older chunks have none), so reads go on
/// finding ended series by their chunks.
#[test]
fn the_frozen_shard_gains_series_ends_but_does_not_trust_them() {
    let tmp = shard_copy();
    let names: Vec<String> = db::shard_usage(tmp.path()).expect("usage").cfs.into_iter().map(|c| c.name).collect();
    let want: Vec<&str> = db::ALL_CFS.into_iter().filter(|&n| n != CF_SERIES_ENDS).collect();
    assert_eq!(names, want);
    Engine::open(tmp.path(), shard_config()).expect("open").close().expect("close");
    let dbh =
        db::open(&tmp.path().join("db"), &shard_config(), Arc::new(AtomicI64::new(i64::MIN)), bg()).expect("open db");
    let meta = dbh.cf_handle(CF_META).expect("meta cf");
    assert_eq!(dbh.get_cf(meta, keys::META_SERIES_ENDS_COMPLETE).expect("get"), None);
    let ends = dbh.cf_handle(CF_SERIES_ENDS).expect("created at open");
    let recorded = dbh.iterator_cf(ends, rocksdb::IteratorMode::Start).count();
    let replayed = shard_batch_2().iter().filter(|s| !s.is_empty()).count();
    assert_eq!(recorded, replayed, "the series of the replayed WAL record, whose chunks were cut at close");
}

#[test]
fn a_shard_of_an_unknown_schema_version_is_refused_naming_both_versions() {
    let tmp = shard_copy();
    {
        let dbh = db::open(&tmp.path().join("db"), &shard_config(), Arc::new(AtomicI64::new(i64::MIN)), bg())
            .expect("open db");
        let meta = dbh.cf_handle(CF_META).expect("meta cf");
        dbh.put_cf(meta, keys::META_SCHEMA_VERSION, (keys::SCHEMA_VERSION + 1).to_be_bytes()).expect("put");
    }
    let err = Engine::open(tmp.path(), shard_config()).err().expect("a newer schema must be refused").to_string();
    let newer = keys::SCHEMA_VERSION + 1;
    assert!(err.contains(&format!("schema version {newer}")), "{err}");
    assert!(err.contains(&format!("reads {}", keys::SCHEMA_VERSION)), "{err}");
}

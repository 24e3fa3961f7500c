use super::*;
use crate::{Engine, EngineConfig, SeriesAppend};
use tessera_model::{Label, Sample};

const T0: i64 = 1_700_000_000_000;

#[test]
fn usage_of_a_closed_shard_splits_its_bytes_by_column_family_and_file_kind() {
    let d = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(d.path(), EngineConfig { memtable_bytes: 1 << 20, ..EngineConfig::default() }).expect("open");
    for g in 0..20 {
        let labels = vec![Label::new("__name__", "gpu_util"), Label::new("gpu", g.to_string())];
        let samples: Vec<Sample> = (0..480).map(|i| Sample::new(T0 + i * 15_000, ((i * g) % 100) as f64)).collect();
        e.append(&[SeriesAppend { labels: &labels, samples: &samples }]).expect("append");
    }
    e.close().expect("close");

    let u = shard_usage(d.path()).expect("usage");
    let names: Vec<&str> = u.cfs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ALL_CFS);
    let cf = |n: &str| u.cfs.iter().find(|c| c.name == n).expect("cf");
    // 20 series × 480 samples at 120 per chunk.
    assert_eq!(cf("chunks").entries, 80);
    assert_eq!(cf("series").entries, 20);
    // RocksDB's internal keys: 12 bytes + 8 of sequence number and type.
    assert!(cf("chunks").raw_value_bytes > 0 && cf("chunks").raw_key_bytes == 80 * 20, "{u:#?}");
    assert!(cf("chunks").data_block_bytes > 0 && cf("chunks").index_block_bytes > 0);
    assert_eq!(u.cfs.iter().map(|c| c.sst_bytes).sum::<u64>(), u.files.sst, "every table file belongs to a CF");
    assert!(u.files.rocksdb_meta > 0, "MANIFEST, CURRENT, OPTIONS");
    assert_eq!(u.files.info_logs, 0, "the engine sends RocksDB's log to tracing");
}

#[test]
fn usage_of_a_missing_directory_is_an_error() {
    let d = tempfile::tempdir().expect("tempdir");
    assert!(shard_usage(&d.path().join("nope")).is_err());
}

#[test]
fn table_properties_parse_integer_fields() {
    let p: Vec<_> = parse_properties(
        "# entries=5; raw key size=60; index block size (user-key? 1, delta-value? 1)=71; \
         comparator name=leveldb.BytewiseComparator",
    )
    .collect();
    assert_eq!(p, vec![("# entries", 5), ("raw key size", 60), ("index block size (user-key? 1, delta-value? 1)", 71)]);
}

use rocksdb::LogLevel;

use super::*;

/// The two lines RocksDB 11 logs for one compaction that read a damaged block.
const FAILED: &str = "[db/db_impl/db_impl_compaction_flush.cc:4942] Compaction error: Corruption: block checksum \
     mismatch: stored = 1, computed = 2, type = 4  in /tmp/x/shard-0001/db/000012.sst offset 4096 size 3970, \
     block_type = kData";
const WAITING: &str = "[db/db_impl/db_impl_compaction_flush.cc:4073] Waiting after background compaction error: \
     Corruption: block checksum mismatch, Accumulated background error counts: 1";

#[test]
fn a_compaction_error_line_is_recorded_once_with_its_file_and_cause() {
    let b = Background::new(Path::new("/tmp/x/db"));
    b.on_log(LogLevel::Warn, FAILED);
    b.on_log(LogLevel::Error, WAITING);
    b.on_log(LogLevel::Warn, FAILED); // the retry a second later: same failure
    let got = b.take_new();
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].is_corruption());
    assert_eq!(got[0].file.as_deref(), Some("/tmp/x/shard-0001/db/000012.sst"));
    assert_eq!(got[0].file_number(), Some(12));
    assert!(got[0].cause.starts_with("Corruption: block checksum mismatch"), "{}", got[0].cause);
    assert!(b.take_new().is_empty(), "taken once");
}

#[test]
fn other_log_lines_and_levels_record_nothing() {
    let b = Background::new(Path::new("/d"));
    b.on_log(LogLevel::Info, FAILED); // below the sink's level: not RocksDB's report
    b.on_log(LogLevel::Header, "Options.paranoid_checks: 0");
    b.on_log(LogLevel::Warn, "[db/column_family.cc:1071] [chunks] Stopping writes because we have 2 memtables");
    b.on_log(LogLevel::Error, WAITING);
    assert!(b.take_new().is_empty());
}

#[test]
fn a_failure_without_a_file_or_not_corruption_is_kept_as_such() {
    let b = Background::new(Path::new("/d"));
    b.on_log(LogLevel::Warn, "Compaction error: IO error: No space left on device");
    let got = b.take_new();
    assert_eq!(got.len(), 1);
    assert!(!got[0].is_corruption());
    assert_eq!(got[0].file, None);
    assert_eq!(got[0].file_number(), None);
}

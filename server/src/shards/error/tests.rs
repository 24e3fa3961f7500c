use std::path::PathBuf;

use super::*;
use crate::shards::ShardId;

// Which storage failures are "unavailable" (503, retry) and which stay "internal".

fn io(kind: std::io::ErrorKind) -> tessera_storage::Error {
    tessera_storage::Error::Io { op: "write", path: PathBuf::from("/data/shard-0001/wal"), source: kind.into() }
}

#[test]
fn a_poisoned_shard_is_unavailable() {
    let e = tessera_storage::Error::Poisoned { cause: "a WAL fsync failed: EIO".into() };
    assert_eq!(classify(&e), ShardErrorKind::Unavailable);
    let err = ShardError::from_storage(Some(ShardId(3)), &e);
    assert_eq!(err.kind, ShardErrorKind::Unavailable);
    assert!(err.message.starts_with("shard 3: storage: "), "{}", err.message);
    assert!(err.message.contains("a WAL fsync failed: EIO"), "{}", err.message);
}

#[test]
fn transient_io_errors_are_unavailable() {
    use std::io::ErrorKind as K;
    for kind in [K::Interrupted, K::WouldBlock, K::TimedOut, K::ResourceBusy, K::StorageFull, K::QuotaExceeded] {
        assert_eq!(classify(&io(kind)), ShardErrorKind::Unavailable, "{kind:?}");
    }
    let emfile = tessera_storage::Error::Io {
        op: "open",
        path: PathBuf::from("/data/shard-0000/000123.sst"),
        source: std::io::Error::from_raw_os_error(24),
    };
    assert_eq!(classify(&emfile), ShardErrorKind::Unavailable, "too many open files passes");
}

#[test]
fn lasting_failures_stay_internal() {
    use std::io::ErrorKind as K;
    for kind in [K::PermissionDenied, K::NotFound, K::InvalidData, K::Other] {
        assert_eq!(classify(&io(kind)), ShardErrorKind::Internal, "{kind:?}");
    }
    let eio = tessera_storage::Error::Io {
        op: "fsync",
        path: PathBuf::from("/data/shard-0000/wal"),
        source: std::io::Error::from_raw_os_error(5),
    };
    assert_eq!(classify(&eio), ShardErrorKind::Internal, "EIO is a failing disk, not a busy one");
    let corrupt = tessera_storage::Error::Corrupt { what: "chunk", detail: "bad crc".into() };
    assert_eq!(classify(&corrupt), ShardErrorKind::Internal);
}

#[test]
fn other_storage_classes_are_kept() {
    let bad = tessera_storage::Error::InvalidInput("label too long".into());
    assert_eq!(classify(&bad), ShardErrorKind::BadData);
    let timeout = tessera_storage::Error::Interrupted { what: "index scan", timed_out: true };
    assert_eq!(classify(&timeout), ShardErrorKind::Timeout);
    let canceled = tessera_storage::Error::Interrupted { what: "index scan", timed_out: false };
    assert_eq!(classify(&canceled), ShardErrorKind::Canceled);
}

#[test]
fn rocksdb_statuses_that_pass_are_recognised_by_their_code() {
    assert!(transient_rocks_status("Resource busy: "));
    assert!(transient_rocks_status("Operation timed out: lock"));
    assert!(transient_rocks_status("Shutdown in progress: "));
    assert!(transient_rocks_status(
        "IO error: While open a file for appending: /d/000042.log: No space left on device"
    ));
    assert!(!transient_rocks_status("Corruption: block checksum mismatch"));
    assert!(!transient_rocks_status("IO error: /d/000042.sst: Input/output error"));
}

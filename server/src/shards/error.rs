//! [`ShardError`]: what went wrong in a call on the shards, in the shards' own terms (no
//! HTTP, no gRPC), and [`classify`], the ONE decision which storage failures mean
//! "unavailable, retry later" rather than "internal".
//!
//! Callers map the kind to their protocol in one place each: HTTP in
//! `crate::error` (`From<ShardError> for ApiError`), the PromQL engine's error in
//! `tenant_view.rs`, gRPC status codes next to the HTTP mapping when gRPC arrives.

use std::error::Error as _;

/// The class of a shard failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardErrorKind {
    /// The request is invalid (a bad regex, a reserved label); retrying will not help.
    BadData,
    /// The shard cannot serve now but may later: not open yet, shutting down, poisoned
    /// after a failed fsync (until restarted), or a transient OS or RocksDB condition
    /// (busy, timed out, out of file handles or disk space).
    Unavailable,
    /// The caller's deadline passed.
    Timeout,
    /// The caller cancelled.
    Canceled,
    /// Corruption, a failing disk, a bug: retrying the same call will not help.
    Internal,
}

/// A failed call on the shards. The message names the shard when one is at fault.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ShardError {
    pub kind: ShardErrorKind,
    pub message: String,
    /// A hint for the caller's `Retry-After`, in seconds (unavailable only).
    pub retry_after_secs: Option<u64>,
}

impl ShardError {
    pub fn new(kind: ShardErrorKind, message: impl Into<String>) -> Self {
        ShardError { kind, message: message.into(), retry_after_secs: None }
    }

    pub fn bad_data(message: impl Into<String>) -> Self {
        Self::new(ShardErrorKind::BadData, message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ShardErrorKind::Unavailable, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ShardErrorKind::Internal, message)
    }

    /// The shards are not open yet (WAL replay running): retry in a few seconds.
    pub fn not_ready() -> Self {
        ShardError { retry_after_secs: Some(5), ..Self::unavailable("not ready: WAL replay in progress") }
    }

    /// The process is stopping: the storage slots are closed.
    pub fn shutting_down() -> Self {
        Self::unavailable("server is shutting down")
    }

    /// A storage error of `shard` (or of no particular shard), with its whole source
    /// chain in the message so "rocksdb put" says why, classified by [`classify`].
    pub fn from_storage(shard: Option<super::ShardId>, e: &tessera_storage::Error) -> Self {
        let message = match shard {
            Some(id) => format!("shard {id}: storage: {}", e.chain()),
            None => format!("storage: {}", e.chain()),
        };
        Self::new(classify(e), message)
    }
}

impl From<tessera_storage::Error> for ShardError {
    fn from(e: tessera_storage::Error) -> Self {
        ShardError::from_storage(None, &e)
    }
}

/// The class of a storage error. Storage's own classes are kept (a poisoned engine is
/// already "unavailable"); on top of that an I/O or RocksDB failure whose cause is
/// transient is "unavailable" too, so the user sees 503 and retries, where corruption
/// or a failing disk stays "internal" (500).
pub fn classify(e: &tessera_storage::Error) -> ShardErrorKind {
    use tessera_storage::ErrorKind as K;
    match e.kind() {
        K::BadData => ShardErrorKind::BadData,
        K::Unavailable => ShardErrorKind::Unavailable,
        K::Timeout => ShardErrorKind::Timeout,
        K::Canceled => ShardErrorKind::Canceled,
        K::Internal if is_transient(e) => ShardErrorKind::Unavailable,
        K::Internal => ShardErrorKind::Internal,
    }
}

/// Whether a storage failure is caused by a condition that passes: walks the source
/// chain for an OS error of a transient kind, or a RocksDB status of one (RocksDB's
/// status text starts with its code, e.g. "Resource busy: ...", which is all the
/// server can see of it without linking RocksDB).
fn is_transient(e: &tessera_storage::Error) -> bool {
    if matches!(e, tessera_storage::Error::Corrupt { .. }) {
        return false;
    }
    let mut src = e.source();
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            if transient_io(io) {
                return true;
            }
        } else if transient_rocks_status(&s.to_string()) {
            return true;
        }
        src = s.source();
    }
    false
}

/// OS errors that say "not now" rather than "broken": interrupted or would-block calls,
/// timeouts, busy resources, exhausted file handles, full disks or quotas, no memory.
fn transient_io(e: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    // EMFILE (24) and ENFILE (23) have no stable `ErrorKind`; they are the same numbers
    // on Linux and the BSDs.
    matches!(e.raw_os_error(), Some(23 | 24))
        || matches!(
            e.kind(),
            K::Interrupted
                | K::WouldBlock
                | K::TimedOut
                | K::ResourceBusy
                | K::StorageFull
                | K::QuotaExceeded
                | K::OutOfMemory
        )
}

/// RocksDB statuses that pass (`Status::ToString` codes), and I/O errors RocksDB wraps
/// whose text names a transient OS condition.
fn transient_rocks_status(text: &str) -> bool {
    const CODES: [&str; 5] =
        ["Resource busy", "Operation timed out", "Operation failed. Try again", "Shutdown in progress", "Busy"];
    const IO: [&str; 3] = ["No space left on device", "Too many open files", "Disk quota exceeded"];
    CODES.iter().any(|c| text.starts_with(c)) || (text.starts_with("IO error") && IO.iter().any(|m| text.contains(m)))
}

#[cfg(test)]
mod tests;

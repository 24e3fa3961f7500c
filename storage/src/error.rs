//! The storage error type. Per-sample rejections (too old, duplicate) are *not* errors:
//! they are reported in `AppendReport`. An `Error` means the engine itself could not do
//! what was asked (bad request arguments, corrupt bytes, disk trouble).

use std::path::PathBuf;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What class of failure an error is, so the server can map it to an HTTP status / gRPC
/// code in one place without matching every variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The caller sent something invalid (unsorted or oversized labels); retrying will not help.
    BadData,
    /// The engine cannot serve writes right now (poisoned after a failed fsync, closed).
    Unavailable,
    /// The caller's deadline passed during the call.
    Timeout,
    /// The caller cancelled the call.
    Canceled,
    /// Disk, RocksDB or corruption trouble inside the engine.
    Internal,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file-system operation on the WAL or data directory failed.
    #[error("{op} {path}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A RocksDB call failed.
    #[error("rocksdb {op}")]
    Rocks {
        op: &'static str,
        #[source]
        source: rocksdb::Error,
    },
    /// Bytes read back from disk do not decode (chunk, WAL record, index entry).
    #[error("corrupt {what}: {detail}")]
    Corrupt { what: &'static str, detail: String },
    /// The request cannot be stored as given (e.g. a label name longer than 65535 bytes).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// `EngineConfig::validate` refused the configuration.
    #[error("invalid storage config: {0}")]
    InvalidConfig(String),
    /// An earlier failure left the engine unsure what is durable (a failed WAL fsync or
    /// write: the fjall / PostgreSQL lesson, never retry fsync), or its head and disk may
    /// disagree (a RocksDB write that failed after the WAL record was written). It
    /// refuses writes until reopened; `cause` names that first failure.
    #[error("storage engine refuses writes until restarted: {cause}")]
    Poisoned { cause: String },
    /// A long read stopped because its caller's deadline passed or it was cancelled.
    #[error("{what} stopped: {}", if *.timed_out { "deadline exceeded" } else { "cancelled" })]
    Interrupted { what: &'static str, timed_out: bool },
    /// All 2^32 series ids of this shard are used.
    #[error("series id space of this shard is exhausted")]
    SeriesIdsExhausted,
}

impl Error {
    /// The class of this error, for status-code mapping.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidInput(_) | Error::InvalidConfig(_) => ErrorKind::BadData,
            Error::Poisoned { .. } | Error::SeriesIdsExhausted => ErrorKind::Unavailable,
            Error::Interrupted { timed_out: true, .. } => ErrorKind::Timeout,
            Error::Interrupted { timed_out: false, .. } => ErrorKind::Canceled,
            Error::Io { .. } | Error::Rocks { .. } | Error::Corrupt { .. } => ErrorKind::Internal,
        }
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { op, path, source }
    }

    pub(crate) fn rocks(op: &'static str) -> impl FnOnce(rocksdb::Error) -> Error {
        move |source| Error::Rocks { op, source }
    }

    /// This error and its whole source chain on one line ("rocksdb read chunks:
    /// Corruption: block checksum mismatch ..."), for messages that must name the cause.
    pub fn chain(&self) -> String {
        let mut out = self.to_string();
        let mut src = std::error::Error::source(self);
        while let Some(s) = src {
            out.push_str(": ");
            out.push_str(&s.to_string());
            src = s.source();
        }
        out
    }

    pub(crate) fn corrupt(what: &'static str, detail: impl Into<String>) -> Error {
        Error::Corrupt { what, detail: detail.into() }
    }
}

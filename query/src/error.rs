//! Query errors, classified with Prometheus' error types.

/// What kind of failure; the server maps it to an HTTP status and Prometheus `errorType`
/// (bad_data 400, execution 422, canceled 499, timeout 503, unavailable 503, internal 500).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    BadData,
    Execution,
    Canceled,
    Timeout,
    /// The data source cannot serve now but may later (a shard not open, shutting
    /// down, poisoned, or a transient I/O condition); the client should retry.
    Unavailable,
    Internal,
}

#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct QueryError {
    pub kind: ErrorKind,
    pub message: String,
}

impl QueryError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        QueryError { kind, message: message.into() }
    }
    pub fn bad_data(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::BadData, message)
    }
    pub fn execution(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Execution, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }
}

//! Server errors and the one place that maps an error kind to an HTTP status and a
//! Prometheus `errorType`.
//!
//! Two renderings exist because the two API families expect different bodies: the
//! remote-write/read endpoints answer with a plain-text, human-readable message (the
//! spec says senders log it as is) ([`TextError`], here), the JSON API with Prometheus'
//! envelope `{"status":"error","errorType":"bad_data","error":"..."}` ([`JsonError`],
//! rendered by the API's one JSON writer in `crate::http::json`).

use std::path::PathBuf;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::distributor::IngestError;
use crate::ingest::decode::DecodeError;
use crate::shards::{ShardError, ShardErrorKind};

/// Result alias for request handling.
pub type Result<T, E = ApiError> = std::result::Result<T, E>;

/// What class of failure, in Prometheus' vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request is invalid and will never succeed (400 `bad_data`).
    BadData,
    /// The request body is larger than the configured limit (413).
    TooLarge,
    /// Content-Type or Content-Encoding not supported (415).
    UnsupportedMediaType,
    /// A rate or series limit was hit; retry later (429).
    TooManyRequests,
    /// The request failed during execution (422 `execution`).
    Execution,
    /// The server is not ready or a shard refuses writes (503 `unavailable`).
    Unavailable,
    /// A bug or storage trouble (500 `internal`).
    Internal,
    /// No such resource (404 `not_found`).
    NotFound,
    /// The client went away or the server is stopping while a query ran (499 `canceled`,
    /// nginx' "client closed request", as Prometheus 3.x answers).
    Canceled,
    /// A query ran out of time (503 `timeout`).
    Timeout,
}

/// THE mapping from error kind to HTTP status and Prometheus `errorType`.
pub fn status_of(kind: ErrorKind) -> (StatusCode, &'static str) {
    match kind {
        ErrorKind::BadData => (StatusCode::BAD_REQUEST, "bad_data"),
        ErrorKind::TooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "bad_data"),
        ErrorKind::UnsupportedMediaType => (StatusCode::UNSUPPORTED_MEDIA_TYPE, "bad_data"),
        ErrorKind::TooManyRequests => (StatusCode::TOO_MANY_REQUESTS, "unavailable"),
        ErrorKind::Execution => (StatusCode::UNPROCESSABLE_ENTITY, "execution"),
        ErrorKind::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        ErrorKind::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        ErrorKind::NotFound => (StatusCode::NOT_FOUND, "not_found"),
        ErrorKind::Canceled => (StatusCode::from_u16(499).expect("499 is a valid status code"), "canceled"),
        ErrorKind::Timeout => (StatusCode::SERVICE_UNAVAILABLE, "timeout"),
    }
}

/// An error answered to an HTTP client.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub kind: ErrorKind,
    pub message: String,
    /// Seconds for the `Retry-After` header (429 and 503 only).
    pub retry_after_secs: Option<u64>,
}

impl ApiError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ApiError { kind, message: message.into(), retry_after_secs: None }
    }
    pub fn bad_data(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::BadData, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }
    pub fn too_many_requests(message: impl Into<String>, retry_after_secs: u64) -> Self {
        ApiError { kind: ErrorKind::TooManyRequests, message: message.into(), retry_after_secs: Some(retry_after_secs) }
    }

    /// Status code this error is answered with.
    pub fn status(&self) -> StatusCode {
        status_of(self.kind).0
    }

    /// Plain-text rendering, for remote write and remote read.
    pub fn into_text_response(self) -> Response {
        let (status, _) = status_of(self.kind);
        let mut resp = (status, format!("{}\n", self.message)).into_response();
        self.add_retry_after(&mut resp);
        resp
    }

    /// Sets `Retry-After` when the error carries one.
    pub(crate) fn add_retry_after(&self, resp: &mut Response) {
        if let Some(secs) = self.retry_after_secs {
            resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
    }
}

impl From<ShardError> for ApiError {
    /// Shard errors keep their class: bad input stays 400, an unavailable shard (not
    /// ready, shutting down, poisoned, a transient I/O condition; see
    /// `shards::classify`) is 503 so the client retries, corruption or disk trouble 500.
    fn from(e: ShardError) -> Self {
        let kind = match e.kind {
            ShardErrorKind::BadData => ErrorKind::BadData,
            ShardErrorKind::Unavailable => ErrorKind::Unavailable,
            ShardErrorKind::Internal => ErrorKind::Internal,
            ShardErrorKind::Timeout => ErrorKind::Timeout,
            ShardErrorKind::Canceled => ErrorKind::Canceled,
        };
        ApiError { kind, message: e.message, retry_after_secs: e.retry_after_secs }
    }
}

impl From<tessera_model::Error> for ApiError {
    /// A matcher the user wrote that cannot be built (a regex Go's RE2 refuses): 400,
    /// naming the label and the regex, with the regex parser's reason.
    fn from(e: tessera_model::Error) -> Self {
        ApiError::bad_data(e.chain())
    }
}

impl From<tessera_storage::Error> for ApiError {
    /// Classified like every shard error (see `From<ShardError>`).
    fn from(e: tessera_storage::Error) -> Self {
        ShardError::from(e).into()
    }
}

impl From<tessera_query::QueryError> for ApiError {
    /// The engine's error classes are Prometheus' (`promql.ErrQueryCanceled` and so on),
    /// so they map one to one.
    fn from(e: tessera_query::QueryError) -> Self {
        use tessera_query::ErrorKind as Q;
        let kind = match e.kind {
            Q::BadData => ErrorKind::BadData,
            Q::Execution => ErrorKind::Execution,
            Q::Canceled => ErrorKind::Canceled,
            Q::Timeout => ErrorKind::Timeout,
            Q::Unavailable => ErrorKind::Unavailable,
            Q::Internal => ErrorKind::Internal,
        };
        ApiError::new(kind, e.message)
    }
}

/// THE mapping of the write path's errors to HTTP: 400 for what a retry cannot fix,
/// 413 over a per-request limit, 429 + `Retry-After` for the rate limit and the
/// active-series cap, 503 (+ `Retry-After` when known) when the server cannot write
/// now, 500 otherwise.
impl From<IngestError> for ApiError {
    fn from(e: IngestError) -> Self {
        match e {
            IngestError::Invalid(message) | IngestError::Rejected { message, .. } => ApiError::bad_data(message),
            IngestError::TooLarge(message) => ApiError::new(ErrorKind::TooLarge, message),
            IngestError::RateLimited { message, retry_after_secs }
            | IngestError::SeriesLimited { message, retry_after_secs, .. } => {
                ApiError::too_many_requests(message, retry_after_secs)
            }
            IngestError::Unavailable { message, retry_after_secs } => {
                ApiError { kind: ErrorKind::Unavailable, message, retry_after_secs }
            }
            IngestError::Internal(message) => ApiError::internal(message),
        }
    }
}

/// A decoding refusal answered by an HTTP front end directly (content negotiation of
/// remote write, remote read's body): 415 for a message or encoding not read here, 400
/// for a body that is not one, 413 over a limit, 503 + `Retry-After` while the
/// server-wide decoding memory is full.
impl From<DecodeError> for ApiError {
    fn from(e: DecodeError) -> Self {
        match e {
            DecodeError::Unsupported(message) => ApiError::new(ErrorKind::UnsupportedMediaType, message),
            DecodeError::Invalid(message) => ApiError::bad_data(message),
            DecodeError::TooLarge(message) => ApiError::new(ErrorKind::TooLarge, message),
            DecodeError::Busy { message, retry_after_secs } => {
                ApiError { kind: ErrorKind::Unavailable, message, retry_after_secs: Some(retry_after_secs) }
            }
        }
    }
}

// The gRPC front end maps the same errors in a sibling function here, e.g.
// `fn grpc_code_of(&IngestError) -> tonic::Code`: Invalid and Rejected →
// InvalidArgument, TooLarge → ResourceExhausted (no retry), RateLimited and
// SeriesLimited → ResourceExhausted with a retry delay, Unavailable → Unavailable,
// Internal → Internal; and `ShardErrorKind` likewise, Timeout → DeadlineExceeded,
// Canceled → Cancelled.

/// A JSON-API handler's error: renders [`ApiError`] in Prometheus' envelope (its
/// `IntoResponse` is in `crate::http::json`, with the rest of the JSON).
pub struct JsonError(pub ApiError);

impl From<ApiError> for JsonError {
    fn from(e: ApiError) -> Self {
        JsonError(e)
    }
}

impl From<tessera_storage::Error> for JsonError {
    fn from(e: tessera_storage::Error) -> Self {
        JsonError(e.into())
    }
}

impl From<ShardError> for JsonError {
    fn from(e: ShardError) -> Self {
        JsonError(e.into())
    }
}

/// A remote-write/read handler's error: renders [`ApiError`] as plain text.
pub struct TextError(pub ApiError);

impl IntoResponse for TextError {
    fn into_response(self) -> Response {
        self.0.into_text_response()
    }
}

impl From<ApiError> for TextError {
    fn from(e: ApiError) -> Self {
        TextError(e)
    }
}

impl From<tessera_storage::Error> for TextError {
    fn from(e: tessera_storage::Error) -> Self {
        TextError(e.into())
    }
}

impl From<ShardError> for TextError {
    fn from(e: ShardError) -> Self {
        TextError(e.into())
    }
}

/// Start-up errors: configuration and data-directory problems. Printed, then exit 1.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_prometheus_statuses_and_error_types() {
        assert_eq!(status_of(ErrorKind::BadData), (StatusCode::BAD_REQUEST, "bad_data"));
        assert_eq!(status_of(ErrorKind::TooLarge).0, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(status_of(ErrorKind::UnsupportedMediaType).0, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert_eq!(status_of(ErrorKind::TooManyRequests).0, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(status_of(ErrorKind::Execution), (StatusCode::UNPROCESSABLE_ENTITY, "execution"));
        assert_eq!(status_of(ErrorKind::Unavailable), (StatusCode::SERVICE_UNAVAILABLE, "unavailable"));
        assert_eq!(status_of(ErrorKind::Internal), (StatusCode::INTERNAL_SERVER_ERROR, "internal"));
    }

    #[test]
    fn storage_failures_are_5xx_so_senders_retry() {
        let poisoned: ApiError = tessera_storage::Error::Poisoned { cause: "a WAL fsync failed: EIO".into() }.into();
        assert_eq!(poisoned.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(poisoned.message.contains("a WAL fsync failed: EIO"), "{}", poisoned.message);
        let timed_out: ApiError = tessera_storage::Error::Interrupted { what: "index scan", timed_out: true }.into();
        assert_eq!(timed_out.kind, ErrorKind::Timeout);
        let corrupt: ApiError = tessera_storage::Error::Corrupt { what: "chunk", detail: "bad crc".into() }.into();
        assert_eq!(corrupt.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(corrupt.message.contains("bad crc"));
        let bad: ApiError = tessera_storage::Error::InvalidInput("label too long".into()).into();
        assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    }

    /// Every write-path error class has one status; the refused-series variants and the
    /// limits carry `Retry-After` only when a retry can succeed.
    #[test]
    fn ingest_errors_map_to_the_remote_write_statuses() {
        let cases: [(IngestError, StatusCode, Option<&str>); 7] = [
            (IngestError::Invalid("not snappy".into()), StatusCode::BAD_REQUEST, None),
            (IngestError::Rejected { message: "series up{}".into(), written: 3 }, StatusCode::BAD_REQUEST, None),
            (IngestError::TooLarge("too big".into()), StatusCode::PAYLOAD_TOO_LARGE, None),
            (
                IngestError::RateLimited { message: "rate".into(), retry_after_secs: 2 },
                StatusCode::TOO_MANY_REQUESTS,
                Some("2"),
            ),
            (
                IngestError::SeriesLimited { message: "cap".into(), written: 1, retry_after_secs: 30 },
                StatusCode::TOO_MANY_REQUESTS,
                Some("30"),
            ),
            (
                IngestError::Unavailable { message: "poisoned".into(), retry_after_secs: None },
                StatusCode::SERVICE_UNAVAILABLE,
                None,
            ),
            (IngestError::Internal("corrupt".into()), StatusCode::INTERNAL_SERVER_ERROR, None),
        ];
        for (e, status, retry) in cases {
            let what = format!("{e:?}");
            let message = e.to_string();
            let resp = ApiError::from(e).into_text_response();
            assert_eq!(resp.status(), status, "{what}");
            assert_eq!(resp.headers().get(header::RETRY_AFTER).and_then(|v| v.to_str().ok()), retry, "{what}");
            assert!(!message.is_empty());
        }
    }

    /// A shard that cannot serve now answers 503 `unavailable` (retry), in the JSON API
    /// too; only lasting trouble is 500.
    #[test]
    fn unavailable_shard_errors_are_503_unavailable() {
        for e in [
            ShardError::not_ready(),
            ShardError::shutting_down(),
            ShardError::from(tessera_storage::Error::Poisoned { cause: "fsync".into() }),
            ShardError::from(tessera_storage::Error::Io {
                op: "open",
                path: "/d".into(),
                source: std::io::ErrorKind::StorageFull.into(),
            }),
        ] {
            let api = ApiError::from(e.clone());
            assert_eq!(status_of(api.kind), (StatusCode::SERVICE_UNAVAILABLE, "unavailable"), "{e:?}");
        }
        assert_eq!(ApiError::from(ShardError::not_ready()).retry_after_secs, Some(5));
        let broken = ApiError::from(ShardError::from(tessera_storage::Error::Corrupt {
            what: "chunk",
            detail: "bad crc".into(),
        }));
        assert_eq!(status_of(broken.kind), (StatusCode::INTERNAL_SERVER_ERROR, "internal"));
    }

    #[test]
    fn too_many_requests_carries_retry_after() {
        let resp = ApiError::too_many_requests("slow down", 7).into_text_response();
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "7");
    }
}

//! Prometheus' answer envelope for the query API. Errors are the server's [`ApiError`];
//! the one mapping from error kind to HTTP status and `errorType` is
//! [`crate::error::status_of`].

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use tessera_query::QueryError;

use super::json;
pub use crate::error::{ApiError, ErrorKind, JsonError};

/// `invalid parameter "<name>": <reason>`, Prometheus' wording for a malformed parameter.
pub fn invalid_param(name: &str, reason: impl std::fmt::Display) -> ApiError {
    ApiError::bad_data(format!("invalid parameter {name:?}: {reason}"))
}

impl From<QueryError> for ApiError {
    /// The engine's error classes are Prometheus' (`promql.ErrQueryCanceled` and so on),
    /// so they map one to one.
    fn from(e: QueryError) -> Self {
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

/// Renders an error in Prometheus' JSON envelope.
pub fn error_response(e: impl Into<ApiError>) -> Response {
    JsonError(e.into()).into_response()
}

/// A successful answer whose `data` is already encoded JSON.
pub struct ApiSuccess {
    pub data_json: String,
    pub warnings: Vec<String>,
    pub infos: Vec<String>,
}

impl ApiSuccess {
    pub fn data(data_json: String) -> Self {
        ApiSuccess { data_json, warnings: Vec::new(), infos: Vec::new() }
    }
}

impl IntoResponse for ApiSuccess {
    fn into_response(self) -> Response {
        let body = json::success_envelope(&self.data_json, &self.warnings, &self.infos);
        (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], body).into_response()
    }
}

/// Prometheus reports at most this many warnings and infos each, then one line saying how many
/// were left out (`annotations.AsStrings(query, 10, 10)`).
const MAX_ANNOTATIONS: usize = 10;

/// Caps a list of annotations the way Prometheus does; `what` is `warning` or `info`.
pub fn cap_annotations(mut items: Vec<String>, what: &str) -> Vec<String> {
    if items.len() > MAX_ANNOTATIONS {
        let skipped = items.len() - MAX_ANNOTATIONS;
        items.truncate(MAX_ANNOTATIONS);
        items.push(format!("{skipped} more {what} annotations omitted"));
    }
    items
}

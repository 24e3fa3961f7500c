//! Prometheus' answer envelope and the one place that maps an error kind to an HTTP status.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use tessera_query::{ErrorKind, QueryError};

use super::json;

/// Prometheus' error vocabulary (`errorType`), shared by every read endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiErrorKind {
    BadData,
    Execution,
    Canceled,
    Timeout,
    Unavailable,
    NotFound,
    Internal,
}

/// The single mapping from error kind to HTTP status and Prometheus `errorType`, as Prometheus
/// 3.x' `respondError` does it. 499 is nginx' "client closed request", which Prometheus uses
/// for canceled queries.
pub fn status_and_type(kind: ApiErrorKind) -> (StatusCode, &'static str) {
    match kind {
        ApiErrorKind::BadData => (StatusCode::BAD_REQUEST, "bad_data"),
        ApiErrorKind::Execution => (StatusCode::UNPROCESSABLE_ENTITY, "execution"),
        ApiErrorKind::Canceled => (
            StatusCode::from_u16(499).expect("499 is a valid status code"),
            "canceled",
        ),
        ApiErrorKind::Timeout => (StatusCode::SERVICE_UNAVAILABLE, "timeout"),
        ApiErrorKind::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        ApiErrorKind::NotFound => (StatusCode::NOT_FOUND, "not_found"),
        ApiErrorKind::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
    }
}

/// An error answer: kind plus the message shown to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub kind: ApiErrorKind,
    pub message: String,
}

impl ApiError {
    pub fn bad_data(message: impl Into<String>) -> Self {
        ApiError { kind: ApiErrorKind::BadData, message: message.into() }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ApiError { kind: ApiErrorKind::Internal, message: message.into() }
    }

    /// `invalid parameter "<name>": <reason>`, Prometheus' wording for a malformed parameter.
    pub fn invalid_param(name: &str, reason: impl std::fmt::Display) -> Self {
        ApiError::bad_data(format!("invalid parameter {name:?}: {reason}"))
    }
}

impl From<QueryError> for ApiError {
    fn from(e: QueryError) -> Self {
        let kind = match e.kind {
            ErrorKind::BadData => ApiErrorKind::BadData,
            ErrorKind::Execution => ApiErrorKind::Execution,
            ErrorKind::Canceled => ApiErrorKind::Canceled,
            ErrorKind::Timeout => ApiErrorKind::Timeout,
            ErrorKind::Internal => ApiErrorKind::Internal,
        };
        ApiError { kind, message: e.message }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, error_type) = status_and_type(self.kind);
        json_response(status, json::error_envelope(error_type, &self.message))
    }
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
        json_response(
            StatusCode::OK,
            json::success_envelope(&self.data_json, &self.warnings, &self.infos),
        )
    }
}

fn json_response(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
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

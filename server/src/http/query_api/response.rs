//! Helpers of the query API's answers: errors in the JSON envelope and Prometheus' cap
//! on annotations. Errors are the server's [`ApiError`]; the one mapping from error kind
//! to HTTP status and `errorType` is [`crate::error::status_of`], the one JSON writer
//! `crate::http::json`.

use axum::response::{IntoResponse, Response};

pub use crate::error::{ApiError, ErrorKind, JsonError};

/// Renders an error in Prometheus' JSON envelope.
pub fn error_response(e: impl Into<ApiError>) -> Response {
    JsonError(e.into()).into_response()
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

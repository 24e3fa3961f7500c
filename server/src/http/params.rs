//! Parsing of the HTTP API's common parameters: form/query pairs, `match[]` series
//! selectors, `start`/`end` timestamps and `limit`, with Prometheus' rules and error
//! messages.

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap};
use http_body_util::BodyExt;
use promql_parser::parser::Expr;
use tessera_model::Matcher;
use tessera_query::TextLimits;

use crate::error::ApiError;

/// All `key=value` pairs of a POST form body and the URL query string, in Go's `r.Form`
/// order (body first), so that [`one`] picks the value Prometheus' `r.FormValue` would.
pub fn form_pairs(query: Option<&str>, body: &[u8]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> =
        form_urlencoded::parse(body).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    out.extend(form_urlencoded::parse(query.unwrap_or("").as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())));
    out
}

/// Every value of a repeated parameter, in order.
pub fn all<'a>(pairs: &'a [(String, String)], key: &str) -> Vec<&'a str> {
    pairs.iter().filter(|(k, _)| k == key).map(|(_, v)| v.as_str()).collect()
}

/// The first value of a parameter, if present and non-empty (Go's `r.FormValue`).
pub fn one<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty())
}

/// Parses a timestamp with the query API's rules (unix float seconds, RFC 3339, and
/// Prometheus' min/max time spellings). Returns ms.
pub fn parse_time(s: &str, param: &str) -> Result<i64, ApiError> {
    super::query_api::params::parse_time(s).map_err(|e| ApiError::bad_data(format!("invalid parameter {param:?}: {e}")))
}

/// `start`/`end` in ms with Prometheus' defaults (the whole time range).
pub fn time_range(pairs: &[(String, String)]) -> Result<(i64, i64), ApiError> {
    let start = one(pairs, "start").map(|s| parse_time(s, "start")).transpose()?.unwrap_or(i64::MIN);
    let end = one(pairs, "end").map(|s| parse_time(s, "end")).transpose()?.unwrap_or(i64::MAX);
    if end < start {
        return Err(ApiError::bad_data("invalid parameter \"end\": end timestamp must not be before start time"));
    }
    Ok((start, end))
}

/// `limit`: a non-negative integer; 0 or absent means no limit.
pub fn limit(pairs: &[(String, String)]) -> Result<Option<usize>, ApiError> {
    match one(pairs, "limit") {
        None => Ok(None),
        Some(s) => match s.parse::<i64>() {
            Ok(n) if n > 0 => Ok(Some(n as usize)),
            Ok(0) => Ok(None),
            _ => Err(ApiError::bad_data(format!(
                "invalid parameter \"limit\": cannot parse {s:?} to a non-negative integer"
            ))),
        },
    }
}

/// Parses every `match[]` into selector matcher lists (an `or` inside one selector
/// gives several lists). An empty result means "no match[] given". Each selector's
/// text is first checked against `limits` (length and nesting depth), so that the
/// PromQL parser never sees a text deep enough to overflow its stack.
pub fn selectors(pairs: &[(String, String)], limits: &TextLimits) -> Result<Vec<Vec<Matcher>>, ApiError> {
    let mut out = Vec::new();
    for s in all(pairs, "match[]") {
        tessera_query::engine::limits::check_text(s, limits)
            .map_err(|e| ApiError::bad_data(format!("invalid parameter \"match[]\": {}", e.message)))?;
        out.extend(parse_selector(s)?);
    }
    Ok(out)
}

/// [`selectors`] on the blocking pool: parsing PromQL and compiling regexes is CPU work
/// that must not hold an async worker.
pub async fn selectors_off_runtime(
    pairs: &[(String, String)],
    limits: TextLimits,
) -> Result<Vec<Vec<Matcher>>, ApiError> {
    let matches: Vec<(String, String)> = pairs.iter().filter(|(k, _)| k == "match[]").cloned().collect();
    if matches.is_empty() {
        return Ok(Vec::new());
    }
    tokio::task::spawn_blocking(move || selectors(&matches, &limits))
        .await
        .map_err(|e| ApiError::internal(format!("parsing match[] failed: {e}")))?
}

/// Parses one series selector such as `up{job=~"node.*"}`. The text must have passed
/// `check_text` first (as [`selectors`] does): the parser recurses per nesting level.
pub fn parse_selector(s: &str) -> Result<Vec<Vec<Matcher>>, ApiError> {
    let expr = promql_parser::parser::parse(s)
        .map_err(|e| ApiError::bad_data(format!("invalid parameter \"match[]\": {e}")))?;
    let Expr::VectorSelector(vs) = expr else {
        return Err(ApiError::bad_data(format!("invalid parameter \"match[]\": {s:?} is not a series selector")));
    };
    let sets = tessera_query::selector_matchers(&vs).map_err(ApiError::from)?;
    if sets.iter().any(|set| set.iter().all(|m| m.matches_empty())) {
        return Err(ApiError::bad_data(format!(
            "invalid parameter \"match[]\": {s:?} must contain at least one matcher that does not match the empty string"
        )));
    }
    Ok(sets)
}

/// The tenant of a request: `X-Scope-OrgID`, or `anonymous`. Tenant IDs follow the
/// Cortex/Mimir rules (at most 150 characters of `[A-Za-z0-9!-_.*'()]`, not `.`/`..`),
/// so they are safe in logs and labels; several tenants (`a|b`) are not supported, and
/// neither is a repeated header (which one a proxy in front would have checked is
/// unknowable, so it is refused rather than first-wins).
pub fn tenant(headers: &HeaderMap) -> Result<String, ApiError> {
    let mut all = headers.get_all("x-scope-orgid").iter();
    let Some(v) = all.next() else { return Ok(crate::shards::DEFAULT_TENANT.to_owned()) };
    if all.next().is_some() {
        return Err(ApiError::bad_data(format!(
            "X-Scope-OrgID is given {} times: send exactly one tenant header",
            headers.get_all("x-scope-orgid").iter().count()
        )));
    }
    let s = v.to_str().map_err(|_| ApiError::bad_data("X-Scope-OrgID is not valid text"))?.trim();
    let ok_char = |c: char| c.is_ascii_alphanumeric() || "!-_.*'()".contains(c);
    if s.is_empty() || s.len() > 150 || s == "." || s == ".." || !s.chars().all(ok_char) {
        return Err(ApiError::bad_data(format!(
            "invalid X-Scope-OrgID {s:?}: use 1-150 characters of letters, digits and !-_.*'()"
        )));
    }
    Ok(s.to_owned())
}

/// How much of an oversized form body is still read (and discarded) before answering
/// 413, as a multiple of the limit: a client that is still sending when the server
/// answers and closes sees a reset instead of the 413 (and Prometheus-style clients
/// retry forever). Beyond this the connection is closed without reading further.
const DRAIN_FACTOR: usize = 4;

/// Reads a form body of at most `max` bytes. A larger one is refused with 413 in the
/// JSON envelope; up to `DRAIN_FACTOR` times the limit is read and discarded first, so
/// that the client, done sending, reads the answer.
pub async fn read_form_body(headers: &HeaderMap, mut body: Body, max: usize) -> Result<Bytes, ApiError> {
    let too_large = |n: u64| {
        ApiError::new(
            crate::error::ErrorKind::TooLarge,
            format!("form body of {n} bytes or more is larger than the limit of {max} bytes (4 x query.max_query_bytes + 64 KiB)"),
        )
    };
    let drain_max = max.saturating_mul(DRAIN_FACTOR) as u64;
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if let Some(len) = declared.filter(|&len| len > drain_max) {
        return Err(too_large(len));
    }
    let mut kept: Vec<u8> = Vec::new();
    let mut seen: u64 = 0;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::bad_data(format!("error parsing form values: {e}")))?;
        let Ok(data) = frame.into_data() else { continue };
        seen += data.len() as u64;
        if seen > drain_max {
            return Err(too_large(seen));
        }
        if seen <= max as u64 {
            kept.extend_from_slice(&data);
        }
    }
    if seen > max as u64 {
        return Err(too_large(seen));
    }
    Ok(Bytes::from(kept))
}

#[cfg(test)]
mod tests;

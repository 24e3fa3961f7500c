//! Request parameters of every JSON endpoint, read the way Prometheus reads them: one
//! implementation of each of its parsers, with its error texts.
//!
//! Prometheus' handlers call Go's `r.FormValue`, which merges a POST
//! `application/x-www-form-urlencoded` body with the URL query string, body first
//! ([`Params`]). Times are RFC 3339 or unix seconds as a float (`parseTime`), durations
//! `1h30m`-style or float seconds (`parseDuration`), `limit` a non-negative integer
//! (`parseLimitParam`), `match[]` series selectors (`parseMatchersParam`). The parsers
//! return the text Prometheus puts after `invalid parameter "<name>": ` (see
//! [`invalid_param`]), so clients that match on error text see the same words. The
//! tenant header ([`tenant`]) is read here too, the same way for every endpoint.

use axum::body::Body;
use axum::http::{header, HeaderMap};
use promql_parser::parser::Expr;
use tessera_model::Matcher;
use tessera_query::TextLimits;

use crate::error::ApiError;

/// The request's form values, in Go's `r.Form` order: POST body pairs first, then the URL
/// query string's pairs. The first value of a name wins, as with `r.FormValue`.
#[derive(Debug, Default, Clone)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Collects the values of a request. The body is only read as a form when the content type
    /// says it is one; Go's `ParseForm` ignores other bodies the same way.
    pub fn from_request(uri_query: Option<&str>, content_type: Option<&str>, body: &[u8]) -> Params {
        let mut pairs = Vec::new();
        let is_form = content_type
            .map(|ct| {
                ct.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/x-www-form-urlencoded")
            })
            .unwrap_or(false);
        if is_form {
            pairs.extend(form_urlencoded::parse(body).map(|(k, v)| (k.into_owned(), v.into_owned())));
        }
        if let Some(q) = uri_query {
            pairs.extend(form_urlencoded::parse(q.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())));
        }
        Params { pairs }
    }

    /// The values of a GET request (URL query string only).
    pub fn from_query(uri_query: Option<&str>) -> Params {
        Params::from_request(uri_query, None, &[])
    }

    /// The first value of `name`, or `None` when it is absent or empty. Prometheus treats an
    /// empty value like a missing one (`r.FormValue(..) != ""`).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty())
    }

    /// The first value of `name`, empty when absent (Go's `r.FormValue`).
    pub fn value(&self, name: &str) -> &str {
        self.get(name).unwrap_or("")
    }

    /// Every value of a repeated parameter such as `match[]`, in request order.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.pairs.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str()).collect()
    }
}

/// Reads what every JSON endpoint reads first: the tenant (a bad header is refused before
/// any body is read), then the form body under `max_form_bytes` (413 over it, see
/// [`super::body::read_bounded`]), as [`Params`].
pub async fn read_request(
    headers: &HeaderMap,
    uri_query: Option<&str>,
    body: Body,
    max_form_bytes: usize,
) -> Result<(Params, String), ApiError> {
    let tenant = tenant(headers)?;
    let body = super::body::read_bounded(headers, body, &super::body::BodyLimit::form(max_form_bytes)).await?;
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    Ok((Params::from_request(uri_query, content_type, &body), tenant))
}

/// `partial_response` (Thanos' parameter, read by cluster front ends): `Some(true|false)`
/// when given as `true`/`1` or `false`/`0`; anything else is a 400 naming the value.
pub fn partial_response(params: &Params) -> Result<Option<bool>, ApiError> {
    match params.get("partial_response") {
        None => Ok(None),
        Some("true" | "1") => Ok(Some(true)),
        Some("false" | "0") => Ok(Some(false)),
        Some(v) => Err(invalid_param("partial_response", format!("{v:?} is not true or false"))),
    }
}

/// `invalid parameter "<name>": <reason>`, Prometheus' `invalidParamError`.
pub fn invalid_param(name: &str, reason: impl std::fmt::Display) -> ApiError {
    ApiError::bad_data(format!("invalid parameter {name:?}: {reason}"))
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

// ---------------------------------------------------------------------------------------
// Times

/// Prometheus' smallest representable time, `time.Unix(math.MinInt64/1000+62135596801, 0)`, in
/// milliseconds. Clients send its RFC 3339 spelling to mean "unbounded"; it is also the
/// default `start` of the index endpoints.
pub const MIN_TIME_MS: i64 = (i64::MIN / 1000 + 62_135_596_801) * 1000;
/// Prometheus' largest representable time, in milliseconds (the default `end`).
pub const MAX_TIME_MS: i64 = (i64::MAX / 1000 - 62_135_596_801) * 1000 + 999;
/// How Go formats those two bounds; Go's time parser cannot read 9-digit years back, so
/// Prometheus (and we) recognise these exact strings.
const MIN_TIME_FORMATTED: &str = "-292273086-05-16T16:47:06Z";
const MAX_TIME_FORMATTED: &str = "292277025-08-18T07:12:54.999999999Z";

/// Prometheus' `parseTime`: unix seconds as a float (rounded to the millisecond, as Prometheus
/// does) or RFC 3339 with optional fractional seconds. Returns milliseconds since the epoch.
pub fn parse_time(s: &str) -> Result<i64, String> {
    if let Ok(secs) = s.parse::<f64>() {
        // Prometheus splits integer and fraction and rounds the fraction to milliseconds.
        // Values outside i64 milliseconds (or NaN/Inf) have no defined meaning in Go; we
        // refuse them instead of wrapping.
        if !secs.is_finite() || secs.abs() >= 9.2e15 {
            return Err(format!("cannot parse {s:?} to a valid timestamp"));
        }
        let int = secs.trunc();
        let frac_ms = ((secs - int) * 1000.0).round();
        return Ok(int as i64 * 1000 + frac_ms as i64);
    }
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(t.timestamp_millis());
    }
    match s {
        MIN_TIME_FORMATTED => Ok(MIN_TIME_MS),
        MAX_TIME_FORMATTED => Ok(MAX_TIME_MS),
        _ => Err(format!("cannot parse {s:?} to a valid timestamp")),
    }
}

/// Prometheus' `parseTimeParam` wrapped in `invalidParamError`: an optional time
/// parameter, `default_ms` when absent, else `invalid parameter "start": Invalid time
/// value for 'start': cannot parse "x" to a valid timestamp` (Prometheus' capital I).
pub fn time_param(params: &Params, name: &str, default_ms: i64) -> Result<i64, ApiError> {
    match params.get(name) {
        None => Ok(default_ms),
        Some(v) => parse_time(v).map_err(|e| invalid_param(name, format!("Invalid time value for '{name}': {e}"))),
    }
}

/// A required time parameter as `query_range` reads `start` and `end` (`parseTime` on the
/// raw value, so an absent one is `cannot parse "" to a valid timestamp`).
pub fn required_time(params: &Params, name: &str) -> Result<i64, ApiError> {
    parse_time(params.value(name)).map_err(|e| invalid_param(name, e))
}

// ---------------------------------------------------------------------------------------
// Durations

/// Prometheus' `parseDuration`, in nanoseconds (Go's `time.Duration` unit, so float seconds
/// keep their precision until the caller rounds them): float seconds (`"15"`, `"0.5"`) or a
/// Prometheus duration (`"1h30m"`, `"5m"`, `"100ms"`; units y w d h m s ms, each at most
/// once, largest first).
///
/// Hand-written rather than `promql_parser::util::parse_duration`: that one refuses `"0"`,
/// reads each component as a `u32`, and panics (`Duration::from_secs_f64`) on a negative
/// or huge float, which a request may carry.
pub fn parse_duration_ns(s: &str) -> Result<i64, String> {
    if let Ok(secs) = s.parse::<f64>() {
        let ns = secs * 1e9;
        if ns.is_nan() || ns >= i64::MAX as f64 || ns <= i64::MIN as f64 {
            return Err(format!("cannot parse {s:?} to a valid duration. It overflows int64"));
        }
        // Go converts with truncation toward zero.
        return Ok(ns as i64);
    }
    parse_prometheus_duration_ms(s)
        .and_then(|ms| ms.checked_mul(1_000_000))
        .ok_or_else(|| format!("cannot parse {s:?} to a valid duration"))
}

/// Duration units in the only order Prometheus accepts (and prints) them, with their size
/// in milliseconds.
const UNITS: [(&str, i64); 7] = [
    ("y", 365 * 24 * 3_600_000),
    ("w", 7 * 24 * 3_600_000),
    ("d", 24 * 3_600_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// Prometheus' `model.ParseDuration` in milliseconds; `None` if malformed or overflowing.
fn parse_prometheus_duration_ms(s: &str) -> Option<i64> {
    if s == "0" {
        return Some(0);
    }
    if s.is_empty() {
        return None;
    }
    let bytes = s.as_bytes();
    let mut pos = 0;
    let mut next_unit = 0; // index into UNITS that the next component may use at the earliest
    let mut total: i64 = 0;
    while pos < bytes.len() {
        let start = pos;
        while pos < bytes.len() && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        if pos == start {
            return None;
        }
        let n: i64 = s[start..pos].parse().ok()?;
        // "ms" must be tried before "m", otherwise "5ms" would read as 5 minutes then "s".
        let rest = &s[pos..];
        let unit = if rest.starts_with("ms") { "ms" } else { rest.get(..1)? };
        let idx = UNITS.iter().position(|(u, _)| *u == unit)?;
        if idx < next_unit {
            return None;
        }
        next_unit = idx + 1;
        pos += unit.len();
        total = total.checked_add(n.checked_mul(UNITS[idx].1)?)?;
    }
    Some(total)
}

/// A duration in Prometheus' spelling (`model.Duration.String`): largest units first,
/// but years and weeks only when exact ("easier to read 90d than 12w6d"), so 15 days is
/// `15d`, 14 days `2w`, 90 s `1m30s`, zero `0s`. promql-parser's `display_duration`
/// implements exactly that rule. A negative duration prints as `0s` (Prometheus prints
/// nothing for one; none reaches here, retention is validated non-negative).
pub fn format_duration_ms(ms: i64) -> String {
    let ms = u64::try_from(ms).unwrap_or(0);
    promql_parser::util::display_duration(&std::time::Duration::from_millis(ms))
}

// ---------------------------------------------------------------------------------------
// Limits

/// `limit` as Prometheus' `parseLimitParam` reads it for query, query_range, series,
/// labels and label values: absent or 0 means no limit (0 is returned); otherwise Go's
/// `strconv.Atoi` with its error text (`invalid parameter "limit": strconv.Atoi: parsing
/// "x": invalid syntax`, `... value out of range`), and a negative number is `limit must
/// be non-negative`.
pub fn limit(params: &Params) -> Result<usize, ApiError> {
    let Some(v) = params.get("limit") else { return Ok(0) };
    let n = atoi(v).map_err(|e| invalid_param("limit", e))?;
    if n < 0 {
        return Err(invalid_param("limit", "limit must be non-negative"));
    }
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// Go's `strconv.Atoi` on a 64-bit platform, with its error text.
pub fn atoi(s: &str) -> Result<i64, String> {
    use std::num::IntErrorKind;
    s.parse::<i64>().map_err(|e| match e.kind() {
        IntErrorKind::PosOverflow | IntErrorKind::NegOverflow => {
            format!("strconv.Atoi: parsing {s:?}: value out of range")
        }
        _ => format!("strconv.Atoi: parsing {s:?}: invalid syntax"),
    })
}

/// `limit` or `limit_per_metric` of `/api/v1/metadata`, as Prometheus' `metricMetadata`
/// reads them: Go's `strconv.Atoi`, refused with `<name> must be a number` (no
/// `invalid parameter` prefix there); absent or negative means no limit (`None`).
pub fn metadata_limit(params: &Params, name: &str) -> Result<Option<usize>, ApiError> {
    let Some(v) = params.get(name) else { return Ok(None) };
    let n = atoi(v).map_err(|_| ApiError::bad_data(format!("{name} must be a number")))?;
    Ok(usize::try_from(n).ok())
}

/// `limit` of `/api/v1/status/tsdb`, as Prometheus' `serveTSDBStatus` reads it: `default`
/// when absent, else a positive integer (`limit must be a positive number`) of at most
/// `max` (`limit must not exceed <max>`).
pub fn tsdb_limit(params: &Params, default: usize, max: usize) -> Result<usize, ApiError> {
    let Some(v) = params.get("limit") else { return Ok(default) };
    match atoi(v) {
        Ok(n) if n > 0 => match usize::try_from(n) {
            Ok(n) if n <= max => Ok(n),
            _ => Err(ApiError::bad_data(format!("limit must not exceed {max}"))),
        },
        _ => Err(ApiError::bad_data("limit must be a positive number")),
    }
}

// ---------------------------------------------------------------------------------------
// match[]

/// Parses every `match[]` into selector matcher lists (an `or` inside one selector
/// gives several lists). An empty result means "no match[] given". Each selector's
/// text is first checked against `limits` (length and nesting depth), so that the
/// PromQL parser never sees a text deep enough to overflow its stack.
pub fn selectors(params: &Params, limits: &TextLimits) -> Result<Vec<Vec<Matcher>>, ApiError> {
    let mut out = Vec::new();
    for s in params.all("match[]") {
        tessera_query::engine::limits::check_text(s, limits).map_err(|e| invalid_param("match[]", e.message))?;
        out.extend(parse_selector(s)?);
    }
    Ok(out)
}

/// [`selectors`] on the blocking pool: parsing PromQL and compiling regexes is CPU work
/// that must not hold an async worker.
pub async fn selectors_off_runtime(params: &Params, limits: TextLimits) -> Result<Vec<Vec<Matcher>>, ApiError> {
    let matches: Vec<(String, String)> =
        params.all("match[]").into_iter().map(|v| ("match[]".to_owned(), v.to_owned())).collect();
    if matches.is_empty() {
        return Ok(Vec::new());
    }
    let matches = Params { pairs: matches };
    tokio::task::spawn_blocking(move || selectors(&matches, &limits))
        .await
        .map_err(|e| ApiError::internal(format!("parsing match[] failed: {e}")))?
}

/// Parses one series selector such as `up{job=~"node.*"}`. The text must have passed
/// `check_text` first (as [`selectors`] does): the parser recurses per nesting level.
/// A selector whose matchers all match the empty string is refused with Prometheus'
/// `match[] must contain at least one non-empty matcher`.
pub fn parse_selector(s: &str) -> Result<Vec<Vec<Matcher>>, ApiError> {
    let expr = promql_parser::parser::parse(s).map_err(|e| invalid_param("match[]", e))?;
    let Expr::VectorSelector(vs) = expr else {
        return Err(invalid_param("match[]", format!("{s:?} is not a series selector")));
    };
    let sets = tessera_query::selector_matchers(&vs).map_err(ApiError::from)?;
    if sets.iter().any(|set| set.iter().all(|m| m.matches_empty())) {
        return Err(ApiError::bad_data("match[] must contain at least one non-empty matcher"));
    }
    Ok(sets)
}

#[cfg(test)]
mod tests;

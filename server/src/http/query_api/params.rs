//! Request parameters read the way Prometheus reads them.
//!
//! Prometheus' handlers call Go's `r.FormValue`, which merges a POST
//! `application/x-www-form-urlencoded` body with the URL query string, body first. Times are
//! RFC 3339 or unix seconds as a float; durations are `1h30m`-style or float seconds. Each
//! parser here returns the message Prometheus puts after `invalid parameter "<name>": `, so
//! clients that match on error text see the same words.

/// The request's form values, in Go's `r.Form` order: POST body pairs first, then the URL
/// query string's pairs. The first value of a name wins, as with `r.FormValue`.
#[derive(Debug, Default, Clone)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Collects the values of a request. The body is only read as a form when the content type
    /// says it is one; Go ignores other bodies the same way.
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

/// Prometheus' smallest representable time, `time.Unix(math.MinInt64/1000+62135596801, 0)`, in
/// milliseconds. Clients send its RFC 3339 spelling to mean "unbounded".
pub const MIN_TIME_MS: i64 = (i64::MIN / 1000 + 62_135_596_801) * 1000;
/// Prometheus' largest representable time, in milliseconds.
pub const MAX_TIME_MS: i64 = (i64::MAX / 1000 - 62_135_596_801) * 1000 + 999;
/// How Go formats those two bounds; Go's time parser cannot read 9-digit years back, so
/// Prometheus (and we) recognise these exact strings.
const MIN_TIME_FORMATTED: &str = "-292273086-05-16T16:47:06Z";
const MAX_TIME_FORMATTED: &str = "292277025-08-18T07:12:54.999999999Z";

/// Parses a timestamp: unix seconds as a float (rounded to the millisecond, as Prometheus does)
/// or RFC 3339 with optional fractional seconds. Returns milliseconds since the epoch.
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

/// Reads an optional time parameter, with Prometheus' wording when it is malformed.
pub fn parse_time_param(params: &Params, name: &str, default_ms: i64) -> Result<i64, String> {
    match params.get(name) {
        None => Ok(default_ms),
        Some(v) => parse_time(v).map_err(|e| format!("invalid time value for '{name}': {e}")),
    }
}

/// Parses a duration into nanoseconds (Go's `time.Duration` unit, so float seconds keep their
/// precision until the caller rounds them): float seconds (`"15"`, `"0.5"`) or a Prometheus
/// duration (`"1h30m"`, `"5m"`, `"100ms"`; units y w d h m s ms, each at most once, largest
/// first).
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

/// The `limit` parameter: absent means 0 (no limit); negative or non-numeric is an error.
pub fn parse_limit(params: &Params) -> Result<usize, String> {
    match params.get("limit") {
        None => Ok(0),
        Some(v) => {
            let n: i64 = v.parse().map_err(|_| format!("strconv.Atoi: parsing {v:?}: invalid syntax"))?;
            if n < 0 {
                return Err("limit must be non-negative".to_string());
            }
            Ok(n as usize)
        }
    }
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

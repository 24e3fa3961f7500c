//! One line of a Prometheus text exposition (0.0.4) or OpenMetrics 1.0 file, as
//! `tessera import` reads it.
//!
//! The two formats differ in what a timestamp means: OpenMetrics timestamps are seconds
//! (a decimal number, fractions allowed), Prometheus text timestamps are milliseconds
//! (an integer). A file is OpenMetrics when its last non-empty line is `# EOF` (which
//! OpenMetrics requires and the Prometheus text format does not have); otherwise it is
//! Prometheus text. `promtool tsdb create-blocks-from openmetrics` reads only the first
//! kind; both are accepted here.
//!
//! What a line may be:
//! - empty (skipped), `# HELP name text`, `# TYPE name type`, `# UNIT name unit`
//!   (OpenMetrics), `# EOF` (OpenMetrics, last line), any other `#` comment in
//!   Prometheus text;
//! - a sample `name{label="value",...} value timestamp`, with `\\`, `\"` and `\n`
//!   escapes in label values, `NaN`/`+Inf`/`-Inf` values, and in OpenMetrics an
//!   optional exemplar after ` # ` (ignored). The timestamp is required: a backfill
//!   without one would have to invent a time.
//!
//! The parser borrows from the line; label values are copied only when they contain an
//! escape.

use std::borrow::Cow;

/// The exposition format of a file; decides the timestamp unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0: ends with `# EOF`, timestamps in seconds.
    OpenMetrics,
    /// Prometheus text 0.0.4: timestamps in milliseconds.
    PrometheusText,
}

impl Format {
    /// How the format is named in messages, with its timestamp unit.
    pub fn describe(self) -> &'static str {
        match self {
            Format::OpenMetrics => "OpenMetrics (timestamps in seconds)",
            Format::PrometheusText => "Prometheus text (timestamps in milliseconds)",
        }
    }
}

/// Metric types the `# TYPE` line may name (both formats' vocabularies).
const TYPES: [&str; 9] =
    ["counter", "gauge", "histogram", "summary", "untyped", "unknown", "gaugehistogram", "stateset", "info"];

/// What one line holds.
#[derive(Debug, PartialEq)]
pub enum Line<'a> {
    /// Nothing to store (blank, HELP, TYPE, UNIT, comment).
    Skip,
    /// `# EOF`.
    Eof,
    /// One sample.
    Sample(SampleLine<'a>),
}

/// A parsed sample line.
#[derive(Debug, PartialEq)]
pub struct SampleLine<'a> {
    /// The series as written (`name{...}`), trimmed: a cheap key for lines that repeat
    /// a series in the same spelling.
    pub series_text: &'a str,
    pub name: &'a str,
    /// What is between the braces, unparsed (see [`SampleLine::labels`]).
    pub labels_text: &'a str,
    pub value: f64,
    /// Milliseconds since the epoch.
    pub t: i64,
}

impl<'a> SampleLine<'a> {
    /// The label pairs in the order written (unsorted, unvalidated beyond syntax), with
    /// escapes resolved.
    pub fn labels(&self) -> Result<Vec<(&'a str, Cow<'a, str>)>, String> {
        parse_labels(self.labels_text)
    }
}

/// Parses the text between a series' braces: `name="value"` pairs separated by commas,
/// an optional trailing comma, spaces around pairs.
fn parse_labels(line: &str) -> Result<Vec<(&str, Cow<'_, str>)>, String> {
    let b = line.as_bytes();
    let mut labels = Vec::new();
    let mut i = 0;
    loop {
        while b.get(i) == Some(&b' ') {
            i += 1;
        }
        if i == b.len() {
            return Ok(labels);
        }
        let start = i;
        while i < b.len() && is_label_name_char(b[i], i == start) {
            i += 1;
        }
        if i == start {
            return Err(format!("expected a label name or `}}` at {:?}", excerpt(&line[i..])));
        }
        let lname = &line[start..i];
        if b.get(i) != Some(&b'=') || b.get(i + 1) != Some(&b'"') {
            return Err(format!("expected `=\"` after label name {lname:?}"));
        }
        i += 2;
        let (value, next) = parse_quoted(line, i).map_err(|e| format!("label {lname:?}: {e}"))?;
        labels.push((lname, value));
        i = next;
        while b.get(i) == Some(&b' ') {
            i += 1;
        }
        match b.get(i) {
            Some(b',') => i += 1,
            None => return Ok(labels),
            _ => return Err(format!("expected `,` or `}}` after the value of label {lname:?}")),
        }
    }
}

/// Parses one line (without its line terminator).
pub fn parse_line(line: &str, format: Format) -> Result<Line<'_>, String> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.trim().is_empty() {
        return Ok(Line::Skip);
    }
    if let Some(rest) = line.strip_prefix('#') {
        return parse_comment(rest, format);
    }
    parse_sample(line, format).map(Line::Sample)
}

fn parse_comment(rest: &str, format: Format) -> Result<Line<'_>, String> {
    if rest == " EOF" {
        return match format {
            Format::OpenMetrics => Ok(Line::Eof),
            Format::PrometheusText => Err("`# EOF` must be the last line of the file".into()),
        };
    }
    let mut words = rest.trim_start().splitn(3, ' ');
    let keyword = words.next().unwrap_or("");
    match keyword {
        "HELP" | "TYPE" | "UNIT" if rest.starts_with(' ') => {
            let name = words.next().unwrap_or("");
            if !valid_metric_name(name) {
                return Err(format!("# {keyword} names an invalid metric name {name:?}"));
            }
            if keyword == "TYPE" {
                let ty = words.next().unwrap_or("").trim();
                if !TYPES.contains(&ty) {
                    return Err(format!("unknown metric type {ty:?} (expected one of {})", TYPES.join(", ")));
                }
            }
            if keyword == "UNIT" && format == Format::PrometheusText {
                return Err("# UNIT exists only in OpenMetrics (a file ending with `# EOF`)".into());
            }
            Ok(Line::Skip)
        }
        _ => match format {
            Format::PrometheusText => Ok(Line::Skip),
            Format::OpenMetrics => {
                Err("OpenMetrics allows only `# HELP`, `# TYPE`, `# UNIT` and `# EOF` comments".into())
            }
        },
    }
}

fn valid_metric_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_' || b[0] == b':')
        && b[1..].iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b':')
}

fn is_label_name_char(c: u8, first: bool) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || (!first && c.is_ascii_digit())
}

fn parse_sample(line: &str, format: Format) -> Result<SampleLine<'_>, String> {
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b':') {
        i += 1;
    }
    let name = &line[..i];
    if !valid_metric_name(name) {
        return Err(format!("expected a metric name at the start of the line, found {:?}", excerpt(line)));
    }
    // Only the extent of the label set is found here (quotes and escapes respected);
    // its pairs are parsed by `SampleLine::labels`, which the importer calls only for a
    // series spelling it has not seen yet.
    let mut labels_text = "";
    if b.get(i) == Some(&b'{') {
        let start = i + 1;
        let mut j = start;
        let mut in_quote = false;
        loop {
            match b.get(j) {
                None => return Err("label set has no closing `}`".into()),
                Some(b'\\') if in_quote => j += 2,
                Some(b'"') => {
                    in_quote = !in_quote;
                    j += 1;
                }
                Some(b'}') if !in_quote => break,
                Some(_) => j += 1,
            }
        }
        labels_text = &line[start..j];
        i = j + 1;
    }
    let series_text = &line[..i];
    let rest = &line[i..];
    if !rest.starts_with([' ', '\t']) {
        return Err(format!("expected a space and a value after {:?}", excerpt(series_text)));
    }
    // An OpenMetrics exemplar follows ` # `; it is not stored.
    let body = match format {
        Format::OpenMetrics => rest.find(" # ").map_or(rest, |p| &rest[..p]),
        Format::PrometheusText => rest,
    };
    let mut fields = body.split_ascii_whitespace();
    let value_text = fields.next().ok_or("missing value")?;
    let value = parse_value(value_text)?;
    let Some(ts_text) = fields.next() else {
        return Err("sample has no timestamp (an import needs one on every sample)".into());
    };
    let t = parse_timestamp(ts_text, format)?;
    if let Some(extra) = fields.next() {
        return Err(format!("unexpected {:?} after the timestamp", excerpt(extra)));
    }
    Ok(SampleLine { series_text, name, labels_text, value, t })
}

/// The common shape of a sample line, read from its end: `series value timestamp`,
/// single spaces, no exemplar. Returns the series text (unchecked) with the value and
/// the timestamp, or `None` when the line has another shape or its value or timestamp
/// does not parse.
///
/// This is the importer's fast path for lines that repeat a series spelling: when the
/// returned text is a `series_text` that [`parse_line`] produced for an earlier line,
/// `parse_line` would read this line as that series with this value and timestamp.
/// (A series text ends at its first `}` outside quotes, so no longer prefix of a line,
/// such as one running into an exemplar, can equal one.) Other texts must go through
/// `parse_line`.
pub fn split_tail(line: &[u8], format: Format) -> Option<(&[u8], f64, i64)> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let ts_at = line.iter().rposition(|&c| c == b' ')?;
    let value_at = line[..ts_at].iter().rposition(|&c| c == b' ')?;
    let value = std::str::from_utf8(&line[value_at + 1..ts_at]).ok()?;
    let ts = std::str::from_utf8(&line[ts_at + 1..]).ok()?;
    if value.contains(|c: char| c.is_ascii_whitespace()) || ts.contains(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    Some((&line[..value_at], parse_value(value).ok()?, parse_timestamp(ts, format).ok()?))
}

/// A sample's timestamp in milliseconds, in the unit of `format`.
fn parse_timestamp(ts_text: &str, format: Format) -> Result<i64, String> {
    match format {
        Format::OpenMetrics => parse_seconds(ts_text),
        Format::PrometheusText => ts_text.parse::<i64>().map_err(|_| {
            format!("invalid timestamp {ts_text:?}: Prometheus text timestamps are integer milliseconds (an OpenMetrics file, with seconds, ends with `# EOF`)")
        }),
    }
}

/// A quoted label value starting after the opening quote at byte `i`; returns the value
/// and the index after the closing quote.
fn parse_quoted(line: &str, start: usize) -> Result<(Cow<'_, str>, usize), String> {
    let b = line.as_bytes();
    let mut i = start;
    let mut owned: Option<String> = None;
    let mut run = start;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let value = match owned {
                    Some(mut s) => {
                        s.push_str(&line[run..i]);
                        Cow::Owned(s)
                    }
                    None => Cow::Borrowed(&line[start..i]),
                };
                return Ok((value, i + 1));
            }
            b'\\' => {
                let s = owned.get_or_insert_with(String::new);
                s.push_str(&line[run..i]);
                match b.get(i + 1) {
                    Some(b'\\') => s.push('\\'),
                    Some(b'"') => s.push('"'),
                    Some(b'n') => s.push('\n'),
                    Some(_) => {
                        let c = line[i + 1..].chars().next().unwrap_or('?');
                        return Err(format!("invalid escape `\\{c}` (only \\\\, \\\" and \\n are allowed)"));
                    }
                    None => return Err("unterminated escape at the end of the line".into()),
                }
                i += 2;
                run = i;
            }
            _ => i += 1,
        }
    }
    Err("label value has no closing quote".into())
}

/// A sample value: a decimal or exponent float, `NaN`, `+Inf`, `-Inf` (Go's
/// `ParseFloat` spellings, case-insensitive).
fn parse_value(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("invalid value {:?}", excerpt(s)))?;
    Ok(tessera_model::canonical_float(v))
}

/// OpenMetrics seconds to milliseconds. Plain decimals are converted exactly (digits
/// after the third decimal are dropped: the storage keeps milliseconds); exponent forms
/// go through `f64` and are rounded to the nearest millisecond.
fn parse_seconds(s: &str) -> Result<i64, String> {
    let bad = || format!("invalid timestamp {:?}: OpenMetrics timestamps are seconds, e.g. 1700000000.123", excerpt(s));
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (int_part, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let plain = !int_part.is_empty()
        && int_part.bytes().all(|c| c.is_ascii_digit())
        && frac.bytes().all(|c| c.is_ascii_digit());
    if plain {
        let secs: i64 = int_part.parse().map_err(|_| bad())?;
        let mut ms_digits = frac.bytes().take(3).map(|c| i64::from(c - b'0')).collect::<Vec<_>>();
        ms_digits.resize(3, 0);
        let ms = ms_digits[0] * 100 + ms_digits[1] * 10 + ms_digits[2];
        let total = secs.checked_mul(1000).and_then(|x| x.checked_add(ms)).ok_or_else(bad)?;
        return Ok(if neg { -total } else { total });
    }
    let v: f64 = s.parse().map_err(|_| bad())?;
    let ms = (v * 1000.0).round();
    if !ms.is_finite() || ms.abs() >= 9.2e18 {
        return Err(bad());
    }
    Ok(ms as i64)
}

/// At most 60 characters of `s`, for messages.
fn excerpt(s: &str) -> String {
    if s.chars().count() <= 60 {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(60).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests;

//! The one JSON writer of the HTTP API: every JSON answer (query, query_range, series,
//! labels, label values, metadata, exemplars, the status endpoints, parse/format_query and
//! the error envelope) is written by this module, byte for byte as Prometheus writes it.
//!
//! Prometheus encodes with json-iterator in its standard-library-compatible mode, plus
//! hand-written codecs for samples. Three details make a generic serializer (serde_json)
//! differ from it, which is why this module writes the bytes itself:
//! - strings escape `<`, `>`, `&`, U+2028 and U+2029 (Go's HTML-safe escaping), and
//!   control characters as `\u00XX` except `\n`, `\r`, `\t` ([`write_str`]);
//! - sample values are strings formatted like `strconv.FormatFloat(v, 'f', -1, 64)`, switching
//!   to `'e'` below 1e-6 and from 1e21 on, spelled `NaN`, `+Inf`, `-Inf` ([`format_float`]);
//! - timestamps are unix seconds written from integer milliseconds (`1435781451.781`,
//!   `1435781451.5` is written `1435781451.500`), never through a float.
//!
//! Objects whose Go type is a struct keep the struct's field order ([`ObjectWriter`]);
//! Go writes maps with sorted keys, so callers pass those sorted.

use std::fmt::Write as _;

use crate::error::{status_of, JsonError};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use tessera_model::{Labels, Sample};
use tessera_query::{Series, Value, VectorElem};

/// Appends `s` as a JSON string literal with Go's escaping.
pub fn write_str(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // HTML-significant characters and the two JavaScript line separators are escaped
            // by Go's encoder; a byte-compatible answer must do the same.
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => {
                let b = c as u8;
                out.push_str("\\u00");
                out.push(HEX[(b >> 4) as usize] as char);
                out.push(HEX[(b & 0xf) as usize] as char);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A float as Prometheus prints sample values (without the quotes).
pub fn format_float(v: f64) -> String {
    let mut s = String::new();
    write_float(&mut s, v);
    s
}

/// Appends [`format_float`]'s text, written in place (a range query's answer has a value
/// per point). Its digits are Ryu's, as Go's (see [`tessera_query::format_go_decimal`]);
/// Ryu writes 1e-5 <= |v| < 1e16 (and zero) without an exponent, which is the common
/// case here, with a ".0" on a whole number that Go does not write.
pub fn write_float(out: &mut String, v: f64) {
    let abs = v.abs();
    let mut buf = ryu::Buffer::new();
    if v.is_finite() && (abs == 0.0 || (1e-5..1e16).contains(&abs)) {
        let s = buf.format_finite(v);
        if !s.contains('e') {
            out.push_str(s.strip_suffix(".0").unwrap_or(s));
            return;
        }
    }
    if v.is_finite() && (abs == 0.0 || (1e-6..1e21).contains(&abs)) {
        out.push_str(&tessera_query::format_go_decimal(v));
    } else {
        // Prometheus switches to exponent form outside [1e-6, 1e21); NaN, ±Inf.
        out.push_str(&tessera_query::format_go_exponent(v));
    }
}

/// Appends a millisecond timestamp as unix seconds, the way Prometheus' codec does: integer
/// seconds, then `.` and exactly three digits when the milliseconds are not zero.
pub fn write_timestamp(out: &mut String, t_ms: i64) {
    let (neg, t) = if t_ms < 0 { (true, t_ms.unsigned_abs()) } else { (false, t_ms as u64) };
    if neg {
        out.push('-');
    }
    // Writing into a `String` cannot fail.
    let _ = write!(out, "{}", t / 1000);
    let frac = t % 1000;
    if frac != 0 {
        let _ = write!(out, ".{frac:03}");
    }
}

/// `[<unix seconds>,"<value>"]`.
fn write_point(out: &mut String, t_ms: i64, v: f64) {
    out.push('[');
    write_timestamp(out, t_ms);
    out.push_str(",\"");
    write_float(out, v);
    out.push_str("\"]");
}

/// A label set as a JSON object, in the label set's (sorted) order.
pub fn write_labels(out: &mut String, labels: &Labels) {
    out.push('{');
    for (i, l) in labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_str(out, &l.name);
        out.push(':');
        write_str(out, &l.value);
    }
    out.push('}');
}

fn write_vector_elem(out: &mut String, e: &VectorElem) {
    out.push_str("{\"metric\":");
    write_labels(out, &e.labels);
    out.push_str(",\"value\":");
    write_point(out, e.t, e.v);
    out.push('}');
}

fn write_series(out: &mut String, s: &Series) {
    out.push_str("{\"metric\":");
    write_labels(out, &s.labels);
    out.push_str(",\"values\":[");
    for (i, Sample { t, v }) in s.samples.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_point(out, *t, *v);
    }
    out.push_str("]}");
}

/// The `data` object of a query answer: `{"resultType":"…","result":…}`.
pub fn write_query_data(out: &mut String, value: &Value) {
    out.push_str("{\"resultType\":\"");
    out.push_str(value.result_type());
    out.push_str("\",\"result\":");
    match value {
        Value::Scalar { t, v } => write_point(out, *t, *v),
        Value::String { t, s } => {
            out.push('[');
            write_timestamp(out, *t);
            out.push(',');
            write_str(out, s);
            out.push(']');
        }
        Value::Vector(elems) => {
            out.push('[');
            for (i, e) in elems.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_vector_elem(out, e);
            }
            out.push(']');
        }
        Value::Matrix(series) => {
            out.push('[');
            for (i, s) in series.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_series(out, s);
            }
            out.push(']');
        }
    }
    out.push('}');
}

/// Appends a JSON array of strings.
pub fn write_str_array(out: &mut String, items: &[String]) {
    out.push('[');
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_str(out, s);
    }
    out.push(']');
}

/// The success envelope around already-encoded `data`, in Prometheus' field order
/// (`status`, `data`, `warnings`, `infos`), the last two only when non-empty.
pub fn success_envelope(data_json: &str, warnings: &[String], infos: &[String]) -> String {
    let mut out = String::with_capacity(data_json.len() + 64);
    out.push_str("{\"status\":\"success\",\"data\":");
    out.push_str(data_json);
    if !warnings.is_empty() {
        out.push_str(",\"warnings\":");
        write_str_array(&mut out, warnings);
    }
    if !infos.is_empty() {
        out.push_str(",\"infos\":");
        write_str_array(&mut out, infos);
    }
    out.push('}');
    out
}

/// A successful answer whose `data` is already encoded JSON (by this module), rendered in
/// the success envelope ([`success_envelope`]).
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
        let body = success_envelope(&self.data_json, &self.warnings, &self.infos);
        (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], body).into_response()
    }
}

/// An error of a JSON endpoint, answered in Prometheus' envelope: status and `errorType`
/// from [`status_of`] (the one mapping), `Retry-After` when the error carries one.
impl IntoResponse for JsonError {
    fn into_response(self) -> Response {
        let e = self.0;
        let (status, error_type) = status_of(e.kind);
        let body = error_envelope(error_type, &e.message);
        let mut resp = (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
        e.add_retry_after(&mut resp);
        resp
    }
}

/// The error envelope: `{"status":"error","errorType":"…","error":"…"}`.
pub fn error_envelope(error_type: &str, message: &str) -> String {
    let mut out = String::with_capacity(message.len() + 64);
    out.push_str("{\"status\":\"error\",\"errorType\":");
    write_str(&mut out, error_type);
    out.push_str(",\"error\":");
    write_str(&mut out, message);
    out.push('}');
    out
}

/// A small ordered-object builder for the status endpoints, whose Go structs fix the key
/// order (maps, in contrast, are written with sorted keys by Go; callers sort those first).
pub struct ObjectWriter<'a> {
    out: &'a mut String,
    first: bool,
}

impl<'a> ObjectWriter<'a> {
    pub fn new(out: &'a mut String) -> Self {
        out.push('{');
        ObjectWriter { out, first: true }
    }

    fn key(&mut self, k: &str) -> &mut String {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        write_str(self.out, k);
        self.out.push(':');
        self.out
    }

    pub fn str(&mut self, k: &str, v: &str) -> &mut Self {
        let out = self.key(k);
        write_str(out, v);
        self
    }

    pub fn int(&mut self, k: &str, v: i64) -> &mut Self {
        let out = self.key(k);
        out.push_str(&v.to_string());
        self
    }

    pub fn bool(&mut self, k: &str, v: bool) -> &mut Self {
        let out = self.key(k);
        out.push_str(if v { "true" } else { "false" });
        self
    }

    pub fn null(&mut self, k: &str) -> &mut Self {
        let out = self.key(k);
        out.push_str("null");
        self
    }

    /// Writes a key whose value the caller appends with `f`.
    pub fn raw(&mut self, k: &str, f: impl FnOnce(&mut String)) -> &mut Self {
        let out = self.key(k);
        f(out);
        self
    }

    pub fn finish(self) {
        self.out.push('}');
    }
}

#[cfg(test)]
mod tests;

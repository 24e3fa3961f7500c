//! Float ↔ label-value text exactly as Prometheus (Go's `strconv`) writes and reads it,
//! for functions whose output or input is a label value: `count_values` writes sample
//! values, `histogram_quantiles` writes φ, `histogram_quantile` reads `le`. A different
//! spelling would create different series, so this must match to the character.

/// `count_values`' label value: Go's `strconv.FormatFloat(v, 'f', -1, 64)`, the shortest
/// decimal that round-trips, never in exponent form (`1e21` → `1000000000000000000000`),
/// with Go's `NaN`, `+Inf`, `-Inf`.
pub fn format_go_decimal(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v == f64::INFINITY {
        "+Inf".to_string()
    } else if v == f64::NEG_INFINITY {
        "-Inf".to_string()
    } else {
        // Rust's Display is also shortest-round-trip and exponent-free.
        format!("{v}")
    }
}

/// Prometheus' `labels.FormatOpenMetricsFloat`, used for the quantile label of
/// `histogram_quantiles` (and for `le`/`quantile` labels in OpenMetrics): Go's
/// `strconv.FormatFloat(v, 'g', -1, 64)` plus ".0" when the result has neither "." nor
/// "e". Examples: 0.5 → "0.5", 1 → "1.0", 1e6 → "1e+06", 0.00001 → "1e-05".
pub fn format_openmetrics_float(v: f64) -> String {
    if v == 1.0 {
        return "1.0".to_string();
    }
    if v == 0.0 {
        return "0.0".to_string();
    }
    if v == -1.0 {
        return "-1.0".to_string();
    }
    if v.is_nan() || v.is_infinite() {
        return format_go_decimal(v);
    }
    let s = format_go_g(v);
    if s.contains('e') || s.contains('.') {
        s
    } else {
        s + ".0"
    }
}

/// Go's `strconv.FormatFloat(v, 'g', -1, 64)` for finite `v`: shortest round-trip digits,
/// in exponent form when the decimal exponent is below -4 or at least 6 (the precision Go
/// uses for this decision in shortest mode), with a signed, at least two-digit exponent.
pub fn format_go_g(v: f64) -> String {
    // `{:e}` gives the shortest round-trip digits as d.ddde<exp>.
    let sci = format!("{v:e}");
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (sci.as_str(), 0),
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{v}")
    }
}

/// Reads a label value as a float the way Go's `strconv.ParseFloat` does for the inputs
/// that occur in practice: decimal and exponent notation, optional sign, and
/// case-insensitive `inf`, `infinity`, `nan` (so `le="+Inf"`, `le="1e0"`, `le=".2"`).
/// Surrounding whitespace is an error, as in Go. Hexadecimal floats (`0x1p-2`) and
/// underscores, which Go also accepts, are not supported.
pub fn parse_go_float(s: &str) -> Option<f64> {
    if s.is_empty() || s.starts_with(|c: char| c.is_whitespace()) || s.ends_with(|c: char| c.is_whitespace()) {
        return None;
    }
    s.parse::<f64>().ok()
}

#[cfg(test)]
mod tests;

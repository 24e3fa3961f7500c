//! Float ↔ label-value text exactly as Prometheus (Go's `strconv`) writes and reads it,
//! for functions whose output or input is a label value: `count_values` writes sample
//! values, `histogram_quantiles` writes φ, `histogram_quantile` reads `le`. A different
//! spelling would create different series, so this must match to the character.

/// The shortest decimal digits that read back as `v` (finite), as Go's `strconv` picks
/// them (Ryu, as in Go: the closest such digits, and on an exact tie the even one; Rust's
/// `Display` rounds a tie up, so 2838873137.76953125 would be `…7695313` where Go writes
/// `…7695312`). Returns the sign, the digits without trailing zeros (`"0"` for zero) and
/// the decimal exponent of the first digit: `v = ±d.ddd × 10^exp`.
fn shortest_digits(v: f64) -> (bool, String, i32) {
    let mut buf = ryu::Buffer::new();
    let s = buf.format_finite(v.abs());
    let (mantissa, exp) = match s.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().expect("ryu writes an integer exponent")),
        None => (s, 0),
    };
    // `mantissa` is `d.ddd` (with an exponent) or `ddd.ddd` (without).
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all = format!("{int}{frac}");
    let lead = all.len() - all.trim_start_matches('0').len();
    let digits = all[lead..].trim_end_matches('0');
    if digits.is_empty() {
        return (v.is_sign_negative(), "0".to_string(), 0);
    }
    (v.is_sign_negative(), digits.to_string(), exp + int.len() as i32 - 1 - lead as i32)
}

/// `d[.ddd]` without an exponent: `digits` with the point after digit `exp + 1`.
fn plain(digits: &str, exp: i32) -> String {
    let point = exp + 1;
    if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        format!("{}.{}", &digits[..point as usize], &digits[point as usize..])
    }
}

/// `d[.ddd]e±XX`: Go's exponent form, the exponent signed and at least two digits.
fn exponent_form(digits: &str, exp: i32) -> String {
    let sign = if exp < 0 { '-' } else { '+' };
    match digits.split_at(1) {
        (d, "") => format!("{d}e{sign}{:02}", exp.abs()),
        (d, rest) => format!("{d}.{rest}e{sign}{:02}", exp.abs()),
    }
}

/// `v` in Go's words: `NaN`, `+Inf`, `-Inf`, else its sign and `body(digits, exp)` of
/// its [`shortest_digits`].
fn spell(v: f64, body: impl FnOnce(&str, i32) -> String) -> String {
    if v.is_nan() {
        return "NaN".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    let (negative, digits, exp) = shortest_digits(v);
    format!("{}{}", if negative { "-" } else { "" }, body(&digits, exp))
}

/// `count_values`' label value: Go's `strconv.FormatFloat(v, 'f', -1, 64)`, the shortest
/// decimal that round-trips, never in exponent form (`1e21` → `1000000000000000000000`),
/// with Go's `NaN`, `+Inf`, `-Inf`.
pub fn format_go_decimal(v: f64) -> String {
    spell(v, plain)
}

/// Go's `strconv.FormatFloat(v, 'e', -1, 64)`: the shortest round-trip digits in
/// exponent form (`1.5e-07`, `1e+21`), with Go's `NaN`, `+Inf`, `-Inf`.
pub fn format_go_exponent(v: f64) -> String {
    spell(v, exponent_form)
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

/// Go's `%g` for a float64 (`strconv.FormatFloat(v, 'g', -1, 64)`), as Prometheus'
/// annotations and error messages print numbers: shortest round-trip digits, in exponent
/// form when the decimal exponent is below -4 or at least 6 (Go's `ftoa` uses precision 6
/// for this decision in shortest mode, so 1e6 is `1e+06` and 123456 stays as is), with a
/// signed, at least two-digit exponent; `NaN`, `+Inf` and `-Inf` as `fmt` writes them.
pub fn format_go_g(v: f64) -> String {
    spell(v, |digits, exp| if (-4..6).contains(&exp) { plain(digits, exp) } else { exponent_form(digits, exp) })
}

/// Go's `strconv.ParseFloat(s, 64)`, which Prometheus uses to read `le` (and `quantile`)
/// label values. Accepted, as in Go:
/// - decimal and exponent notation with an optional sign (`1`, `-.5`, `1e3`, `1.`);
/// - hexadecimal floats, which need a `p` exponent (`0x1p4` is 16; `0x10` is an error);
/// - `_` between digits (or after a `0x` prefix), as in Go literals (`1_000`, not
///   `_1`, `1_` or `1__0`);
/// - case-insensitive `inf`, `infinity` (with an optional sign) and `nan` (without).
///
/// Anything else is `None`, including surrounding whitespace and values out of the
/// float64 range (Go returns `ErrRange` for `1e400`, which Prometheus treats as a bad
/// bucket).
pub fn parse_go_float(s: &str) -> Option<f64> {
    if let Some(v) = go_special(s) {
        return Some(v);
    }
    let b = s.as_bytes();
    let (neg, body) = match b.first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    if !body.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return None;
    }
    if body.contains('_') && !go_underscore_ok(s) {
        return None;
    }
    let digits: String = body.chars().filter(|&c| c != '_').collect();
    let v = if digits.len() > 2 && digits.as_bytes()[0] == b'0' && digits.as_bytes()[1].eq_ignore_ascii_case(&b'x') {
        parse_hex_float(&digits[2..])?
    } else {
        // Rust's grammar for decimal floats is Go's once signs, specials and `_` are
        // handled (Rust would also take "inf"/"nan" here, which were handled above).
        if !digits.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-')) {
            return None;
        }
        digits.parse::<f64>().ok()?
    };
    if v.is_infinite() {
        return None; // Go: ErrRange.
    }
    Some(if neg { -v } else { v })
}

/// Go's `special`: `[+-]inf`, `[+-]infinity`, `nan`, ignoring case, and nothing after.
fn go_special(s: &str) -> Option<f64> {
    let (sign, rest) = match s.as_bytes().first() {
        Some(b'+') => (1.0, &s[1..]),
        Some(b'-') => (-1.0, &s[1..]),
        _ => {
            if s.eq_ignore_ascii_case("nan") {
                return Some(f64::NAN);
            }
            (1.0, s)
        }
    };
    if rest.eq_ignore_ascii_case("inf") || rest.eq_ignore_ascii_case("infinity") {
        return Some(sign * f64::INFINITY);
    }
    None
}

/// Go's `underscoreOK`: each `_` must sit between two digits, or between a base prefix
/// and a digit.
fn go_underscore_ok(s: &str) -> bool {
    let mut b = s.as_bytes();
    if let Some(b'+' | b'-') = b.first() {
        b = &b[1..];
    }
    // '^' start, '0' digit or base prefix, '_' underscore, '!' anything else.
    let mut saw = b'^';
    let mut i = 0;
    let mut hex = false;
    if b.len() >= 2 && b[0] == b'0' && matches!(b[1].to_ascii_lowercase(), b'b' | b'o' | b'x') {
        i = 2;
        saw = b'0';
        hex = b[1].eq_ignore_ascii_case(&b'x');
    }
    while i < b.len() {
        let c = b[i];
        i += 1;
        if c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else {
            if saw == b'_' {
                return false;
            }
            saw = b'!';
        }
    }
    saw != b'_'
}

/// The part of a Go hexadecimal float after `0x`: hex digits with at most one `.`, then a
/// mandatory `p` and a decimal exponent of two. Exact for mantissas of up to 53 bits;
/// longer ones are truncated to 16 hex digits before rounding, which only matters beyond
/// the precision any `le` label carries.
fn parse_hex_float(s: &str) -> Option<f64> {
    let (mant, exp) = s.split_once(['p', 'P'])?;
    let exp: i32 = {
        let (esign, edigits) = match exp.as_bytes().first() {
            Some(b'+') => (1, &exp[1..]),
            Some(b'-') => (-1, &exp[1..]),
            _ => (1, exp),
        };
        if edigits.is_empty() || !edigits.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        esign * edigits.parse::<i32>().unwrap_or(100_000).min(100_000)
    };
    let (int_part, frac_part) = mant.split_once('.').unwrap_or((mant, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let mut m: u64 = 0;
    let mut used = 0;
    let mut scale: i32 = 0;
    for (i, c) in int_part.chars().chain(frac_part.chars()).enumerate() {
        let d = c.to_digit(16)? as u64;
        let in_frac = i >= int_part.len();
        if used < 16 {
            m = m * 16 + d;
            if m != 0 {
                used += 1;
            }
            if in_frac {
                scale -= 4;
            }
        } else if !in_frac {
            scale += 4;
        }
    }
    // Scale in two steps so a subnormal or huge result is not lost to an intermediate
    // power of two that is out of range on its own.
    let e = exp + scale;
    Some(m as f64 * 2f64.powi(e / 2) * 2f64.powi(e - e / 2))
}

#[cfg(test)]
mod tests;

//! Parser of the promqltest script format.

use tessera_model::Labels;

/// One point of a `load` or expected-result line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Point {
    Float(f64),
    Stale,
    Missing,
    /// A native histogram `{{...}}`: not supported by this engine.
    Histogram,
}

#[derive(Debug, Clone)]
pub(crate) enum MsgMatch {
    Any,
    Exact(String),
    Regex(String),
}

#[derive(Debug, Clone)]
pub(crate) enum Expected {
    Scalar(f64),
    Series { labels: Labels, points: Vec<Point> },
}

#[derive(Debug, Clone, Default)]
pub(crate) struct EvalCmd {
    pub line: usize,
    pub query: String,
    /// Instant evaluation time (ms), or the range `(start, end, step)`.
    pub instant: Option<i64>,
    pub range: Option<(i64, i64, i64)>,
    pub fail: Option<MsgMatch>,
    pub warn: Vec<MsgMatch>,
    pub info: Vec<MsgMatch>,
    pub no_warn: bool,
    pub no_info: bool,
    pub ordered: bool,
    pub string: Option<String>,
    pub range_vector: Option<(i64, i64, i64)>,
    pub expected: Vec<Expected>,
    /// A problem parsing this command; the eval counts as failed with this reason.
    pub error: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) enum Cmd {
    Load { line: usize, interval: i64, series: Vec<(Labels, Vec<Point>)>, error: Option<String> },
    Clear,
    Eval(Box<EvalCmd>),
}

/// Parses a duration such as `1m30s`, `20s500ms`, `0` or `1h` into milliseconds.
pub(crate) fn parse_duration(s: &str) -> Option<i64> {
    let s = s.trim();
    if s == "0" {
        return Some(0);
    }
    let b = s.as_bytes();
    let mut i = 0;
    let mut total: i64 = 0;
    let mut any = false;
    while i < b.len() {
        let st = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if st == i {
            return None;
        }
        let n: i64 = s[st..i].parse().ok()?;
        let us = i;
        while i < b.len() && b[i].is_ascii_alphabetic() {
            i += 1;
        }
        let mult = match &s[us..i] {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 7 * 86_400_000,
            "y" => 365 * 86_400_000,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(mult)?)?;
        any = true;
    }
    any.then_some(total)
}

/// Parses a float the way Go's `strconv.ParseFloat` does for test files.
pub(crate) fn parse_number(s: &str) -> Option<f64> {
    match s {
        "NaN" | "nan" => return Some(f64::NAN),
        "Inf" | "+Inf" | "inf" | "+inf" => return Some(f64::INFINITY),
        "-Inf" | "-inf" => return Some(f64::NEG_INFINITY),
        _ => {}
    }
    // No hex: in series values `0x59` means "0 repeated 59 times".
    if s.is_empty() || s.contains(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E') {
        return None;
    }
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = body.parse::<f64>().ok()?;
    Some(if neg { -v } else { v })
}

/// Splits the values part of a series line into tokens; `{{...}}` histograms may
/// contain spaces.
fn value_tokens(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_whitespace() {
            i += 1;
            continue;
        }
        let mut tok = String::new();
        let mut depth = 0i32;
        while i < chars.len() && (depth > 0 || !chars[i].is_whitespace()) {
            if chars[i] == '{' {
                depth += 1;
            } else if chars[i] == '}' {
                depth -= 1;
            }
            tok.push(chars[i]);
            i += 1;
        }
        out.push(tok);
    }
    out
}

/// Expands one value token (`1`, `_`, `stale`, `1+2x3`, `1-2x3`, `_x3`, `5x2`).
fn expand_token(tok: &str, out: &mut Vec<Point>) -> Result<(), String> {
    if tok.contains("{{") {
        // Histogram points: count them so later points keep their timestamps.
        let reps = tok.rsplit_once("}}x").and_then(|(_, n)| n.parse::<usize>().ok()).map(|n| n + 1).unwrap_or(1);
        out.extend(std::iter::repeat_n(Point::Histogram, reps));
        return Ok(());
    }
    if tok == "_" {
        out.push(Point::Missing);
        return Ok(());
    }
    if tok == "stale" {
        out.push(Point::Stale);
        return Ok(());
    }
    if let Some(v) = parse_number(tok) {
        out.push(Point::Float(v));
        return Ok(());
    }
    let bad = || format!("invalid value {tok:?}");
    let (base, times) = tok.rsplit_once('x').ok_or_else(bad)?;
    let n: usize = times.parse().map_err(|_| bad())?;
    if base == "_" {
        out.extend(std::iter::repeat_n(Point::Missing, n));
        return Ok(());
    }
    if base == "stale" {
        out.extend(std::iter::repeat_n(Point::Stale, n + 1));
        return Ok(());
    }
    if let Some(v) = parse_number(base) {
        out.extend(std::iter::repeat_n(Point::Float(v), n + 1));
        return Ok(());
    }
    // `a+b` or `a-b`: the operator is the last sign not at the start and not part of an
    // exponent.
    let bytes = base.as_bytes();
    let mut split = None;
    for i in (1..bytes.len()).rev() {
        if (bytes[i] == b'+' || bytes[i] == b'-') && !matches!(bytes[i - 1], b'e' | b'E') {
            split = Some(i);
            break;
        }
    }
    let i = split.ok_or_else(bad)?;
    let a = parse_number(&base[..i]).ok_or_else(bad)?;
    let mut d = parse_number(&base[i + 1..]).ok_or_else(bad)?;
    if bytes[i] == b'-' {
        d = -d;
    }
    for k in 0..=n {
        out.push(Point::Float(a + d * k as f64));
    }
    Ok(())
}

/// Reads a quoted string starting at `s[0]` (`"`, `'` or backtick); returns the
/// unescaped value and the bytes consumed.
fn read_quoted(s: &str) -> Result<(String, usize), String> {
    let q = s.chars().next().ok_or("expected a string")?;
    let mut out: Vec<u8> = Vec::new();
    let b = s.as_bytes();
    let mut i = 1;
    while i < b.len() {
        let c = b[i];
        if c as char == q {
            return Ok((String::from_utf8_lossy(&out).into_owned(), i + 1));
        }
        if c == b'\\' && q != '`' && i + 1 < b.len() {
            i += 1;
            match b[i] {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'r' => out.push(b'\r'),
                b'\\' => out.push(b'\\'),
                b'"' => out.push(b'"'),
                b'\'' => out.push(b'\''),
                b'x' if i + 2 < b.len() => {
                    let hex = s.get(i + 1..i + 3).ok_or("bad \\x escape")?;
                    let v = u8::from_str_radix(hex, 16).map_err(|e| e.to_string())?;
                    out.push(v);
                    i += 2;
                }
                b'u' if i + 4 < b.len() => {
                    let hex = s.get(i + 1..i + 5).ok_or("bad \\u escape")?;
                    let v = u32::from_str_radix(hex, 16).map_err(|e| e.to_string())?;
                    let ch = char::from_u32(v).ok_or("bad unicode escape")?;
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                    i += 4;
                }
                other => {
                    out.push(b'\\');
                    out.push(other);
                }
            }
            i += 1;
            continue;
        }
        out.push(c);
        i += 1;
    }
    Err("unterminated string".to_string())
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Parses `metric{a="b", ...}` (either part optional) at the start of `s`; returns the
/// labels and the rest of the line.
pub(crate) fn parse_series_desc(s: &str) -> Result<(Labels, &str), String> {
    let s = s.trim_start();
    let mut pairs: Vec<(String, String)> = Vec::new();
    let name_end = s.find(|c: char| !is_ident_char(c)).unwrap_or(s.len());
    if name_end > 0 {
        pairs.push(("__name__".to_string(), s[..name_end].to_string()));
    }
    let mut rest = &s[name_end..];
    if rest.starts_with('{') {
        rest = &rest[1..];
        loop {
            rest = rest.trim_start();
            if let Some(r) = rest.strip_prefix('}') {
                rest = r;
                break;
            }
            if let Some(r) = rest.strip_prefix(',') {
                rest = r;
                continue;
            }
            // A label name, bare or quoted; a quoted string alone is the metric name.
            let name = if rest.starts_with('"') || rest.starts_with('\'') {
                let (v, n) = read_quoted(rest)?;
                rest = &rest[n..];
                v
            } else {
                let e = rest.find(|c: char| !is_ident_char(c)).unwrap_or(rest.len());
                if e == 0 {
                    return Err(format!("unexpected {:?} in series description", rest.chars().next()));
                }
                let v = rest[..e].to_string();
                rest = &rest[e..];
                v
            };
            rest = rest.trim_start();
            if let Some(r) = rest.strip_prefix('=') {
                rest = r.trim_start();
                let (v, n) = read_quoted(rest)?;
                rest = &rest[n..];
                pairs.push((name, v));
            } else {
                pairs.push(("__name__".to_string(), name));
            }
        }
    }
    if pairs.is_empty() && !s.starts_with('{') {
        return Err(format!("invalid series description {s:?}"));
    }
    Ok((Labels::from_pairs(pairs), rest))
}

pub(crate) fn parse_series_line(line: &str) -> Result<(Labels, Vec<Point>), String> {
    let (labels, rest) = parse_series_desc(line)?;
    let mut points = Vec::new();
    for tok in value_tokens(rest) {
        expand_token(&tok, &mut points)?;
    }
    Ok((labels, points))
}

fn parse_msg_match(rest: &str) -> MsgMatch {
    let rest = rest.trim();
    if let Some(m) = rest.strip_prefix("msg:") {
        MsgMatch::Exact(m.trim().to_string())
    } else if let Some(m) = rest.strip_prefix("regex:") {
        MsgMatch::Regex(m.trim().to_string())
    } else {
        MsgMatch::Any
    }
}

fn parse_unquoted(s: &str) -> String {
    let s = s.trim();
    match read_quoted(s) {
        Ok((v, _)) if s.starts_with('"') || s.starts_with('`') || s.starts_with('\'') => v,
        _ => s.to_string(),
    }
}

/// Parses the `from X to Y step Z` of a range eval or `expect range vector`.
fn parse_range_spec(s: &str) -> Option<((i64, i64, i64), &str)> {
    let s = s.trim_start().strip_prefix("from ")?;
    let (start, s) = s.trim_start().split_once(' ')?;
    let s = s.trim_start().strip_prefix("to ")?;
    let (end, s) = s.trim_start().split_once(' ')?;
    let s = s.trim_start().strip_prefix("step ")?;
    let (step, rest) = s.trim_start().split_once(' ').unwrap_or((s.trim(), ""));
    Some(((parse_duration(start)?, parse_duration(end)?, parse_duration(step)?), rest))
}

/// `load_with_nhcb` also loads each classic histogram (`x_bucket` series sharing labels
/// but `le`) as a native histogram with custom buckets named `x`. Native histograms are
/// not evaluated, so these are histogram placeholders at the classic samples' times.
fn nhcb_placeholders(series: &[(Labels, Vec<Point>)]) -> Vec<(Labels, Vec<Point>)> {
    let mut out: Vec<(Labels, Vec<Point>)> = Vec::new();
    for (labels, points) in series {
        let Some(name) = labels.get("__name__").and_then(|n| n.strip_suffix("_bucket")) else { continue };
        if labels.get("le").is_none() {
            continue;
        }
        let pairs = labels
            .iter()
            .filter(|l| l.name != "le" && l.name != "__name__")
            .map(|l| (l.name.clone(), l.value.clone()))
            .chain(std::iter::once(("__name__".into(), name.into())));
        let key = Labels::from_pairs(pairs);
        let idx = match out.iter().position(|(l, _)| *l == key) {
            Some(i) => i,
            None => {
                out.push((key, Vec::new()));
                out.len() - 1
            }
        };
        let pts = &mut out[idx].1;
        if pts.len() < points.len() {
            pts.resize(points.len(), Point::Missing);
        }
        for (i, p) in points.iter().enumerate() {
            if matches!(p, Point::Float(_)) {
                pts[i] = Point::Histogram;
            }
        }
    }
    out
}

/// Parses a whole script into commands. Lines are trimmed; `#` lines are blank lines,
/// and a blank line ends a block.
pub(crate) fn parse_script(text: &str) -> Vec<Cmd> {
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            let t = l.trim();
            if t.starts_with('#') {
                String::new()
            } else {
                t.to_string()
            }
        })
        .collect();
    let mut cmds = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = &lines[i];
        let lineno = i + 1;
        if line.is_empty() {
            i += 1;
            continue;
        }
        // The block: following non-empty lines.
        let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line.as_str(), ""));
        let mut j = i + 1;
        // `clear` takes no block; `load` and `eval` take the lines up to a blank one.
        while word != "clear" && j < lines.len() && !lines[j].is_empty() {
            j += 1;
        }
        let block: Vec<&str> = lines[i + 1..j].iter().map(|s| s.as_str()).collect();
        match word {
            "clear" => cmds.push(Cmd::Clear),
            "load" | "load_with_nhcb" => {
                let mut error = None;
                let interval = parse_duration(rest.trim()).unwrap_or_else(|| {
                    error = Some(format!("invalid load interval {rest:?}"));
                    60_000
                });
                let mut series = Vec::new();
                for l in &block {
                    match parse_series_line(l) {
                        Ok(s) => series.push(s),
                        Err(e) => error = Some(e),
                    }
                }
                if word == "load_with_nhcb" {
                    series.extend(nhcb_placeholders(&series));
                }
                cmds.push(Cmd::Load { line: lineno, interval, series, error });
            }
            w if w.starts_with("eval") => cmds.push(Cmd::Eval(Box::new(parse_eval(lineno, w, rest, &block)))),
            _ => {
                let e = EvalCmd {
                    line: lineno,
                    query: line.clone(),
                    error: Some(format!("unknown command {word:?}")),
                    ..Default::default()
                };
                cmds.push(Cmd::Eval(Box::new(e)));
            }
        }
        i = j;
    }
    cmds
}

fn parse_eval(lineno: usize, word: &str, rest: &str, block: &[&str]) -> EvalCmd {
    let mut e = EvalCmd { line: lineno, ..Default::default() };
    match word {
        "eval" => {}
        "eval_fail" => e.fail = Some(MsgMatch::Any),
        "eval_warn" => e.warn.push(MsgMatch::Any),
        "eval_info" => e.info.push(MsgMatch::Any),
        "eval_ordered" => e.ordered = true,
        other => e.error = Some(format!("unknown eval variant {other:?}")),
    }
    let rest = rest.trim_start();
    if let Some(r) = rest.strip_prefix("instant") {
        let r = r.trim_start().strip_prefix("at ").unwrap_or("");
        let (t, q) = r.trim_start().split_once(' ').unwrap_or((r, ""));
        match parse_duration(t) {
            Some(t) => e.instant = Some(t),
            None => e.error = Some(format!("invalid evaluation time {t:?}")),
        }
        e.query = q.trim().to_string();
    } else if let Some(r) = rest.strip_prefix("range") {
        match parse_range_spec(r) {
            Some((spec, q)) => {
                e.range = Some(spec);
                e.query = q.trim().to_string();
            }
            None => e.error = Some(format!("invalid range specification {r:?}")),
        }
    } else {
        e.error = Some(format!("invalid eval command {rest:?}"));
        e.query = rest.to_string();
    }
    for l in block {
        if let Some(x) = l.strip_prefix("expect ") {
            let x = x.trim_start();
            let (kind, arg) = x.split_once(char::is_whitespace).unwrap_or((x, ""));
            let kind = kind.trim_end_matches(':');
            match kind {
                "fail" => e.fail = Some(parse_msg_match(arg)),
                "warn" => e.warn.push(parse_msg_match(arg)),
                "info" => e.info.push(parse_msg_match(arg)),
                "no_warn" => e.no_warn = true,
                "no_info" => e.no_info = true,
                "ordered" => e.ordered = true,
                "string" => e.string = Some(parse_unquoted(arg)),
                "range" => match arg.trim_start().strip_prefix("vector").and_then(parse_range_spec) {
                    Some((spec, _)) => e.range_vector = Some(spec),
                    None => e.error = Some(format!("invalid expect range vector {arg:?}")),
                },
                other => e.error = Some(format!("unknown expectation {other:?}")),
            }
            continue;
        }
        if let Some(m) = l.strip_prefix("expected_fail_message") {
            e.fail = Some(MsgMatch::Exact(m.trim().to_string()));
            continue;
        }
        if let Some(m) = l.strip_prefix("expected_fail_regexp") {
            e.fail = Some(MsgMatch::Regex(m.trim().to_string()));
            continue;
        }
        if let Some(v) = parse_number(l) {
            e.expected.push(Expected::Scalar(v));
            continue;
        }
        match parse_series_line(l) {
            Ok((labels, points)) => e.expected.push(Expected::Series { labels, points }),
            Err(err) => e.error = Some(format!("bad expected line {l:?}: {err}")),
        }
    }
    e
}

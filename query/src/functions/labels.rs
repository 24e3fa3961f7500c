//! `label_replace` and `label_join` on one label set. Detecting that two output series
//! ended up with the same labels ("vector cannot contain metrics with the same labelset")
//! needs the whole vector and is the engine's job.

use regex::Regex;

use crate::QueryError;
use tessera_model::{goregex, Label, Labels};

/// Prometheus 3.x validates label names with the UTF-8 scheme: any non-empty valid UTF-8
/// string (and a Rust `&str` is always valid UTF-8).
pub fn is_valid_label_name(name: &str) -> bool {
    !name.is_empty()
}

/// Compiles a `label_replace` regex the way Prometheus does: Go (RE2) syntax, fully
/// anchored, with `.` matching newlines. Exposed so the engine can compile once per call
/// instead of once per series (see [`label_replace_with`]).
pub fn compile_replace_regex(regex: &str) -> Result<Regex, QueryError> {
    goregex::compile_anchored(regex)
        .map_err(|_| QueryError::execution(format!("invalid regular expression in label_replace(): {regex}")))
}

/// Checks a `label_replace` destination name; Prometheus does so once per call, before
/// it evaluates the vector.
pub fn check_replace_dst(dst: &str) -> Result<(), QueryError> {
    if is_valid_label_name(dst) {
        Ok(())
    } else {
        Err(QueryError::execution(format!("invalid destination label name in label_replace(): {dst}")))
    }
}

/// `label_replace(v, dst, replacement, src, regex)` for one series, with `re` from
/// [`compile_replace_regex`] (compiled once per call, not per series).
///
/// If `re` matches the whole value of `src` (a missing label is the empty string),
/// `dst` is set to `replacement` with `$1`, `${1}`, `$name`, `${name}` expanded as Go's
/// `Regexp.Expand` does; an empty result removes `dst`. No match leaves the labels
/// unchanged. An invalid destination name is an error (`execution`, as Prometheus
/// reports it).
pub fn label_replace_with(
    l: &Labels,
    dst: &str,
    replacement: &str,
    src: &str,
    re: &Regex,
) -> Result<Labels, QueryError> {
    check_replace_dst(dst)?;
    let src_val = l.get(src).unwrap_or("");
    let Some(caps) = re.captures(src_val) else {
        return Ok(l.clone());
    };
    let value = expand(re, &caps, replacement);
    Ok(set_label(l, dst, &value))
}

/// `label_join(v, dst, sep, src...)` for one series: `dst` becomes the values of `srcs`
/// (missing ones as empty strings) joined by `sep`; an empty result removes `dst`.
/// An empty source or destination name is an error, as in Prometheus.
pub fn label_join(l: &Labels, dst: &str, sep: &str, srcs: &[String]) -> Result<Labels, QueryError> {
    if let Some(bad) = srcs.iter().find(|s| !is_valid_label_name(s)) {
        return Err(QueryError::execution(format!("invalid source label name in label_join(): {bad}")));
    }
    if !is_valid_label_name(dst) {
        return Err(QueryError::execution(format!("invalid destination label name in label_join(): {dst}")));
    }
    let joined = srcs.iter().map(|s| l.get(s).unwrap_or("")).collect::<Vec<_>>().join(sep);
    Ok(set_label(l, dst, &joined))
}

/// Returns `l` with `name` set to `value`, or removed if `value` is empty, keeping the
/// sorted-by-name invariant of [`Labels`].
pub fn set_label(l: &Labels, name: &str, value: &str) -> Labels {
    let mut v: Vec<Label> = Vec::with_capacity(l.len() + 1);
    let mut placed = value.is_empty();
    for lab in l.iter() {
        if !placed && lab.name.as_str() > name {
            v.push(Label::new(name, value));
            placed = true;
        }
        if lab.name == name {
            if !value.is_empty() && !placed {
                v.push(Label::new(name, value));
                placed = true;
            }
            continue;
        }
        v.push(lab.clone());
    }
    if !placed {
        v.push(Label::new(name, value));
    }
    Labels::from_sorted(v)
}

/// Go's `Regexp.Expand`: `$$` is a literal `$`; `$name` takes the longest run of letters,
/// digits and `_` (so `$1x` means group "1x", not group 1 then "x"); `${name}` delimits it.
/// A name of only digits without a leading zero is a group number. Unknown or
/// non-participating groups expand to nothing; a `$` not followed by a name is literal.
pub fn expand(re: &Regex, caps: &regex::Captures<'_>, template: &str) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        rest = &rest[pos + 1..];
        if let Some(after) = rest.strip_prefix('$') {
            out.push('$');
            rest = after;
            continue;
        }
        let Some((name, after)) = extract_name(rest) else {
            out.push('$');
            continue;
        };
        rest = after;
        let group = match group_number(name) {
            Some(n) => caps.get(n),
            None => re.capture_names().position(|n| n == Some(name)).and_then(|i| caps.get(i)),
        };
        if let Some(m) = group {
            out.push_str(m.as_str());
        }
    }
    out.push_str(rest);
    out
}

/// Parses the name after a `$`: `{name}` or a bare run of letters, digits and `_`.
/// Returns the name and the remaining template.
fn extract_name(s: &str) -> Option<(&str, &str)> {
    let (body, braced) = match s.strip_prefix('{') {
        Some(b) => (b, true),
        None => (s, false),
    };
    let end = body
        .char_indices()
        .find(|&(_, c)| !(c.is_alphabetic() || c.is_numeric() || c == '_'))
        .map(|(i, _)| i)
        .unwrap_or(body.len());
    if end == 0 {
        return None;
    }
    let name = &body[..end];
    if braced {
        let after = body[end..].strip_prefix('}')?;
        Some((name, after))
    } else {
        Some((name, &body[end..]))
    }
}

/// A group number as Go reads it: ASCII digits only, no leading zero, below 10^8.
fn group_number(name: &str) -> Option<usize> {
    if !name.bytes().all(|b| b.is_ascii_digit()) || (name.len() > 1 && name.starts_with('0')) || name.len() > 8 {
        return None;
    }
    name.parse().ok()
}

#[cfg(test)]
mod tests;

//! Go (RE2) regular expression syntax on top of Rust's `regex` crate.
//!
//! The two engines share RE2's syntax and leftmost-first semantics, but differ in a few
//! places that change which label values match:
//! - Go's Perl classes are ASCII-only (`\d` is `[0-9]`, `\w` is `[0-9A-Za-z_]`, `\s` is
//!   `[\t\n\f\r ]`, `\b` an ASCII word boundary); Rust's are Unicode (`\d` also matches
//!   `٣`), so `label_replace(..., "(\\d+)")` would match more than Prometheus does;
//! - Go supports `\Q...\E` literal quoting, Rust does not (a parse error).
//!
//! [`translate`] rewrites a Go pattern into an equivalent Rust pattern; everything else is
//! passed through unchanged. Every place that compiles a user's regex goes through
//! [`compile_anchored`]: [`crate::Matcher`] (selectors, wherever they are applied:
//! the storage index, the promqltest store) and `label_replace`, so a selector and
//! `label_replace` agree on what `\d` means.

use regex::Regex;

/// Rewrites Go regex `pattern` into a Rust `regex` pattern with the same meaning (see the
/// module docs for what changes). Malformed patterns are passed through as they are, so
/// the Rust compiler reports them.
pub fn translate(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars().peekable();
    // Inside a bracket class `[...]` the Perl classes must become nested classes and
    // `\b` means nothing; track whether we are in one.
    let mut in_class = false;
    // Position inside the current class, to know whether a `]` is literal (first item).
    let mut class_items = 0usize;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(e) = chars.next() else {
                    out.push('\\');
                    break;
                };
                if in_class {
                    class_items += 1;
                }
                match e {
                    'd' => out.push_str("[0-9]"),
                    'D' => out.push_str("[^0-9]"),
                    'w' => out.push_str("[0-9A-Za-z_]"),
                    'W' => out.push_str("[^0-9A-Za-z_]"),
                    's' => out.push_str(r"[\t\n\x0C\r ]"),
                    'S' => out.push_str(r"[^\t\n\x0C\r ]"),
                    'b' if !in_class => out.push_str(r"(?-u:\b)"),
                    'B' if !in_class => out.push_str(r"(?-u:\B)"),
                    'Q' => {
                        // Everything up to `\E` (or the end) is literal text.
                        let mut lit = String::new();
                        loop {
                            match chars.next() {
                                None => break,
                                Some('\\') if chars.peek() == Some(&'E') => {
                                    chars.next();
                                    break;
                                }
                                Some(ch) => lit.push(ch),
                            }
                        }
                        out.push_str(&regex::escape(&lit));
                    }
                    other => {
                        out.push('\\');
                        out.push(other);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                class_items = 0;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    chars.next();
                    out.push('^');
                }
            }
            '[' if in_class && chars.peek() == Some(&':') => {
                // A POSIX class like `[:alpha:]` inside brackets: copy through its `]`.
                out.push('[');
                for ch in chars.by_ref() {
                    out.push(ch);
                    if ch == ']' {
                        break;
                    }
                }
                class_items += 1;
            }
            ']' if in_class && class_items > 0 => {
                in_class = false;
                out.push(']');
            }
            _ => {
                if in_class {
                    class_items += 1;
                    // Rust treats `[` inside a class as the start of a nested class and
                    // `&&`, `--`, `~~` as set operators; in Go they are literal.
                    if matches!(c, '[' | '&' | '-' | '~') && (c == '[' || chars.peek() == Some(&c)) {
                        out.push('\\');
                    }
                }
                out.push(c);
            }
        }
    }
    out
}

/// Compiles a Go regex fully anchored, as Prometheus compiles label matchers and
/// `label_replace` regexes: `^(?s:pattern)$`.
pub fn compile_anchored(pattern: &str) -> Result<Regex, regex::Error> {
    Regex::new(&format!("^(?s:{})$", translate(pattern)))
}

#[cfg(test)]
mod tests;

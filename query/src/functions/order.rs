//! Orderings Prometheus uses when it sorts output: `sort`/`sort_desc` by value and
//! `sort_by_label`/`sort_by_label_desc` by label values in natural order. The engine owns
//! the vector; these are the comparators, so results come out in Prometheus' order.

use std::cmp::Ordering;

use tessera_model::Labels;

/// `sort()`: ascending by value, NaN last. (Prometheus reverse-sorts a "NaN is smallest"
/// heap order, which puts NaN at the end in both directions.)
pub fn sort_asc_cmp(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// `sort_desc()`: descending by value, NaN last as well.
pub fn sort_desc_cmp(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => b.partial_cmp(&a).unwrap_or(Ordering::Equal),
    }
}

/// `sort_by_label(v, names...)` (or `_desc` with `descending`): compares the values of
/// `names` in turn in natural order, and if all are equal, the full label sets (byte
/// order of names, then values, as Prometheus' `labels.Compare`).
///
/// A series lacking a label sorts after every series that has it, and before them with
/// `descending`. Prometheus' comparator returns "after" for `natsort.Compare("", x)`
/// (false) in `sort_by_label` and "before" in `sort_by_label_desc`, which is this order
/// when the series lacking the label is the left operand; Go's comparator is not
/// consistent the other way round (`Compare(x, "")` is false too), so for small vectors
/// its output also depends on the input order, while Rust's sort needs a total order
/// (it may panic otherwise). Values that natsort finds equal in both directions (`01`
/// and `1`) fall through to the next label.
pub fn sort_by_label_cmp(a: &Labels, b: &Labels, names: &[String], descending: bool) -> Ordering {
    let directed = |c: Ordering| if descending { c.reverse() } else { c };
    for name in names {
        let va = a.get(name).unwrap_or("");
        let vb = b.get(name).unwrap_or("");
        if va == vb {
            continue;
        }
        let c = match (va.is_empty(), vb.is_empty()) {
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ => natural_cmp(va, vb),
        };
        if c != Ordering::Equal {
            return directed(c);
        }
    }
    directed(a.cmp(b))
}

/// [`natural_less`] as a consistent three-way comparison of two non-empty strings: `Less`
/// or `Greater` when natsort orders them one way only, `Equal` when it says "less" both
/// ways (digit runs equal by value, `01` and `1`) or neither.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    match (natural_less(a, b), natural_less(b, a)) {
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        _ => Ordering::Equal,
    }
}

/// Natural order as the `facette/natsort` package Prometheus uses defines it: both strings
/// are cut into runs of digits and runs of non-digits; runs that both parse as integers
/// compare numerically, others byte-wise; a string that is a prefix (in runs) of the other
/// sorts first. So "cpu2" < "cpu10" and "1.2.3" < "1.11.3".
pub fn natural_less(a: &str, b: &str) -> bool {
    let ca = chunks(a);
    let cb = chunks(b);
    // Note the quirks kept from natsort: equal strings are "less" (the last chunk of `a`
    // is reached while equal), and "" is never less than anything. Prometheus only calls
    // it for differing values, and so does `sort_by_label_cmp`.
    for (i, x) in ca.iter().enumerate() {
        let Some(y) = cb.get(i) else {
            return false;
        };
        let last_a = i == ca.len() - 1;
        let last_b = i == cb.len() - 1;
        // Two numeric runs compare by value, so "10" > "9" and "007" == "7".
        if let (Some(nx), Some(ny)) = (as_int(x), as_int(y)) {
            if nx == ny {
                if last_a {
                    return true;
                } else if last_b {
                    return false;
                }
                continue;
            }
            return nx < ny;
        }
        if x == y {
            if last_a {
                return true;
            } else if last_b {
                return false;
            }
            continue;
        }
        return x < y;
    }
    false
}

/// Splits into maximal runs of ASCII digits and of everything else (`(\d+|\D+)`).
fn chunks(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut prev_digit: Option<bool> = None;
    for (i, c) in s.char_indices() {
        let d = c.is_ascii_digit();
        if let Some(p) = prev_digit {
            if p != d {
                out.push(&s[start..i]);
                start = i;
            }
        }
        prev_digit = Some(d);
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

/// Go's `strconv.Atoi` on a chunk: only all-digit chunks qualify here (a non-digit chunk
/// never parses), and runs too long for an i64 are compared as strings, as Atoi fails.
fn as_int(s: &str) -> Option<i64> {
    if s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests;

//! Bounds on PromQL text, checked before the parser runs.
//!
//! Everything that walks a PromQL syntax tree recurses over it: the parser's own
//! actions, `Drop` of the boxed tree, the evaluator, the step-invariance and time
//! checks, the pretty printer and the AST-to-JSON translation. A tree thousands of
//! levels deep overflows a 2 MiB thread stack, and the process aborts (a stack overflow
//! does not unwind). Checking the tree after parsing is too late: parsing and dropping
//! it are already recursive. So the text is scanned first, in one linear pass with no
//! recursion and no allocation beyond one stack of open brackets (itself bounded by the
//! limit), and refused when it is longer than [`TextLimits::max_bytes`] or when it *could*
//! nest deeper than [`TextLimits::max_depth`].
//!
//! The scan computes an upper bound of the syntax tree's depth, not the exact depth:
//! within one bracket group every operator (binary, unary `-`/`+`, `and`/`or`/`unless`/
//! `atan2`, comparison) may add one level (a chain `a + b + c` nests to the left),
//! every `(` group adds one level (parenthesis, call or aggregation), and every `[...]`
//! after an expression adds one (a subquery wraps its expression). So the bound of a
//! group is `1 + operators in it + the largest bound of a group inside it`. Strings and
//! comments are skipped; operators inside `{...}` (label matchers) and `[...]`
//! (durations) are not counted, but those groups count one level like any other.
//! For everyday queries the bound is a few dozen; a chain of 300 `or` terms is 300.

use crate::error::QueryError;

/// Default of [`TextLimits::max_depth`]. Measured (see `tests.rs`, debug build, whose
/// frames are the largest): parsing, printing and dropping a query this deep fits in
/// half of a 2 MiB thread stack (tokio's blocking threads, where `match[]` is parsed).
pub const DEFAULT_MAX_QUERY_DEPTH: usize = 256;

/// The largest depth limit a server accepts. Measured (see `tests.rs`, debug build):
/// parsing, printing and dropping a query this deep fits in a 2 MiB stack (about 2 KiB
/// per level, so a 2x margin), and evaluating it fits in half of [`EVAL_STACK_BYTES`].
pub const MAX_QUERY_DEPTH_CEILING: usize = 512;

/// Stack of the threads that parse and evaluate queries. Evaluation recurses once per
/// level too, with much larger frames than the parser in a debug build (about 22 KiB per
/// nested call), so it needs more than tokio's 2 MiB. The memory is reserved, not
/// used: the kernel backs only the pages a query actually touches.
pub const EVAL_STACK_BYTES: usize = 64 * 1024 * 1024;

/// Default of [`TextLimits::max_bytes`]: 256 KiB, far beyond hand-written or generated
/// dashboards' queries. With the depth bounded, parsing is about linear: the widest text
/// the defaults admit parses in under 2 s in a debug build (see BENCHMARKS.md).
pub const DEFAULT_MAX_QUERY_BYTES: usize = 256 * 1024;

/// Limits on the text of one PromQL expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextLimits {
    /// Most levels the syntax tree may have, as bounded by [`depth_bound`].
    pub max_depth: usize,
    /// Longest accepted expression, in bytes.
    pub max_bytes: usize,
}

impl Default for TextLimits {
    fn default() -> Self {
        TextLimits { max_depth: DEFAULT_MAX_QUERY_DEPTH, max_bytes: DEFAULT_MAX_QUERY_BYTES }
    }
}

/// Refuses `text` (with `bad_data` naming the limit) when it is longer than
/// `limits.max_bytes` or may nest deeper than `limits.max_depth`. Linear in the length,
/// no recursion: safe to call on any input, on any thread.
pub fn check_text(text: &str, limits: &TextLimits) -> Result<(), QueryError> {
    if text.len() > limits.max_bytes {
        return Err(QueryError::bad_data(format!(
            "query is {} bytes long, more than the limit of {} bytes (query.max_query_bytes)",
            text.len(),
            limits.max_bytes
        )));
    }
    match scan(text, limits.max_depth) {
        Ok(_) => Ok(()),
        Err(()) => Err(QueryError::bad_data(format!(
            "query is nested too deeply: more than the limit of {} levels of operators, parentheses, calls and subqueries (query.max_query_depth)",
            limits.max_depth
        ))),
    }
}

/// The upper bound of the syntax-tree depth of `text` that [`check_text`] compares with
/// its limit (for tests and diagnostics; never fails).
pub fn depth_bound(text: &str) -> usize {
    scan(text, usize::MAX).unwrap_or(usize::MAX)
}

/// One open bracket group of the scan.
struct Group {
    /// `(` for expressions; `[` and `{` hold durations and label matchers; 0 for the
    /// whole text.
    open: u8,
    /// Operators seen directly in this group.
    ops: usize,
    /// The largest bound of a `(` group closed inside this one.
    max_child: usize,
}

impl Group {
    fn counts_operators(&self) -> bool {
        self.open == b'(' || self.open == 0
    }
}

/// Computes the depth bound, stopping with `Err` as soon as it is certain to exceed
/// `max`. The sum of `ops + 1` over the open groups only grows while a group is open and
/// is a lower bound of the final result, so it also keeps the bracket stack at most
/// `max` entries long.
fn scan(text: &str, max: usize) -> Result<usize, ()> {
    let b = text.as_bytes();
    let mut stack: Vec<Group> = vec![Group { open: 0, ops: 0, max_child: 0 }];
    // Sum of (ops + 1) over the open groups.
    let mut path: usize = 1;
    let mut i = 0;
    let add_op = |stack: &mut Vec<Group>, path: &mut usize| -> Result<(), ()> {
        let g = stack.last_mut().expect("the scan's bottom group is never popped");
        if g.counts_operators() {
            g.ops += 1;
            *path += 1;
            if *path > max {
                return Err(());
            }
        }
        Ok(())
    };
    while i < b.len() {
        let c = b[i];
        match c {
            b'#' => {
                // A comment runs to the end of the line.
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' | b'\'' => {
                i += 1;
                while i < b.len() && b[i] != c {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'`' => {
                i += 1;
                while i < b.len() && b[i] != b'`' {
                    i += 1;
                }
                i += 1;
            }
            b'(' | b'[' | b'{' => {
                stack.push(Group { open: c, ops: 0, max_child: 0 });
                path += 1;
                if path > max {
                    return Err(());
                }
                i += 1;
            }
            b')' | b']' | b'}' => {
                // Unbalanced closers are the parser's business; the bottom group stays.
                if stack.len() > 1 {
                    close(&mut stack, &mut path, max)?;
                }
                i += 1;
            }
            b'+' | b'-' | b'*' | b'/' | b'%' | b'^' => {
                add_op(&mut stack, &mut path)?;
                i += 1;
            }
            b'=' | b'!' | b'<' | b'>' | b'~' => {
                // `==`, `!=`, `<=`, `>=`, `=~`: one operator.
                while i < b.len() && matches!(b[i], b'=' | b'!' | b'<' | b'>' | b'~') {
                    i += 1;
                }
                add_op(&mut stack, &mut path)?;
            }
            _ if c.is_ascii_alphabetic() || c == b'_' || c == b':' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b':') {
                    i += 1;
                }
                let word = &b[start..i];
                if ["and", "or", "unless", "atan2"].iter().any(|k| word.eq_ignore_ascii_case(k.as_bytes())) {
                    add_op(&mut stack, &mut path)?;
                }
            }
            _ if c.is_ascii_digit() || c == b'.' => {
                // Numbers and durations (`1.5e3`, `0x1f`, `5m30s`); an exponent's sign is
                // counted as an operator next time round, which only overestimates.
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    while stack.len() > 1 {
        close(&mut stack, &mut path, max)?;
    }
    let top = &stack[0];
    // The bottom group adds the leaf level instead of a node of its own.
    let depth = top.ops + 1 + top.max_child;
    if depth > max {
        return Err(());
    }
    Ok(depth)
}

/// Closes the innermost group and folds its bound into its parent.
fn close(stack: &mut Vec<Group>, path: &mut usize, max: usize) -> Result<(), ()> {
    let g = stack.pop().expect("close is only called above the bottom group");
    *path -= g.ops + 1;
    let parent = stack.last_mut().expect("the bottom group is never popped");
    let depth = g.ops + 1 + g.max_child;
    if depth > max {
        return Err(());
    }
    parent.max_child = parent.max_child.max(depth);
    if g.open == b'[' && parent.counts_operators() {
        // A range or subquery wraps the expression before it: one more level there.
        parent.ops += 1;
        *path += 1;
        if *path > max {
            return Err(());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

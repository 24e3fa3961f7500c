//! The canonical label-set encoding: the `series` column family's value, the label part
//! of a WAL batch record, what the head keeps per series, and the input of the label-set
//! hash (diagram in `FORMAT.md`). It lives apart from `keys` (RocksDB layout) and `wal`
//! (log framing) because both persist it and neither should depend on the other.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::varint::{self, Cursor};
use tessera_model::{Label, Labels};

/// Canonical label-set encoding (the `series` CF value and the WAL series entry):
/// `count uvarint, then (name_len uvarint, name, value_len uvarint, value)*`.
pub fn encode_labels(labels: &[Label], out: &mut Vec<u8>) {
    put_count(out, labels.len());
    for l in labels {
        put_pair(out, l.name.as_bytes(), l.value.as_bytes());
    }
}

/// The label count that opens an encoding; follow it with `count` [`put_pair`]s in
/// name order to build an encoding without owned labels.
pub fn put_count(out: &mut Vec<u8>, count: usize) {
    varint::put_uvarint(out, count as u64);
}

/// One label of an encoding (see [`put_count`]).
pub fn put_pair(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    varint::put_uvarint(out, name.len() as u64);
    out.extend_from_slice(name);
    varint::put_uvarint(out, value.len() as u64);
    out.extend_from_slice(value);
}

/// The value of `__name__` in a canonical encoding; empty when it has none.
pub fn metric_name(b: &[u8]) -> &[u8] {
    let mut found = 0..0;
    let walked = walk_pairs(b, |name, value| {
        if &b[name] == b"__name__" {
            found = value;
        }
        Ok(())
    });
    if walked.is_err() {
        return &[];
    }
    &b[found]
}

/// Checks that `b` is a canonical encoding `Engine::append` may store: it decodes
/// without trailing bytes, every name and value is UTF-8, names are at most 65,535 bytes,
/// sorted and unique. Walks the bytes once and allocates nothing. The error is a
/// sentence naming the problem.
///
/// UTF-8 is checked over the whole buffer in one call when every length fits in one
/// varint byte (below 128, so every length byte is ASCII): ASCII bytes never sit inside
/// a multi-byte character, so the buffer is valid UTF-8 exactly when each string is.
/// Otherwise (a length byte of 0x80 or more could complete a character cut at a string's
/// end) each string is checked on its own.
pub fn check_canonical(b: &[u8]) -> std::result::Result<(), String> {
    let mut prev: Option<&[u8]> = None;
    let short_lengths = walk_pairs(b, |name, _| {
        let name = &b[name];
        if name.len() > usize::from(u16::MAX) {
            return Err(format!("label name of {} bytes exceeds 65535", name.len()));
        }
        // Byte order is code point order for UTF-8, the order of sorted label names.
        if prev.is_some_and(|p| p >= name) {
            return Err("label names must be sorted and unique".to_owned());
        }
        prev = Some(name);
        Ok(())
    })?;
    let utf8 = |s: &[u8]| std::str::from_utf8(s).is_ok();
    let valid = if short_lengths {
        utf8(b)
    } else {
        let mut all = true;
        walk_pairs(b, |n, v| {
            all &= utf8(&b[n]) && utf8(&b[v]);
            Ok(())
        })?;
        all
    };
    if !valid {
        return Err("a label name or value is not UTF-8".to_owned());
    }
    Ok(())
}

/// Calls `each(name, value)` with where each pair's name and value lie in `b`, checking
/// the framing (no truncation, no trailing bytes). Returns whether every varint (count
/// and lengths) took one byte.
fn walk_pairs(
    b: &[u8],
    mut each: impl FnMut(Range<usize>, Range<usize>) -> std::result::Result<(), String>,
) -> std::result::Result<bool, String> {
    let mut short = true;
    let (n, mut pos) = varint::read_uvarint(b).map_err(|e| e.to_string())?;
    short &= pos == 1;
    for _ in 0..n {
        let name = next_string(b, &mut pos, &mut short)?;
        let value = next_string(b, &mut pos, &mut short)?;
        each(name, value)?;
    }
    if pos != b.len() {
        return Err("trailing bytes after the label set".to_owned());
    }
    Ok(short)
}

/// Where the string (a name or a value) at `pos` of an encoding lies; moves `pos` past
/// it and clears `short` when its length took more than one byte. Label names and values
/// are short: one length byte, read inline (as a closure returning the error string,
/// this was a call of 44 instructions per string).
#[inline(always)]
fn next_string(b: &[u8], pos: &mut usize, short: &mut bool) -> std::result::Result<Range<usize>, String> {
    let (len, used) = match b.get(*pos) {
        Some(&len) if len < 0x80 => (usize::from(len), 1),
        _ => long_string(b, *pos)?,
    };
    *short &= used == 1;
    let start = *pos + used;
    match start.checked_add(len).filter(|&e| e <= b.len()) {
        Some(end) => *pos = end,
        None => return Err("truncated label set".to_owned()),
    }
    Ok(start..*pos)
}

/// The length of a string whose length takes more than one byte, and the bytes it takes.
#[cold]
fn long_string(b: &[u8], pos: usize) -> std::result::Result<(usize, usize), String> {
    let (len, used) = varint::read_uvarint(b.get(pos..).unwrap_or_default()).map_err(|e| e.to_string())?;
    let len = usize::try_from(len).map_err(|_| "truncated label set".to_owned())?;
    Ok((len, used))
}

pub fn decode_labels_from(c: &mut Cursor<'_>) -> Result<Vec<Label>> {
    let n = c.uvarint()?;
    // Each label takes at least two bytes, which bounds a corrupt count.
    if n > c.buf.len() as u64 {
        return Err(Error::corrupt("labels", format!("label count {n} exceeds record size")));
    }
    let mut labels = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let name = c.string()?.into();
        let value = c.string()?.into();
        labels.push(Label { name, value });
    }
    Ok(labels)
}

/// [`decode_labels`] as a [`Labels`]: refused as corrupt unless sorted by name and
/// unique, which `Engine::append` requires of every stored set.
pub fn decode_label_set(b: &[u8]) -> Result<Labels> {
    decode_label_subset(b, None)
}

/// [`decode_label_set`] keeping only the labels named in `only` (all when `None`), for a
/// reader that needs one or two labels of each series (`sum(rate(...))` needs the
/// metric name alone). The whole set's framing is checked (no truncation, no trailing
/// bytes), and the labels kept as [`decode_label_set`] checks them (UTF-8, names in
/// order); the others are stepped over, not read: each was checked when the set was
/// stored (`check_canonical`), RocksDB checksums the blocks it reads, and a reader that
/// does read them checks them then. Checking every label of every series was 5 % of
/// `dcgm_all_rate`'s instructions (BENCHMARKS.md, "Label sets stepped over, sums added
/// as columns").
/// A set refused is decoded in full for the error, which names what is wrong.
pub fn decode_label_subset(b: &[u8], only: Option<&[String]>) -> Result<Labels> {
    let labels = match only {
        Some(only) => copy_named(b, only),
        None => decode_labels_checked_once(b, true),
    };
    if let Some(labels) = labels {
        return Ok(Labels::from_sorted(labels));
    }
    let mut labels = decode_labels(b)?;
    if !is_sorted_unique(&labels) {
        return Err(Error::corrupt("labels", "label names not sorted and unique"));
    }
    if let Some(only) = only {
        labels.retain(|l| only.iter().any(|n| n.as_str() == l.name.as_str()));
    }
    Ok(Labels::from_sorted(labels))
}

/// The labels of `b` named in `only`, when its framing holds and those labels are UTF-8
/// and in strictly increasing name order; the others are stepped over unread. `None`
/// otherwise.
fn copy_named(b: &[u8], only: &[String]) -> Option<Vec<Label>> {
    let mut labels = Vec::with_capacity(only.len());
    let mut bad = false;
    walk_pairs(b, |name, value| {
        let name = &b[name];
        if only.iter().any(|n| n.as_bytes() == name) {
            match (std::str::from_utf8(name), std::str::from_utf8(&b[value])) {
                (Ok(name), Ok(value)) => labels.push(Label { name: name.into(), value: value.into() }),
                _ => bad = true,
            }
        }
        Ok(())
    })
    .ok()?;
    (!bad && is_sorted_unique(&labels)).then_some(labels)
}

/// Appends to `out` an encoding of the labels of `b` named in `only` (as
/// [`encode_labels`] would write them), for a reader that keeps a series' labels for a
/// while but will decode only those ([`decode_label_subset`] with the same `only`). It
/// stops once every name in `only` sorts before the label it reached (names are sorted),
/// so the rest of the set is not touched; [`decode_label_subset`] checks what it keeps.
/// Returns false, and appends nothing, when the framing it walks is broken or `only`
/// has 128 names or more; the caller then keeps the whole set.
pub fn put_subset(b: &[u8], only: &[String], out: &mut Vec<u8>) -> bool {
    if only.len() >= 0x80 {
        return false;
    }
    let start = out.len();
    let Some(last) = only.iter().map(String::as_bytes).max() else {
        out.push(0);
        return true;
    };
    let Ok((n, mut pos)) = varint::read_uvarint(b) else { return false };
    let mut short = true;
    // One byte: fewer than 128 names are kept.
    out.push(0);
    let mut kept = 0u8;
    for _ in 0..n {
        let (Ok(name), Ok(value)) = (next_string(b, &mut pos, &mut short), next_string(b, &mut pos, &mut short)) else {
            out.truncate(start);
            return false;
        };
        let (name, value) = (&b[name], &b[value]);
        if only.iter().any(|o| o.as_bytes() == name) {
            put_pair(out, name, value);
            kept += 1;
        }
        if name >= last {
            break;
        }
    }
    out[start] = kept;
    true
}

/// Checks a stored label set as [`decode_label_set`] would, without building it: the
/// framing, UTF-8, names sorted and unique ([`check_canonical`], which every stored set
/// passed when it was written). For readers that keep the encoding and decode it later.
pub fn validate_label_set(b: &[u8]) -> Result<()> {
    check_canonical(b).map_err(|why| Error::corrupt("labels", why))
}

/// Whether names are strictly increasing: the canonical order of a stored label set.
pub fn is_sorted_unique(labels: &[Label]) -> bool {
    labels.windows(2).all(|w| w[0].name < w[1].name)
}

pub fn decode_labels(b: &[u8]) -> Result<Vec<Label>> {
    if let Some(labels) = decode_labels_checked_once(b, false) {
        return Ok(labels);
    }
    // Not well formed, or not UTF-8 as a whole (a length byte of 0x80 or more can make
    // it so): string by string, which names what is wrong.
    let mut c = Cursor::new(b, "labels");
    let labels = decode_labels_from(&mut c)?;
    if !c.is_empty() {
        return Err(Error::corrupt("labels", "trailing bytes"));
    }
    Ok(labels)
}

/// [`decode_labels`]' answer when `b` is well formed, with one UTF-8 check over the whole
/// encoding instead of one per string (a series read decodes about twenty strings).
/// When the whole is valid UTF-8, a string that is valid on its own starts and ends on
/// character boundaries of the whole, so slicing the checked whole at the framing's
/// ranges ([`walk_pairs`]) gives exactly the strings a check of each would accept.
/// With `sorted`, the names must also be strictly increasing, compared as bytes while
/// walking (byte order is code point order for UTF-8), instead of as strings after.
/// `None` when anything is off; the caller then decodes string by string.
fn decode_labels_checked_once(b: &[u8], sorted: bool) -> Option<Vec<Label>> {
    let whole = std::str::from_utf8(b).ok()?;
    // Every pair takes at least two bytes, which bounds a corrupt count.
    let count = varint::read_uvarint(b).ok()?.0.min(b.len() as u64 / 2);
    let mut labels = Vec::with_capacity(count as usize);
    let mut prev: Option<&str> = None;
    walk_pairs(b, |name, value| {
        let (Some(name), Some(value)) = (whole.get(name), whole.get(value)) else {
            return Err(String::new());
        };
        if sorted && prev.is_some_and(|p| p >= name) {
            return Err(String::new());
        }
        prev = Some(name);
        labels.push(Label { name: name.into(), value: value.into() });
        Ok(())
    })
    .ok()?;
    Some(labels)
}

/// The label-set hash: xxh3-64 of the canonical encoding (stable across machines).
pub fn labels_hash(encoded: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(encoded)
}

#[cfg(test)]
mod tests;

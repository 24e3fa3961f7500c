//! The canonical label-set encoding: the `series` column family's value, the label part
//! of a WAL batch record, what the head keeps per series, and the input of the label-set
//! hash (diagram in `FORMAT.md`). It lives apart from `keys` (RocksDB layout) and `wal`
//! (log framing) because both persist it and neither should depend on the other.

use crate::error::{Error, Result};
use crate::varint::{self, Cursor};
use tessera_model::{Label, Labels};

/// Canonical label-set encoding (the `series` CF value and the WAL series entry):
/// `count uvarint, then (name_len uvarint, name, value_len uvarint, value)*`.
pub fn encode_labels(labels: &[Label], out: &mut Vec<u8>) {
    varint::put_uvarint(out, labels.len() as u64);
    for l in labels {
        varint::put_uvarint(out, l.name.len() as u64);
        out.extend_from_slice(l.name.as_bytes());
        varint::put_uvarint(out, l.value.len() as u64);
        out.extend_from_slice(l.value.as_bytes());
    }
}

pub fn decode_labels_from(c: &mut Cursor<'_>) -> Result<Vec<Label>> {
    let n = c.uvarint()?;
    // Each label takes at least two bytes, which bounds a corrupt count.
    if n > c.buf.len() as u64 {
        return Err(Error::corrupt("labels", format!("label count {n} exceeds record size")));
    }
    let mut labels = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let name = c.string()?.to_string();
        let value = c.string()?.to_string();
        labels.push(Label { name, value });
    }
    Ok(labels)
}

/// [`decode_labels`] as a [`Labels`]: refused as corrupt unless sorted by name and
/// unique, which `Engine::append` requires of every stored set.
pub fn decode_label_set(b: &[u8]) -> Result<Labels> {
    let labels = decode_labels(b)?;
    if !is_sorted_unique(&labels) {
        return Err(Error::corrupt("labels", "label names not sorted and unique"));
    }
    Ok(Labels::from_sorted(labels))
}

/// Whether names are strictly increasing: the canonical order of a stored label set.
pub fn is_sorted_unique(labels: &[Label]) -> bool {
    labels.windows(2).all(|w| w[0].name < w[1].name)
}

pub fn decode_labels(b: &[u8]) -> Result<Vec<Label>> {
    let mut c = Cursor::new(b, "labels");
    let labels = decode_labels_from(&mut c)?;
    if !c.is_empty() {
        return Err(Error::corrupt("labels", "trailing bytes"));
    }
    Ok(labels)
}

/// The label-set hash: xxh3-64 of the canonical encoding (stable across machines).
pub fn labels_hash(encoded: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(encoded)
}

#[cfg(test)]
mod tests;

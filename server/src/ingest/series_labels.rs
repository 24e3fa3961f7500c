//! A validated series' label set in one allocation, as the write path carries it.
//!
//! Remote write sends about a dozen labels per series and, in a backfill or a scrape
//! round, one sample per series per request, so per-label allocations dominated the write
//! path's CPU (two `String`s per label to decode, a copy to insert the tenant label, and
//! the frees; measured in BENCHMARKS.md, "Write-path profile"). [`SeriesLabels`] keeps the
//! pairs in storage's canonical encoding (`tessera_storage::labels_codec`) without the
//! tenant, plus where the tenant label sorts in, so a shard builds the stored encoding
//! with one copy into a per-shard buffer and the hash is taken over the same bytes.

use tessera_model::Label;
use tessera_storage::labels_codec;

use crate::shards::TENANT_LABEL;

/// Sorted label pairs (no empty values, no tenant label) in one boxed buffer.
#[derive(Clone, PartialEq, Eq)]
pub struct SeriesLabels {
    /// `labels_codec::put_pair` of each label, in name order.
    pairs: Box<[u8]>,
    count: u32,
    /// Byte offset in `pairs` of the first label whose name sorts after the tenant label.
    tenant_at: u32,
}

impl SeriesLabels {
    /// Builds the set from name/value pairs already sorted by name with unique names
    /// (what `ingest::validate::check_labels` accepts); pairs with an empty value are
    /// left out, as Prometheus treats them as absent. One allocation of the exact size.
    pub fn from_sorted_pairs<'a>(pairs: impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone) -> SeriesLabels {
        let size: usize = pairs
            .clone()
            .filter(|(_, v)| !v.is_empty())
            .map(|(n, v)| uvarint_len(n.len()) + n.len() + uvarint_len(v.len()) + v.len())
            .sum();
        let mut buf = Vec::with_capacity(size);
        let mut count = 0u32;
        let mut tenant_at = None;
        for (n, v) in pairs.filter(|(_, v)| !v.is_empty()) {
            if tenant_at.is_none() && n > TENANT_LABEL.as_bytes() {
                tenant_at = Some(buf.len());
            }
            labels_codec::put_pair(&mut buf, n, v);
            count += 1;
        }
        let tenant_at = tenant_at.unwrap_or(buf.len());
        SeriesLabels { pairs: buf.into_boxed_slice(), count, tenant_at: u32::try_from(tenant_at).unwrap_or(u32::MAX) }
    }

    /// The set of `labels`, which must be sorted by name with unique names.
    pub fn from_labels(labels: &[Label]) -> SeriesLabels {
        SeriesLabels::from_sorted_pairs(labels.iter().map(|l| (l.name.as_bytes(), l.value.as_bytes())))
    }

    /// The pairs in name order.
    pub fn iter(&self) -> Pairs<'_> {
        Pairs { rest: &self.pairs }
    }

    /// Number of labels.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Owned labels (error messages, and writers that forward owned labels).
    pub fn to_labels(&self) -> Vec<Label> {
        let text = |b: &[u8]| compact_str::CompactString::from_utf8_lossy(b);
        self.iter().map(|(n, v)| Label { name: text(n), value: text(v) }).collect()
    }

    /// Appends the canonical encoding storage keeps (`labels_codec::encode_labels`) of
    /// these labels plus `__tenant__="tenant"` in its sorted place.
    pub fn encode_with_tenant(&self, tenant: &str, out: &mut Vec<u8>) {
        let at = (self.tenant_at as usize).min(self.pairs.len());
        labels_codec::put_count(out, self.len() + 1);
        out.reserve(self.pairs.len() + TENANT_LABEL.len() + tenant.len() + 4);
        out.extend_from_slice(&self.pairs[..at]);
        labels_codec::put_pair(out, TENANT_LABEL.as_bytes(), tenant.as_bytes());
        out.extend_from_slice(&self.pairs[at..]);
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.pairs.len()
    }
}

impl std::fmt::Debug for SeriesLabels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        f.debug_map().entries(self.iter().map(|(n, v)| (text(n), text(v)))).finish()
    }
}

/// Iterator over the pairs of a [`SeriesLabels`].
pub struct Pairs<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Pairs<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let name = take(&mut self.rest)?;
        let value = take(&mut self.rest)?;
        Some((name, value))
    }
}

/// Reads one length-prefixed string off the front of `buf`; `None` at the end (or on
/// bytes this module did not write, which cannot happen).
fn take<'a>(buf: &mut &'a [u8]) -> Option<&'a [u8]> {
    let mut len = 0usize;
    let mut shift = 0;
    loop {
        let (&b, rest) = buf.split_first()?;
        *buf = rest;
        len |= usize::from(b & 0x7f) << shift;
        if b < 0x80 {
            break;
        }
        shift += 7;
        if shift >= usize::BITS {
            return None;
        }
    }
    let (s, rest) = (buf.get(..len)?, buf.get(len..)?);
    *buf = rest;
    Some(s)
}

/// Bytes of the uvarint of `n`.
fn uvarint_len(n: usize) -> usize {
    let bits = usize::BITS - (n | 1).leading_zeros();
    bits.div_ceil(7) as usize
}

#[cfg(test)]
mod tests;

//! Label sets of generated series, built once and shared by every sample.
//!
//! A series' labels are sorted by name (remote write requires it) and hashed once;
//! samples carry an `Arc<Series>`, so a batch of 2,000 samples costs 2,000 reference
//! counts, not 2,000 × 12 label strings.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

/// A label set, sorted by name, with a stable hash and a process-unique id.
#[derive(Debug)]
pub struct Series {
    /// (name, value) pairs sorted by name; no empty values (Prometheus drops them).
    pub labels: Vec<(Bytes, Bytes)>,
    /// xxh3 of the sorted pairs; picks the sender shard, so it must be stable.
    pub hash: u64,
    /// Identity for staleness bookkeeping (two `Series` with equal labels never coexist
    /// in one target, so pointer-like ids suffice).
    pub id: u64,
}

pub type SeriesRef = Arc<Series>;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Series {
    /// The value of label `name`, if present.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.labels.iter().find(|(n, _)| n.as_ref() == name.as_bytes()).map(|(_, v)| v.as_ref())
    }

    pub fn metric_name(&self) -> &[u8] {
        self.get("__name__").unwrap_or_default()
    }
}

/// Collects label pairs in any order; `build` sorts, drops empty values and hashes.
#[derive(Debug, Default, Clone)]
pub struct LabelsBuilder {
    pairs: Vec<(Bytes, Bytes)>,
}

impl LabelsBuilder {
    pub fn new(metric: &'static str) -> Self {
        LabelsBuilder { pairs: vec![(Bytes::from_static(b"__name__"), Bytes::from_static(metric.as_bytes()))] }
    }

    /// Adds a label; a later `set` of the same name replaces the earlier one.
    pub fn set(mut self, name: &'static str, value: impl Into<Bytes>) -> Self {
        let value = value.into();
        if let Some(p) = self.pairs.iter_mut().find(|(n, _)| n.as_ref() == name.as_bytes()) {
            p.1 = value;
        } else {
            self.pairs.push((Bytes::from_static(name.as_bytes()), value));
        }
        self
    }

    /// Copies every pair of `base` (used for the target labels shared by a scrape).
    pub fn extend(mut self, base: &[(Bytes, Bytes)]) -> Self {
        for (n, v) in base {
            if let Some(p) = self.pairs.iter_mut().find(|(pn, _)| pn == n) {
                p.1 = v.clone();
            } else {
                self.pairs.push((n.clone(), v.clone()));
            }
        }
        self
    }

    pub fn build(mut self) -> SeriesRef {
        // Prometheus treats an empty label value as an absent label and never sends it.
        self.pairs.retain(|(_, v)| !v.is_empty());
        self.pairs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        for (n, v) in &self.pairs {
            h.update(n);
            h.update(&[0xff]);
            h.update(v);
            h.update(&[0xff]);
        }
        Arc::new(Series { labels: self.pairs, hash: h.digest(), id: NEXT_ID.fetch_add(1, Ordering::Relaxed) })
    }
}

//! Metric metadata (type, help, unit) sent by remote-write senders, kept in memory per
//! tenant for `/api/v1/metadata`.
//!
//! Prometheus itself keeps metadata only in memory too (it is re-sent by agents every
//! minute), so losing it on restart matches upstream behaviour. Each tenant holds at
//! most `limits.max_metadata_per_tenant` metric families, and each family at most
//! [`MAX_ENTRIES_PER_METRIC`] distinct entries, so a misbehaving sender cannot grow it
//! without bound.

use std::collections::{BTreeMap, HashMap};

use parking_lot::RwLock;
use serde::Serialize;

/// Distinct (type, help, unit) entries remembered per metric family.
pub const MAX_ENTRIES_PER_METRIC: usize = 10;

/// One metadata entry, serialized as Prometheus' `/api/v1/metadata` does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MetadataEntry {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub help: String,
    pub unit: String,
}

/// Per-tenant metadata. A `RwLock` (not async) because every critical section is a
/// short map operation with no `.await` inside.
#[derive(Default)]
pub struct MetadataStore {
    tenants: RwLock<HashMap<String, BTreeMap<String, Vec<MetadataEntry>>>>,
    max_per_tenant: usize,
}

impl MetadataStore {
    pub fn new(max_per_tenant: usize) -> Self {
        MetadataStore { tenants: RwLock::new(HashMap::new()), max_per_tenant }
    }

    /// Records entries for `tenant`; the newest entry of a metric goes first.
    pub fn record(&self, tenant: &str, entries: Vec<(String, MetadataEntry)>) {
        if entries.is_empty() || self.max_per_tenant == 0 {
            return;
        }
        let mut tenants = self.tenants.write();
        let families = tenants.entry(tenant.to_owned()).or_default();
        for (metric, entry) in entries {
            if metric.is_empty() {
                continue;
            }
            if !families.contains_key(&metric) && families.len() >= self.max_per_tenant {
                continue;
            }
            let list = families.entry(metric).or_default();
            if let Some(pos) = list.iter().position(|e| *e == entry) {
                list.remove(pos);
            }
            list.insert(0, entry);
            list.truncate(MAX_ENTRIES_PER_METRIC);
        }
    }

    /// Metadata of `tenant`, optionally for one `metric`, with Prometheus' `limit`
    /// (families) and `limit_per_metric` (entries per family); `None` = no limit.
    pub fn query(
        &self,
        tenant: &str,
        metric: Option<&str>,
        limit: Option<usize>,
        limit_per_metric: Option<usize>,
    ) -> BTreeMap<String, Vec<MetadataEntry>> {
        let tenants = self.tenants.read();
        let Some(families) = tenants.get(tenant) else { return BTreeMap::new() };
        let per = limit_per_metric.unwrap_or(usize::MAX);
        families
            .iter()
            .filter(|(name, _)| metric.is_none_or(|m| m == name.as_str()))
            .take(limit.unwrap_or(usize::MAX))
            .map(|(name, list)| (name.clone(), list.iter().take(per).cloned().collect()))
            .collect()
    }
}

#[cfg(test)]
mod tests;

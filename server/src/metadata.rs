//! Metric metadata (type, help, unit) sent by remote-write senders, kept in memory per
//! tenant for `/api/v1/metadata`.
//!
//! Prometheus itself keeps metadata only in memory too (it is re-sent by agents every
//! minute), so losing it on restart matches upstream behaviour. Each tenant holds at
//! most `limits.max_metadata_per_tenant` metric families, each family at most
//! [`MAX_ENTRIES_PER_METRIC`] distinct entries, each help or unit text at most
//! `limits.max_metadata_text_bytes`, and all of it at most
//! `limits.max_metadata_bytes_per_tenant` bytes, so a misbehaving sender cannot grow it
//! without bound (a count alone let five requests of long help texts keep 98 MB).

use std::collections::{BTreeMap, HashMap};

use parking_lot::RwLock;

/// Distinct (type, help, unit) entries remembered per metric family.
pub const MAX_ENTRIES_PER_METRIC: usize = 10;

/// Bytes charged per metric family besides its name (map node, list), for
/// `limits.max_metadata_bytes_per_tenant`.
pub const FAMILY_OVERHEAD_BYTES: usize = 96;

/// Bytes charged per entry besides its help and unit text.
pub const ENTRY_OVERHEAD_BYTES: usize = std::mem::size_of::<MetadataEntry>();

/// The type names an entry can have (remote write's metric types as Prometheus' API
/// names them).
pub const KINDS: [&str; 8] =
    ["counter", "gauge", "histogram", "gaugehistogram", "summary", "info", "stateset", "unknown"];

/// The static type name equal to `name`, if it is one of [`KINDS`] (for entries that
/// arrive over the cluster's internal API as strings).
pub fn kind_named(name: &str) -> Option<&'static str> {
    KINDS.iter().copied().find(|k| *k == name)
}

/// One metadata entry; `/api/v1/metadata` writes it as Prometheus' `{"type","help","unit"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataEntry {
    pub kind: &'static str,
    pub help: String,
    pub unit: String,
}

impl MetadataEntry {
    /// Bytes this entry is charged.
    fn cost(&self) -> usize {
        ENTRY_OVERHEAD_BYTES + self.help.len() + self.unit.len()
    }
}

/// One tenant's families and the bytes they are charged.
#[derive(Default)]
struct TenantMetadata {
    families: BTreeMap<String, Vec<MetadataEntry>>,
    bytes: usize,
}

/// Per-tenant metadata. A `RwLock` (not async) because every critical section is a
/// short map operation with no `.await` inside.
///
/// Memory per tenant is bounded in bytes, not only in count: at most
/// `max_bytes_per_tenant` charged bytes (names, help and unit texts plus the overheads
/// above), each help or unit text at most `max_text_bytes` long.
#[derive(Default)]
pub struct MetadataStore {
    tenants: RwLock<HashMap<String, TenantMetadata>>,
    max_per_tenant: usize,
    max_bytes_per_tenant: usize,
    max_text_bytes: usize,
}

/// The length of `s` cut to at most `max` bytes at a character boundary (0 = no cut).
pub fn cut_len(s: &str, max: usize) -> usize {
    if max == 0 || s.len() <= max {
        return s.len();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    end
}

impl MetadataStore {
    /// A store keeping at most `max_per_tenant` families (0 = keep nothing) and
    /// `max_bytes_per_tenant` bytes per tenant (0 = no byte bound), with texts cut to
    /// `max_text_bytes` (0 = not cut).
    pub fn new(max_per_tenant: usize, max_bytes_per_tenant: usize, max_text_bytes: usize) -> Self {
        MetadataStore { tenants: RwLock::new(HashMap::new()), max_per_tenant, max_bytes_per_tenant, max_text_bytes }
    }

    /// Records entries for `tenant`; the newest entry of a metric goes first. Entries
    /// that would take the tenant over its family count or byte bound are not kept.
    pub fn record(&self, tenant: &str, entries: Vec<(String, MetadataEntry)>) {
        if entries.is_empty() || self.max_per_tenant == 0 {
            return;
        }
        let fits = |bytes: usize| self.max_bytes_per_tenant == 0 || bytes <= self.max_bytes_per_tenant;
        let mut tenants = self.tenants.write();
        let tm = tenants.entry(tenant.to_owned()).or_default();
        let TenantMetadata { families, bytes } = tm;
        for (metric, mut entry) in entries {
            if metric.is_empty() {
                continue;
            }
            entry.help.truncate(cut_len(&entry.help, self.max_text_bytes));
            entry.unit.truncate(cut_len(&entry.unit, self.max_text_bytes));
            let cost = entry.cost();
            match families.get_mut(&metric) {
                Some(list) => {
                    if let Some(pos) = list.iter().position(|e| *e == entry) {
                        let e = list.remove(pos);
                        list.insert(0, e);
                        continue;
                    }
                    if !fits(*bytes + cost) {
                        continue;
                    }
                    list.insert(0, entry);
                    *bytes += cost;
                    if list.len() > MAX_ENTRIES_PER_METRIC {
                        if let Some(old) = list.pop() {
                            *bytes -= old.cost();
                        }
                    }
                }
                None => {
                    let cost = cost + FAMILY_OVERHEAD_BYTES + metric.len();
                    if families.len() >= self.max_per_tenant || !fits(*bytes + cost) {
                        continue;
                    }
                    families.insert(metric, vec![entry]);
                    *bytes += cost;
                }
            }
        }
    }

    /// Records `families` of `tenant` (each family's entries newest first, as
    /// [`MetadataStore::query`] answers them) so that each keeps that order: entries a
    /// peer sent by repair, merged with what this store already has.
    pub fn record_families(&self, tenant: &str, families: Vec<(String, Vec<MetadataEntry>)>) {
        let entries = families
            .into_iter()
            .flat_map(|(metric, list)| list.into_iter().rev().map(move |e| (metric.clone(), e)))
            .collect();
        self.record(tenant, entries);
    }

    /// Every family of every tenant for which `keep(tenant, metric)` holds, entries
    /// newest first: (tenant, families sorted by name).
    pub fn export(&self, keep: impl Fn(&str, &str) -> bool) -> Vec<(String, Vec<(String, Vec<MetadataEntry>)>)> {
        let tenants = self.tenants.read();
        let mut out: Vec<(String, Vec<(String, Vec<MetadataEntry>)>)> = tenants
            .iter()
            .map(|(tenant, tm)| {
                let families = tm
                    .families
                    .iter()
                    .filter(|(metric, _)| keep(tenant, metric))
                    .map(|(metric, list)| (metric.clone(), list.clone()))
                    .collect::<Vec<_>>();
                (tenant.clone(), families)
            })
            .filter(|(_, f)| !f.is_empty())
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Bytes charged to `tenant` (see [`MetadataStore`]).
    pub fn bytes(&self, tenant: &str) -> usize {
        self.tenants.read().get(tenant).map_or(0, |t| t.bytes)
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
        let Some(families) = tenants.get(tenant).map(|t| &t.families) else { return BTreeMap::new() };
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

//! `/api/v1/status/tsdb`: cardinality statistics, so label explosions are visible.
//!
//! Prometheus computes these from its in-memory postings (`MemPostings.Stats`): for every
//! label name, how many distinct values it has; for every `name=value` pair, how many series
//! carry it; for `__name__`, series per metric; and per label name the bytes its values take
//! (value length × series, as 3.x counts it). We compute the same numbers from the series of
//! one tenant, fed one label set at a time by whoever owns the index, or (a cluster) from
//! series counts per label pair made on each shard and added up: the per-pair counts are
//! exact sums over disjoint shards, and every list is derived from the merged pairs, so
//! distinct values per name and distinct pairs are exact too.

use std::collections::HashMap;

use tessera_model::Labels;

use crate::http::json::{write_str, ObjectWriter};

/// Prometheus' default and maximum for the `limit` parameter.
pub const DEFAULT_LIMIT: usize = 10;
pub const MAX_LIMIT: usize = 10_000;

/// Head numbers that only the storage side knows. `None` is written as `null`: storage
/// that does not keep a number per tenant says so instead of inventing one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HeadSummary {
    /// Chunks held for the tenant (open and persisted).
    pub chunk_count: Option<i64>,
    /// Oldest and newest sample time (ms) of the tenant's data.
    pub min_time: Option<i64>,
    pub max_time: Option<i64>,
}

/// Accumulates label statistics over a tenant's series.
#[derive(Debug, Default)]
pub struct CardinalityCounter {
    /// label name → label value → series carrying that pair.
    pairs: HashMap<String, HashMap<String, u64>>,
    series: u64,
}

/// One `{"name": …, "value": …}` entry of a top list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub name: String,
    pub value: u64,
}

/// The computed answer.
#[derive(Debug, Clone, PartialEq)]
pub struct TsdbStatus {
    pub num_series: u64,
    pub num_label_pairs: u64,
    pub head: HeadSummary,
    pub series_count_by_metric_name: Vec<Stat>,
    pub label_value_count_by_label_name: Vec<Stat>,
    pub memory_in_bytes_by_label_name: Vec<Stat>,
    pub series_count_by_label_value_pair: Vec<Stat>,
}

impl CardinalityCounter {
    pub fn add(&mut self, labels: &Labels) {
        self.series += 1;
        for l in labels.iter() {
            // Allocate the owned keys only the first time a name or pair is seen: the same
            // few label names repeat on every series.
            let values = match self.pairs.get_mut(l.name.as_str()) {
                Some(v) => v,
                None => self.pairs.entry(l.name.to_string()).or_default(),
            };
            match values.get_mut(l.value.as_str()) {
                Some(n) => *n += 1,
                None => {
                    values.insert(l.value.to_string(), 1);
                }
            }
        }
    }

    /// Adds `series` series counted elsewhere (another shard's; series of different
    /// shards are disjoint, so the counts add up).
    pub fn add_series(&mut self, series: u64) {
        self.series += series;
    }

    /// Adds `series` series carrying `name=value`, counted elsewhere (see
    /// [`CardinalityCounter::add_series`]).
    pub fn add_pair(&mut self, name: &str, value: &str, series: u64) {
        let values = match self.pairs.get_mut(name) {
            Some(v) => v,
            None => self.pairs.entry(name.to_owned()).or_default(),
        };
        match values.get_mut(value) {
            Some(n) => *n += series,
            None => {
                values.insert(value.to_owned(), series);
            }
        }
    }

    /// Series counted.
    pub fn series(&self) -> u64 {
        self.series
    }

    /// Every `(name, value, series)` counted, in no particular order.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str, u64)> {
        self.pairs.iter().flat_map(|(n, vs)| vs.iter().map(move |(v, c)| (n.as_str(), v.as_str(), *c)))
    }

    /// The top `limit` entries of each list, largest first (ties by name, so the answer is
    /// stable; Prometheus leaves tie order unspecified).
    pub fn finish(self, head: HeadSummary, limit: usize) -> TsdbStatus {
        let mut by_metric = Vec::new();
        let mut by_name = Vec::new();
        let mut memory = Vec::new();
        let mut by_pair = Vec::new();
        let mut num_label_pairs = 0u64;
        for (name, values) in &self.pairs {
            by_name.push(Stat { name: name.clone(), value: values.len() as u64 });
            num_label_pairs += values.len() as u64;
            let mut bytes = 0u64;
            for (value, series) in values {
                if name == "__name__" {
                    by_metric.push(Stat { name: value.clone(), value: *series });
                }
                by_pair.push(Stat { name: format!("{name}={value}"), value: *series });
                bytes += value.len() as u64 * series;
            }
            memory.push(Stat { name: name.clone(), value: bytes });
        }
        TsdbStatus {
            num_series: self.series,
            num_label_pairs,
            head,
            series_count_by_metric_name: top(by_metric, limit),
            label_value_count_by_label_name: top(by_name, limit),
            memory_in_bytes_by_label_name: top(memory, limit),
            series_count_by_label_value_pair: top(by_pair, limit),
        }
    }
}

fn top(mut stats: Vec<Stat>, limit: usize) -> Vec<Stat> {
    stats.sort_by(|a, b| b.value.cmp(&a.value).then_with(|| a.name.cmp(&b.name)));
    stats.truncate(limit);
    stats
}

fn write_stats(out: &mut String, stats: &[Stat]) {
    out.push('[');
    for (i, s) in stats.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"name\":");
        write_str(out, &s.name);
        out.push_str(",\"value\":");
        out.push_str(&s.value.to_string());
        out.push('}');
    }
    out.push(']');
}

impl TsdbStatus {
    /// The `data` object, in the field order of Prometheus' `TSDBStatus` struct.
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        let mut o = ObjectWriter::new(&mut out);
        o.raw("headStats", |out| {
            let mut h = ObjectWriter::new(out);
            h.int("numSeries", self.num_series as i64).int("numLabelPairs", self.num_label_pairs as i64);
            for (key, value) in [
                ("chunkCount", self.head.chunk_count),
                ("minTime", self.head.min_time),
                ("maxTime", self.head.max_time),
            ] {
                match value {
                    Some(v) => h.int(key, v),
                    None => h.null(key),
                };
            }
            h.finish();
        });
        o.raw("seriesCountByMetricName", |out| write_stats(out, &self.series_count_by_metric_name));
        o.raw("labelValueCountByLabelName", |out| write_stats(out, &self.label_value_count_by_label_name));
        o.raw("memoryInBytesByLabelName", |out| write_stats(out, &self.memory_in_bytes_by_label_name));
        o.raw("seriesCountByLabelValuePair", |out| write_stats(out, &self.series_count_by_label_value_pair));
        o.finish();
        out
    }
}

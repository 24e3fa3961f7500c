//! Self-monitoring: a small registry rendered in the Prometheus text format (0.0.4)
//! on `/metrics`.
//!
//! Hand-written rather than a metrics crate because the set is small and fixed; each
//! labelled family is a `parking_lot::Mutex<BTreeMap>` (short critical sections, no
//! `.await` inside, sorted output for free). Engine numbers (active series, bytes on
//! disk, WAL size) are read from the shards at scrape time, not duplicated here.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::shards::Shards;

/// Latency buckets in seconds, from 1 ms to 10 s.
const BUCKETS: [f64; 14] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// A counter family with labels.
pub struct CounterVec {
    name: &'static str,
    help: &'static str,
    label_names: &'static [&'static str],
    values: Mutex<BTreeMap<Vec<String>, u64>>,
}

impl CounterVec {
    pub const fn new(name: &'static str, help: &'static str, label_names: &'static [&'static str]) -> Self {
        CounterVec { name, help, label_names, values: Mutex::new(BTreeMap::new()) }
    }

    pub fn inc_by(&self, labels: &[&str], n: u64) {
        debug_assert_eq!(labels.len(), self.label_names.len());
        let key: Vec<String> = labels.iter().map(|s| (*s).to_owned()).collect();
        *self.values.lock().entry(key).or_insert(0) += n;
    }

    pub fn get(&self, labels: &[&str]) -> u64 {
        let key: Vec<String> = labels.iter().map(|s| (*s).to_owned()).collect();
        self.values.lock().get(&key).copied().unwrap_or(0)
    }

    pub fn render(&self, out: &mut String) {
        header(out, self.name, self.help, "counter");
        for (k, v) in self.values.lock().iter() {
            let _ = writeln!(out, "{}{} {v}", self.name, label_str(self.label_names, k, None));
        }
    }
}

/// A gauge family with labels (values go up and down).
pub struct GaugeVec {
    name: &'static str,
    help: &'static str,
    label_names: &'static [&'static str],
    values: Mutex<BTreeMap<Vec<String>, i64>>,
}

impl GaugeVec {
    pub const fn new(name: &'static str, help: &'static str, label_names: &'static [&'static str]) -> Self {
        GaugeVec { name, help, label_names, values: Mutex::new(BTreeMap::new()) }
    }

    pub fn add(&self, labels: &[&str], d: i64) {
        debug_assert_eq!(labels.len(), self.label_names.len());
        let key: Vec<String> = labels.iter().map(|s| (*s).to_owned()).collect();
        *self.values.lock().entry(key).or_insert(0) += d;
    }

    pub fn get(&self, labels: &[&str]) -> i64 {
        let key: Vec<String> = labels.iter().map(|s| (*s).to_owned()).collect();
        self.values.lock().get(&key).copied().unwrap_or(0)
    }

    pub fn render(&self, out: &mut String) {
        header(out, self.name, self.help, "gauge");
        for (k, v) in self.values.lock().iter() {
            let _ = writeln!(out, "{}{} {v}", self.name, label_str(self.label_names, k, None));
        }
    }
}

#[derive(Clone)]
struct HistData {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

/// A histogram family with labels (cumulative buckets rendered at scrape time).
pub struct HistogramVec {
    name: &'static str,
    help: &'static str,
    label_names: &'static [&'static str],
    values: Mutex<BTreeMap<Vec<String>, HistData>>,
}

impl HistogramVec {
    pub const fn new(name: &'static str, help: &'static str, label_names: &'static [&'static str]) -> Self {
        HistogramVec { name, help, label_names, values: Mutex::new(BTreeMap::new()) }
    }

    pub fn observe(&self, labels: &[&str], secs: f64) {
        let key: Vec<String> = labels.iter().map(|s| (*s).to_owned()).collect();
        let mut values = self.values.lock();
        let h = values.entry(key).or_insert(HistData { counts: [0; BUCKETS.len()], sum: 0.0, count: 0 });
        if let Some(i) = BUCKETS.iter().position(|&b| secs <= b) {
            h.counts[i] += 1;
        }
        h.sum += secs;
        h.count += 1;
    }

    pub fn render(&self, out: &mut String) {
        header(out, self.name, self.help, "histogram");
        for (k, h) in self.values.lock().iter() {
            let mut cum = 0;
            for (i, b) in BUCKETS.iter().enumerate() {
                cum += h.counts[i];
                let le = format!("{b}");
                let _ = writeln!(out, "{}_bucket{} {cum}", self.name, label_str(self.label_names, k, Some(&le)));
            }
            let _ = writeln!(out, "{}_bucket{} {}", self.name, label_str(self.label_names, k, Some("+Inf")), h.count);
            let _ = writeln!(out, "{}_sum{} {}", self.name, label_str(self.label_names, k, None), h.sum);
            let _ = writeln!(out, "{}_count{} {}", self.name, label_str(self.label_names, k, None), h.count);
        }
    }
}

/// Every metric the server exports besides the per-shard engine numbers.
pub struct Metrics {
    pub samples_received: AtomicU64,
    pub samples_written: AtomicU64,
    /// Float samples not written, by reason (`invalid_series`, `too_far_in_future`,
    /// `too_far_in_past`, `too_old`, `duplicate`, `unreadable`, `rate_limited`,
    /// `series_limit`, `storage_error`).
    pub samples_rejected: CounterVec,
    /// HTTP requests by handler (route) and status code.
    pub requests: CounterVec,
    /// HTTP request latency by handler.
    pub request_duration: HistogramVec,
    /// Latency of one shard's `Engine::append`, which includes the WAL write and fsync
    /// (the fsync alone is `tessera_wal_fsync_duration_seconds`, from the engines).
    pub storage_append_duration: HistogramVec,
    /// Shards whose WAL replay finished.
    pub shards_replayed: AtomicU64,
    /// Series the write path remembers by their label bytes, and the bytes their maps
    /// take (`distributor::series_refs`), as of the last write.
    pub series_remembered: AtomicU64,
    pub series_remembered_bytes: AtomicU64,
    /// The HTTP listener's connection counters (`http/connections.rs`).
    pub connections: std::sync::Arc<crate::http::connections::ConnectionStats>,
    /// Metrics of a part that only some roles run (an ingester's repair), appended to
    /// the exposition; set once at start.
    pub extra: std::sync::OnceLock<ExtraMetrics>,
}

/// Writes further metric families (with their `# HELP`/`# TYPE` lines) to the exposition.
pub type ExtraMetrics = Box<dyn Fn(&mut String) + Send + Sync>;

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        Metrics {
            samples_received: AtomicU64::new(0),
            samples_written: AtomicU64::new(0),
            samples_rejected: CounterVec::new(
                "tessera_samples_rejected_total",
                "Float samples received but not written, by reason.",
                &["reason"],
            ),
            requests: CounterVec::new(
                "tessera_http_requests_total",
                "HTTP requests by handler and status code.",
                &["handler", "code"],
            ),
            request_duration: HistogramVec::new(
                "tessera_http_request_duration_seconds",
                "HTTP request latency by handler.",
                &["handler"],
            ),
            storage_append_duration: HistogramVec::new(
                "tessera_storage_append_duration_seconds",
                "Latency of one shard's append (WAL write + fsync + head), by shard.",
                &["shard"],
            ),
            shards_replayed: AtomicU64::new(0),
            series_remembered: AtomicU64::new(0),
            series_remembered_bytes: AtomicU64::new(0),
            connections: Default::default(),
            extra: std::sync::OnceLock::new(),
        }
    }

    /// The whole exposition; `shards` is `None` while the WAL replay is running.
    pub fn render(&self, shards: Option<&Shards>, shards_total: usize) -> String {
        let mut out = String::with_capacity(8192);
        simple(
            &mut out,
            "tessera_samples_received_total",
            "Float samples received in remote-write requests.",
            "counter",
            self.samples_received.load(Ordering::Relaxed),
        );
        simple(
            &mut out,
            "tessera_samples_written_total",
            "Float samples accepted by storage (new or identical re-sends).",
            "counter",
            self.samples_written.load(Ordering::Relaxed),
        );
        simple(
            &mut out,
            "tessera_write_series_remembered",
            "Series the write path appends by id because their label bytes were written before.",
            "gauge",
            self.series_remembered.load(Ordering::Relaxed),
        );
        simple(
            &mut out,
            "tessera_write_series_remembered_bytes",
            "Heap bytes of the maps of remembered series (not part of tessera_head_bytes).",
            "gauge",
            self.series_remembered_bytes.load(Ordering::Relaxed),
        );
        self.samples_rejected.render(&mut out);
        self.requests.render(&mut out);
        self.request_duration.render(&mut out);
        self.storage_append_duration.render(&mut out);
        let c = &self.connections;
        simple(
            &mut out,
            "tessera_http_connections",
            "HTTP connections open now.",
            "gauge",
            c.open.load(Ordering::Relaxed),
        );
        simple(
            &mut out,
            "tessera_http_connections_accepted_total",
            "HTTP connections accepted.",
            "counter",
            c.accepted.load(Ordering::Relaxed),
        );
        simple(
            &mut out,
            "tessera_http_connections_evicted_total",
            "Idle HTTP connections closed to make room for a new one (http.max_connections or no descriptors).",
            "counter",
            c.evicted.load(Ordering::Relaxed),
        );
        simple(
            &mut out,
            "tessera_http_connections_refused_total",
            "New HTTP connections closed at once because every open one was busy.",
            "counter",
            c.refused.load(Ordering::Relaxed),
        );
        simple(
            &mut out,
            "tessera_http_connections_idle_closed_total",
            "HTTP connections closed by http.idle_timeout_secs.",
            "counter",
            c.idle_closed.load(Ordering::Relaxed),
        );
        simple(&mut out, "tessera_shards", "Configured number of local shards.", "gauge", shards_total as u64);
        simple(
            &mut out,
            "tessera_shards_replayed",
            "Shards whose WAL replay has finished.",
            "gauge",
            self.shards_replayed.load(Ordering::Relaxed),
        );
        if let Some(shards) = shards {
            simple(
                &mut out,
                "tessera_storage_reads_in_flight",
                "Storage reads (one shard's part of a select or index read) running now; at most \
                 max_blocking_storage_calls.",
                "gauge",
                shards.reads_in_flight() as u64,
            );
            let stats = shards.stats();
            let per_shard: [(&str, &str, &str, fn(&tessera_storage::Stats) -> u64); 10] = [
                ("tessera_active_series", "Series with samples in the in-memory head, per shard.", "gauge", |s| {
                    s.active_series
                }),
                (
                    "tessera_head_series",
                    "Series in the in-memory head (idle ones are evicted), per shard.",
                    "gauge",
                    |s| s.head_series,
                ),
                ("tessera_head_bytes", "Estimated heap bytes of the in-memory head, per shard.", "gauge", |s| {
                    s.head_bytes
                }),
                ("tessera_series", "Series known to the shard, per shard.", "gauge", |s| s.total_series),
                ("tessera_storage_disk_bytes", "RocksDB live SST plus memtable bytes, per shard.", "gauge", |s| {
                    s.disk_bytes
                }),
                ("tessera_wal_bytes", "Bytes in WAL segment files, per shard.", "gauge", |s| s.wal_bytes),
                ("tessera_chunks_written_total", "Chunks written to RocksDB since start, per shard.", "counter", |s| {
                    s.chunks_written
                }),
                (
                    "tessera_storage_samples_appended_total",
                    "Samples stored by the engine since start, per shard.",
                    "counter",
                    |s| s.samples_appended,
                ),
                (
                    "tessera_storage_background_errors_total",
                    "RocksDB background jobs (compactions, flushes) that failed since start, per shard.",
                    "counter",
                    |s| s.background_errors,
                ),
                (
                    "tessera_storage_compactions_stopped",
                    "Column families whose automatic compaction is stopped because a compaction read a damaged \
                     file (the log names it), per shard.",
                    "gauge",
                    |s| s.compactions_stopped,
                ),
            ];
            for (name, help, kind, f) in per_shard {
                header(&mut out, name, help, kind);
                for (i, s) in &stats {
                    let _ = writeln!(out, "{name}{{shard=\"{i}\"}} {}", f(s));
                }
            }
            wal_fsync_histogram(&mut out, &stats);
        }
        if let Some(extra) = self.extra.get() {
            extra(&mut out);
        }
        out
    }
}

/// `tessera_wal_fsync_duration_seconds`, per shard, from the engines' own histograms.
fn wal_fsync_histogram(out: &mut String, stats: &[(crate::shards::ShardId, tessera_storage::Stats)]) {
    const NAME: &str = "tessera_wal_fsync_duration_seconds";
    header(out, NAME, "Latency of WAL fsyncs (what an acknowledged write waits for), per shard.", "histogram");
    for (i, s) in stats {
        let f = &s.wal_fsync;
        for (le, n) in tessera_storage::FSYNC_BUCKETS_SECONDS.iter().zip(f.buckets) {
            let _ = writeln!(out, "{NAME}_bucket{{shard=\"{i}\",le=\"{le}\"}} {n}");
        }
        let _ = writeln!(out, "{NAME}_bucket{{shard=\"{i}\",le=\"+Inf\"}} {}", f.count);
        let _ = writeln!(out, "{NAME}_sum{{shard=\"{i}\"}} {}", f.sum_nanos as f64 / 1e9);
        let _ = writeln!(out, "{NAME}_count{{shard=\"{i}\"}} {}", f.count);
    }
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

pub(crate) fn simple(out: &mut String, name: &str, help: &str, kind: &str, v: u64) {
    header(out, name, help, kind);
    let _ = writeln!(out, "{name} {v}");
}

/// `{a="x",b="y"[,le="…"]}`, or nothing when there are no labels.
fn label_str(names: &[&str], values: &[String], le: Option<&str>) -> String {
    let mut parts: Vec<String> = names.iter().zip(values).map(|(n, v)| format!("{n}=\"{}\"", escape(v))).collect();
    if let Some(le) = le {
        parts.push(format!("le=\"{le}\""));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

/// Label-value escaping of the text format: backslash, double quote, newline.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests;

//! Turns simulated samples into remote-write request bodies (protobuf, then snappy
//! block format), exactly as a Prometheus agent would send them.
//!
//! Like Prometheus' queue manager, every sample becomes its own `TimeSeries` entry
//! (one sample each), and a series always goes to the same shard (`hash % shards`),
//! so each shard's stream is in time order per series.

use bytes::Bytes;
use prost::Message;
use tessera_proto::{prometheus as v1, v2};

use crate::fleet::series::Series;
use crate::fleet::{Sample, SeriesRef};

/// Which remote-write protocol to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
pub enum Protocol {
    /// Remote write 1.0: `prometheus.WriteRequest`, labels repeated in every series.
    #[value(name = "1")]
    V1,
    /// Remote write 2.0: `io.prometheus.write.v2.Request`, interned symbol table.
    #[value(name = "2")]
    V2,
}

impl Protocol {
    pub fn content_type(self) -> &'static str {
        match self {
            Protocol::V1 => tessera_proto::CONTENT_TYPE_V1,
            Protocol::V2 => tessera_proto::CONTENT_TYPE_V2,
        }
    }

    /// `X-Prometheus-Remote-Write-Version`, as Prometheus sends it.
    pub fn version_header(self) -> &'static str {
        match self {
            Protocol::V1 => "0.1.0",
            Protocol::V2 => "2.0.0",
        }
    }
}

/// One request body, ready to send.
#[derive(Debug, Clone)]
pub struct Batch {
    pub shard: usize,
    pub samples: u64,
    /// Snappy-compressed protobuf.
    pub body: Bytes,
    /// Size of the protobuf before compression, bytes.
    pub raw_len: usize,
}

/// Protobuf encoding of `samples` (not yet compressed), one `TimeSeries` per sample.
pub fn encode(protocol: Protocol, samples: &[Sample]) -> Vec<u8> {
    encode_groups(protocol, samples.iter().map(|s| (&*s.series, [(s.ts, s.value)])))
}

/// Protobuf encoding of one `TimeSeries` per group: a series and its points in time
/// order (`(timestamp ms, value)`).
fn encode_groups<'a, P>(protocol: Protocol, groups: impl Iterator<Item = (&'a Series, P)>) -> Vec<u8>
where
    P: AsRef<[(i64, f64)]>,
{
    match protocol {
        Protocol::V1 => {
            let timeseries = groups
                .map(|(series, points)| v1::TimeSeries {
                    // `Bytes` clones are reference counts: the label strings are shared
                    // with the simulator's series table.
                    labels: series
                        .labels
                        .iter()
                        .map(|(n, v)| v1::Label { name: n.clone(), value: v.clone() })
                        .collect(),
                    samples: points
                        .as_ref()
                        .iter()
                        .map(|&(timestamp, value)| v1::Sample { value, timestamp })
                        .collect(),
                    exemplars: Vec::new(),
                    histograms: Vec::new(),
                })
                .collect();
            v1::WriteRequest { timeseries, metadata: Vec::new() }.encode_to_vec()
        }
        Protocol::V2 => {
            let mut symbols = v2::SymbolTable::new();
            let timeseries = groups
                .map(|(series, points)| {
                    let mut refs = Vec::with_capacity(series.labels.len() * 2);
                    for (n, v) in &series.labels {
                        // The simulator only builds UTF-8 labels (from Rust strings).
                        refs.push(symbols.get_ref(std::str::from_utf8(n).unwrap_or_default()));
                        refs.push(symbols.get_ref(std::str::from_utf8(v).unwrap_or_default()));
                    }
                    v2::TimeSeries {
                        labels_refs: refs,
                        samples: points
                            .as_ref()
                            .iter()
                            .map(|&(timestamp, value)| v2::Sample { value, timestamp, start_timestamp: 0 })
                            .collect(),
                        histograms: Vec::new(),
                        exemplars: Vec::new(),
                        metadata: Some(v2::Metadata {
                            r#type: metric_type(series.metric_name()) as i32,
                            help_ref: 0,
                            unit_ref: 0,
                        }),
                    }
                })
                .collect();
            v2::Request { symbols: symbols.into_symbols(), timeseries }.encode_to_vec()
        }
    }
}

/// The metric type a 2.0 sender declares, from the naming conventions our exporters
/// follow (the DCGM byte/energy fields are the counters without a `_total` suffix).
fn metric_type(name: &[u8]) -> v2::metadata::MetricType {
    use v2::metadata::MetricType;
    let s = std::str::from_utf8(name).unwrap_or_default();
    let dcgm_counter = crate::fleet::catalog::Dcgm::ALL.iter().any(|f| f.is_counter() && f.name() == s);
    if s.ends_with("_total") || dcgm_counter {
        MetricType::Counter
    } else if s.ends_with("_bucket") || s.ends_with("_sum") || s.ends_with("_count") {
        MetricType::Histogram
    } else {
        MetricType::Gauge
    }
}

/// Encodes and compresses one batch.
pub fn make_batch(protocol: Protocol, shard: usize, samples: &[Sample]) -> Batch {
    compress(shard, samples.len() as u64, encode(protocol, samples))
}

fn compress(shard: usize, samples: u64, raw: Vec<u8>) -> Batch {
    let raw_len = raw.len();
    // snap's raw (block) encoder never fails on input below 4 GiB; batches are a few
    // MiB at most, so an error here would be a bug in snap, not bad input.
    let body = snap::raw::Encoder::new().compress_vec(&raw).expect("snappy block encode of a small buffer");
    Batch { shard, samples, body: Bytes::from(body), raw_len }
}

/// The sender shard of `series`: always the same one, so each shard's stream is in time
/// order per series.
fn shard_of(series: &Series, shards: usize) -> usize {
    (series.hash % shards as u64) as usize
}

/// Cuts a stream of samples into per-shard batches of `batch_samples`.
pub struct Batcher {
    protocol: Protocol,
    batch_samples: usize,
    pending: Vec<Vec<Sample>>,
}

impl Batcher {
    pub fn new(protocol: Protocol, shards: usize, batch_samples: usize) -> Self {
        Batcher { protocol, batch_samples, pending: (0..shards).map(|_| Vec::with_capacity(batch_samples)).collect() }
    }

    /// Adds one sample; returns a batch when its shard's buffer is full.
    pub fn push(&mut self, s: Sample) -> Option<Batch> {
        let shard = shard_of(&s.series, self.pending.len());
        let buf = &mut self.pending[shard];
        buf.push(s);
        if buf.len() >= self.batch_samples {
            let b = make_batch(self.protocol, shard, buf);
            buf.clear();
            return Some(b);
        }
        None
    }

    /// Batches of every shard whose oldest pending sample is at or before `cutoff_ms`
    /// (Prometheus' `batch_send_deadline`: a partial batch does not wait forever).
    pub fn flush_older_than(&mut self, cutoff_ms: i64) -> Vec<Batch> {
        let mut out = Vec::new();
        for (shard, buf) in self.pending.iter_mut().enumerate() {
            if buf.first().is_some_and(|s| s.ts <= cutoff_ms) {
                out.push(make_batch(self.protocol, shard, buf));
                buf.clear();
            }
        }
        out
    }

    /// Every partial batch (end of the dataset).
    pub fn flush_all(&mut self) -> Vec<Batch> {
        self.flush_older_than(i64::MAX)
    }
}

/// Cuts a stream of samples into requests that carry many consecutive samples per
/// series: the bulk-load shape (`backfill --samples-per-series`), where a request's
/// labels are paid once per series instead of once per sample. A Prometheus agent
/// never sends this shape; receivers accept it (remote write allows many samples per
/// `TimeSeries`).
///
/// Samples are buffered per shard and series until [`SeriesBatcher::flush`] (the
/// caller flushes every N scrape rounds), then packed into requests of at most
/// `batch_samples` samples, a series' points in time order and never reordered
/// across requests of its shard.
pub struct SeriesBatcher {
    protocol: Protocol,
    batch_samples: usize,
    /// Per shard: series in first-seen order with their buffered points.
    pending: Vec<Vec<(SeriesRef, Vec<(i64, f64)>)>>,
    /// Per shard: series id → index in `pending` (ids are small process-unique
    /// counters, so Fx hashing is enough).
    slots: Vec<rustc_hash::FxHashMap<u64, usize>>,
}

impl SeriesBatcher {
    pub fn new(protocol: Protocol, shards: usize, batch_samples: usize) -> Self {
        SeriesBatcher {
            protocol,
            batch_samples,
            pending: (0..shards).map(|_| Vec::new()).collect(),
            slots: (0..shards).map(|_| Default::default()).collect(),
        }
    }

    pub fn push(&mut self, s: Sample) {
        let shard = shard_of(&s.series, self.pending.len());
        let pending = &mut self.pending[shard];
        let slot = *self.slots[shard].entry(s.series.id).or_insert_with(|| {
            pending.push((s.series.clone(), Vec::new()));
            pending.len() - 1
        });
        pending[slot].1.push((s.ts, s.value));
    }

    /// Every buffered sample, as requests; the buffers start empty again.
    pub fn flush(&mut self) -> Vec<Batch> {
        let mut out = Vec::new();
        for (shard, pending) in self.pending.iter_mut().enumerate() {
            self.slots[shard].clear();
            let mut groups: Vec<(&Series, &[(i64, f64)])> = Vec::new();
            let mut n = 0;
            for (series, points) in pending.iter() {
                for part in points.chunks(self.batch_samples) {
                    if n + part.len() > self.batch_samples && !groups.is_empty() {
                        let raw = encode_groups(self.protocol, groups.drain(..));
                        out.push(compress(shard, n as u64, raw));
                        n = 0;
                    }
                    groups.push((series, part));
                    n += part.len();
                }
            }
            if !groups.is_empty() {
                let raw = encode_groups(self.protocol, groups.drain(..));
                out.push(compress(shard, n as u64, raw));
            }
            pending.clear();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::{Fleet, FleetConfig};

    fn some_samples(n: usize) -> Vec<Sample> {
        let mut fleet = Fleet::new(FleetConfig { nodes: 2, node_cpus: 1, ..FleetConfig::default() }).expect("valid");
        let mut out = Vec::new();
        while out.len() < n && fleet.next_round(&mut out) {}
        out.truncate(n);
        out
    }

    fn unsnappy(b: &Batch) -> Vec<u8> {
        snap::raw::Decoder::new().decompress_vec(&b.body).expect("valid snappy")
    }

    #[test]
    fn v1_body_decodes_to_the_same_samples() {
        let samples = some_samples(500);
        let batch = make_batch(Protocol::V1, 0, &samples);
        let req = v1::WriteRequest::decode(unsnappy(&batch).as_slice()).expect("valid protobuf");
        assert_eq!(req.timeseries.len(), samples.len());
        for (ts, s) in req.timeseries.iter().zip(&samples) {
            let labels: Vec<_> = ts.labels.iter().map(|l| (l.name.clone(), l.value.clone())).collect();
            assert_eq!(labels, s.series.labels);
            assert_eq!(ts.samples.len(), 1);
            assert_eq!(ts.samples[0].timestamp, s.ts);
            assert_eq!(ts.samples[0].value.to_bits(), s.value.to_bits());
        }
        assert_eq!(batch.samples, 500);
    }

    #[test]
    fn v2_body_resolves_symbols_to_the_same_labels() {
        let samples = some_samples(300);
        let batch = make_batch(Protocol::V2, 0, &samples);
        let req = v2::Request::decode(unsnappy(&batch).as_slice()).expect("valid protobuf");
        assert_eq!(req.symbols[0].len(), 0, "symbol 0 must be the empty string");
        for (ts, s) in req.timeseries.iter().zip(&samples) {
            let labels: Vec<_> = ts
                .labels_refs
                .chunks(2)
                .map(|p| (req.symbols[p[0] as usize].clone(), req.symbols[p[1] as usize].clone()))
                .collect();
            assert_eq!(labels, s.series.labels);
            assert_eq!(ts.samples[0].timestamp, s.ts);
        }
        // Interning makes 2.0 much smaller than 1.0 for label-heavy DCGM series.
        let v1_len = make_batch(Protocol::V1, 0, &samples).raw_len;
        assert!(batch.raw_len * 2 < v1_len, "v2 {} vs v1 {}", batch.raw_len, v1_len);
    }

    #[test]
    fn batcher_keeps_each_series_on_one_shard_and_cuts_full_batches() {
        let mut b = Batcher::new(Protocol::V1, 4, 100);
        let samples = some_samples(2000);
        let mut batches = Vec::new();
        for s in samples.iter().cloned() {
            batches.extend(b.push(s));
        }
        batches.extend(b.flush_all());
        assert_eq!(batches.iter().map(|x| x.samples).sum::<u64>(), 2000);
        assert!(batches.iter().all(|x| x.samples <= 100));
        // A label set never shows up in two shards' batches.
        let mut home = std::collections::HashMap::new();
        for batch in &batches {
            let req = v1::WriteRequest::decode(unsnappy(batch).as_slice()).expect("valid protobuf");
            for ts in req.timeseries {
                let labels: Vec<_> = ts.labels.iter().map(|l| (l.name.clone(), l.value.clone())).collect();
                let shard = *home.entry(labels).or_insert(batch.shard);
                assert_eq!(shard, batch.shard);
            }
        }
        let mut shards: Vec<_> = batches.iter().map(|x| x.shard).collect();
        shards.sort_unstable();
        shards.dedup();
        assert_eq!(shards, vec![0, 1, 2, 3]);
    }

    #[test]
    fn series_batches_carry_each_series_points_in_order_and_lose_none() {
        let samples = some_samples(3000);
        let mut b = SeriesBatcher::new(Protocol::V1, 3, 250);
        for s in samples.iter().cloned() {
            b.push(s);
        }
        let batches = b.flush();
        assert!(b.flush().is_empty(), "a flush empties the buffers");
        assert_eq!(batches.iter().map(|x| x.samples).sum::<u64>(), 3000);
        assert!(batches.iter().all(|x| x.samples <= 250));
        // Per label set: the points of every request, concatenated in send order, are
        // exactly that series' samples in generation order, all on one shard.
        let mut got: std::collections::HashMap<Vec<(Bytes, Bytes)>, (usize, Vec<(i64, u64)>)> = Default::default();
        let mut multi = false;
        for batch in &batches {
            let req = v1::WriteRequest::decode(unsnappy(batch).as_slice()).expect("valid protobuf");
            for ts in req.timeseries {
                multi |= ts.samples.len() > 1;
                let labels: Vec<_> = ts.labels.iter().map(|l| (l.name.clone(), l.value.clone())).collect();
                let e = got.entry(labels).or_insert((batch.shard, Vec::new()));
                assert_eq!(e.0, batch.shard);
                e.1.extend(ts.samples.iter().map(|p| (p.timestamp, p.value.to_bits())));
            }
        }
        assert!(multi, "requests must carry several samples per series");
        let mut want: std::collections::HashMap<Vec<(Bytes, Bytes)>, Vec<(i64, u64)>> = Default::default();
        for s in &samples {
            want.entry(s.series.labels.clone()).or_default().push((s.ts, s.value.to_bits()));
        }
        assert_eq!(got.len(), want.len());
        for (labels, points) in want {
            assert_eq!(got[&labels].1, points);
        }
    }
}

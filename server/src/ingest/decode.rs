//! From HTTP body to validated series: content negotiation, snappy, protobuf, labels.
//!
//! Remote write 1.0 and 2.0 are decoded into the same [`Batch`], so everything after
//! this file (limits, sharding, storage) is version-agnostic. Decoding is zero-copy up
//! to validation: the body is one `Bytes`, prost slices label strings out of it, and
//! the only copy made of a valid series' labels is its one-allocation [`SeriesLabels`].
//!
//! Memory is bounded before it is allocated. For 2.0, [`wire_cost`] walks the protobuf
//! wire format once and estimates what prost will allocate (a 2-byte empty series
//! becomes a ~100-byte struct); the copies made afterwards (labels resolved from 2.0
//! symbols, samples, metadata text) are charged as they are made. 1.0 is read off the
//! wire without prost's tree, and each series and metadata entry is charged before it
//! is kept. Both count against
//! `limits.max_decoded_bytes_per_request`; going over is a 413. Of the per-series
//! problems only the first (lowest index) keeps its text ([`Problems`]), so a request
//! of many tiny bad series cannot grow the error either.
//!
//! Float values are kept bit for bit (a staleness marker stays one), except a NaN that
//! carries the query engine's internal marker payload, which becomes an ordinary NaN
//! (`tessera_model::canonical_float`): so a float is always evaluated as a float.

use std::mem::size_of;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use prost::Message as _;
use tessera_model::{canonical_float, Label, Sample, METRIC_NAME};
use tessera_proto::{prometheus, v2};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::series_labels::SeriesLabels;
use super::validate::{check_labels, describe};
use crate::config::Limits;
use crate::distributor::series_refs::{Reader, SeriesRef};
use crate::metadata::MetadataEntry;

/// Why a body was refused, in the write path's own terms: the HTTP status is chosen by
/// `crate::error` (one mapping), the distributor's [`IngestError`] by the distributor;
/// this module knows neither.
///
/// [`IngestError`]: crate::distributor::IngestError
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Content-Type or Content-Encoding names a message or an encoding not read here.
    #[error("{0}")]
    Unsupported(String),
    /// Not snappy, not protobuf, or a request-level rule of the spec broken; a retry
    /// fails too.
    #[error("{0}")]
    Invalid(String),
    /// Over a per-request size or memory limit.
    #[error("{0}")]
    TooLarge(String),
    /// The server-wide in-flight memory bound has no room now; a retry after
    /// `retry_after_secs` may succeed.
    #[error("{message}")]
    Busy { message: String, retry_after_secs: u64 },
}

/// Which protobuf message the body holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// `prometheus.WriteRequest`.
    V1,
    /// `io.prometheus.write.v2.Request`.
    V2,
}

/// Picks the message from `Content-Type` and checks `Content-Encoding`, per the 2.0
/// spec: a missing Content-Type means 1.0 (old senders), a missing encoding means
/// snappy (as Prometheus' own receiver assumes); anything else unsupported is 415.
pub fn negotiate(content_type: Option<&str>, content_encoding: Option<&str>) -> Result<Version, DecodeError> {
    let unsupported = DecodeError::Unsupported;
    if let Some(enc) = content_encoding {
        if !enc.trim().eq_ignore_ascii_case("snappy") {
            return Err(unsupported(format!(
                "unsupported Content-Encoding {enc:?}: remote write needs \"snappy\" (block format)"
            )));
        }
    }
    let Some(ct) = content_type else { return Ok(Version::V1) };
    let mut parts = ct.split(';');
    let media = parts.next().unwrap_or("").trim();
    if !media.eq_ignore_ascii_case("application/x-protobuf") {
        return Err(unsupported(format!(
            "unsupported Content-Type {ct:?}: expected application/x-protobuf with proto={} or proto={}",
            tessera_proto::PROTO_V1,
            tessera_proto::PROTO_V2
        )));
    }
    let mut version = Version::V1;
    for p in parts {
        let Some((k, v)) = p.split_once('=') else { continue };
        if k.trim().eq_ignore_ascii_case("proto") {
            version = match v.trim().trim_matches('"') {
                tessera_proto::PROTO_V1 => Version::V1,
                tessera_proto::PROTO_V2 => Version::V2,
                other => return Err(unsupported(format!("unsupported remote-write message proto={other:?}"))),
            };
        }
    }
    Ok(version)
}

/// Snappy block decompression with a bound on the output size (checked from the
/// length header before allocating, so a tiny body cannot claim gigabytes).
pub fn decompress(body: &[u8], max: usize) -> Result<Bytes, DecodeError> {
    let len = snap::raw::decompress_len(body)
        .map_err(|e| DecodeError::Invalid(format!("body is not snappy block-compressed: {e}")))?;
    if len > max {
        return Err(DecodeError::TooLarge(format!(
            "decompressed body would be {len} bytes, more than the limit of {max} (limits.max_decompressed_bytes)"
        )));
    }
    let out = snap::raw::Decoder::new()
        .decompress_vec(body)
        .map_err(|e| DecodeError::Invalid(format!("body is not snappy block-compressed: {e}")))?;
    Ok(Bytes::from(out))
}

/// A series that passed validation.
#[derive(Debug)]
pub struct ValidSeries {
    /// Position of the series in the request.
    pub index: usize,
    pub name: SeriesName,
    pub samples: super::Samples,
    /// Where the series' message lies in [`Batch::raw`] (remote write 1.0; empty for 2.0).
    pub wire: Range<usize>,
}

/// How a valid series is named for the shards.
#[derive(Debug)]
pub enum SeriesName {
    /// Sorted labels without the tenant, in one allocation; with the key of its label
    /// bytes when it was decoded with a [`Reader`] (to remember it once written).
    Labels(SeriesLabels, Option<u128>),
    /// A series the shards hold, remembered under `key` (its labels were not read again).
    Known { key: u128, r: SeriesRef },
}

impl SeriesName {
    /// The labels, unless the series is known by id.
    pub fn labels(&self) -> Option<&SeriesLabels> {
        match self {
            SeriesName::Labels(l, _) => Some(l),
            SeriesName::Known { .. } => None,
        }
    }
}

/// Prometheus' text form of a valid series, for error messages: from its labels, or
/// read again from the request for a known series.
pub fn describe_series(raw: &[u8], s: &ValidSeries) -> String {
    match &s.name {
        SeriesName::Labels(l, _) => describe(l.iter()),
        SeriesName::Known { .. } => describe_wire(raw, s.wire.clone()),
    }
}

/// [`describe`] of the labels of the 1.0 series message at `wire` in `raw`.
pub fn describe_wire(raw: &[u8], wire: Range<usize>) -> String {
    describe_v1_series(raw.get(wire).unwrap_or(&[]))
}

/// [`describe`] of the labels of one 1.0 series message, without empty values (as the
/// series was stored).
fn describe_v1_series(ts: &[u8]) -> String {
    describe(v1_label_pairs(ts).into_iter().filter(|(_, v)| !v.is_empty()))
}

/// Labels of a known series, read again from the request and validated, for a shard
/// that no longer holds its id.
pub fn known_series_labels(raw: &[u8], wire: Range<usize>, limits: &Limits) -> Result<SeriesLabels, String> {
    let pairs = v1_label_pairs(raw.get(wire).unwrap_or(&[]));
    check_labels(pairs.iter().copied(), limits)?;
    Ok(SeriesLabels::from_sorted_pairs(pairs.iter().copied()))
}

/// The label pairs of one `prometheus.TimeSeries` message that `from_v1` already read
/// (so its framing is sound; anything unexpected ends the walk).
fn v1_label_pairs(mut ts: &[u8]) -> Vec<(&[u8], &[u8])> {
    let mut pairs = Vec::new();
    while let Ok(Some((field, value))) = next_field(&mut ts) {
        if let (1, Wire::Len(label)) = (field, value) {
            pairs.extend(v1_label(label).ok());
        }
    }
    pairs
}

/// The name and value of one `prometheus.Label` message.
fn v1_label(mut label: &[u8]) -> Result<(&[u8], &[u8]), String> {
    let (mut name, mut val): (&[u8], &[u8]) = (&[], &[]);
    while let Some((f, v)) = next_field(&mut label)? {
        match (f, v) {
            (1, Wire::Len(x)) => name = x,
            (2, Wire::Len(x)) => val = x,
            (1 | 2, other) => return Err(wrong_type("Label", f, other)),
            _ => {}
        }
    }
    Ok((name, val))
}

/// Something in the request that was not (fully) written, naming its series.
#[derive(Debug, Clone)]
pub struct Problem {
    pub index: usize,
    /// The series in Prometheus text form.
    pub series: String,
    pub reason: String,
}

/// Every problem of a request, kept cheaply: the text of the first one (lowest series
/// index, the one the 400 names), the indexes of all offending series and the count of
/// refused float samples. Memory is 8 bytes per offending series, whatever the reasons.
#[derive(Debug, Default)]
pub struct Problems {
    first: Option<Problem>,
    indexes: Vec<usize>,
    samples: u64,
}

impl Problems {
    /// Records a problem of series `index` that refused `samples` float samples. The
    /// description and reason are only built if this becomes the first problem.
    pub fn add(
        &mut self,
        index: usize,
        samples: u64,
        series: impl FnOnce() -> String,
        reason: impl FnOnce() -> String,
    ) {
        self.indexes.push(index);
        self.samples += samples;
        if self.first.as_ref().is_none_or(|f| index < f.index) {
            self.first = Some(Problem { index, series: series(), reason: reason() });
        }
    }

    pub fn is_empty(&self) -> bool {
        self.indexes.is_empty()
    }

    /// The problem of the lowest-indexed offending series.
    pub fn first(&self) -> Option<&Problem> {
        self.first.as_ref()
    }

    /// Distinct offending series.
    pub fn series_count(&self) -> usize {
        let mut v = self.indexes.clone();
        v.sort_unstable();
        v.dedup();
        v.len()
    }

    /// Float samples refused, over all problems.
    pub fn samples(&self) -> u64 {
        self.samples
    }
}

/// A decoded request: valid series, problems, metadata and counts.
#[derive(Debug, Default)]
pub struct Batch {
    pub series: Vec<ValidSeries>,
    /// The decompressed body, kept when a series is [`SeriesName::Known`] (its labels
    /// are read again from here if needed); empty otherwise.
    pub raw: Bytes,
    pub problems: Problems,
    pub metadata: Vec<(String, MetadataEntry)>,
    /// Series in the request, valid or not.
    pub series_total: usize,
    /// Float samples in the request, valid or not.
    pub samples_total: u64,
    pub histograms_total: u64,
    pub exemplars_total: u64,
}

/// Decompresses and decodes a body of the given version and validates every series.
/// A request-level problem (not snappy, not protobuf, too large) is an `Err`; series
/// problems are collected in `Batch::problems` so valid series are still written.
pub fn decode(version: Version, body: &[u8], limits: &Limits) -> Result<Batch, DecodeError> {
    decode_within(version, body, limits, &mut Budget::new(limits.max_decoded_bytes_per_request), None)
}

/// [`decode`] charging a given budget (one that may also hold in-flight permits). With
/// a [`Reader`] of remembered series, a 1.0 series named by remembered label bytes is
/// [`SeriesName::Known`] and its labels are not validated again.
pub fn decode_within(
    version: Version,
    body: &[u8],
    limits: &Limits,
    budget: &mut Budget,
    known: Option<&Reader<'_>>,
) -> Result<Batch, DecodeError> {
    let raw = decompress(body, limits.max_decompressed_bytes)?;
    match version {
        Version::V1 => {
            let mut b = from_v1(&raw, limits, budget, known)?;
            if b.series.iter().any(|s| matches!(s.name, SeriesName::Known { .. })) {
                b.raw = raw;
            }
            Ok(b)
        }
        Version::V2 => {
            let not_protobuf = |e: &dyn std::fmt::Display| {
                DecodeError::Invalid(format!("body is not a valid {} protobuf message: {e}", tessera_proto::PROTO_V2))
            };
            // prost builds 2.0's message tree: bound it before it exists. The 1.0
            // decoder builds no tree and charges what it keeps as it goes.
            budget.charge(wire_cost(&raw, V2_REQUEST).map_err(|e| not_protobuf(&e))?)?;
            let req = v2::Request::decode(raw).map_err(|e| not_protobuf(&e))?;
            from_v2(req, limits, budget)
        }
    }
}

/// In-flight permits are taken in steps of at least this many KiB, so that a request
/// does not go back to the semaphore for every series.
const GROW_KIB: usize = 1024;

/// The decoded-memory budget of one request (`limits.max_decoded_bytes_per_request`),
/// optionally also charged to the server-wide in-flight semaphore (one permit per KiB,
/// `limits.max_inflight_write_bytes`), so that all requests being decoded at once hold
/// at most that much, however many there are.
pub struct Budget {
    used: usize,
    max: usize,
    /// The semaphore, the permits held (those taken at admission included) and how
    /// many bytes the permits taken here cover.
    inflight: Option<(Arc<Semaphore>, OwnedSemaphorePermit, usize)>,
}

impl Budget {
    /// A budget of `max` bytes for this request alone.
    pub fn new(max: usize) -> Self {
        Budget { used: 0, max, inflight: None }
    }

    /// A budget of `max` bytes that also takes in-flight permits from `sem` as memory
    /// is charged, adding them to `held` (the permits taken at admission, which cover
    /// the body). The permits are given back when the budget (or the permit returned by
    /// [`Budget::into_permit`]) is dropped.
    pub fn with_inflight(max: usize, sem: Arc<Semaphore>, held: OwnedSemaphorePermit) -> Self {
        Budget { used: 0, max, inflight: Some((sem, held, 0)) }
    }

    /// Accounts for `bytes` more, or refuses the request if they do not fit: 413 over
    /// the per-request budget, 503 (retry later) when the server-wide in-flight bound
    /// has no room left. Call it before allocating them.
    pub fn charge(&mut self, bytes: usize) -> Result<(), DecodeError> {
        let used = self.used.saturating_add(bytes);
        if used > self.max {
            return Err(DecodeError::TooLarge(format!(
                "request would take more than {} bytes of memory once decoded (limits.max_decoded_bytes_per_request); \
                     send fewer series per request",
                self.max
            )));
        }
        if let Some((sem, held, covered)) = &mut self.inflight {
            if used > *covered {
                // At least GROW_KIB at a time, but never past the per-request budget, so
                // that one request needs at most `max` bytes of permits for decoding.
                let room = (self.max - *covered).div_ceil(1024);
                let kib = (used - *covered).div_ceil(1024).max(GROW_KIB).min(room);
                let n = u32::try_from(kib).unwrap_or(u32::MAX);
                let more = Arc::clone(sem).try_acquire_many_owned(n).map_err(|_| DecodeError::Busy {
                    message:
                        "the server is already decoding as many write requests as limits.max_inflight_write_bytes \
                              allows; retry later"
                            .to_owned(),
                    retry_after_secs: 1,
                })?;
                held.merge(more);
                *covered += n as usize * 1024;
            }
        }
        self.used = used;
        Ok(())
    }

    /// The in-flight permits held, to keep until the decoded request is written.
    pub fn into_permit(self) -> Option<OwnedSemaphorePermit> {
        self.inflight.map(|(_, p, _)| p)
    }

    /// Bytes accounted so far.
    pub fn used(&self) -> usize {
        self.used
    }
}

/// Memory an owned label takes: its struct and its two heap strings.
fn label_cost<'a>(pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> usize {
    pairs.map(|(n, v)| std::mem::size_of::<Label>() + n.len() + v.len()).sum()
}

/// Memory a valid series takes besides its labels: the struct and its samples.
fn series_cost(samples: usize) -> usize {
    std::mem::size_of::<ValidSeries>() + samples * std::mem::size_of::<Sample>()
}

/// What one occurrence of a protobuf field costs once prost has decoded it, for
/// [`wire_cost`]. Every estimate is an upper bound of the heap and struct memory prost
/// allocates for it (not counting `Vec` slack, which `wire_cost` adds).
#[derive(Debug, Clone, Copy)]
pub enum FieldCost {
    /// A fixed size per occurrence: a message element or scalar whose content is not
    /// copied (`Bytes` fields are zero-copy slices of the body).
    Fixed(usize),
    /// A multiple of the field's encoded length: packed scalars (a 1-byte varint becomes
    /// a 4- or 8-byte integer), copied strings. An unpacked scalar counts as 8 bytes.
    PerByte(usize),
    /// A message element: its struct size plus the cost of its own fields.
    Message(usize, &'static [(u32, FieldCost)]),
}

use FieldCost::{Fixed, Message, PerByte};

const HISTOGRAM_FIELDS: &[(u32, FieldCost)] = &[
    (8, Fixed(size_of::<prometheus::BucketSpan>())),
    (9, PerByte(8)),
    (10, PerByte(1)),
    (11, Fixed(size_of::<prometheus::BucketSpan>())),
    (12, PerByte(8)),
    (13, PerByte(1)),
    (16, PerByte(1)),
];

/// `prometheus.MetricMetadata`'s copied strings.
const V1_METADATA: &[(u32, FieldCost)] = &[(2, PerByte(1)), (4, PerByte(1)), (5, PerByte(1))];

/// `prometheus.Exemplar`, whose framing the 1.0 decoder checks without keeping it.
const V1_EXEMPLAR: &[(u32, FieldCost)] = &[(1, Fixed(size_of::<prometheus::Label>()))];

/// `io.prometheus.write.v2.Request`.
pub const V2_REQUEST: &[(u32, FieldCost)] = &[
    (4, Fixed(size_of::<Bytes>())),
    (
        5,
        Message(
            size_of::<v2::TimeSeries>(),
            &[
                (1, PerByte(size_of::<u32>())),
                (2, Fixed(size_of::<v2::Sample>())),
                (3, Message(size_of::<v2::Histogram>(), HISTOGRAM_FIELDS)),
                (4, Message(size_of::<v2::Exemplar>(), &[(1, PerByte(size_of::<u32>()))])),
            ],
        ),
    ),
];

/// `prometheus.ReadRequest`.
pub const READ_REQUEST: &[(u32, FieldCost)] = &[
    (
        1,
        Message(
            size_of::<prometheus::Query>(),
            &[
                (3, Message(size_of::<prometheus::LabelMatcher>(), &[(2, PerByte(1)), (3, PerByte(1))])),
                // Hints: copied strings, and a `String` per `grouping` entry.
                (4, PerByte(size_of::<String>())),
            ],
        ),
    ),
    (2, PerByte(size_of::<i32>())),
];

/// Estimates the memory prost allocates to decode `buf` as the message described by
/// `fields`, walking the wire format without allocating. Twice the sum of the field
/// costs, because a `Vec` grown by pushing may hold up to twice its length. Fields not
/// listed cost nothing beyond the struct that holds them. Errors on malformed wire data
/// (prost would refuse it too).
pub fn wire_cost(buf: &[u8], fields: &[(u32, FieldCost)]) -> Result<usize, String> {
    Ok(walk(buf, fields)?.saturating_mul(2))
}

fn walk(mut buf: &[u8], fields: &[(u32, FieldCost)]) -> Result<usize, String> {
    let mut cost = 0usize;
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        let field = u32::try_from(key >> 3).map_err(|_| format!("field number {} is out of range", key >> 3))?;
        let payload: Option<&[u8]> = match key & 7 {
            0 => {
                varint(&mut buf)?;
                None
            }
            1 => {
                buf = buf.get(8..).ok_or("truncated 64-bit field")?;
                None
            }
            5 => {
                buf = buf.get(4..).ok_or("truncated 32-bit field")?;
                None
            }
            2 => {
                let len = usize::try_from(varint(&mut buf)?).map_err(|_| "length out of range")?;
                if len > buf.len() {
                    return Err(format!("field {field} claims {len} bytes, only {} remain", buf.len()));
                }
                let (p, rest) = buf.split_at(len);
                buf = rest;
                Some(p)
            }
            w => return Err(format!("unsupported wire type {w} of field {field}")),
        };
        let Some((_, c)) = fields.iter().find(|(f, _)| *f == field) else { continue };
        let add = match (c, payload) {
            (Fixed(n), _) => *n,
            (PerByte(k), Some(p)) => k.saturating_mul(p.len()),
            (PerByte(k), None) => k.saturating_mul(8),
            (Message(n, inner), Some(p)) => n.saturating_add(walk(p, inner)?),
            (Message(n, _), None) => *n,
        };
        cost = cost.saturating_add(add);
    }
    Ok(cost)
}

/// Reads one base-128 varint.
#[inline(always)]
fn varint(buf: &mut &[u8]) -> Result<u64, String> {
    // Field keys, lengths of labels and samples: almost every varint is one byte.
    match buf.split_first() {
        Some((&b, rest)) if b < 0x80 => {
            *buf = rest;
            Ok(u64::from(b))
        }
        _ => varint_long(buf),
    }
}

#[inline]
fn varint_long(buf: &mut &[u8]) -> Result<u64, String> {
    let mut v = 0u64;
    for i in 0..10 {
        let (&b, rest) = buf.split_first().ok_or("truncated varint")?;
        *buf = rest;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Ok(v);
        }
    }
    Err("varint longer than 10 bytes".into())
}

/// One field of a protobuf message as read off the wire.
#[derive(Debug, Clone, Copy)]
enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32,
    Len(&'a [u8]),
}

/// Reads the next field of a message (`None` at its end). Groups (wire types 3 and 4,
/// deprecated and unused by remote write) are refused, as [`wire_cost`] refuses them.
/// Inlined into the decoding loops: called about 15 times per series of a request, the
/// call and its returned `Result` in memory cost more than the field itself.
#[inline(always)]
fn next_field<'a>(buf: &mut &'a [u8]) -> Result<Option<(u32, Wire<'a>)>, String> {
    if buf.is_empty() {
        return Ok(None);
    }
    let key = varint(buf)?;
    let field = u32::try_from(key >> 3).map_err(|_| format!("field number {} is out of range", key >> 3))?;
    let value = match key & 7 {
        0 => Wire::Varint(varint(buf)?),
        1 => {
            let (b, rest) = buf.split_first_chunk::<8>().ok_or("truncated 64-bit field")?;
            *buf = rest;
            Wire::Fixed64(u64::from_le_bytes(*b))
        }
        5 => {
            *buf = buf.get(4..).ok_or("truncated 32-bit field")?;
            Wire::Fixed32
        }
        2 => {
            let len = usize::try_from(varint(buf)?).map_err(|_| "length out of range")?;
            if len > buf.len() {
                return Err(format!("field {field} claims {len} bytes, only {} remain", buf.len()));
            }
            let (p, rest) = buf.split_at(len);
            *buf = rest;
            Wire::Len(p)
        }
        w => return Err(format!("unsupported wire type {w} of field {field}")),
    };
    Ok(Some((field, value)))
}

/// The error for a known field sent with another wire type (prost refuses it too).
fn wrong_type(message: &str, field: u32, got: Wire<'_>) -> String {
    format!("field {field} of {message} has the wrong wire type ({got:?})")
}

/// Reused buffers of [`from_v1`]: one series' label pairs and samples as read.
#[derive(Default)]
struct V1Scratch<'a> {
    /// The payloads of one series' label fields, parsed only if the series is not known.
    label_fields: Vec<&'a [u8]>,
    pairs: Vec<(&'a [u8], &'a [u8])>,
    samples: Vec<Sample>,
}

/// Decodes a `prometheus.WriteRequest` straight off the wire: labels are slices of the
/// body and every series is read into reused buffers, so the only allocations are what
/// a valid series keeps (its [`SeriesLabels`] and samples) and metadata. prost's message
/// tree (a `Vec` of labels, a `Vec` of samples and two reference-counted `Bytes` per label,
/// per series) was the largest cost left in the write path (BENCHMARKS.md, "Write-path
/// profile"). Fields are read as prost reads them: unknown ones skipped, the last
/// occurrence of a scalar wins, a known field with the wrong wire type is an error.
/// Exemplars and histograms are counted, not decoded (they are reported as not written),
/// but their framing is checked as prost would. Memory is charged as it is kept: each
/// valid series' labels and samples, and the metadata text.
fn from_v1(raw: &[u8], limits: &Limits, budget: &mut Budget, known: Option<&Reader<'_>>) -> Result<Batch, DecodeError> {
    let invalid = |e: String| {
        DecodeError::Invalid(format!("body is not a valid {} protobuf message: {e}", tessera_proto::PROTO_V1))
    };
    let mut b = Batch::default();
    let mut scratch = V1Scratch::default();
    let mut metadata = Vec::new();
    let mut rest = raw;
    while let Some((field, value)) = next_field(&mut rest).map_err(invalid)? {
        match (field, value) {
            (1, Wire::Len(ts)) => {
                let index = b.series_total;
                b.series_total += 1;
                let start = ts.as_ptr() as usize - raw.as_ptr() as usize;
                let wire = start..start + ts.len();
                v1_series(&mut b, &mut scratch, (index, wire), ts, limits, budget, known).map_err(|e| match e {
                    SeriesError::Wire(e) => invalid(e),
                    SeriesError::Budget(e) => e,
                })?;
            }
            (3, Wire::Len(m)) => {
                budget.charge(wire_cost(m, V1_METADATA).map_err(invalid)?)?;
                metadata.push(m);
            }
            (1 | 3, other) => return Err(invalid(wrong_type("WriteRequest", field, other))),
            _ => {}
        }
    }
    if limits.max_metadata_per_tenant > 0 {
        // The strings were charged as they were read (they are copied here).
        for m in metadata {
            let m = prometheus::MetricMetadata::decode(m).map_err(|e| invalid(e.to_string()))?;
            let kind = v1_type_name(m.r#type);
            let cut = |mut s: String| {
                s.truncate(crate::metadata::cut_len(&s, limits.max_metadata_text_bytes));
                s
            };
            b.metadata.push((m.metric_family_name, MetadataEntry { kind, help: cut(m.help), unit: cut(m.unit) }));
        }
    }
    Ok(b)
}

/// Why one series of a 1.0 request stopped the request.
enum SeriesError {
    /// Malformed protobuf.
    Wire(String),
    /// Over the decoded-memory budget.
    Budget(DecodeError),
}

/// Reads one `prometheus.TimeSeries` into `scratch`, validates its labels and keeps it
/// in `b` if valid (see [`from_v1`]).
fn v1_series<'a>(
    b: &mut Batch,
    scratch: &mut V1Scratch<'a>,
    (index, wire): (usize, Range<usize>),
    mut ts: &'a [u8],
    limits: &Limits,
    budget: &mut Budget,
    known: Option<&Reader<'_>>,
) -> Result<(), SeriesError> {
    scratch.label_fields.clear();
    scratch.pairs.clear();
    scratch.samples.clear();
    let (mut exemplars, mut histograms) = (0usize, 0usize);
    let whole = ts;
    // The label fields' bytes, when they lie together (as every sender writes them):
    // what a remembered series is looked up by.
    let mut label_span: Option<Range<usize>> = None;
    let mut labels_together = true;
    loop {
        let field_start = whole.len() - ts.len();
        let Some((field, value)) = next_field(&mut ts).map_err(SeriesError::Wire)? else { break };
        let field_end = whole.len() - ts.len();
        match (field, value) {
            (1, Wire::Len(label)) => {
                label_span = match label_span {
                    None => Some(field_start..field_end),
                    Some(r) if r.end == field_start => Some(r.start..field_end),
                    Some(r) => {
                        labels_together = false;
                        Some(r)
                    }
                };
                scratch.label_fields.push(label);
            }
            (2, Wire::Len(mut sample)) => {
                let (mut v, mut t) = (0.0f64, 0i64);
                while let Some((f, x)) = next_field(&mut sample).map_err(SeriesError::Wire)? {
                    match (f, x) {
                        (1, Wire::Fixed64(bits)) => v = f64::from_bits(bits),
                        // int64 is sent as the two's complement in a 10-byte varint.
                        (2, Wire::Varint(u)) => t = u as i64,
                        (1 | 2, other) => return Err(SeriesError::Wire(wrong_type("Sample", f, other))),
                        _ => {}
                    }
                }
                scratch.samples.push(Sample { t, v: canonical_float(v) });
            }
            (3, Wire::Len(x)) => {
                walk(x, V1_EXEMPLAR).map_err(SeriesError::Wire)?;
                exemplars += 1;
            }
            (4, Wire::Len(x)) => {
                walk(x, HISTOGRAM_FIELDS).map_err(SeriesError::Wire)?;
                histograms += 1;
            }
            (1..=4, other) => return Err(SeriesError::Wire(wrong_type("TimeSeries", field, other))),
            _ => {}
        }
    }
    let n = scratch.samples.len() as u64;
    b.samples_total += n;
    b.histograms_total += histograms as u64;
    b.exemplars_total += exemplars as u64;
    let lookup = match (known, label_span) {
        (Some(reader), Some(span)) if labels_together => Some(reader.get(&whole[span])),
        _ => None,
    };
    if let Some((key, Some(r))) = lookup {
        // Validated when first written, under the same limits; its labels are not read.
        budget.charge(series_cost(scratch.samples.len())).map_err(SeriesError::Budget)?;
        unsupported_parts(b, index, || describe_v1_series(whole), histograms, exemplars);
        if n > 0 {
            let name = SeriesName::Known { key, r };
            b.series.push(ValidSeries { index, name, samples: super::Samples::from_slice(&scratch.samples), wire });
        }
        return Ok(());
    }
    for label in scratch.label_fields.drain(..) {
        scratch.pairs.push(v1_label(label).map_err(SeriesError::Wire)?);
    }
    let pairs = || scratch.pairs.iter().copied();
    budget.charge(label_cost(pairs()) + series_cost(scratch.samples.len())).map_err(SeriesError::Budget)?;
    match check_labels(pairs(), limits) {
        Err(reason) => b.problems.add(index, n, || describe(pairs()), || reason),
        Ok(()) => {
            let name = SeriesName::Labels(SeriesLabels::from_sorted_pairs(pairs()), lookup.map(|(key, _)| key));
            unsupported_parts(b, index, || describe(pairs()), histograms, exemplars);
            if n > 0 {
                b.series.push(ValidSeries { index, name, samples: super::Samples::from_slice(&scratch.samples), wire });
            }
        }
    }
    Ok(())
}

fn from_v2(req: v2::Request, limits: &Limits, budget: &mut Budget) -> Result<Batch, DecodeError> {
    let symbols = &req.symbols;
    // The spec: "symbols[0] MUST be an empty string"; ref 0 means "unset" everywhere.
    if let Some(first) = symbols.first() {
        if !first.is_empty() {
            return Err(DecodeError::Invalid(format!(
                "symbols[0] must be the empty string (remote write 2.0 spec), got {} bytes",
                first.len()
            )));
        }
    }
    let mut b = Batch { series_total: req.timeseries.len(), ..Batch::default() };
    let sym = |r: u32| symbols.get(r as usize).map(|s| &s[..]);
    for (index, ts) in req.timeseries.iter().enumerate() {
        let n = ts.samples.len() as u64;
        b.samples_total += n;
        b.histograms_total += ts.histograms.len() as u64;
        b.exemplars_total += ts.exemplars.len() as u64;
        // Resolve label refs to byte pairs first; a bad ref is this series' problem.
        let mut pairs: Vec<(&[u8], &[u8])> = Vec::with_capacity(ts.labels_refs.len() / 2);
        let mut bad_ref = None;
        if ts.labels_refs.len() % 2 != 0 {
            bad_ref = Some(format!("labels_refs has an odd number of entries ({})", ts.labels_refs.len()));
        } else {
            for p in ts.labels_refs.chunks_exact(2) {
                match (sym(p[0]), sym(p[1])) {
                    (Some(n), Some(v)) => pairs.push((n, v)),
                    _ => {
                        bad_ref = Some(format!(
                            "label ref {} or {} is outside the symbols table ({} entries)",
                            p[0],
                            p[1],
                            symbols.len()
                        ));
                        break;
                    }
                }
            }
        }
        if let Some(reason) = bad_ref {
            b.problems.add(index, n, || describe(pairs.iter().copied()), || reason);
            continue;
        }
        if !ts.samples.is_empty() && !ts.histograms.is_empty() {
            b.problems.add(
                index,
                n,
                || describe(pairs.iter().copied()),
                || "series has both float samples and histograms (the 2.0 spec forbids it)".into(),
            );
            continue;
        }
        // Resolved labels are copies of shared symbols: this is where a small request
        // could turn into a large one, so the copy is charged before it is made.
        budget.charge(label_cost(pairs.iter().copied()) + series_cost(ts.samples.len()))?;
        match check_labels(pairs.iter().copied(), limits) {
            Err(reason) => b.problems.add(index, n, || describe(pairs.iter().copied()), || reason),
            Ok(()) => {
                let labels = SeriesLabels::from_sorted_pairs(pairs.iter().copied());
                unsupported_parts(
                    &mut b,
                    index,
                    || describe(pairs.iter().copied()),
                    ts.histograms.len(),
                    ts.exemplars.len(),
                );
                if limits.max_metadata_per_tenant > 0 {
                    if let Some(md) = &ts.metadata {
                        v2_metadata(&mut b, md, &labels, &sym, limits.max_metadata_text_bytes, budget)?;
                    }
                }
                if n > 0 {
                    let samples =
                        ts.samples.iter().map(|s| Sample { t: s.timestamp, v: canonical_float(s.value) }).collect();
                    b.series.push(ValidSeries { index, name: SeriesName::Labels(labels, None), samples, wire: 0..0 });
                }
            }
        }
    }
    Ok(b)
}

/// Records metadata sent with a 2.0 series (type, help and unit by symbol ref). Texts
/// are cut to `max_text` bytes and charged to the budget; an entry equal to the one
/// recorded just before (the series of one family usually come together) is skipped.
fn v2_metadata<'a>(
    b: &mut Batch,
    md: &v2::Metadata,
    labels: &SeriesLabels,
    sym: &impl Fn(u32) -> Option<&'a [u8]>,
    max_text: usize,
    budget: &mut Budget,
) -> Result<(), DecodeError> {
    if md.r#type == 0 && md.help_ref == 0 && md.unit_ref == 0 {
        return Ok(());
    }
    let Some((_, name)) = labels.iter().find(|(n, _)| *n == METRIC_NAME.as_bytes()) else { return Ok(()) };
    let raw = |r: u32| sym(r).unwrap_or_default();
    let cut = |s: &[u8]| -> usize {
        if max_text == 0 {
            s.len()
        } else {
            s.len().min(max_text)
        }
    };
    let kind = v1_type_name(md.r#type);
    let (help, unit) = (raw(md.help_ref), raw(md.unit_ref));
    let (help, unit) = (&help[..cut(help)], &unit[..cut(unit)]);
    if let Some((last_name, last)) = b.metadata.last() {
        if last_name.as_bytes() == name
            && last.kind == kind
            && last.help.as_bytes() == help
            && last.unit.as_bytes() == unit
        {
            return Ok(());
        }
    }
    budget.charge(size_of::<(String, MetadataEntry)>() + name.len() + help.len() + unit.len())?;
    // Lossy conversion may cut a character in half at the limit; it becomes U+FFFD.
    let text = |s: &[u8]| String::from_utf8_lossy(s).into_owned();
    // 2.0's type enum is 1.0's shifted by the UNSPECIFIED=0 value, same order.
    let entry = MetadataEntry { kind, help: text(help), unit: text(unit) };
    b.metadata.push((text(name), entry));
    Ok(())
}

/// Tessera stores float samples only: histograms and exemplars are reported as not
/// written (the 2.0 spec forbids a 2xx when any sent element was not written).
fn unsupported_parts(b: &mut Batch, index: usize, desc: impl Fn() -> String, histograms: usize, exemplars: usize) {
    if histograms > 0 {
        b.problems.add(index, 0, &desc, || {
            format!("{histograms} native histogram samples not written: native histograms are not supported yet")
        });
    }
    if exemplars > 0 {
        b.problems.add(index, 0, &desc, || {
            format!("{exemplars} exemplars not written: exemplars are not stored (the float samples were written)")
        });
    }
}

/// Prometheus' metadata type names, as `/api/v1/metadata` returns them.
fn v1_type_name(t: i32) -> &'static str {
    match t {
        1 => "counter",
        2 => "gauge",
        3 => "histogram",
        4 => "gaugehistogram",
        5 => "summary",
        6 => "info",
        7 => "stateset",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests;

//! From HTTP body to validated series: content negotiation, snappy, protobuf, labels.
//!
//! Remote write 1.0 and 2.0 are decoded into the same [`Batch`], so everything after
//! this file (limits, sharding, storage) is version-agnostic. Decoding is zero-copy up
//! to validation: the body is one `Bytes`, prost slices label strings out of it, and
//! the only copies made are the owned labels of series that passed validation.
//!
//! Float values are kept bit for bit (a staleness marker stays one), except a NaN that
//! carries the query engine's internal marker payload, which becomes an ordinary NaN
//! (`tessera_model::canonical_float`): so a float is always evaluated as a float.

use bytes::Bytes;
use prost::Message;
use tessera_proto::{prometheus, v2};
use tessera_model::canonical_float;
use tessera_storage::{Label, Sample};

use super::validate::{describe, validate_labels, METRIC_NAME};
use crate::config::Limits;
use crate::error::{ApiError, ErrorKind};
use crate::metadata::MetadataEntry;

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
pub fn negotiate(content_type: Option<&str>, content_encoding: Option<&str>) -> Result<Version, ApiError> {
    let unsupported = |m: String| ApiError::new(ErrorKind::UnsupportedMediaType, m);
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
pub fn decompress(body: &[u8], max: usize) -> Result<Bytes, ApiError> {
    let len = snap::raw::decompress_len(body)
        .map_err(|e| ApiError::bad_data(format!("body is not snappy block-compressed: {e}")))?;
    if len > max {
        return Err(ApiError::new(
            ErrorKind::TooLarge,
            format!("decompressed body would be {len} bytes, more than the limit of {max} (limits.max_decompressed_bytes)"),
        ));
    }
    let out = snap::raw::Decoder::new()
        .decompress_vec(body)
        .map_err(|e| ApiError::bad_data(format!("body is not snappy block-compressed: {e}")))?;
    Ok(Bytes::from(out))
}

/// A series that passed validation.
#[derive(Debug)]
pub struct ValidSeries {
    /// Position of the series in the request.
    pub index: usize,
    /// Sorted, owned labels without the tenant.
    pub labels: Vec<Label>,
    pub samples: Vec<Sample>,
}

/// Something in the request that was not (fully) written, naming its series.
#[derive(Debug, Clone)]
pub struct Problem {
    pub index: usize,
    /// The series in Prometheus text form.
    pub series: String,
    pub reason: String,
    /// Float samples of this series that were refused because of it.
    pub samples: u64,
}

/// A decoded request: valid series, problems, metadata and counts.
#[derive(Debug, Default)]
pub struct Batch {
    pub series: Vec<ValidSeries>,
    pub problems: Vec<Problem>,
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
pub fn decode(version: Version, body: &[u8], limits: &Limits) -> Result<Batch, ApiError> {
    let raw = decompress(body, limits.max_decompressed_bytes)?;
    match version {
        Version::V1 => {
            let req = prometheus::WriteRequest::decode(raw).map_err(|e| {
                ApiError::bad_data(format!("body is not a valid {} protobuf message: {e}", tessera_proto::PROTO_V1))
            })?;
            Ok(from_v1(req, limits))
        }
        Version::V2 => {
            let req = v2::Request::decode(raw).map_err(|e| {
                ApiError::bad_data(format!("body is not a valid {} protobuf message: {e}", tessera_proto::PROTO_V2))
            })?;
            Ok(from_v2(req, limits))
        }
    }
}

fn from_v1(req: prometheus::WriteRequest, limits: &Limits) -> Batch {
    let mut b = Batch { series_total: req.timeseries.len(), ..Batch::default() };
    for (index, ts) in req.timeseries.into_iter().enumerate() {
        let pairs = || ts.labels.iter().map(|l| (&l.name[..], &l.value[..]));
        let n = ts.samples.len() as u64;
        b.samples_total += n;
        b.histograms_total += ts.histograms.len() as u64;
        b.exemplars_total += ts.exemplars.len() as u64;
        match validate_labels(pairs(), limits) {
            Err(reason) => b.problems.push(Problem { index, series: describe(pairs()), reason, samples: n }),
            Ok(labels) => {
                unsupported_parts(&mut b, index, || describe(pairs()), ts.histograms.len(), ts.exemplars.len());
                if n > 0 {
                    let samples = ts.samples.iter().map(|s| Sample { t: s.timestamp, v: canonical_float(s.value) }).collect();
                    b.series.push(ValidSeries { index, labels, samples });
                }
            }
        }
    }
    if limits.max_metadata_per_tenant > 0 {
        for m in req.metadata {
            let kind = v1_type_name(m.r#type);
            b.metadata.push((m.metric_family_name, MetadataEntry { kind, help: m.help, unit: m.unit }));
        }
    }
    b
}

fn from_v2(req: v2::Request, limits: &Limits) -> Batch {
    let mut b = Batch { series_total: req.timeseries.len(), ..Batch::default() };
    let symbols = &req.symbols;
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
            b.problems.push(Problem { index, series: describe(pairs.iter().copied()), reason, samples: n });
            continue;
        }
        if !ts.samples.is_empty() && !ts.histograms.is_empty() {
            b.problems.push(Problem {
                index,
                series: describe(pairs.iter().copied()),
                reason: "series has both float samples and histograms (the 2.0 spec forbids it)".into(),
                samples: n,
            });
            continue;
        }
        match validate_labels(pairs.iter().copied(), limits) {
            Err(reason) => b.problems.push(Problem { index, series: describe(pairs.iter().copied()), reason, samples: n }),
            Ok(labels) => {
                unsupported_parts(&mut b, index, || describe(pairs.iter().copied()), ts.histograms.len(), ts.exemplars.len());
                if limits.max_metadata_per_tenant > 0 {
                    if let Some(md) = &ts.metadata {
                        v2_metadata(&mut b, md, &labels, &sym);
                    }
                }
                if n > 0 {
                    let samples = ts.samples.iter().map(|s| Sample { t: s.timestamp, v: canonical_float(s.value) }).collect();
                    b.series.push(ValidSeries { index, labels, samples });
                }
            }
        }
    }
    b
}

/// Records metadata sent with a 2.0 series (type, help and unit by symbol ref).
fn v2_metadata<'a>(b: &mut Batch, md: &v2::Metadata, labels: &[Label], sym: &impl Fn(u32) -> Option<&'a [u8]>) {
    if md.r#type == 0 && md.help_ref == 0 && md.unit_ref == 0 {
        return;
    }
    let Some(name) = labels.iter().find(|l| l.name == METRIC_NAME) else { return };
    let text = |r: u32| sym(r).map(|s| String::from_utf8_lossy(s).into_owned()).unwrap_or_default();
    // 2.0's type enum is 1.0's shifted by the UNSPECIFIED=0 value, same order.
    let entry = MetadataEntry { kind: v1_type_name(md.r#type), help: text(md.help_ref), unit: text(md.unit_ref) };
    b.metadata.push((name.value.clone(), entry));
}

/// Tessera stores float samples only: histograms and exemplars are reported as not
/// written (the 2.0 spec forbids a 2xx when any sent element was not written).
fn unsupported_parts(b: &mut Batch, index: usize, desc: impl Fn() -> String, histograms: usize, exemplars: usize) {
    if histograms > 0 {
        b.problems.push(Problem {
            index,
            series: desc(),
            reason: format!("{histograms} native histogram samples not written: native histograms are not supported yet"),
            samples: 0,
        });
    }
    if exemplars > 0 {
        b.problems.push(Problem {
            index,
            series: desc(),
            reason: format!("{exemplars} exemplars not written: exemplars are not stored (the float samples were written)"),
            samples: 0,
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

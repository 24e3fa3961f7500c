use bytes::Bytes;
use prost::Message;
use tessera_proto::{prometheus, v2, SymbolTable};

use super::*;

// Decoding tests: negotiation, request-level failures, per-series problems, and
// property tests that no body can panic the decoder.

fn snappy(b: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new().compress_vec(b).expect("compress")
}

/// No Content-Type and a bare `application/x-protobuf` both mean 1.0 (old senders).
#[test]
fn content_type_selects_the_message() {
    assert_eq!(negotiate(None, None).expect("ok"), Version::V1);
    assert_eq!(negotiate(Some("application/x-protobuf"), Some("snappy")).expect("ok"), Version::V1);
    assert_eq!(negotiate(Some("application/x-protobuf;proto=prometheus.WriteRequest"), None).expect("ok"), Version::V1);
    assert_eq!(
        negotiate(Some("application/x-protobuf; proto=io.prometheus.write.v2.Request"), Some("snappy")).expect("ok"),
        Version::V2
    );
}

#[test]
fn unsupported_type_or_encoding_is_415() {
    for (ct, enc) in [
        (Some("application/json"), None),
        (Some("application/x-protobuf;proto=foo.Bar"), None),
        (Some("application/x-protobuf"), Some("gzip")),
    ] {
        let err = negotiate(ct, enc).expect_err("unsupported");
        assert!(matches!(err, DecodeError::Unsupported(_)), "{ct:?} {enc:?}");
    }
}

#[test]
fn body_that_is_not_snappy_is_400() {
    let err = decode(Version::V1, b"\xff\xff\xff\xff\xff\xff", &Limits::default()).expect_err("not snappy");
    assert!(matches!(err, DecodeError::Invalid(_)), "{err:?}");
    assert!(err.to_string().contains("snappy"), "{err}");
}

#[test]
fn body_that_is_not_protobuf_is_400() {
    let err = decode(Version::V1, &snappy(b"\x0a\xff\xff\xff"), &Limits::default()).expect_err("not protobuf");
    assert!(matches!(err, DecodeError::Invalid(_)), "{err:?}");
    assert!(err.to_string().contains("protobuf"), "{err}");
}

#[test]
fn decompressed_size_over_limit_is_413_before_allocating() {
    let limits = Limits { max_decompressed_bytes: 10, ..Limits::default() };
    let err = decode(Version::V1, &snappy(&[0u8; 100]), &limits).expect_err("too large");
    assert!(matches!(err, DecodeError::TooLarge(_)), "{err:?}");
}

/// A bad series does not poison the request: the good one is kept, the bad one is
/// reported with its index and its Prometheus text form.
#[test]
fn v1_invalid_series_is_reported_and_valid_ones_are_kept() {
    let req = prometheus::WriteRequest {
        timeseries: vec![
            prometheus::TimeSeries {
                labels: vec![prometheus::Label::new("__name__", "ok")],
                samples: vec![prometheus::Sample { value: 1.0, timestamp: 10 }],
                ..Default::default()
            },
            prometheus::TimeSeries {
                labels: vec![
                    prometheus::Label::new("__name__", "bad"),
                    prometheus::Label::new("b", "1"),
                    prometheus::Label::new("a", "2"),
                ],
                samples: vec![prometheus::Sample { value: 1.0, timestamp: 10 }],
                ..Default::default()
            },
        ],
        metadata: vec![prometheus::MetricMetadata {
            r#type: 1,
            metric_family_name: "ok".into(),
            help: "h".into(),
            unit: String::new(),
        }],
    };
    let b = decode(Version::V1, &snappy(&req.encode_to_vec()), &Limits::default()).expect("decodes");
    assert_eq!(b.series.len(), 1);
    assert_eq!(b.series[0].index, 0);
    assert_eq!(b.problems.series_count(), 1);
    let p = b.problems.first().expect("a problem");
    assert_eq!(p.index, 1);
    assert_eq!(p.series, "bad{b=\"1\", a=\"2\"}");
    assert!(p.reason.contains("not sorted"));
    assert_eq!(b.problems.samples(), 1);
    assert_eq!(b.metadata[0].1.kind, "counter");
}

/// 2.0 label refs resolve through the symbol table; a ref past its end is that
/// series' problem, not a request failure; metadata refs become text.
#[test]
fn v2_symbols_are_resolved_and_bad_refs_reported() {
    let mut st = SymbolTable::new();
    let good = st.label_refs([("__name__", "gpu_temp"), ("gpu", "0")]);
    let help = st.get_ref("Temperature");
    let mut symbols = st.into_symbols();
    symbols.push(Bytes::from_static(b"extra"));
    let req = v2::Request {
        symbols,
        timeseries: vec![
            v2::TimeSeries {
                labels_refs: good,
                samples: vec![v2::Sample { value: 41.0, timestamp: 5, start_timestamp: 0 }],
                metadata: Some(v2::Metadata { r#type: 2, help_ref: help, unit_ref: 0 }),
                ..Default::default()
            },
            v2::TimeSeries {
                labels_refs: vec![1, 99],
                samples: vec![v2::Sample { value: 1.0, timestamp: 5, start_timestamp: 0 }],
                ..Default::default()
            },
        ],
    };
    let b = decode(Version::V2, &snappy(&req.encode_to_vec()), &Limits::default()).expect("decodes");
    assert_eq!(b.series.len(), 1);
    assert_eq!(b.series[0].name.labels().expect("labelled").to_labels()[1].value, "0");
    assert_eq!(b.problems.series_count(), 1);
    let p = b.problems.first().expect("a problem");
    assert!(p.reason.contains("outside the symbols table"), "{}", p.reason);
    assert_eq!(
        b.metadata,
        vec![(
            "gpu_temp".to_string(),
            MetadataEntry { kind: "gauge", help: "Temperature".into(), unit: String::new() }
        )]
    );
}

/// The spec requires `symbols[0] == ""` (ref 0 means "unset"); anything else is a
/// malformed request, not a series problem.
#[test]
fn v2_non_empty_first_symbol_is_400() {
    let req = v2::Request {
        symbols: vec![Bytes::from_static(b"__name__"), Bytes::from_static(b"up")],
        timeseries: vec![v2::TimeSeries {
            labels_refs: vec![0, 1],
            samples: vec![v2::Sample { value: 1.0, timestamp: 5, start_timestamp: 0 }],
            ..Default::default()
        }],
    };
    let err = decode(Version::V2, &snappy(&req.encode_to_vec()), &Limits::default()).expect_err("bad symbols[0]");
    assert!(matches!(err, DecodeError::Invalid(_)), "{err:?}");
    assert!(err.to_string().contains("symbols[0] must be the empty string"), "{err}");
}

/// A v2 request whose series all reference one long symbol: tiny on the wire, huge
/// once every series got its own copy. It is refused with 413 once the copies would
/// exceed the budget, before they are made.
fn amplifying_v2_request(series: usize, value_len: usize) -> Vec<u8> {
    let mut st = SymbolTable::new();
    let value = "v".repeat(value_len);
    let refs = st.label_refs([("__name__", "amp"), ("big", value.as_str())]);
    let req = v2::Request {
        timeseries: (0..series)
            .map(|i| v2::TimeSeries {
                labels_refs: refs.clone(),
                samples: vec![v2::Sample { value: 1.0, timestamp: i as i64, start_timestamp: 0 }],
                ..Default::default()
            })
            .collect(),
        symbols: st.into_symbols(),
    };
    snappy(&req.encode_to_vec())
}

#[test]
fn v2_symbol_amplification_is_refused_before_allocating() {
    let limits = Limits { max_decoded_bytes_per_request: 8 << 20, ..Limits::default() };
    // 4,000 series × 4 KB value = 16 MB of copies from a body of a few tens of KB.
    let body = amplifying_v2_request(4_000, 4_000);
    assert!(body.len() < 100_000, "body is {} bytes", body.len());
    let err = decode(Version::V2, &body, &limits).expect_err("amplification");
    assert!(matches!(err, DecodeError::TooLarge(_)), "{err:?}");
    assert!(err.to_string().contains("limits.max_decoded_bytes_per_request"), "{err}");
    // The same shape at a size that fits is accepted.
    let ok = decode(Version::V2, &amplifying_v2_request(100, 4_000), &limits).expect("fits");
    assert_eq!(ok.series.len(), 100);
}

/// Empty series cost 2 bytes on the wire but a whole struct once decoded: the wire walk
/// counts them before prost allocates anything (2.0), the 1.0 decoder as it reads them.
#[test]
fn wire_cost_counts_structs_of_empty_series() {
    let body: Vec<u8> = [0x2a, 0x00].repeat(1000); // 1,000 empty v2 TimeSeries (field 5)
    let cost = wire_cost(&body, V2_REQUEST).expect("valid wire data");
    assert!(cost >= 1000 * std::mem::size_of::<v2::TimeSeries>(), "cost {cost}");
    // 1.0 builds no message tree; its decoder charges each series as it reads it.
    let v1: Vec<u8> = [0x0a, 0x00].repeat(1000); // 1,000 empty v1 TimeSeries (field 1)
    let mut budget = Budget::new(usize::MAX);
    decode_within(Version::V1, &snappy(&v1), &Limits::default(), &mut budget, None).expect("valid");
    assert!(budget.used() >= 1000 * std::mem::size_of::<ValidSeries>(), "charged {}", budget.used());
    let limits = Limits { max_decoded_bytes_per_request: 100_000, ..Limits::default() };
    let err = decode(Version::V2, &snappy(&body), &limits).expect_err("over budget");
    assert!(matches!(err, DecodeError::TooLarge(_)), "{err:?}");
    // Malformed wire data is a 400, as prost would say.
    assert!(wire_cost(&[0x2a, 0x05, 0x00], V2_REQUEST).is_err());
}

/// Only the first problem keeps its text, whatever order problems are found in.
#[test]
fn problems_keep_the_lowest_index_and_count_series_once() {
    let mut p = Problems::default();
    p.add(5, 2, || "five".into(), || "r5".into());
    p.add(3, 1, || "three".into(), || "r3".into());
    p.add(5, 0, || unreachable!("not first"), || unreachable!("not first"));
    assert_eq!(p.first().expect("first").series, "three");
    assert_eq!(p.series_count(), 2);
    assert_eq!(p.samples(), 3);
}

/// v2 metadata texts are cut to the limit and repeated entries of one family are
/// recorded once per request.
#[test]
fn v2_metadata_is_cut_and_deduplicated() {
    let mut st = SymbolTable::new();
    let help = st.get_ref(&"x".repeat(5000));
    let series: Vec<v2::TimeSeries> = (0..3)
        .map(|i| v2::TimeSeries {
            labels_refs: st.label_refs([("__name__", "m"), ("i", &i.to_string())]),
            samples: vec![v2::Sample { value: 1.0, timestamp: 1, start_timestamp: 0 }],
            metadata: Some(v2::Metadata { r#type: 2, help_ref: help, unit_ref: 0 }),
            ..Default::default()
        })
        .collect();
    let req = v2::Request { symbols: st.into_symbols(), timeseries: series };
    let limits = Limits { max_metadata_text_bytes: 100, ..Limits::default() };
    let b = decode(Version::V2, &snappy(&req.encode_to_vec()), &limits).expect("decodes");
    assert_eq!(b.metadata.len(), 1);
    assert_eq!(b.metadata[0].1.help.len(), 100);
}

/// A float whose NaN payload equals the engine's internal histogram marker is stored
/// as an ordinary NaN, so queries see a float; the staleness marker is kept as sent.
#[test]
fn internal_nan_marker_is_canonicalised_and_stale_marker_kept() {
    let marker = f64::from_bits(tessera_model::HISTOGRAM_MARKER_BITS);
    let stale = f64::from_bits(tessera_model::STALE_NAN_BITS);
    let req = prometheus::WriteRequest {
        timeseries: vec![prometheus::TimeSeries {
            labels: vec![prometheus::Label::new("__name__", "nan_payloads")],
            samples: vec![
                prometheus::Sample { value: marker, timestamp: 10 },
                prometheus::Sample { value: stale, timestamp: 20 },
                prometheus::Sample { value: 2.5, timestamp: 30 },
            ],
            ..Default::default()
        }],
        metadata: vec![],
    };
    let b = decode(Version::V1, &snappy(&req.encode_to_vec()), &Limits::default()).expect("decodes");
    let bits: Vec<u64> = b.series[0].samples.iter().map(|s| s.v.to_bits()).collect();
    assert_eq!(bits, [tessera_model::GO_NAN_BITS, tessera_model::STALE_NAN_BITS, 2.5f64.to_bits()]);

    let mut st = SymbolTable::new();
    let refs = st.label_refs([("__name__", "nan_payloads")]);
    let req = v2::Request {
        symbols: st.into_symbols(),
        timeseries: vec![v2::TimeSeries {
            labels_refs: refs,
            samples: vec![v2::Sample { value: marker, timestamp: 10, start_timestamp: 0 }],
            ..Default::default()
        }],
    };
    let b = decode(Version::V2, &snappy(&req.encode_to_vec()), &Limits::default()).expect("decodes");
    assert_eq!(b.series[0].samples[0].v.to_bits(), tessera_model::GO_NAN_BITS);
}

mod never_panics {
    use proptest::prelude::*;

    use super::*;

    fn valid_v1_body() -> Vec<u8> {
        prometheus::WriteRequest {
            timeseries: vec![prometheus::TimeSeries {
                labels: vec![prometheus::Label::new("__name__", "gpu_util"), prometheus::Label::new("gpu", "3")],
                samples: vec![
                    prometheus::Sample { value: 1.0, timestamp: 10 },
                    prometheus::Sample { value: 2.0, timestamp: 20 },
                ],
                ..Default::default()
            }],
            metadata: vec![],
        }
        .encode_to_vec()
    }

    proptest! {
        /// Arbitrary bytes, raw or as a snappy-compressed "protobuf", decode to a
        /// result (usually an error) for both versions, never a panic.
        #[test]
        fn arbitrary_bodies_decode_or_fail_cleanly(body in proptest::collection::vec(any::<u8>(), 0..512)) {
            for v in [Version::V1, Version::V2] {
                let _ = decode(v, &body, &Limits::default());
                let _ = decode(v, &snappy(&body), &Limits::default());
            }
        }

        /// A valid request with one byte flipped and/or cut short: still no panic, and
        /// whatever is accepted passed label validation.
        #[test]
        fn corrupted_valid_requests_decode_or_fail_cleanly(pos in 0usize..64, byte in any::<u8>(), cut in 0usize..64) {
            let mut body = valid_v1_body();
            let p = pos % body.len();
            body[p] = byte;
            body.truncate(body.len() - cut % body.len());
            for v in [Version::V1, Version::V2] {
                if let Ok(b) = decode(v, &snappy(&body), &Limits::default()) {
                    for s in &b.series {
                        let labels = s.name.labels().expect("labelled").to_labels();
                        prop_assert!(labels.iter().any(|l| l.name == "__name__"));
                        prop_assert!(labels.windows(2).all(|w| w[0].name < w[1].name));
                    }
                }
            }
        }
    }
}

/// Decoded memory is charged to the server-wide in-flight semaphore: what one request
/// holds is unavailable to the others until it is dropped, and a request that finds no
/// room is told to retry (503), never allowed past the bound.
#[test]
fn decoded_memory_takes_server_wide_in_flight_permits() {
    use std::sync::Arc;
    use tokio::sync::Semaphore;
    let sem = Arc::new(Semaphore::new(3 * 1024)); // 3 MiB in flight
    let admit = |kib| Arc::clone(&sem).try_acquire_many_owned(kib).expect("admission");
    let mut a = Budget::with_inflight(8 << 20, Arc::clone(&sem), admit(1));
    a.charge(1_500_000).expect("fits");
    assert_eq!(sem.available_permits(), 3 * 1024 - 1 - 1465, "1 KiB body + 1,465 KiB decoded");
    let mut b = Budget::with_inflight(8 << 20, Arc::clone(&sem), admit(1));
    let err = b.charge(2_000_000).expect_err("no room left");
    assert!(matches!(err, DecodeError::Busy { retry_after_secs: 1, .. }), "{err:?}");
    assert!(err.to_string().contains("limits.max_inflight_write_bytes"), "{err}");
    let held = a.into_permit().expect("permits");
    drop(held);
    b.charge(2_000_000).expect("room again once the first request is done");
    drop(b);
    assert_eq!(sem.available_permits(), 3 * 1024);
}

/// What prost makes of a 1.0 body, validated the way the write path validates: the
/// reference the wire-level decoder must agree with.
fn v1_reference(body: &[u8]) -> Vec<(usize, Vec<Label>, Vec<(i64, u64)>)> {
    let req = prometheus::WriteRequest::decode(body).expect("prost decodes it");
    let mut out = Vec::new();
    for (i, ts) in req.timeseries.iter().enumerate() {
        let pairs = ts.labels.iter().map(|l| (&l.name[..], &l.value[..]));
        if let Ok(labels) = crate::ingest::validate::validate_labels(pairs, &Limits::default()) {
            if !ts.samples.is_empty() {
                let samples = ts.samples.iter().map(|s| (s.timestamp, canonical_float(s.value).to_bits())).collect();
                out.push((i, labels, samples));
            }
        }
    }
    out
}

fn v1_decoded(b: &Batch) -> Vec<(usize, Vec<Label>, Vec<(i64, u64)>)> {
    b.series
        .iter()
        .map(|s| {
            (
                s.index,
                s.name.labels().expect("labelled").to_labels(),
                s.samples.iter().map(|x| (x.t, x.v.to_bits())).collect(),
            )
        })
        .collect()
}

#[test]
fn v1_unknown_fields_are_skipped_and_the_last_scalar_wins() {
    let mut label = vec![0x0a, 0x08];
    label.extend_from_slice(b"__name__");
    label.extend_from_slice(&[0x12, 0x02, b'u', b'p']);
    let mut sample = vec![0x09];
    sample.extend_from_slice(&1.5f64.to_le_bytes());
    sample.extend_from_slice(&[0x10, 0x05, 0x10, 0x07]); // timestamp 5, then 7
    let mut ts = vec![0x0a, label.len() as u8];
    ts.extend_from_slice(&label);
    ts.extend_from_slice(&[0x12, sample.len() as u8]);
    ts.extend_from_slice(&sample);
    ts.extend_from_slice(&[0x78, 0x01]); // field 15, varint: unknown
    let mut body = vec![0x0a, ts.len() as u8];
    body.extend_from_slice(&ts);
    body.extend_from_slice(&[0x22, 0x01, 0x00]); // field 4 of WriteRequest: unknown
    let b = decode(Version::V1, &snappy(&body), &Limits::default()).expect("decodes");
    assert_eq!(v1_decoded(&b), v1_reference(&body));
    assert_eq!(b.series[0].samples[..], [Sample { t: 7, v: 1.5 }]);
}

#[test]
fn v1_known_field_with_the_wrong_wire_type_is_400() {
    // TimeSeries.labels (field 1) sent as a varint.
    let body = [0x0a, 0x02, 0x08, 0x01];
    assert!(prometheus::WriteRequest::decode(&body[..]).is_err(), "prost refuses it too");
    let err = decode(Version::V1, &snappy(&body), &Limits::default()).expect_err("wrong wire type");
    assert!(matches!(err, DecodeError::Invalid(_)) && err.to_string().contains("wire type"), "{err}");
}

mod v1_agrees_with_prost {
    use proptest::prelude::*;

    use super::*;

    fn label() -> impl Strategy<Value = (String, String)> {
        (prop::sample::select(vec!["__name__", "a", "UUID", "job", "", "bad-name", "__tenant__"]), "[a-z0-9é]{0,4}")
            .prop_map(|(n, v)| (n.to_owned(), v))
    }

    proptest! {
        /// Random requests (valid and invalid label sets, negative and NaN samples,
        /// exemplars, histograms, metadata) decode to the same series, samples and
        /// counts as prost's decoding validated the same way.
        #[test]
        fn random_requests_decode_identically(
            series in prop::collection::vec(
                (
                    prop::collection::vec(label(), 0..5),
                    prop::collection::vec((any::<i64>(), any::<f64>()), 0..4),
                    0..3usize,
                    0..2usize,
                ),
                0..6,
            ),
            with_metadata in any::<bool>(),
        ) {
            let req = prometheus::WriteRequest {
                timeseries: series
                    .iter()
                    .map(|(labels, samples, ex, hi)| prometheus::TimeSeries {
                        labels: labels.iter().map(|(n, v)| prometheus::Label::new(n.clone(), v.clone())).collect(),
                        samples: samples.iter().map(|&(t, v)| prometheus::Sample { value: v, timestamp: t }).collect(),
                        exemplars: vec![prometheus::Exemplar::default(); *ex],
                        histograms: vec![prometheus::Histogram::default(); *hi],
                    })
                    .collect(),
                metadata: if with_metadata {
                    vec![prometheus::MetricMetadata {
                        r#type: 1,
                        metric_family_name: "m".into(),
                        help: "h".into(),
                        unit: "u".into(),
                    }]
                } else {
                    vec![]
                },
            };
            let body = req.encode_to_vec();
            let b = decode(Version::V1, &snappy(&body), &Limits::default()).expect("decodes");
            prop_assert_eq!(v1_decoded(&b), v1_reference(&body));
            prop_assert_eq!(b.series_total, req.timeseries.len());
            prop_assert_eq!(b.samples_total, req.timeseries.iter().map(|t| t.samples.len() as u64).sum::<u64>());
            prop_assert_eq!(b.exemplars_total, req.timeseries.iter().map(|t| t.exemplars.len() as u64).sum::<u64>());
            prop_assert_eq!(b.histograms_total, req.timeseries.iter().map(|t| t.histograms.len() as u64).sum::<u64>());
            prop_assert_eq!(b.metadata.len(), usize::from(with_metadata));

            // Sent again once every valid series is remembered: the same series, samples
            // and counts, each now known by its bytes instead of its labels.
            let refs = crate::distributor::series_refs::SeriesRefs::new();
            let reader = refs.reader("t");
            let first = decode_within(Version::V1, &snappy(&body), &Limits::default(), &mut Budget::new(usize::MAX), Some(&reader))
                .expect("decodes");
            drop(reader);
            let learned: Vec<_> = first
                .series
                .iter()
                .map(|s| match &s.name {
                    SeriesName::Labels(_, Some(key)) => Ok((*key, SeriesRef { hash: s.index as u64, id: s.index as u32 })),
                    other => Err(format!("series {} decoded as {other:?}", s.index)),
                })
                .collect::<Result<_, _>>()
                .map_err(TestCaseError::fail)?;
            refs.update("t", &learned, &[]);
            let reader = refs.reader("t");
            let again = decode_within(Version::V1, &snappy(&body), &Limits::default(), &mut Budget::new(usize::MAX), Some(&reader))
                .expect("decodes");
            prop_assert_eq!(again.series.len(), first.series.len());
            for (a, f) in again.series.iter().zip(&first.series) {
                prop_assert!(matches!(a.name, SeriesName::Known { r, .. } if r.id == f.index as u32), "{:?}", a.name);
                prop_assert_eq!(a.index, f.index);
                prop_assert_eq!(&a.samples, &f.samples);
                let labels = f.name.labels().expect("labelled");
                prop_assert_eq!(describe_series(&again.raw, a), crate::ingest::validate::describe(labels.iter()));
            }
            prop_assert_eq!(again.problems.series_count(), first.problems.series_count());
            prop_assert_eq!((again.samples_total, again.exemplars_total, again.histograms_total), (first.samples_total, first.exemplars_total, first.histograms_total));
        }
    }
}

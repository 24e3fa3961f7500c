use bytes::Bytes;
use prost::Message;

use super::*;

/// The upstream schema declares label names/values as `string`; ours as `bytes`. This
/// mirror of the upstream message proves both encode to the same bytes.
#[derive(Clone, PartialEq, prost::Message)]
struct UpstreamLabel {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    value: String,
}

#[test]
fn label_bytes_fields_are_wire_identical_to_upstream_strings() {
    let ours = prometheus::Label::new("__name__", "up");
    let theirs = UpstreamLabel { name: "__name__".into(), value: "up".into() };
    assert_eq!(ours.encode_to_vec(), theirs.encode_to_vec());
    let back = UpstreamLabel::decode(ours.encode_to_vec().as_slice()).expect("decodes");
    assert_eq!(back, theirs);
}

/// A WriteRequest encoded by hand from the field numbers of the 1.0 spec; frozen so a
/// schema edit that changes a tag or wire type fails here.
#[test]
fn write_request_v1_decodes_frozen_fixture() {
    let fixture: &[u8] = &[
        0x0a, 0x1e, // field 1 (timeseries), len 30
        0x0a, 0x0e, // field 1 (labels), len 14
        0x0a, 0x08, b'_', b'_', b'n', b'a', b'm', b'e', b'_', b'_', // name "__name__"
        0x12, 0x02, b'u', b'p', // value "up"
        0x12, 0x0c, // field 2 (samples), len 12
        0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, // value 1.0 (fixed64)
        0x10, 0xe8, 0x07, // timestamp 1000 (varint)
    ];
    let req = prometheus::WriteRequest::decode(Bytes::from_static(fixture)).expect("fixture decodes");
    assert_eq!(req.timeseries.len(), 1);
    let ts = &req.timeseries[0];
    assert_eq!(ts.labels, vec![prometheus::Label::new("__name__", "up")]);
    assert_eq!(ts.samples, vec![prometheus::Sample { value: 1.0, timestamp: 1000 }]);
    assert_eq!(req.encode_to_vec(), fixture);
}

#[test]
fn decoding_from_bytes_slices_the_input_buffer() {
    let req = prometheus::WriteRequest {
        timeseries: vec![prometheus::TimeSeries {
            labels: vec![prometheus::Label::new("__name__", "gpu_util")],
            samples: vec![prometheus::Sample { value: 3.0, timestamp: 5 }],
            ..Default::default()
        }],
        metadata: vec![],
    };
    let buf = Bytes::from(req.encode_to_vec());
    let range = buf.as_ptr() as usize..buf.as_ptr() as usize + buf.len();
    let back = prometheus::WriteRequest::decode(buf.clone()).expect("decodes");
    let name_ptr = back.timeseries[0].labels[0].value.as_ptr() as usize;
    assert!(range.contains(&name_ptr), "label value should point into the request buffer");
    assert_eq!(back, req);
}

#[test]
fn v2_request_round_trips_with_symbol_table() {
    let mut st = SymbolTable::new();
    let refs = st.label_refs([("__name__", "DCGM_FI_DEV_GPU_UTIL"), ("gpu", "0")]);
    let help = st.get_ref("GPU utilization (in %).");
    assert_eq!(refs, vec![1, 2, 3, 4]);
    // Repeated strings reuse their index.
    assert_eq!(st.get_ref("gpu"), 3);
    let req = v2::Request {
        symbols: st.into_symbols(),
        timeseries: vec![v2::TimeSeries {
            labels_refs: refs,
            samples: vec![v2::Sample { value: 97.0, timestamp: 1_700_000_000_000, start_timestamp: 0 }],
            metadata: Some(v2::Metadata {
                r#type: v2::metadata::MetricType::Gauge as i32,
                help_ref: help,
                unit_ref: 0,
            }),
            ..Default::default()
        }],
    };
    assert_eq!(&req.symbols[0][..], b"", "symbol 0 must be the empty string");
    let back = v2::Request::decode(Bytes::from(req.encode_to_vec())).expect("decodes");
    assert_eq!(back, req);
}

#[test]
fn truncated_request_is_an_error_not_a_panic() {
    let req = prometheus::WriteRequest {
        timeseries: vec![prometheus::TimeSeries {
            labels: vec![prometheus::Label::new("__name__", "x")],
            ..Default::default()
        }],
        metadata: vec![],
    };
    let buf = req.encode_to_vec();
    for cut in 1..buf.len() {
        assert!(prometheus::WriteRequest::decode(&buf[..cut]).is_err(), "cut at {cut} should fail");
    }
}

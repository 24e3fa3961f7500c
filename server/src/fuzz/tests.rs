//! The fuzz targets, one proptest each (see the parent module for how they run).
//! `regenerate_fuzz_seeds` (ignored) rewrites the generated part of the corpus:
//! `cargo test --workspace -- --ignored regenerate_fuzz_seeds`.

use proptest::prelude::*;
use prost::Message;
use tessera_proto::{prometheus, v2, SymbolTable};

use super::{config, corpus, inputs};
use crate::config::Limits;
use crate::http::params;
use crate::ingest::decode::{decode, Version};

fn snappy(b: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new().compress_vec(b).expect("compress")
}

/// Limits with the decompressed size lowered so that a mutated length header cannot
/// make a single case allocate hundreds of MiB (the bound itself is what is tested).
fn fuzz_limits() -> Limits {
    Limits { max_decompressed_bytes: 4 << 20, max_inflight_write_bytes: 4 << 20, ..Limits::default() }
}

/// Remote write: the bytes as sent (snappy) and, so that mutations reach the
/// protobuf decoder and validation rather than only snappy's checks, the bytes as
/// the decompressed message.
fn remote_write(version: Version, data: &[u8]) {
    let limits = fuzz_limits();
    let _ = decode(version, data, &limits);
    if let Ok(raw) = snap::raw::Decoder::new().decompress_vec(data) {
        let _ = decode(version, &snappy(&raw), &limits);
    } else {
        let _ = decode(version, &snappy(data), &limits);
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn remote_write_1_0_bodies_never_panic(data in inputs(corpus("remote_write_v1"))) {
        remote_write(Version::V1, &data);
    }

    #[test]
    fn remote_write_2_0_bodies_never_panic(data in inputs(corpus("remote_write_v2"))) {
        remote_write(Version::V2, &data);
    }

    #[test]
    fn remote_read_bodies_never_panic(data in inputs(corpus("remote_read"))) {
        let limits = fuzz_limits();
        let _ = crate::http::read::decode_request(&data, &limits);
        if let Ok(raw) = snap::raw::Decoder::new().decompress_vec(&data) {
            let _ = crate::http::read::decode_request(&snappy(&raw), &limits);
        } else {
            let _ = crate::http::read::decode_request(&snappy(&data), &limits);
        }
    }

    /// The form parameters of the index and query APIs: `start`, `end`, `limit` and
    /// `match[]` selectors (which go through the PromQL parser).
    #[test]
    fn form_parameters_never_panic(data in inputs(corpus("form_params"))) {
        // The first byte splits the input into a URL query string and a form body.
        let (query, body) = match data.split_first() {
            Some((&k, rest)) => rest.split_at((k as usize).min(rest.len())),
            None => (&[][..], &[][..]),
        };
        let query = String::from_utf8_lossy(query);
        let p = params::Params::from_request(Some(&query), Some("application/x-www-form-urlencoded"), body);
        let _ = params::time_param(&p, "start", params::MIN_TIME_MS);
        let _ = params::required_time(&p, "end");
        let _ = params::parse_duration_ns(p.value("step"));
        let _ = params::limit(&p);
        let _ = params::metadata_limit(&p, "limit_per_metric");
        let _ = params::tsdb_limit(&p, 10, 10_000);
        let _ = params::selectors(&p, &tessera_query::TextLimits::default());
    }

    /// The PromQL entry points: the text check, parsing, printing (`format_query`),
    /// and evaluation, instant and range, over a small store with a small sample
    /// limit and a deadline. Runs on a thread with the query threads' stack size.
    #[test]
    fn promql_texts_never_panic(data in inputs(corpus("promql"))) {
        let text = String::from_utf8_lossy(&data).into_owned();
        std::thread::Builder::new()
            .stack_size(tessera_query::engine::limits::EVAL_STACK_BYTES)
            .spawn(move || promql(&text))
            .expect("spawn")
            .join()
            .map_err(|_| TestCaseError::fail("PromQL target panicked"))?;
    }
}

fn promql(text: &str) {
    use std::time::{Duration, Instant};
    use tessera_model::Labels;
    use tessera_query::{Engine, EngineOptions, QueryOptions};
    let limits = tessera_query::TextLimits::default();
    if tessera_query::engine::limits::check_text(text, &limits).is_ok() {
        if let Ok(expr) = promql_parser::parser::parse(text) {
            let _ = expr.to_string();
            let _ = expr.prettify();
        }
    }
    let mut store = tessera_query::promqltest::MemStore::new();
    for i in 0..3 {
        let labels = Labels::from_pairs([("__name__", "up"), ("job", "node"), ("instance", &i.to_string())]);
        for t in 0..20 {
            store.add(labels.clone(), t * 15_000, (i * t) as f64);
        }
    }
    let engine = Engine::new(EngineOptions { max_samples: 200_000, ..EngineOptions::default() });
    let opts =
        QueryOptions { deadline: Some(Instant::now() + Duration::from_secs(2)), cancel: None, ..Default::default() };
    let _ = engine.instant_query(&store, text, 300_000, &opts);
    let _ = engine.range_query(&store, text, 0, 300_000, 15_000, &opts);
}

/// Writes the generated seeds: typical requests of each protocol, so that mutations
/// start from valid structure. Hand-written seeds (the inputs that once crashed the
/// server) sit beside them and are not touched.
#[test]
#[ignore = "writes files under server/fuzz/corpus; run by hand"]
fn regenerate_fuzz_seeds() {
    let dir = std::path::PathBuf::from(
        &std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs tests"),
    )
    .join("fuzz/corpus");
    let write = |target: &str, name: &str, bytes: Vec<u8>| {
        let d = dir.join(target);
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join(name), bytes).expect("write seed");
    };
    let gpu = |i: usize| {
        vec![
            prometheus::Label::new("__name__", "DCGM_FI_DEV_GPU_UTIL"),
            prometheus::Label::new("gpu", i.to_string()),
            prometheus::Label::new("instance", "node-1:9400"),
            prometheus::Label::new("modelName", "NVIDIA H100 80GB HBM3"),
        ]
    };
    let v1 = prometheus::WriteRequest {
        timeseries: (0..4)
            .map(|i| prometheus::TimeSeries {
                labels: gpu(i),
                samples: vec![
                    prometheus::Sample { value: 42.0, timestamp: 1_700_000_000_000 },
                    prometheus::Sample {
                        value: f64::from_bits(tessera_model::STALE_NAN_BITS),
                        timestamp: 1_700_000_015_000,
                    },
                ],
                ..Default::default()
            })
            .collect(),
        metadata: vec![prometheus::MetricMetadata {
            r#type: 2,
            metric_family_name: "DCGM_FI_DEV_GPU_UTIL".into(),
            help: "GPU utilization (in %).".into(),
            unit: String::new(),
        }],
    };
    write("remote_write_v1", "gen-typical.bin", snappy(&v1.encode_to_vec()));
    write("remote_write_v1", "gen-typical-raw.bin", v1.encode_to_vec());

    let mut symbols = SymbolTable::new();
    let series: Vec<v2::TimeSeries> = (0..4)
        .map(|i| {
            let gpu = i.to_string();
            let refs = symbols.label_refs([
                ("Hostname", "node-1"),
                ("__name__", "DCGM_FI_DEV_FB_USED"),
                ("gpu", gpu.as_str()),
            ]);
            v2::TimeSeries {
                labels_refs: refs,
                samples: vec![v2::Sample { value: 1024.0, timestamp: 1_700_000_000_000, ..Default::default() }],
                ..Default::default()
            }
        })
        .collect();
    let v2req = v2::Request { symbols: symbols.into_symbols(), timeseries: series };
    write("remote_write_v2", "gen-typical.bin", snappy(&v2req.encode_to_vec()));
    write("remote_write_v2", "gen-typical-raw.bin", v2req.encode_to_vec());

    let read = prometheus::ReadRequest {
        queries: vec![prometheus::Query {
            start_timestamp_ms: 1_700_000_000_000,
            end_timestamp_ms: 1_700_003_600_000,
            matchers: vec![
                prometheus::LabelMatcher { r#type: 0, name: "__name__".into(), value: "up".into() },
                prometheus::LabelMatcher { r#type: 2, name: "job".into(), value: "node|dcgm".into() },
            ],
            hints: None,
        }],
        accepted_response_types: vec![0],
    };
    write("remote_read", "gen-typical.bin", snappy(&read.encode_to_vec()));
    write("remote_read", "gen-typical-raw.bin", read.encode_to_vec());
}

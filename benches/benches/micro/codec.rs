//! XOR chunk encode/decode speed and size on DCGM-like series.

use criterion::{black_box, BenchmarkId, Criterion, Throughput};
use tessera_storage::chunk::{decode_into, XorAppender};

use crate::data::{self, KINDS};

pub fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("xor_encode_120");
    for kind in KINDS {
        let s = data::series(kind, 120, 7);
        g.throughput(Throughput::Elements(120));
        g.bench_with_input(BenchmarkId::from_parameter(kind.name()), &s, |b, s| {
            b.iter(|| XorAppender::encode(black_box(s)).expect("encode"))
        });
    }
    g.finish();
    let mut g = c.benchmark_group("xor_decode_120");
    for kind in KINDS {
        let bytes = XorAppender::encode(&data::series(kind, 120, 7)).expect("encode");
        let mut out = Vec::with_capacity(120);
        g.throughput(Throughput::Elements(120));
        g.bench_with_input(BenchmarkId::from_parameter(kind.name()), &bytes, |b, bytes| {
            b.iter(|| {
                out.clear();
                decode_into(black_box(bytes), &mut out).expect("decode");
                out.len()
            })
        });
    }
    g.finish();
}

/// Bytes/sample of 120-sample chunks, averaged over 1,000 series per kind.
pub fn report_bytes_per_sample() {
    for kind in KINDS {
        let mut bytes = 0usize;
        for seed in 0..1000 {
            bytes += XorAppender::encode(&data::series(kind, 120, seed)).expect("encode").len();
        }
        println!("report: xor_chunk_bytes_per_sample kind={} value={:.3}", kind.name(), bytes as f64 / 120_000.0);
    }
}

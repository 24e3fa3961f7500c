//! XOR chunk encode/decode speed and size on DCGM-like series, for both encodings
//! (`xor` = Prometheus' layout, `xor_jitter` = what the engine writes).

use criterion::{black_box, BenchmarkId, Criterion, Throughput};
use tessera_storage::chunk::{decode_into, Encoding, XorAppender};

use crate::data::{self, KINDS};

const ENCODINGS: [(Encoding, &str); 2] = [(Encoding::Xor, "xor"), (Encoding::XorJitter, "xor_jitter")];

pub fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("chunk_encode_120");
    for (enc, ename) in ENCODINGS {
        for kind in KINDS {
            let s = data::series(kind, 120, 7);
            g.throughput(Throughput::Elements(120));
            g.bench_with_input(BenchmarkId::new(ename, kind.name()), &s, |b, s| {
                b.iter(|| XorAppender::encode(enc, black_box(s)).expect("encode"))
            });
        }
    }
    g.finish();
    let mut g = c.benchmark_group("chunk_decode_120");
    for (enc, ename) in ENCODINGS {
        for kind in KINDS {
            let bytes = XorAppender::encode(enc, &data::series(kind, 120, 7)).expect("encode");
            let mut out = Vec::with_capacity(120);
            g.throughput(Throughput::Elements(120));
            g.bench_with_input(BenchmarkId::new(ename, kind.name()), &bytes, |b, bytes| {
                b.iter(|| {
                    out.clear();
                    decode_into(black_box(bytes), enc, &mut out).expect("decode");
                    out.len()
                })
            });
        }
    }
    g.finish();
}

/// Bytes/sample of 120-sample chunks, averaged over 1,000 series per kind.
pub fn report_bytes_per_sample() {
    for (enc, ename) in ENCODINGS {
        let mut all = 0usize;
        for kind in KINDS {
            let mut bytes = 0usize;
            for seed in 0..1000 {
                bytes += XorAppender::encode(enc, &data::series(kind, 120, seed)).expect("encode").len();
            }
            all += bytes;
            println!(
                "report: chunk_bytes_per_sample encoding={ename} kind={} value={:.3}",
                kind.name(),
                bytes as f64 / 120_000.0
            );
        }
        println!("report: chunk_bytes_per_sample encoding={ename} kind=mix value={:.3}", all as f64 / 480_000.0);
    }
}

//! Chunk encode/decode speed and size on DCGM-like series, for every encoding (`xor` =
//! Prometheus' layout, `xor_jitter` = what the engine stores when decimal is not smaller,
//! `decimal` = what it stores when smaller; its encode is the cut-time conversion from
//! XOR-jitter, `chunk::compact_form`; `open` = the head's open chunk, appended one sample
//! at a time, `chunk::OpenAppender`).

use criterion::{black_box, BenchmarkId, Criterion, Throughput};
use tessera_storage::chunk::{compact_form, decimal, decode_into, stored_form, Encoding, OpenAppender, XorAppender};

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
    for kind in KINDS {
        let x = XorAppender::encode(Encoding::XorJitter, &data::series(kind, 120, 7)).expect("encode");
        let mut scratch = Vec::with_capacity(120);
        g.throughput(Throughput::Elements(120));
        g.bench_with_input(BenchmarkId::new("decimal_from_xor_jitter", kind.name()), &x, |b, x| {
            b.iter(|| compact_form(black_box(x), Encoding::XorJitter, &mut scratch))
        });
    }
    for kind in KINDS {
        let s = data::series(kind, 120, 7);
        g.throughput(Throughput::Elements(120));
        g.bench_with_input(BenchmarkId::new("open", kind.name()), &s, |b, s| {
            b.iter(|| OpenAppender::from_samples(black_box(s)).expect("append").len())
        });
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
    for kind in KINDS {
        let bytes = decimal::encode(&data::series(kind, 120, 7)).expect("decimal form");
        let mut out = Vec::with_capacity(120);
        g.throughput(Throughput::Elements(120));
        g.bench_with_input(BenchmarkId::new("decimal", kind.name()), &bytes, |b, bytes| {
            b.iter(|| {
                out.clear();
                decode_into(black_box(bytes), Encoding::Decimal, &mut out).expect("decode");
                out.len()
            })
        });
    }
    for kind in KINDS {
        let open = OpenAppender::from_samples(&data::series(kind, 120, 7)).expect("append");
        let (enc, bytes) = (open.encoding(), open.bytes().to_vec());
        let mut out = Vec::with_capacity(120);
        g.throughput(Throughput::Elements(120));
        g.bench_with_input(BenchmarkId::new("open", kind.name()), &bytes, |b, bytes| {
            b.iter(|| {
                out.clear();
                decode_into(black_box(bytes), enc, &mut out).expect("decode");
                out.len()
            })
        });
    }
    g.finish();
}

/// Bytes/sample of 120-sample chunks, averaged over 1,000 series per kind, for every
/// encoding and for what the engine stores (the decimal form when smaller, else
/// XOR-jitter).
pub fn report_bytes_per_sample() {
    for (enc, ename) in ENCODINGS {
        report_chunk_bytes(ename, |s| XorAppender::encode(enc, s).expect("encode").len());
    }
    report_chunk_bytes("open", |s| OpenAppender::from_samples(s).expect("append").bytes().len());
    report_chunk_bytes("stored", |s| stored_form(s).expect("encode").1.len());
}

/// Prints bytes/sample per kind and over all kinds of the chunks `chunk_bytes` sizes.
fn report_chunk_bytes(name: &str, mut chunk_bytes: impl FnMut(&[tessera_model::Sample]) -> usize) {
    let mut all = 0usize;
    for kind in KINDS {
        let bytes: usize = (0..1000).map(|seed| chunk_bytes(&data::series(kind, 120, seed))).sum();
        all += bytes;
        println!(
            "report: chunk_bytes_per_sample encoding={name} kind={} value={:.3}",
            kind.name(),
            bytes as f64 / 120_000.0
        );
    }
    println!("report: chunk_bytes_per_sample encoding={name} kind=mix value={:.3}", all as f64 / 480_000.0);
}

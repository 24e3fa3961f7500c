//! `tessera-bench chunk-bytes`: where the stored chunk bytes of a generated dataset go,
//! per metric, without a server. Each series' samples are cut into chunks by the head's
//! rule (`EngineConfig::cuts_chunk`, default config), each chunk is encoded in the form
//! the engine stores (decimal when smaller than XOR-jitter,
//! `tessera_storage::chunk::stored_form`), and its bytes are split by encoding the same
//! chunk again with one part made free:
//!
//! - timestamps: the chunk minus the same chunk on a perfect grid (first timestamp, mean
//!   interval), whose timestamp stream costs no bits;
//! - values: the chunk minus the same chunk with every value equal to the first;
//! - the rest (headers, stream widths, exception lists' framing) is what remains.
//!
//! Both differences are measured on the stored form, so for a chunk stored as XOR they
//! are XOR's costs. Keys (20 bytes per chunk) and RocksDB's compression are not in these
//! numbers; `disk-usage` shows what RocksDB made of the whole.
//!
//! Two more columns show what the same chunk costs in memory while it is the head's open
//! chunk, at its fullest (just before the cut): the head's open form
//! (`chunk::OpenAppender`: decimal changes as bytes, XOR for a chunk whose values have no
//! decimal form) and, for comparison, the Gorilla XOR the head kept before it
//! (`Encoding::DEFAULT`).

use std::collections::HashMap;
use std::fmt::Write as _;

use bytes::Bytes;
use tessera_model::Sample;
use tessera_storage::chunk::{stored_form, Encoding, OpenAppender, XorAppender};
use tessera_storage::EngineConfig;

use crate::fleet::{Fleet, FleetConfig};

/// Bytes of one group of chunks (a metric, or all of them).
#[derive(Debug, Default, Clone)]
struct Tally {
    series: u64,
    samples: u64,
    chunks: u64,
    decimal_chunks: u64,
    bytes: u64,
    timestamp_bytes: i64,
    value_bytes: i64,
    /// The chunk as the head's open chunk, and as XOR (see the module doc).
    open_bytes: u64,
    xor_bytes: u64,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.series += o.series;
        self.samples += o.samples;
        self.chunks += o.chunks;
        self.decimal_chunks += o.decimal_chunks;
        self.bytes += o.bytes;
        self.timestamp_bytes += o.timestamp_bytes;
        self.value_bytes += o.value_bytes;
        self.open_bytes += o.open_bytes;
        self.xor_bytes += o.xor_bytes;
    }
}

/// The stored size of a chunk and whether it is decimal.
fn stored_len(samples: &[Sample]) -> anyhow::Result<(usize, bool)> {
    let (enc, bytes) = stored_form(samples)?;
    Ok((bytes.len(), enc == Encoding::Decimal))
}

fn chunk_tally(samples: &[Sample]) -> anyhow::Result<Tally> {
    let (len, is_decimal) = stored_len(samples)?;
    let n = samples.len();
    let (t0, tn) = (samples[0].t, samples[n - 1].t);
    let step = if n > 1 { (tn - t0) / (n as i64 - 1) } else { 0 };
    let grid: Vec<Sample> =
        samples.iter().enumerate().map(|(i, s)| Sample { t: t0 + i as i64 * step, v: s.v }).collect();
    let flat: Vec<Sample> = samples.iter().map(|s| Sample { t: s.t, v: samples[0].v }).collect();
    let (grid_len, _) = stored_len(&grid)?;
    let (flat_len, _) = stored_len(&flat)?;
    let open = OpenAppender::from_samples(samples)?;
    let xor = XorAppender::encode(Encoding::DEFAULT, samples)?;
    Ok(Tally {
        series: 0,
        samples: n as u64,
        chunks: 1,
        decimal_chunks: u64::from(is_decimal),
        bytes: len as u64,
        timestamp_bytes: len as i64 - grid_len as i64,
        value_bytes: len as i64 - flat_len as i64,
        open_bytes: open.bytes().len() as u64,
        xor_bytes: xor.len() as u64,
    })
}

/// Generates `cfg`'s dataset and renders the per-metric breakdown (markdown), the
/// `top` metrics by bytes first.
pub fn render(cfg: FleetConfig, top: usize) -> anyhow::Result<String> {
    let engine = EngineConfig::default();
    let mut fleet = Fleet::new(cfg).map_err(anyhow::Error::msg)?;
    // Series by label hash (equal labels = one stored series, as in the engine).
    let mut series: HashMap<u64, (Bytes, Vec<Sample>)> = HashMap::new();
    let mut round = Vec::new();
    while fleet.next_round(&mut round) {
        for s in round.drain(..) {
            let e = series
                .entry(s.series.hash)
                .or_insert_with(|| (Bytes::copy_from_slice(s.series.metric_name()), Vec::new()));
            e.1.push(Sample { t: s.ts, v: s.value });
        }
    }
    let mut by_metric: HashMap<Bytes, Tally> = HashMap::new();
    for (_, (metric, mut samples)) in series {
        samples.sort_by_key(|s| s.t);
        samples.dedup_by_key(|s| s.t);
        let m = by_metric.entry(metric).or_default();
        m.series += 1;
        let mut start = 0;
        while start < samples.len() {
            let mut end = start + 1;
            while end < samples.len() && !engine.cuts_chunk(end - start, samples[start].t, samples[end].t) {
                end += 1;
            }
            m.add(&chunk_tally(&samples[start..end])?);
            start = end;
        }
    }
    let mut rows: Vec<(Bytes, Tally)> = by_metric.into_iter().collect();
    rows.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then_with(|| a.0.cmp(&b.0)));
    let mut all = Tally::default();
    rows.iter().for_each(|(_, t)| all.add(t));

    let mut out = String::new();
    let per = |x: f64, t: &Tally| x / t.samples.max(1) as f64;
    writeln!(
        out,
        "{} series, {} samples, {} chunks ({:.1} samples each, {:.1} % decimal), {:.3} B/sample in chunk values \
         (+ {:.3} for 20-byte keys, before RocksDB's compression)\n",
        all.series,
        all.samples,
        all.chunks,
        all.samples as f64 / all.chunks.max(1) as f64,
        100.0 * all.decimal_chunks as f64 / all.chunks.max(1) as f64,
        per(all.bytes as f64, &all),
        per(20.0 * all.chunks as f64, &all),
    )?;
    writeln!(
        out,
        "| metric | series | samples | samples/chunk | decimal % | B/sample | timestamps | values | rest | share of bytes \
         | open chunk B/sample | as XOR |"
    )?;
    writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    let mut row = |name: &str, t: &Tally| {
        let rest = t.bytes as i64 - t.timestamp_bytes - t.value_bytes;
        writeln!(
            out,
            "| {name} | {} | {} | {:.1} | {:.1} | {:.3} | {:.3} | {:.3} | {:.3} | {:.1} % | {:.3} | {:.3} |",
            t.series,
            t.samples,
            t.samples as f64 / t.chunks.max(1) as f64,
            100.0 * t.decimal_chunks as f64 / t.chunks.max(1) as f64,
            per(t.bytes as f64, t),
            per(t.timestamp_bytes as f64, t),
            per(t.value_bytes as f64, t),
            per(rest as f64, t),
            100.0 * t.bytes as f64 / all.bytes.max(1) as f64,
            per(t.open_bytes as f64, t),
            per(t.xor_bytes as f64, t),
        )
    };
    let mut others = Tally::default();
    for (i, (name, t)) in rows.iter().enumerate() {
        if i < top {
            row(&String::from_utf8_lossy(name), t)?;
        } else {
            others.add(t);
        }
    }
    if others.chunks > 0 {
        row(&format!("{} other metrics", rows.len() - top), &others)?;
    }
    row("**all**", &all)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A regular, constant chunk costs almost nothing in timestamps or values; jitter
    /// and noise show up in their own columns.
    #[test]
    fn jitter_costs_timestamp_bytes_and_noise_costs_value_bytes() {
        let regular: Vec<Sample> = (0..120).map(|i| Sample { t: 1_000_000 + i * 30_000, v: 5.0 }).collect();
        let t = chunk_tally(&regular).unwrap();
        assert_eq!((t.timestamp_bytes, t.value_bytes, t.decimal_chunks), (0, 0, 1));
        // Uniform pseudo-random jitter of 32 ms and values of 32 levels: about 5 bits each.
        let h = |i: i64| ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 59) as i64;
        let jittered: Vec<Sample> =
            (0..120).map(|i| Sample { t: 1_000_000 + i * 30_000 + h(i) - 16, v: (3 * h(i + 1000)) as f64 }).collect();
        let t = chunk_tally(&jittered).unwrap();
        assert!(t.timestamp_bytes >= 40, "3 bits or more per jittered timestamp: {t:?}");
        assert!(t.value_bytes >= 40, "3 bits or more per noisy value: {t:?}");
        assert!(t.bytes as i64 > t.timestamp_bytes + t.value_bytes, "{t:?}");
    }

    /// The open-chunk columns: a value held on jittered scrapes takes about a byte a
    /// sample in the head's open form; values without a decimal form fall back to XOR,
    /// byte for byte.
    #[test]
    fn open_chunk_columns_measure_the_open_form_and_xor() {
        let held: Vec<Sample> =
            (0..120).map(|i| Sample { t: 1_000_000 + i * 15_000 + (i * 7_919) % 11 - 5, v: 1.0 }).collect();
        let t = chunk_tally(&held).unwrap();
        assert!((120..=136).contains(&t.open_bytes) && t.xor_bytes > 0, "{t:?}");
        // Square roots carry 17 significant digits: no decimal form (`m / 10^k` with
        // `m` below 2^53).
        let roots: Vec<Sample> =
            (0..120).map(|i| Sample { t: 1_000_000 + i * 15_000, v: ((i % 7) as f64 + 2.0).sqrt() }).collect();
        let t = chunk_tally(&roots).unwrap();
        assert_eq!(t.open_bytes, t.xor_bytes, "{t:?}");
    }
}

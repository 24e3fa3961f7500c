//! `select`: merges head chunks with persisted chunks, decoding only chunks that
//! overlap the query range, and de-duplicates overlapping samples.

use roaring::RoaringBitmap;
use rocksdb::DB;

use crate::chunk::{Encoding, XorIter};
use crate::db::{CF_CHUNKS, CF_SERIES};
use crate::error::{Error, Result};
use crate::head::Head;
use crate::interrupt::Interrupt;
use crate::keys;
use crate::labels_codec;
use crate::types::SeriesSamples;
use tessera_model::Sample;

/// What `select` copies out of the head under its lock (bytes only; decoding happens
/// after the lock is released so a big query does not stall appends).
pub struct SeriesSnap {
    id: u32,
    labels: Box<[u8]>,
    /// `(mint, encoding, chunk bytes)` of head chunks overlapping the range, in time order.
    head_chunks: Vec<(i64, Encoding, Vec<u8>)>,
}

impl SeriesSnap {
    /// The series' canonical label encoding.
    pub fn labels(&self) -> &[u8] {
        &self.labels
    }
}

/// Copies the head chunks of the series in `ids` that are in the head; returns them and
/// the ids that are not (evicted or never loaded: all their data is in RocksDB).
pub fn snapshot(head: &Head, ids: &RoaringBitmap, mint: i64, maxt: i64) -> (Vec<SeriesSnap>, Vec<u32>) {
    // No interrupt check here: this runs under the head lock and only copies bytes.
    let mut out = Vec::with_capacity(ids.len() as usize);
    let mut not_in_head = Vec::new();
    for id in ids {
        let Some(s) = head.get(id) else {
            not_in_head.push(id);
            continue;
        };
        let mut head_chunks = Vec::new();
        for c in &s.recent {
            if c.mint <= maxt && c.maxt >= mint {
                head_chunks.push((c.mint, c.enc, c.bytes.clone()));
            }
        }
        if let Some(o) = &s.open {
            if !o.is_empty() && s.open_mint <= maxt && o.last_t() >= mint {
                head_chunks.push((s.open_mint, o.encoding(), o.bytes().to_vec()));
            }
        }
        out.push(SeriesSnap { id, labels: s.labels.clone(), head_chunks });
    }
    (out, not_in_head)
}

/// Snapshots of series that are not in the head: labels from the `series` column
/// family, no head chunks. Ids without a record (deleted by retention after the index
/// was read) are skipped.
pub fn stored_snaps(db: &DB, ids: &[u32], stop: &Interrupt) -> Result<Vec<SeriesSnap>> {
    let cf = db.cf_handle(CF_SERIES).ok_or_else(|| Error::corrupt("rocksdb", "missing series column family"))?;
    let mut out = Vec::with_capacity(ids.len());
    for batch in ids.chunks(1024) {
        stop.check("series listing")?;
        let ks: Vec<[u8; 4]> = batch.iter().map(|&id| keys::series_key(id)).collect();
        // Ids come from a bitmap, ascending, so the big-endian keys are sorted.
        let got = db.batched_multi_get_cf(cf, &ks, true);
        for (&id, v) in batch.iter().zip(got) {
            let Some(v) = v.map_err(Error::rocks("get series"))? else { continue };
            labels_codec::decode_label_set(&v)?;
            out.push(SeriesSnap { id, labels: Box::from(&*v), head_chunks: Vec::new() });
        }
    }
    Ok(out)
}

/// Decodes `chunk`'s samples within `[mint, maxt]` onto `out`.
fn decode_range(chunk: &[u8], enc: Encoding, mint: i64, maxt: i64, out: &mut Vec<Sample>) -> Result<()> {
    for s in XorIter::new(chunk, enc) {
        let s = s?;
        if s.t > maxt {
            break;
        }
        if s.t >= mint {
            out.push(s);
        }
    }
    Ok(())
}

/// Reads the samples of every snapshotted series. A chunk that cannot be read fails the
/// call with an error naming the series (labels) and the cause; `stop` is checked per
/// series.
pub fn select(
    db: &DB,
    snaps: Vec<SeriesSnap>,
    mint: i64,
    maxt: i64,
    lookback: i64,
    stop: &Interrupt,
) -> Result<Vec<SeriesSamples>> {
    let cf = db.cf_handle(CF_CHUNKS).ok_or_else(|| Error::corrupt("rocksdb", "missing chunks column family"))?;
    let mut it = db.raw_iterator_cf(cf);
    let mut result = Vec::with_capacity(snaps.len());
    for snap in snaps {
        stop.check("select")?;
        let samples = series_samples(&mut it, &snap, mint, maxt, lookback).map_err(|e| unreadable(&snap.labels, &e))?;
        if samples.is_empty() {
            continue;
        }
        result.push(SeriesSamples { labels: labels_codec::decode_label_set(&snap.labels)?, samples });
    }
    result.sort_by(|a, b| a.labels.cmp(&b.labels));
    Ok(result)
}

/// The error for a series whose stored chunks cannot be read: names the series and the
/// cause (e.g. RocksDB's "block checksum mismatch ... in file 000012.sst").
pub fn unreadable(labels: &[u8], e: &Error) -> Error {
    Error::corrupt("chunks", format!("chunks of series {} unreadable: {}", describe(labels), e.chain()))
}

/// `{a="1", b="2"}` for an encoded label set (or a placeholder if it does not decode).
pub fn describe(labels: &[u8]) -> String {
    match labels_codec::decode_labels(labels) {
        Ok(ls) => {
            let parts: Vec<String> = ls.iter().map(|l| format!("{}={:?}", l.name, l.value)).collect();
            format!("{{{}}}", parts.join(", "))
        }
        Err(_) => "<undecodable labels>".to_string(),
    }
}

fn series_samples(
    it: &mut rocksdb::DBRawIterator<'_>,
    snap: &SeriesSnap,
    mint: i64,
    maxt: i64,
    lookback: i64,
) -> Result<Vec<Sample>> {
    let mut samples: Vec<Sample> = Vec::new();
    // Persisted chunks: keys are (id, chunk mint), so one seek finds the first chunk
    // that can overlap; each chunk's maxt is in its value header, so chunks ending
    // before `mint` are skipped without decoding.
    it.seek(keys::chunk_key(snap.id, mint.saturating_sub(lookback)));
    let upper = keys::chunk_key(snap.id, maxt);
    let mut in_order = true;
    while it.valid() {
        let (Some(k), Some(v)) = (it.key(), it.value()) else { break };
        if k > upper.as_slice() {
            break;
        }
        let (_, cmint) = keys::parse_chunk_key(k)?;
        let (enc, cmaxt, bytes) = keys::decode_chunk_value(cmint, v)?;
        // A chunk also held in the head is read from the head (it may be newer).
        let in_head = snap.head_chunks.iter().any(|(m, _, _)| *m == cmint);
        if cmaxt >= mint && !in_head {
            let before = samples.len();
            decode_range(bytes, enc, mint, maxt, &mut samples)?;
            if before > 0 && samples.len() > before && samples[before].t <= samples[before - 1].t {
                in_order = false;
            }
        }
        it.next();
    }
    it.status().map_err(Error::rocks("read chunks"))?;
    for (_, enc, bytes) in &snap.head_chunks {
        let before = samples.len();
        decode_range(bytes, *enc, mint, maxt, &mut samples)?;
        if before > 0 && samples.len() > before && samples[before].t <= samples[before - 1].t {
            in_order = false;
        }
    }
    if !in_order {
        // Overlapping chunks (e.g. a WAL replay that re-cut samples already on disk):
        // order by time; for equal times keep the later source (the head).
        samples.sort_by_key(|s| s.t);
        let mut dedup: Vec<Sample> = Vec::with_capacity(samples.len());
        for s in samples {
            match dedup.last_mut() {
                Some(last) if last.t == s.t => *last = s,
                _ => dedup.push(s),
            }
        }
        samples = dedup;
    }
    Ok(samples)
}

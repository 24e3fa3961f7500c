use crate::chunk::Encoding;
use crate::{Engine, EngineConfig, Interrupt, SeriesAppend};
use tessera_model::{Label, MatchOp, Matcher, Sample};

const T0: i64 = 1_700_000_000_000;

fn stored(e: &Engine, name: &str) -> (Vec<Encoding>, Vec<Sample>) {
    let ms = [Matcher::new("__name__", MatchOp::Equal, name).expect("matcher")];
    let chunks = e.select_chunks_until(&ms, i64::MIN, i64::MAX, &Interrupt::none()).expect("chunks");
    let encs = chunks[0].chunks.iter().map(|c| c.encoding).collect();
    let samples = e.select(&ms, i64::MIN, i64::MAX).expect("select").remove(0).samples;
    (encs, samples)
}

fn bits(s: &[Sample]) -> Vec<(i64, u64)> {
    s.iter().map(|x| (x.t, x.v.to_bits())).collect()
}

#[test]
fn decimal_chunks_are_stored_when_smaller_and_read_back_bit_exact_after_reopen() {
    let d = tempfile::tempdir().expect("tempdir");
    let cfg = EngineConfig { memtable_bytes: 1 << 20, ..EngineConfig::default() };
    let e = Engine::open(d.path(), cfg.clone()).expect("open");
    let ts = |i: i64| T0 + i * 15_000 + (i * 7) % 11 - 5;
    let power: Vec<Sample> =
        (0..240).map(|i| Sample::new(ts(i), (250_000 + (i * 7_919) % 3_000) as f64 / 1e3)).collect();
    // The last chunk ends with a staleness marker: listed by position in a decimal chunk.
    let mut gone: Vec<Sample> = (0..200).map(|i| Sample::new(ts(i), (i % 5) as f64)).collect();
    gone.push(Sample::new(ts(200), f64::from_bits(tessera_model::STALE_NAN_BITS)));
    for (name, s) in [("power", &power), ("gone", &gone)] {
        let l = vec![Label::new("__name__", name)];
        e.append(&[SeriesAppend { labels: &l, samples: s }]).expect("append");
    }
    e.close().expect("close");

    let e = Engine::open(d.path(), cfg).expect("reopen");
    let (encs, back) = stored(&e, "power");
    assert_eq!(encs, vec![Encoding::Decimal, Encoding::Decimal]);
    assert_eq!(bits(&back), bits(&power));
    let (encs, back) = stored(&e, "gone");
    assert_eq!(encs, vec![Encoding::Decimal, Encoding::Decimal]);
    assert_eq!(bits(&back), bits(&gone));
}

/// A batch writes its chunks in key order (for the memtable's layout, which no read
/// can see), whatever order they were cut in; a put and a delete of one key keep their
/// order: the later one wins, as it came.
#[test]
fn a_batch_keeps_a_keys_put_and_delete_in_order_among_chunks_cut_out_of_key_order() {
    use std::sync::atomic::AtomicI64;
    use std::sync::Arc;

    use crate::db::{self, Background, CF_CHUNKS};
    use crate::head::ChunkSink;
    use crate::keys;
    use crate::persist::{Batch, PostingsFolds};

    let d = tempfile::tempdir().expect("tempdir");
    let bg = Arc::new(Background::new(std::path::Path::new("persist-test")));
    let dbh =
        db::open(&d.path().join("db"), &EngineConfig::default(), Arc::new(AtomicI64::new(i64::MIN)), bg).expect("db");
    let mut batch = Batch::new(&dbh).expect("batch");
    let chunk = |v: f64| crate::chunk::XorAppender::encode(Encoding::DEFAULT, &[Sample::new(T0, v)]).expect("encode");
    // Cut as a request of two targets brings them: target by target, each metric's id.
    for (id, mint) in [(7, T0), (3, T0), (9, T0), (7, T0 - 10), (3, T0 - 10)] {
        batch.put_chunk(id, Encoding::DEFAULT, mint, mint, &chunk(id as f64), true);
    }
    batch.put_chunk(5, Encoding::DEFAULT, T0, T0, &chunk(5.0), true);
    batch.delete_chunk(5, T0);
    batch.delete_chunk(9, T0);
    batch.put_chunk(9, Encoding::DEFAULT, T0, T0, &chunk(90.0), true);
    assert_eq!(batch.write(&mut PostingsFolds::default()).expect("write"), 7);

    let cf = dbh.cf_handle(CF_CHUNKS).expect("chunks cf");
    let stored: Vec<((u32, i64), f64)> = dbh
        .iterator_cf(cf, rocksdb::IteratorMode::Start)
        .map(|kv| {
            let (k, v) = kv.expect("read");
            let (id, mint) = keys::parse_chunk_key(&k).expect("chunk key");
            let (enc, _, bytes) = keys::decode_chunk_value(mint, &v).expect("chunk value");
            ((id, mint), crate::chunk::decode(bytes, enc).expect("decode")[0].v)
        })
        .collect();
    let want = [((3, T0 - 10), 3.0), ((3, T0), 3.0), ((7, T0 - 10), 7.0), ((7, T0), 7.0), ((9, T0), 90.0)];
    assert_eq!(stored, want);
}

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

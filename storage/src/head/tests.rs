//! Head bookkeeping: hash lookups stay right when series leave, colliding ones included.

use super::*;
use tessera_model::Label;

fn series(name: &str) -> (u64, Box<[u8]>) {
    let mut enc = Vec::new();
    labels_codec::encode_labels(&[Label::new("__name__", name)], &mut enc);
    (labels_codec::labels_hash(&enc), enc.into_boxed_slice())
}

#[test]
fn removing_a_series_forgets_its_hash_and_keeps_the_next_id() {
    let mut h = Head::new();
    let (ha, a) = series("a");
    let (hb, b) = series("b");
    h.insert(0, ha, MemSeries::new(a.clone(), true));
    h.insert(1, hb, MemSeries::new(b.clone(), true));
    assert!(h.remove(0).is_some());
    assert_eq!(h.lookup(ha, &a), None);
    assert_eq!(h.lookup(hb, &b), Some(1));
    assert_eq!(h.next_id, 2);
    assert!(h.series_on_disk_only, "a removed series now lives only on disk");
    assert!(h.by_hash.len() == 1 && h.index.len() == 1);
}

#[test]
fn removing_the_primary_of_a_hash_collision_promotes_the_other_series() {
    // Two label sets filed under one hash (what an xxh3 collision looks like): `remove`
    // recomputes the hash from the labels, so file both under `a`'s real hash.
    let (ha, a) = series("a");
    let (_, b) = series("b");
    let mut h = Head::new();
    h.insert(3, ha, MemSeries::new(a.clone(), true));
    h.insert(7, ha, MemSeries::new(b.clone(), true));
    assert_eq!((h.lookup(ha, &a), h.lookup(ha, &b)), (Some(3), Some(7)));
    assert!(h.remove(3).is_some());
    assert_eq!(h.lookup(ha, &b), Some(7));
    assert_eq!(h.lookup(ha, &a), None);
    assert!(h.collisions.is_empty());
}

#[test]
fn heap_estimate_shrinks_after_mass_eviction() {
    let mut h = Head::new();
    for i in 0..10_000u32 {
        let (hash, enc) = series(&format!("s{i}"));
        h.insert(i, hash, MemSeries::new(enc, true));
    }
    let full = h.heap_bytes();
    for i in 0..9_900u32 {
        h.remove(i);
    }
    h.shrink();
    assert!(h.heap_bytes() * 20 < full, "{} vs {full}", h.heap_bytes());
}

#[test]
fn evicted_slots_are_reused_and_compaction_keeps_every_lookup_right() {
    let mut h = Head::new();
    let all: Vec<(u64, Box<[u8]>)> = (0..5_000).map(|i| series(&format!("s{i}"))).collect();
    for (i, (hash, enc)) in all.iter().enumerate() {
        h.insert(i as u32, *hash, MemSeries::new(enc.clone(), true));
    }
    let pages = h.slots.pages.len();
    // Churn: a series leaves, a new one comes; the head does not grow.
    for i in 0..1_000u32 {
        h.remove(i);
        let (hash, enc) = series(&format!("new{i}"));
        h.insert(10_000 + i, hash, MemSeries::new(enc, true));
    }
    assert_eq!((h.len(), h.slots.pages.len()), (5_000, pages));
    // Mass eviction, then compaction into fewer pages.
    for i in 1_000..4_900u32 {
        h.remove(i);
    }
    h.shrink();
    assert!(h.slots.pages.len() < pages, "{} pages, had {pages}", h.slots.pages.len());
    for (i, (hash, enc)) in all.iter().enumerate() {
        let want = (i >= 4_900).then_some(i as u32);
        assert_eq!(h.lookup(*hash, enc), want, "series s{i}");
        assert_eq!(h.get(i as u32).is_some(), i >= 4_900);
    }
    for i in 0..1_000u32 {
        let (hash, enc) = series(&format!("new{i}"));
        assert_eq!(h.lookup(hash, &enc), Some(10_000 + i));
    }
    assert_eq!(h.iter().count(), 1_100);
}

#[test]
fn new_series_of_one_metric_get_consecutive_ids_however_metrics_interleave() {
    let mut h = Head::new();
    // Four metrics of one target arrive in turns, as a scrape writes them.
    let mut ids: Vec<Vec<u32>> = vec![Vec::new(); 4];
    for _gpu in 0..ID_RUN + 10 {
        for (m, got) in ids.iter_mut().enumerate() {
            got.push(h.new_id(format!("field{m}").as_bytes()).expect("ids left"));
        }
    }
    for got in &ids {
        // Consecutive within a run, and the next run is a fresh one above everything.
        assert!(got.windows(2).take(ID_RUN as usize - 1).all(|w| w[1] == w[0] + 1), "{got:?}");
        assert_eq!(got[ID_RUN as usize] % ID_RUN, 0, "a full run continues in a new one");
    }
    let mut all: Vec<u32> = ids.concat();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 4 * (ID_RUN as usize + 10), "no id given twice");
    assert!(all.iter().all(|&id| id < h.next_id), "next_id stays above every id given");
}

#[test]
fn new_ids_are_single_past_the_run_limit_and_none_when_exhausted() {
    let mut h = Head::new();
    for m in 0..MAX_ID_RUNS {
        h.new_id(format!("m{m}").as_bytes()).expect("ids left");
    }
    let before = h.next_id;
    assert_eq!(h.new_id(b"one_more"), Some(before), "a name past the limit gets one id");
    assert_eq!(h.new_id(b"one_more"), Some(before + 1));
    assert_eq!(h.next_id, before + 2);
    assert_eq!(h.new_id(b"m0"), Some(1), "names with a run keep using it");

    let mut h = Head::new();
    h.next_id = u32::MAX - 3;
    assert_eq!(h.new_id(b"x"), None, "a run that would pass u32::MAX is not opened");
}

/// A series with a newest sample at `t`.
fn ended(labels: Box<[u8]>, t: i64) -> MemSeries {
    let mut s = MemSeries::new(labels, true);
    (s.max_t, s.has_max) = (t, true);
    s
}

#[test]
fn evicted_series_keep_labels_and_end_until_they_come_back_retention_or_the_budget() {
    let mut h = Head::new();
    let (ha, a) = series("a");
    let (hb, b) = series("b");
    h.insert(0, ha, ended(a.clone(), 100));
    h.insert(1, hb, MemSeries::new(b.clone(), true));
    h.evict(0);
    h.evict(1);
    assert!(h.get(0).is_none());
    assert_eq!(h.evicted(0), Some((&a[..], 100)));
    assert_eq!(h.evicted(1), None, "without a sample its end is unknown: not kept");
    // Back in the head (a new sample loaded it again): forgotten, and evicted again with
    // its new end.
    h.insert(0, ha, ended(a.clone(), 200));
    assert_eq!(h.evicted(0), None);
    h.evict(0);
    assert_eq!(h.evicted(0), Some((&a[..], 200)));
    // Retention's removal forgets it too.
    h.insert(0, ha, ended(a.clone(), 300));
    h.evict(0);
    assert!(h.remove(0).is_none());
    assert_eq!(h.evicted(0), None);
    // The oldest evictions leave first once the budget is full.
    let per = a.len() + Evicted::ENTRY;
    let n = Evicted::BUDGET / per + 100;
    for i in 10..10 + n as u32 {
        h.insert(i, ha + u64::from(i), ended(a.clone(), i64::from(i)));
        h.evict(i);
    }
    assert_eq!(h.evicted(10), None);
    assert!(h.evicted(10 + n as u32 - 1).is_some());
    assert!(h.evicted.bytes <= Evicted::BUDGET);
    assert!(h.evicted.order.len() <= 2 * h.evicted.series.len() + 1024);
}

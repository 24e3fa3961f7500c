use super::*;

fn r(id: u32) -> SeriesRef {
    SeriesRef { hash: u64::from(id) * 7, id }
}

#[test]
fn a_learned_series_is_found_by_its_bytes_and_only_for_its_tenant() {
    let refs = SeriesRefs::new();
    let a = refs.reader("a");
    let (key, found) = a.get(b"labels of x");
    assert_eq!(found, None, "nothing learned yet");
    drop(a);
    refs.update("a", &[(key, r(3))], &[]);
    assert_eq!(refs.reader("a").get(b"labels of x"), (key, Some(r(3))));
    assert_eq!(refs.reader("a").get(b"labels of y").1, None, "other bytes");
    assert_eq!(refs.reader("b").get(b"labels of x").1, None, "other tenant");
}

#[test]
fn a_forgotten_series_is_not_found() {
    let refs = SeriesRefs::new();
    let key = refs.key(b"x");
    refs.update("a", &[(key, r(1))], &[]);
    refs.update("a", &[], &[key]);
    assert_eq!(refs.reader("a").get(b"x").1, None);
    assert!(refs.is_empty());
}

#[test]
fn keys_differ_between_processes() {
    // A per-process seed: a sender cannot precompute colliding label sets.
    assert_ne!(SeriesRefs::new().key(b"x"), SeriesRefs::new().key(b"x"));
}

#[test]
fn series_unused_for_two_epochs_are_dropped_and_used_ones_kept() {
    let refs = SeriesRefs::with_clock(Clock::Manual(AtomicU32::new(0)));
    let set_epoch = |e: u32| {
        if let Clock::Manual(epoch) = &refs.clock {
            epoch.store(e, Ordering::Relaxed);
        }
    };
    let (used, idle) = (refs.key(b"used"), refs.key(b"idle"));
    refs.update("a", &[(used, r(1)), (idle, r(2))], &[]);
    set_epoch(1);
    refs.sweep_if_due();
    assert_eq!(refs.reader("a").get(b"idle").1, Some(r(2)), "unused for one epoch: kept");
    // `idle` was just used in epoch 1; from here on only `used` is.
    for e in 2..=4 {
        set_epoch(e);
        assert_eq!(refs.reader("a").get(b"used").1, Some(r(1)));
        refs.sweep_if_due();
    }
    assert_eq!(refs.reader("a").get(b"idle").1, None, "unused for two epochs: dropped");
    assert_eq!(refs.reader("a").get(b"used").1, Some(r(1)));
    assert_eq!(refs.len(), 1, "memory follows the series in use");
}

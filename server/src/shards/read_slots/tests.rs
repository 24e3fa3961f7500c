use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::shards::ShardErrorKind;

#[test]
fn a_slot_is_handed_on_when_the_holder_drops_it() {
    let slots = Arc::new(ReadSlots::new(1));
    let held = slots.acquire(&Interrupt::none()).expect("free slot");
    assert_eq!(slots.in_use(), 1);
    let s2 = Arc::clone(&slots);
    let waiter = std::thread::spawn(move || {
        let started = Instant::now();
        let _slot = s2.acquire(&Interrupt::none()).expect("slot after the holder");
        started.elapsed()
    });
    std::thread::sleep(Duration::from_millis(100));
    drop(held);
    let waited = waiter.join().expect("join");
    assert!(waited >= Duration::from_millis(90), "{waited:?}");
    assert_eq!(slots.in_use(), 0);
    assert_eq!(slots.peak(), 1);
}

#[test]
fn waiting_for_a_slot_ends_at_the_deadline_or_on_cancel() {
    let slots = ReadSlots::new(1);
    let _held = slots.acquire(&Interrupt::none()).expect("free slot");
    let started = Instant::now();
    let err = slots
        .acquire(&Interrupt::new(Some(Instant::now() + Duration::from_millis(100)), None))
        .err()
        .expect("no slot before the deadline");
    assert_eq!(err.kind, ShardErrorKind::Timeout, "{}", err.message);
    assert!(err.message.contains("read slot"), "{}", err.message);
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());

    let flag = Arc::new(AtomicBool::new(false));
    let f2 = Arc::clone(&flag);
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        f2.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let err = slots.acquire(&Interrupt::new(None, Some(flag))).err().expect("canceled while waiting");
    assert_eq!(err.kind, ShardErrorKind::Canceled, "{}", err.message);
}

/// Many readers taking and giving back slots at once, most without waiting, some after
/// a wait: never more slots out than there are, every reader gets each of its slots
/// before its deadline, and all are given back.
#[test]
fn slots_stay_bounded_and_no_waiter_is_forgotten_under_contention() {
    let slots = Arc::new(ReadSlots::new(2));
    let readers: Vec<_> = (0..6)
        .map(|_| {
            let slots = Arc::clone(&slots);
            std::thread::spawn(move || {
                let stop = Interrupt::new(Some(Instant::now() + Duration::from_secs(30)), None);
                for i in 0..2_000 {
                    let slot = slots.acquire(&stop).expect("a slot before the deadline");
                    if i % 100 == 0 {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    drop(slot);
                }
            })
        })
        .collect();
    for r in readers {
        r.join().expect("reader");
    }
    assert_eq!(slots.in_use(), 0);
    assert_eq!(slots.peak(), 2, "bounded by the 2 slots, and both used");
}

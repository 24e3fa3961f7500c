use super::*;
use crate::error::ErrorKind;

#[test]
fn parallel_map_returns_results_in_index_order_whatever_the_worker_count() {
    for workers in [1, 2, 3, 16] {
        let got = parallel_map(10, workers, |i| Ok(i * i)).expect("no error");
        assert_eq!(got, (0..10).map(|i| i * i).collect::<Vec<_>>(), "{workers} workers");
    }
    assert!(parallel_map(0, 4, Ok).expect("no error").is_empty());
}

#[test]
fn parallel_map_reports_the_lowest_failing_index() {
    for workers in [1, 4] {
        let err =
            parallel_map(8, workers, |i| if i >= 3 { Err(QueryError::execution(format!("shard {i}"))) } else { Ok(i) })
                .expect_err("fails");
        // Work may be skipped after the first failure, but never one below it.
        assert_eq!(err.message, "shard 3", "{workers} workers");
    }
}

#[test]
fn parallel_map_turns_a_panicking_worker_into_an_internal_error() {
    let err = parallel_map(4, 2, |i| if i == 2 { panic!("boom") } else { Ok(i) }).expect_err("fails");
    assert_eq!(err.kind, ErrorKind::Internal);
}

#[test]
fn parallel_map_runs_at_most_the_given_number_at_once() {
    let running = AtomicUsize::new(0);
    let peak = AtomicUsize::new(0);
    parallel_map(12, 3, |_| {
        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
        peak.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(5));
        running.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    })
    .expect("no error");
    assert!(peak.load(Ordering::SeqCst) <= 3);
    assert!(peak.load(Ordering::SeqCst) >= 2, "work ran in parallel");
}

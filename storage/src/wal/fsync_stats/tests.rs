use super::*;

#[test]
fn buckets_are_cumulative_and_slow_fsyncs_count_only_in_inf() {
    let h = FsyncHistogram::default();
    h.observe(Duration::from_micros(300));
    h.observe(Duration::from_millis(3));
    h.observe(Duration::from_secs(2));
    let s = h.snapshot();
    assert_eq!(s.count, 3);
    assert_eq!(s.buckets[0], 1, "≤ 0.5 ms");
    assert_eq!(s.buckets[3], 2, "≤ 5 ms");
    assert_eq!(s.buckets[FSYNC_BUCKETS_SECONDS.len() - 1], 2, "2 s is only in +Inf");
    assert_eq!(s.sum_nanos, 2_003_300_000);
}

use super::*;

#[test]
fn rate_limit_refuses_then_says_when_to_retry() {
    let limits = Limits { ingestion_rate_samples_per_sec: 100.0, ingestion_burst_samples: 100, ..Limits::default() };
    let rl = RateLimiter::new(&limits);
    assert!(rl.try_take("t", 60).is_ok());
    let wait = rl.try_take("t", 60).expect_err("over the burst");
    assert!(wait >= 1);
    assert!(rl.try_take("other", 60).is_ok(), "tenants have separate buckets");
}

#[test]
fn unlimited_rate_admits_everything() {
    let rl = RateLimiter::new(&Limits::default());
    for _ in 0..10 {
        assert!(rl.try_take("t", 1_000_000).is_ok());
    }
}

#[test]
fn oversized_request_passes_when_bucket_is_full() {
    let limits = Limits { ingestion_rate_samples_per_sec: 10.0, ..Limits::default() };
    let rl = RateLimiter::new(&limits);
    assert!(rl.try_take("t", 1000).is_ok());
    assert!(rl.try_take("t", 1).is_err());
}

#[test]
fn series_cap_admits_known_series_and_refuses_new_ones() {
    let limits = Limits { max_active_series_per_tenant: 2, ..Limits::default() };
    let a = ActiveSeries::new(&limits);
    assert_eq!(a.admit("t", &[1, 2, 3]), vec![true, true, false]);
    assert_eq!(a.admit("t", &[2, 4, 1]), vec![true, false, true]);
    assert_eq!(a.admit("u", &[3]), vec![true], "the cap is per tenant");
}

use super::*;

#[tokio::test]
async fn a_call_is_counted_by_its_code_and_is_in_flight_only_while_it_runs() {
    let m = ClusterMetrics::default();
    let ok = m.track("i0", "Select", async {
        assert_eq!(m.in_flight.get(&["i0", "Select"]), 1, "in flight while running");
        Ok::<_, Status>(1)
    });
    assert_eq!(ok.await.expect("ok"), 1);
    let err = m.track("i0", "Select", async { Err::<(), _>(Status::unavailable("down")) }).await;
    assert!(err.is_err());
    assert_eq!(m.requests.get(&["i0", "Select", "Ok"]), 1);
    assert_eq!(m.requests.get(&["i0", "Select", "Unavailable"]), 1);
    assert_eq!(m.in_flight.get(&["i0", "Select"]), 0);
    let mut out = String::new();
    m.render(&mut out);
    assert!(
        out.contains("tessera_cluster_grpc_request_duration_seconds_count{peer=\"i0\",method=\"Select\"} 2"),
        "{out}"
    );
}

#[tokio::test]
async fn a_call_dropped_before_it_ends_counts_as_cancelled() {
    let m = ClusterMetrics::default();
    let pending = m.track("i1", "Series", futures::future::pending::<Result<(), Status>>());
    let r = tokio::time::timeout(std::time::Duration::from_millis(10), pending).await;
    assert!(r.is_err(), "still pending when dropped");
    assert_eq!(m.requests.get(&["i1", "Series", "Cancelled"]), 1);
    assert_eq!(m.in_flight.get(&["i1", "Series"]), 0);
}

#[test]
fn shortfalls_count_requests_and_shards() {
    let m = ClusterMetrics::default();
    m.shortfall("read", 3, Shortfall::Failed);
    m.shortfall("read", 1, Shortfall::Partial);
    assert_eq!(m.incomplete.get(&["read", "failed"]), 1);
    assert_eq!(m.incomplete.get(&["read", "partial"]), 1);
    assert_eq!(m.short_shards.get(&["read"]), 4);
}

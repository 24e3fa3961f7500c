use super::*;

#[test]
fn renders_counters_and_cumulative_histograms() {
    let m = Metrics::new();
    m.requests.inc_by(&["/api/v1/write", "204"], 2);
    m.request_duration.observe(&["/api/v1/write"], 0.003);
    m.request_duration.observe(&["/api/v1/write"], 0.3);
    let text = m.render(None, 4);
    assert!(text.contains("tessera_http_requests_total{handler=\"/api/v1/write\",code=\"204\"} 2"), "{text}");
    assert!(text.contains("tessera_http_request_duration_seconds_bucket{handler=\"/api/v1/write\",le=\"0.005\"} 1"));
    assert!(text.contains("tessera_http_request_duration_seconds_bucket{handler=\"/api/v1/write\",le=\"0.5\"} 2"));
    assert!(text.contains("tessera_http_request_duration_seconds_bucket{handler=\"/api/v1/write\",le=\"+Inf\"} 2"));
    assert!(text.contains("tessera_shards 4"));
}

#[test]
fn label_values_are_escaped() {
    assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

use super::*;

#[test]
fn times_parse_as_float_seconds_or_rfc3339() {
    assert_eq!(parse_time("1.5", "start").expect("float"), 1500);
    assert_eq!(parse_time("2015-07-01T20:10:51.781Z", "start").expect("rfc3339"), 1_435_781_451_781);
    assert!(parse_time("yesterday", "start").is_err());
}

#[test]
fn selector_with_metric_name_gets_a_name_matcher() {
    let sel = parse_selector("up{job=~\"n.*\"}").expect("parses");
    assert_eq!(sel.len(), 1);
    assert_eq!(sel[0][0].name(), "__name__");
    assert_eq!(sel[0][1].op(), tessera_model::MatchOp::Regex);
}

#[test]
fn selector_matching_everything_is_refused() {
    // Refused by the parser or by our own check, either way a 400 about match[].
    let err = parse_selector("{job=~\".*\"}").expect_err("matches empty");
    assert!(err.message.contains("match[]"), "{}", err.message);
    let err = parse_selector("{job=\"\"}").expect_err("matches empty");
    assert!(err.message.contains("match[]"), "{}", err.message);
    assert!(parse_selector("rate(x[5m])").is_err());
}

#[test]
fn tenant_header_is_checked() {
    let mut h = HeaderMap::new();
    assert_eq!(tenant(&h).expect("default"), "anonymous");
    h.insert("x-scope-orgid", "team-a".parse().expect("header"));
    assert_eq!(tenant(&h).expect("ok"), "team-a");
    h.insert("x-scope-orgid", "a|b".parse().expect("header"));
    assert!(tenant(&h).is_err());
}

/// First-wins would let a proxy check one tenant while the server uses another.
#[test]
fn repeated_tenant_header_is_refused() {
    let mut h = HeaderMap::new();
    h.append("x-scope-orgid", "team-a".parse().expect("header"));
    h.append("x-scope-orgid", "team-b".parse().expect("header"));
    let err = tenant(&h).expect_err("two tenant headers");
    assert_eq!(err.kind, crate::error::ErrorKind::BadData);
    assert!(err.message.contains("given 2 times"), "{}", err.message);
}

#[test]
fn index_api_reads_params_like_the_query_api() {
    // Go's r.FormValue: POST body before the URL query, first value wins.
    let pairs = form_pairs(Some("limit=5&limit=6"), b"limit=7");
    assert_eq!(one(&pairs, "limit"), Some("7"));
    let pairs = form_pairs(Some("limit=5&limit=6"), b"");
    assert_eq!(one(&pairs, "limit"), Some("5"));
    // Prometheus' own spelling of "unbounded" (what Grafana sends) parses.
    assert!(parse_time("-292273086-05-16T16:47:06Z", "start").is_ok());
}

#[test]
fn too_deep_match_is_refused_before_parsing_naming_the_limit() {
    // Issue 12: ~34,000 nested parentheses in match[] overflowed an async worker's stack.
    let deep = format!("{}up{}", "(".repeat(34_000), ")".repeat(34_000));
    let pairs = vec![("match[]".to_string(), deep)];
    let err = selectors(&pairs, &TextLimits::default()).expect_err("too deep");
    assert_eq!(err.status(), axum::http::StatusCode::BAD_REQUEST);
    assert!(err.message.contains("match[]") && err.message.contains("query.max_query_depth"), "{}", err.message);
    let ok = vec![("match[]".to_string(), "up{job=\"a\"}".to_string())];
    assert_eq!(selectors(&ok, &TextLimits::default()).expect("shallow").len(), 1);
}

#[tokio::test]
async fn match_parsing_off_the_runtime_gives_the_same_answers() {
    let pairs = vec![
        ("start".to_string(), "1".to_string()),
        ("match[]".to_string(), "up".to_string()),
        ("match[]".to_string(), "{job=\"a\"}".to_string()),
    ];
    assert_eq!(selectors_off_runtime(&pairs, TextLimits::default()).await.expect("parses").len(), 2);
    let too_long = vec![("match[]".to_string(), format!("up{}", " ".repeat(100)))];
    let err = selectors_off_runtime(&too_long, TextLimits { max_depth: 8, max_bytes: 50 }).await.expect_err("long");
    assert!(err.message.contains("query.max_query_bytes"), "{}", err.message);
}

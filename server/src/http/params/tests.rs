use super::*;

fn params(pairs: &[(&str, &str)]) -> Params {
    Params { pairs: pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect() }
}

#[test]
fn times_parse_as_unix_seconds_or_rfc3339() {
    assert_eq!(parse_time("1435781451.781"), Ok(1_435_781_451_781));
    assert_eq!(parse_time("1435781451"), Ok(1_435_781_451_000));
    assert_eq!(parse_time("2015-07-01T20:10:51.781Z"), Ok(1_435_781_451_781));
    assert_eq!(parse_time("2015-07-01T22:10:51.781+02:00"), Ok(1_435_781_451_781));
    assert_eq!(parse_time("-1.5"), Ok(-1_500));
    // Prometheus rounds sub-millisecond fractions.
    assert_eq!(parse_time("1.0006"), Ok(1_001));
    assert_eq!(parse_time("-292273086-05-16T16:47:06Z"), Ok(MIN_TIME_MS));
    assert_eq!(parse_time("292277025-08-18T07:12:54.999999999Z"), Ok(MAX_TIME_MS));
    assert_eq!(parse_time("yesterday"), Err("cannot parse \"yesterday\" to a valid timestamp".to_string()));
    assert!(parse_time("NaN").is_err());
    assert!(parse_time("1e300").is_err());
}

#[test]
fn durations_parse_as_prometheus_durations_or_float_seconds() {
    let s = 1_000_000_000i64;
    assert_eq!(parse_duration_ns("30s"), Ok(30 * s));
    assert_eq!(parse_duration_ns("1m"), Ok(60 * s));
    assert_eq!(parse_duration_ns("1h30m"), Ok(5400 * s));
    assert_eq!(parse_duration_ns("100ms"), Ok(100_000_000));
    assert_eq!(parse_duration_ns("1m30s500ms"), Ok(90 * s + 500_000_000));
    assert_eq!(parse_duration_ns("1w2d"), Ok(9 * 86_400 * s));
    assert_eq!(parse_duration_ns("1y"), Ok(365 * 86_400 * s));
    assert_eq!(parse_duration_ns("15"), Ok(15 * s));
    assert_eq!(parse_duration_ns("0.5"), Ok(s / 2));
    assert_eq!(parse_duration_ns("0"), Ok(0));
    for bad in ["", "1x", "30s1m", "m", "1.5m", "1e400"] {
        assert!(parse_duration_ns(bad).is_err(), "{bad:?} must be rejected");
    }
}

#[test]
fn durations_are_printed_like_prometheus() {
    // The default retention: Prometheus writes `15d`, not `2w1d`.
    assert_eq!(format_duration_ms(15 * 86_400_000), "15d");
    assert_eq!(format_duration_ms(14 * 86_400_000), "2w");
    assert_eq!(format_duration_ms(90 * 86_400_000), "90d");
    assert_eq!(format_duration_ms(365 * 86_400_000), "1y");
    assert_eq!(format_duration_ms(366 * 86_400_000), "366d");
    assert_eq!(format_duration_ms(86_400_000 + 3_600_000), "1d1h");
    assert_eq!(format_duration_ms(90_000), "1m30s");
    assert_eq!(format_duration_ms(300_000), "5m");
    assert_eq!(format_duration_ms(1_500), "1s500ms");
    assert_eq!(format_duration_ms(0), "0s");
}

#[test]
fn form_body_values_come_before_url_values() {
    let p = Params::from_request(
        Some("query=from_url&time=1"),
        Some("application/x-www-form-urlencoded; charset=utf-8"),
        b"query=from_body&match%5B%5D=a&match%5B%5D=b",
    );
    assert_eq!(p.get("query"), Some("from_body"));
    assert_eq!(p.get("time"), Some("1"));
    assert_eq!(p.all("match[]"), vec!["a", "b"]);
    // A body that is not a form is ignored, as Go's ParseForm does.
    let p = Params::from_request(Some("query=u"), Some("application/json"), b"query=b");
    assert_eq!(p.get("query"), Some("u"));
}

#[test]
fn a_form_body_is_read_only_with_the_form_content_type() {
    // Go's r.FormValue: POST body before the URL query, first value wins.
    let form = Some("application/x-www-form-urlencoded");
    let p = Params::from_request(Some("limit=5&limit=6"), form, b"limit=7");
    assert_eq!(p.get("limit"), Some("7"));
    let p = Params::from_request(Some("limit=5&limit=6"), form, b"");
    assert_eq!(p.get("limit"), Some("5"));
    let p = Params::from_request(Some("limit=5"), None, b"limit=7");
    assert_eq!(p.get("limit"), Some("5"));
    // An empty value is a missing one.
    assert_eq!(Params::from_query(Some("limit=")).get("limit"), None);
}

#[test]
fn time_params_have_prometheus_defaults_and_wording() {
    assert_eq!(time_param(&params(&[]), "start", MIN_TIME_MS).expect("default"), MIN_TIME_MS);
    assert_eq!(time_param(&params(&[("start", "1.5")]), "start", 0).expect("float"), 1500);
    // Prometheus' own spelling of "unbounded" (what Grafana sends) parses.
    assert_eq!(time_param(&params(&[("end", "-292273086-05-16T16:47:06Z")]), "end", 0).expect("min"), MIN_TIME_MS);
    let err = time_param(&params(&[("start", "yesterday")]), "start", 0).expect_err("bad");
    assert_eq!(err.kind, crate::error::ErrorKind::BadData);
    assert_eq!(
        err.message,
        "invalid parameter \"start\": Invalid time value for 'start': cannot parse \"yesterday\" to a valid timestamp"
    );
    let err = required_time(&params(&[]), "start").expect_err("missing");
    assert_eq!(err.message, "invalid parameter \"start\": cannot parse \"\" to a valid timestamp");
}

/// Prometheus' parseLimitParam: Go's strconv.Atoi text for what is not an int, its own
/// text for a negative one, 0 for absent or zero (no limit).
#[test]
fn limit_is_parsed_with_prometheus_error_text() {
    assert_eq!(limit(&params(&[])).expect("absent"), 0);
    assert_eq!(limit(&params(&[("limit", "0")])).expect("zero"), 0);
    assert_eq!(limit(&params(&[("limit", "+7")])).expect("signed"), 7);
    let cases = [
        ("abc", "invalid parameter \"limit\": strconv.Atoi: parsing \"abc\": invalid syntax"),
        ("1.5", "invalid parameter \"limit\": strconv.Atoi: parsing \"1.5\": invalid syntax"),
        (
            "99999999999999999999",
            "invalid parameter \"limit\": strconv.Atoi: parsing \"99999999999999999999\": value out of range",
        ),
        ("-1", "invalid parameter \"limit\": limit must be non-negative"),
    ];
    for (raw, want) in cases {
        let err = limit(&params(&[("limit", raw)])).expect_err(raw);
        assert_eq!(err.kind, crate::error::ErrorKind::BadData, "{raw}");
        assert_eq!(err.message, want);
    }
}

#[test]
fn metadata_and_tsdb_limits_follow_their_endpoints_rules() {
    assert_eq!(metadata_limit(&params(&[]), "limit").expect("absent"), None);
    assert_eq!(metadata_limit(&params(&[("limit", "-1")]), "limit").expect("negative"), None);
    assert_eq!(metadata_limit(&params(&[("limit", "0")]), "limit").expect("zero"), Some(0));
    let err = metadata_limit(&params(&[("limit_per_metric", "few")]), "limit_per_metric").expect_err("nan");
    assert_eq!(err.message, "limit_per_metric must be a number");
    assert_eq!(tsdb_limit(&params(&[]), 10, 100).expect("default"), 10);
    assert_eq!(tsdb_limit(&params(&[("limit", "100")]), 10, 100).expect("max"), 100);
    for bad in ["0", "-3", "x"] {
        let err = tsdb_limit(&params(&[("limit", bad)]), 10, 100).expect_err(bad);
        assert_eq!(err.message, "limit must be a positive number");
    }
    let err = tsdb_limit(&params(&[("limit", "101")]), 10, 100).expect_err("over");
    assert_eq!(err.message, "limit must not exceed 100");
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
    // Refused by the parser or by our own check (with Prometheus' text), either way a
    // 400 about match[].
    let err = parse_selector("{job=~\".*\"}").expect_err("matches empty");
    assert!(err.message.contains("match[]"), "{}", err.message);
    let err = parse_selector("{job=\"\"}").expect_err("matches empty");
    assert!(err.message.contains("match[]"), "{}", err.message);
    // The parser checks only the selector as a whole; one `or` group that matches
    // everything is caught here, with Prometheus' text.
    let err = parse_selector("{job=\"\" or x=\"a\"}").expect_err("one group matches everything");
    assert_eq!(err.message, "match[] must contain at least one non-empty matcher");
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
fn too_deep_match_is_refused_before_parsing_naming_the_limit() {
    // Issue 12: ~34,000 nested parentheses in match[] overflowed an async worker's stack.
    let deep = format!("{}up{}", "(".repeat(34_000), ")".repeat(34_000));
    let err = selectors(&params(&[("match[]", &deep)]), &TextLimits::default()).expect_err("too deep");
    assert_eq!(err.status(), axum::http::StatusCode::BAD_REQUEST);
    assert!(err.message.contains("match[]") && err.message.contains("query.max_query_depth"), "{}", err.message);
    let ok = params(&[("match[]", "up{job=\"a\"}")]);
    assert_eq!(selectors(&ok, &TextLimits::default()).expect("shallow").len(), 1);
}

#[tokio::test]
async fn match_parsing_off_the_runtime_gives_the_same_answers() {
    let p = params(&[("start", "1"), ("match[]", "up"), ("match[]", "{job=\"a\"}")]);
    assert_eq!(selectors_off_runtime(&p, TextLimits::default()).await.expect("parses").len(), 2);
    let too_long = params(&[("match[]", &format!("up{}", " ".repeat(100)))]);
    let err = selectors_off_runtime(&too_long, TextLimits { max_depth: 8, max_bytes: 50 }).await.expect_err("long");
    assert!(err.message.contains("query.max_query_bytes"), "{}", err.message);
}

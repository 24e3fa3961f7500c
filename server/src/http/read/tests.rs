use std::sync::Arc;

use prost::Message;

use super::*;
use crate::config::Config;
use crate::http::ServerState;
use crate::shards::Shards;
use tessera_storage::EngineConfig;

fn state(dir: &std::path::Path, toml: &str) -> AppState {
    let config = Config::from_toml(toml).expect("config");
    let state: AppState = Arc::new(ServerState::new(config));
    let shards = Shards::open(dir, 1, &EngineConfig::default(), 2, &|_, _| {}).expect("open");
    state.set_shards(Arc::new(shards));
    state
}

fn body(queries: usize) -> Body {
    let q = prometheus::Query {
        start_timestamp_ms: 0,
        end_timestamp_ms: 1,
        matchers: vec![prometheus::LabelMatcher { r#type: 0, name: "__name__".into(), value: "x".into() }],
        hints: None,
    };
    let req = prometheus::ReadRequest { queries: vec![q; queries], accepted_response_types: vec![] };
    Body::from(snap::raw::Encoder::new().compress_vec(&req.encode_to_vec()).expect("snappy"))
}

/// With every slot taken, a request waits until its deadline and then says which
/// limit it waited on (503 timeout, with Retry-After).
#[tokio::test]
async fn a_request_without_a_free_slot_times_out_naming_the_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = state(dir.path(), "[limits]\nmax_concurrent_reads = 1\n[query]\ntimeout_secs = 1\n");
    let held = st.read_slots.acquire().await.expect("slot");
    let start = std::time::Instant::now();
    let err =
        remote_read(State(Arc::clone(&st)), RawQuery(None), HeaderMap::new(), body(1)).await.expect_err("no slot");
    assert!(start.elapsed() >= std::time::Duration::from_millis(900), "waited {:?}", start.elapsed());
    assert_eq!(err.0.kind, ErrorKind::Timeout);
    assert!(err.0.message.contains("limits.max_concurrent_reads"), "{}", err.0.message);
    drop(held);
    let ok = remote_read(State(st), RawQuery(None), HeaderMap::new(), body(1)).await;
    assert_eq!(ok.ok().expect("slot is free again").status(), StatusCode::OK);
}

#[tokio::test]
async fn too_many_queries_is_400_naming_the_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = state(dir.path(), "[limits]\nmax_read_queries_per_request = 3\n");
    let err =
        remote_read(State(Arc::clone(&st)), RawQuery(None), HeaderMap::new(), body(4)).await.expect_err("too many");
    assert_eq!(err.0.kind, ErrorKind::BadData);
    assert!(
        err.0.message.contains("4 queries") && err.0.message.contains("limits.max_read_queries_per_request"),
        "{}",
        err.0.message
    );
    assert!(remote_read(State(st), RawQuery(None), HeaderMap::new(), body(3)).await.is_ok());
}

/// A regex matcher that does not compile is the client's mistake: 400 naming the label
/// and the regex, with the regex parser's reason.
#[tokio::test]
async fn a_bad_regex_matcher_is_400_naming_label_and_regex() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = state(dir.path(), "");
    let q = prometheus::Query {
        start_timestamp_ms: 0,
        end_timestamp_ms: 1,
        matchers: vec![prometheus::LabelMatcher { r#type: 2, name: "gpu".into(), value: "(".into() }],
        hints: None,
    };
    let req = prometheus::ReadRequest { queries: vec![q], accepted_response_types: vec![] };
    let body = Body::from(snap::raw::Encoder::new().compress_vec(&req.encode_to_vec()).expect("snappy"));
    let err = remote_read(State(st), RawQuery(None), HeaderMap::new(), body).await.expect_err("bad regex");
    assert_eq!(err.0.kind, ErrorKind::BadData);
    assert!(err.0.message.starts_with(r#"invalid regex "(" for label "gpu": regex parse error"#), "{}", err.0.message);
}

#[test]
fn a_warning_becomes_a_valid_warning_header_value() {
    let v = warning_header("partial response: shards 1 (0 of 1) \"x\"\n");
    assert_eq!(v, "299 tessera \"partial response: shards 1 (0 of 1) 'x'\"");
    assert!(header::HeaderValue::from_str(&v).is_ok());
}

#[tokio::test]
async fn a_bad_partial_response_value_is_400_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = state(dir.path(), "");
    let q = RawQuery(Some("partial_response=maybe".into()));
    let err = remote_read(State(st), q, HeaderMap::new(), body(1)).await.expect_err("bad value");
    assert_eq!(err.0.kind, ErrorKind::BadData);
    assert!(err.0.message.contains("partial_response") && err.0.message.contains("maybe"), "{}", err.0.message);
}

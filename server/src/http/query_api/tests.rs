//! Tests of the query API against its router, in process (`tower::ServiceExt::oneshot`), with
//! an in-memory tenant store and a small test evaluator that reads it. The evaluator only
//! understands a bare metric name (and a few named test scenarios): what is under test here is
//! the HTTP layer, not PromQL.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use tessera_model::{Labels, Matcher, Sample};
use tessera_query::{ErrorKind, QueryError, QueryOutput, Queryable, Series, Value, VectorElem};
use tower::ServiceExt;

use super::*;

// ---------------------------------------------------------------------------------------
// Test doubles

/// Series per tenant, in memory.
#[derive(Default)]
struct MemTenants {
    tenants: HashMap<String, Vec<Series>>,
}

struct MemQueryable(Vec<Series>);

impl Queryable for MemQueryable {
    fn select(
        &self,
        matchers: &[Matcher],
        hints: &tessera_query::SelectHints,
        _ctl: &tessera_query::QueryOptions,
    ) -> Result<tessera_query::SelectResult, QueryError> {
        let (mint, maxt) = (hints.start, hints.end);
        Ok(tessera_query::ReadResult::new(
            self.0
                .iter()
                .filter(|s| matchers.iter().all(|m| m.matches(s.labels.get(m.name()).unwrap_or(""))))
                .map(|s| Series {
                    labels: s.labels.clone(),
                    samples: s.samples.iter().copied().filter(|x| x.t >= mint && x.t <= maxt).collect(),
                })
                .collect(),
        ))
    }
}

impl TenantData for MemTenants {
    fn queryable(&self, tenant: &str) -> Result<Arc<dyn Queryable>, ApiError> {
        Ok(Arc::new(MemQueryable(self.tenants.get(tenant).cloned().unwrap_or_default())))
    }

    fn cardinality(&self, tenant: &str) -> futures::future::BoxFuture<'static, Result<Cardinality, ApiError>> {
        let labels: Vec<Labels> = self.tenants.get(tenant).into_iter().flatten().map(|s| s.labels.clone()).collect();
        Box::pin(async move { Ok(Cardinality::Series(labels)) })
    }

    fn head_summary(&self, tenant: &str) -> HeadSummary {
        let all: Vec<i64> =
            self.tenants.get(tenant).into_iter().flatten().flat_map(|s| s.samples.iter().map(|x| x.t)).collect();
        HeadSummary {
            chunk_count: Some(self.tenants.get(tenant).map(|v| v.len() as i64).unwrap_or(0)),
            min_time: all.iter().copied().min(),
            max_time: all.iter().copied().max(),
        }
    }

    fn total_series(&self) -> Option<u64> {
        Some(self.tenants.values().map(|v| v.len() as u64).sum())
    }
}

/// Evaluates a bare metric name as "latest sample at or before t", plus named scenarios
/// that exercise the API's handling of special values, errors and slow evaluations.
#[derive(Default)]
struct TestEvaluator {
    /// Set by the `wait_for_cancel` scenario once it saw the cancel flag.
    saw_cancel: Arc<AtomicBool>,
    /// Evaluations running right now, and the most seen at once.
    running: Arc<AtomicUsize>,
    max_running: Arc<AtomicUsize>,
    /// The last options an evaluation received.
    last_lookback: Arc<Mutex<Option<i64>>>,
}

impl TestEvaluator {
    fn select_latest(data: &dyn Queryable, name: &str, t: i64) -> Result<Vec<VectorElem>, QueryError> {
        let m = [Matcher::equal("__name__", name)];
        Ok(data
            .select(&m, &tessera_query::SelectHints::range(t - 300_000, t), &Default::default())?
            .data
            .into_iter()
            .filter_map(|s| s.samples.last().map(|x| VectorElem { labels: s.labels.clone(), t, v: x.v }))
            .collect())
    }

    fn eval_at(&self, data: &dyn Queryable, expr: &str, t: i64, opts: &EvalOptions) -> Result<QueryOutput, QueryError> {
        *self.last_lookback.lock().expect("test mutex") = opts.lookback_delta_ms;
        let out = |value| Ok(QueryOutput { value, warnings: vec![], infos: vec![] });
        match expr {
            "special_values" => out(Value::Vector(
                [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e-7, 0.1 + 0.2]
                    .iter()
                    .enumerate()
                    .map(|(i, v)| VectorElem { labels: Labels::from_pairs([("i", i.to_string())]), t, v: *v })
                    .collect(),
            )),
            "42" => out(Value::Scalar { t, v: 42.0 }),
            "\"hello\"" => out(Value::String { t, s: "hello".into() }),
            "annotated" => Ok(QueryOutput {
                value: Value::Vector(vec![]),
                warnings: (0..12).map(|i| format!("PromQL warning: w{i}")).collect(),
                infos: vec!["PromQL info: i0".into()],
            }),
            "execution_error" => Err(QueryError::execution("found duplicate series for the match group")),
            "shard_unavailable" => Err(QueryError::new(
                ErrorKind::Unavailable,
                "shard 3: storage: storage engine refuses writes until restarted: a WAL fsync failed",
            )),
            "wait_for_cancel" | "slow" => {
                let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
                self.max_running.fetch_max(now, Ordering::SeqCst);
                let result = loop {
                    if opts.control.cancel.load(Ordering::Relaxed) {
                        self.saw_cancel.store(true, Ordering::SeqCst);
                        break Err(QueryError::new(ErrorKind::Canceled, "query was canceled"));
                    }
                    if std::time::Instant::now() >= opts.control.deadline {
                        break Err(QueryError::new(ErrorKind::Timeout, "query timed out in expression evaluation"));
                    }
                    if expr == "slow" {
                        std::thread::sleep(Duration::from_millis(150));
                        break out(Value::Scalar { t, v: 1.0 });
                    }
                    std::thread::sleep(Duration::from_millis(2));
                };
                self.running.fetch_sub(1, Ordering::SeqCst);
                result
            }
            name => out(Value::Vector(Self::select_latest(data, name, t)?)),
        }
    }
}

impl Evaluator for TestEvaluator {
    fn instant(&self, data: &dyn Queryable, expr: &str, t: i64, opts: &EvalOptions) -> Result<QueryOutput, QueryError> {
        self.eval_at(data, expr, t, opts)
    }

    fn range(
        &self,
        data: &dyn Queryable,
        expr: &str,
        start: i64,
        end: i64,
        step: i64,
        opts: &EvalOptions,
    ) -> Result<QueryOutput, QueryError> {
        let mut by_labels: Vec<Series> = Vec::new();
        let mut t = start;
        while t <= end {
            let out = self.eval_at(data, expr, t, opts)?;
            if let Value::Vector(elems) = out.value {
                for e in elems {
                    match by_labels.iter_mut().find(|s| s.labels == e.labels) {
                        Some(s) => s.samples.push(Sample { t, v: e.v }),
                        None => by_labels.push(Series { labels: e.labels, samples: vec![Sample { t, v: e.v }] }),
                    }
                }
            }
            t += step;
        }
        Ok(QueryOutput { value: Value::Matrix(by_labels), warnings: vec![], infos: vec![] })
    }
}

fn series(pairs: &[(&str, &str)], samples: &[(i64, f64)]) -> Series {
    Series {
        labels: Labels::from_pairs(pairs.iter().map(|(a, b)| (a.to_string(), b.to_string()))),
        samples: samples.iter().map(|&(t, v)| Sample { t, v }).collect(),
    }
}

fn tenants() -> MemTenants {
    let mut t = MemTenants::default();
    t.tenants.insert(
        "anonymous".into(),
        vec![
            series(&[("__name__", "up"), ("job", "node"), ("instance", "a:9100")], &[(1_000_000, 1.0)]),
            series(&[("__name__", "up"), ("job", "node"), ("instance", "b:9100")], &[(1_000_000, 0.0)]),
        ],
    );
    t.tenants.insert("team-a".into(), vec![series(&[("__name__", "up"), ("job", "secret-a")], &[(1_000_000, 1.0)])]);
    t
}

fn api_with(limits: QueryLimits, eval: Arc<TestEvaluator>) -> axum::Router {
    routes(QueryApi::new(eval, Arc::new(tenants()), limits, ServerInfo::default()))
}

fn api() -> axum::Router {
    api_with(QueryLimits::default(), Arc::new(TestEvaluator::default()))
}

async fn send(router: axum::Router, req: Request<Body>) -> (StatusCode, String) {
    let resp = router.oneshot(req).await.expect("router is infallible");
    let status = resp.status();
    let body = resp.into_body().collect().await.expect("body collects").to_bytes();
    (status, String::from_utf8(body.to_vec()).expect("utf-8 body"))
}

async fn get(router: axum::Router, uri: &str) -> (StatusCode, String) {
    send(router, Request::get(uri).body(Body::empty()).expect("request builds")).await
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

// ---------------------------------------------------------------------------------------
// Instant and range queries over HTTP

#[tokio::test]
async fn instant_query_returns_prometheus_vector_json() {
    let (status, body) = get(api(), "/api/v1/query?query=up&time=1000").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        concat!(
            r#"{"status":"success","data":{"resultType":"vector","result":["#,
            r#"{"metric":{"__name__":"up","instance":"a:9100","job":"node"},"value":[1000,"1"]},"#,
            r#"{"metric":{"__name__":"up","instance":"b:9100","job":"node"},"value":[1000,"0"]}]}}"#
        )
    );
}

#[tokio::test]
async fn answers_are_gzipped_for_clients_that_accept_it() {
    let req = Request::get("/api/v1/query?query=up&time=1000")
        .header("Accept-Encoding", "gzip")
        .body(Body::empty())
        .expect("request builds");
    let resp = api().oneshot(req).await.expect("router is infallible");
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers().get("content-encoding").map(|v| v.as_bytes()), Some(&b"gzip"[..]));
}

#[tokio::test]
async fn nan_and_inf_values_are_spelled_like_prometheus() {
    let (status, body) = get(api(), "/api/v1/query?query=special_values&time=1.5").await;
    assert_eq!(status, StatusCode::OK);
    for want in [
        r#""value":[1.500,"NaN"]"#,
        r#""value":[1.500,"+Inf"]"#,
        r#""value":[1.500,"-Inf"]"#,
        r#""value":[1.500,"1e-07"]"#,
        r#""value":[1.500,"0.30000000000000004"]"#,
    ] {
        assert!(body.contains(want), "{want} missing from {body}");
    }
}

#[tokio::test]
async fn scalar_and_string_results_have_their_result_types() {
    let (_, body) = get(api(), "/api/v1/query?query=42&time=10").await;
    assert_eq!(body, r#"{"status":"success","data":{"resultType":"scalar","result":[10,"42"]}}"#);
    let (_, body) = get(api(), "/api/v1/query?query=%22hello%22&time=10").await;
    assert_eq!(body, r#"{"status":"success","data":{"resultType":"string","result":[10,"hello"]}}"#);
}

#[tokio::test]
async fn warnings_and_infos_appear_only_when_present_and_are_capped_at_ten() {
    let (_, body) = get(api(), "/api/v1/query?query=up&time=1000").await;
    assert!(!body.contains("warnings") && !body.contains("infos"), "{body}");
    let (status, body) = get(api(), "/api/v1/query?query=annotated&time=1000").await;
    assert_eq!(status, StatusCode::OK);
    let v = json(&body);
    let warnings = v["warnings"].as_array().expect("warnings array");
    assert_eq!(warnings.len(), 11);
    assert_eq!(warnings[10], "2 more warning annotations omitted");
    assert_eq!(v["infos"], serde_json::json!(["PromQL info: i0"]));
}

#[tokio::test]
async fn query_with_invalid_promql_returns_400_bad_data() {
    let (status, body) = get(api(), "/api/v1/query?query=sum(rate(up[5m]&time=1").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let v = json(&body);
    assert_eq!(v["status"], "error");
    assert_eq!(v["errorType"], "bad_data");
    assert!(v["error"].as_str().expect("error text").starts_with("invalid parameter \"query\": "), "{body}");
    assert!(v.get("data").is_none());
}

#[tokio::test]
async fn query_without_expression_returns_400_bad_data() {
    let (status, body) = get(api(), "/api/v1/query").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(json(&body)["errorType"], "bad_data");
}

#[tokio::test]
async fn malformed_time_returns_400_with_prometheus_wording() {
    let (status, body) = get(api(), "/api/v1/query?query=up&time=tomorrow").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        json(&body)["error"],
        "invalid parameter \"time\": Invalid time value for 'time': cannot parse \"tomorrow\" to a valid timestamp"
    );
}

#[tokio::test]
async fn execution_error_returns_422() {
    let (status, body) = get(api(), "/api/v1/query?query=execution_error&time=1").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body,
        r#"{"status":"error","errorType":"execution","error":"found duplicate series for the match group"}"#
    );
}

/// A data source that cannot serve now (a poisoned or busy shard) answers 503
/// `unavailable`, so clients retry, not 500.
#[tokio::test]
async fn an_unavailable_source_returns_503_unavailable() {
    let (status, body) = get(api(), "/api/v1/query?query=shard_unavailable&time=1").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.starts_with(r#"{"status":"error","errorType":"unavailable","error":"shard 3: "#), "{body}");
}

#[test]
fn error_kinds_map_to_prometheus_statuses() {
    use crate::error::{status_of, ErrorKind};
    let cases = [
        (ErrorKind::BadData, 400, "bad_data"),
        (ErrorKind::Execution, 422, "execution"),
        (ErrorKind::Canceled, 499, "canceled"),
        (ErrorKind::Timeout, 503, "timeout"),
        (ErrorKind::Unavailable, 503, "unavailable"),
        (ErrorKind::NotFound, 404, "not_found"),
        (ErrorKind::Internal, 500, "internal"),
    ];
    for (kind, code, name) in cases {
        let (status, error_type) = status_of(kind);
        assert_eq!((status.as_u16(), error_type), (code, name));
    }
}

#[tokio::test]
async fn invalid_tenant_header_returns_400() {
    let req = Request::get("/api/v1/query?query=up")
        .header("X-Scope-OrgID", "a/b")
        .body(Body::empty())
        .expect("request builds");
    let (status, body) = send(api(), req).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(json(&body)["errorType"], "bad_data");
}

#[tokio::test]
async fn post_form_body_is_accepted() {
    let req = Request::post("/api/v1/query")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(Body::from("query=up&time=1000"))
        .expect("request builds");
    let (status, body) = send(api(), req).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json(&body)["data"]["result"].as_array().map(|a| a.len()), Some(2));

    let req = Request::post("/api/v1/query_range")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(Body::from("query=up&start=1000&end=1060&step=30s"))
        .expect("request builds");
    let (status, body) = send(api(), req).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(json(&body)["data"]["resultType"], "matrix");
}

#[tokio::test]
async fn tenants_do_not_see_each_other() {
    let req = |tenant: Option<&str>| {
        let mut b = Request::get("/api/v1/query?query=up&time=1000");
        if let Some(t) = tenant {
            b = b.header("X-Scope-OrgID", t);
        }
        b.body(Body::empty()).expect("request builds")
    };
    let (_, a) = send(api(), req(Some("team-a"))).await;
    assert!(a.contains("secret-a") && !a.contains("a:9100"), "{a}");
    let (_, anon) = send(api(), req(None)).await;
    assert!(anon.contains("a:9100") && !anon.contains("secret-a"), "{anon}");
    let (_, other) = send(api(), req(Some("team-b"))).await;
    assert_eq!(json(&other)["data"]["result"], serde_json::json!([]));
}

#[tokio::test]
async fn range_query_returns_matrix_with_values() {
    let (status, body) = get(api(), "/api/v1/query_range?query=up&start=1000&end=1030&step=15").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.contains(
            r#"{"metric":{"__name__":"up","instance":"a:9100","job":"node"},"values":[[1000,"1"],[1015,"1"],[1030,"1"]]}"#
        ),
        "{body}"
    );
}

#[tokio::test]
async fn query_range_over_11000_points_returns_400() {
    // 11,001 steps of 1 s.
    let (status, body) = get(api(), "/api/v1/query_range?query=up&start=0&end=11001&step=1").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        r#"{"status":"error","errorType":"bad_data","error":"exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"}"#
    );
    // Exactly 11,000 intervals is still allowed, as in Prometheus.
    let (status, _) = get(api(), "/api/v1/query_range?query=42&start=0&end=11000&step=1").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn query_range_with_end_before_start_returns_400() {
    let (status, body) = get(api(), "/api/v1/query_range?query=up&start=100&end=50&step=1").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(json(&body)["error"], "invalid parameter \"end\": end timestamp must not be before start time");
}

#[tokio::test]
async fn query_range_with_zero_or_negative_step_returns_400() {
    for step in ["0", "-15", "0.0001"] {
        let (status, body) = get(api(), &format!("/api/v1/query_range?query=up&start=0&end=60&step={step}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "step {step}");
        assert_eq!(
            json(&body)["error"],
            "invalid parameter \"step\": zero or negative query resolution step widths are not accepted. Try a positive integer"
        );
    }
}

#[tokio::test]
async fn query_range_without_start_returns_400() {
    let (status, body) = get(api(), "/api/v1/query_range?query=up&end=50&step=1").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(json(&body)["error"], "invalid parameter \"start\": cannot parse \"\" to a valid timestamp");
}

#[tokio::test]
async fn query_range_of_a_range_vector_returns_400() {
    let (status, body) = get(api(), "/api/v1/query_range?query=up%5B5m%5D&start=0&end=60&step=15").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        json(&body)["error"],
        "invalid parameter \"query\": invalid expression type \"range vector\" for range query, must be Scalar or instant Vector"
    );
}

#[tokio::test]
async fn limit_truncates_series_and_warns() {
    let (status, body) = get(api(), "/api/v1/query?query=up&time=1000&limit=1").await;
    assert_eq!(status, StatusCode::OK);
    let v = json(&body);
    assert_eq!(v["data"]["result"].as_array().map(|a| a.len()), Some(1));
    assert_eq!(v["warnings"], serde_json::json!(["results truncated due to limit"]));
    let (status, _) = get(api(), "/api/v1/query?query=up&limit=-1").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn lookback_delta_parameter_reaches_the_evaluator() {
    let eval = Arc::new(TestEvaluator::default());
    let (status, _) =
        get(api_with(QueryLimits::default(), eval.clone()), "/api/v1/query?query=up&time=1000&lookback_delta=1m").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(*eval.last_lookback.lock().expect("test mutex"), Some(60_000));
    let (status, body) = get(api(), "/api/v1/query?query=up&lookback_delta=soon").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

// ---------------------------------------------------------------------------------------
// Limits: timeout, concurrency, cancellation

#[tokio::test]
async fn timeout_parameter_bounds_evaluation_and_returns_503() {
    let (status, body) = get(api(), "/api/v1/query?query=wait_for_cancel&time=1&timeout=50ms").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(json(&body)["errorType"], "timeout");
}

#[tokio::test]
async fn configured_timeout_caps_a_longer_timeout_parameter() {
    let limits = QueryLimits { timeout_secs: 1, ..QueryLimits::default() };
    let router = api_with(limits, Arc::new(TestEvaluator::default()));
    let started = std::time::Instant::now();
    let (status, _) = get(router, "/api/v1/query?query=wait_for_cancel&time=1&timeout=1h").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_queries_beyond_the_limit_wait_their_turn() {
    let eval = Arc::new(TestEvaluator::default());
    let limits = QueryLimits { max_concurrent: 1, ..QueryLimits::default() };
    let router = api_with(limits, eval.clone());
    let a = tokio::spawn(get(router.clone(), "/api/v1/query?query=slow&time=1"));
    let b = tokio::spawn(get(router.clone(), "/api/v1/query?query=slow&time=1"));
    let (ra, rb) = (a.await.expect("task a"), b.await.expect("task b"));
    assert_eq!((ra.0, rb.0), (StatusCode::OK, StatusCode::OK));
    assert_eq!(eval.max_running.load(Ordering::SeqCst), 1, "both ran at the same time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_waiting_in_a_full_queue_times_out_with_503() {
    let eval = Arc::new(TestEvaluator::default());
    let limits = QueryLimits { max_concurrent: 1, ..QueryLimits::default() };
    let router = api_with(limits, eval.clone());
    let hog = tokio::spawn(get(router.clone(), "/api/v1/query?query=wait_for_cancel&time=1&timeout=2s"));
    // Let the first query take the only slot.
    while eval.running.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (status, body) = get(router, "/api/v1/query?query=up&time=1&timeout=100ms").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(json(&body)["error"], "query timed out in query queue");
    hog.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_request_cancels_the_evaluation() {
    let eval = Arc::new(TestEvaluator::default());
    let router = api_with(QueryLimits::default(), eval.clone());
    // The handler future is dropped when the client goes away; aborting the task does that.
    let task = tokio::spawn(get(router, "/api/v1/query?query=wait_for_cancel&time=1"));
    while eval.running.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    task.abort();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !eval.saw_cancel.load(Ordering::SeqCst) {
        assert!(std::time::Instant::now() < deadline, "evaluation never saw the cancel flag");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

// ---------------------------------------------------------------------------------------
// Other endpoints

#[tokio::test]
async fn query_exemplars_returns_a_valid_empty_answer() {
    let (status, body) = get(api(), "/api/v1/query_exemplars?query=up&start=0&end=100").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, r#"{"status":"success","data":[]}"#));
    let (status, _) = get(api(), "/api/v1/query_exemplars?query=up(").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = get(api(), "/api/v1/query_exemplars?query=up&start=10&end=5").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn format_query_prettifies_like_prometheus() {
    let (status, body) = get(api(), "/api/v1/format_query?query=foo/bar").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, r#"{"status":"success","data":"foo / bar"}"#));
}

#[tokio::test]
async fn parse_query_matches_the_documented_tree() {
    let (status, body) = get(api(), "/api/v1/parse_query?query=foo/bar").await;
    assert_eq!(status, StatusCode::OK);
    // The example of api.md, with Go's sorted map keys.
    let want = serde_json::json!({
        "status": "success",
        "data": {
            "bool": false,
            "lhs": {"matchers": [{"name": "__name__", "type": "=", "value": "foo"}], "name": "foo",
                    "offset": 0, "startOrEnd": null, "timestamp": null, "type": "vectorSelector"},
            "matching": {"card": "one-to-one", "include": [], "labels": [], "on": false},
            "op": "/",
            "rhs": {"matchers": [{"name": "__name__", "type": "=", "value": "bar"}], "name": "bar",
                    "offset": 0, "startOrEnd": null, "timestamp": null, "type": "vectorSelector"},
            "type": "binaryExpr"
        }
    });
    assert_eq!(json(&body), want);
    // Keys come sorted, as Go writes maps.
    assert!(body.starts_with(r#"{"status":"success","data":{"bool":false,"lhs":{"matchers":"#), "{body}");
}

#[tokio::test]
async fn parse_query_describes_functions_aggregations_and_modifiers() {
    let q = "sum by (job) (rate(x{a=~\"b\"}[5m] offset 1m)) and on(job) y @ 100";
    let uri =
        format!("/api/v1/parse_query?query={}", form_urlencoded::byte_serialize(q.as_bytes()).collect::<String>());
    let (status, body) = get(api(), &uri).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let d = &json(&body)["data"];
    assert_eq!(d["op"], "and");
    assert_eq!(d["matching"]["card"], "many-to-many");
    assert_eq!(d["matching"]["on"], true);
    assert_eq!(d["matching"]["labels"], serde_json::json!(["job"]));
    assert_eq!(d["lhs"]["type"], "aggregation");
    assert_eq!(d["lhs"]["grouping"], serde_json::json!(["job"]));
    let call = &d["lhs"]["expr"];
    assert_eq!(call["func"]["name"], "rate");
    assert_eq!(call["args"][0]["type"], "matrixSelector");
    assert_eq!(call["args"][0]["range"], 300_000);
    assert_eq!(call["args"][0]["offset"], 60_000);
    assert_eq!(call["args"][0]["matchers"][0], serde_json::json!({"name": "a", "type": "=~", "value": "b"}));
    assert_eq!(d["rhs"]["timestamp"], 100_000);
}

#[tokio::test]
async fn buildinfo_has_the_fields_grafana_reads() {
    let (status, body) = get(api(), "/api/v1/status/buildinfo").await;
    assert_eq!(status, StatusCode::OK);
    let v = json(&body);
    for field in ["version", "revision", "branch", "buildUser", "buildDate", "goVersion"] {
        assert!(v["data"][field].is_string(), "{field} missing in {body}");
    }
    assert_eq!(v["data"]["version"], "3.0.0");
    // Grafana takes an `application` or `features` field to mean Mimir/Cortex.
    assert!(v["data"].get("application").is_none() && v["data"].get("features").is_none());
}

#[tokio::test]
async fn flags_are_strings_with_sorted_keys() {
    let info = ServerInfo {
        flags: vec![("query.timeout".into(), "2m".into()), ("listen".into(), "127.0.0.1:9090".into())],
        ..ServerInfo::default()
    };
    let router =
        routes(QueryApi::new(Arc::new(TestEvaluator::default()), Arc::new(tenants()), QueryLimits::default(), info));
    let (status, body) = get(router, "/api/v1/status/flags").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, r#"{"status":"success","data":{"listen":"127.0.0.1:9090","query.timeout":"2m"}}"#);
}

#[tokio::test]
async fn runtimeinfo_reports_start_time_and_series_count() {
    let (status, body) = get(api(), "/api/v1/status/runtimeinfo").await;
    assert_eq!(status, StatusCode::OK);
    let v = json(&body);
    assert_eq!(v["data"]["timeSeriesCount"], 3);
    assert!(v["data"]["startTime"].as_str().is_some_and(|s| s.ends_with('Z')));
}

#[tokio::test]
async fn tsdb_status_counts_the_requesting_tenants_series() {
    let (status, body) = get(api(), "/api/v1/status/tsdb").await;
    assert_eq!(status, StatusCode::OK);
    let d = &json(&body)["data"];
    assert_eq!(d["headStats"]["numSeries"], 2);
    assert_eq!(d["headStats"]["minTime"], 1_000_000);
    // __name__=up, job=node, instance=a:9100, instance=b:9100
    assert_eq!(d["headStats"]["numLabelPairs"], 4);
    assert_eq!(d["seriesCountByMetricName"], serde_json::json!([{"name": "up", "value": 2}]));
    assert_eq!(d["labelValueCountByLabelName"][0], serde_json::json!({"name": "instance", "value": 2}));
    assert_eq!(
        d["seriesCountByLabelValuePair"].as_array().expect("list")[0..2],
        [serde_json::json!({"name": "__name__=up", "value": 2}), serde_json::json!({"name": "job=node", "value": 2})]
    );
    // "a:9100" and "b:9100" are 6 bytes each, one series each.
    assert!(d["memoryInBytesByLabelName"]
        .as_array()
        .expect("list")
        .contains(&serde_json::json!({"name": "instance", "value": 12})));
    assert!(!body.contains("secret-a"));

    let req = Request::get("/api/v1/status/tsdb?limit=1")
        .header("X-Scope-OrgID", "team-a")
        .body(Body::empty())
        .expect("request builds");
    let (_, body) = send(api(), req).await;
    let d = &json(&body)["data"];
    assert_eq!(d["headStats"]["numSeries"], 1);
    assert_eq!(d["seriesCountByLabelValuePair"].as_array().map(|a| a.len()), Some(1));

    for bad in ["0", "-3", "x", "10001"] {
        let (status, _) = get(api(), &format!("/api/v1/status/tsdb?limit={bad}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "limit={bad}");
    }
}

#[test]
fn query_limits_read_from_config_with_defaults_for_missing_keys() {
    let limits: QueryLimits = toml::from_str("timeout_secs = 30\nmax_concurrent = 3").expect("valid [query] table");
    assert_eq!(limits.timeout(), Duration::from_secs(30));
    assert_eq!(limits.concurrency(), 3);
    assert_eq!(limits.max_points_per_series, 11_000);
    assert_eq!(limits.lookback_delta_ms(), 300_000);
    assert!(limits.validate().is_ok());
    assert!(toml::from_str::<QueryLimits>("timeout = 30").is_err(), "unknown keys are refused");
    assert!(QueryLimits { timeout_secs: 0, ..QueryLimits::default() }.validate().is_err());
    assert!(QueryLimits::default().concurrency() >= 2);
}

// ---------------------------------------------------------------------------------------
// With the real engine: the limits of the config reach it.

fn real_engine_api(limits: QueryLimits) -> axum::Router {
    let engine = Arc::new(engine_for(&limits));
    routes(QueryApi::new(engine, Arc::new(tenants()), limits, ServerInfo::default()))
}

#[tokio::test]
async fn real_engine_answers_through_the_api() {
    let (status, body) = get(real_engine_api(QueryLimits::default()), "/api/v1/query?query=sum(up)&time=1000").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1000,"1"]}]}}"#
    );
}

#[tokio::test]
async fn query_over_the_sample_limit_returns_422() {
    let limits = QueryLimits { max_samples: 1, ..QueryLimits::default() };
    let (status, body) = get(real_engine_api(limits), "/api/v1/query?query=up&time=1000").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let v = json(&body);
    assert_eq!(v["errorType"], "execution");
    assert!(v["error"].as_str().is_some_and(|e| e.contains("too many samples")), "{body}");
}

#[tokio::test]
async fn range_of_exactly_11000_steps_reaches_the_real_engine() {
    // 11,000 intervals are 11,001 points: Prometheus' API allows it, so must the engine.
    let (status, body) =
        get(real_engine_api(QueryLimits::default()), "/api/v1/query_range?query=1&start=0&end=11000&step=1").await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

// ---------------------------------------------------------------------------------------
// Hostile query text and forms (issue 12)

fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Every PromQL endpoint, with `query=` set to `q`.
fn promql_uris(q: &str) -> Vec<String> {
    let q = enc(q);
    vec![
        format!("/api/v1/query?query={q}&time=1000"),
        format!("/api/v1/query_range?query={q}&start=0&end=100&step=10"),
        format!("/api/v1/query_exemplars?query={q}"),
        format!("/api/v1/format_query?query={q}"),
        format!("/api/v1/parse_query?query={q}"),
    ]
}

#[tokio::test]
async fn too_deep_queries_get_400_naming_the_limit_from_every_promql_endpoint() {
    for q in [
        format!("{}vector(1)", "-".repeat(2000)),
        format!("{}up{}", "(".repeat(7800), ")".repeat(7800)),
        format!("{}vector(1){}", "abs(".repeat(1500), ")".repeat(1500)),
        format!("a{}", "+a".repeat(1750)),
    ] {
        for uri in promql_uris(&q) {
            let (status, body) = get(real_engine_api(QueryLimits::default()), &uri).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{}: {body}", &uri[..30]);
            let v = json(&body);
            assert_eq!(v["errorType"], "bad_data");
            assert!(v["error"].as_str().is_some_and(|e| e.contains("query.max_query_depth")), "{body}");
        }
    }
}

#[tokio::test]
async fn queries_at_the_depth_ceiling_are_parsed_printed_and_evaluated_without_overflow() {
    // The deepest query the config can admit: parsing, AST JSON, pretty printing,
    // evaluation and dropping all run on query threads and must fit their stacks.
    let limits = QueryLimits { max_query_depth: MAX_QUERY_DEPTH_CEILING, ..QueryLimits::default() };
    assert!(limits.validate().is_ok());
    let mut k = 0;
    let shape = |k: usize| format!("{}vector(1){}", "-(".repeat(k), ")".repeat(k));
    while tessera_query::engine::limits::depth_bound(&shape(k + 1)) <= MAX_QUERY_DEPTH_CEILING {
        k += 1;
    }
    for uri in promql_uris(&shape(k)) {
        let (status, body) = get(real_engine_api(limits.clone()), &uri).await;
        assert!(status == StatusCode::OK || status == StatusCode::NO_CONTENT, "{}: {status} {body}", &uri[..30]);
    }
    let (status, _) = get(real_engine_api(limits), &promql_uris(&shape(k + 1))[0]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "one level more is refused");
}

#[tokio::test]
async fn query_text_over_the_byte_limit_gets_400_naming_the_limit() {
    let limits = QueryLimits { max_query_bytes: 1000, ..QueryLimits::default() };
    let q = format!("up{}", " ".repeat(1000));
    for uri in promql_uris(&q) {
        let (status, body) = get(real_engine_api(limits.clone()), &uri).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(json(&body)["error"].as_str().is_some_and(|e| e.contains("query.max_query_bytes")), "{body}");
    }
}

#[tokio::test]
async fn oversized_query_form_gets_413_in_the_json_envelope() {
    // Issue 12: a 3 MiB query form answered 400. With and without a Content-Length.
    let form = format!("query={}", "a".repeat(3 << 20));
    for declare_length in [true, false] {
        for path in [
            "/api/v1/query",
            "/api/v1/query_range",
            "/api/v1/format_query",
            "/api/v1/parse_query",
            "/api/v1/query_exemplars",
        ] {
            let mut req = Request::post(path).header("content-type", "application/x-www-form-urlencoded");
            if declare_length {
                req = req.header("content-length", form.len());
            }
            let (status, body) = send(api(), req.body(Body::from(form.clone())).expect("request builds")).await;
            assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{path}: {body}");
            let v = json(&body);
            assert_eq!(v["status"], "error");
            assert_eq!(v["errorType"], "bad_data");
            assert!(v["error"].as_str().is_some_and(|e| e.contains("query.max_query_bytes")), "{body}");
        }
    }
    // A form just under the limit is read (and its query then refused as too long).
    let limits = QueryLimits::default();
    let form = format!("query={}", "a".repeat(limits.max_form_bytes() - 6));
    let req = Request::post("/api/v1/query").header("content-type", "application/x-www-form-urlencoded");
    let (status, body) = send(api(), req.body(Body::from(form)).expect("request builds")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("query.max_query_bytes"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn formatting_and_parsing_wait_for_a_query_slot_within_the_deadline() {
    // They run under the query semaphore: with the only slot taken, they time out in the
    // queue instead of running on an async worker.
    let eval = Arc::new(TestEvaluator::default());
    let limits = QueryLimits { max_concurrent: 1, ..QueryLimits::default() };
    let router = api_with(limits, eval.clone());
    let hog = tokio::spawn(get(router.clone(), "/api/v1/query?query=wait_for_cancel&time=1&timeout=3s"));
    while eval.running.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for path in ["format_query", "parse_query", "query_exemplars"] {
        let (status, body) = get(router.clone(), &format!("/api/v1/{path}?query=up&timeout=100ms")).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{path}: {body}");
        assert_eq!(json(&body)["error"], "query timed out in query queue", "{path}");
    }
    hog.abort();
}

#[test]
fn query_text_limits_are_validated() {
    assert!(QueryLimits { max_query_depth: 0, ..QueryLimits::default() }.validate().is_err());
    assert!(QueryLimits { max_query_depth: MAX_QUERY_DEPTH_CEILING + 1, ..QueryLimits::default() }.validate().is_err());
    assert!(QueryLimits { max_query_bytes: 0, ..QueryLimits::default() }.validate().is_err());
    let limits: QueryLimits = toml::from_str("max_query_depth = 100\nmax_query_bytes = 4096").expect("valid");
    assert_eq!(limits.text_limits(), tessera_query::TextLimits { max_depth: 100, max_bytes: 4096 });
    assert_eq!(limits.max_form_bytes(), 4 * 4096 + 64 * 1024);
}

/// `[query] default_subquery_step_secs` (Prometheus' `global.evaluation_interval`) is
/// the step of a subquery written without one, reaches the engine, and shows in the flags.
#[test]
fn the_default_subquery_step_is_configured_and_reaches_the_engine() {
    assert!(QueryLimits { default_subquery_step_secs: 0, ..QueryLimits::default() }.validate().is_err());
    let limits: QueryLimits = toml::from_str("default_subquery_step_secs = 15").expect("valid");
    assert!(limits.validate().is_ok());
    assert!(limits.flag_pairs().contains(&("query.default_subquery_step_secs".into(), "15".into())));
    let steps = |limits: &QueryLimits| {
        let store = tessera_query::promqltest::MemStore::new();
        let out = engine_for(limits)
            .instant_query(&store, "count_over_time(vector(1)[5m:])", 600_000, &tessera_query::QueryOptions::default())
            .expect("query");
        match out.value {
            Value::Vector(v) => v[0].v,
            other => panic!("not a vector: {other:?}"),
        }
    };
    // (300 s, 600 s]: 20 steps of 15 s, 5 of the default minute.
    assert_eq!(steps(&limits), 20.0);
    assert_eq!(steps(&QueryLimits::default()), 5.0);
}

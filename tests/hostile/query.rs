//! Hostile PromQL requests from issue 12 against the real binary: each one used to
//! abort the process (stack overflow, a 1.4 TB allocation) or hold an async worker for
//! seconds. Each must now get a 4xx in the JSON envelope, quickly, and the server must
//! still be alive and answering afterwards.

use std::time::{Duration, Instant};

use crate::harness::Server;

fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

fn nested(k: usize, open: &str, inner: &str, close: &str) -> String {
    format!("{}{inner}{}", open.repeat(k), close.repeat(k))
}

fn nested_subqueries(k: usize) -> String {
    let mut e = "vector(1)".to_string();
    for _ in 0..k {
        e = format!("max_over_time({e}[1m:1m])");
    }
    e
}

/// POSTs `form` (already encoded) to `path`; returns status, body and how long it took.
fn post_form(s: &Server, path: &str, form: String) -> (u16, serde_json::Value, Duration) {
    let started = Instant::now();
    let resp = s
        .http()
        .post(s.url(path))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .unwrap_or_else(|e| panic!("{path}: no answer ({e}); server stderr:\n{}", s.stderr()));
    let status = resp.status().as_u16();
    let text = resp.text().expect("body");
    let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {text}"));
    (status, body, started.elapsed())
}

/// The server answers `/-/ready` and a real query, within a second each.
fn assert_alive(s: &Server, after: &str) {
    let started = Instant::now();
    let ready = s.http().get(s.url("/-/ready")).send();
    assert!(
        ready.as_ref().is_ok_and(|r| r.status() == 200),
        "not ready after {after}: {ready:?}; stderr:\n{}",
        s.stderr()
    );
    let (code, body) = s.get_json("/api/v1/query?query=vector(1)&time=1000", None);
    assert_eq!(code, 200, "after {after}: {body}");
    assert!(started.elapsed() < Duration::from_secs(1), "slow to answer after {after}");
}

#[test]
fn hostile_promql_requests_get_4xx_and_the_server_survives_them() {
    let _serial = crate::probe::serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(&dir.path().join("data"));

    let deep_parens = nested(34_000, "(", "up", ")");
    // (what, path, form body, expected status, words the error must contain)
    let cases: Vec<(&str, &str, String, u16, &str)> = vec![
        (
            "2000 unary minus",
            "/api/v1/query",
            format!("query={}", enc(&format!("{}vector(1)", "-".repeat(2000)))),
            400,
            "query.max_query_depth",
        ),
        (
            "1750 unary minus",
            "/api/v1/query_range",
            format!("query={}&start=0&end=60&step=15", enc(&format!("{}vector(1)", "-".repeat(1750)))),
            400,
            "query.max_query_depth",
        ),
        (
            "1750 + terms",
            "/api/v1/query",
            format!("query={}", enc(&format!("a{}", "+a".repeat(1750)))),
            400,
            "query.max_query_depth",
        ),
        (
            "1500 nested calls",
            "/api/v1/query",
            format!("query={}", enc(&nested(1500, "abs(", "vector(1)", ")"))),
            400,
            "query.max_query_depth",
        ),
        (
            "1250 nested subqueries",
            "/api/v1/query",
            format!("query={}", enc(&nested_subqueries(1250))),
            400,
            "query.max_query_depth",
        ),
        (
            "7800 parentheses",
            "/api/v1/query",
            format!("query={}", enc(&nested(7800, "(", "1", ")"))),
            400,
            "query.max_query_depth",
        ),
        (
            "parse_query at 2750",
            "/api/v1/parse_query",
            format!("query={}", enc(&nested(2750, "-(", "up", ")"))),
            400,
            "query.max_query_depth",
        ),
        (
            "format_query at 2750",
            "/api/v1/format_query",
            format!("query={}", enc(&nested(2750, "(", "up", ")"))),
            400,
            "query.max_query_depth",
        ),
        (
            "query_exemplars at 34000",
            "/api/v1/query_exemplars",
            format!("query={}", enc(&deep_parens)),
            400,
            "query.max_query_depth",
        ),
        (
            "series match[] at 34000",
            "/api/v1/series",
            format!("match[]={}", enc(&deep_parens)),
            400,
            "query.max_query_depth",
        ),
        (
            "labels match[] at 34000",
            "/api/v1/labels",
            format!("match[]={}", enc(&deep_parens)),
            400,
            "query.max_query_depth",
        ),
        (
            "48 KB a+a+...",
            "/api/v1/format_query",
            format!("query={}", enc(&format!("a{}", "+a".repeat(24_000)))),
            400,
            "query.max_query_depth",
        ),
        (
            "1.4 TB subquery",
            "/api/v1/query",
            format!("query={}", enc("count_over_time(vector(1)[1000d:1ms])")),
            422,
            "too many samples",
        ),
        (
            "time() subquery",
            "/api/v1/query_range",
            format!("query={}&start=0&end=600&step=60", enc("sum_over_time(vector(time())[1000d:1ms])")),
            422,
            "too many samples",
        ),
        ("300 KB query", "/api/v1/query", format!("query=up{}", "+".repeat(300 * 1024)), 400, "query.max_query_bytes"),
        ("3 MiB query form", "/api/v1/query", format!("query={}", "a".repeat(3 << 20)), 413, "query.max_query_bytes"),
    ];
    let mut answered = 0;
    for (what, path, form, want, words) in cases {
        let (code, body, took) = post_form(&s, path, form);
        assert_eq!(code, want, "{what}: {body}");
        assert_eq!(body["status"], "error", "{what}: {body}");
        let msg = body["error"].as_str().unwrap_or_default();
        assert!(msg.contains(words), "{what}: {msg}");
        assert!(took < Duration::from_secs(2), "{what} took {took:?}");
        assert_alive(&s, what);
        answered += 1;
    }
    // The 1.7 KB GET of the issue, as sent with curl.
    let (code, body) =
        s.get_json(&format!("/api/v1/query?query={}", enc(&format!("{}vector(1)", "-".repeat(2000)))), None);
    assert_eq!(code, 400, "{body}");
    assert_alive(&s, "the GET of 2000 unary minus");
    answered += 1;
    eprintln!("hostile_query: {answered} hostile requests answered with 4xx, server alive after each");
}

/// A wide text the default limits admit (~130 KB, 64,000 terms): a second or so of
/// parsing in a debug build.
fn wide_admitted_query() -> String {
    let leaf = format!("({})", vec!["a"; 40].join("+"));
    let mid = format!("({})", vec![leaf.as_str(); 40].join("+"));
    vec![mid.as_str(); 40].join("+")
}

#[test]
fn slow_parsing_runs_off_the_async_workers_and_the_server_stays_reachable() {
    let _serial = crate::probe::serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(&dir.path().join("data"));
    let form = format!("query={}", enc(&wide_admitted_query()));
    // As many expensive parses as there are query slots (2 x cores), at once. Before,
    // they ran on the async workers (as many as cores) and nothing else was answered.
    let slots = 2 * std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let parses: Vec<_> = (0..slots)
        .map(|_| {
            let (client, url, form) = (s.http().clone(), s.url("/api/v1/parse_query"), form.clone());
            std::thread::spawn(move || {
                let r = client.post(url).header("Content-Type", "application/x-www-form-urlencoded").body(form).send();
                r.map(|r| r.status().as_u16()).map_err(|e| e.to_string())
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut checks = 0;
    while parses.iter().any(|h| !h.is_finished()) && checks < 10 {
        crate::probe::assert_reachable(&s, "a flood of slow-to-parse queries");
        checks += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    for p in parses {
        assert_eq!(p.join().expect("client thread"), Ok(200), "the wide query is admitted and parsed");
    }
    assert!(checks > 0, "the parses ended before the server could be probed; the test proves nothing");
    eprintln!("hostile query: probes answered {checks} times within 1 s while {slots} wide queries parsed");
}

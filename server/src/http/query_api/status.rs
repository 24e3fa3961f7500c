//! The status endpoints: buildinfo, runtimeinfo, flags, tsdb.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chrono::SecondsFormat;

use super::handlers::ApiRequest;
use super::response::{error_response, ApiError, ErrorKind};
use super::tsdb_stats::{self, CardinalityCounter};
use super::{Cardinality, QueryApi};
use crate::http::json::{write_str, ApiSuccess, ObjectWriter};
use crate::http::params;

/// `GET /api/v1/status/buildinfo`, with the field order of Prometheus' `PrometheusVersion`.
pub async fn buildinfo(State(api): State<Arc<QueryApi>>) -> Response {
    let b = &api.info.build;
    let mut out = String::new();
    let mut o = ObjectWriter::new(&mut out);
    o.str("version", &b.version)
        .str("revision", &b.revision)
        .str("branch", &b.branch)
        .str("buildUser", &b.build_user)
        .str("buildDate", &b.build_date)
        .str("goVersion", &b.go_version);
    o.finish();
    ApiSuccess::data(out).into_response()
}

/// `GET /api/v1/status/runtimeinfo`. Only fields we can state truthfully: the Go runtime's
/// (goroutines, GOGC, GODEBUG) are left out; `GOMAXPROCS` carries the parallelism we use.
pub async fn runtimeinfo(State(api): State<Arc<QueryApi>>) -> Response {
    let start = api.info.start_time.to_rfc3339_opts(SecondsFormat::AutoSi, true);
    let now = chrono::Utc::now().to_rfc3339_opts(SecondsFormat::AutoSi, true);
    let cwd = std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_default();
    let hostname = hostname();
    let cores = std::thread::available_parallelism().map(|n| n.get() as i64).unwrap_or(1);
    let mut out = String::new();
    let mut o = ObjectWriter::new(&mut out);
    o.str("startTime", &start)
        .str("CWD", &cwd)
        .str("hostname", &hostname)
        .str("serverTime", &now)
        .bool("reloadConfigSuccess", true)
        // The configuration is read once at start-up; there is no reload.
        .str("lastConfigTime", &start);
    if let Some(n) = api.data.total_series() {
        o.int("timeSeriesCount", n as i64);
    }
    o.int("GOMAXPROCS", cores).str("storageRetention", &api.info.storage_retention);
    o.finish();
    ApiSuccess::data(out).into_response()
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or_default()
}

/// `GET /api/v1/status/flags`: every flag as a string, keys sorted (Go writes maps that way).
pub async fn flags(State(api): State<Arc<QueryApi>>) -> Response {
    let mut flags = api.info.flags.clone();
    flags.sort();
    let mut out = String::from("{");
    for (i, (k, v)) in flags.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_str(&mut out, k);
        out.push(':');
        write_str(&mut out, v);
    }
    out.push('}');
    ApiSuccess::data(out).into_response()
}

/// `GET /api/v1/status/tsdb`: cardinality of the requesting tenant's series. Reading the
/// index and counting are bounded by the query timeout, and the counting runs on a
/// query thread under the query concurrency bound: for a tenant with millions of series it
/// is as heavy as a query.
pub async fn tsdb(State(api): State<Arc<QueryApi>>, req: ApiRequest) -> Response {
    let limit = match params::tsdb_limit(&req.params, tsdb_stats::DEFAULT_LIMIT, tsdb_stats::MAX_LIMIT) {
        Ok(l) => l,
        Err(e) => return error_response(e),
    };
    let deadline = Instant::now() + api.limits.timeout();
    let source = match tokio::time::timeout_at(deadline.into(), api.data.cardinality(&req.tenant)).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return error_response(e),
        Err(_) => return error_response(ApiError::new(ErrorKind::Timeout, "query timed out in series listing")),
    };
    let head = api.data.head_summary(&req.tenant);
    let result = api
        .executor
        .run(deadline, move |ctl| {
            let (counter, warnings) = match source {
                Cardinality::Series(labels) => {
                    let mut counter = CardinalityCounter::default();
                    for (i, l) in labels.iter().enumerate() {
                        // Check the deadline and cancel flag now and then, not per series.
                        if i % 4096 == 0 {
                            if let Some(e) = ctl.stop_reason() {
                                return Err(e);
                            }
                        }
                        counter.add(l);
                    }
                    (counter, Vec::new())
                }
                Cardinality::Counted(r) => (r.data, r.warnings),
            };
            Ok((counter.finish(head, limit), warnings))
        })
        .await;
    match result {
        Ok((status, warnings)) => {
            ApiSuccess { data_json: status.to_json(), warnings, infos: Vec::new() }.into_response()
        }
        Err(e) => error_response(e),
    }
}

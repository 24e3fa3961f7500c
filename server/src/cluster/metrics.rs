//! The front ends' cluster metrics (`tessera_cluster_*` on `/metrics` of a distributor,
//! querier or gateway): every gRPC call to an ingester by peer, method and outcome, its
//! latency, the calls in flight, the bytes of the answers, and the requests that could
//! not reach enough replicas of some shard, and the shards of pushed-down fragments
//! evaluated at the front end because no replica could.
//!
//! A call is tracked by [`ClusterMetrics::track`] around its future: in flight from the
//! first poll until it ends or is dropped. Its `code` is the gRPC status code's name
//! (`Ok`, `Unavailable`, `DeadlineExceeded`, ...); a call the front end dropped before
//! it ended (the read already had its quorum, or the request was canceled) counts as
//! `Cancelled`.

use std::future::Future;
use std::time::Instant;

use tonic::Status;

use crate::metrics::{CounterVec, GaugeVec, HistogramVec};

/// What a read or write did about shards that lacked replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shortfall {
    /// The request failed (503).
    Failed,
    /// The request answered with a warning (`partial_response`).
    Partial,
}

pub struct ClusterMetrics {
    pub requests: CounterVec,
    pub duration: HistogramVec,
    pub in_flight: GaugeVec,
    pub response_bytes: CounterVec,
    pub incomplete: CounterVec,
    pub short_shards: CounterVec,
    pub eval_fallback_shards: CounterVec,
}

impl Default for ClusterMetrics {
    fn default() -> Self {
        ClusterMetrics {
            requests: CounterVec::new(
                "tessera_cluster_grpc_requests_total",
                "gRPC calls to ingesters by peer, method and gRPC status code (Ok for success; Cancelled \
                 includes calls dropped once the read had its quorum).",
                &["peer", "method", "code"],
            ),
            duration: HistogramVec::new(
                "tessera_cluster_grpc_request_duration_seconds",
                "Latency of gRPC calls to ingesters (until the last frame of a stream), by peer and method.",
                &["peer", "method"],
            ),
            in_flight: GaugeVec::new(
                "tessera_cluster_grpc_requests_in_flight",
                "gRPC calls to ingesters running now, by peer and method.",
                &["peer", "method"],
            ),
            response_bytes: CounterVec::new(
                "tessera_cluster_grpc_response_bytes_total",
                "Encoded bytes of the ingesters' streamed answers (Select, Series and Eval frames), by peer and \
                 method.",
                &["peer", "method"],
            ),
            incomplete: CounterVec::new(
                "tessera_cluster_shard_coverage_failures_total",
                "Reads and writes for which some shard had fewer replicas answering than the quorum (R for reads, \
                 W for writes), by operation and result (failed: 503; partial: answered with a warning).",
                &["op", "result"],
            ),
            short_shards: CounterVec::new(
                "tessera_cluster_short_shards_total",
                "Shards that lacked their quorum of replicas, summed over those reads and writes, by operation.",
                &["op"],
            ),
            eval_fallback_shards: CounterVec::new(
                "tessera_cluster_eval_fallback_shards_total",
                "Logical shards of pushed-down query fragments that no replica could evaluate (Eval), evaluated at \
                 the front end over Select instead.",
                &[],
            ),
        }
    }
}

/// In flight while alive; on drop, records the call's outcome (`Cancelled` if none was set).
struct CallGuard<'a> {
    m: &'a ClusterMetrics,
    peer: &'a str,
    method: &'static str,
    start: Instant,
    code: Option<tonic::Code>,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        let code = format!("{:?}", self.code.unwrap_or(tonic::Code::Cancelled));
        let m = self.m;
        m.in_flight.add(&[self.peer, self.method], -1);
        m.requests.inc_by(&[self.peer, self.method, &code], 1);
        m.duration.observe(&[self.peer, self.method], self.start.elapsed().as_secs_f64());
    }
}

impl ClusterMetrics {
    /// `call` with its outcome, latency and time in flight recorded under `peer` and
    /// `method`.
    pub async fn track<T>(
        &self,
        peer: &str,
        method: &'static str,
        call: impl Future<Output = Result<T, Status>>,
    ) -> Result<T, Status> {
        self.in_flight.add(&[peer, method], 1);
        let mut guard = CallGuard { m: self, peer, method, start: Instant::now(), code: None };
        let r = call.await;
        guard.code = Some(match &r {
            Ok(_) => tonic::Code::Ok,
            Err(s) => s.code(),
        });
        r
    }

    /// A read or write left `shards` shards short of their quorum.
    pub fn shortfall(&self, op: &str, shards: usize, what: Shortfall) {
        let result = match what {
            Shortfall::Failed => "failed",
            Shortfall::Partial => "partial",
        };
        self.incomplete.inc_by(&[op, result], 1);
        self.short_shards.inc_by(&[op], shards as u64);
    }

    pub fn render(&self, out: &mut String) {
        self.requests.render(out);
        self.duration.render(out);
        self.in_flight.render(out);
        self.response_bytes.render(out);
        self.incomplete.render(out);
        self.short_shards.render(out);
        self.eval_fallback_shards.render(out);
    }
}

#[cfg(test)]
mod tests;

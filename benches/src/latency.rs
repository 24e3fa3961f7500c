//! Latency percentiles over every recorded request (no sampling, no buckets: runs
//! are at most a few hundred thousand requests, so sorting them is cheap and exact).

use std::time::Duration;

#[derive(Debug, Default, Clone)]
pub struct Latencies {
    micros: Vec<u64>,
}

/// Summary in milliseconds, as printed and written to JSON.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct Percentiles {
    pub count: usize,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latencies {
    pub fn record(&mut self, d: Duration) {
        self.micros.push(d.as_micros().min(u128::from(u64::MAX)) as u64);
    }

    pub fn merge(&mut self, other: Latencies) {
        self.micros.extend(other.micros);
    }

    pub fn summary(&self) -> Percentiles {
        let mut v = self.micros.clone();
        v.sort_unstable();
        // Nearest-rank percentile: the smallest value with at least p of the data at
        // or below it (so p50 of [1, 2] is 1, and p100 is the maximum).
        let pct = |p: f64| -> f64 {
            if v.is_empty() {
                return 0.0;
            }
            let rank = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
            v[rank - 1] as f64 / 1000.0
        };
        Percentiles { count: v.len(), p50_ms: pct(0.5), p90_ms: pct(0.9), p99_ms: pct(0.99), max_ms: pct(1.0) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let mut l = Latencies::default();
        for ms in 1..=100u64 {
            l.record(Duration::from_millis(ms));
        }
        let p = l.summary();
        assert_eq!(p.count, 100);
        assert_eq!(p.p50_ms, 50.0);
        assert_eq!(p.p90_ms, 90.0);
        assert_eq!(p.p99_ms, 99.0);
        assert_eq!(p.max_ms, 100.0);
    }

    #[test]
    fn empty_summary_is_zero_not_a_panic() {
        let p = Latencies::default().summary();
        assert_eq!(p.count, 0);
        assert_eq!(p.max_ms, 0.0);
    }
}

//! Per-tenant ingestion limits: a samples/s token bucket and an active-series cap.
//!
//! Both answer "no" with a number of seconds for `Retry-After`. They use
//! `parking_lot::Mutex` (not an async mutex) because each critical section is a
//! short, non-blocking map update with no `.await` inside.

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::Mutex;

use crate::config::Limits;

/// Token bucket per tenant, refilled at `rate` samples/s up to `burst`.
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

struct Bucket {
    tokens: f64,
    last: Instant,
}

impl RateLimiter {
    pub fn new(limits: &Limits) -> Self {
        let rate = limits.ingestion_rate_samples_per_sec;
        let burst = if limits.ingestion_burst_samples > 0 { limits.ingestion_burst_samples as f64 } else { rate };
        RateLimiter { rate, burst, buckets: Mutex::new(HashMap::new()) }
    }

    /// Takes `n` samples' worth of tokens for `tenant`, or says after how many seconds
    /// to retry. A request larger than the whole burst is admitted when the bucket is
    /// full (the balance goes negative), so an oversized but legal request is slowed
    /// down, never refused forever.
    pub fn try_take(&self, tenant: &str, n: u64) -> Result<(), u64> {
        if self.rate <= 0.0 || n == 0 {
            return Ok(());
        }
        let now = Instant::now();
        let mut buckets = self.buckets.lock();
        let b = buckets.entry(tenant.to_owned()).or_insert(Bucket { tokens: self.burst, last: now });
        b.tokens = (b.tokens + now.duration_since(b.last).as_secs_f64() * self.rate).min(self.burst);
        b.last = now;
        let n = n as f64;
        if b.tokens >= n || b.tokens >= self.burst {
            b.tokens -= n;
            return Ok(());
        }
        let wait = ((n.min(self.burst) - b.tokens) / self.rate).ceil().max(1.0);
        Err(wait as u64)
    }
}

/// Counts each tenant's active series (seen within `idle_secs`) and refuses new ones
/// beyond the cap. Only allocates when a cap is configured.
pub struct ActiveSeries {
    max: u64,
    idle_secs: u64,
    start: Instant,
    /// tenant → series hash → last seen (seconds since `start`).
    tenants: Mutex<HashMap<String, HashMap<u64, u64>>>,
}

impl ActiveSeries {
    pub fn new(limits: &Limits) -> Self {
        ActiveSeries {
            max: limits.max_active_series_per_tenant,
            idle_secs: limits.active_series_idle_secs,
            start: Instant::now(),
            tenants: Mutex::new(HashMap::new()),
        }
    }

    pub fn enabled(&self) -> bool {
        self.max > 0
    }

    /// Marks the series (by hash) as seen; returns, per input, whether it is admitted.
    /// Known series are always admitted; new ones while the tenant is under the cap.
    pub fn admit(&self, tenant: &str, hashes: &[u64]) -> Vec<bool> {
        if self.max == 0 {
            return vec![true; hashes.len()];
        }
        let now = self.start.elapsed().as_secs();
        let mut tenants = self.tenants.lock();
        let set = tenants.entry(tenant.to_owned()).or_default();
        hashes
            .iter()
            .map(|&h| {
                if let Some(seen) = set.get_mut(&h) {
                    *seen = now;
                    true
                } else if (set.len() as u64) < self.max {
                    set.insert(h, now);
                    true
                } else {
                    false
                }
            })
            .collect()
    }

    /// Forgets series idle for longer than `idle_secs`; called periodically.
    pub fn purge(&self) {
        let now = self.start.elapsed().as_secs();
        let mut tenants = self.tenants.lock();
        for set in tenants.values_mut() {
            set.retain(|_, seen| now.saturating_sub(*seen) <= self.idle_secs);
        }
        tenants.retain(|_, set| !set.is_empty());
    }

    /// Seconds until the oldest series could expire: the `Retry-After` for a refusal.
    pub fn retry_after_secs(&self) -> u64 {
        self.idle_secs.clamp(1, 60)
    }
}

#[cfg(test)]
mod tests;

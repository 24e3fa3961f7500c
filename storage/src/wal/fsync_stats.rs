//! Latency histogram of the WAL's fsyncs: the cost every acknowledged write waits for.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::types::{FsyncStats, FSYNC_BUCKETS_SECONDS};

/// Lock-free fsync latency counters, updated by whichever thread ran the fsync.
#[derive(Default)]
pub(crate) struct FsyncHistogram {
    buckets: [AtomicU64; FSYNC_BUCKETS_SECONDS.len()],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl FsyncHistogram {
    pub(crate) fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Some(i) = FSYNC_BUCKETS_SECONDS.iter().position(|&b| secs <= b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> FsyncStats {
        let mut buckets = [0u64; FSYNC_BUCKETS_SECONDS.len()];
        let mut acc = 0;
        for (out, b) in buckets.iter_mut().zip(&self.buckets) {
            acc += b.load(Ordering::Relaxed);
            *out = acc;
        }
        FsyncStats {
            buckets,
            count: self.count.load(Ordering::Relaxed),
            sum_nanos: self.sum_nanos.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests;

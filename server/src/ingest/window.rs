//! The accepted time window of written samples: `[now − max age, now + max future]`.
//!
//! A sample outside it is refused on its own (the rest of its series and of the request
//! is written) and reported as a problem naming its series, so the sender gets a 400
//! that says why. Both ends protect every tenant, not just the sender: a sample far in
//! the future would move its shard's retention window past real data, and one far in
//! the past (t = −2^62 ms) would make index scans walk back to it. Samples older than
//! retention were accepted before and silently dropped later; now they are refused.
//!
//! [`filter`] is one linear pass over the batch (no per-series searches), and the write
//! handler runs it on the blocking thread that decoded the batch.

use super::decode::{describe_series, Batch};

/// Bounds of the accepted window, in ms since the epoch, both inclusive.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// Oldest accepted timestamp; `i64::MIN` = no bound.
    pub min_t: i64,
    /// Newest accepted timestamp; `i64::MAX` = no bound.
    pub max_t: i64,
    /// The configured bounds, for the messages (`None` = not checked).
    pub max_age_ms: Option<i64>,
    pub max_future_secs: u64,
}

impl Window {
    /// The window at `now_ms` for a maximum age (ms, `None` = unbounded) and a maximum
    /// lead (s, 0 = unbounded).
    pub fn at(now_ms: i64, max_age_ms: Option<i64>, max_future_secs: u64) -> Window {
        let min_t = max_age_ms.map_or(i64::MIN, |a| now_ms.saturating_sub(a));
        let max_t = if max_future_secs == 0 {
            i64::MAX
        } else {
            now_ms.saturating_add(i64::try_from(max_future_secs).unwrap_or(i64::MAX).saturating_mul(1000))
        };
        Window { min_t, max_t, max_age_ms, max_future_secs }
    }
}

/// Samples refused by [`filter`], by reason.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub too_old: u64,
    pub too_new: u64,
}

/// Removes samples outside `w` from every series of `batch`, drops series left without
/// samples, and records one problem per affected series (naming its first refused
/// sample). Linear in the number of samples.
pub fn filter(batch: &mut Batch, w: Window) -> Refused {
    let mut refused = Refused::default();
    if w.min_t == i64::MIN && w.max_t == i64::MAX {
        return refused;
    }
    let mut emptied = false;
    for s in &mut batch.series {
        let (mut old, mut new) = (0u64, 0u64);
        let mut first_bad: Option<i64> = None;
        s.samples.retain(|x| {
            let ok = x.t >= w.min_t && x.t <= w.max_t;
            if !ok {
                first_bad.get_or_insert(x.t);
                if x.t < w.min_t {
                    old += 1;
                } else {
                    new += 1;
                }
            }
            ok
        });
        let Some(t) = first_bad else { continue };
        refused.too_old += old;
        refused.too_new += new;
        emptied |= s.samples.is_empty();
        let raw = &batch.raw;
        batch.problems.add(s.index, old + new, || describe_series(raw, s), || reason(t, &w));
    }
    if emptied {
        // A series all of whose samples were refused is not created either.
        batch.series.retain(|s| !s.samples.is_empty());
    }
    refused
}

fn reason(t: i64, w: &Window) -> String {
    if t > w.max_t {
        format!(
            "sample at t={t} ms is too far in the future: at most {} s ahead of the server clock is accepted \
             (limits.max_future_secs)",
            w.max_future_secs
        )
    } else {
        format!(
            "sample at t={t} ms is too old: at most {} s before the server clock is accepted \
             (limits.max_sample_age_secs, default the retention storage.retention_ms)",
            w.max_age_ms.unwrap_or(0) / 1000
        )
    }
}

#[cfg(test)]
mod tests;

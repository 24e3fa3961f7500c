//! Repair: an ingester fills the holes of its shards (`holes.rs`) from the shards' other
//! replicas, over the `Repair` RPC, in a background task ([`run`]).
//!
//! **Where from.** A round for shard s and range `[from, to]` asks the other replicas
//! of s in placement order. A source whose answer names no hole of s overlapping the
//! range is complete: its data is enough and the round ends. A source with such holes
//! is merged too and the next is asked; when *every* other replica answered, the round
//! is complete as well, because an acknowledged sample is durable on W replicas and so
//! on at least one of them, whatever holes they report. Otherwise (a replica is
//! unreachable and the reachable ones have holes) the round fails: logged, counted in
//! `tessera_cluster_repair_source_failures_total`, retried with exponential backoff
//! (1 s doubling to 60 s).
//!
//! **Gaps longer than the out-of-order window.** Storage takes a sample only if it is
//! newer than its series' newest minus `out_of_order_window_ms`. So a restarted shard
//! refuses writes (`holes::ShardState::refuse_writes`; the other replicas take them)
//! while it catches up: with nothing newer written here, the repaired samples append in
//! time order however long the gap. Rounds repeat (each from the newest sample minus
//! the window) until one takes less than a quarter of the window; then the shard
//! accepts writes, waits `push_timeout_ms` (a push it refused is durable on the others
//! by then, or was not acknowledged), and one last round fetches from its newest
//! sample minus the window: those samples are within the window of everything written
//! since. Only then are the holes cleared. If catching up takes longer than
//! `repair_block_writes_ms`, the shard accepts writes anyway and keeps its holes.
//!
//! **Metadata.** Every Repair answer starts with the source's metric metadata of the
//! shard's families (in memory on every ingester, so a restarted one has none); it is
//! recorded here before the samples, so a shard whose holes are cleared has the
//! metadata of a complete source too.
//!
//! **Proof of storage.** A repaired sample storage refuses as too old is looked up
//! locally; if it is not there it is counted in
//! `tessera_cluster_repair_unrepairable_samples_total` and the hole stays (reported,
//! never silent). Identical samples are no-ops; a different value at the same
//! timestamp is a replica disagreement, not a hole, and is left as is.
//!
//! Memory: the source reads one time slice at a time and frames of ~1 MiB flow through a
//! two-frame channel; here one frame at a time is appended (WAL, fsynced like any write).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tessera_model::{Label, Matcher, Sample};
use tessera_proto::ingester as pb;
use tessera_storage::Interrupt;
use tokio_util::sync::CancellationToken;

use super::holes::{self, Hole, HoleBook};
use super::peers::Peers;
use crate::metadata::MetadataStore;
use crate::shards::{request_controls, series_hash, PushSeries, ShardId, Shards};

/// First retry delay after a failed round; doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// How often an idle repair task looks for new holes (a failed push).
const IDLE_POLL: Duration = Duration::from_secs(1);
/// Longest wait for the next frame of a repair stream.
const FRAME_TIMEOUT: Duration = Duration::from_secs(60);

/// The repair task's view.
pub struct Repairer {
    /// This ingester's index in the placement's members.
    pub me: usize,
    pub peers: Arc<Peers>,
    pub shards: Arc<Shards>,
    pub book: Arc<HoleBook>,
    /// The ingester's metric metadata (repair copies the shard's families too).
    pub metadata: Arc<MetadataStore>,
    /// `[storage] out_of_order_window_ms`.
    pub window_ms: i64,
    /// `[cluster] repair_block_writes_ms`.
    pub block_writes: Duration,
    /// `[cluster] push_timeout_ms`.
    pub grace: Duration,
}

/// What a round stored.
#[derive(Default, Debug)]
struct RoundReport {
    appended: u64,
    unrepairable: u64,
}

/// Shards repaired at once by one ingester.
const SHARDS_AT_ONCE: usize = 8;

/// Repairs until `stop`: the pending shards, several at once, backing off after failures.
pub async fn run(r: Repairer, stop: CancellationToken) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let pending = r.book.pending();
        let mut failed = false;
        // Shards repair concurrently (each waits its own `grace` after accepting writes
        // again; one after the other, 16 shards took 16 graces, over a minute, with the
        // later shards refusing writes all along), at most SHARDS_AT_ONCE at a time so
        // the memory a round holds stays bounded.
        let mut rounds = futures::stream::iter(pending.into_iter().map(|(shard, refusing)| {
            let (r, stop) = (&r, &stop);
            async move {
                let started = Instant::now();
                (shard, started, r.repair_shard(shard, refusing, stop).await)
            }
        }))
        .buffer_unordered(SHARDS_AT_ONCE);
        while let Some((shard, started, result)) = rounds.next().await {
            if stop.is_cancelled() {
                return;
            }
            match result {
                Ok(n) => {
                    r.book.set_error(shard, None);
                    tracing::info!(
                        shard = shard.0,
                        samples = n,
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "shard repaired: its holes are filled and cleared"
                    );
                }
                Err(why) => {
                    failed = true;
                    tracing::warn!(shard = shard.0, error = %why, retry_in_ms = backoff.as_millis() as u64,
                        "shard repair did not finish; will retry");
                    r.book.set_error(shard, Some(why));
                    if r.book.refuses_writes(shard) && r.book.refusing_for(shard).is_some_and(|d| d >= r.block_writes) {
                        r.book.accept_writes(shard);
                        tracing::warn!(
                            shard = shard.0,
                            block_ms = r.block_writes.as_millis() as u64,
                            "shard accepts writes again before its repair finished (cluster.repair_block_writes_ms); \
                             it keeps its hole until a later round fills it"
                        );
                    }
                }
            }
        }
        let wait = if failed {
            let w = backoff;
            backoff = (backoff * 2).min(MAX_BACKOFF);
            w
        } else {
            backoff = FIRST_BACKOFF;
            IDLE_POLL
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.cancelled() => return,
        }
    }
}

impl Repairer {
    /// Fills and clears the holes `shard` has now; the number of samples stored.
    async fn repair_shard(&self, shard: ShardId, refusing: bool, stop: &CancellationToken) -> Result<u64, String> {
        let snapshot = self.book.holes(shard);
        let Some(first) = snapshot.first().copied() else { return Ok(0) };
        let last_to = snapshot.iter().map(|h| h.to).max().unwrap_or(first.to);
        let window = Duration::from_millis(u64::try_from(self.window_ms).unwrap_or(0));
        let mut total = RoundReport::default();
        if refusing {
            // Catch up with writes refused: the samples append in time order.
            let mut from = first.from;
            loop {
                let started = Instant::now();
                self.round(shard, from, i64::MAX, &mut total).await?;
                if stop.is_cancelled() {
                    return Err("stopped".into());
                }
                // With no window, every later sample is refused anyway: one round.
                if window.is_zero() || started.elapsed() < window / 4 {
                    break;
                }
                from = self.newest_minus_window(shard).unwrap_or(from).max(from);
            }
            let from = self.newest_minus_window(shard).unwrap_or(from).max(first.from);
            self.book.accept_writes(shard);
            tracing::info!(
                shard = shard.0,
                grace_ms = self.grace.as_millis() as u64,
                "caught up: shard accepts writes again; one last round after the push timeout"
            );
            tokio::select! {
                _ = tokio::time::sleep(self.grace) => {}
                _ = stop.cancelled() => return Err("stopped".into()),
            }
            self.round(shard, from, i64::MAX, &mut total).await?;
        } else {
            self.round(shard, first.from, last_to, &mut total).await?;
        }
        if total.unrepairable > 0 {
            return Err(format!(
                "{} samples the other replicas have could not be stored here (older than the out-of-order window \
                 of their series); the hole stays",
                total.unrepairable
            ));
        }
        self.book.clear(shard, &snapshot);
        let (book, shards) = (Arc::clone(&self.book), Arc::clone(&self.shards));
        match tokio::task::spawn_blocking(move || book.save(&shards)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "cannot save the repair state file"),
            Err(e) => tracing::error!(error = %e, "repair state save task failed"),
        }
        Ok(total.appended)
    }

    fn newest_minus_window(&self, shard: ShardId) -> Option<i64> {
        self.shards.head_max_t(shard).map(|t| t.saturating_sub(self.window_ms))
    }

    /// One round: `[from, to]` of `shard` from a complete source, or from every other
    /// replica (see the module doc).
    async fn round(&self, shard: ShardId, from: i64, to: i64, total: &mut RoundReport) -> Result<(), String> {
        let sources: Vec<usize> = self
            .peers
            .placement
            .replicas
            .get(shard.0 as usize)
            .map(|r| r.iter().copied().filter(|&i| i != self.me).collect())
            .unwrap_or_default();
        // RF = 1: no other replica, and nothing was acknowledged without this one.
        let mut failures = Vec::new();
        let mut partial = Vec::new();
        for src in sources {
            let id = &self.peers.peers[src].id;
            match self.fetch(src, shard, from, to, total).await {
                Ok(holes) if holes.is_empty() => return Ok(()),
                Ok(holes) => {
                    let hs: Vec<String> = holes.iter().map(ToString::to_string).collect();
                    partial.push(format!("{id} may itself be missing {}", hs.join(", ")));
                }
                Err(e) => {
                    self.book.counters.source_failures.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(shard = shard.0, source = %id, error = %e, "repair source failed");
                    failures.push(format!("{id}: {e}"));
                }
            }
        }
        if failures.is_empty() {
            return Ok(());
        }
        Err(format!(
            "no complete source for shard {shard} in [{from}, {to}] ms: {}{}",
            failures.join("; "),
            if partial.is_empty() { String::new() } else { format!("; {}", partial.join("; ")) }
        ))
    }

    /// Streams `[from, to]` of `shard` from ingester `src` into the local shard; the
    /// source's holes of the shard in that range.
    async fn fetch(
        &self,
        src: usize,
        shard: ShardId,
        from: i64,
        to: i64,
        total: &mut RoundReport,
    ) -> Result<Vec<Hole>, String> {
        let peer = &self.peers.peers[src];
        let req = pb::RepairRequest {
            cluster: Some(self.peers.pb_identity()),
            shard: shard.0,
            start_ms: from,
            end_ms: to,
            requester: self.peers.peers[self.me].id.clone(),
        };
        let resp = peer.client.clone().repair(req).await.map_err(|s| super::convert::status_text(&s))?;
        let holes = match resp.metadata().get(holes::HOLES_HEADER).map(|v| v.to_str()) {
            None => Vec::new(),
            Some(Ok(v)) => holes::parse_header(v)?,
            Some(Err(_)) => return Err(format!("{} header is not ASCII", holes::HOLES_HEADER)),
        };
        let holes: Vec<Hole> =
            holes.into_iter().filter(|h| h.shard == shard.0 && h.hole.overlaps(from, to)).map(|h| h.hole).collect();
        let mut stream = resp.into_inner();
        loop {
            let frame = match tokio::time::timeout(FRAME_TIMEOUT, stream.message()).await {
                Err(_) => return Err(format!("no frame within {} s", FRAME_TIMEOUT.as_secs())),
                Ok(Err(s)) => return Err(super::convert::status_text(&s)),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(f))) => f,
            };
            let r = self.store(shard, frame).await?;
            self.book.add_repaired(shard, r.appended);
            self.book.counters.unrepairable.fetch_add(r.unrepairable, Ordering::Relaxed);
            total.appended += r.appended;
            total.unrepairable += r.unrepairable;
        }
        Ok(holes)
    }

    /// Appends one frame (per tenant) and accounts for refusals (see the module doc).
    async fn store(&self, shard: ShardId, frame: pb::RepairResponse) -> Result<RoundReport, String> {
        let total_shards = self.shards.total();
        for rm in frame.metadata {
            let mut families: Vec<(String, Vec<crate::metadata::MetadataEntry>)> = Vec::new();
            for m in rm.entries {
                let (metric, entry) = super::convert::metadata_from_pb(m)?;
                if super::convert::metadata_shard(&rm.tenant, &metric, total_shards) != shard {
                    return Err(format!("the source sent metadata of another shard than {shard}"));
                }
                match families.last_mut() {
                    Some((last, list)) if *last == metric => list.push(entry),
                    _ => families.push((metric, vec![entry])),
                }
            }
            self.metadata.record_families(&rm.tenant, families);
        }
        let mut by_tenant: BTreeMap<String, Vec<PushSeries>> = BTreeMap::new();
        for rs in frame.series {
            let Some(s) = rs.series else { continue };
            if rs.tenant.is_empty() || s.timestamps.len() != s.values.len() {
                return Err("a repair frame holds a series without tenant or with unequal samples".into());
            }
            let labels: Vec<Label> = s.labels.into_iter().map(|l| Label::new(l.name, l.value)).collect();
            let hash = series_hash(&rs.tenant, &labels);
            if ShardId::of(hash, total_shards) != shard {
                return Err(format!("the source sent a series of another shard than {shard}"));
            }
            let samples: Vec<Sample> = s.timestamps.into_iter().zip(s.values).map(|(t, v)| Sample { t, v }).collect();
            by_tenant.entry(rs.tenant).or_default().push(PushSeries { labels, samples, hash });
        }
        let mut report = RoundReport::default();
        for (tenant, series) in by_tenant {
            let kept = series.clone();
            let o = self.shards.push(&tenant, series).await.map_err(|e| format!("storing repaired samples: {e}"))?;
            report.appended += o.appended;
            if o.rejected_too_old > 0 || o.rejected_unreadable > 0 {
                report.unrepairable += self.missing_locally(tenant, kept).await?;
            }
        }
        Ok(report)
    }

    /// How many of `series`' samples this replica does not have (after storage refused
    /// some as too old).
    async fn missing_locally(&self, tenant: String, series: Vec<PushSeries>) -> Result<u64, String> {
        let shards = Arc::clone(&self.shards);
        tokio::task::spawn_blocking(move || {
            let (ctl, _cancel) = request_controls(Instant::now() + Duration::from_secs(60));
            let stop = Interrupt::new(ctl.deadline, ctl.cancel.clone());
            let mut missing = 0u64;
            for s in series {
                let (Some(lo), Some(hi)) = (s.samples.first().map(|p| p.t), s.samples.last().map(|p| p.t)) else {
                    continue;
                };
                let ms: Vec<Matcher> =
                    s.labels.iter().map(|l| Matcher::equal(l.name.clone(), l.value.clone())).collect();
                let found = shards.select(None, &tenant, &ms, lo, hi, &stop).map_err(|e| e.to_string())?;
                let have: std::collections::HashSet<i64> = found
                    .iter()
                    .filter(|f| f.labels.as_slice() == s.labels.as_slice())
                    .flat_map(|f| f.samples.iter().map(|p| p.t))
                    .collect();
                missing += s.samples.iter().filter(|p| !have.contains(&p.t)).count() as u64;
            }
            Ok(missing)
        })
        .await
        .map_err(|e| format!("verification task failed: {e}"))?
    }
}

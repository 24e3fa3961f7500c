//! Hole tracking: the time ranges each shard of an ingester may be missing, why, and
//! whether the shard refuses writes while it catches up ([`HoleBook`]).
//!
//! A hole is a range of *sample* time (ms, both ends inclusive) of one shard in which
//! this replica may lack acknowledged samples that other replicas have. Holes come from:
//!
//! - **a restart** (crash or clean stop): writes went to the other replicas while this
//!   one was down. The hole starts at the newest sample the shard held durably, minus
//!   `[storage] out_of_order_window_ms` (writes sent while it was down may carry samples
//!   up to that much older than the newest; older ones were refused by every replica),
//!   and stays open (`to` = `i64::MAX`) until repair has caught up. The newest sample is
//!   the WAL replay's, or the one recorded in the state file at the last save, or, when
//!   neither exists, the start of the newest day with data (conservative).
//!   A data directory without a state file is a first start: no hole (see
//!   ARCHITECTURE.md for what that means for a wiped disk);
//! - **a failed push**: a shard's part of a push that storage could not take leaves a
//!   hole over the samples' time range.
//!
//! Holes persist in `cluster-repair-state` in the data directory (written durably on
//! every change, off the async workers), so a restart in the middle of a repair keeps
//! them. Every read answer names the holes that overlap its range (the `tessera-holes`
//! response header, [`encode_header`]); the querier does not count such a replica
//! towards the read quorum of that shard (`querier.rs`). `repair.rs` fills and clears
//! them.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::Context;
use parking_lot::Mutex;

use crate::http::json::ObjectWriter;
use crate::shards::{ShardId, Shards};

/// Response header that carries an answer's holes.
pub const HOLES_HEADER: &str = "tessera-holes";
/// The state file in an ingester's data directory.
pub const STATE_FILE: &str = "cluster-repair-state";
/// Storage indexes data by UTC day.
const DAY_MS: i64 = 86_400_000;

/// A range of sample time, ms, both ends inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Hole {
    pub from: i64,
    pub to: i64,
}

impl Hole {
    /// Whether the hole shares a millisecond with `[start, end]`.
    pub fn overlaps(&self, start: i64, end: i64) -> bool {
        self.from <= end && start <= self.to
    }
}

impl std::fmt::Display for Hole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let end = |t: i64| if t == i64::MAX { "now".to_owned() } else { t.to_string() };
        let start = if self.from == i64::MIN { "the beginning".to_owned() } else { self.from.to_string() };
        write!(f, "[{start}, {}] ms", end(self.to))
    }
}

/// The wall clock, ms since the Unix epoch (a hole of metadata only is "now").
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A hole of one shard, as an answer reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardHole {
    pub shard: u32,
    pub hole: Hole,
}

/// `SHARD:FROM:TO` items joined by `,` (the [`HOLES_HEADER`] value).
pub fn encode_header(holes: &[ShardHole]) -> String {
    let items: Vec<String> = holes.iter().map(|h| format!("{}:{}:{}", h.shard, h.hole.from, h.hole.to)).collect();
    items.join(",")
}

/// Parses a [`HOLES_HEADER`] value.
pub fn parse_header(v: &str) -> Result<Vec<ShardHole>, String> {
    if v.trim().is_empty() {
        return Ok(Vec::new());
    }
    v.split(',')
        .map(|item| {
            let mut parts = item.trim().splitn(3, ':');
            let bad = || format!("malformed {HOLES_HEADER} item {item:?} (want SHARD:FROM:TO)");
            let shard = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
            let from = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
            let to = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
            if from > to {
                return Err(bad());
            }
            Ok(ShardHole { shard, hole: Hole { from, to } })
        })
        .collect()
}

/// Adds `h` to `holes`, merging it with the ones it overlaps or touches; keeps them sorted.
pub fn insert(holes: &mut Vec<Hole>, h: Hole) {
    holes.push(h);
    holes.sort();
    let mut merged: Vec<Hole> = Vec::with_capacity(holes.len());
    for h in holes.drain(..) {
        match merged.last_mut() {
            Some(last) if h.from <= last.to.saturating_add(1) => last.to = last.to.max(h.to),
            _ => merged.push(h),
        }
    }
    *holes = merged;
}

/// Repair state of one shard.
#[derive(Clone, Debug, Default)]
pub struct ShardState {
    /// Ranges this replica may be missing, sorted, disjoint.
    pub holes: Vec<Hole>,
    /// Pushes to the shard are refused (catching up after a restart).
    pub refuse_writes: bool,
    /// When the shard started refusing writes.
    pub refusing_since: Option<Instant>,
    /// Newest sample time recorded at the last save (see the module doc).
    pub newest: Option<i64>,
    /// Why the last repair attempt failed, or why a hole cannot be filled.
    pub last_error: Option<String>,
    /// Samples repair stored in this shard since start.
    pub repaired_samples: u64,
}

/// Repair counters for `/metrics`.
#[derive(Default)]
pub struct RepairCounters {
    /// Samples newly stored by repair.
    pub samples: AtomicU64,
    /// Repair fetches from one source that failed (unreachable, error, cut off).
    pub source_failures: AtomicU64,
    /// Samples a source had that repair could not store (older than the out-of-order
    /// window and not present here).
    pub unrepairable: AtomicU64,
    /// Holes filled and cleared.
    pub holes_cleared: AtomicU64,
}

/// The holes of every shard this ingester holds; shared by the gRPC service and the
/// repair task.
pub struct HoleBook {
    shards: Mutex<BTreeMap<ShardId, ShardState>>,
    /// The state file; `None` for a book that is not persisted (no holes to keep).
    path: Option<PathBuf>,
    pub counters: RepairCounters,
}

impl HoleBook {
    /// Reads the state file of `data_dir` and adds the restart hole of every shard in
    /// `owned` (see the module doc); `refuse_writes` makes the restarted shards refuse
    /// pushes until repaired. Blocking (file I/O, head locks); call after WAL replay and
    /// before serving. Saves the result before returning.
    pub fn open(
        data_dir: &Path,
        owned: &[ShardId],
        shards: &Shards,
        window_ms: i64,
        refuse_writes: bool,
    ) -> anyhow::Result<HoleBook> {
        let path = data_dir.join(STATE_FILE);
        let recorded = match std::fs::read_to_string(&path) {
            Ok(text) => Some(parse_state(&text).with_context(|| format!("cannot parse {}", path.display()))?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(anyhow::Error::new(e).context(format!("cannot read {}", path.display()))),
        };
        let mut map = BTreeMap::new();
        for &id in owned {
            let mut st = ShardState::default();
            if let Some(rec) = &recorded {
                st.newest = rec.get(&id).and_then(|r| r.newest);
                for &h in rec.get(&id).map(|r| r.holes.as_slice()).unwrap_or_default() {
                    insert(&mut st.holes, h);
                }
                let newest = match (st.newest, shards.head_max_t(id)) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b).or_else(|| shards.time_bounds(id).map(|(_, hi)| hi.saturating_sub(DAY_MS - 1))),
                };
                let from = newest.map_or(i64::MIN, |t| t.saturating_sub(window_ms));
                insert(&mut st.holes, Hole { from, to: i64::MAX });
                st.refuse_writes = refuse_writes;
                st.refusing_since = refuse_writes.then(Instant::now);
            }
            map.insert(id, st);
        }
        let book = HoleBook { shards: Mutex::new(map), path: Some(path), counters: RepairCounters::default() };
        book.save(shards)?;
        Ok(book)
    }

    /// A book of `owned` shards without holes that is never saved (an ingester service
    /// in a test, which has no restart to remember).
    pub fn none(owned: impl Iterator<Item = ShardId>) -> HoleBook {
        let map = owned.map(|id| (id, ShardState::default())).collect();
        HoleBook { shards: Mutex::new(map), path: None, counters: RepairCounters::default() }
    }

    /// Writes the state file (holes and each shard's newest sample). Blocking.
    pub fn save(&self, shards: &Shards) -> anyhow::Result<()> {
        let Some(path) = &self.path else { return Ok(()) };
        let mut text = String::from(
            "# tessera ingester repair state (server/src/cluster/holes.rs); rewritten on every change.\n\
             # newest SHARD MS | hole SHARD FROM_MS TO_MS\n",
        );
        {
            let mut map = self.shards.lock();
            for (id, st) in map.iter_mut() {
                if let Some(t) = shards.head_max_t(*id) {
                    st.newest = Some(st.newest.map_or(t, |n| n.max(t)));
                }
                if let Some(t) = st.newest {
                    let _ = writeln!(text, "newest {} {t}", id.0);
                }
                for h in &st.holes {
                    let _ = writeln!(text, "hole {} {} {}", id.0, h.from, h.to);
                }
            }
        }
        crate::durable_file::write(path, &text)
    }

    /// The holes of `shard` that overlap `[start, end]`.
    pub fn overlapping(&self, shard: ShardId, start: i64, end: i64) -> Vec<Hole> {
        let map = self.shards.lock();
        map.get(&shard)
            .map(|st| st.holes.iter().copied().filter(|h| h.overlaps(start, end)).collect())
            .unwrap_or_default()
    }

    /// Every hole of every shard that overlaps `[start, end]`.
    pub fn all_overlapping(&self, start: i64, end: i64) -> Vec<ShardHole> {
        let map = self.shards.lock();
        let mut out = Vec::new();
        for (id, st) in map.iter() {
            for h in st.holes.iter().filter(|h| h.overlaps(start, end)) {
                out.push(ShardHole { shard: id.0, hole: *h });
            }
        }
        out
    }

    /// Whether pushes to `shard` are refused now.
    pub fn refuses_writes(&self, shard: ShardId) -> bool {
        self.shards.lock().get(&shard).is_some_and(|st| st.refuse_writes)
    }

    /// Records a hole (a failed push). The caller saves.
    pub fn add(&self, shard: ShardId, h: Hole) {
        if let Some(st) = self.shards.lock().get_mut(&shard) {
            insert(&mut st.holes, h);
        }
    }

    /// Shards with holes, and whether each refuses writes (for the repair task).
    pub fn pending(&self) -> Vec<(ShardId, bool)> {
        self.shards
            .lock()
            .iter()
            .filter(|(_, st)| !st.holes.is_empty())
            .map(|(id, st)| (*id, st.refuse_writes))
            .collect()
    }

    /// The holes of `shard` now.
    pub fn holes(&self, shard: ShardId) -> Vec<Hole> {
        self.shards.lock().get(&shard).map(|st| st.holes.clone()).unwrap_or_default()
    }

    /// How long `shard` has refused writes, if it does.
    pub fn refusing_for(&self, shard: ShardId) -> Option<std::time::Duration> {
        self.shards.lock().get(&shard).and_then(|st| st.refusing_since.map(|t| t.elapsed()))
    }

    /// Accepts pushes to `shard` again (its holes stay until [`HoleBook::clear`]).
    pub fn accept_writes(&self, shard: ShardId) {
        if let Some(st) = self.shards.lock().get_mut(&shard) {
            st.refuse_writes = false;
            st.refusing_since = None;
        }
    }

    /// Removes the holes in `filled` (a snapshot taken before the repair round that
    /// filled them); holes added since stay. The caller saves.
    pub fn clear(&self, shard: ShardId, filled: &[Hole]) {
        if let Some(st) = self.shards.lock().get_mut(&shard) {
            let before = st.holes.len();
            st.holes.retain(|h| !filled.contains(h));
            self.counters.holes_cleared.fetch_add((before - st.holes.len()) as u64, Ordering::Relaxed);
            if st.holes.is_empty() {
                st.last_error = None;
            }
        }
    }

    /// Notes why the last repair attempt of `shard` did not finish.
    pub fn set_error(&self, shard: ShardId, why: Option<String>) {
        if let Some(st) = self.shards.lock().get_mut(&shard) {
            st.last_error = why;
        }
    }

    /// Counts samples repair stored in `shard`.
    pub fn add_repaired(&self, shard: ShardId, n: u64) {
        self.counters.samples.fetch_add(n, Ordering::Relaxed);
        if let Some(st) = self.shards.lock().get_mut(&shard) {
            st.repaired_samples += n;
        }
    }

    /// Every shard's state now (for the `Status` RPC).
    pub fn states(&self) -> BTreeMap<ShardId, ShardState> {
        self.shards.lock().clone()
    }

    /// Shards that have holes.
    pub fn pending_count(&self) -> usize {
        self.shards.lock().values().filter(|st| !st.holes.is_empty()).count()
    }

    /// The `repair` object of the ingester's `/api/v1/status/cluster`.
    pub fn status_json(&self, out: &mut String) {
        let map = self.shards.lock();
        let pending = map.values().filter(|st| !st.holes.is_empty()).count();
        let mut o = ObjectWriter::new(out);
        o.int("pending_shards", pending as i64).bool("repaired", pending == 0).raw("shards", |out| {
            out.push('[');
            for (i, (id, st)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let mut e = ObjectWriter::new(out);
                e.int("shard", i64::from(id.0))
                    .str("state", if st.holes.is_empty() { "complete" } else { "repairing" })
                    .bool("refusing_writes", st.refuse_writes)
                    .raw("holes", |out| {
                        out.push('[');
                        for (j, h) in st.holes.iter().enumerate() {
                            if j > 0 {
                                out.push(',');
                            }
                            let _ = write!(out, "{{\"from_ms\":{},\"to_ms\":{}}}", h.from, h.to);
                        }
                        out.push(']');
                    })
                    .int("repaired_samples", st.repaired_samples as i64);
                match &st.last_error {
                    Some(err) => e.str("last_error", err),
                    None => e.null("last_error"),
                };
                e.finish();
            }
            out.push(']');
        });
        o.finish();
    }

    /// `tessera_cluster_repair_*` metric families.
    pub fn render_metrics(&self, out: &mut String) {
        use crate::metrics::simple;
        let c = &self.counters;
        simple(
            out,
            "tessera_cluster_repair_pending_shards",
            "Shards of this ingester that may be missing data (have holes) and are being repaired from their peers.",
            "gauge",
            self.pending_count() as u64,
        );
        simple(
            out,
            "tessera_cluster_repair_refusing_shards",
            "Shards that refuse writes while they catch up after a restart.",
            "gauge",
            self.shards.lock().values().filter(|st| st.refuse_writes).count() as u64,
        );
        simple(
            out,
            "tessera_cluster_repair_samples_total",
            "Samples repair fetched from other replicas and newly stored here.",
            "counter",
            c.samples.load(Ordering::Relaxed),
        );
        simple(
            out,
            "tessera_cluster_repair_source_failures_total",
            "Repair fetches from one peer that failed (unreachable, error, cut off).",
            "counter",
            c.source_failures.load(Ordering::Relaxed),
        );
        simple(
            out,
            "tessera_cluster_repair_unrepairable_samples_total",
            "Samples a peer had that repair could not store (older than the out-of-order window); their hole stays.",
            "counter",
            c.unrepairable.load(Ordering::Relaxed),
        );
        simple(
            out,
            "tessera_cluster_repair_holes_cleared_total",
            "Holes filled from peers and cleared.",
            "counter",
            c.holes_cleared.load(Ordering::Relaxed),
        );
    }
}

/// What the state file recorded for one shard.
#[derive(Debug, Default, PartialEq)]
pub struct Recorded {
    pub newest: Option<i64>,
    pub holes: Vec<Hole>,
}

/// Parses the state file (`newest SHARD MS` and `hole SHARD FROM TO` lines, `#`
/// comments).
pub fn parse_state(text: &str) -> anyhow::Result<BTreeMap<ShardId, Recorded>> {
    let mut out: BTreeMap<ShardId, Recorded> = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| -> anyhow::Result<i64> {
            words
                .get(i)
                .and_then(|w| w.parse().ok())
                .ok_or_else(|| anyhow::anyhow!("line {}: {line:?}: expected a number in field {}", n + 1, i + 1))
        };
        let shard = ShardId(u32::try_from(num(1)?).map_err(|_| anyhow::anyhow!("line {}: bad shard", n + 1))?);
        match (words.first().copied(), words.len()) {
            (Some("newest"), 3) => out.entry(shard).or_default().newest = Some(num(2)?),
            (Some("hole"), 4) => {
                let h = Hole { from: num(2)?, to: num(3)? };
                anyhow::ensure!(h.from <= h.to, "line {}: hole ends before it starts", n + 1);
                insert(&mut out.entry(shard).or_default().holes, h);
            }
            _ => anyhow::bail!("line {}: {line:?}: expected `newest SHARD MS` or `hole SHARD FROM TO`", n + 1),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;

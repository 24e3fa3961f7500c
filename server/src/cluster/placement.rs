//! Placement: which ingesters hold the replicas of each logical shard.
//!
//! The input is the ordered list of ingester ids (and zones), the shard count S and
//! the replication factor RF — nothing else: not addresses, not health. Health never
//! moves data; a change of membership is an explicit config change that bumps the
//! placement epoch.
//!
//! Algorithm `hrw-bounded-v1` (a persisted contract: the same input gives the same
//! table on every version of Tessera; a change is a new name):
//!
//! ```text
//! score(s, n) = xxh3_64(le_u32(s) ‖ 0xFF ‖ utf8(id_n)), seed 0
//! pairs       = every (s, n), sorted by score desc, then id asc, then s asc
//! for (cap, zones) in [(floor(S·RF/N), on), (ceil(S·RF/N), on), (∞, on), (∞, off)]:
//!   for (s, n) in pairs:
//!     give s replica n if s has fewer than RF, n holds fewer than cap,
//!     n is not already a replica of s, and (zones on, when every ingester has a
//!     zone and there are ≥ RF zones) no replica of s is in n's zone
//! each shard's replicas are listed by score desc
//! ```
//!
//! Plain rendezvous hashing (HRW) moves the minimum when an ingester joins, but its
//! load is uneven at the shard counts we use (max/min replicas per ingester of
//! 1.4/0.7 at S = 64, N = 10). Walking all pairs in one global score order under a
//! per-ingester cap keeps every ingester within one replica of the average in
//! practice, while each shard still prefers its highest-scoring ingesters, so a join
//! moves little more than the ideal S·RF/(N+1). The later passes only matter when the
//! caps or zones leave a shard short; every shard gets RF distinct ingesters whenever
//! N ≥ RF. Measured balance and movement are in the tests and in BENCHMARKS.md.

use std::fmt::Write;

use xxhash_rust::xxh3::xxh3_64;

/// The algorithm name, part of every internal request's handshake.
pub const ALGORITHM: &str = "hrw-bounded-v1";

/// One ingester as placement sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub id: String,
    /// Failure domain (e.g. a Kubernetes zone); empty = no zone.
    pub zone: String,
}

/// Why no placement could be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error("replication factor {rf} needs at least {rf} ingesters, but {n} are configured")]
    TooFewIngesters { rf: u32, n: usize },
    #[error("ingester id {0:?} appears more than once; ids must be unique")]
    DuplicateId(String),
    #[error("ingester ids must not be empty")]
    EmptyId,
    #[error("shards must be > 0 and replication factor must be > 0")]
    Zero,
}

/// The shard → replicas table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub shards: u32,
    pub rf: u32,
    pub members: Vec<Member>,
    /// For each shard, the indexes into `members` of its replicas, best score first.
    pub replicas: Vec<Vec<usize>>,
}

fn score(shard: u32, id: &str) -> u64 {
    let mut key = Vec::with_capacity(5 + id.len());
    key.extend_from_slice(&shard.to_le_bytes());
    key.push(0xFF);
    key.extend_from_slice(id.as_bytes());
    xxh3_64(&key)
}

impl Placement {
    /// Computes the table (see the module doc).
    pub fn compute(shards: u32, rf: u32, members: &[Member]) -> Result<Placement, PlacementError> {
        if shards == 0 || rf == 0 {
            return Err(PlacementError::Zero);
        }
        let n = members.len();
        if n < rf as usize {
            return Err(PlacementError::TooFewIngesters { rf, n });
        }
        let mut seen = std::collections::HashSet::new();
        for m in members {
            if m.id.is_empty() {
                return Err(PlacementError::EmptyId);
            }
            if !seen.insert(m.id.as_str()) {
                return Err(PlacementError::DuplicateId(m.id.clone()));
            }
        }
        // Zones apply when every member has one and there are at least RF of them.
        let zones: std::collections::BTreeSet<&str> = members.iter().map(|m| m.zone.as_str()).collect();
        let zoned = !zones.contains("") && zones.len() >= rf as usize;
        let (total, rf_us) = (shards as usize * rf as usize, rf as usize);
        let (floor, ceil) = (total / n, total.div_ceil(n));
        // Every (shard, ingester) pair, best score first; ties by id, then shard.
        let mut pairs: Vec<(u64, u32, usize)> = Vec::with_capacity(shards as usize * n);
        for s in 0..shards {
            for (i, m) in members.iter().enumerate() {
                pairs.push((score(s, &m.id), s, i));
            }
        }
        pairs.sort_unstable_by(|a, b| {
            b.0.cmp(&a.0).then_with(|| members[a.2].id.cmp(&members[b.2].id)).then(a.1.cmp(&b.1))
        });
        let mut load = vec![0usize; n];
        let mut replicas: Vec<Vec<usize>> = vec![Vec::with_capacity(rf_us); shards as usize];
        // Passes relax one rule at a time: cap floor → cap ceil → no cap → no zones.
        let passes: [(usize, bool); 4] = [(floor, zoned), (ceil, zoned), (usize::MAX, zoned), (usize::MAX, false)];
        for (cap, zone_rule) in passes {
            for &(_, s, i) in &pairs {
                let r = &mut replicas[s as usize];
                if r.len() == rf_us || load[i] >= cap || r.contains(&i) {
                    continue;
                }
                if zone_rule && r.iter().any(|&c| members[c].zone == members[i].zone) {
                    continue;
                }
                r.push(i);
                load[i] += 1;
            }
        }
        for (s, r) in replicas.iter_mut().enumerate() {
            r.sort_by(|&a, &b| {
                score(s as u32, &members[b].id)
                    .cmp(&score(s as u32, &members[a].id))
                    .then_with(|| members[a].id.cmp(&members[b].id))
            });
        }
        Ok(Placement { shards, rf, members: members.to_vec(), replicas })
    }

    /// Shard-replicas held by each member, in member order.
    pub fn load(&self) -> Vec<usize> {
        let mut load = vec![0; self.members.len()];
        for r in &self.replicas {
            for &i in r {
                load[i] += 1;
            }
        }
        load
    }

    /// The shards member `i` holds a replica of.
    pub fn shards_of(&self, member: usize) -> Vec<u32> {
        (0..self.shards).filter(|&s| self.replicas[s as usize].contains(&member)).collect()
    }

    /// Shard-replicas that live on a different member in `other` (by id): what a
    /// membership change moves.
    pub fn moved_to(&self, other: &Placement) -> usize {
        let mut moved = 0;
        for (s, r) in other.replicas.iter().enumerate() {
            let before: Vec<&str> = self
                .replicas
                .get(s)
                .map(|v| v.iter().map(|&i| self.members[i].id.as_str()).collect())
                .unwrap_or_default();
            moved += r.iter().filter(|&&i| !before.contains(&other.members[i].id.as_str())).count();
        }
        moved
    }

    /// The table as `tessera cluster placement` prints it: one line per shard, then
    /// the load per ingester and the balance.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# placement {ALGORITHM}: {} shards, replication factor {}, {} ingesters",
            self.shards,
            self.rf,
            self.members.len()
        );
        let _ = writeln!(out, "shard\treplicas");
        for (s, r) in self.replicas.iter().enumerate() {
            let ids: Vec<&str> = r.iter().map(|&i| self.members[i].id.as_str()).collect();
            let _ = writeln!(out, "{s}\t{}", ids.join(","));
        }
        let _ = writeln!(out, "\ningester\tzone\tshard_replicas");
        let load = self.load();
        for (m, l) in self.members.iter().zip(&load) {
            let zone = if m.zone.is_empty() { "-" } else { &m.zone };
            let _ = writeln!(out, "{}\t{zone}\t{l}", m.id);
        }
        let (max, min) = (load.iter().max().copied().unwrap_or(0), load.iter().min().copied().unwrap_or(0));
        let avg = (self.shards as f64 * self.rf as f64) / self.members.len() as f64;
        let _ = writeln!(out, "\nbalance: max {max}, min {min}, average {avg:.2} (max/avg {:.2})", max as f64 / avg);
        out
    }
}

#[cfg(test)]
mod tests;

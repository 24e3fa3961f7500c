//! The cluster identity every internal request carries, and its record in an
//! ingester's data directory.
//!
//! Identity = (cluster name, shard count S, series hash version, placement algorithm,
//! placement epoch). The epoch is not a number an operator bumps: it is a fingerprint
//! of the placement input, `xxh3_64` over
//!
//! ```text
//! algorithm 0xFF  le_u32(S)  le_u32(RF)  (id 0xFF zone 0xFF)*   -- ingesters in config order
//! ```
//!
//! so two processes have the same epoch exactly when they compute the same shard →
//! replicas table (addresses are not in it: DNS may move an ingester without moving
//! data). An ingester refuses a request whose identity differs in any field with
//! `FAILED_PRECONDITION`, naming both values, so during a half-rolled config change the
//! old and new processes refuse each other instead of writing a series into a shard
//! the other side does not route to.
//!
//! The data directory records name, S, hash and algorithm and this ingester's id
//! (`cluster-identity.toml`, next to the `cluster.toml` shard-count record of `serve`);
//! a later start with a different value is refused. The epoch is not recorded: a
//! membership change is allowed, and moves shards (see ARCHITECTURE.md).

use std::path::Path;

use anyhow::Context;
use xxhash_rust::xxh3::Xxh3;

use super::placement::ALGORITHM;
use super::ClusterConfig;

/// Version of the series-to-shard hash (`shards/hash.rs`), as `serve` records it.
pub const HASH_VERSION: &str = "xxh3_64-v1";

/// File in an ingester's data directory that records the identity it was created with.
const IDENTITY_FILE: &str = "cluster-identity.toml";

/// Who a request is for; see the module doc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub shards: u32,
    pub hash_version: String,
    pub algorithm: String,
    pub epoch: u64,
}

impl Identity {
    /// The identity of a (validated) `[cluster]` table.
    pub fn of(cfg: &ClusterConfig) -> Identity {
        let mut h = Xxh3::new();
        h.update(cfg.placement.as_bytes());
        h.update(&[0xFF]);
        h.update(&cfg.shards.to_le_bytes());
        h.update(&cfg.replication_factor.to_le_bytes());
        for e in cfg.ingesters() {
            h.update(e.id.as_bytes());
            h.update(&[0xFF]);
            h.update(e.zone.as_bytes());
            h.update(&[0xFF]);
        }
        Identity {
            name: cfg.name.clone(),
            shards: cfg.shards,
            hash_version: HASH_VERSION.to_owned(),
            algorithm: if cfg.placement.is_empty() { ALGORITHM.to_owned() } else { cfg.placement.clone() },
            epoch: h.digest(),
        }
    }

    /// `None` when `theirs` equals this identity; otherwise a message naming every field
    /// that differs with both values (`me` names this side, e.g. `ingester "ingester-1"`).
    pub fn mismatch(&self, theirs: &Identity, me: &str) -> Option<String> {
        let mut diffs = Vec::new();
        if self.name != theirs.name {
            diffs.push(format!("cluster name: request {:?}, {me} {:?}", theirs.name, self.name));
        }
        if self.shards != theirs.shards {
            diffs.push(format!("shard count: request {}, {me} {}", theirs.shards, self.shards));
        }
        if self.hash_version != theirs.hash_version {
            diffs.push(format!("hash version: request {:?}, {me} {:?}", theirs.hash_version, self.hash_version));
        }
        if self.algorithm != theirs.algorithm {
            diffs.push(format!("placement algorithm: request {:?}, {me} {:?}", theirs.algorithm, self.algorithm));
        }
        if self.epoch != theirs.epoch {
            diffs.push(format!(
                "placement epoch (fingerprint of shards, replication factor and ingester ids): request {:016x}, {me} {:016x}",
                theirs.epoch, self.epoch
            ));
        }
        if diffs.is_empty() {
            return None;
        }
        Some(format!(
            "cluster identity mismatch: {}; every process of a cluster must run the same [cluster] table",
            diffs.join("; ")
        ))
    }
}

/// Records `identity` (without the epoch) and `ingester_id` in `data_dir` on first
/// start and refuses a different one later. Writes nothing when the record exists.
pub fn check_data_dir(data_dir: &Path, identity: &Identity, ingester_id: &str) -> anyhow::Result<()> {
    #[derive(serde::Deserialize, PartialEq, Eq, Debug)]
    #[serde(deny_unknown_fields)]
    struct Recorded {
        name: String,
        shards: u32,
        hash: String,
        placement: String,
        ingester_id: String,
    }
    let want = Recorded {
        name: identity.name.clone(),
        shards: identity.shards,
        hash: identity.hash_version.clone(),
        placement: identity.algorithm.clone(),
        ingester_id: ingester_id.to_owned(),
    };
    let path = data_dir.join(IDENTITY_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let got: Recorded = toml::from_str(&text).with_context(|| format!("cannot parse {}", path.display()))?;
            let mut diffs = Vec::new();
            if got.name != want.name {
                diffs.push(format!("cluster.name: recorded {:?}, configured {:?}", got.name, want.name));
            }
            if got.shards != want.shards {
                diffs.push(format!("cluster.shards: recorded {}, configured {}", got.shards, want.shards));
            }
            if got.hash != want.hash {
                diffs.push(format!("hash: recorded {:?}, this binary {:?}", got.hash, want.hash));
            }
            if got.placement != want.placement {
                diffs.push(format!("cluster.placement: recorded {:?}, configured {:?}", got.placement, want.placement));
            }
            if got.ingester_id != want.ingester_id {
                diffs.push(format!("ingester id: recorded {:?}, given {:?}", got.ingester_id, want.ingester_id));
            }
            if diffs.is_empty() {
                return Ok(());
            }
            anyhow::bail!(
                "data directory {} belongs to another cluster identity ({}); refusing to start: its shards would be \
                 served under the wrong identity",
                data_dir.display(),
                diffs.join("; ")
            )
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let text = format!(
                "# Written by tessera ingester on first start. Do not edit: the data here belongs to\n\
                 # this cluster identity; another one is refused.\n\
                 name = {:?}\nshards = {}\nhash = {:?}\nplacement = {:?}\ningester_id = {:?}\n",
                want.name, want.shards, want.hash, want.placement, want.ingester_id
            );
            crate::durable_file::write(&path, &text)
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!("cannot read {}", path.display()))),
    }
}

#[cfg(test)]
mod tests;

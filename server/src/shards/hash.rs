//! The series-to-shard hash. **It is persisted**: a series is stored in the shard this
//! function picks, so changing it (or the shard count) makes existing data unreachable
//! for reads that route by hash. Never change it without a data migration.
//!
//! Definition (version 1):
//!
//! ```text
//! h     = xxh3_64( tenant 0xFF name_1 0xFF value_1 0xFF name_2 0xFF value_2 0xFF ... )
//! shard = h mod S
//! ```
//!
//! with xxh3_64 seeded with 0 (`xxhash_rust::xxh3::xxh3_64`), the tenant and the user's
//! labels (without the reserved `__tenant__` label) sorted by name, every string as its
//! UTF-8 bytes. 0xFF never occurs in UTF-8, so the separators make the encoding
//! unambiguous (`a=bc` and `ab=c` hash differently). xxh3 is specified byte for byte
//! and independent of endianness, so the result is the same on every machine and
//! every version of the crate.

use tessera_model::Label;
use xxhash_rust::xxh3::Xxh3;

/// Byte that separates fields in the hashed stream; never part of valid UTF-8.
const SEP: [u8; 1] = [0xFF];

/// Stable 64-bit hash of (tenant, sorted labels); see the module doc.
pub fn series_hash(tenant: &str, labels: &[Label]) -> u64 {
    let mut h = Xxh3::new();
    h.update(tenant.as_bytes());
    h.update(&SEP);
    for l in labels {
        h.update(l.name.as_bytes());
        h.update(&SEP);
        h.update(l.value.as_bytes());
        h.update(&SEP);
    }
    h.digest()
}

/// [`series_hash`] of label pairs (sorted, without the tenant label), hashing the
/// stream in one call over `scratch` (cleared first; reused between series): the same
/// value, several times faster than feeding xxh3's streaming state field by field.
pub fn series_hash_pairs<'a>(
    tenant: &str,
    pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    scratch: &mut Vec<u8>,
) -> u64 {
    scratch.clear();
    scratch.extend_from_slice(tenant.as_bytes());
    scratch.push(SEP[0]);
    for (n, v) in pairs {
        scratch.extend_from_slice(n);
        scratch.push(SEP[0]);
        scratch.extend_from_slice(v);
        scratch.push(SEP[0]);
    }
    xxhash_rust::xxh3::xxh3_64(scratch)
}

/// Shard index of a series hash among `shards` shards.
pub fn shard_of(hash: u64, shards: usize) -> usize {
    debug_assert!(shards > 0);
    (hash % shards as u64) as usize
}

#[cfg(test)]
mod tests;

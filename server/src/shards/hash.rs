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

use tessera_storage::Label;
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

/// Shard index of a series hash among `shards` shards.
pub fn shard_of(hash: u64, shards: usize) -> usize {
    debug_assert!(shards > 0);
    (hash % shards as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(n: &str, v: &str) -> Label {
        Label { name: n.into(), value: v.into() }
    }

    /// Frozen values: if this test fails, the hash changed and stored data would be
    /// routed to the wrong shard. Do not update the constants; fix the code.
    #[test]
    fn series_hash_is_frozen() {
        let labels = [l("__name__", "up"), l("job", "node")];
        let expected_stream = b"anonymous\xff__name__\xffup\xffjob\xffnode\xff";
        assert_eq!(series_hash("anonymous", &labels), xxhash_rust::xxh3::xxh3_64(expected_stream));
        assert_eq!(series_hash("anonymous", &labels), 0x7cfb_1973_3e25_03ff);
        assert_eq!(shard_of(0x7cfb_1973_3e25_03ff, 16), 15);
    }

    #[test]
    fn field_boundaries_change_the_hash() {
        assert_ne!(series_hash("t", &[l("a", "bc")]), series_hash("t", &[l("ab", "c")]));
        assert_ne!(series_hash("t1", &[l("a", "b")]), series_hash("t", &[l("1a", "b")]));
    }

    #[test]
    fn tenants_with_identical_series_hash_differently() {
        let labels = [l("__name__", "up")];
        assert_ne!(series_hash("team-a", &labels), series_hash("team-b", &labels));
    }
}

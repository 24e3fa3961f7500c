//! The write path's memory of series it has written before: for each tenant, the
//! 128-bit hash of the exact label bytes a remote-write 1.0 sender named a series with →
//! the series' shard hash and the id its shard gave it.
//!
//! A Prometheus agent names every series with the same bytes on every scrape, so from
//! the second request on the distributor skips validating the labels, building their
//! compact form, hashing them for the shard and the shard's lookup of the encoding: it
//! appends by id ([`tessera_storage::RefAppend`]). What is remembered was validated when
//! first seen under the same limits (the configuration is read once at start-up).
//!
//! Memory tracks active series, not series ever seen: every entry notes the epoch it
//! was last used in, and entries not used for [`EPOCH`] × 2 are dropped when the next
//! epoch starts ([`SeriesRefs::sweep_if_due`]). An id the shard no longer holds in its head (the series went idle and
//! left it) is reported back; the distributor forgets it and sends that series' labels.
//!
//! An id stays valid while the process runs: a shard never gives an id to a second
//! series, and the local shards are opened once per process.
//!
//! Keys are `xxh3_128` with a per-process random seed, per tenant map: a collision
//! (two label sets with one key, about 2^-128 per pair) would send one series'
//! samples to the other within one tenant, never across tenants.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{MappedRwLockReadGuard, RwLock, RwLockReadGuard};

/// How long an epoch lasts; an entry unused for two epochs is dropped.
pub const EPOCH: Duration = Duration::from_secs(5 * 60);

/// What is remembered of one series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeriesRef {
    /// The series' shard hash (`shards::series_hash`).
    pub hash: u64,
    /// The id the series' shard gave it.
    pub id: u32,
}

/// A remembered series and the epoch it was last used in: 16 bytes, so a map slot
/// with its 16-byte key is 32 (plus hashbrown's control byte).
#[derive(Debug)]
struct Entry {
    hash: u64,
    id: u32,
    used: AtomicU32,
}

/// The keys are already uniform hashes: the map uses their low 64 bits as is.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u128` is used; fold anything else in so the hasher stays correct.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u128(&mut self, k: u128) {
        self.0 = k as u64;
    }
}

type KeyMap = HashMap<u128, Entry, BuildHasherDefault<KeyHasher>>;

/// Per-tenant maps of remembered series (see the module doc).
pub struct SeriesRefs {
    seed: u64,
    clock: Clock,
    state: RwLock<State>,
    /// Entries and map bytes over all tenants, as of the last change: read by the async
    /// write path for its gauges without taking the lock.
    entries: AtomicUsize,
    bytes: AtomicUsize,
}

/// Where epochs come from.
enum Clock {
    /// [`EPOCH`]s since the map was made.
    Real(Instant),
    /// Set by hand (tests).
    #[cfg(test)]
    Manual(AtomicU32),
}

struct State {
    tenants: HashMap<Box<str>, KeyMap>,
    /// The epoch of the last sweep.
    swept: u32,
}

impl Default for SeriesRefs {
    fn default() -> Self {
        Self::new()
    }
}

impl SeriesRefs {
    pub fn new() -> Self {
        Self::with_clock(Clock::Real(Instant::now()))
    }

    fn with_clock(clock: Clock) -> Self {
        SeriesRefs {
            seed: std::collections::hash_map::RandomState::new().hash_one(0x7e55_e7a0_u64),
            clock,
            state: RwLock::new(State { tenants: HashMap::new(), swept: 0 }),
            entries: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
        }
    }

    /// The key of a series named by `label_bytes` (the label fields of its message, as sent).
    pub fn key(&self, label_bytes: &[u8]) -> u128 {
        xxhash_rust::xxh3::xxh3_128_with_seed(label_bytes, self.seed)
    }

    fn epoch(&self) -> u32 {
        match &self.clock {
            Clock::Real(started) => u32::try_from(started.elapsed().as_secs() / EPOCH.as_secs()).unwrap_or(u32::MAX),
            #[cfg(test)]
            Clock::Manual(epoch) => epoch.load(Ordering::Relaxed),
        }
    }

    /// A reader for one request of `tenant`: lookups under one shared lock.
    pub fn reader<'a>(&'a self, tenant: &str) -> Reader<'a> {
        let epoch = self.epoch();
        // The tenant's map is found once per request, not once per series.
        let map = RwLockReadGuard::try_map(self.state.read(), |st| st.tenants.get(tenant)).ok();
        Reader { refs: self, epoch, map }
    }

    /// When a new epoch has started, drops the entries unused for two. It walks every
    /// entry: call it from a blocking thread (the distributor's decoding task does).
    pub fn sweep_if_due(&self) {
        let epoch = self.epoch();
        if self.state.read().swept >= epoch {
            return;
        }
        let mut st = self.state.write();
        if st.swept >= epoch {
            return;
        }
        st.swept = epoch;
        for map in st.tenants.values_mut() {
            map.retain(|_, e| e.used.load(Ordering::Relaxed).saturating_add(2) > epoch);
            map.shrink_to_fit();
        }
        st.tenants.retain(|_, m| !m.is_empty());
        self.record_size(&st);
    }

    /// Remembers `learned` series of `tenant` and forgets `forgotten` keys. It takes the
    /// write lock (waiting for requests being decoded) and may grow a large map: call it
    /// from a blocking thread.
    pub fn update(&self, tenant: &str, learned: &[(u128, SeriesRef)], forgotten: &[u128]) {
        if learned.is_empty() && forgotten.is_empty() {
            return;
        }
        let epoch = self.epoch();
        let mut st = self.state.write();
        let map = st.tenants.entry(tenant.into()).or_default();
        for k in forgotten {
            map.remove(k);
        }
        for &(k, r) in learned {
            map.insert(k, Entry { hash: r.hash, id: r.id, used: AtomicU32::new(epoch) });
        }
        self.record_size(&st);
    }

    /// Notes the entries and map bytes of `st` (called with the write lock held).
    fn record_size(&self, st: &State) {
        let entries = st.tenants.values().map(HashMap::len).sum();
        // A hashbrown slot (key + entry) and one control byte per bucket; a map holds
        // up to 7/8 of its buckets.
        let slot = std::mem::size_of::<(u128, Entry)>() + 1;
        let bytes = st.tenants.values().map(|m| m.capacity() * 8 / 7 * slot).sum();
        self.entries.store(entries, Ordering::Relaxed);
        self.bytes.store(bytes, Ordering::Relaxed);
    }

    /// Series remembered over all tenants, and the bytes of their maps, as of the last
    /// change (no lock).
    pub fn size(&self) -> (usize, usize) {
        (self.entries.load(Ordering::Relaxed), self.bytes.load(Ordering::Relaxed))
    }

    /// Series remembered over all tenants.
    pub fn len(&self) -> usize {
        self.size().0
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Lookups of one request (see [`SeriesRefs::reader`]).
pub struct Reader<'a> {
    refs: &'a SeriesRefs,
    epoch: u32,
    /// The tenant's map (`None` if nothing of the tenant is remembered), read-locked.
    map: Option<MappedRwLockReadGuard<'a, KeyMap>>,
}

impl Reader<'_> {
    /// The key of `label_bytes` and the series remembered under it, if any.
    pub fn get(&self, label_bytes: &[u8]) -> (u128, Option<SeriesRef>) {
        let key = self.refs.key(label_bytes);
        let found = self.map.as_ref().and_then(|m| m.get(&key)).map(|e| {
            if e.used.load(Ordering::Relaxed) != self.epoch {
                e.used.store(self.epoch, Ordering::Relaxed);
            }
            SeriesRef { hash: e.hash, id: e.id }
        });
        (key, found)
    }
}

const _: () = assert!(std::mem::size_of::<Entry>() == 16);

#[cfg(test)]
mod tests;

//! What the engine's API takes and gives besides the shared data model
//! (`tessera_model`'s labels, samples and matchers): append batches, reports of what
//! an append did, selected series and counters.

use std::fmt;
use std::sync::Arc;

use tessera_model::{Label, Labels, Sample};

use crate::chunk::Encoding;

/// The samples of one series in an append batch.
///
/// `labels` must already be validated and sorted by name (the server does this); the
/// engine hashes and stores them as given. `samples` may be in any order.
#[derive(Clone, Copy, Debug)]
pub struct SeriesAppend<'a> {
    pub labels: &'a [Label],
    pub samples: &'a [Sample],
}

/// [`SeriesAppend`] with the label set already in the canonical encoding
/// ([`crate::labels_codec::encode_labels`], or built with `put_count`/`put_pair`), so a
/// writer that never held owned labels stores them without a copy per label.
/// `Engine::append_encoded` checks every encoding ([`crate::labels_codec::check_canonical`]).
#[derive(Clone, Copy, Debug)]
pub struct EncodedAppend<'a> {
    pub labels: &'a [u8],
    pub samples: &'a [Sample],
}

/// The samples of one series named by the id this engine gave it (reported in
/// [`AppendReport::ids`]), for a writer that remembers the ids of the series it sends
/// again and again and so skips encoding and looking up their labels. Only series in
/// the in-memory head are found this way; the others are listed in
/// [`AppendReport::unknown_refs`] and the writer sends their labels instead.
#[derive(Clone, Copy, Debug)]
pub struct RefAppend<'a> {
    pub id: u32,
    pub samples: &'a [Sample],
}

/// What happened to one append batch. Rejections are per sample and never fail the batch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AppendReport {
    /// Samples newly stored (idempotent re-sends of an identical sample are not counted).
    pub appended: u64,
    /// Samples older than the series' newest sample minus the out-of-order window.
    pub rejected_too_old: u64,
    /// Samples whose timestamp is already stored with a different value.
    pub rejected_duplicate: u64,
    /// Samples of series whose stored chunks cannot be read (storage damage): refused,
    /// because they could not be checked against what is stored.
    pub rejected_unreadable: u64,
    /// The first rejection in batch order, so the server can name it in its 400 message.
    pub first_rejection: Option<Rejection>,
    /// The series id of every labelled entry of the batch, in batch order (for
    /// [`RefAppend`]); `None` where the series' index entry could not be read.
    pub ids: Vec<Option<u32>>,
    /// Indexes (into the refs passed to `Engine::append_with_refs`) of ids not in the
    /// head: nothing was appended for them.
    pub unknown_refs: Vec<usize>,
}

impl AppendReport {
    pub(crate) fn reject(&mut self, series_index: usize, t: i64, reason: RejectReason) {
        match reason {
            RejectReason::TooOld { .. } | RejectReason::OutOfOrderChunkFull => self.rejected_too_old += 1,
            RejectReason::Duplicate => self.rejected_duplicate += 1,
            RejectReason::Unreadable { .. } => self.rejected_unreadable += 1,
        }
        if self.first_rejection.is_none() {
            self.first_rejection = Some(Rejection { series_index, t, reason });
        }
    }
}

/// One rejected sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Rejection {
    /// Index of the series in the batch passed to `Engine::append`.
    pub series_index: usize,
    /// Timestamp of the rejected sample (ms).
    pub t: i64,
    pub reason: RejectReason,
}

/// Why a sample was not stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RejectReason {
    /// The sample is older than the series' newest sample minus the out-of-order window.
    TooOld { min_allowed_t: i64 },
    /// A sample with the same timestamp and a different value is already stored.
    Duplicate,
    /// An out-of-order sample inside the window whose chunk already holds the most
    /// samples a chunk can; counted with `rejected_too_old` (both are out-of-order
    /// rejections).
    OutOfOrderChunkFull,
    /// The series existed before this process started and its stored chunks cannot be
    /// read (e.g. a damaged SST block), so the sample cannot be checked for duplicates
    /// and order. Only this series is affected; `cause` is the read error.
    Unreadable { cause: Arc<str> },
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RejectReason::TooOld { min_allowed_t } => write!(
                f,
                "sample is too old: this series only accepts timestamps >= {min_allowed_t} ms \
                 (newest sample minus the out-of-order window)"
            ),
            RejectReason::Duplicate => {
                f.write_str("duplicate sample: this series already has a different value at this timestamp")
            }
            RejectReason::OutOfOrderChunkFull => f.write_str(
                "out-of-order sample refused: the chunk covering this time is full; \
                 send samples in time order",
            ),
            RejectReason::Unreadable { cause } => write!(
                f,
                "refused because this series' stored chunks cannot be read (storage damage, \
                 other series are not affected): {cause}"
            ),
        }
    }
}

/// The samples of one series returned by `Engine::select`, in time order.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesSamples {
    pub labels: Labels,
    pub samples: Vec<Sample>,
}

/// One stored chunk of a series, as encoded (`chunk`'s Gorilla XOR layout): its
/// samples in time order, `mint` and `maxt` its first and last timestamps.
#[derive(Clone, Debug, PartialEq)]
pub struct RawChunk {
    pub encoding: Encoding,
    pub mint: i64,
    pub maxt: i64,
    pub bytes: Vec<u8>,
}

/// The chunks of one series returned by `Engine::select_chunks_until`, in read order.
/// Only samples in `[min_time, the request's maxt]` belong to the answer.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesChunks {
    pub labels: Labels,
    pub min_time: i64,
    pub chunks: Vec<RawChunk>,
}

/// Engine counters, cheap to read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Series that currently have samples in the in-memory head.
    pub active_series: u64,
    /// Series known to this shard (every id ever assigned and not yet dropped).
    pub total_series: u64,
    /// Series in the in-memory head (recently written; idle ones are evicted).
    pub head_series: u64,
    /// Estimated heap bytes of the head (maps, series, labels, chunks), as of the last
    /// idle sweep, flush or open.
    pub head_bytes: u64,
    pub samples_appended: u64,
    pub rejected_too_old: u64,
    pub rejected_duplicate: u64,
    /// Samples refused because their series' stored chunks cannot be read.
    pub rejected_unreadable: u64,
    /// Chunks written to RocksDB since open (including rewrites of recent chunks).
    pub chunks_written: u64,
    /// RocksDB live SST bytes plus memtable bytes over all column families.
    pub disk_bytes: u64,
    /// Bytes in WAL segment files.
    pub wal_bytes: u64,
    /// Latency histogram of the WAL's fsyncs.
    pub wal_fsync: FsyncStats,
    /// Failed RocksDB background jobs (compactions, flushes) since open: RocksDB's
    /// `rocksdb.background-errors`.
    pub background_errors: u64,
    /// Column families whose automatic compaction is stopped because a compaction read
    /// a damaged file (see `Engine::damaged_files`).
    pub compactions_stopped: u64,
}

/// A RocksDB table file a compaction could not read. Its column family's automatic
/// compaction is stopped on this shard (writes go on); the file stays in place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DamagedFile {
    /// The file as RocksDB named it (`…/db/000012.sst`), or `None` if its status named none.
    pub file: Option<String>,
    /// Column family of the file (`chunks`, `series`, ...), or `None` if the file is not
    /// among the live ones (then every column family's compaction is stopped).
    pub column_family: Option<String>,
    /// LSM level of the file, if known.
    pub level: Option<i32>,
    /// RocksDB's status, e.g. `Corruption: block checksum mismatch: ... offset 4096 size 3970`.
    pub cause: String,
}

/// Upper bounds, in seconds, of the WAL fsync latency buckets (`+Inf` is implied).
pub const FSYNC_BUCKETS_SECONDS: [f64; 10] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0];

/// Latency histogram of the WAL's fsyncs (a snapshot of the WAL's lock-free counters),
/// shaped like a Prometheus histogram. It lives here, with the other reports, and not in
/// `wal`, so that this module depends on nothing else in the crate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FsyncStats {
    /// Cumulative counts: `buckets[i]` fsyncs took at most `FSYNC_BUCKETS_SECONDS[i]`.
    pub buckets: [u64; FSYNC_BUCKETS_SECONDS.len()],
    /// Every fsync (the `+Inf` bucket).
    pub count: u64,
    /// Total time spent in fsync, in nanoseconds.
    pub sum_nanos: u64,
}

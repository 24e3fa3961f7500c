//! What RocksDB's background work (compactions) met, seen through its info log.
//!
//! The shard's RocksDB runs with `paranoid_checks = false` (see `db::open`): a compaction
//! that reads a damaged block then fails on its own instead of stopping every write of the
//! shard. RocksDB retries such a compaction about once a second, forever, and while it
//! fails the level-0 files of that column family pile up until RocksDB stalls the writes
//! after all (`level0_stop_writes_trigger`). So the failure must be seen and acted on.
//!
//! rust-rocksdb has no event listener, but RocksDB reports every failed compaction in its
//! info log (`Compaction error: <status>`; a checksum status names the file, `... in
//! /data/shard-0001/db/000012.sst offset ... size ...`). [`Background`] is that log's
//! sink: it forwards RocksDB's warnings and errors to `tracing` and records each failed
//! compaction for the engine, which (outside RocksDB's threads) stops automatic
//! compaction of the damaged column family and reports the file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use rocksdb::LogLevel;

/// At most this many distinct failures are remembered per shard (the count goes on).
const MAX_FAILURES: usize = 16;

/// One failed compaction as RocksDB logged it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionFailure {
    /// RocksDB's status, e.g. `Corruption: block checksum mismatch: ... in
    /// /d/000012.sst offset 4096 size 3970, block_type = kData`.
    pub cause: String,
    /// The table file the status names (as written there), if it names one.
    pub file: Option<String>,
}

impl CompactionFailure {
    /// Whether the cause is damaged bytes (as opposed to, say, a full disk, which
    /// RocksDB's own retry may get past).
    pub fn is_corruption(&self) -> bool {
        self.cause.starts_with("Corruption")
    }

    /// The number of the table file named by the cause (`000012.sst` → 12).
    pub fn file_number(&self) -> Option<u64> {
        let name = Path::new(self.file.as_deref()?).file_name()?.to_str()?;
        name.strip_suffix(".sst")?.parse().ok()
    }
}

/// The info-log sink of one shard's RocksDB (shared between the logger callback and the
/// engine).
pub struct Background {
    /// The RocksDB directory, for the log lines.
    dir: PathBuf,
    /// Failures not yet handled by the engine.
    new: Mutex<Vec<CompactionFailure>>,
    /// Set when `new` is not empty: the engine's cheap check on its hot paths.
    pending: AtomicBool,
}

impl Background {
    pub fn new(dir: &Path) -> Background {
        Background { dir: dir.to_path_buf(), new: Mutex::new(Vec::new()), pending: AtomicBool::new(false) }
    }

    /// RocksDB's info-log callback (called on RocksDB's threads; never calls into the DB).
    pub fn on_log(&self, level: LogLevel, msg: &str) {
        let msg = msg.trim_end();
        match level {
            // The options dump at open, and chatter below warnings (not asked for).
            LogLevel::Header | LogLevel::Debug | LogLevel::Info => return,
            LogLevel::Warn => tracing::warn!(db = %self.dir.display(), "rocksdb: {msg}"),
            LogLevel::Error | LogLevel::Fatal => tracing::error!(db = %self.dir.display(), "rocksdb: {msg}"),
        }
        if let Some(failure) = parse_compaction_error(msg) {
            let mut new = self.new.lock();
            if new.len() < MAX_FAILURES && !new.contains(&failure) {
                new.push(failure);
            }
            self.pending.store(true, Ordering::Release);
        }
    }

    /// Failures logged since the last call (cheap when there are none).
    pub fn take_new(&self) -> Vec<CompactionFailure> {
        if !self.pending.load(Ordering::Acquire) || !self.pending.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        std::mem::take(&mut *self.new.lock())
    }
}

/// A `Compaction error: <status>` line of RocksDB's log (one per failed compaction; the
/// `Waiting after background compaction error` line that follows it is not counted).
fn parse_compaction_error(msg: &str) -> Option<CompactionFailure> {
    let (_, cause) = msg.split_once("Compaction error: ")?;
    let cause = cause.trim().to_owned();
    Some(CompactionFailure { file: sst_path(&cause), cause })
}

/// The first `….sst` path in a RocksDB status text.
fn sst_path(text: &str) -> Option<String> {
    let end = text.find(".sst")? + ".sst".len();
    let start = text[..end].rfind(char::is_whitespace).map_or(0, |i| i + 1);
    Some(text[start..end].to_owned())
}

#[cfg(test)]
mod tests;

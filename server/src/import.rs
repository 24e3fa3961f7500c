//! `tessera import`: bulk backfill of exposition files (Prometheus text or OpenMetrics,
//! with timestamps) straight into a data directory, without the HTTP path.
//!
//! **No partial import on bad input.** The import runs in two streaming passes over the
//! files. Pass 1 parses and validates every line (syntax, names and limits as remote
//! write checks them, timestamps, duplicates, the future bound, ordering the storage
//! would refuse) and touches nothing on disk; any bad line fails the import with
//! `file:line: reason` and the data directory stays exactly as it was. Only then does
//! pass 2 write (parsing the files again if pass 1 could not keep the samples). What pass 1 cannot know is the data already
//! in the directory: a sample older than the out-of-order window behind an existing
//! series' newest sample is refused by storage in pass 2, counted, and the import exits
//! with an error that says how many samples were refused and that the rest were written
//! (never silently).
//!
//! **Same placement as remote write.** Series get the `__tenant__` label and are
//! hashed to shards by `shards::series_hash` through [`Shards::push`], so a server
//! started on the directory afterwards finds them.
//!
//! **Fast.** Pass 1 reads each file in 4 MiB blocks on one thread, parses them on up to
//! 4 others, and runs the checks that depend on order over the parsed blocks in file
//! order while the next blocks are being parsed. A line that repeats a series spelling
//! already seen is read from its end (value and timestamp), without scanning its label
//! set again ([`parse::split_tail`]). When the samples fit
//! in `cache_bytes` (24 bytes each), pass 1 keeps them
//! and pass 2 does not parse the files again. Pass 2 groups samples by series in batches of `batch_samples`, sorts each
//! series' samples by time, and hands each batch to a writer thread (parsing the next
//! batch overlaps writing this one); `Shards::push` appends every shard's part in
//! parallel. The engines run with `wal_fsync = none` for the import and everything is
//! made durable once at the end by `Shards::flush_all` (chunks to RocksDB, memtables
//! flushed, RocksDB's WAL synced). A crash during pass 2 leaves the samples written so
//! far (the WAL replays them); re-running the import is safe, since identical samples
//! are no-ops.

pub mod parse;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Instant;

use anyhow::Context;
use parking_lot::{Mutex, RwLock, RwLockWriteGuard};
use tessera_model::{Label, Sample};
use tessera_storage::WalFsync;
use xxhash_rust::xxh3::Xxh3DefaultBuilder;

use crate::config::Config;
use crate::ingest::validate::validate_labels;
use crate::shards::{series_hash, PushSeries, Shards};
use parse::{parse_line, Format, Line, SampleLine};

/// Samples per write batch in pass 2 (about 16 bytes each, plus labels per series).
pub const DEFAULT_BATCH_SAMPLES: usize = 1_000_000;
/// Default memory for pass 1's samples: 1 GiB, about 44 M samples.
pub const DEFAULT_CACHE_BYTES: usize = 1 << 30;
/// How many bad lines are quoted in the error; the rest are counted.
const MAX_QUOTED_ERRORS: usize = 20;

/// What to import where.
pub struct ImportOptions {
    pub data_dir: PathBuf,
    /// Shard count; `None` = the config's if not 0, else the one the data directory
    /// recorded, else `config::automatic_shards()`.
    pub shards: Option<u32>,
    pub tenant: String,
    pub files: Vec<PathBuf>,
    /// `[storage]` (retention, out-of-order window, chunk sizes) and `[limits]` (name
    /// rules, label limits, `max_future_secs`) apply as they would to the server.
    pub config: Config,
    pub batch_samples: usize,
    /// Memory for keeping pass 1's samples (24 bytes each) so pass 2 need not parse the
    /// files again; larger inputs are parsed twice. 0 = always parse twice.
    pub cache_bytes: usize,
}

/// What an import did.
#[derive(Debug, Default)]
pub struct ImportSummary {
    pub files: usize,
    pub samples: u64,
    pub series: u64,
    /// Oldest and newest sample timestamp, ms.
    pub min_t: i64,
    pub max_t: i64,
    pub validate_seconds: f64,
    pub write_seconds: f64,
}

impl ImportSummary {
    /// Samples per second over both passes.
    pub fn samples_per_sec(&self) -> f64 {
        let s = self.validate_seconds + self.write_seconds;
        if s > 0.0 {
            self.samples as f64 / s
        } else {
            0.0
        }
    }
}

/// Runs the import (blocking; owns its own threads). See the module doc.
pub fn run(opts: &ImportOptions) -> anyhow::Result<ImportSummary> {
    let tenant = check_tenant(&opts.tenant)?;
    anyhow::ensure!(!opts.files.is_empty(), "no input files");
    anyhow::ensure!(opts.batch_samples > 0, "batch size must be > 0");
    opts.config.validate()?;
    let recorded = crate::serve::recorded_shard_count(&opts.data_dir)?;
    let shards = opts.shards.unwrap_or_else(|| crate::config::resolve_shards(opts.config.shards, recorded));
    anyhow::ensure!(shards > 0, "--shards must be > 0");
    if recorded.is_some() {
        // Read-only here (the file exists): a mismatch fails before any parsing.
        crate::serve::check_shard_count(&opts.data_dir, shards)?;
    }

    let started = Instant::now();
    let mut index = SeriesIndex::default();
    let (mut summary, cache) = validate_all(opts, &tenant, &mut index)?;
    summary.validate_seconds = started.elapsed().as_secs_f64();
    summary.files = opts.files.len();
    warn_about_retention(&opts.config, &summary);

    let started = Instant::now();
    std::fs::create_dir_all(&opts.data_dir)
        .with_context(|| format!("cannot create data directory {}", opts.data_dir.display()))?;
    crate::serve::check_shard_count(&opts.data_dir, shards)?;
    let mut engine_cfg = opts.config.storage.clone();
    engine_cfg.wal_fsync = WalFsync::None;
    let opened = Shards::open(&opts.data_dir, shards as usize, &engine_cfg, shards as usize, &|_, _| {});
    let shards = opened.map_err(|e| open_error(&opts.data_dir, e))?;
    write_all(opts, &tenant, &index, cache.as_deref(), shards)?;
    summary.write_seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// The tenant under the same rules as `X-Scope-OrgID`.
fn check_tenant(tenant: &str) -> anyhow::Result<String> {
    let mut headers = axum::http::HeaderMap::new();
    let value =
        axum::http::HeaderValue::from_str(tenant).map_err(|_| anyhow::anyhow!("invalid --tenant {tenant:?}"))?;
    headers.insert("x-scope-orgid", value);
    crate::http::params::tenant(&headers).map_err(|e| anyhow::anyhow!("--tenant: {}", e.message))
}

/// A shard that cannot be opened; RocksDB's lock file says a server holds it.
fn open_error(data_dir: &Path, e: tessera_storage::Error) -> anyhow::Error {
    let e = anyhow::Error::new(e);
    // The lock message is in RocksDB's error, the source of ours.
    let text = format!("{e:#}");
    if text.contains("/LOCK") || text.contains("lock file") || text.contains("lock hold") {
        anyhow::anyhow!(
            "data directory {} is in use by another process (is a tessera server running on it? stop it first): {text}",
            data_dir.display()
        )
    } else {
        e.context(format!("cannot open the shards in {}", data_dir.display()))
    }
}

fn warn_about_retention(config: &Config, s: &ImportSummary) {
    let r = config.storage.retention_ms;
    if r > 0 && s.samples > 0 && s.min_t < s.max_t.saturating_sub(r) {
        eprintln!(
            "warning: the input spans {} ms, more than storage.retention_ms = {r}: samples older than the retention \
             (counted back from the newest sample in each shard) will be deleted by retention",
            s.max_t - s.min_t
        );
    }
}

/// The series seen so far: the spelling of a line's series maps to an id, and so does
/// the sorted label set (two spellings of one series share the id).
///
/// Hashed with xxh3 rather than SipHash: every input line is looked up, and the input
/// is the operator's own files, so there is no hash-flooding adversary to defend against.
#[derive(Default)]
struct SeriesIndex {
    by_text: HashMap<Box<[u8]>, u32, Xxh3DefaultBuilder>,
    by_labels: HashMap<Vec<Label>, u32, Xxh3DefaultBuilder>,
    /// Sorted labels (without the tenant) and `series_hash`, by id.
    series: Vec<(Vec<Label>, u64)>,
}

impl SeriesIndex {
    fn resolve(&mut self, s: &SampleLine<'_>, tenant: &str, config: &Config) -> Result<u32, String> {
        if let Some(&id) = self.by_text.get(s.series_text.as_bytes()) {
            return Ok(id);
        }
        let parsed = s.labels()?;
        let mut pairs: Vec<(&[u8], &[u8])> = Vec::with_capacity(parsed.len() + 1);
        pairs.push((tessera_model::METRIC_NAME.as_bytes(), s.name.as_bytes()));
        pairs.extend(parsed.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())));
        pairs.sort_by(|a, b| a.0.cmp(b.0));
        let labels = validate_labels(pairs.into_iter(), &config.limits)?;
        let id = match self.by_labels.get(&labels) {
            Some(&id) => id,
            None => {
                let id = u32::try_from(self.series.len()).map_err(|_| "more than 2^32 series".to_owned())?;
                let hash = series_hash(tenant, &labels);
                self.by_labels.insert(labels.clone(), id);
                self.series.push((labels, hash));
                id
            }
        };
        self.by_text.insert(s.series_text.as_bytes().into(), id);
        Ok(id)
    }
}

/// Time and value of a sample line.
struct SampleTV {
    t: i64,
    value: f64,
}

/// A sample line as a parsing worker hands it to the sequential checks.
enum Parsed {
    /// A series spelling already in the index.
    Known { id: u32, t: i64, v: f64 },
    /// A spelling the index did not have when the block was parsed: the whole line, to
    /// be parsed again and resolved in order.
    New(String),
}

/// What a worker found on one line.
enum Entry {
    Sample(u64, Parsed),
    Bad(u64, String),
    Eof(u64),
    /// A non-blank line that stores nothing (a comment): refused after `# EOF`.
    Other(u64),
}

/// Bytes per block a parsing worker takes (cut at a line end).
const BLOCK_BYTES: usize = 4 << 20;

/// The series index as pass 1's sequential checks see it: parsing workers read it
/// concurrently, and the write lock is taken only when a block brings a new series
/// spelling (and held until that block is done).
struct IndexAccess<'a> {
    lock: &'a RwLock<SeriesIndex>,
    guard: Option<RwLockWriteGuard<'a, SeriesIndex>>,
}

impl IndexAccess<'_> {
    fn get(&mut self) -> &mut SeriesIndex {
        self.guard.get_or_insert_with(|| self.lock.write())
    }
}

/// A parsed block on its way to the sequential checks: its place in the file, its
/// buffer (for reuse), its entries and its line count.
type ParsedBlock = (u64, Vec<u8>, Vec<Entry>, u64);

/// Pass 1's reader: one thread reads the file in blocks cut at line ends, parsing
/// workers (up to 4) parse them concurrently, and this thread hands the results to `f`
/// (samples) and `bad` (refused lines) in file order, with 1-based line numbers, while
/// the workers go on with the next blocks. Workers only read the index; `f` may extend
/// it through [`IndexAccess`].
fn parse_parallel(
    path: &Path,
    format: Format,
    index: &mut SeriesIndex,
    bad: &dyn Fn(u64, String),
    mut f: impl FnMut(&mut IndexAccess<'_>, u64, Parsed),
) -> anyhow::Result<()> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 4);
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let lock = RwLock::new(std::mem::take(index));
    // Bounded queues keep at most a few blocks in flight; used buffers go back to the
    // reader so that their pages are not faulted in again.
    let (work_tx, work_rx) = mpsc::sync_channel::<(u64, Vec<u8>)>(threads);
    let (done_tx, done_rx) = mpsc::sync_channel::<ParsedBlock>(threads);
    let (reuse_tx, reuse_rx) = mpsc::channel::<Vec<u8>>();
    let work_rx = Mutex::new(work_rx);
    let read = std::thread::scope(|scope| {
        let reader = scope.spawn(move || read_blocks(file, path, &work_tx, &reuse_rx));
        for _ in 0..threads {
            let (work_rx, done_tx, lock) = (&work_rx, done_tx.clone(), &lock);
            scope.spawn(move || loop {
                let next = work_rx.lock().recv();
                let Ok((seq, block)) = next else { return };
                let (entries, lines) = parse_block(&block, format, &lock.read().by_text);
                if done_tx.send((seq, block, entries, lines)).is_err() {
                    return;
                }
            });
        }
        drop(done_tx);
        let mut waiting: BTreeMap<u64, ParsedBlock> = BTreeMap::new();
        let mut next_seq = 0u64;
        let mut first_line = 0u64;
        let mut seen_eof = false;
        for parsed in done_rx {
            waiting.insert(parsed.0, parsed);
            while let Some((_, block, entries, lines)) = waiting.remove(&next_seq) {
                let mut access = IndexAccess { lock: &lock, guard: None };
                for entry in entries {
                    match entry {
                        Entry::Sample(l, _) | Entry::Bad(l, _) | Entry::Other(l) | Entry::Eof(l) if seen_eof => {
                            bad(first_line + l, "content after `# EOF`".into());
                        }
                        Entry::Sample(l, p) => f(&mut access, first_line + l, p),
                        Entry::Bad(l, msg) => bad(first_line + l, msg),
                        Entry::Eof(_) => seen_eof = true,
                        Entry::Other(_) => {}
                    }
                }
                first_line += lines;
                next_seq += 1;
                // The reader may have finished; then the buffer is simply dropped.
                let _ = reuse_tx.send(block);
            }
        }
        reader.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
    });
    *index = lock.into_inner();
    read
}

/// The reader thread of [`parse_parallel`]: sends the file's blocks, numbered, each cut
/// after its last line end (a line longer than a block makes the block longer).
fn read_blocks(
    mut file: File,
    path: &Path,
    work: &mpsc::SyncSender<(u64, Vec<u8>)>,
    reuse: &mpsc::Receiver<Vec<u8>>,
) -> anyhow::Result<()> {
    let mut carry: Vec<u8> = Vec::new();
    let mut seq = 0u64;
    let mut at_end = false;
    while !at_end {
        let mut buf = reuse.try_recv().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(&carry);
        carry.clear();
        let want = buf.len() + BLOCK_BYTES;
        while buf.len() < want {
            // `read_to_end` fills the spare capacity without zeroing it first.
            let room = (want - buf.len()) as u64;
            let n = (&mut file)
                .take(room)
                .read_to_end(&mut buf)
                .with_context(|| format!("cannot read {}", path.display()))?;
            if n == 0 {
                at_end = true;
                break;
            }
        }
        if !at_end {
            match memchr::memrchr(b'\n', &buf) {
                Some(p) => carry.extend_from_slice(&buf[p + 1..]),
                // A line longer than a block: keep reading into it.
                None => {
                    carry = buf;
                    continue;
                }
            }
            buf.truncate(buf.len() - carry.len());
        }
        if !buf.is_empty() {
            if work.send((seq, buf)).is_err() {
                break;
            }
            seq += 1;
        }
    }
    Ok(())
}

/// Parses the lines of one block; line numbers in the entries are 1-based within it.
/// Returns the entries and the number of lines.
///
/// A line that repeats a known series spelling in the common `series value timestamp`
/// shape is read from its end ([`parse::split_tail`]) without scanning its label set.
fn parse_block(
    block: &[u8],
    format: Format,
    by_text: &HashMap<Box<[u8]>, u32, Xxh3DefaultBuilder>,
) -> (Vec<Entry>, u64) {
    let body = block.strip_suffix(b"\n").unwrap_or(block);
    let mut entries = Vec::with_capacity(block.len() / 64);
    let mut lines = 0u64;
    let mut from = 0;
    let ends = memchr::memchr_iter(b'\n', body).chain(std::iter::once(body.len()));
    for end in ends {
        let raw = &body[from..end];
        from = end + 1;
        lines += 1;
        if let Some((text, v, t)) = parse::split_tail(raw, format) {
            if let Some(&id) = by_text.get(text) {
                entries.push(Entry::Sample(lines, Parsed::Known { id, t, v }));
                continue;
            }
        }
        let Ok(text) = std::str::from_utf8(raw) else {
            entries.push(Entry::Bad(lines, "line is not valid UTF-8".into()));
            continue;
        };
        match parse_line(text, format) {
            Ok(Line::Skip) => {
                if !text.trim().is_empty() {
                    entries.push(Entry::Other(lines));
                }
            }
            Ok(Line::Eof) => entries.push(Entry::Eof(lines)),
            Ok(Line::Sample(s)) => {
                let parsed = match by_text.get(s.series_text.as_bytes()) {
                    Some(&id) => Parsed::Known { id, t: s.t, v: s.value },
                    None => Parsed::New(text.to_owned()),
                };
                entries.push(Entry::Sample(lines, parsed));
            }
            Err(e) => entries.push(Entry::Bad(lines, e)),
        }
    }
    (entries, lines)
}

/// One sample kept from pass 1 (24 bytes).
struct Cached {
    t: i64,
    v: f64,
    id: u32,
}

/// What pass 1 remembers per series to predict what storage would refuse.
#[derive(Clone, Copy)]
struct SeriesCheck {
    last_t: i64,
    last_bits: u64,
    /// Newest timestamp in the batches before `batch` (`i64::MIN`: none).
    prior_max: i64,
    /// Newest timestamp in `batch`.
    batch_max: i64,
    batch: u64,
}

/// The format of a file: OpenMetrics if its last non-empty line is `# EOF`.
pub fn detect_format(path: &Path) -> std::io::Result<Format> {
    let mut f = File::open(path)?;
    let len = f.metadata()?.len();
    let from = len.saturating_sub(4096);
    f.seek(SeekFrom::Start(from))?;
    let mut tail = Vec::new();
    f.read_to_end(&mut tail)?;
    let trimmed = tail.trim_ascii_end();
    let is_om = trimmed.ends_with(b"# EOF") && {
        let before = trimmed.len() - b"# EOF".len();
        (before == 0 && from == 0) || trimmed.get(before.wrapping_sub(1)) == Some(&b'\n')
    };
    Ok(if is_om { Format::OpenMetrics } else { Format::PrometheusText })
}

/// Pass 2's reading of a file pass 1 validated: calls `f(line_number, series id,
/// sample)` for every sample line of `path` in `format`, its series looked up in
/// `known` (a repeated spelling read from the line's end, as pass 1 does). Lines that
/// are not UTF-8, do not parse or name a series pass 1 did not see go to `bad`.
fn for_each_sample(
    path: &Path,
    format: Format,
    known: &HashMap<Box<[u8]>, u32, Xxh3DefaultBuilder>,
    mut bad: impl FnMut(u64, String),
    mut f: impl FnMut(u64, u32, Sample),
) -> anyhow::Result<()> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut buf = Vec::with_capacity(256);
    let mut lineno = 0u64;
    let mut seen_eof = false;
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        lineno += 1;
        let raw = buf.strip_suffix(b"\n").unwrap_or(&buf);
        if !seen_eof {
            if let Some((text, v, t)) = parse::split_tail(raw, format) {
                if let Some(&id) = known.get(text) {
                    f(lineno, id, Sample { t, v });
                    continue;
                }
            }
        }
        let Ok(text) = std::str::from_utf8(raw) else {
            bad(lineno, "line is not valid UTF-8".into());
            continue;
        };
        if seen_eof {
            if !text.trim().is_empty() {
                bad(lineno, "content after `# EOF`".into());
            }
            continue;
        }
        match parse_line(text, format) {
            Ok(Line::Skip) => {}
            Ok(Line::Eof) => seen_eof = true,
            Ok(Line::Sample(s)) => match known.get(s.series_text.as_bytes()) {
                Some(&id) => f(lineno, id, Sample { t: s.t, v: s.value }),
                None => bad(lineno, "a series that was not in the file when it was validated".into()),
            },
            Err(e) => bad(lineno, e),
        }
    }
    Ok(())
}

/// Pass 1: parse and check every line; writes nothing. Also returns the samples when
/// they fit in `opts.cache_bytes`, so that pass 2 need not parse the files again.
fn validate_all(
    opts: &ImportOptions,
    tenant: &str,
    index: &mut SeriesIndex,
) -> anyhow::Result<(ImportSummary, Option<Vec<Cached>>)> {
    let cache_cap = opts.cache_bytes / std::mem::size_of::<Cached>();
    let mut cache = Some(Vec::new());
    let window = opts.config.storage.out_of_order_window_ms;
    let future_ms = i64::try_from(opts.config.limits.max_future_secs).unwrap_or(i64::MAX / 1000).saturating_mul(1000);
    let max_t_allowed = if future_ms > 0 { now_ms().saturating_add(future_ms) } else { i64::MAX };
    let batch = opts.batch_samples as u64;
    let mut checks: Vec<SeriesCheck> = Vec::new();
    let mut errors: Vec<String> = Vec::new();
    let mut error_count = 0u64;
    let mut seq = 0u64;
    let mut summary = ImportSummary { min_t: i64::MAX, max_t: i64::MIN, ..ImportSummary::default() };
    for path in &opts.files {
        let format = detect_format(path).with_context(|| format!("cannot read {}", path.display()))?;
        let shown = path.display().to_string();
        let errs = RefCell::new((&mut errors, &mut error_count));
        let report = |line: u64, msg: String| {
            let mut e = errs.borrow_mut();
            *e.1 += 1;
            if e.0.len() < MAX_QUOTED_ERRORS {
                e.0.push(format!("{shown}:{line}: {msg}"));
            }
        };
        parse_parallel(path, format, index, &report, |access, line, s| {
            let (id, t, v) = match s {
                Parsed::Known { id, t, v } => (id as usize, t, v),
                Parsed::New(text) => {
                    let s = match parse_line(&text, format) {
                        Ok(Line::Sample(s)) => s,
                        _ => return report(line, "line changed while it was read".into()),
                    };
                    match access.get().resolve(&s, tenant, &opts.config) {
                        Ok(id) => (id as usize, s.t, s.value),
                        Err(e) => return report(line, e),
                    }
                }
            };
            let s = SampleTV { t, value: v };
            if s.t > max_t_allowed {
                return report(
                    line,
                    format!(
                        "timestamp {} ms is more than limits.max_future_secs = {} s in the future{}",
                        s.t,
                        opts.config.limits.max_future_secs,
                        if format == Format::PrometheusText {
                            " (Prometheus text timestamps are milliseconds; a file ending with `# EOF` is OpenMetrics, in seconds)"
                        } else {
                            ""
                        }
                    ),
                );
            }
            let b = seq / batch;
            if id == checks.len() {
                checks.push(SeriesCheck {
                    last_t: i64::MIN,
                    last_bits: 0,
                    prior_max: i64::MIN,
                    batch_max: i64::MIN,
                    batch: b,
                });
            }
            let c = &mut checks[id];
            if c.batch != b {
                c.prior_max = c.prior_max.max(c.batch_max);
                c.batch_max = i64::MIN;
                c.batch = b;
            }
            if c.prior_max != i64::MIN && s.t < c.prior_max.saturating_sub(window) {
                return report(
                    line,
                    format!(
                        "sample at {} ms is more than the out-of-order window ({window} ms) older than a sample of \
                         the same series at {} ms over {batch} samples earlier: sort the input by time within \
                         each series",
                        s.t, c.prior_max
                    ),
                );
            }
            if c.last_t == s.t && c.last_bits != s.value.to_bits() {
                return report(line, format!("a second, different value for the same series at {} ms", s.t));
            }
            c.last_t = s.t;
            c.last_bits = s.value.to_bits();
            c.batch_max = c.batch_max.max(s.t);
            seq += 1;
            if let Some(c) = &mut cache {
                if c.len() < cache_cap {
                    c.push(Cached { t: s.t, v: s.value, id: id as u32 });
                } else {
                    // Too big: pass 2 parses the files again instead.
                    cache = None;
                }
            }
            summary.min_t = summary.min_t.min(s.t);
            summary.max_t = summary.max_t.max(s.t);
        })?;
    }
    if error_count > 0 {
        let more = error_count - errors.len() as u64;
        let mut msg = format!("{error_count} bad line(s); nothing was imported:\n  {}", errors.join("\n  "));
        if more > 0 {
            msg.push_str(&format!("\n  ... and {more} more"));
        }
        anyhow::bail!(msg);
    }
    summary.samples = seq;
    summary.series = index.series.len() as u64;
    Ok((summary, cache))
}

fn now_ms() -> i64 {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// What storage refused in pass 2, summed over batches.
#[derive(Default)]
struct Refused {
    too_old: u64,
    duplicate: u64,
    unreadable: u64,
    first: Option<String>,
}

/// Pass 2: batch by series (from pass 1's memory, or parsing the files again), write
/// through a writer thread, flush once.
fn write_all(
    opts: &ImportOptions,
    tenant: &str,
    index: &SeriesIndex,
    cache: Option<&[Cached]>,
    shards: Shards,
) -> anyhow::Result<()> {
    let (tx, rx) = mpsc::sync_channel::<Vec<PushSeries>>(1);
    let tenant_owned = tenant.to_owned();
    let workers = shards.len();
    let writer = std::thread::Builder::new()
        .name("import-writer".into())
        .spawn(move || -> anyhow::Result<Refused> {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .max_blocking_threads(workers.max(1))
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            let mut refused = Refused::default();
            for batch in rx {
                let out = runtime
                    .block_on(shards.push(&tenant_owned, batch))
                    .map_err(|e| anyhow::anyhow!("{}", e.message))?;
                refused.too_old += out.rejected_too_old;
                refused.duplicate += out.rejected_duplicate;
                refused.unreadable += out.rejected_unreadable;
                if let (None, Some(r)) = (&refused.first, out.first_rejection) {
                    refused.first = Some(format!("{} at {} ms: {}", describe(&r.labels), r.t, r.reason));
                }
            }
            shards.flush_all().context("flushing the shards")?;
            Ok(refused)
        })
        .context("cannot start the writer thread")?;

    let fed = match cache {
        Some(cache) => feed_from_cache(opts, index, cache, &tx),
        None => feed_batches(opts, index, &tx),
    };
    // The writer stops (and flushes what it got) once the sender is gone.
    drop(tx);
    let written = writer.join().map_err(|_| anyhow::anyhow!("the writer thread panicked"))?;
    if let Some(line) = fed? {
        anyhow::bail!(
            "{line}: the file changed after it was validated; the samples before this line were imported \
             (re-running the import on fixed input is safe)"
        );
    }
    let refused = written?;
    let total = refused.too_old + refused.duplicate + refused.unreadable;
    if total > 0 {
        anyhow::bail!(
            "storage refused {total} sample(s) (older than the out-of-order window behind data already in the \
             directory: {}, a different value at an existing timestamp: {}, series with unreadable chunks: {}); \
             the other samples were imported. First: {}",
            refused.too_old,
            refused.duplicate,
            refused.unreadable,
            refused.first.unwrap_or_default()
        );
    }
    Ok(())
}

/// Groups samples by series into batches of `batch_samples` and sends them, each
/// series' samples sorted by time.
struct Batcher<'a> {
    index: &'a SeriesIndex,
    tx: &'a mpsc::SyncSender<Vec<PushSeries>>,
    pending: Vec<Vec<Sample>>,
    touched: Vec<u32>,
    in_batch: usize,
    batch_samples: usize,
    /// The writer stopped (its error is reported by the caller).
    writer_gone: bool,
}

impl<'a> Batcher<'a> {
    fn new(index: &'a SeriesIndex, tx: &'a mpsc::SyncSender<Vec<PushSeries>>, batch_samples: usize) -> Self {
        let pending = vec![Vec::new(); index.series.len()];
        Batcher { index, tx, pending, touched: Vec::new(), in_batch: 0, batch_samples, writer_gone: false }
    }

    fn push(&mut self, id: u32, sample: Sample) {
        let slot = &mut self.pending[id as usize];
        if slot.is_empty() {
            self.touched.push(id);
        }
        slot.push(sample);
        self.in_batch += 1;
        if self.in_batch == self.batch_samples {
            self.send();
        }
    }

    fn send(&mut self) {
        self.in_batch = 0;
        if self.touched.is_empty() || self.writer_gone {
            return;
        }
        let mut batch = Vec::with_capacity(self.touched.len());
        for id in self.touched.drain(..) {
            let mut samples = std::mem::take(&mut self.pending[id as usize]);
            samples.sort_by_key(|s| s.t);
            let (labels, hash) = &self.index.series[id as usize];
            batch.push(PushSeries { labels: labels.clone(), samples, hash: *hash });
        }
        self.writer_gone = self.tx.send(batch).is_err();
    }
}

/// Sends the samples pass 1 kept in memory, in input order.
fn feed_from_cache(
    opts: &ImportOptions,
    index: &SeriesIndex,
    cache: &[Cached],
    tx: &mpsc::SyncSender<Vec<PushSeries>>,
) -> anyhow::Result<Option<String>> {
    let mut batcher = Batcher::new(index, tx, opts.batch_samples);
    for c in cache {
        if batcher.writer_gone {
            break;
        }
        batcher.push(c.id, Sample { t: c.t, v: c.v });
    }
    batcher.send();
    Ok(None)
}

/// Parses every file again and sends its samples in batches. Returns the first line
/// that no longer parses (the file changed since pass 1), if any; stops early then, or
/// when the writer is gone.
fn feed_batches(
    opts: &ImportOptions,
    index: &SeriesIndex,
    tx: &mpsc::SyncSender<Vec<PushSeries>>,
) -> anyhow::Result<Option<String>> {
    let changed: RefCell<Option<String>> = RefCell::new(None);
    let mut batcher = Batcher::new(index, tx, opts.batch_samples);
    for path in &opts.files {
        if batcher.writer_gone || changed.borrow().is_some() {
            break;
        }
        let format = detect_format(path).with_context(|| format!("cannot read {}", path.display()))?;
        let shown = path.display().to_string();
        let bad = |line: u64, msg: String| {
            changed.borrow_mut().get_or_insert_with(|| format!("{shown}:{line}: {msg}"));
        };
        // The index is complete after pass 1, so every series spelling is known; a miss
        // means the file changed.
        for_each_sample(path, format, &index.by_text, &bad, |_, id, sample| {
            if !batcher.writer_gone && changed.borrow().is_none() {
                batcher.push(id, sample);
            }
        })?;
    }
    let changed = changed.into_inner();
    if changed.is_none() {
        batcher.send();
    }
    Ok(changed)
}

/// `name{a="b", ...}` for messages.
fn describe(labels: &[Label]) -> String {
    crate::ingest::validate::describe(labels.iter().map(|l| (l.name.as_bytes(), l.value.as_bytes())))
}

#[cfg(test)]
mod tests;

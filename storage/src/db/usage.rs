//! Where a shard's bytes on disk go: per column family (table files, and inside them
//! data, index and filter blocks, raw key and value bytes) and per kind of other file
//! (Tessera's WAL, RocksDB's WAL, MANIFEST, OPTIONS, info logs). Read from a closed
//! shard directory: the RocksDB instance is opened read-only. Benchmarks use it to
//! break down the bytes-per-sample figure (`tessera-bench disk-usage`).

use std::path::Path;

use rocksdb::{Options, DB};

use super::ALL_CFS;
use crate::error::{Error, Result};

/// One column family's table files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CfUsage {
    pub name: String,
    /// Live table files and their bytes on disk.
    pub sst_files: u64,
    pub sst_bytes: u64,
    /// Entries in the table files (puts, merges, deletions).
    pub entries: u64,
    /// From RocksDB's aggregated table properties: data blocks (after compression),
    /// index blocks, filter blocks, and the uncompressed key and value bytes.
    pub data_block_bytes: u64,
    pub index_block_bytes: u64,
    pub filter_block_bytes: u64,
    pub raw_key_bytes: u64,
    pub raw_value_bytes: u64,
}

/// Files of a shard directory by kind, in bytes (apparent sizes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileUsage {
    /// Tessera's WAL segments (`wal/`).
    pub wal: u64,
    /// RocksDB's table files (`*.sst`), split by column family in [`ShardUsage::cfs`].
    pub sst: u64,
    /// RocksDB's own write-ahead log (`db/*.log`).
    pub rocksdb_wal: u64,
    /// `MANIFEST-*`, `CURRENT`, `IDENTITY`, `OPTIONS-*`, `LOCK` and anything else.
    pub rocksdb_meta: u64,
    /// RocksDB's text info logs (`LOG`, `LOG.old.*`): diagnostics, not data.
    pub info_logs: u64,
}

/// The usage of one shard directory (`<shard>/db`, `<shard>/wal`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardUsage {
    pub cfs: Vec<CfUsage>,
    pub files: FileUsage,
}

/// Reads the usage of a closed shard directory. Fails if RocksDB cannot open it
/// read-only or a directory cannot be listed.
pub fn shard_usage(shard_dir: &Path) -> Result<ShardUsage> {
    let db_dir = shard_dir.join("db");
    let mut files = FileUsage::default();
    add_files(&shard_dir.join("wal"), &mut |_, len| files.wal += len)?;
    add_files(&db_dir, &mut |name, len| {
        let slot = if name.ends_with(".sst") {
            &mut files.sst
        } else if name.ends_with(".log") {
            &mut files.rocksdb_wal
        } else if name == "LOG" || name.starts_with("LOG.old") {
            &mut files.info_logs
        } else {
            &mut files.rocksdb_meta
        };
        *slot += len;
    })?;

    // A directory written before a column family was added does not have it yet (the
    // first read-write open creates it); a read-only open must not name it.
    let present = DB::list_cf(&Options::default(), &db_dir).map_err(Error::rocks("list column families"))?;
    let names: Vec<&str> = ALL_CFS.into_iter().filter(|n| present.iter().any(|p| p == n)).collect();
    let db = DB::open_cf_for_read_only(&Options::default(), &db_dir, &names, false)
        .map_err(Error::rocks("open read-only"))?;
    let live = db.live_files().map_err(Error::rocks("live files"))?;
    let mut cfs = Vec::new();
    for name in names {
        let mut u = CfUsage { name: name.to_string(), ..CfUsage::default() };
        for f in live.iter().filter(|f| f.column_family_name == name) {
            u.sst_files += 1;
            u.sst_bytes += f.size as u64;
            u.entries += f.num_entries;
        }
        let handle = db.cf_handle(name).ok_or_else(|| Error::corrupt("rocksdb", format!("missing {name}")))?;
        let props = db
            .property_value_cf(handle, rocksdb::properties::AGGREGATED_TABLE_PROPERTIES)
            .map_err(Error::rocks("table properties"))?
            .unwrap_or_default();
        for (k, v) in parse_properties(&props) {
            let slot = match k {
                "data block size" => &mut u.data_block_bytes,
                k if k.starts_with("index block size") => &mut u.index_block_bytes,
                "filter block size" => &mut u.filter_block_bytes,
                "raw key size" => &mut u.raw_key_bytes,
                "raw value size" => &mut u.raw_value_bytes,
                _ => continue,
            };
            *slot = v;
        }
        cfs.push(u);
    }
    Ok(ShardUsage { cfs, files })
}

/// `name=value; name=value` pairs of RocksDB's table-properties string with integer values.
fn parse_properties(s: &str) -> impl Iterator<Item = (&str, u64)> {
    s.split(';').filter_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        Some((k.trim(), v.trim().parse().ok()?))
    })
}

fn add_files(dir: &Path, f: &mut dyn FnMut(&str, u64)) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("list", dir)(e)),
    };
    for e in entries {
        let e = e.map_err(Error::io("list", dir))?;
        let meta = e.metadata().map_err(Error::io("stat", e.path()))?;
        if meta.is_file() {
            f(&e.file_name().to_string_lossy(), meta.len());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

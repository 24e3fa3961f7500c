//! `tessera-bench disk-usage`: where the bytes of a stopped Tessera data directory go,
//! summed over its shards (`shard-NNNN/`): per column family (table files, and inside
//! them data, index and filter blocks, raw key and value bytes) and per kind of other
//! file. With `--samples`, every row also as bytes per sample. Printed as a Markdown
//! table for BENCHMARKS.md; `compare.sh` runs it on each Tessera data folder.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, Context};
use tessera_storage::{shard_usage, CfUsage, FileUsage};

/// The usage of every shard under `data_dir`, summed.
pub fn collect(data_dir: &Path) -> anyhow::Result<(usize, Vec<CfUsage>, FileUsage)> {
    let mut shards: Vec<_> = std::fs::read_dir(data_dir)
        .with_context(|| format!("listing {}", data_dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("shard-") && e.path().join("db").is_dir())
        .map(|e| e.path())
        .collect();
    shards.sort();
    if shards.is_empty() {
        bail!("no shard-NNNN/db directories in {}", data_dir.display());
    }
    let mut cfs: Vec<CfUsage> = Vec::new();
    let mut files = FileUsage::default();
    for s in &shards {
        let u = shard_usage(s).with_context(|| format!("reading {}", s.display()))?;
        for c in u.cfs {
            match cfs.iter_mut().find(|x| x.name == c.name) {
                Some(x) => {
                    x.sst_files += c.sst_files;
                    x.sst_bytes += c.sst_bytes;
                    x.entries += c.entries;
                    x.data_block_bytes += c.data_block_bytes;
                    x.index_block_bytes += c.index_block_bytes;
                    x.filter_block_bytes += c.filter_block_bytes;
                    x.raw_key_bytes += c.raw_key_bytes;
                    x.raw_value_bytes += c.raw_value_bytes;
                }
                None => cfs.push(c),
            }
        }
        files.wal += u.files.wal;
        files.sst += u.files.sst;
        files.rocksdb_wal += u.files.rocksdb_wal;
        files.rocksdb_meta += u.files.rocksdb_meta;
        files.info_logs += u.files.info_logs;
    }
    Ok((shards.len(), cfs, files))
}

/// The Markdown report: one table per column family, one per file kind.
pub fn render(data_dir: &Path, samples: Option<u64>) -> anyhow::Result<String> {
    let (n, cfs, files) = collect(data_dir)?;
    let per = |b: u64| match samples {
        Some(s) if s > 0 => format!(" | {:.3}", b as f64 / s as f64),
        _ => String::new(),
    };
    let per_head = if samples.is_some() { " | B/sample" } else { "" };
    let per_rule = if samples.is_some() { "|---:" } else { "" };
    let mut out = String::new();
    let footprint = files.wal + files.sst + files.rocksdb_wal + files.rocksdb_meta;
    writeln!(out, "{n} shards; footprint (every file but info logs): {footprint} bytes{}", per(footprint))?;
    if let Some(s) = samples {
        writeln!(out, "samples: {s}")?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "| column family | files | table bytes{per_head} | entries | data blocks | index blocks | filter blocks | raw keys | raw values |"
    )?;
    writeln!(out, "|---|---:|---:{per_rule}|---:|---:|---:|---:|---:|---:|")?;
    for c in &cfs {
        writeln!(
            out,
            "| {} | {} | {}{} | {} | {} | {} | {} | {} | {} |",
            c.name,
            c.sst_files,
            c.sst_bytes,
            per(c.sst_bytes),
            c.entries,
            c.data_block_bytes,
            c.index_block_bytes,
            c.filter_block_bytes,
            c.raw_key_bytes,
            c.raw_value_bytes
        )?;
    }
    writeln!(out)?;
    writeln!(out, "| file kind | bytes{per_head} |")?;
    writeln!(out, "|---|---:{per_rule}|")?;
    for (name, b) in [
        ("RocksDB tables (`*.sst`, above)", files.sst),
        ("Tessera WAL (`wal/`)", files.wal),
        ("RocksDB WAL (`db/*.log`)", files.rocksdb_wal),
        ("MANIFEST, OPTIONS, CURRENT, IDENTITY, LOCK", files.rocksdb_meta),
        ("info logs (`LOG*`, not counted)", files.info_logs),
    ] {
        writeln!(out, "| {name} | {b}{} |", per(b))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_model::{Label, Sample};
    use tessera_storage::{Engine, EngineConfig, SeriesAppend};

    #[test]
    fn report_sums_shards_and_divides_by_samples() {
        let d = tempfile::tempdir().expect("tempdir");
        for shard in ["shard-0000", "shard-0001"] {
            let e = Engine::open(&d.path().join(shard), EngineConfig::default()).expect("open");
            let l = vec![Label::new("__name__", "up")];
            let s: Vec<Sample> = (0..240).map(|i| Sample::new(i * 15_000, 1.0)).collect();
            e.append(&[SeriesAppend { labels: &l, samples: &s }]).expect("append");
            e.close().expect("close");
        }
        let (n, cfs, files) = collect(d.path()).expect("collect");
        assert_eq!(n, 2);
        let chunks = cfs.iter().find(|c| c.name == "chunks").expect("chunks cf");
        assert_eq!(chunks.entries, 4, "2 shards × 2 chunks");
        let report = render(d.path(), Some(480)).expect("render");
        assert!(report.starts_with("2 shards; footprint"), "{report}");
        let footprint = files.wal + files.sst + files.rocksdb_wal + files.rocksdb_meta;
        assert!(report.contains(&format!("{:.3}", footprint as f64 / 480.0)), "{report}");
    }

    #[test]
    fn a_folder_without_shards_is_an_error() {
        let d = tempfile::tempdir().expect("tempdir");
        assert!(collect(d.path()).is_err());
    }
}

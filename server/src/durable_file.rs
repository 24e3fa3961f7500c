//! Writing a small record file so that it survives a crash right after it was written:
//! write a temporary file, fsync it, rename it over the target, fsync the directory.
//! Used for the records a data directory keeps of what it belongs to (`cluster.toml`,
//! the ingester's identity). Blocking: call it off the async workers.

use std::path::Path;

use anyhow::Context;

/// Replaces `path` with `text` durably (see the module doc).
pub fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    std::io::Write::write_all(&mut f, text.as_bytes()).with_context(|| format!("cannot write {}", tmp.display()))?;
    f.sync_all().with_context(|| format!("cannot fsync {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("cannot fsync {}", dir.display()))?;
    }
    Ok(())
}

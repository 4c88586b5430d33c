//! Crash-safe file writes: write a temporary file, fsync it, rename it over
//! the target, fsync the directory. A reader sees the old or the new content,
//! never a torn one.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

use crate::error::{Result, TethysError};

/// Atomically replaces `path` with `bytes`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!(
        "{}.tmp",
        path.extension().and_then(|e| e.to_str()).unwrap_or("")
    ));
    let ctx = |what: &str| format!("{what} {}", tmp.display());
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| TethysError::io(ctx("creating"), e))?;
    f.write_all(bytes)
        .map_err(|e| TethysError::io(ctx("writing"), e))?;
    f.sync_all()
        .map_err(|e| TethysError::io(ctx("syncing"), e))?;
    drop(f);
    fs::rename(&tmp, path)
        .map_err(|e| TethysError::io(format!("renaming onto {}", path.display()), e))?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Fsyncs a directory so that renames and creations in it are durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    let d =
        File::open(dir).map_err(|e| TethysError::io(format!("opening {}", dir.display()), e))?;
    d.sync_all()
        .map_err(|e| TethysError::io(format!("syncing directory {}", dir.display()), e))
}

/// Creates a directory (and parents) if missing.
pub fn ensure_dir(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir)
        .map_err(|e| TethysError::io(format!("creating directory {}", dir.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_replace() {
        let dir = std::env::temp_dir().join(format!("tethys-fsutil-{}", std::process::id()));
        ensure_dir(&dir).unwrap();
        let p = dir.join("meta.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert!(!dir.join("meta.json.tmp").exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}

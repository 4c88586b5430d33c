//! The storage side of a clone (`tablet/clone.rs` has the tablet's part):
//! snapshots a source backend serves, file by file, until released
//! (`<root>/snapshot/<id>/`), and installing a clone on the target from a
//! staging directory (`<root>/clone/<id>/`). Both directories are emptied
//! when the backend starts: a clone cut off by a crash starts again.

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tethys_common::fsutil::{ensure_dir, sync_dir};
use tethys_common::{Result, TethysError};

use super::engine::StorageEngine;
use super::tablet::{META_FILE_NAME, Tablet, TabletMeta, meta_files, move_staged, rename_files};

/// A snapshot of a tablet: its meta and the files it names, with sizes.
#[derive(Debug)]
pub struct Snapshot {
    pub id: String,
    pub meta: TabletMeta,
    pub files: Vec<(String, u64)>,
}

/// A snapshot id or file name as a request or a snapshot gives it: one
/// plain name (no path, no `..`).
pub fn plain_name(name: &str) -> Result<&str> {
    let ok = !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(name)
    } else {
        Err(TethysError::Backend(format!(
            "'{name}' is not a snapshot or file name"
        )))
    }
}

impl StorageEngine {
    fn snapshot_root(&self) -> PathBuf {
        self.root().join("snapshot")
    }

    fn clone_root(&self) -> PathBuf {
        self.root().join("clone")
    }

    /// Removes snapshots and staged clones a previous run left.
    pub(super) fn clean_clone_dirs(&self) {
        let _ = fs::remove_dir_all(self.snapshot_root());
        let _ = fs::remove_dir_all(self.clone_root());
    }

    /// Hard-links tablet `tablet_id`'s current files into a new snapshot.
    pub fn make_snapshot(&self, tablet_id: i64) -> Result<Snapshot> {
        let tablet = self.tablet(tablet_id)?;
        let id = format!("{tablet_id}-{}", self.next_rowset_id(""));
        let dir = self.snapshot_root().join(&id);
        match tablet.snapshot(&dir) {
            Ok((meta, files)) => Ok(Snapshot { id, meta, files }),
            Err(e) => {
                let _ = fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    /// Up to `len` bytes of a snapshot's file from `offset`.
    pub fn read_snapshot(&self, id: &str, file: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
        let path = self
            .snapshot_root()
            .join(plain_name(id)?)
            .join(plain_name(file)?);
        let what = || format!("reading snapshot file {}", path.display());
        let mut f = fs::File::open(&path).map_err(|e| TethysError::io(what(), e))?;
        f.seek(SeekFrom::Start(offset))
            .map_err(|e| TethysError::io(what(), e))?;
        let mut buf = Vec::with_capacity(len);
        f.take(len as u64)
            .read_to_end(&mut buf)
            .map_err(|e| TethysError::io(what(), e))?;
        Ok(buf)
    }

    /// Drops a snapshot (its hard links; the tablet's files stay).
    pub fn release_snapshot(&self, id: &str) -> Result<()> {
        let dir = self.snapshot_root().join(plain_name(id)?);
        let _ = fs::remove_dir_all(dir);
        Ok(())
    }

    /// A new, empty directory to stage a clone of `tablet_id` in.
    pub fn clone_staging(&self, tablet_id: i64) -> Result<PathBuf> {
        let dir = self
            .clone_root()
            .join(format!("{tablet_id}-{}", self.next_rowset_id("")));
        ensure_dir(&dir)?;
        Ok(dir)
    }

    /// Makes `meta`, whose files are staged in `staged`, tablet
    /// `meta.tablet_id` on this backend: replacing the published rowsets of
    /// the tablet here (its pending loads kept) or creating it. Returns the
    /// version it now holds.
    pub fn install_clone(&self, meta: TabletMeta, staged: &Path) -> Result<i64> {
        let tablet_id = meta.tablet_id;
        let version = meta.version;
        let dir = self.tablet_dir(tablet_id);
        let prefix = format!("c{}_", self.next_rowset_id(""));
        match self.tablet(tablet_id) {
            Ok(old) => {
                if old.meta().version > version {
                    return Err(TethysError::Backend(format!(
                        "tablet {tablet_id} is at version {} here, the clone at {version}",
                        old.meta().version
                    )));
                }
                old.take_clone(meta, staged, &prefix)?;
                self.forget_files(&dir);
            }
            Err(_) => {
                // Staged complete with its meta, then renamed into place in
                // one step: a crash leaves no half tablet in `data/`.
                let mut meta = meta;
                move_staged(&meta, staged, staged, &prefix)?;
                rename_files(&mut meta, &prefix);
                super::tablet::write_json(&staged.join(META_FILE_NAME), &meta)?;
                sync_dir(staged)?;
                fs::rename(staged, &dir)
                    .map_err(|e| TethysError::io(format!("installing tablet {tablet_id}"), e))?;
                if let Some(parent) = dir.parent() {
                    sync_dir(parent)?;
                }
            }
        }
        let t = Tablet::open(&dir, self.key_indexes())?;
        self.put_tablet(tablet_id, Arc::new(t));
        let _ = fs::remove_dir_all(staged);
        Ok(version)
    }

    /// Files of a tablet's snapshot meta, for a target to fetch.
    pub fn snapshot_files(meta: &TabletMeta) -> Vec<String> {
        meta_files(meta)
    }
}

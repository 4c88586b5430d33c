//! Copying a tablet between backends (a clone): the tablet scheduler on the
//! FE repairs a replica that missed versions, or makes a new one on another
//! backend, from a healthy replica.
//!
//! The source hard-links the files its meta names into a snapshot
//! directory under its write lock ([`Tablet::snapshot`]), so the copy is
//! of one version and compaction cannot delete a file mid-copy. The target
//! stages the files, then [`Tablet::take_clone`] moves them in under new
//! names and writes the cloned meta: its own pending loads stay pending
//! (their records and segments are untouched), the files of its old
//! rowsets become garbage the reopened tablet removes, and this object is
//! retired: a write or publish still holding it fails instead of writing
//! into a tablet nobody reads.

use super::*;

/// The files a meta names: its rowsets' segments and delete-bitmap files.
pub(crate) fn meta_files(meta: &TabletMeta) -> Vec<String> {
    meta.rowsets
        .iter()
        .flat_map(|r| r.segments.iter().map(|s| s.file.clone()))
        .chain(meta.delete_bitmap_files.iter().cloned())
        .collect()
}

/// Renames every file `meta` names to `<prefix><name>`.
pub(crate) fn rename_files(meta: &mut TabletMeta, prefix: &str) {
    for s in meta.rowsets.iter_mut().flat_map(|r| r.segments.iter_mut()) {
        s.file = format!("{prefix}{}", s.file);
    }
    for f in &mut meta.delete_bitmap_files {
        *f = format!("{prefix}{f}");
    }
}

impl Tablet {
    /// Hard-links the files of the current meta into `into` (created) and
    /// returns that meta with each file's size.
    pub fn snapshot(&self, into: &Path) -> Result<(TabletMeta, Vec<(String, u64)>)> {
        let _g = lock(&self.write_lock);
        self.check_live()?;
        let meta = self.meta();
        ensure_dir(into)?;
        let mut files = vec![];
        for f in meta_files(&meta) {
            let to = into.join(&f);
            fs::hard_link(self.dir.join(&f), &to)
                .map_err(|e| TethysError::io(format!("snapshotting {}", to.display()), e))?;
            let size = fs::metadata(&to)
                .map_err(|e| TethysError::io(format!("reading {}", to.display()), e))?
                .len();
            files.push((f, size));
        }
        Ok((meta, files))
    }

    /// Makes `meta` (a clone, its files staged in `staged` under the names
    /// it gives them) this tablet's: the files move in as `<prefix><name>`
    /// and the meta is written, after compaction and every write or publish
    /// of this object stopped; the object is retired (reopen the directory).
    pub fn take_clone(&self, mut meta: TabletMeta, staged: &Path, prefix: &str) -> Result<()> {
        let _c = lock(&self.compacting);
        let _g = lock(&self.write_lock);
        self.check_live()?;
        move_staged(&meta, staged, &self.dir, prefix)?;
        rename_files(&mut meta, prefix);
        write_json(&self.dir.join(META_FILE), &meta)?;
        self.retired.store(true, AtomicOrdering::SeqCst);
        Ok(())
    }

    /// Fails once [`Tablet::take_clone`] replaced this object's directory.
    pub(super) fn check_live(&self) -> Result<()> {
        if self.retired.load(AtomicOrdering::SeqCst) {
            return Err(TethysError::Backend(format!(
                "tablet {} was replaced by a clone while this operation waited; retry it",
                self.id()
            )));
        }
        Ok(())
    }
}

/// Moves the files `meta` names from `staged` into `dir` as
/// `<prefix><name>`, fsyncing `dir`.
pub(crate) fn move_staged(
    meta: &TabletMeta,
    staged: &Path,
    dir: &Path,
    prefix: &str,
) -> Result<()> {
    for f in meta_files(meta) {
        let to = dir.join(format!("{prefix}{f}"));
        fs::rename(staged.join(&f), &to)
            .map_err(|e| TethysError::io(format!("installing {}", to.display()), e))?;
    }
    tethys_common::fsutil::sync_dir(dir)
}

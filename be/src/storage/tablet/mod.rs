//! Tablets: a bucket of one partition, stored as versioned, immutable rowsets.
//!
//! `meta.json` (magic + crc32c + JSON) lists the published rowsets and the
//! tablet's version. A load writes its segments first and records them in a
//! pending file `txn_<id>.json`; publishing the transaction moves them into the
//! meta at their version with one atomic meta rewrite, so a crash leaves either
//! the old meta or the new one. Segment files that neither the meta nor a
//! pending record references are garbage and are removed when the tablet opens.
//!
//! One file per thing that happens to a tablet: its metadata on disk
//! (`meta.rs`), a load writing a pending rowset (`write.rs`), partial-column
//! updates (`partial.rs`), publishing (`publish.rs`), reading at a version
//! (`read.rs`) and compaction (`compact.rs`).

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Mutex, RwLock};

use std::sync::Arc;

use arrow::array::{RecordBatch, UInt32Array};
use arrow::compute::{SortColumn, concat_batches, lexsort_to_indices, take_record_batch};
use serde::{Deserialize, Serialize};
use tethys_common::delete::DeleteCondition;
use tethys_common::fsutil::{ensure_dir, write_atomic};
use tethys_common::schema::{KeysType, TableSchema};
use tethys_common::{Result, TethysError};

use roaring::RoaringBitmap;

use super::delete_bitmap::{DeleteBitmap, KeyCodec, KeyIndex, KeyIndexCache};
use super::merge::{MergeSpec, combine_sorted};
use super::segment::{PartialWrite, Segment, SegmentInfo, write_segment};

mod clone;
mod compact;
mod meta;
mod partial;
mod publish;
mod read;
mod write;

pub(crate) use clone::{meta_files, move_staged, rename_files};
pub use meta::*;
use publish::*;
pub use read::*;
pub use write::WriteKind;

/// One tablet on this backend.
#[derive(Debug)]
pub struct Tablet {
    dir: PathBuf,
    meta: RwLock<TabletMeta>,
    pending: Mutex<HashMap<i64, PendingRowset>>,
    /// Serializes meta and pending-file rewrites.
    write_lock: Mutex<()>,
    /// Held while a compaction of this tablet runs: one at a time.
    pub(crate) compacting: Mutex<()>,
    /// Rowsets compaction replaced, for readers of older versions.
    stale: Mutex<Vec<StaleRowset>>,
    /// Scans reading this tablet's files now; stale rowsets wait for zero.
    readers: Arc<AtomicUsize>,
    /// Merge-on-write tables: the key codec, the rows later loads
    /// superseded (also of stale rowsets), and the segments' key indexes.
    mow: Option<MergeOnWrite>,
    /// Set once a clone replaced this tablet's files (`clone.rs`): the
    /// engine holds a reopened object; this one refuses to change them.
    retired: std::sync::atomic::AtomicBool,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn lock_w<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|p| p.into_inner())
}

fn lock_r<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|p| p.into_inner())
}

impl Tablet {
    /// Creates a new, empty tablet directory.
    pub fn create(dir: &Path, mut meta: TabletMeta, keys: &Arc<KeyIndexCache>) -> Result<Tablet> {
        ensure_dir(dir)?;
        meta.delete_bitmaps_built = true;
        write_json(&dir.join(META_FILE), &meta)?;
        let mow = MergeOnWrite::of(&meta.schema, keys)?;
        Ok(Tablet {
            dir: dir.to_path_buf(),
            meta: RwLock::new(meta),
            pending: Mutex::new(HashMap::new()),
            write_lock: Mutex::new(()),
            compacting: Mutex::new(()),
            stale: Mutex::new(vec![]),
            readers: Arc::new(AtomicUsize::new(0)),
            mow,
            retired: Default::default(),
        })
    }

    /// Opens an existing tablet and removes files nothing references.
    pub fn open(dir: &Path, keys: &Arc<KeyIndexCache>) -> Result<Tablet> {
        let meta: TabletMeta = read_json(&dir.join(META_FILE))?;
        if meta.format_version != META_FORMAT_VERSION {
            return Err(TethysError::Corruption(format!(
                "tablet {} meta has unsupported version {}",
                meta.tablet_id, meta.format_version
            )));
        }
        let mut pending = HashMap::new();
        let entries = fs::read_dir(dir)
            .map_err(|e| TethysError::io(format!("listing {}", dir.display()), e))?;
        let mut files = Vec::new();
        for e in entries {
            let e = e.map_err(|e| TethysError::io(format!("listing {}", dir.display()), e))?;
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with("txn_") && name.ends_with(".json") {
                let p: PendingRowset = read_json(&e.path())?;
                if meta.rowsets.iter().any(|r| r.txn_id == p.txn_id) {
                    // A publish that wrote the meta and was stopped before
                    // it removed the record: the rowset is live, the record
                    // is not pending (kept, a republish after a compaction
                    // renamed the rowset would add its rows twice, and an
                    // abort would delete the live segments).
                    let _ = fs::remove_file(e.path());
                    continue;
                }
                pending.insert(p.txn_id, p);
            } else {
                files.push(name);
            }
        }
        let mut live: std::collections::HashSet<String> = meta
            .rowsets
            .iter()
            .flat_map(|r| r.segments.iter().map(|s| s.file.clone()))
            .collect();
        live.extend(
            pending
                .values()
                .flat_map(|p| p.segments.iter().map(|s| s.file.clone())),
        );
        live.extend(meta.delete_bitmap_files.iter().cloned());
        for f in files {
            if f == META_FILE || live.contains(&f) {
                continue;
            }
            // Temporary files, segments of loads that never recorded them,
            // delete bitmaps of publishes and compactions that never finished.
            let _ = fs::remove_file(dir.join(&f));
        }
        let mow = MergeOnWrite::of(&meta.schema, keys)?;
        if let Some(m) = &mow {
            let mut bitmaps = lock_w(&m.bitmaps);
            for f in &meta.delete_bitmap_files {
                bitmaps.merge(&DeleteBitmap::read(&dir.join(f))?);
            }
            for r in &meta.rowsets {
                if let Some(text) = &r.delete_bitmap {
                    let what = dir.join(format!("{META_FILE} rowset {}", r.rowset_id));
                    bitmaps.merge(&DeleteBitmap::from_text(text, &what)?);
                }
            }
        }
        let built = meta.delete_bitmaps_built;
        let tablet = Tablet {
            dir: dir.to_path_buf(),
            meta: RwLock::new(meta),
            pending: Mutex::new(pending),
            write_lock: Mutex::new(()),
            compacting: Mutex::new(()),
            stale: Mutex::new(vec![]),
            readers: Arc::new(AtomicUsize::new(0)),
            mow,
            retired: Default::default(),
        };
        if tablet.mow.is_some() && !built {
            tablet.build_delete_bitmaps()?;
        }
        Ok(tablet)
    }

    /// The tablet id.
    pub fn id(&self) -> i64 {
        self.meta().tablet_id
    }

    /// A copy of the current meta.
    pub fn meta(&self) -> TabletMeta {
        self.meta.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The tablet directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

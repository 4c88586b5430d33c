//! The storage engine of one backend: every tablet under `<root>/data`, and
//! the transaction-level operations (write, publish, abort) the FE drives.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use arrow::array::RecordBatch;
use tethys_common::fsutil::ensure_dir;
use tethys_common::schema::TableSchema;
use tethys_common::{Result, TethysError};

use super::compaction::{self, CompactionKind, CompactionOutcome};
use super::delete_bitmap::{KeyIndexCache, default_key_index_cache_bytes};
use super::tablet::WriteKind;
use super::tablet::{Tablet, TabletMeta, TabletStats};

/// All tablets on this backend.
#[derive(Debug)]
pub struct StorageEngine {
    data_dir: PathBuf,
    tablets: RwLock<HashMap<i64, Arc<Tablet>>>,
    rowset_seq: AtomicU64,
    boot_ms: u64,
    max_tablet_versions: usize,
    /// Parsed segment footers, shared by scans.
    pub(super) footers: super::segment::FooterCache,
    /// Decoded pages, shared by scans.
    pub(super) pages: super::page_cache::PageCache,
    /// Key indexes of merge-on-write segments, shared by the tablets.
    key_indexes: Arc<KeyIndexCache>,
    /// Background compaction settings.
    compaction: CompactionConfig,
}

/// How the backend compacts tablets.
#[derive(Debug, Clone, Copy)]
pub struct CompactionConfig {
    /// Whether the background pool runs (Doris' `disable_auto_compaction`
    /// inverted); manual compaction works either way.
    pub auto: bool,
    /// Background compaction threads.
    pub threads: usize,
    /// Cumulative output size that moves the cumulative point.
    pub promotion_bytes: u64,
    /// How long replaced rowsets stay for readers of older versions.
    pub stale_sweep_ms: u64,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            auto: true,
            threads: 1,
            promotion_bytes: compaction::DEFAULT_PROMOTION_BYTES,
            stale_sweep_ms: compaction::DEFAULT_STALE_SWEEP_MS,
        }
    }
}

impl StorageEngine {
    /// Opens (or creates) the storage under `root`, loading every tablet.
    pub fn open(root: &Path) -> Result<StorageEngine> {
        let data_dir = root.join("data");
        ensure_dir(&data_dir)?;
        let mut tablets = HashMap::new();
        let key_indexes = Arc::new(KeyIndexCache::new(default_key_index_cache_bytes()));
        let entries = fs::read_dir(&data_dir)
            .map_err(|e| TethysError::io(format!("listing {}", data_dir.display()), e))?;
        for e in entries {
            let e = e.map_err(|e| TethysError::io(format!("listing {}", data_dir.display()), e))?;
            let path = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(".dropping") {
                let _ = fs::remove_dir_all(&path);
                continue;
            }
            if !path.is_dir() {
                continue;
            }
            if !path.join("meta.json").exists() {
                // A tablet whose creation never completed.
                let _ = fs::remove_dir_all(&path);
                continue;
            }
            let t = Tablet::open(&path, &key_indexes)?;
            tablets.insert(t.id(), Arc::new(t));
        }
        let boot_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let engine = StorageEngine {
            data_dir,
            tablets: RwLock::new(tablets),
            rowset_seq: AtomicU64::new(0),
            boot_ms,
            max_tablet_versions: super::tablet::MAX_TABLET_VERSION_NUM,
            footers: Default::default(),
            pages: Default::default(),
            key_indexes,
            compaction: CompactionConfig::default(),
        };
        engine.clean_clone_dirs();
        Ok(engine)
    }

    /// Sets how the backend compacts.
    pub fn with_compaction(mut self, c: CompactionConfig) -> Self {
        self.compaction = c;
        self
    }

    /// The storage root (`data/` and the clone directories under it).
    pub(super) fn root(&self) -> PathBuf {
        self.data_dir
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| self.data_dir.clone())
    }

    /// Where tablet `tablet_id` lives.
    pub(super) fn tablet_dir(&self, tablet_id: i64) -> PathBuf {
        self.data_dir.join(tablet_id.to_string())
    }

    pub(super) fn key_indexes(&self) -> &Arc<KeyIndexCache> {
        &self.key_indexes
    }

    /// Puts a (re)opened tablet in the map.
    pub(super) fn put_tablet(&self, tablet_id: i64, t: Arc<Tablet>) {
        self.tablets
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(tablet_id, t);
    }

    /// Forgets cached footers of a directory's files (replaced by a clone).
    pub(super) fn forget_files(&self, dir: &Path) {
        self.footers.forget_dir(dir);
    }

    pub(super) fn next_rowset_id(&self, suffix: &str) -> String {
        format!(
            "{:x}{:06x}{suffix}",
            self.boot_ms,
            self.rowset_seq.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Runs compactions of `kind` on a tablet until none is left to do
    /// (`ADMIN COMPACT TABLE`); returns what ran.
    pub fn compact(&self, tablet_id: i64, kind: CompactionKind) -> Result<Vec<CompactionOutcome>> {
        let t = self.tablet(tablet_id)?;
        let mut done = vec![];
        // A full compaction leaves one rowset; the others stop when their
        // pick is empty. The bound only guards against a policy bug.
        for _ in 0..64 {
            match compaction::compact_once(
                &t,
                kind,
                true,
                || self.next_rowset_id("c"),
                self.compaction.promotion_bytes,
            )? {
                Some(o) => done.push(o),
                None => break,
            }
            if kind == CompactionKind::Full {
                break;
            }
        }
        Ok(done)
    }

    /// One round of the background pool: compacts the tablet that needs it
    /// most and sweeps stale rowsets. True if a compaction ran.
    pub fn compact_round(&self) -> bool {
        tethys_common::debug_point::panic_if_hit("BeCompaction.panic");
        let mut tablets: Vec<(usize, Arc<Tablet>)> = self
            .tablets()
            .values()
            .filter(|t| !t.auto_compaction_disabled())
            .map(|t| (t.compaction_score(), t.clone()))
            .collect();
        tablets.sort_by_key(|t| std::cmp::Reverse(t.0));
        let mut ran = false;
        for (score, t) in tablets {
            if score < 2 {
                break;
            }
            for kind in [
                CompactionKind::Cumulative,
                CompactionKind::Base,
                CompactionKind::Full,
            ] {
                match compaction::compact_once(
                    &t,
                    kind,
                    false,
                    || self.next_rowset_id("c"),
                    self.compaction.promotion_bytes,
                ) {
                    Ok(Some(_)) => ran = true,
                    Ok(None) => {}
                    Err(e) => tracing::warn!("compaction of tablet {} failed: {e}", t.id()),
                }
            }
            if ran {
                break;
            }
        }
        let all: Vec<Arc<Tablet>> = self.tablets().values().cloned().collect();
        for t in all {
            if let Err(e) = t.sweep_stale(self.compaction.stale_sweep_ms) {
                tracing::warn!("sweeping stale rowsets of tablet {} failed: {e}", t.id());
            }
        }
        ran
    }

    /// Starts the background compaction threads; they stop when the engine
    /// is dropped.
    pub fn start_compaction(self: &Arc<Self>) {
        if !self.compaction.auto {
            return;
        }
        for i in 0..self.compaction.threads.max(1) {
            let weak = Arc::downgrade(self);
            let spawned = std::thread::Builder::new()
                .name(format!("compaction-{i}"))
                .spawn(move || {
                    loop {
                        let Some(engine) = weak.upgrade() else {
                            return;
                        };
                        // A round stopped by a bug is logged; the thread
                        // goes on with the next.
                        let ran = tethys_common::panic::contain_sync("a compaction round", || {
                            engine.compact_round()
                        })
                        .unwrap_or(false);
                        drop(engine);
                        if !ran {
                            std::thread::sleep(std::time::Duration::from_millis(200));
                        }
                    }
                });
            if let Err(e) = spawned {
                tracing::warn!("cannot start a compaction thread: {e}");
            }
        }
    }

    /// Keeps up to `bytes` of decoded pages in memory (0: none).
    pub fn with_page_cache(mut self, bytes: usize) -> Self {
        self.pages = super::page_cache::PageCache::new(bytes);
        self
    }

    /// Keeps up to `bytes` of merge-on-write key indexes in memory (0: none;
    /// every lookup then reads the keys from the segment).
    pub fn with_key_index_cache(self, bytes: usize) -> Self {
        self.key_indexes.set_capacity(bytes);
        self
    }

    /// Sets the number of versions a tablet may hold before loads are refused.
    pub fn with_max_tablet_versions(mut self, n: usize) -> Self {
        self.max_tablet_versions = n;
        self
    }

    fn tablets(&self) -> std::sync::RwLockReadGuard<'_, HashMap<i64, Arc<Tablet>>> {
        self.tablets.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates a tablet; creating an existing tablet again is a no-op.
    pub fn create_tablet(
        &self,
        tablet_id: i64,
        table_id: i64,
        partition_id: i64,
        schema: TableSchema,
        version: i64,
    ) -> Result<()> {
        if self.tablets().contains_key(&tablet_id) {
            return Ok(());
        }
        let meta = TabletMeta {
            format_version: 1,
            tablet_id,
            table_id,
            partition_id,
            schema,
            version,
            rowsets: vec![],
            cumulative_point: 0,
            delete_bitmap_files: vec![],
            delete_bitmaps_built: false,
        };
        let t = Tablet::create(
            &self.data_dir.join(tablet_id.to_string()),
            meta,
            &self.key_indexes,
        )?;
        self.tablets
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(tablet_id, Arc::new(t));
        Ok(())
    }

    /// Drops a tablet and its files. Running scans keep their open files.
    pub fn drop_tablet(&self, tablet_id: i64) -> Result<()> {
        let t = self
            .tablets
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&tablet_id);
        if let Some(t) = t {
            self.footers.forget_dir(t.dir());
            let doomed = self.data_dir.join(format!("{tablet_id}.dropping"));
            fs::rename(t.dir(), &doomed)
                .map_err(|e| TethysError::io(format!("dropping tablet {tablet_id}"), e))?;
            let _ = fs::remove_dir_all(&doomed);
        }
        Ok(())
    }

    /// A tablet by id.
    pub fn tablet(&self, tablet_id: i64) -> Result<Arc<Tablet>> {
        self.tablets().get(&tablet_id).cloned().ok_or_else(|| {
            TethysError::Backend(format!("tablet {tablet_id} does not exist on this backend"))
        })
    }

    /// Appends full rows of a transaction to a tablet. Returns bytes written.
    pub fn write(&self, txn_id: i64, tablet_id: i64, batches: &[RecordBatch]) -> Result<u64> {
        self.write_kind(txn_id, tablet_id, batches, WriteKind::Rows)
    }

    /// Appends rows of a transaction to a tablet, as `kind` says what they
    /// are. Returns bytes written.
    pub fn write_kind(
        &self,
        txn_id: i64,
        tablet_id: i64,
        batches: &[RecordBatch],
        kind: WriteKind,
    ) -> Result<u64> {
        let t = self.tablet(tablet_id)?;
        t.write(txn_id, batches, kind, self.max_tablet_versions, || {
            self.next_rowset_id(&format!("t{txn_id}"))
        })
    }

    /// Records a DELETE's predicate on tablets as pending data of a transaction.
    pub fn write_delete(
        &self,
        txn_id: i64,
        tablet_ids: &[i64],
        predicate: &[tethys_common::delete::DeleteCondition],
    ) -> Result<()> {
        for &id in tablet_ids {
            let t = self.tablet(id)?;
            // The predicate must build against the tablet's schema.
            tethys_common::delete::DeleteFilter::new(&[predicate], &t.meta().schema)?;
            t.write_delete(txn_id, predicate.to_vec(), self.max_tablet_versions, || {
                self.next_rowset_id(&format!("t{txn_id}"))
            })?;
        }
        Ok(())
    }

    /// Publishes a transaction on one tablet at `version`.
    pub fn publish(&self, txn_id: i64, tablet_id: i64, version: i64) -> Result<()> {
        self.tablet(tablet_id)?.publish(txn_id, version)
    }

    /// Aborts a transaction on every tablet.
    pub fn abort(&self, txn_id: i64) -> Result<()> {
        let all: Vec<Arc<Tablet>> = self.tablets().values().cloned().collect();
        for t in all {
            t.abort(txn_id)?;
        }
        Ok(())
    }

    /// Transactions with unpublished data on this backend.
    pub fn pending_txns(&self) -> Vec<i64> {
        let mut v: Vec<i64> = self
            .tablets()
            .values()
            .flat_map(|t| t.pending_txns())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Stats of one tablet, if it exists.
    pub fn stats(&self, tablet_id: i64) -> Option<TabletStats> {
        self.tablets().get(&tablet_id).map(|t| t.stats())
    }

    /// Number of tablets and bytes stored.
    pub fn totals(&self) -> (usize, u64) {
        let t = self.tablets();
        (t.len(), t.values().map(|t| t.stats().data_size).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, StringArray};
    use tethys_common::schema::Column;
    use tethys_common::types::ColumnType;

    fn schema() -> TableSchema {
        TableSchema {
            columns: vec![
                Column::new("k", ColumnType::Int, false, true),
                Column::new("v", ColumnType::Varchar(8), true, false),
            ],
            num_key_columns: 1,
            compression: "lz4".into(),
            bloom_filter_columns: vec![],
            ..Default::default()
        }
    }

    fn batch(s: &TableSchema, keys: Vec<i32>) -> RecordBatch {
        let n = keys.len();
        RecordBatch::try_new(
            s.arrow_schema(),
            vec![
                std::sync::Arc::new(Int32Array::from(keys)),
                std::sync::Arc::new(StringArray::from(vec!["x"; n])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn publish_abort_and_restart() {
        let dir = tempfile::tempdir().unwrap();
        let s = schema();
        {
            let e = StorageEngine::open(dir.path()).unwrap();
            e.create_tablet(7, 1, 2, s.clone(), 1).unwrap();
            e.write(100, 7, &[batch(&s, vec![3, 1, 2])]).unwrap();
            e.write(101, 7, &[batch(&s, vec![9])]).unwrap();
            e.publish(100, 7, 2).unwrap();
            e.publish(100, 7, 2).unwrap(); // idempotent
            assert_eq!(e.stats(7).unwrap().row_count, 3);
            assert_eq!(e.pending_txns(), vec![101]);
        }
        // Restart: txn 101 is still pending (the FE decides its fate), 100 is visible.
        let e = StorageEngine::open(dir.path()).unwrap();
        assert_eq!(e.pending_txns(), vec![101]);
        assert_eq!(e.tablet(7).unwrap().segments_at(2).unwrap().len(), 1);
        assert_eq!(e.tablet(7).unwrap().segments_at(1).unwrap().len(), 0);
        e.abort(101).unwrap();
        assert!(e.pending_txns().is_empty());
        let files = std::fs::read_dir(dir.path().join("data/7"))
            .unwrap()
            .count();
        assert_eq!(files, 2, "meta.json and one segment remain");
        e.drop_tablet(7).unwrap();
        assert!(e.tablet(7).is_err());
    }

    /// kill -9 between a publish's meta write and the removal of the
    /// transaction's pending record (found by benches/torture: an INSERT
    /// republished after a restart showed one tablet's rows twice).
    #[test]
    fn a_publish_stopped_before_it_removed_its_record_is_not_pending_again() {
        let dir = tempfile::tempdir().unwrap();
        let s = schema();
        let record = dir.path().join("data/7/txn_100.json");
        {
            let e = StorageEngine::open(dir.path()).unwrap();
            e.create_tablet(7, 1, 2, s.clone(), 1).unwrap();
            e.write(99, 7, &[batch(&s, vec![5])]).unwrap();
            e.publish(99, 7, 2).unwrap();
            e.write(100, 7, &[batch(&s, vec![3, 1, 2])]).unwrap();
            let kept = std::fs::read(&record).unwrap();
            e.publish(100, 7, 3).unwrap();
            // The record as the stopped publish left it.
            std::fs::write(&record, kept).unwrap();
        }
        let e = StorageEngine::open(dir.path()).unwrap();
        assert!(e.pending_txns().is_empty(), "published, not pending");
        assert!(!record.exists());
        // A compaction renames the rowsets; the FE's republish and abort
        // then find nothing to add twice or to delete.
        e.compact(7, CompactionKind::Full).unwrap();
        e.publish(100, 7, 3).unwrap();
        e.abort(100).unwrap();
        assert_eq!(e.stats(7).unwrap().row_count, 4);
        let reopened = StorageEngine::open(dir.path()).unwrap();
        assert_eq!(reopened.stats(7).unwrap().row_count, 4);
    }
}

#[cfg(test)]
mod version_limit_tests {
    use super::*;
    use crate::storage::tablet::MAX_TABLET_VERSION_NUM;
    use arrow::array::Int32Array;
    use tethys_common::schema::Column;
    use tethys_common::types::ColumnType;

    #[test]
    fn too_many_versions_refuse_loads() {
        let dir = tempfile::tempdir().unwrap();
        let e = StorageEngine::open(dir.path())
            .unwrap()
            .with_max_tablet_versions(5);
        let s = TableSchema {
            columns: vec![Column::new("k", ColumnType::Int, false, true)],
            num_key_columns: 1,
            compression: "lz4".into(),
            bloom_filter_columns: vec![],
            ..Default::default()
        };
        e.create_tablet(1, 1, 1, s.clone(), 1).unwrap();
        let b = RecordBatch::try_new(
            s.arrow_schema(),
            vec![std::sync::Arc::new(Int32Array::from(vec![1]))],
        )
        .unwrap();
        assert_eq!(MAX_TABLET_VERSION_NUM, 2000, "Doris' default");
        for v in 0..5 {
            e.write(100 + v, 1, std::slice::from_ref(&b)).unwrap();
            e.publish(100 + v, 1, 2 + v).unwrap();
        }
        let err = e.write(99_999, 1, &[b]).unwrap_err().to_string();
        assert!(err.contains("[E-235]"), "{err}");
        assert!(err.contains("tablet: 1"), "{err}");
        assert!(err.contains("exceed limit: 5"), "{err}");
    }
}

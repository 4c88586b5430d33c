//! Tablets: a bucket of one partition, stored as versioned, immutable rowsets.
//!
//! `meta.json` (magic + crc32c + JSON) lists the published rowsets and the
//! tablet's version. A load writes its segments first and records them in a
//! pending file `txn_<id>.json`; publishing the transaction moves them into the
//! meta at their version with one atomic meta rewrite, so a crash leaves either
//! the old meta or the new one. Segment files that neither the meta nor a
//! pending record references are garbage and are removed when the tablet opens.

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

const META_MAGIC: &[u8; 4] = b"TMT1";
const META_FILE: &str = "meta.json";
const META_FORMAT_VERSION: u32 = 1;

/// Versions (rowsets) a tablet may hold before new loads are refused, as
/// Doris' `max_tablet_version_num`; compaction keeps tablets below it.
pub const MAX_TABLET_VERSION_NUM: usize = 2000;

/// A published rowset: the output of one load, visible from `start_version`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RowsetMeta {
    pub rowset_id: String,
    pub start_version: i64,
    pub end_version: i64,
    pub txn_id: i64,
    pub num_rows: u64,
    pub data_size: u64,
    pub segments: Vec<SegmentInfo>,
    /// Written by compaction: its segments are one sorted run, so a read
    /// merges them as one source (a load's segments may overlap).
    #[serde(default)]
    pub sorted_run: bool,
    /// A DELETE's version: no rows, a predicate hiding rows of older rowsets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_predicate: Option<DeletePredicate>,
    /// Merge-on-write tables: the rows this rowset's publish superseded
    /// (`DeleteBitmap::to_text`), kept in the meta so a publish writes one
    /// file; a compaction moves them into the tablet's bitmap file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_bitmap: Option<String>,
}

/// A DELETE's conjunction of conditions.
pub type DeletePredicate = Vec<DeleteCondition>;

/// The predicates of the DELETEs among `rowsets` published after `r`.
pub fn deletes_after(rowsets: &[RowsetMeta], r: &RowsetMeta) -> Vec<DeletePredicate> {
    rowsets
        .iter()
        .filter(|d| d.start_version > r.end_version)
        .filter_map(|d| d.delete_predicate.clone())
        .collect()
}

impl RowsetMeta {
    /// What this rowset adds to the tablet's compaction score: the sorted
    /// runs a read of it must merge.
    pub fn runs(&self) -> usize {
        if self.sorted_run {
            1
        } else {
            self.segments.len().max(1)
        }
    }
}

/// A rowset compaction replaced, kept for reads of older snapshot versions
/// until no reader can need it. Only in memory: after a restart no query
/// can need one, and opening the tablet removes their files.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StaleRowset {
    pub rowset: RowsetMeta,
    /// When it was replaced (ms since the epoch).
    pub stale_since_ms: u64,
}

/// The durable state of a tablet.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TabletMeta {
    pub format_version: u32,
    pub tablet_id: i64,
    pub table_id: i64,
    pub partition_id: i64,
    pub schema: TableSchema,
    /// Highest published version.
    pub version: i64,
    pub rowsets: Vec<RowsetMeta>,
    /// Rowsets starting at or above this version are cumulative (small,
    /// recent); those below it make up the base.
    #[serde(default)]
    pub cumulative_point: i64,
    /// Merge-on-write tables: the delete-bitmap files (`*.dbm`) holding
    /// which rows of the rowsets later loads superseded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delete_bitmap_files: Vec<String>,
    /// Merge-on-write tables: whether the delete bitmaps cover every rowset
    /// (false for a tablet written before they existed: opening builds them).
    #[serde(default)]
    pub delete_bitmaps_built: bool,
}

/// Segments a transaction has written but not yet published.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PendingRowset {
    pub txn_id: i64,
    pub rowset_id: String,
    pub segments: Vec<SegmentInfo>,
    /// Set for a DELETE's transaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_predicate: Option<DeletePredicate>,
}

/// Summary numbers of a tablet.
#[derive(Debug, Clone, Copy, Default)]
pub struct TabletStats {
    pub version: i64,
    pub row_count: u64,
    pub data_size: u64,
    pub rowset_count: usize,
    pub segment_count: usize,
    /// Sorted runs a full read merges (Doris' compaction score).
    pub compaction_score: usize,
    pub cumulative_point: i64,
}

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
}

/// What the rows of a write are.
#[derive(Debug, Clone, PartialEq)]
enum WriteKind {
    /// Full rows.
    Rows,
    /// Rows deleting their keys.
    Deletes,
    /// A partial column update giving these table columns; strict: new
    /// keys are refused.
    Partial(Vec<usize>, bool),
}

/// The in-memory state of a merge-on-write tablet.
#[derive(Debug)]
struct MergeOnWrite {
    codec: KeyCodec,
    bitmaps: RwLock<DeleteBitmap>,
    /// Key indexes of segments by path, built on first lookup; shared by
    /// the engine's tablets and bounded by bytes (an evicted index is read
    /// back from its segment when needed).
    keys: Arc<KeyIndexCache>,
}

/// One segment file a read scans, with the rows of it later loads of a
/// merge-on-write table deleted (as of the read's version).
#[derive(Debug, Clone)]
pub struct SegmentRead {
    pub path: PathBuf,
    pub deleted_rows: Option<Arc<RoaringBitmap>>,
}

/// Keeps a tablet's stale rowsets on disk while a scan reads the tablet.
#[derive(Debug)]
pub struct ReadLease(Arc<AtomicUsize>);

impl Drop for ReadLease {
    fn drop(&mut self) {
        self.0.fetch_sub(1, AtomicOrdering::Release);
    }
}

fn encode_envelope(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() + 8);
    out.extend_from_slice(META_MAGIC);
    out.extend_from_slice(&crc32c::crc32c(json).to_le_bytes());
    out.extend_from_slice(json);
    out
}

fn decode_envelope<'a>(bytes: &'a [u8], what: &Path) -> Result<&'a [u8]> {
    if bytes.len() < 8 || &bytes[..4] != META_MAGIC {
        return Err(TethysError::Corruption(format!(
            "{}: bad magic",
            what.display()
        )));
    }
    let crc = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    if crc32c::crc32c(&bytes[8..]) != crc {
        return Err(TethysError::Corruption(format!(
            "{}: checksum mismatch",
            what.display()
        )));
    }
    Ok(&bytes[8..])
}

pub(crate) fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let bytes =
        fs::read(path).map_err(|e| TethysError::io(format!("reading {}", path.display()), e))?;
    let json = decode_envelope(&bytes, path)?;
    serde_json::from_slice(json)
        .map_err(|e| TethysError::Corruption(format!("{}: {e}", path.display())))
}

pub(crate) fn write_json<T: Serialize>(path: &Path, v: &T) -> Result<()> {
    let json = serde_json::to_vec(v).map_err(|e| TethysError::Internal(e.to_string()))?;
    write_atomic(path, &encode_envelope(&json))
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

impl MergeOnWrite {
    /// The state of a merge-on-write table's tablet; `None` for others.
    fn of(schema: &TableSchema, keys: &Arc<KeyIndexCache>) -> Result<Option<MergeOnWrite>> {
        if schema.keys_type != KeysType::Unique || !schema.merge_on_write {
            return Ok(None);
        }
        Ok(Some(MergeOnWrite {
            codec: KeyCodec::new(schema)?,
            bitmaps: RwLock::new(DeleteBitmap::default()),
            keys: keys.clone(),
        }))
    }
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

    /// Writes rows of transaction `txn_id` as a new segment of its pending rowset.
    pub fn write(
        &self,
        txn_id: i64,
        batches: &[RecordBatch],
        max_versions: usize,
        rowset_id: impl FnOnce() -> String,
    ) -> Result<u64> {
        self.write_as(txn_id, batches, WriteKind::Rows, max_versions, rowset_id)
    }

    /// Writes rows of a partial column update: only the table columns
    /// `given` carry values; each row's other columns are taken from the
    /// key's current row, or for a new key are the placeholders sent (the
    /// column's default, or NULL); with `strict` a new key fails the write.
    /// Merge-on-write tables only.
    pub fn write_partial(
        &self,
        txn_id: i64,
        batches: &[RecordBatch],
        given: &[usize],
        strict: bool,
        max_versions: usize,
        rowset_id: impl FnOnce() -> String,
    ) -> Result<u64> {
        if self.mow.is_none() {
            return Err(TethysError::NotSupported(
                "partial column update needs a UNIQUE KEY table with \
                 enable_unique_key_merge_on_write = true"
                    .into(),
            ));
        }
        let meta = self.meta();
        if let Some(k) = (0..meta.schema.num_key_columns).find(|k| !given.contains(k)) {
            return Err(TethysError::Analysis(format!(
                "a partial column update must give every key column; {} is missing",
                meta.schema.columns[k].name
            )));
        }
        self.write_as(
            txn_id,
            batches,
            WriteKind::Partial(given.to_vec(), strict),
            max_versions,
            rowset_id,
        )
    }

    /// Writes rows of transaction `txn_id` that delete their keys (only
    /// merge-on-write tables: other models keep no delete bitmaps).
    pub fn write_deletes(
        &self,
        txn_id: i64,
        batches: &[RecordBatch],
        max_versions: usize,
        rowset_id: impl FnOnce() -> String,
    ) -> Result<u64> {
        if self.mow.is_none() {
            return Err(TethysError::NotSupported(
                "deleting rows by key (DELETE with conditions on value columns, merge_type DELETE) \
                 needs a UNIQUE KEY table with enable_unique_key_merge_on_write = true"
                    .into(),
            ));
        }
        self.write_as(txn_id, batches, WriteKind::Deletes, max_versions, rowset_id)
    }

    fn write_as(
        &self,
        txn_id: i64,
        batches: &[RecordBatch],
        kind: WriteKind,
        max_versions: usize,
        rowset_id: impl FnOnce() -> String,
    ) -> Result<u64> {
        self.check_versions(max_versions)?;
        let meta = self.meta();
        let schema = match &kind {
            // Columns a partial update does not give may hold NULL
            // placeholders until they are filled.
            WriteKind::Partial(given, _) => Arc::new(arrow::datatypes::Schema::new(
                meta.schema
                    .arrow_schema()
                    .fields()
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        let f = f.as_ref().clone();
                        if given.contains(&i) {
                            f
                        } else {
                            f.with_nullable(true)
                        }
                    })
                    .collect::<Vec<_>>(),
            )),
            _ => meta.schema.arrow_schema(),
        };
        for b in batches {
            if b.schema().fields().len() != schema.fields().len()
                || b.schema()
                    .fields()
                    .iter()
                    .zip(schema.fields())
                    .any(|(a, e)| a.data_type() != e.data_type())
            {
                return Err(TethysError::Internal(format!(
                    "rows sent to tablet {} do not match its schema",
                    meta.tablet_id
                )));
            }
        }
        let batch = concat_batches(&schema, batches)?;
        if batch.num_rows() == 0 {
            return Ok(0);
        }
        let batch = sort_by_key(&batch, &meta.schema)?;
        let _g = lock(&self.write_lock);
        // Merge-on-write: the key index of these rows, for a partial
        // update's lookups and for the publish's.
        let keys = match &self.mow {
            Some(m) => Some(Arc::new(m.codec.index_of_batch(&batch)?)),
            None => None,
        };
        let mut partial = None;
        let batch = match (&kind, &keys) {
            (WriteKind::Partial(given, strict), Some(keys)) => {
                // Read under the write lock: no publish moves it meanwhile.
                let current = self.meta();
                partial = Some(PartialWrite {
                    given: given.clone(),
                    read_version: current.version,
                });
                self.fill_unmentioned(&current, batch, keys, given, *strict)?
            }
            _ => batch,
        };
        let mut pending = lock(&self.pending)
            .get(&txn_id)
            .cloned()
            .unwrap_or_else(|| PendingRowset {
                txn_id,
                rowset_id: rowset_id(),
                segments: vec![],
                delete_predicate: None,
            });
        let seg_path = self.dir.join(format!(
            "{}_{}.dat",
            pending.rowset_id,
            pending.segments.len()
        ));
        let mut info = write_segment(&seg_path, &meta.schema, &batch)?;
        info.deletes = kind == WriteKind::Deletes;
        info.partial = partial;
        if let (Some(m), Some(keys)) = (&self.mow, keys) {
            m.keys.insert(self.dir.join(&info.file), keys);
        }
        let size = info.size;
        pending.segments.push(info);
        write_json(&self.dir.join(format!("txn_{txn_id}.json")), &pending)?;
        lock(&self.pending).insert(txn_id, pending);
        Ok(size)
    }

    /// Refuses a new version when the tablet already holds `max_versions`.
    fn check_versions(&self, max_versions: usize) -> Result<()> {
        let m = self.meta.read().unwrap_or_else(|p| p.into_inner());
        if m.rowsets.len() >= max_versions {
            return Err(TethysError::TooManyVersions(format!(
                "[E-235]failed to init rowset builder. version count: {}, exceed limit: {max_versions}, tablet: {}. \
                 Please reduce the frequency of loading data or adjust the max_tablet_version_num in be.conf to a larger value.",
                m.rowsets.len(),
                m.tablet_id
            )));
        }
        Ok(())
    }

    /// Makes transaction `txn_id` visible at `version`. Idempotent. For a
    /// merge-on-write table the rows its keys supersede are found and
    /// recorded in a delete bitmap first, in the same meta rewrite.
    pub fn publish(&self, txn_id: i64, version: i64) -> Result<()> {
        let _g = lock(&self.write_lock);
        let mut meta = self.meta();
        if meta.rowsets.iter().any(|r| r.txn_id == txn_id) {
            return Ok(());
        }
        let pending = lock(&self.pending).get(&txn_id).cloned();
        if pending.is_none() && version <= meta.version {
            return Ok(());
        }
        let mut superseded = None;
        let mut refilled = vec![];
        if let Some(p) = &pending {
            let mut rowset = RowsetMeta {
                rowset_id: p.rowset_id.clone(),
                start_version: version,
                end_version: version,
                txn_id,
                num_rows: p.segments.iter().map(|s| s.num_rows).sum(),
                data_size: p.segments.iter().map(|s| s.size).sum(),
                segments: p.segments.clone(),
                sorted_run: p.segments.len() <= 1,
                delete_predicate: p.delete_predicate.clone(),
                delete_bitmap: None,
            };
            if let Some(m) = &self.mow
                && !rowset.segments.is_empty()
            {
                // Keys are looked up in exactly the versions below this one.
                if version != meta.version + 1 {
                    return Err(TethysError::Backend(format!(
                        "tablet {} of a merge-on-write table is at version {}: version {version} \
                         is published after version {}; retried when that one is",
                        meta.tablet_id,
                        meta.version,
                        meta.version + 1
                    )));
                }
                refilled = self.refill_partial(m, &meta, &mut rowset, version)?;
                let found = {
                    let known = lock_r(&m.bitmaps);
                    self.superseded(m, &meta.schema, &meta.rowsets, &rowset, version, &known)?
                };
                if !found.is_empty() {
                    rowset.delete_bitmap = Some(found.to_text()?);
                    superseded = Some(found);
                }
            }
            meta.rowsets.push(rowset);
        }
        meta.version = meta.version.max(version);
        write_json(&self.dir.join(META_FILE), &meta)?;
        // The bitmap goes in before the meta: entries of a version no reader
        // can ask for yet.
        if let (Some(m), Some(found)) = (&self.mow, &superseded) {
            lock_w(&m.bitmaps).merge(found);
        }
        *self.meta.write().unwrap_or_else(|p| p.into_inner()) = meta;
        if pending.is_some() {
            lock(&self.pending).remove(&txn_id);
            let _ = fs::remove_file(self.dir.join(format!("txn_{txn_id}.json")));
        }
        // Segments a re-fill replaced (the pending record named them).
        for f in refilled {
            if let Some(m) = &self.mow {
                m.keys.remove(&self.dir.join(&f));
            }
            let _ = fs::remove_file(self.dir.join(f));
        }
        Ok(())
    }

    /// Fills the columns a partial update does not give from each key's
    /// current row (the live row of the newest version: merge-on-write keeps
    /// one per key); rows of new keys keep their placeholders, which must
    /// not be NULL for a NOT NULL column. Runs under the write lock.
    fn fill_unmentioned(
        &self,
        meta: &TabletMeta,
        batch: RecordBatch,
        keys: &KeyIndex,
        given: &[usize],
        strict: bool,
    ) -> Result<RecordBatch> {
        let Some(m) = &self.mow else {
            return Ok(batch);
        };
        let schema = &meta.schema;
        let missing: Vec<usize> = (0..schema.columns.len())
            .filter(|c| !given.contains(c))
            .collect();
        let n = batch.num_rows();
        if missing.is_empty() || n == 0 {
            return Ok(RecordBatch::try_new(
                schema.arrow_schema(),
                batch.columns().to_vec(),
            )?);
        }
        let types: Vec<arrow::datatypes::DataType> = schema
            .arrow_schema()
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        // Per missing column: the chunks to pick from (chunk 0: the
        // placeholders) and per row which chunk and position.
        let mut chunks: Vec<Vec<arrow::array::ArrayRef>> = missing
            .iter()
            .map(|&c| vec![batch.column(c).clone()])
            .collect();
        let mut pick: Vec<(usize, usize)> = (0..n).map(|i| (0, i)).collect();
        let mut found = vec![false; n];
        let bitmaps = lock_r(&m.bitmaps);
        'sources: for r in meta.rowsets.iter().rev() {
            for (si, s) in r.segments.iter().enumerate().rev() {
                if found.iter().all(|f| *f) {
                    break 'sources;
                }
                if s.deletes {
                    continue;
                }
                let index = self.key_index(m, schema, &s.file)?;
                let gone = bitmaps.at(&r.rowset_id, si as u32, i64::MAX);
                let mut hits: Vec<(usize, u32)> = vec![];
                for (i, f) in found.iter_mut().enumerate() {
                    if *f {
                        continue;
                    }
                    if let Some(x) = index.find(keys, i)
                        && !gone.as_ref().is_some_and(|g| g.contains(x))
                    {
                        *f = true;
                        hits.push((i, x));
                    }
                }
                if hits.is_empty() {
                    continue;
                }
                // Read the pages holding the hits, once each.
                let seg = super::segment::Segment::open(&self.dir.join(&s.file), schema)?;
                let spans: Vec<(u64, u64)> = seg
                    .footer()
                    .columns
                    .first()
                    .map(|c| {
                        c.pages
                            .iter()
                            .map(|p| (p.first_row, u64::from(p.num_rows)))
                            .collect()
                    })
                    .unwrap_or_default();
                hits.sort_by_key(|h| h.1);
                let mut h = 0;
                for (pi, (first, len)) in spans.iter().enumerate() {
                    let end = first + len;
                    let from = h;
                    while h < hits.len() && u64::from(hits[h].1) < end {
                        h += 1;
                    }
                    if from == h {
                        continue;
                    }
                    let rows: UInt32Array =
                        hits[from..h].iter().map(|x| x.1 - *first as u32).collect();
                    for (mi, &c) in missing.iter().enumerate() {
                        let page = seg.read_plain_page(c, pi, &types[c])?;
                        chunks[mi].push(arrow::compute::take(page.as_ref(), &rows, None)?);
                    }
                    let chunk = chunks[0].len() - 1;
                    for (j, hit) in hits[from..h].iter().enumerate() {
                        pick[hit.0] = (chunk, j);
                    }
                }
            }
        }
        drop(bitmaps);
        if strict && let Some(i) = found.iter().position(|f| !f) {
            let key: Vec<String> = (0..schema.num_key_columns)
                .map(|k| {
                    arrow::util::display::array_value_to_string(batch.column(k), i)
                        .unwrap_or_default()
                })
                .collect();
            return Err(TethysError::DataQuality(format!(
                "Insert has filtered data in strict mode: a partial column update cannot insert the new key ({}); \
                 SET enable_insert_strict = false (Stream Load: strict_mode false) inserts new keys with the columns' defaults",
                key.join(", ")
            )));
        }
        let mut columns = batch.columns().to_vec();
        for (mi, &c) in missing.iter().enumerate() {
            let refs: Vec<&dyn arrow::array::Array> =
                chunks[mi].iter().map(|a| a.as_ref()).collect();
            let filled = arrow::compute::interleave(&refs, &pick)?;
            let col = &schema.columns[c];
            if !col.nullable && filled.null_count() > 0 {
                return Err(TethysError::DataQuality(format!(
                    "the unmentioned column `{}` should have a default value or be nullable \
                     for new keys of a partial column update",
                    col.name
                )));
            }
            columns[c] = filled;
        }
        Ok(RecordBatch::try_new(schema.arrow_schema(), columns)?)
    }

    /// Re-fills the partial-update segments of `rowset` (about to be
    /// published at `version`) whose keys a load published after they were
    /// filled also wrote: their unmentioned columns must come from that
    /// newer row. Returns the replaced segment files (removed once the meta
    /// no longer needs them).
    fn refill_partial(
        &self,
        m: &MergeOnWrite,
        meta: &TabletMeta,
        rowset: &mut RowsetMeta,
        version: i64,
    ) -> Result<Vec<String>> {
        let mut replaced = vec![];
        for j in 0..rowset.segments.len() {
            let Some(p) = rowset.segments[j].partial.clone() else {
                continue;
            };
            if p.read_version >= meta.version {
                continue;
            }
            let mine = self.key_index(m, &meta.schema, &rowset.segments[j].file)?;
            let mut conflict = false;
            'newer: for r in meta
                .rowsets
                .iter()
                .filter(|r| r.end_version > p.read_version)
            {
                for s in &r.segments {
                    if !self
                        .key_index(m, &meta.schema, &s.file)?
                        .superseded_by(&mine)
                        .is_empty()
                    {
                        conflict = true;
                        break 'newer;
                    }
                }
            }
            if !conflict {
                continue;
            }
            let old = rowset.segments[j].file.clone();
            let seg = Segment::open(&self.dir.join(&old), &meta.schema)?;
            let arrow = meta.schema.arrow_schema();
            let types: Vec<_> = arrow
                .fields()
                .iter()
                .map(|f| f.data_type().clone())
                .collect();
            let pages = (0..seg.num_pages())
                .map(|pi| {
                    Ok(RecordBatch::try_new(
                        arrow.clone(),
                        seg.read_plain_pages(&types, pi)?,
                    )?)
                })
                .collect::<Result<Vec<_>>>()?;
            // Keys the first fill found stay found; new ones were allowed then.
            let batch = concat_batches(&arrow, &pages)?;
            let batch = self.fill_unmentioned(meta, batch, &mine, &p.given, false)?;
            let file = format!("{}_{j}_v{version}.dat", rowset.rowset_id);
            let mut info = write_segment(&self.dir.join(&file), &meta.schema, &batch)?;
            // Same keys, same order: the old segment's index serves.
            m.keys.insert(self.dir.join(&info.file), mine);
            info.partial = Some(PartialWrite {
                given: p.given,
                read_version: meta.version,
            });
            rowset.segments[j] = info;
            replaced.push(old);
        }
        if !replaced.is_empty() {
            rowset.num_rows = rowset.segments.iter().map(|s| s.num_rows).sum();
            rowset.data_size = rowset.segments.iter().map(|s| s.size).sum();
        }
        Ok(replaced)
    }

    /// Caches the key index of a segment being written from its rows (so
    /// publishing need not read the keys back). No-op unless merge-on-write.
    pub(crate) fn remember_keys(&self, file: &str, batch: &RecordBatch) -> Result<()> {
        if let Some(m) = &self.mow {
            let index = m.codec.index_of_batch(batch)?;
            m.keys.insert(self.dir.join(file), Arc::new(index));
        }
        Ok(())
    }

    /// The key index of segment file `file`, built on first use.
    fn key_index(
        &self,
        m: &MergeOnWrite,
        schema: &TableSchema,
        file: &str,
    ) -> Result<Arc<KeyIndex>> {
        let path = self.dir.join(file);
        if let Some(k) = m.keys.get(&path) {
            return Ok(k);
        }
        let k = Arc::new(m.codec.index(&path, schema)?);
        m.keys.insert(path, k.clone());
        Ok(k)
    }

    /// The rows of the `older` rowsets, and of `new`'s own earlier segments,
    /// holding keys `new` writes again, tagged `version`; rows `known`
    /// already deletes are left out.
    fn superseded(
        &self,
        m: &MergeOnWrite,
        schema: &TableSchema,
        older: &[RowsetMeta],
        new: &RowsetMeta,
        version: i64,
        known: &DeleteBitmap,
    ) -> Result<DeleteBitmap> {
        let mut out = DeleteBitmap::default();
        for (j, seg) in new.segments.iter().enumerate() {
            if seg.deletes {
                let all = RoaringBitmap::from_iter(0..seg.num_rows as u32);
                out.add(&new.rowset_id, j as u32, version, &all);
            }
            let newer = self.key_index(m, schema, &seg.file)?;
            let targets = older
                .iter()
                .flat_map(|r| {
                    r.segments
                        .iter()
                        .enumerate()
                        .map(move |(i, s)| (r.rowset_id.as_str(), i, s))
                })
                .chain(
                    new.segments
                        .iter()
                        .take(j)
                        .enumerate()
                        .map(|(i, s)| (new.rowset_id.as_str(), i, s)),
                );
            for (rowset, i, s) in targets {
                let mut rows = self.key_index(m, schema, &s.file)?.superseded_by(&newer);
                if rows.is_empty() {
                    continue;
                }
                if let Some(done) = known.at(rowset, i as u32, i64::MAX) {
                    rows -= done;
                }
                out.add(rowset, i as u32, version, &rows);
            }
        }
        Ok(out)
    }

    /// Builds the delete bitmaps of a merge-on-write tablet written before
    /// they existed: each rowset's keys supersede the older rowsets' rows.
    fn build_delete_bitmaps(&self) -> Result<()> {
        let Some(m) = &self.mow else {
            return Ok(());
        };
        let _g = lock(&self.write_lock);
        let mut meta = self.meta();
        let mut all = DeleteBitmap::default();
        for (n, r) in meta.rowsets.iter().enumerate() {
            let older = meta.rowsets.get(..n).unwrap_or_default();
            let found = self.superseded(m, &meta.schema, older, r, r.start_version, &all)?;
            all.merge(&found);
        }
        let old_files = std::mem::take(&mut meta.delete_bitmap_files);
        if !all.is_empty() {
            let file = format!("rebuilt_{}.dbm", meta.version);
            all.write(&self.dir.join(&file))?;
            meta.delete_bitmap_files.push(file);
        }
        for r in &mut meta.rowsets {
            r.delete_bitmap = None;
        }
        meta.delete_bitmaps_built = true;
        write_json(&self.dir.join(META_FILE), &meta)?;
        for f in old_files {
            if !meta.delete_bitmap_files.contains(&f) {
                let _ = fs::remove_file(self.dir.join(f));
            }
        }
        *lock_w(&m.bitmaps) = all;
        *self.meta.write().unwrap_or_else(|p| p.into_inner()) = meta;
        Ok(())
    }

    /// The rows of segment `segment` of `rowset` that later loads of a
    /// merge-on-write table deleted as of `version`.
    pub fn deleted_rows(
        &self,
        rowset: &str,
        segment: usize,
        version: i64,
    ) -> Option<RoaringBitmap> {
        let m = self.mow.as_ref()?;
        lock_r(&m.bitmaps).at(rowset, segment as u32, version)
    }

    /// Rows of `rowset` deleted by later loads as of the newest version.
    pub fn deleted_row_count(&self, rowset: &str) -> u64 {
        self.mow
            .as_ref()
            .map_or(0, |m| lock_r(&m.bitmaps).cardinality_of(rowset))
    }

    /// Discards what transaction `txn_id` wrote here. Idempotent.
    pub fn abort(&self, txn_id: i64) -> Result<()> {
        let _g = lock(&self.write_lock);
        if let Some(p) = lock(&self.pending).remove(&txn_id) {
            let _ = fs::remove_file(self.dir.join(format!("txn_{txn_id}.json")));
            if let Some(m) = &self.mow {
                for s in &p.segments {
                    m.keys.remove(&self.dir.join(&s.file));
                }
            }
            for s in p.segments {
                let _ = fs::remove_file(self.dir.join(&s.file));
            }
        }
        Ok(())
    }

    /// Transactions with unpublished rowsets here.
    pub fn pending_txns(&self) -> Vec<i64> {
        lock(&self.pending).keys().copied().collect()
    }

    /// The rowsets visible at `version`, oldest first.
    pub fn rowsets_at(&self, version: i64) -> Result<Vec<RowsetMeta>> {
        let meta = self.meta();
        if meta.version < version {
            return Err(TethysError::Internal(format!(
                "tablet {} is at version {}, query asked for {version}",
                meta.tablet_id, meta.version
            )));
        }
        let mut rs: Vec<&RowsetMeta> = meta
            .rowsets
            .iter()
            .filter(|r| r.end_version <= version)
            .collect();
        // A compacted rowset that ends after `version` replaced rowsets a
        // reader at `version` still needs: the largest stale rowsets inside
        // its range, up to `version` (merges nest, so they do not overlap).
        let straddling: Vec<&RowsetMeta> = meta
            .rowsets
            .iter()
            .filter(|r| r.start_version <= version && version < r.end_version)
            .collect();
        // Most reads are at the newest version: no stale rowset is needed.
        let stale = if straddling.is_empty() {
            vec![]
        } else {
            lock(&self.stale).clone()
        };
        for r in straddling {
            let inside: Vec<&RowsetMeta> = stale
                .iter()
                .map(|s| &s.rowset)
                .filter(|s| s.start_version >= r.start_version && s.end_version <= version)
                .collect();
            let span = |x: &RowsetMeta| (x.start_version, x.end_version);
            let mut covered: Vec<&RowsetMeta> = Vec::new();
            for a in &inside {
                let contained = inside.iter().any(|b| {
                    b.start_version <= a.start_version
                        && a.end_version <= b.end_version
                        && span(b) != span(a)
                });
                // Equal ranges hold the same rows: one of them.
                if !contained && !covered.iter().any(|c| span(c) == span(a)) {
                    covered.push(a);
                }
            }
            let reaches = covered.iter().map(|c| c.start_version).min();
            if reaches != Some(r.start_version) {
                return Err(TethysError::Backend(format!(
                    "[E-230]versions already merged: tablet {} cannot be read at version {version} any more, \
                     compaction merged versions {}-{}; retry the query",
                    meta.tablet_id, r.start_version, r.end_version
                )));
            }
            rs.append(&mut covered);
        }
        rs.sort_by_key(|r| r.start_version);
        Ok(rs.into_iter().cloned().collect())
    }

    /// Segment files visible at `version`, oldest first.
    pub fn segments_at(&self, version: i64) -> Result<Vec<PathBuf>> {
        Ok(self
            .read_plan(version)?
            .into_iter()
            .flat_map(|(segments, _)| segments.into_iter().map(|s| s.path))
            .collect())
    }

    /// What a read at `version` scans: each data rowset's segment files,
    /// oldest first, with the rows later loads of a merge-on-write table
    /// deleted and the predicates of the DELETEs published after the rowset
    /// (its rows they hold for are deleted).
    pub fn read_plan(&self, version: i64) -> Result<Vec<(Vec<SegmentRead>, Vec<DeletePredicate>)>> {
        let rowsets = self.rowsets_at(version)?;
        let bitmaps = self.mow.as_ref().map(|m| lock_r(&m.bitmaps));
        Ok(rowsets
            .iter()
            .filter(|r| !r.segments.is_empty())
            .map(|r| {
                let deletes = deletes_after(&rowsets, r);
                let files = r
                    .segments
                    .iter()
                    .enumerate()
                    .map(|(i, s)| SegmentRead {
                        path: self.dir.join(&s.file),
                        deleted_rows: bitmaps
                            .as_ref()
                            .and_then(|b| b.at(&r.rowset_id, i as u32, version))
                            .map(Arc::new),
                    })
                    .collect();
                (files, deletes)
            })
            .collect())
    }

    /// Records a DELETE's predicate as transaction `txn_id`'s pending rowset.
    pub fn write_delete(
        &self,
        txn_id: i64,
        predicate: DeletePredicate,
        max_versions: usize,
        rowset_id: impl FnOnce() -> String,
    ) -> Result<()> {
        self.check_versions(max_versions)?;
        let _g = lock(&self.write_lock);
        let pending = PendingRowset {
            txn_id,
            rowset_id: rowset_id(),
            segments: vec![],
            delete_predicate: Some(predicate),
        };
        write_json(&self.dir.join(format!("txn_{txn_id}.json")), &pending)?;
        lock(&self.pending).insert(txn_id, pending);
        Ok(())
    }

    /// Sorted runs a full read of the tablet merges (Doris' compaction score).
    pub fn compaction_score(&self) -> usize {
        let m = self.meta.read().unwrap_or_else(|p| p.into_inner());
        m.rowsets.iter().map(|r| r.runs()).sum()
    }

    /// Whether the table asked for no background compaction.
    pub fn auto_compaction_disabled(&self) -> bool {
        let m = self.meta.read().unwrap_or_else(|p| p.into_inner());
        m.schema.disable_auto_compaction
    }

    /// Marks a scan reading this tablet's files until the lease drops.
    pub fn lease(&self) -> ReadLease {
        self.readers.fetch_add(1, AtomicOrdering::Acquire);
        ReadLease(self.readers.clone())
    }

    /// Swaps `inputs` (consecutive rowsets, still live) for their compacted
    /// `output` in one meta rewrite, keeping the inputs as stale rowsets;
    /// `promote` moves the cumulative point past the output. False (and
    /// nothing changed) if the inputs are no longer all live.
    pub fn replace_rowsets(
        &self,
        inputs: &[RowsetMeta],
        output: Option<RowsetMeta>,
        promote: bool,
    ) -> Result<bool> {
        let _g = lock(&self.write_lock);
        let mut meta = self.meta();
        let ids: std::collections::HashSet<&str> =
            inputs.iter().map(|r| r.rowset_id.as_str()).collect();
        let live = meta
            .rowsets
            .iter()
            .filter(|r| ids.contains(r.rowset_id.as_str()))
            .count();
        if live != inputs.len() || inputs.is_empty() {
            return Ok(false);
        }
        let now = now_ms();
        let end = inputs.iter().map(|r| r.end_version).max().unwrap_or(0);
        let carried = match &self.mow {
            Some(m) => Some(self.carry_deletes(m, &meta.schema, inputs, output.as_ref(), end)?),
            None => None,
        };
        meta.rowsets.retain(|r| !ids.contains(r.rowset_id.as_str()));
        let output_id = output.as_ref().map(|o| o.rowset_id.clone());
        if let Some(o) = output {
            meta.rowsets.push(o);
        }
        meta.rowsets.sort_by_key(|r| r.start_version);
        if promote {
            meta.cumulative_point = meta.cumulative_point.max(end + 1);
        }
        // Merge-on-write: one bitmap file of the live rowsets' entries
        // replaces the tablet's others and the bitmaps kept in rowsets.
        let mut old_files = vec![];
        if let (Some(m), Some(carried)) = (&self.mow, &carried) {
            let mut keep = lock_r(&m.bitmaps).clone();
            keep.merge(carried);
            let live_ids: std::collections::HashSet<&str> =
                meta.rowsets.iter().map(|r| r.rowset_id.as_str()).collect();
            keep.retain_rowsets(|r| live_ids.contains(r));
            old_files = std::mem::take(&mut meta.delete_bitmap_files);
            if !keep.is_empty() {
                let name = match &output_id {
                    Some(id) => format!("{id}.dbm"),
                    None => format!("{}_merged.dbm", inputs[0].rowset_id),
                };
                keep.write(&self.dir.join(&name))?;
                meta.delete_bitmap_files.push(name);
            }
            // The file holds what the rowsets' own bitmaps held.
            for r in &mut meta.rowsets {
                r.delete_bitmap = None;
            }
        }
        write_json(&self.dir.join(META_FILE), &meta)?;
        for f in old_files {
            if !meta.delete_bitmap_files.contains(&f) {
                let _ = fs::remove_file(self.dir.join(f));
            }
        }
        if let (Some(m), Some(carried)) = (&self.mow, &carried) {
            lock_w(&m.bitmaps).merge(carried);
            // Lookups no longer go to the replaced segments.
            for s in inputs.iter().flat_map(|r| r.segments.iter()) {
                m.keys.remove(&self.dir.join(&s.file));
            }
        }
        lock(&self.stale).extend(inputs.iter().cloned().map(|rowset| StaleRowset {
            rowset,
            stale_since_ms: now,
        }));
        *self.meta.write().unwrap_or_else(|p| p.into_inner()) = meta;
        Ok(true)
    }

    /// The rows of a compaction's output that loads after its last version
    /// `end` superseded: each input row deleted by a version above `end` is
    /// found in the output by its key and deleted there at that version.
    fn carry_deletes(
        &self,
        m: &MergeOnWrite,
        schema: &TableSchema,
        inputs: &[RowsetMeta],
        output: Option<&RowsetMeta>,
        end: i64,
    ) -> Result<DeleteBitmap> {
        let mut out = DeleteBitmap::default();
        let Some(o) = output else {
            return Ok(out);
        };
        let bitmaps = lock_r(&m.bitmaps);
        let mut targets: Option<Vec<Arc<KeyIndex>>> = None;
        for r in inputs {
            for (i, s) in r.segments.iter().enumerate() {
                let later = bitmaps.after(&r.rowset_id, i as u32, end);
                if later.is_empty() {
                    continue;
                }
                let keys = self.key_index(m, schema, &s.file)?;
                let targets = match &mut targets {
                    Some(t) => &*t,
                    None => targets.insert(
                        o.segments
                            .iter()
                            .map(|s| self.key_index(m, schema, &s.file))
                            .collect::<Result<Vec<_>>>()?,
                    ),
                };
                for (v, rows) in later {
                    for x in rows {
                        if x as usize >= keys.len() {
                            return Err(TethysError::Corruption(format!(
                                "tablet {}: delete bitmap of rowset {} segment {i} names row {x} of {}",
                                self.id(),
                                r.rowset_id,
                                keys.len()
                            )));
                        }
                        for (oi, t) in targets.iter().enumerate() {
                            if let Some(row) = t.find(&keys, x as usize) {
                                out.insert(&o.rowset_id, oi as u32, v, row);
                                break;
                            }
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// Deletes stale rowsets older than `min_age_ms` when no scan reads the
    /// tablet. Returns the files removed.
    pub fn sweep_stale(&self, min_age_ms: u64) -> Result<Vec<PathBuf>> {
        if self.readers.load(AtomicOrdering::Acquire) > 0 {
            return Ok(vec![]);
        }
        let now = now_ms();
        let old: Vec<StaleRowset> = {
            let mut stale = lock(&self.stale);
            let (old, keep) = stale
                .drain(..)
                .partition(|s| now.saturating_sub(s.stale_since_ms) >= min_age_ms);
            *stale = keep;
            old
        };
        if let Some(m) = &self.mow
            && !old.is_empty()
        {
            let gone: std::collections::HashSet<&str> =
                old.iter().map(|s| s.rowset.rowset_id.as_str()).collect();
            lock_w(&m.bitmaps).retain_rowsets(|r| !gone.contains(r));
        }
        let mut removed = vec![];
        for s in old {
            for seg in s.rowset.segments {
                let p = self.dir.join(&seg.file);
                let _ = fs::remove_file(&p);
                removed.push(p);
            }
        }
        Ok(removed)
    }

    /// Rowsets compaction replaced that are still on disk.
    pub fn stale_rowsets(&self) -> Vec<StaleRowset> {
        lock(&self.stale).clone()
    }

    /// A file path in this tablet's directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Summary numbers.
    pub fn stats(&self) -> TabletStats {
        let m = self.meta();
        TabletStats {
            version: m.version,
            row_count: m.rowsets.iter().map(|r| r.num_rows).sum(),
            data_size: m.rowsets.iter().map(|r| r.data_size).sum(),
            rowset_count: m.rowsets.len(),
            segment_count: m.rowsets.iter().map(|r| r.segments.len()).sum(),
            compaction_score: m.rowsets.iter().map(|r| r.runs()).sum(),
            cumulative_point: m.cumulative_point,
        }
    }
}

/// How full rows of a table with `schema` merge by key.
pub fn merge_spec(schema: &TableSchema) -> MergeSpec {
    let all: Vec<usize> = (0..schema.columns.len()).collect();
    merge_spec_of(schema, &all)
}

/// How batches of the table columns `columns` (every key column first, in
/// key order) merge by key.
pub fn merge_spec_of(schema: &TableSchema, columns: &[usize]) -> MergeSpec {
    MergeSpec {
        keys: (0..schema.num_key_columns).collect(),
        rules: columns.iter().map(|&c| schema.merge_rule(c)).collect(),
        combine: schema.keys_type != KeysType::Duplicate,
    }
}

/// Sorts a batch of full rows by the table's key; for AGGREGATE and UNIQUE
/// tables rows with equal keys keep their arrival order and are combined
/// into one (the load-time step of the model).
pub fn sort_by_key(batch: &RecordBatch, schema: &TableSchema) -> Result<RecordBatch> {
    let keys = schema.num_key_columns.min(batch.num_columns());
    if keys == 0 || batch.num_rows() < 2 {
        return Ok(batch.clone());
    }
    let mut cols: Vec<SortColumn> = (0..keys)
        .map(|i| SortColumn {
            values: batch.column(i).clone(),
            options: None,
        })
        .collect();
    let spec = merge_spec(schema);
    if spec.combine {
        // The sort is not stable; arrival order breaks ties.
        cols.push(SortColumn {
            values: Arc::new(UInt32Array::from_iter_values(0..batch.num_rows() as u32)),
            options: None,
        });
    }
    let idx = lexsort_to_indices(&cols, None)?;
    let sorted = take_record_batch(batch, &idx)?;
    combine_sorted(&sorted, &spec)
}

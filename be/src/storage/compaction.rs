//! Compaction: merging a tablet's rowsets so reads merge few sorted runs
//! and the version count stays below `max_tablet_version_num`.
//!
//! As in Doris, a tablet's rowsets are split by its cumulative point:
//! cumulative compaction merges the small, recent rowsets above it (sized
//! tiers: a leading rowset larger than all that follow it waits), base
//! compaction merges everything below it into one base rowset, and a
//! cumulative output of at least the promotion size moves the point past
//! itself. Full compaction (`ADMIN COMPACT TABLE ... WHERE type = 'full'`)
//! merges every rowset. The merge is the model's (`storage::merge`):
//! AGGREGATE combines, UNIQUE keeps the newest row, DUPLICATE only sorts.
//!
//! Crash safety: the output segments are written under a new rowset id and
//! become part of the tablet only with the one atomic meta rewrite that also
//! retires the inputs (kept in memory as stale rowsets for running readers
//! of older versions). A crash before the rewrite leaves the output's files
//! unreferenced, a crash after it the inputs' files; opening the tablet
//! removes them. Nothing is lost or counted twice.

use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{BooleanArray, RecordBatch};
use arrow::compute::{concat_batches, filter_record_batch};
use arrow::datatypes::{DataType, SchemaRef};
use roaring::RoaringBitmap;
use tethys_common::config::{ROWS_PER_PAGE, SEGMENT_FLUSH_ROWS};
use tethys_common::delete::{DeleteCondition, DeleteFilter};
use tethys_common::schema::TableSchema;
use tethys_common::{Result, TethysError};

use super::merge::{BatchSource, KeyMerger};
use super::segment::{Segment, SegmentInfo, write_segment};
use super::tablet::{RowsetMeta, Tablet, TabletMeta, deletes_after, lock, merge_spec};

/// Cumulative compaction waits for this many rowsets above the point
/// (Doris' `cumulative_compaction_min_deltas`).
pub const CUMULATIVE_MIN_DELTAS: usize = 5;
/// ... and merges at most this many at once (`cumulative_compaction_max_deltas`).
pub const CUMULATIVE_MAX_DELTAS: usize = 1000;
/// Base compaction waits for this many rowsets below the point
/// (`base_compaction_min_rowset_num`).
pub const BASE_MIN_ROWSETS: usize = 5;
/// A cumulative output this large moves the cumulative point
/// (`compaction_promotion_size_mbytes`, 1 GB).
pub const DEFAULT_PROMOTION_BYTES: u64 = 1 << 30;
/// Replaced rowsets stay readable this long for queries at older versions
/// (`tablet_rowset_stale_sweep_time_sec`, 300 s).
pub const DEFAULT_STALE_SWEEP_MS: u64 = 300_000;

/// What a compaction merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionKind {
    Cumulative,
    Base,
    Full,
}

/// What one compaction did.
#[derive(Debug, Clone, Copy)]
pub struct CompactionOutcome {
    pub kind: CompactionKind,
    pub input_rowsets: usize,
    pub input_rows: u64,
    pub output_rows: u64,
    pub start_version: i64,
    pub end_version: i64,
}

/// The consecutive rowsets a compaction of `kind` merges now, if any; a
/// manual request merges whatever two or more it finds.
pub fn pick(meta: &TabletMeta, kind: CompactionKind, manual: bool) -> Option<Vec<RowsetMeta>> {
    let mut rowsets: Vec<&RowsetMeta> = meta.rowsets.iter().collect();
    rowsets.sort_by_key(|r| r.start_version);
    let chosen: Vec<&RowsetMeta> = match kind {
        CompactionKind::Full => rowsets,
        CompactionKind::Base => rowsets
            .into_iter()
            .filter(|r| r.end_version < meta.cumulative_point)
            .collect(),
        CompactionKind::Cumulative => {
            // A DELETE's rowset ends a run: its predicate must keep hiding
            // the older rows below the run, so only base or full compaction
            // (which start at the oldest rowset) apply and drop it.
            let above: Vec<&RowsetMeta> = rowsets
                .into_iter()
                .filter(|r| r.start_version >= meta.cumulative_point)
                .collect();
            let mut c: Vec<&RowsetMeta> = above
                .split(|r| r.delete_predicate.is_some())
                .find(|run| run.len() >= if manual { 2 } else { CUMULATIVE_MIN_DELTAS })
                .map(|run| run.to_vec())
                .unwrap_or_default();
            // Size tiers: a leading rowset larger than everything after it
            // is not rewritten for a few small ones (unless asked to).
            while c.len() > 1 && !manual {
                let rest: u64 = c[1..].iter().map(|r| r.data_size).sum();
                if c[0].data_size > rest {
                    c.remove(0);
                } else {
                    break;
                }
            }
            c.truncate(CUMULATIVE_MAX_DELTAS);
            c
        }
    };
    let enough = match (kind, manual) {
        // One rowset of overlapping segments is worth sorting into one run.
        (_, true) => chosen.len() >= 2 || chosen.first().is_some_and(|r| !r.sorted_run),
        // Unasked, full compaction runs to apply accumulated DELETEs.
        (CompactionKind::Full, false) => {
            chosen
                .iter()
                .filter(|r| r.delete_predicate.is_some())
                .count()
                >= BASE_MIN_ROWSETS
        }
        (CompactionKind::Cumulative, false) => chosen.len() >= CUMULATIVE_MIN_DELTAS,
        (CompactionKind::Base, false) => {
            let first = chosen.first().map(|r| r.data_size).unwrap_or(0);
            let rest: u64 = chosen.iter().skip(1).map(|r| r.data_size).sum();
            chosen.len() >= BASE_MIN_ROWSETS || (chosen.len() >= 2 && rest * 10 >= first * 3)
        }
    };
    enough.then(|| chosen.into_iter().cloned().collect())
}

/// Reads every row of a segment page by page, in its (key) order, without
/// the rows `deletes` holds for and the rows in `deleted_rows` (superseded
/// rows of a merge-on-write table).
fn segment_source(
    path: PathBuf,
    schema: &TableSchema,
    deletes: Option<Arc<DeleteFilter>>,
    deleted_rows: Option<RoaringBitmap>,
) -> Result<BatchSource> {
    let seg = Segment::open(&path, schema)?;
    let arrow_schema: SchemaRef = schema.arrow_schema();
    let types: Vec<DataType> = arrow_schema
        .fields()
        .iter()
        .map(|f| f.data_type().clone())
        .collect();
    let mut page = 0;
    let mut first_row = 0u64;
    Ok(Box::new(move || {
        if page >= seg.num_pages() {
            return Ok(None);
        }
        let columns = seg.read_plain_pages(&types, page)?;
        page += 1;
        let mut batch = RecordBatch::try_new(arrow_schema.clone(), columns)?;
        if let Some(gone) = &deleted_rows {
            let first = first_row as u32;
            first_row += batch.num_rows() as u64;
            if gone.range_cardinality(first..first_row as u32) > 0 {
                let live: BooleanArray = (0..batch.num_rows() as u32)
                    .map(|i| Some(!gone.contains(first + i)))
                    .collect();
                batch = filter_record_batch(&batch, &live)?;
            }
        }
        Ok(Some(match &deletes {
            Some(d) => {
                let keep = d.keep(&batch.project(&d.columns)?)?;
                filter_record_batch(&batch, &keep)?
            }
            None => batch,
        }))
    }))
}

/// Writes merged batches as sorted segments of one rowset.
struct RowsetWriter<'a> {
    tablet: &'a Tablet,
    schema: &'a TableSchema,
    rowset_id: String,
    buffered: Vec<RecordBatch>,
    rows: usize,
    written: Vec<SegmentInfo>,
}

impl RowsetWriter<'_> {
    fn add(&mut self, b: RecordBatch) -> Result<()> {
        self.rows += b.num_rows();
        self.buffered.push(b);
        if self.rows >= SEGMENT_FLUSH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let batch = concat_batches(&self.schema.arrow_schema(), &self.buffered)?;
        self.buffered.clear();
        self.rows = 0;
        let path = self
            .tablet
            .file(&format!("{}_{}.dat", self.rowset_id, self.written.len()));
        let info = write_segment(&path, self.schema, &batch)?;
        self.tablet.remember_keys(&info.file, &batch)?;
        self.written.push(info);
        Ok(())
    }

    fn discard(&self) {
        for s in &self.written {
            let _ = std::fs::remove_file(self.tablet.file(&s.file));
        }
    }
}

/// Merges `inputs` (consecutive live rowsets of `tablet`) into one rowset
/// `rowset_id` and swaps it in. `None` if the tablet changed meanwhile.
pub fn run(
    tablet: &Tablet,
    kind: CompactionKind,
    inputs: Vec<RowsetMeta>,
    rowset_id: String,
    promotion_bytes: u64,
) -> Result<Option<CompactionOutcome>> {
    let schema = tablet.meta().schema;
    let start_version = inputs.iter().map(|r| r.start_version).min().unwrap_or(0);
    let end_version = inputs.iter().map(|r| r.end_version).max().unwrap_or(0);
    let mut sources = Vec::new();
    for r in &inputs {
        // DELETEs among the inputs apply to the older inputs (only base and
        // full compaction, which start at the oldest rowset, have any).
        let deletes = deletes_after(&inputs, r);
        let refs: Vec<&[DeleteCondition]> = deletes.iter().map(|d| d.as_slice()).collect();
        let filter = DeleteFilter::new(&refs, &schema)?.map(Arc::new);
        // Merge-on-write: rows superseded up to the output's last version
        // are dropped; later supersessions move to the output at the swap.
        for (i, s) in r.segments.iter().enumerate() {
            sources.push(segment_source(
                tablet.file(&s.file),
                &schema,
                filter.clone(),
                tablet.deleted_rows(&r.rowset_id, i, end_version),
            )?);
        }
    }
    let mut merger = KeyMerger::new(
        schema.arrow_schema(),
        merge_spec(&schema),
        sources,
        ROWS_PER_PAGE,
    )?;
    let mut out = RowsetWriter {
        tablet,
        schema: &schema,
        rowset_id: rowset_id.clone(),
        buffered: vec![],
        rows: 0,
        written: vec![],
    };
    let written = (|| {
        while let Some(b) = merger.next_batch()? {
            out.add(b)?;
        }
        out.flush()
    })();
    if let Err(e) = written {
        out.discard();
        return Err(e);
    }
    let output_rows: u64 = out.written.iter().map(|s| s.num_rows).sum();
    let data_size: u64 = out.written.iter().map(|s| s.size).sum();
    let output = (!out.written.is_empty()).then(|| RowsetMeta {
        rowset_id,
        start_version,
        end_version,
        txn_id: 0,
        num_rows: output_rows,
        data_size,
        segments: out.written.clone(),
        sorted_run: true,
        delete_predicate: None,
        delete_bitmap: None,
    });
    let promote = match kind {
        CompactionKind::Cumulative => data_size >= promotion_bytes,
        CompactionKind::Base | CompactionKind::Full => true,
    };
    let swapped = tablet.replace_rowsets(&inputs, output, promote);
    match swapped {
        Ok(true) => Ok(Some(CompactionOutcome {
            kind,
            input_rowsets: inputs.len(),
            input_rows: inputs.iter().map(|r| r.num_rows).sum(),
            output_rows,
            start_version,
            end_version,
        })),
        Ok(false) => {
            out.discard();
            Ok(None)
        }
        Err(e) => {
            out.discard();
            Err(e)
        }
    }
}

/// Picks and runs one compaction of `kind` on `tablet` if there is one to
/// do, holding the tablet's compaction lock (`None` if another runs).
pub fn compact_once(
    tablet: &Tablet,
    kind: CompactionKind,
    manual: bool,
    rowset_id: impl FnOnce() -> String,
    promotion_bytes: u64,
) -> Result<Option<CompactionOutcome>> {
    let _g = if manual {
        lock(&tablet.compacting)
    } else {
        match tablet.compacting.try_lock() {
            Ok(g) => g,
            Err(_) => return Ok(None),
        }
    };
    let meta = tablet.meta();
    let Some(inputs) = pick(&meta, kind, manual) else {
        return Ok(None);
    };
    run(tablet, kind, inputs, rowset_id(), promotion_bytes).map_err(|e| match e {
        TethysError::Corruption(m) => {
            TethysError::Corruption(format!("compaction of tablet {}: {m}", meta.tablet_id))
        }
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{StorageEngine, WriteKind};
    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::Int64Type;
    use tethys_common::schema::{AggregationType, Column, KeysType};
    use tethys_common::types::ColumnType;

    fn agg_schema() -> TableSchema {
        let col = |n: &str, key: bool, agg| {
            Column::new(n, ColumnType::BigInt, !key, key).with_aggregation(agg)
        };
        TableSchema {
            columns: vec![
                col("k", true, None),
                col("v", false, Some(AggregationType::Sum)),
            ],
            num_key_columns: 1,
            compression: "lz4".into(),
            keys_type: KeysType::Aggregate,
            ..Default::default()
        }
    }

    /// (key, value) rows of the tablet at `version`, merged as a read does.
    fn read(engine: &StorageEngine, version: i64) -> Result<Vec<(i64, i64)>> {
        let t = engine.tablet(1)?;
        let schema = agg_schema();
        let sources = t
            .segments_at(version)?
            .into_iter()
            .map(|p| segment_source(p, &schema, None, None))
            .collect::<Result<Vec<_>>>()?;
        let mut m = KeyMerger::new(schema.arrow_schema(), merge_spec(&schema), sources, 1024)?;
        let mut out = vec![];
        while let Some(b) = m.next_batch()? {
            let (k, v) = (
                b.column(0).as_primitive::<Int64Type>(),
                b.column(1).as_primitive::<Int64Type>(),
            );
            out.extend((0..b.num_rows()).map(|i| (k.value(i), v.value(i))));
        }
        Ok(out)
    }

    #[test]
    fn compaction_keeps_old_versions_readable_and_survives_restart() {
        let dir = tempfile::tempdir().unwrap();
        let engine = StorageEngine::open(dir.path()).unwrap();
        engine.create_tablet(1, 1, 1, agg_schema(), 1).unwrap();
        for (txn, keys) in [(10, vec![1, 2]), (11, vec![2, 3]), (12, vec![3, 3])] {
            let b = RecordBatch::try_new(
                agg_schema().arrow_schema(),
                vec![
                    Arc::new(Int64Array::from(keys.clone())),
                    Arc::new(Int64Array::from(vec![10; keys.len()])),
                ],
            )
            .unwrap();
            engine.write(txn, 1, &[b]).unwrap();
            engine.publish(txn, 1, txn - 8).unwrap();
        }
        // Versions 2, 3, 4; the last load aggregated its two rows of key 3.
        assert_eq!(read(&engine, 4).unwrap(), vec![(1, 10), (2, 20), (3, 30)]);
        let done = engine.compact(1, CompactionKind::Full).unwrap();
        assert_eq!(done.len(), 1);
        assert_eq!((done[0].input_rows, done[0].output_rows), (5, 3));
        let t = engine.tablet(1).unwrap();
        assert_eq!(t.stats().rowset_count, 1);
        assert_eq!(t.meta().cumulative_point, 5);
        assert_eq!(read(&engine, 4).unwrap(), vec![(1, 10), (2, 20), (3, 30)]);
        // A reader at version 3 still sees what version 3 held, from the
        // replaced rowsets.
        assert_eq!(read(&engine, 3).unwrap(), vec![(1, 10), (2, 20), (3, 10)]);
        // Once swept, that version is gone with a clear error.
        let lease = t.lease();
        assert!(t.sweep_stale(0).unwrap().is_empty(), "a reader holds them");
        drop(lease);
        assert_eq!(t.sweep_stale(0).unwrap().len(), 3);
        let e = read(&engine, 3).unwrap_err().to_string();
        assert!(e.contains("versions already merged"), "{e}");
        // A crash in the middle of a later compaction leaves its output
        // unreferenced; reopening removes it and reads the same rows.
        std::fs::write(t.file("deadbeefc_0.dat"), b"partial").unwrap();
        drop((t, engine));
        let engine = StorageEngine::open(dir.path()).unwrap();
        assert!(!dir.path().join("data/1/deadbeefc_0.dat").exists());
        assert_eq!(read(&engine, 4).unwrap(), vec![(1, 10), (2, 20), (3, 30)]);
    }

    fn mow_schema() -> TableSchema {
        TableSchema {
            keys_type: KeysType::Unique,
            merge_on_write: true,
            columns: agg_schema()
                .columns
                .into_iter()
                .map(|c| Column {
                    aggregation: None,
                    ..c
                })
                .collect(),
            ..agg_schema()
        }
    }

    /// (key, value) rows of a merge-on-write tablet at `version`, read as a
    /// scan does: no merge, superseded rows dropped by the delete bitmaps.
    fn read_mow(engine: &StorageEngine, version: i64) -> Result<Vec<(i64, i64)>> {
        let t = engine.tablet(1)?;
        let mut out = vec![];
        for (segments, _) in t.read_plan(version)? {
            for s in segments {
                let deleted = s.deleted_rows.map(|b| (*b).clone());
                let mut src = segment_source(s.path, &mow_schema(), None, deleted)?;
                while let Some(b) = src()? {
                    let (k, v) = (
                        b.column(0).as_primitive::<Int64Type>(),
                        b.column(1).as_primitive::<Int64Type>(),
                    );
                    out.extend((0..b.num_rows()).map(|i| (k.value(i), v.value(i))));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    fn rows(keys: &[i64], value: i64) -> RecordBatch {
        RecordBatch::try_new(
            mow_schema().arrow_schema(),
            vec![
                Arc::new(Int64Array::from(keys.to_vec())),
                Arc::new(Int64Array::from(vec![value; keys.len()])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn merge_on_write_bitmaps_follow_versions_compaction_and_restart() {
        bitmaps_follow_versions(None);
    }

    /// With no key index cache every lookup reads the keys back from the
    /// segments: the answers are the same.
    #[test]
    fn merge_on_write_without_a_key_index_cache() {
        bitmaps_follow_versions(Some(0));
    }

    fn bitmaps_follow_versions(key_cache: Option<usize>) {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            let e = StorageEngine::open(dir.path()).unwrap();
            match key_cache {
                Some(bytes) => e.with_key_index_cache(bytes),
                None => e,
            }
        };
        let engine = open();
        engine.create_tablet(1, 1, 1, mow_schema(), 1).unwrap();
        engine.write(10, 1, &[rows(&[1, 2, 3], 10)]).unwrap();
        engine.publish(10, 1, 2).unwrap();
        // One load, two segments: the second one's key 3 supersedes the first's.
        engine.write(11, 1, &[rows(&[2, 3], 20)]).unwrap();
        engine.write(11, 1, &[rows(&[3], 30)]).unwrap();
        // Publishing out of order would look keys up in the wrong versions.
        let e = engine.publish(11, 1, 4).unwrap_err().to_string();
        assert!(e.contains("after version 3"), "{e}");
        engine.publish(11, 1, 3).unwrap();
        let v2 = vec![(1, 10), (2, 10), (3, 10)];
        let v3 = vec![(1, 10), (2, 20), (3, 30)];
        assert_eq!(read_mow(&engine, 2).unwrap(), v2);
        assert_eq!(read_mow(&engine, 3).unwrap(), v3);
        // Compaction of versions 2-3 starts; meanwhile version 4 supersedes
        // key 1 of version 2 (an input): the swap moves that to the output.
        let t = engine.tablet(1).unwrap();
        let inputs = t.meta().rowsets;
        engine.write(12, 1, &[rows(&[1], 40)]).unwrap();
        engine.publish(12, 1, 4).unwrap();
        let v4 = vec![(1, 40), (2, 20), (3, 30)];
        assert_eq!(read_mow(&engine, 4).unwrap(), v4);
        let done = run(
            &t,
            CompactionKind::Cumulative,
            inputs,
            "cmp1".into(),
            u64::MAX,
        )
        .unwrap()
        .unwrap();
        // Rows superseded up to version 3 are gone; key 1 of version 2 is
        // still a row of the output, deleted from version 4 on.
        assert_eq!((done.input_rows, done.output_rows), (6, 3));
        assert_eq!(read_mow(&engine, 4).unwrap(), v4);
        assert_eq!(read_mow(&engine, 3).unwrap(), v3);
        assert_eq!(read_mow(&engine, 2).unwrap(), v2, "stale rowsets");
        assert_eq!(t.deleted_row_count("cmp1"), 1);
        assert_eq!(t.meta().delete_bitmap_files, vec!["cmp1.dbm".to_string()]);
        // Restart: the one bitmap file is read back; a bitmap file of a
        // publish that never finished is removed.
        std::fs::write(t.file("orphan.dbm"), b"partial").unwrap();
        drop((t, engine));
        let engine = open();
        assert!(!dir.path().join("data/1/orphan.dbm").exists());
        assert_eq!(read_mow(&engine, 4).unwrap(), v4);
        engine.write(13, 1, &[rows(&[2, 9], 50)]).unwrap();
        engine.publish(13, 1, 5).unwrap();
        let v5 = vec![(1, 40), (2, 50), (3, 30), (9, 50)];
        assert_eq!(read_mow(&engine, 5).unwrap(), v5);
        // A publish keeps its bitmap in the meta (no file of its own), and
        // it is read back on open.
        let meta = engine.tablet(1).unwrap().meta();
        assert!(meta.rowsets.last().unwrap().delete_bitmap.is_some());
        assert_eq!(meta.delete_bitmap_files, vec!["cmp1.dbm".to_string()]);
        drop(engine);
        let engine = open();
        assert_eq!(read_mow(&engine, 5).unwrap(), v5);
        // A tablet from before delete bitmaps existed builds them on open.
        let meta_path = dir.path().join("data/1/meta.json");
        let mut meta: TabletMeta = crate::storage::tablet::read_json(&meta_path).unwrap();
        meta.delete_bitmap_files.clear();
        meta.delete_bitmaps_built = false;
        crate::storage::tablet::write_json(&meta_path, &meta).unwrap();
        drop(engine);
        let engine = open();
        assert_eq!(read_mow(&engine, 5).unwrap(), v5);
        assert!(engine.tablet(1).unwrap().meta().delete_bitmaps_built);
        // Full compaction leaves one row per key and no bitmap.
        engine.compact(1, CompactionKind::Full).unwrap();
        let t = engine.tablet(1).unwrap();
        assert_eq!(t.stats().row_count, 4);
        assert!(t.meta().delete_bitmap_files.is_empty());
        assert_eq!(read_mow(&engine, 5).unwrap(), v5);
    }

    #[test]
    fn partial_update_refills_when_a_newer_load_wrote_its_keys() {
        let dir = tempfile::tempdir().unwrap();
        let engine = StorageEngine::open(dir.path()).unwrap();
        engine.create_tablet(1, 1, 1, mow_schema(), 1).unwrap();
        engine.write(10, 1, &[rows(&[1, 2], 10)]).unwrap();
        engine.publish(10, 1, 2).unwrap();
        // A partial update giving only the key: `v` comes from the tablet.
        let placeholders = RecordBatch::try_new(
            Arc::new(arrow::datatypes::Schema::new(vec![
                arrow::datatypes::Field::new("k", DataType::Int64, false),
                arrow::datatypes::Field::new("v", DataType::Int64, true),
            ])),
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3])),
                Arc::new(Int64Array::from(vec![None, None, Some(7)])),
            ],
        )
        .unwrap();
        engine
            .write_kind(
                20,
                1,
                std::slice::from_ref(&placeholders),
                WriteKind::Partial(vec![0], false),
            )
            .unwrap();
        // Meanwhile a load of key 1 is published first.
        engine.write(21, 1, &[rows(&[1], 99)]).unwrap();
        engine.publish(21, 1, 3).unwrap();
        engine.publish(20, 1, 4).unwrap();
        // Key 1 keeps the value published after the partial rows were
        // filled (not the 10 read then); key 3 is new: its placeholder.
        assert_eq!(
            read_mow(&engine, 4).unwrap(),
            vec![(1, 99), (2, 10), (3, 7)]
        );
        // Without a conflict nothing is rewritten.
        // Strict mode refuses a new key; keys 1-3 all exist by now.
        let e = engine
            .write_kind(23, 1, &[rows(&[4], 1)], WriteKind::Partial(vec![0], true))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot insert the new key (4)"), "{e}");
        engine
            .write_kind(22, 1, &[placeholders], WriteKind::Partial(vec![0], true))
            .unwrap();
        engine.publish(22, 1, 5).unwrap();
        assert_eq!(
            read_mow(&engine, 5).unwrap(),
            vec![(1, 99), (2, 10), (3, 7)]
        );
        let files: Vec<String> = std::fs::read_dir(dir.path().join("data/1"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter(|f| f.ends_with(".dat"))
            .collect();
        assert_eq!(files.len(), 4, "{files:?}");
        assert_eq!(
            files.iter().filter(|f| f.contains("_v4")).count(),
            1,
            "{files:?}"
        );
    }

    fn rowset(id: &str, start: i64, end: i64, size: u64) -> RowsetMeta {
        RowsetMeta {
            rowset_id: id.into(),
            start_version: start,
            end_version: end,
            txn_id: 0,
            num_rows: 1,
            data_size: size,
            segments: vec![],
            sorted_run: true,
            delete_predicate: None,
            delete_bitmap: None,
        }
    }

    fn meta(rowsets: Vec<RowsetMeta>, cp: i64) -> TabletMeta {
        TabletMeta {
            format_version: 1,
            tablet_id: 1,
            table_id: 1,
            partition_id: 1,
            schema: TableSchema::default(),
            version: rowsets.iter().map(|r| r.end_version).max().unwrap_or(1),
            rowsets,
            cumulative_point: cp,
            delete_bitmap_files: vec![],
            delete_bitmaps_built: false,
        }
    }

    #[test]
    fn cumulative_waits_for_deltas_and_skips_a_large_leader() {
        let small = |v: i64| rowset(&format!("r{v}"), v, v, 10);
        let m = meta((2..6).map(small).collect(), 0);
        assert!(pick(&m, CompactionKind::Cumulative, false).is_none());
        assert_eq!(
            pick(&m, CompactionKind::Cumulative, true).map(|v| v.len()),
            Some(4)
        );
        let mut rs = vec![rowset("big", 2, 100, 1000)];
        rs.extend((101..106).map(small));
        let m = meta(rs, 0);
        let p = pick(&m, CompactionKind::Cumulative, false).unwrap();
        assert_eq!(p.len(), 5);
        assert_eq!(p[0].start_version, 101);
        // Asked for, it merges the large one too.
        assert_eq!(
            pick(&m, CompactionKind::Cumulative, true).map(|v| v.len()),
            Some(6)
        );
        // Below the cumulative point nothing is cumulative.
        let m = meta((2..8).map(small).collect(), 5);
        assert!(pick(&m, CompactionKind::Cumulative, false).is_none());
        assert_eq!(
            pick(&m, CompactionKind::Base, true).map(|v| v.len()),
            Some(3)
        );
        assert_eq!(
            pick(&m, CompactionKind::Full, true).map(|v| v.len()),
            Some(6)
        );
        // Unasked, full compaction waits for DELETEs to apply.
        assert!(pick(&m, CompactionKind::Full, false).is_none());
        let mut rs: Vec<RowsetMeta> = (2..8).map(small).collect();
        for r in rs.iter_mut().skip(1) {
            r.delete_predicate = Some(vec![]);
        }
        let m = meta(rs, 0);
        assert_eq!(
            pick(&m, CompactionKind::Full, false).map(|v| v.len()),
            Some(6)
        );
        // A DELETE ends a cumulative run.
        assert!(pick(&m, CompactionKind::Cumulative, true).is_none());
    }
}

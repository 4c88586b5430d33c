//! Reads of AGGREGATE and merge-on-read UNIQUE tablets: each visible
//! segment is scanned on its own (sorted by key), the segments are merged
//! oldest first and equal keys combined by the table's model
//! (`storage::merge`), and only then are conjuncts on value columns applied.
//!
//! A conjunct that reads only key columns holds for every version of a key
//! alike, so it is still pushed into the segment scans (short-key ranges,
//! zone maps, bloom filters, vectorized filter). A conjunct on a value column
//! is not: an older row of a key may match it while the key's merged row
//! does not, so it waits for the merge.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::{AsArray, RecordBatch, RecordBatchOptions};
use arrow::compute::filter_record_batch;
use arrow::datatypes::SchemaRef;
use datafusion::error::Result;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::utils::{
    collect_columns, conjunction_opt, reassign_expr_columns, split_conjunction,
};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::Count;
use tethys_common::schema::TableSchema;

use super::segment_scan::{Counters, ScanInputs, ScanState, SegmentToScan, with_delete_filters};
use crate::storage::StorageEngine;
use crate::storage::read::{BatchSource, KeyMerger, TabletSnapshot, merge_spec_of};

/// How one tablet is read: merged, or as its single segment.
enum Reader {
    Single(BatchSource),
    Merge(KeyMerger),
}

/// The merging read of one scan partition's tablets.
pub(super) struct MergeScan {
    engine: Arc<StorageEngine>,
    table_schema: TableSchema,
    /// Table columns read: every key column, then the other projected ones.
    read_projection: Vec<usize>,
    read_schema: SchemaRef,
    /// Key-only conjuncts, over `read_schema`: pushed into segment scans.
    key_predicate: Option<Arc<dyn PhysicalExpr>>,
    /// Everything else, over `read_schema`: applied to merged rows.
    residual: Option<Arc<dyn PhysicalExpr>>,
    /// Positions in `read_schema` of the output columns.
    output: Vec<usize>,
    out_schema: SchemaRef,
    counters: Counters,
    /// Rows that merging folded into another row of the same key.
    merged_away: Count,
    rows_in: Arc<AtomicUsize>,
    rows_merged: usize,
    tablets: VecDeque<(i64, i64)>,
    current: Option<(Reader, TabletSnapshot)>,
    batch_size: usize,
}

impl MergeScan {
    pub(super) fn new(
        exec: ScanInputs<'_>,
        counters: Counters,
        merged_away: Count,
        tablets: VecDeque<(i64, i64)>,
        batch_size: usize,
    ) -> Result<MergeScan> {
        let table_schema = exec.scan.table_schema().clone();
        let projection = exec.scan.projection();
        let nkeys = table_schema.num_key_columns;
        let mut read_projection: Vec<usize> = (0..nkeys).collect();
        read_projection.extend(projection.iter().copied().filter(|&c| c >= nkeys));
        let read_schema = Arc::new(
            table_schema
                .arrow_schema()
                .project(&read_projection)
                .map_err(datafusion::error::DataFusionError::from)?,
        );
        let output = projection
            .iter()
            .map(|c| read_projection.iter().position(|r| r == c).unwrap_or(0))
            .collect();
        let key_names: HashSet<String> = read_schema
            .fields()
            .iter()
            .take(nkeys)
            .map(|f| f.name().clone())
            .collect();
        let (mut on_keys, mut rest) = (vec![], vec![]);
        if let Some(p) = exec.predicate {
            for c in split_conjunction(p) {
                let c = reassign_expr_columns(c.clone(), &read_schema)?;
                if collect_columns(&c)
                    .iter()
                    .all(|col| key_names.contains(col.name()))
                {
                    on_keys.push(c);
                } else {
                    rest.push(c);
                }
            }
        }
        Ok(MergeScan {
            engine: exec.engine.clone(),
            table_schema,
            read_projection,
            read_schema,
            key_predicate: conjunction_opt(on_keys),
            residual: if exec.evaluates {
                conjunction_opt(rest)
            } else {
                None
            },
            output,
            out_schema: exec.scan.schema(),
            counters,
            merged_away,
            rows_in: Arc::new(AtomicUsize::new(0)),
            rows_merged: 0,
            tablets,
            current: None,
            batch_size,
        })
    }

    /// One segment's scan as a merge source.
    fn source(&self, tablet_id: i64, segment: SegmentToScan) -> Result<BatchSource> {
        let mut counters = self.counters.clone();
        // Output rows are counted after the merge.
        counters.rows_out = Count::new();
        let mut state = ScanState::new(
            self.read_schema.clone(),
            self.read_projection.clone(),
            &self.table_schema,
            self.key_predicate.as_ref(),
            true,
            self.engine.clone(),
            counters,
            self.batch_size,
        )?;
        state.tablet_id = tablet_id;
        state.segments.push_back(segment);
        let rows_in = self.rows_in.clone();
        Ok(Box::new(move || {
            let b = state.next_batch()?;
            if let Some(b) = &b {
                rows_in.fetch_add(b.num_rows(), Ordering::Relaxed);
            }
            Ok(b)
        }))
    }

    /// Starts merging the next tablet; false when there is none.
    fn open_next_tablet(&mut self) -> Result<bool> {
        let Some((tablet_id, version)) = self.tablets.pop_front() else {
            return Ok(false);
        };
        let snapshot = self.engine.snapshot(tablet_id, version)?;
        let sources = with_delete_filters(&snapshot, &self.table_schema)?
            .into_iter()
            .map(|seg| self.source(tablet_id, seg))
            .collect::<Result<Vec<_>>>()?;
        // One segment (a compacted tablet, or one load) holds one row per
        // key already: nothing to merge.
        let mut sources = sources;
        let reader = if sources.len() == 1
            && let Some(only) = sources.pop()
        {
            Reader::Single(only)
        } else {
            Reader::Merge(KeyMerger::new(
                self.read_schema.clone(),
                merge_spec_of(&self.table_schema, &self.read_projection),
                sources,
                self.batch_size,
            )?)
        };
        self.current = Some((reader, snapshot));
        Ok(true)
    }

    /// The next batch of merged, filtered rows; `None` at the end.
    pub(super) fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        loop {
            let Some((m, _)) = self.current.as_mut() else {
                if !self.open_next_tablet()? {
                    return Ok(None);
                }
                continue;
            };
            let next = match m {
                Reader::Single(source) => source()?,
                Reader::Merge(merger) => merger.next_batch()?,
            };
            let Some(merged) = next else {
                self.current = None;
                continue;
            };
            self.rows_merged += merged.num_rows();
            let read = self.rows_in.load(Ordering::Relaxed);
            let away = read.saturating_sub(self.rows_merged);
            if away > self.merged_away.value() {
                self.merged_away.add(away - self.merged_away.value());
            }
            let kept = match &self.residual {
                Some(p) => {
                    let mask = p.evaluate(&merged)?.into_array(merged.num_rows())?;
                    let before = merged.num_rows();
                    let b = filter_record_batch(&merged, mask.as_boolean())?;
                    self.counters.rows_pred_filtered.add(before - b.num_rows());
                    b
                }
                None => merged,
            };
            if kept.num_rows() == 0 {
                continue;
            }
            self.counters.rows_out.add(kept.num_rows());
            let columns = self
                .output
                .iter()
                .map(|&i| kept.column(i).clone())
                .collect();
            return Ok(Some(RecordBatch::try_new_with_options(
                self.out_schema.clone(),
                columns,
                &RecordBatchOptions::new().with_row_count(Some(kept.num_rows())),
            )?));
        }
    }
}

//! Reading one tablet's segments, page by page: a page is first pruned
//! (the short-key range, zone maps, rows later loads superseded, page bloom
//! filters), then read through the storage read API, the fragment's filter
//! evaluated on it with late materialization (`predicate.rs`), and the rows
//! DELETEs hide dropped. `TabletScanExec` (`scan.rs`) and the merge-on-read
//! scan (`merge_scan.rs`) both read segments this way.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch, UInt32Array};
use arrow::compute::BatchCoalescer;
use arrow::datatypes::SchemaRef;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder};
use roaring::RoaringBitmap;
use tethys_common::TethysError;
use tethys_common::delete::DeleteFilter;
use tethys_common::plan::OlapScanExec;
use tethys_common::schema::TableSchema;

use super::key_range::KeyBounds;
use super::predicate::{PageRows, ScanPredicate};
use super::zone_test::Pruning;
use crate::storage::StorageEngine;
use crate::storage::read::{
    PageReader, PageValues, Segment, TabletSnapshot, ZoneStats, page_bloom_may_contain,
};

/// What reading a scan's segments needs of the scan.
pub(super) struct ScanInputs<'a> {
    /// The scan description.
    pub(super) scan: &'a OlapScanExec,
    /// The filter the scan prunes (and maybe filters) with.
    pub(super) predicate: Option<&'a Arc<dyn PhysicalExpr>>,
    /// Whether the scan filters rows itself (else a `FilterExec` above does).
    pub(super) evaluates: bool,
    pub(super) engine: &'a Arc<StorageEngine>,
}

/// The scan's counters, under Doris' profile names.
#[derive(Clone)]
pub(super) struct Counters {
    pub(super) rows_read: Count,
    pub(super) pages_read: Count,
    pub(super) pages_skipped: Count,
    pub(super) rows_stats_filtered: Count,
    pub(super) rows_pred_filtered: Count,
    /// Rows hidden by DELETE predicates (Doris' `RowsDelFiltered`).
    pub(super) rows_del_filtered: Count,
    /// Superseded rows of merge-on-write tables skipped (`RowsDelByBitmap`).
    pub(super) rows_del_by_bitmap: Count,
    pub(super) rows_bloom_filtered: Count,
    pub(super) rows_key_filtered: Count,
    pub(super) bytes_read: Count,
    pub(super) raw_bytes_read: Count,
    pub(super) cached_pages: Count,
    pub(super) rows_out: Count,
}

impl Counters {
    /// The counters of partition `partition` of a scan, in `metrics`.
    pub(super) fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Counters {
        let m = |name: &'static str| MetricBuilder::new(metrics).counter(name, partition);
        Counters {
            rows_read: m("RawRowsRead"),
            pages_read: m("PagesRead"),
            pages_skipped: m("PagesSkipped"),
            rows_stats_filtered: m("RowsStatsFiltered"),
            rows_pred_filtered: m("RowsVectorPredFiltered"),
            rows_del_filtered: m("RowsDelFiltered"),
            rows_del_by_bitmap: m("RowsDelByBitmap"),
            rows_bloom_filtered: m("RowsBloomFilterFiltered"),
            rows_key_filtered: m("RowsKeyRangeFiltered"),
            bytes_read: m("CompressedBytesRead"),
            raw_bytes_read: m("UncompressedBytesRead"),
            cached_pages: m("CachedPagesNum"),
            rows_out: MetricBuilder::new(metrics).output_rows(partition),
        }
    }
}

/// The rows of a page pruning leaves: `[from, from + rows)` of the page's
/// `page_len` rows, which start at segment row `first`.
#[derive(Debug, Clone, Copy)]
struct PageSlice {
    first: usize,
    page_len: usize,
    from: usize,
    rows: usize,
}

impl PageSlice {
    /// The slice's rows as segment row numbers.
    fn segment_rows(&self) -> std::ops::Range<u32> {
        (self.first + self.from) as u32..(self.first + self.from + self.rows) as u32
    }
}

/// The columns of a page's rows that passed the filter so far.
struct SurvivingRows {
    arrays: Vec<ArrayRef>,
    kept: usize,
}

impl SurvivingRows {
    /// Keeps the rows `keep` selects; returns how many it dropped.
    fn keep(&mut self, keep: &BooleanArray) -> Result<usize> {
        let survivors = keep.true_count();
        if survivors >= self.kept {
            return Ok(0);
        }
        self.arrays = self
            .arrays
            .iter()
            .map(|a| arrow::compute::filter(a, keep))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let dropped = self.kept - survivors;
        self.kept = survivors;
        Ok(dropped)
    }
}

/// One segment being scanned: which pages survive zone-map pruning and,
/// per conjunct, on which pages zone maps prove it.
struct SegmentScan {
    seg: Segment,
    /// The rows `[start, end)` the short-key index leaves.
    key_rows: (usize, usize),
    keep: Vec<bool>,
    proven: Vec<Vec<bool>>,
    /// The DELETEs published after this segment's rowset.
    deletes: Option<Arc<DeleteFilter>>,
    /// Rows later loads superseded (merge-on-write tables).
    deleted_rows: Option<Arc<RoaringBitmap>>,
    next_page: usize,
}

/// A segment a scan reads, with what deletes rows of it.
pub(super) struct SegmentToScan {
    pub(super) path: PathBuf,
    /// The DELETEs published after the segment's rowset.
    pub(super) deletes: Option<Arc<DeleteFilter>>,
    /// Rows later loads superseded (merge-on-write tables).
    pub(super) deleted_rows: Option<Arc<RoaringBitmap>>,
}

/// The scan's progress through its tablets, segments and pages.
pub(super) struct ScanState {
    schema: SchemaRef,
    table_schema: TableSchema,
    projection: Vec<usize>,
    engine: Arc<StorageEngine>,
    pruning: Option<Pruning>,
    pub(super) predicate: Option<ScanPredicate>,
    /// Bounds on the key prefix, for the segments' short-key indexes.
    key_bounds: Option<KeyBounds>,
    counters: Counters,
    pub(super) tablets: VecDeque<(i64, i64)>,
    pub(super) segments: VecDeque<SegmentToScan>,
    pub(super) tablet_id: i64,
    /// Keeps the files of the tablet being read from compaction's sweep.
    snapshot: Option<TabletSnapshot>,
    segment: Option<SegmentScan>,
    /// Gathers the few rows left of selective pages into full batches.
    coalescer: BatchCoalescer,
    /// Batches to hand out, in order.
    ready: VecDeque<RecordBatch>,
    batch_size: usize,
    done: bool,
}

impl ScanState {
    /// A scan producing `schema` (the table's columns `projection`) that
    /// prunes with `predicate` and, if `evaluates`, filters by it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        schema: SchemaRef,
        projection: Vec<usize>,
        table_schema: &TableSchema,
        predicate: Option<&Arc<dyn PhysicalExpr>>,
        evaluates: bool,
        engine: Arc<StorageEngine>,
        counters: Counters,
        batch_size: usize,
    ) -> Result<ScanState> {
        let pruning = predicate.and_then(|p| Pruning::new(p, &schema));
        let key_bounds =
            predicate.and_then(|p| super::key_range::key_bounds(p, &projection, table_schema));
        let predicate = match predicate {
            Some(p) if evaluates => Some(ScanPredicate::new(p, &schema)?),
            _ => None,
        };
        Ok(ScanState {
            key_bounds,
            schema: schema.clone(),
            table_schema: table_schema.clone(),
            projection,
            engine,
            pruning,
            predicate,
            counters,
            tablets: VecDeque::new(),
            segments: VecDeque::new(),
            tablet_id: 0,
            snapshot: None,
            segment: None,
            coalescer: BatchCoalescer::new(schema, batch_size),
            ready: VecDeque::new(),
            batch_size,
            done: false,
        })
    }

    /// The next output batch; `None` at the end.
    pub(super) fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        loop {
            if let Some(b) = self.ready.pop_front() {
                return Ok(Some(b));
            }
            if self.done {
                return Ok(None);
            }
            match self.next_page()? {
                Some(batch) => self.output(batch)?,
                None => {
                    self.done = true;
                    self.coalescer.finish_buffered_batch()?;
                    while let Some(b) = self.coalescer.next_completed_batch() {
                        self.ready.push_back(b);
                    }
                }
            }
        }
    }

    /// Pages that kept most of their rows go out as they are; smaller ones
    /// are gathered, keeping the order of rows.
    fn output(&mut self, batch: RecordBatch) -> Result<()> {
        // Batches without columns (`count(*)`) carry only a row count, which
        // the coalescer does not keep.
        if batch.num_rows() * 2 >= self.batch_size || batch.num_columns() == 0 {
            self.coalescer.finish_buffered_batch()?;
            while let Some(b) = self.coalescer.next_completed_batch() {
                self.ready.push_back(b);
            }
            self.ready.push_back(batch);
            return Ok(());
        }
        self.coalescer.push_batch(batch)?;
        while let Some(b) = self.coalescer.next_completed_batch() {
            self.ready.push_back(b);
        }
        Ok(())
    }

    /// Opens the next segment to scan; false when there is none.
    fn open_next_segment(&mut self) -> Result<bool> {
        while self.segments.is_empty() {
            let Some((tablet_id, version)) = self.tablets.pop_front() else {
                return Ok(false);
            };
            let snapshot = self.engine.snapshot(tablet_id, version)?;
            self.segments = with_delete_filters(&snapshot, &self.table_schema)?.into();
            self.snapshot = Some(snapshot);
            self.tablet_id = tablet_id;
        }
        let Some(SegmentToScan {
            path,
            deletes,
            deleted_rows,
        }) = self.segments.pop_front()
        else {
            return Ok(false);
        };
        let seg = self.engine.open_segment(&path, &self.table_schema)?;
        let pages = seg.num_pages();
        let all_rows = seg.footer().num_rows as usize;
        // A segment whose every row is superseded (or deletes keys) is not read.
        if deleted_rows
            .as_ref()
            .is_some_and(|gone| gone.len() >= all_rows as u64)
        {
            self.counters.rows_del_by_bitmap.add(all_rows);
            self.counters.pages_skipped.add(pages);
            return Ok(true);
        }
        let key_rows = match &self.key_bounds {
            Some(b) => match seg
                .short_key_index()
                .map_err(|e| corrupt_in(self.tablet_id, e))?
            {
                Some(idx) => idx.row_range(b.lower.as_deref(), b.upper.as_deref()),
                None => (0, all_rows),
            },
            None => (0, all_rows),
        };
        let cols = &seg.footer().columns;
        let schema = &self.schema;
        let projection = &self.projection;
        let page_stats = || ZoneStats {
            schema,
            zones: (0..pages)
                .map(|pi| {
                    projection
                        .iter()
                        .map(|&c| &cols[c].pages[pi].zone)
                        .collect()
                })
                .collect(),
            rows: (0..pages).map(|pi| page_span(&seg, pi).1 as u64).collect(),
        };
        let mut stats = None;
        let keep: Vec<bool> = match &self.pruning {
            Some(p) => {
                // Whole segment first, then its pages.
                let seg_stats = ZoneStats {
                    schema,
                    zones: vec![projection.iter().map(|&c| &cols[c].zone).collect()],
                    rows: vec![seg.footer().num_rows],
                };
                if !p.prune(&seg_stats)?.first().copied().unwrap_or(true) {
                    vec![false; pages]
                } else {
                    p.prune(stats.get_or_insert_with(page_stats))?
                }
            }
            None => vec![true; pages],
        };
        let proven = match &self.predicate {
            Some(p) if keep.iter().any(|k| *k) => {
                p.proven_true(stats.get_or_insert_with(page_stats))?
            }
            _ => Vec::new(),
        };
        drop(stats);
        self.segment = Some(SegmentScan {
            seg,
            key_rows,
            keep,
            proven,
            deletes,
            deleted_rows,
            next_page: 0,
        });
        Ok(true)
    }

    /// The surviving rows of the next page with any; `None` at the end.
    fn next_page(&mut self) -> Result<Option<RecordBatch>> {
        loop {
            let at_end = self
                .segment
                .as_ref()
                .is_none_or(|s| s.next_page >= s.keep.len());
            if at_end {
                self.segment = None;
                if !self.open_next_segment()? {
                    return Ok(None);
                }
                continue;
            }
            let Some(s) = self.segment.as_mut() else {
                continue;
            };
            let pi = s.next_page;
            s.next_page += 1;
            if let Some(rows) = self.prune_page(pi)?
                && let Some(batch) = self.read_page(pi, rows)?
            {
                return Ok(Some(batch));
            }
        }
    }

    /// The rows of page `pi` of the current segment that pruning leaves:
    /// the short-key range, zone maps, rows later loads superseded and page
    /// bloom filters, in that order; `None` when none is left.
    fn prune_page(&self, pi: usize) -> Result<Option<PageSlice>> {
        let Some(s) = self.segment.as_ref() else {
            return Ok(None);
        };
        let counters = &self.counters;
        let (first, page_len) = page_span(&s.seg, pi);
        // The part of the page the short-key index leaves.
        let from = s.key_rows.0.clamp(first, first + page_len) - first;
        let to = s.key_rows.1.clamp(first, first + page_len) - first;
        let slice = PageSlice {
            first,
            page_len,
            from,
            rows: to.saturating_sub(from),
        };
        let rows = slice.rows;
        if rows < page_len {
            counters.rows_key_filtered.add(page_len - rows);
        }
        if rows == 0 {
            counters.pages_skipped.add(1);
            return Ok(None);
        }
        if !s.keep[pi] {
            counters.pages_skipped.add(1);
            counters.rows_stats_filtered.add(rows);
            return Ok(None);
        }
        // Every row of the page a later load superseded: not read.
        if let Some(gone) = &s.deleted_rows
            && gone.range_cardinality(slice.segment_rows()) >= rows as u64
        {
            counters.pages_skipped.add(1);
            counters.rows_del_by_bitmap.add(rows);
            return Ok(None);
        }
        if let Some(p) = &self.predicate
            && !bloom_may_match(p, &s.seg, pi, &self.projection, &self.engine)
                .map_err(|e| corrupt_in(self.tablet_id, e))?
        {
            counters.pages_skipped.add(1);
            counters.rows_bloom_filtered.add(rows);
            return Ok(None);
        }
        Ok(Some(slice))
    }

    /// Reads the rows `slice` of page `pi`, evaluates the filter on them
    /// (reading first the columns it needs, the others only for the rows
    /// that pass) and drops the rows later loads superseded and DELETEs
    /// hide; `None` when no row survives.
    fn read_page(&mut self, pi: usize, slice: PageSlice) -> Result<Option<RecordBatch>> {
        let Some(s) = self.segment.as_ref() else {
            return Ok(None);
        };
        let PageSlice {
            page_len,
            from,
            rows,
            ..
        } = slice;
        let counters = &self.counters;
        counters.pages_read.add(1);
        counters.rows_read.add(rows);
        let (seg, proven) = (&s.seg, &s.proven);
        let (schema, projection) = (&self.schema, &self.projection);
        let tablet_id = self.tablet_id;
        let reader = PageReader::new(&self.engine, seg);
        // Page `pi` of table column `c`, the part the key range leaves, or
        // only its rows at positions `at` (of that part).
        let read_column = |c: usize,
                           dt: &arrow::datatypes::DataType,
                           at: Option<&UInt32Array>|
         -> Result<ArrayRef> {
            let (values, io) = reader
                .read(c, pi, dt, at.map(|idx| (idx, from as u32)))
                .map_err(|e| corrupt_in(tablet_id, e))?;
            counters.cached_pages.add(io.cached_pages);
            counters.bytes_read.add(io.bytes);
            counters.raw_bytes_read.add(io.raw_bytes);
            let a = match values {
                PageValues::Picked(a) => return Ok(a),
                PageValues::Whole(a) if rows == page_len => a,
                PageValues::Whole(a) => a.slice(from, rows),
            };
            Ok(match at {
                Some(idx) => arrow::compute::take(a.as_ref(), idx, None)?,
                None => a,
            })
        };
        let read = |out_i: usize, at: Option<&UInt32Array>| {
            read_column(projection[out_i], schema.field(out_i).data_type(), at)
        };
        let mut columns: Vec<Option<ArrayRef>> = vec![None; projection.len()];
        let selected = match &mut self.predicate {
            Some(p) => p.evaluate(
                rows,
                |ci| proven.get(ci).is_some_and(|pages| pages[pi]),
                &mut columns,
                read,
            )?,
            None => PageRows::All,
        };
        let kept = selected.count(rows);
        counters.rows_pred_filtered.add(rows - kept);
        if kept == 0 {
            return Ok(None);
        }
        // Late materialization: the columns no conjunct read, only for
        // pages with surviving rows, only those rows.
        let mut arrays = Vec::with_capacity(columns.len());
        for (out_i, c) in columns.into_iter().enumerate() {
            let a = match c {
                Some(a) => a,
                None => match &selected {
                    PageRows::Take(idx) => read(out_i, Some(idx))?,
                    all_or_mask => all_or_mask.apply(read(out_i, None)?)?,
                },
            };
            arrays.push(super::predicate::plain(
                &a,
                schema.field(out_i).data_type(),
            )?);
        }
        let mut page = SurvivingRows { arrays, kept };
        // Rows later loads of a merge-on-write table superseded.
        if let Some(gone) = &s.deleted_rows {
            let range = slice.segment_rows();
            if gone.range_cardinality(range.clone()) > 0 {
                let live: BooleanArray = range.map(|r| Some(!gone.contains(r))).collect();
                let live = selected.apply(Arc::new(live))?;
                let dropped = page.keep(live.as_boolean())?;
                counters.rows_del_by_bitmap.add(dropped);
            }
        }
        // Rows of this rowset that later DELETEs hold for.
        if let Some(d) = &s.deletes
            && page.kept > 0
        {
            let table_fields = self.table_schema.arrow_schema();
            let inputs = d
                .columns
                .iter()
                .map(|&c| {
                    let dt = table_fields.field(c).data_type();
                    match projection.iter().position(|&p| p == c) {
                        Some(out_i) => Ok(page.arrays[out_i].clone()),
                        None => {
                            super::predicate::plain(&selected.apply(read_column(c, dt, None)?)?, dt)
                        }
                    }
                })
                .collect::<Result<Vec<_>>>()?;
            let keep = d.keep(&RecordBatch::try_new(d.schema.clone(), inputs)?)?;
            let dropped = page.keep(&keep)?;
            counters.rows_del_filtered.add(dropped);
        }
        if page.kept == 0 {
            return Ok(None);
        }
        counters.rows_out.add(page.kept);
        Ok(Some(RecordBatch::try_new_with_options(
            schema.clone(),
            page.arrays,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(page.kept)),
        )?))
    }
}

/// The segments a read of a tablet snapshot scans, each with the filter of
/// the DELETEs published after its rowset and its superseded rows.
pub(super) fn with_delete_filters(
    snapshot: &TabletSnapshot,
    schema: &TableSchema,
) -> tethys_common::Result<Vec<SegmentToScan>> {
    let mut out = vec![];
    for (files, deletes) in &snapshot.rowsets {
        let refs: Vec<&[tethys_common::delete::DeleteCondition]> =
            deletes.iter().map(|d| d.as_slice()).collect();
        let filter = DeleteFilter::new(&refs, schema)?.map(Arc::new);
        out.extend(files.iter().map(|f| SegmentToScan {
            path: f.path.clone(),
            deletes: filter.clone(),
            deleted_rows: f.deleted_rows.clone(),
        }));
    }
    Ok(out)
}

/// Whether page `pi` may hold rows for every `column = value` / `IN`
/// conjunct, by the bloom filters of the columns that have them.
fn bloom_may_match(
    p: &ScanPredicate,
    seg: &Segment,
    pi: usize,
    projection: &[usize],
    engine: &StorageEngine,
) -> tethys_common::Result<bool> {
    let reader = PageReader::new(engine, seg);
    for (out_i, keys) in p.bloom_probes() {
        let Some(&c) = projection.get(*out_i) else {
            continue;
        };
        if let Some(bits) = reader.bloom(c, pi)?
            && !page_bloom_may_contain(&bits, keys)
        {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The segment row page `pi` starts at and its row count.
pub(super) fn page_span(seg: &Segment, pi: usize) -> (usize, usize) {
    seg.footer()
        .columns
        .first()
        .and_then(|c| c.pages.get(pi))
        .map(|p| (p.first_row as usize, p.num_rows as usize))
        .unwrap_or((0, 0))
}

pub(super) fn corrupt_in(tablet_id: i64, e: TethysError) -> DataFusionError {
    match e {
        TethysError::Corruption(m) => {
            TethysError::Corruption(format!("tablet {tablet_id}: {m}")).into()
        }
        other => other.into(),
    }
}

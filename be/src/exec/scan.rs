//! `TabletScanExec`: reads the visible segments of tablets, pruning segments
//! and pages with their zone maps, evaluates the fragment's filter page by
//! page with late materialization (`predicate.rs`), and yields Arrow batches
//! of at most 4064 rows.

use std::collections::VecDeque;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch, UInt32Array};
use arrow::compute::BatchCoalescer;
use arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_optimizer::pruning::PruningPredicate;
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use roaring::RoaringBitmap;
use tethys_common::TethysError;
use tethys_common::delete::DeleteFilter;
use tethys_common::plan::OlapScanExec;
use tethys_common::schema::TableSchema;

use super::key_range::KeyBounds;
use super::predicate::{PageRows, ScanPredicate};
use crate::storage::StorageEngine;
use crate::storage::page_cache::{CachedPage, PageKey};
use crate::storage::segment::Segment;
use crate::storage::tablet::ReadLease;
use crate::storage::zone_map::ZoneStats;

/// Scan of local tablets at a snapshot version.
#[derive(Debug)]
pub struct TabletScanExec {
    scan: OlapScanExec,
    predicate: Option<Arc<dyn PhysicalExpr>>,
    /// Whether the scan filters rows by `predicate` itself (else it only
    /// prunes with it, and a `FilterExec` above filters).
    evaluates: bool,
    engine: Arc<StorageEngine>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl TabletScanExec {
    /// Binds a scan description to `engine`; the scan prunes segments and
    /// pages with `predicate` and, if `evaluates`, returns only the rows it
    /// holds for.
    pub fn new(
        scan: OlapScanExec,
        predicate: Option<Arc<dyn PhysicalExpr>>,
        evaluates: bool,
        engine: Arc<StorageEngine>,
    ) -> Self {
        let schema = scan.schema();
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(scan.partition_count()),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        TabletScanExec {
            scan,
            predicate,
            evaluates,
            engine,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }
}

impl TabletScanExec {
    /// The scan description.
    pub(super) fn scan(&self) -> &OlapScanExec {
        &self.scan
    }

    /// The filter the scan prunes (and maybe filters) with.
    pub(super) fn predicate(&self) -> Option<&Arc<dyn PhysicalExpr>> {
        self.predicate.as_ref()
    }

    /// Whether the scan filters rows itself.
    pub(super) fn evaluates(&self) -> bool {
        self.evaluates
    }

    pub(super) fn engine(&self) -> &Arc<StorageEngine> {
        &self.engine
    }
}

impl DisplayAs for TabletScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        self.scan.fmt_as(t, f)
    }
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

impl ExecutionPlan for TabletScanExec {
    fn name(&self) -> &str {
        "TabletScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        match &self.predicate {
            Some(p) => f(p),
            None => Ok(TreeNodeRecursion::Continue),
        }
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let schema: SchemaRef = self.scan.schema();
        let counters = Counters::new(&self.metrics, partition);
        let batch_size = context.session_config().batch_size().max(1);
        let tablets: VecDeque<(i64, i64)> = self.scan.tablets_of_partition(partition).into();
        let table_schema = self.scan.table_schema();
        if table_schema.merges_on_read() {
            let merges_before = MetricBuilder::new(&self.metrics).counter("MergedRows", partition);
            let mut state = super::merge_scan::MergeScan::new(
                self,
                counters,
                merges_before,
                tablets,
                batch_size,
            )?;
            let batches = std::iter::from_fn(move || state.next_batch().transpose());
            return Ok(Box::pin(RecordBatchStreamAdapter::new(
                schema,
                futures::stream::iter(batches),
            )));
        }
        let mut state = ScanState::new(
            schema.clone(),
            self.scan.projection(),
            table_schema,
            self.predicate.as_ref(),
            self.evaluates,
            self.engine.clone(),
            counters,
            batch_size,
        )?;
        state.tablets = tablets;
        // The scan runs inline on the backend's execution pool, one page per
        // step: a page comes from the page cache or one positioned read, and
        // handing batches over from a separate reader thread cost more than
        // reading them (a thread wake-up per page).
        let batches = std::iter::from_fn(move || state.next_batch().transpose());
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            schema,
            futures::stream::iter(batches),
        )))
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
    pruning: Option<Arc<PruningPredicate>>,
    predicate: Option<ScanPredicate>,
    /// Bounds on the key prefix, for the segments' short-key indexes.
    key_bounds: Option<KeyBounds>,
    counters: Counters,
    tablets: VecDeque<(i64, i64)>,
    pub(super) segments: VecDeque<SegmentToScan>,
    pub(super) tablet_id: i64,
    /// Keeps the files of the tablet being read from compaction's sweep.
    lease: Option<ReadLease>,
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
        let pruning = predicate.and_then(|p| {
            PruningPredicateBuilder::new()
                .with_file_schema(schema.clone())
                .build(p.clone())
        });
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
            lease: None,
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
            let tablet = self.engine.tablet(tablet_id)?;
            self.lease = Some(tablet.lease());
            self.segments = with_delete_filters(&tablet, version, &self.table_schema)?.into();
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
        let seg = Segment::open_cached(&path, &self.table_schema, &self.engine.footers)?;
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
            let (first, page_len) = page_span(&s.seg, pi);
            let counters = &self.counters;
            // The part of the page the short-key index leaves.
            let from = s.key_rows.0.clamp(first, first + page_len) - first;
            let to = s.key_rows.1.clamp(first, first + page_len) - first;
            let rows = to.saturating_sub(from);
            if rows < page_len {
                counters.rows_key_filtered.add(page_len - rows);
            }
            if rows == 0 {
                counters.pages_skipped.add(1);
                continue;
            }
            if !s.keep[pi] {
                counters.pages_skipped.add(1);
                counters.rows_stats_filtered.add(rows);
                continue;
            }
            // Every row of the page a later load superseded: not read.
            if let Some(gone) = &s.deleted_rows
                && gone.range_cardinality((first + from) as u32..(first + to) as u32) >= rows as u64
            {
                counters.pages_skipped.add(1);
                counters.rows_del_by_bitmap.add(rows);
                continue;
            }
            if let Some(p) = &self.predicate
                && !bloom_may_match(p, &s.seg, pi, &self.projection, &self.engine)
                    .map_err(|e| corrupt_in(self.tablet_id, e))?
            {
                counters.pages_skipped.add(1);
                counters.rows_bloom_filtered.add(rows);
                continue;
            }
            counters.pages_read.add(1);
            counters.rows_read.add(rows);
            let (seg, proven) = (&s.seg, &s.proven);
            let (engine, schema, projection) = (&self.engine, &self.schema, &self.projection);
            let tablet_id = self.tablet_id;
            // Page `pi` of table column `c`, the part the key range leaves,
            // or only its rows at positions `at` (of that part).
            let read_column = |c: usize,
                               dt: &arrow::datatypes::DataType,
                               at: Option<&UInt32Array>|
             -> Result<ArrayRef> {
                let key = PageKey {
                    segment: seg.cache_id(),
                    column: c as u32,
                    page: pi as u32,
                };
                let part = |a: ArrayRef| -> Result<ArrayRef> {
                    let a = if rows == page_len {
                        a
                    } else {
                        a.slice(from, rows)
                    };
                    Ok(match at {
                        Some(idx) => arrow::compute::take(a.as_ref(), idx, None)?,
                        None => a,
                    })
                };
                let cached = (key.segment != 0).then(|| engine.pages.get(&key)).flatten();
                if let Some(page) = cached {
                    counters.cached_pages.add(1);
                    return match page {
                        CachedPage::Decoded { array, .. } => part(array),
                        CachedPage::Raw(raw) => {
                            // A few rows of a page kept encoded: read just
                            // those where the encoding allows.
                            if let Some(idx) = at {
                                let positions: Vec<u32> =
                                    idx.values().iter().map(|&p| p + from as u32).collect();
                                if let Some(a) = seg
                                    .decode_page_at(c, pi, &raw, dt, &positions)
                                    .map_err(|e| corrupt_in(tablet_id, e))?
                                {
                                    return Ok(a);
                                }
                            }
                            let a = seg
                                .decode_page(c, pi, &raw, dt)
                                .map_err(|e| corrupt_in(tablet_id, e))?;
                            if let Some(page) = CachedPage::upgrade(&raw, &a, &engine.pages) {
                                engine.pages.insert(key, page);
                            }
                            part(a)
                        }
                    };
                }
                let (raw, bytes) = seg
                    .read_raw_page(c, pi)
                    .map_err(|e| corrupt_in(tablet_id, e))?;
                let a = seg
                    .decode_page(c, pi, &raw, dt)
                    .map_err(|e| corrupt_in(tablet_id, e))?;
                counters.bytes_read.add(bytes as usize);
                counters.raw_bytes_read.add(raw.len());
                if key.segment != 0 {
                    engine
                        .pages
                        .insert(key, CachedPage::choose(raw, &a, &engine.pages));
                }
                part(a)
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
            let mut kept = selected.count(rows);
            counters.rows_pred_filtered.add(rows - kept);
            if kept == 0 {
                continue;
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
            // Rows later loads of a merge-on-write table superseded.
            if let Some(gone) = &s.deleted_rows {
                let (lo, hi) = ((first + from) as u32, (first + to) as u32);
                if gone.range_cardinality(lo..hi) > 0 {
                    let live: BooleanArray = (lo..hi).map(|r| Some(!gone.contains(r))).collect();
                    let live = selected.apply(Arc::new(live))?;
                    let live = live.as_boolean();
                    let survivors = live.true_count();
                    if survivors < kept {
                        counters.rows_del_by_bitmap.add(kept - survivors);
                        arrays = arrays
                            .iter()
                            .map(|a| arrow::compute::filter(a, live))
                            .collect::<std::result::Result<Vec<_>, _>>()?;
                        kept = survivors;
                    }
                    if kept == 0 {
                        continue;
                    }
                }
            }
            // Rows of this rowset that later DELETEs hold for.
            if let Some(d) = &s.deletes {
                let table_fields = self.table_schema.arrow_schema();
                let inputs = d
                    .columns
                    .iter()
                    .map(|&c| {
                        let dt = table_fields.field(c).data_type();
                        match projection.iter().position(|&p| p == c) {
                            Some(out_i) => Ok(arrays[out_i].clone()),
                            None => super::predicate::plain(
                                &selected.apply(read_column(c, dt, None)?)?,
                                dt,
                            ),
                        }
                    })
                    .collect::<Result<Vec<_>>>()?;
                let keep = d.keep(&RecordBatch::try_new(d.schema.clone(), inputs)?)?;
                let survivors = keep.true_count();
                if survivors < kept {
                    counters.rows_del_filtered.add(kept - survivors);
                    arrays = arrays
                        .iter()
                        .map(|a| arrow::compute::filter(a, &keep))
                        .collect::<std::result::Result<Vec<_>, _>>()?;
                    kept = survivors;
                }
                if kept == 0 {
                    continue;
                }
            }
            counters.rows_out.add(kept);
            return Ok(Some(RecordBatch::try_new_with_options(
                schema.clone(),
                arrays,
                &arrow::array::RecordBatchOptions::new().with_row_count(Some(kept)),
            )?));
        }
    }
}

/// The segments a read of `tablet` at `version` scans, each with the filter
/// of the DELETEs published after its rowset and its superseded rows.
pub(super) fn with_delete_filters(
    tablet: &crate::storage::tablet::Tablet,
    version: i64,
    schema: &TableSchema,
) -> tethys_common::Result<Vec<SegmentToScan>> {
    let mut out = vec![];
    for (files, deletes) in tablet.read_plan(version)? {
        let refs: Vec<&[tethys_common::delete::DeleteCondition]> =
            deletes.iter().map(|d| d.as_slice()).collect();
        let filter = DeleteFilter::new(&refs, schema)?.map(Arc::new);
        out.extend(files.into_iter().map(|f| SegmentToScan {
            path: f.path,
            deletes: filter.clone(),
            deleted_rows: f.deleted_rows,
        }));
    }
    Ok(out)
}

/// Whether page `pi` may hold rows for every `column = value` / `IN`
/// conjunct, by the bloom filters of the columns that have them (cached in
/// the page cache under the column's id with the top bit set).
fn bloom_may_match(
    p: &ScanPredicate,
    seg: &Segment,
    pi: usize,
    projection: &[usize],
    engine: &StorageEngine,
) -> tethys_common::Result<bool> {
    for (out_i, keys) in p.bloom_probes() {
        let Some(&c) = projection.get(*out_i) else {
            continue;
        };
        let has = seg
            .footer()
            .columns
            .get(c)
            .and_then(|cm| cm.pages.get(pi))
            .is_some_and(|pm| pm.bloom.is_some());
        if !has {
            continue;
        }
        let key = PageKey {
            segment: seg.cache_id(),
            column: c as u32 | 1 << 31,
            page: pi as u32,
        };
        let cached = (key.segment != 0).then(|| engine.pages.get(&key)).flatten();
        let bits: Arc<[u8]> = match cached {
            Some(CachedPage::Raw(bits)) => bits,
            _ => {
                let Some(bits) = seg.read_bloom(c, pi)? else {
                    continue;
                };
                let bits: Arc<[u8]> = bits.into();
                if key.segment != 0 {
                    engine.pages.insert(key, CachedPage::Raw(bits.clone()));
                }
                bits
            }
        };
        if !tethys_common::plan::page_bloom_may_contain(&bits, keys) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int64Array, StringArray};
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{binary, col, lit};
    use datafusion::physical_plan::common::collect;
    use tethys_common::config::ROWS_PER_PAGE;
    use tethys_common::schema::{Column, TableSchema};
    use tethys_common::types::ColumnType;
    use tethys_proto::{OlapScanNodePb, TabletVersion};

    #[tokio::test]
    async fn merge_on_write_scans_skip_superseded_rows_and_pages() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Arc::new(StorageEngine::open(dir.path()).unwrap());
        let column = |n: &str, key: bool| Column {
            name: n.into(),
            column_type: ColumnType::parse("bigint").unwrap(),
            nullable: !key,
            is_key: key,
            default: None,
            comment: String::new(),
            aggregation: None,
        };
        let schema = TableSchema {
            columns: vec![column("k", true), column("v", false)],
            num_key_columns: 1,
            compression: "lz4".into(),
            keys_type: tethys_common::schema::KeysType::Unique,
            merge_on_write: true,
            ..Default::default()
        };
        engine.create_tablet(1, 1, 1, schema.clone(), 1).unwrap();
        let rows = |keys: std::ops::Range<i64>, v: i64| {
            RecordBatch::try_new(
                schema.arrow_schema(),
                vec![
                    Arc::new(Int64Array::from_iter_values(keys.clone())),
                    Arc::new(Int64Array::from(vec![v; keys.count()])),
                ],
            )
            .unwrap()
        };
        let n = 4 * ROWS_PER_PAGE as i64;
        engine.write(7, 1, &[rows(0..n, 1)]).unwrap();
        engine.publish(7, 1, 2).unwrap();
        // The second load supersedes the first two pages whole and a few
        // rows of the third.
        let again = 2 * ROWS_PER_PAGE as i64 + 10;
        engine.write(8, 1, &[rows(0..again, 2)]).unwrap();
        engine.publish(8, 1, 3).unwrap();
        let node = scan_node(&schema, vec![0, 1], 3);
        let exec = TabletScanExec::new(OlapScanExec::try_new(node).unwrap(), None, false, engine);
        let out = collect(exec.execute(0, Arc::new(TaskContext::default())).unwrap())
            .await
            .unwrap();
        let total: i64 = out
            .iter()
            .flat_map(|b| {
                b.column(1)
                    .as_primitive::<arrow::datatypes::Int64Type>()
                    .values()
                    .to_vec()
            })
            .sum();
        // Each key once: the newer value for the reloaded keys.
        assert_eq!(out.iter().map(|b| b.num_rows()).sum::<usize>(), n as usize);
        assert_eq!(total, n + again);
        let m = exec.metrics().unwrap();
        let get = |name: &str| m.sum_by_name(name).map(|v| v.as_usize()).unwrap_or(0);
        assert_eq!(get("RowsDelByBitmap"), again as usize);
        assert_eq!(get("PagesSkipped"), 2);
        assert_eq!(get("RawRowsRead"), (n + again) as usize - 2 * ROWS_PER_PAGE);
    }

    /// A scan of `projection` of tablet 1 of `schema` at `version`.
    fn scan_node(schema: &TableSchema, projection: Vec<u32>, version: i64) -> OlapScanNodePb {
        OlapScanNodePb {
            database: "d".into(),
            table: "t".into(),
            schema: Some(schema.to_pb()),
            projection,
            tablets: vec![TabletVersion {
                tablet_id: 1,
                version,
            }],
            partitions: 1,
            ..Default::default()
        }
    }

    /// A storage engine in `dir` with a 16 MB page cache.
    fn cached_engine(dir: &tempfile::TempDir) -> Arc<StorageEngine> {
        Arc::new(
            StorageEngine::open(dir.path())
                .unwrap()
                .with_page_cache(16 << 20),
        )
    }

    /// A column of type `t`, nullable unless a key.
    fn column(n: &str, t: &str, key: bool) -> Column {
        Column {
            name: n.into(),
            column_type: ColumnType::parse(t).unwrap(),
            nullable: !key,
            is_key: key,
            default: None,
            comment: String::new(),
            aggregation: None,
        }
    }

    #[tokio::test]
    async fn key_ranges_and_zone_maps_skip_pages() {
        let dir = tempfile::tempdir().unwrap();
        let engine = cached_engine(&dir);
        let schema = TableSchema {
            columns: vec![
                column("k", "bigint", true),
                column("v", "varchar(16)", false),
            ],
            num_key_columns: 1,
            compression: "lz4".into(),
            bloom_filter_columns: vec![],
            ..Default::default()
        };
        engine.create_tablet(1, 1, 1, schema.clone(), 1).unwrap();
        // Rows arrive unsorted; the segment is sorted by key, so pages get tight zone maps.
        let n = 20_000i64;
        let keys: Vec<i64> = (0..n).rev().collect();
        let batch = RecordBatch::try_new(
            schema.arrow_schema(),
            vec![
                Arc::new(Int64Array::from(keys.clone())),
                Arc::new(StringArray::from(
                    keys.iter().map(|k| format!("v{k}")).collect::<Vec<_>>(),
                )),
            ],
        )
        .unwrap();
        engine.write(7, 1, &[batch]).unwrap();
        engine.publish(7, 1, 2).unwrap();
        let node = scan_node(&schema, vec![0, 1], 2);
        let scan = OlapScanExec::try_new(node).unwrap();
        let s = scan.schema();
        let pred = binary(col("k", &s).unwrap(), Operator::Lt, lit(100i64), &s).unwrap();
        // An OR the short-key index cannot use: zone maps keep the first
        // and last pages. Pruning only: whole surviving pages; a filter
        // above trims rows.
        let either = binary(
            pred.clone(),
            Operator::Or,
            binary(col("k", &s).unwrap(), Operator::Gt, lit(19_990i64), &s).unwrap(),
            &s,
        )
        .unwrap();
        let exec = TabletScanExec::new(scan.clone(), Some(either), false, engine.clone());
        let out = collect(exec.execute(0, Arc::new(TaskContext::default())).unwrap())
            .await
            .unwrap();
        let rows: usize = out.iter().map(|b| b.num_rows()).sum();
        let last_page = n as usize - 4 * ROWS_PER_PAGE;
        assert_eq!(rows, ROWS_PER_PAGE + last_page);
        let m = exec.metrics().unwrap();
        let get = |name: &str| m.sum_by_name(name).map(|v| v.as_usize()).unwrap_or(0);
        assert_eq!(get("PagesRead"), 2);
        assert_eq!(get("PagesSkipped"), 3);
        assert_eq!(get("RowsStatsFiltered"), 3 * ROWS_PER_PAGE);
        assert_eq!(get("RowsKeyRangeFiltered"), 0);
        assert_eq!(get("RawRowsRead"), ROWS_PER_PAGE + last_page);
        assert_eq!(get("RowsVectorPredFiltered"), 0);
        assert_eq!(get("CachedPagesNum"), 0);
        assert!(get("UncompressedBytesRead") > 0);
        // `k < 100` on the sorted key: the short-key index leaves the first
        // block of 1024 rows; evaluating returns exactly the matching rows,
        // the first page's columns now from the page cache.
        let again = TabletScanExec::new(scan, Some(pred), true, engine.clone());
        let out2 = collect(again.execute(0, Arc::new(TaskContext::default())).unwrap())
            .await
            .unwrap();
        let keys: Vec<i64> = out2
            .iter()
            .flat_map(|b| {
                b.column(0)
                    .as_primitive::<arrow::datatypes::Int64Type>()
                    .values()
                    .to_vec()
            })
            .collect();
        assert_eq!(keys, (0..100).collect::<Vec<_>>());
        let vals: Vec<String> = out2
            .iter()
            .flat_map(|b| {
                b.column(1)
                    .as_string::<i32>()
                    .iter()
                    .map(|v| v.unwrap_or_default().to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(vals[99], "v99");
        let m = again.metrics().unwrap();
        let get = |name: &str| m.sum_by_name(name).map(|v| v.as_usize()).unwrap_or(0);
        assert_eq!(get("CachedPagesNum"), 2);
        assert_eq!(get("CompressedBytesRead"), 0);
        assert_eq!(get("RowsKeyRangeFiltered"), n as usize - 1024);
        assert_eq!(get("RawRowsRead"), 1024);
        assert_eq!(get("RowsVectorPredFiltered"), 1024 - 100);
        // At the old version nothing is visible.
        let node = scan_node(&schema, vec![0], 1);
        let exec = TabletScanExec::new(OlapScanExec::try_new(node).unwrap(), None, false, engine);
        let out = collect(exec.execute(0, Arc::new(TaskContext::default())).unwrap())
            .await
            .unwrap();
        assert_eq!(out.iter().map(|b| b.num_rows()).sum::<usize>(), 0);
    }

    /// A filter that leaves a few rows of each page: the other columns are
    /// read for those rows only (from the page cache's encoded pages on the
    /// second scan, where FOR and PLAIN pages read the rows in place), and
    /// both scans return exactly the matching rows, nulls included, also
    /// when the short-key index starts inside a page.
    #[tokio::test]
    async fn sparse_survivors_read_only_their_rows_of_other_columns() {
        let dir = tempfile::tempdir().unwrap();
        let engine = cached_engine(&dir);
        let schema = TableSchema {
            columns: vec![
                column("k", "bigint", true),
                column("f", "bigint", false),
                column("price", "decimal(15,2)", false),
                column("name", "varchar(16)", false),
            ],
            num_key_columns: 1,
            compression: "lz4".into(),
            ..Default::default()
        };
        engine.create_tablet(1, 1, 1, schema.clone(), 1).unwrap();
        let n = 3 * ROWS_PER_PAGE as i64 + 100;
        let f = |k: i64| (k * 7919) % 1000;
        let price = |k: i64| (k % 11 != 0).then_some(100_000 + (k * 104_729) % 900_000);
        let batch = RecordBatch::try_new(
            schema.arrow_schema(),
            vec![
                Arc::new(Int64Array::from_iter_values(0..n)),
                Arc::new(Int64Array::from_iter_values((0..n).map(f))),
                Arc::new(
                    arrow::array::Decimal128Array::from_iter(
                        (0..n).map(|k| price(k).map(i128::from)),
                    )
                    .with_precision_and_scale(15, 2)
                    .unwrap(),
                ),
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|k| format!("n{k}")),
                )),
            ],
        )
        .unwrap();
        engine.write(7, 1, &[batch]).unwrap();
        engine.publish(7, 1, 2).unwrap();
        let node = scan_node(&schema, vec![0, 1, 2, 3], 2);
        let scan = OlapScanExec::try_new(node).unwrap();
        let s = scan.schema();
        // About 1% of the rows, from key 1500 on (inside the first page).
        let sparse = binary(col("f", &s).unwrap(), Operator::Lt, lit(10i64), &s).unwrap();
        let from = binary(col("k", &s).unwrap(), Operator::GtEq, lit(1500i64), &s).unwrap();
        let pred = binary(sparse, Operator::And, from, &s).unwrap();
        let want: Vec<String> = (1500..n)
            .filter(|&k| f(k) < 10)
            .map(|k| format!("{k}|{}|{:?}|n{k}", f(k), price(k)))
            .collect();
        assert!(want.len() > 20);
        for round in 0..2 {
            let exec = TabletScanExec::new(scan.clone(), Some(pred.clone()), true, engine.clone());
            let out = collect(exec.execute(0, Arc::new(TaskContext::default())).unwrap())
                .await
                .unwrap();
            let mut got = vec![];
            for b in &out {
                let k = b.column(0).as_primitive::<arrow::datatypes::Int64Type>();
                let fv = b.column(1).as_primitive::<arrow::datatypes::Int64Type>();
                let p = b
                    .column(2)
                    .as_primitive::<arrow::datatypes::Decimal128Type>();
                let name =
                    arrow::compute::cast(b.column(3), &arrow::datatypes::DataType::Utf8).unwrap();
                let name = name.as_string::<i32>();
                for i in 0..b.num_rows() {
                    let price = p.is_valid(i).then(|| p.value(i) as i64);
                    got.push(format!(
                        "{}|{}|{price:?}|{}",
                        k.value(i),
                        fv.value(i),
                        name.value(i)
                    ));
                }
            }
            assert_eq!(got, want, "scan {round}");
            let m = exec.metrics().unwrap();
            let cached = m
                .sum_by_name("CachedPagesNum")
                .map(|v| v.as_usize())
                .unwrap_or(0);
            assert_eq!(cached > 0, round == 1);
        }
    }
}

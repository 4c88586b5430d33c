//! `TabletAggScanExec`: an ungrouped `count` / `sum` / `min` / `max` over
//! a scan, answered by the storage layer (Doris' `pushAggOp`; the FE marks
//! the scan, `tethys_common::plan::pushable_agg` says when).
//!
//! It replaces the fragment's partial `AggregateExec` and its scan, and
//! yields that aggregate's partial state, one row per partition:
//! - `count(*)` is the segments' row counts, `count(col)` those minus the
//!   column's nulls (footer zone maps), and `min` / `max` the segments'
//!   zone-map bounds: no page is read;
//! - `sum(col)` reads each page's raw (encoded) form from the page cache or
//!   disk and sums it in place (`Segment::sum_page`: a FOR page is its row
//!   count times its reference plus the sum of its packed deltas), so it
//!   reads 2-4 bytes a row instead of building 16-byte decimals;
//! - a segment with rows DELETEs hide or later loads superseded
//!   (merge-on-write tables), or whose zone map has no bounds for a wanted
//!   column (long strings), is read row by row through the ordinary scan.
//!
//! Sums wrap as DataFusion's do (two's complement at the state's width), so
//! the state is the one the aggregate would have computed from the rows.

use std::fmt;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Decimal128Array, Int64Array, PrimitiveArray, RecordBatch,
};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Decimal128Type, Int8Type, Int16Type, Int32Type, Int64Type,
};
use arrow::datatypes::{Schema, SchemaRef};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use tethys_common::plan::{OlapScanExec, PushedAgg, PushedAggKind};

use super::segment_scan::{Counters, ScanState, SegmentToScan, corrupt_in, with_delete_filters};
use crate::storage::StorageEngine;
use crate::storage::read::{
    PageReader, PageSum, Segment, ZoneMap, ZoneValue, pick_bound, to_scalar,
};

/// A pushed-down ungrouped aggregate over local tablets.
#[derive(Debug)]
pub struct TabletAggScanExec {
    scan: OlapScanExec,
    aggs: Vec<PushedAgg>,
    schema: SchemaRef,
    engine: Arc<StorageEngine>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl TabletAggScanExec {
    /// The aggregate `aggs` (producing the partial state `schema`) over
    /// `scan`'s tablets on `engine`.
    pub fn new(
        scan: OlapScanExec,
        aggs: Vec<PushedAgg>,
        schema: SchemaRef,
        engine: Arc<StorageEngine>,
    ) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(scan.partition_count()),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        TabletAggScanExec {
            scan,
            aggs,
            schema,
            engine,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }
}

impl DisplayAs for TabletAggScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "TabletAggScanExec: {:?} over ", self.aggs)?;
        self.scan.fmt_as(t, f)
    }
}

impl ExecutionPlan for TabletAggScanExec {
    tethys_common::leaf_exec_plan!("TabletAggScanExec", with metrics);

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let mut run = AggRun {
            scan: self.scan.clone(),
            accs: self.aggs.iter().map(Acc::new).collect(),
            aggs: self.aggs.clone(),
            engine: self.engine.clone(),
            counters: Counters::new(&self.metrics, partition),
            from_stats: MetricBuilder::new(&self.metrics).counter("RowsStatsAggregated", partition),
            batch_size: context.session_config().batch_size().max(1),
        };
        let tablets = self.scan.tablets_of_partition(partition);
        let schema = self.schema.clone();
        let out_schema = schema.clone();
        let stream = futures::stream::once(async move {
            for (tablet_id, version) in tablets {
                run.tablet(tablet_id, version).await?;
            }
            run.finish(&out_schema)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

/// One partition's accumulation.
struct AggRun {
    scan: OlapScanExec,
    aggs: Vec<PushedAgg>,
    accs: Vec<Acc>,
    engine: Arc<StorageEngine>,
    counters: Counters,
    /// Rows whose aggregates came from footers and zone maps alone.
    from_stats: Count,
    batch_size: usize,
}

impl AggRun {
    /// Adds the rows of `tablet_id` visible at `version`.
    async fn tablet(&mut self, tablet_id: i64, version: i64) -> Result<()> {
        // Keeps the tablet's files from compaction's sweep meanwhile.
        let snapshot = self.engine.snapshot(tablet_id, version)?;
        let segments = with_delete_filters(&snapshot, self.scan.table_schema())?;
        for s in segments {
            let seg = self
                .engine
                .open_segment(&s.path, self.scan.table_schema())?;
            let rows = seg.footer().num_rows;
            if rows == 0 {
                continue;
            }
            let hidden =
                s.deletes.is_some() || s.deleted_rows.as_ref().is_some_and(|d| !d.is_empty());
            let unbounded = self.aggs.iter().any(|a| {
                matches!(a.kind, PushedAggKind::Min | PushedAggKind::Max)
                    && a.column
                        .is_some_and(|c| seg.footer().columns[c].zone.bounds_unknown(rows))
            });
            if hidden || unbounded {
                self.read_rows(tablet_id, s)?;
            } else {
                self.segment(tablet_id, &seg)?;
            }
            // A long scan gives way between segments (and stops there when
            // the query is cancelled and its stream dropped).
            tokio::task::yield_now().await;
        }
        Ok(())
    }

    /// Adds a segment every row of which is visible, from its footer and
    /// its pages' encoded values.
    fn segment(&mut self, tablet_id: i64, seg: &Segment) -> Result<()> {
        let footer = seg.footer();
        let rows = footer.num_rows;
        let mut sums_read = false;
        for (agg, acc) in self.aggs.iter().zip(self.accs.iter_mut()) {
            let column = match agg.column {
                Some(c) => Some((
                    c,
                    footer.columns.get(c).ok_or_else(|| {
                        DataFusionError::Internal(format!("segment has no column {c}"))
                    })?,
                )),
                None => None,
            };
            match (acc, column) {
                (Acc::Count(n), None) => *n += rows as i64,
                (Acc::Count(n), Some((_, c))) => {
                    *n += rows.saturating_sub(c.zone.null_count) as i64
                }
                (Acc::Bound { value, min }, Some((_, c))) => {
                    let zone = if *min { &c.zone.min } else { &c.zone.max };
                    *value = pick_bound(value.take(), zone.clone(), *min);
                }
                (Acc::Sum { sum, valid }, Some((col, _))) => {
                    let dt = self.scan.table_schema().columns[col]
                        .column_type
                        .arrow_type();
                    let (pages, io) = PageReader::new(&self.engine, seg)
                        .sums(col, &dt)
                        .map_err(|e| corrupt_in(tablet_id, e))?;
                    self.counters.cached_pages.add(io.cached_pages);
                    self.counters.bytes_read.add(io.bytes);
                    self.counters.raw_bytes_read.add(io.raw_bytes);
                    for page in pages {
                        let (s, v) = match page {
                            PageSum::Summed(s, v) => (s, v),
                            PageSum::Decoded(array) => {
                                array_sum(&array).map_err(|e| corrupt_in(tablet_id, e))?
                            }
                        };
                        *sum = sum.wrapping_add(s);
                        *valid += v;
                    }
                    sums_read = true;
                }
                (_, None) => {
                    return Err(DataFusionError::Internal(format!(
                        "pushed aggregate {agg:?} without its column"
                    )));
                }
            }
        }
        if sums_read {
            self.counters.pages_read.add(seg.num_pages());
            self.counters.rows_read.add(rows as usize);
        } else {
            self.counters.pages_skipped.add(seg.num_pages());
            self.from_stats.add(rows as usize);
        }
        Ok(())
    }

    /// Adds a segment's rows as the ordinary scan reads them (DELETEs and
    /// superseded rows applied).
    fn read_rows(&mut self, tablet_id: i64, segment: SegmentToScan) -> Result<()> {
        let table_schema = self.scan.table_schema();
        let mut projection: Vec<usize> = self.aggs.iter().filter_map(|a| a.column).collect();
        projection.sort_unstable();
        projection.dedup();
        let full = table_schema.arrow_schema();
        let schema = Arc::new(Schema::new(
            projection
                .iter()
                .map(|&c| full.field(c).clone())
                .collect::<Vec<_>>(),
        ));
        // Rows read here are aggregated, not produced.
        let counters = Counters {
            rows_out: Count::new(),
            ..self.counters.clone()
        };
        let mut state = ScanState::new(
            schema,
            projection.clone(),
            table_schema,
            None,
            false,
            self.engine.clone(),
            counters,
            self.batch_size,
        )?;
        state.segments.push_back(segment);
        state.tablet_id = tablet_id;
        while let Some(batch) = state.next_batch()? {
            for (agg, acc) in self.aggs.iter().zip(self.accs.iter_mut()) {
                let column = agg
                    .column
                    .and_then(|c| projection.iter().position(|&p| p == c))
                    .map(|i| batch.column(i));
                acc.add_rows(batch.num_rows(), column)?;
            }
        }
        Ok(())
    }

    /// The partial state row.
    fn finish(self, schema: &SchemaRef) -> Result<RecordBatch> {
        self.counters.rows_out.add(1);
        let columns = self
            .accs
            .into_iter()
            .zip(&self.aggs)
            .map(|(acc, agg)| acc.state(&agg.state_type))
            .collect::<Result<Vec<_>>>()?;
        Ok(RecordBatch::try_new(schema.clone(), columns)?)
    }
}

/// The wrapping sum and count of the non-NULL values of an integer or
/// decimal array (four independent lanes: decoded decimals are 16 bytes a
/// row, and one chain of 128-bit adds would wait on each carry).
fn array_sum(a: &ArrayRef) -> tethys_common::Result<(i128, u64)> {
    fn lanes<P: ArrowPrimitiveType>(
        a: &PrimitiveArray<P>,
        wide: impl Fn(P::Native) -> i128,
    ) -> (i128, u64) {
        let values = a.values();
        let valid = (a.len() - a.null_count()) as u64;
        let total = match a.nulls().filter(|n| n.null_count() > 0) {
            Some(nulls) => values
                .iter()
                .zip(nulls.iter())
                .filter(|(_, ok)| *ok)
                .fold(0i128, |s, (v, _)| s.wrapping_add(wide(*v))),
            None => {
                let mut acc = [0i128; 4];
                let chunks = values.chunks_exact(4);
                let tail = chunks.remainder();
                for c in chunks {
                    for (a, v) in acc.iter_mut().zip(c) {
                        *a = a.wrapping_add(wide(*v));
                    }
                }
                tail.iter()
                    .fold(acc.iter().fold(0i128, |s, a| s.wrapping_add(*a)), |s, v| {
                        s.wrapping_add(wide(*v))
                    })
            }
        };
        (total, valid)
    }
    Ok(match a.data_type() {
        DataType::Int8 => lanes(a.as_primitive::<Int8Type>(), i128::from),
        DataType::Int16 => lanes(a.as_primitive::<Int16Type>(), i128::from),
        DataType::Int32 => lanes(a.as_primitive::<Int32Type>(), i128::from),
        DataType::Int64 => lanes(a.as_primitive::<Int64Type>(), i128::from),
        DataType::Decimal128(_, _) => lanes(a.as_primitive::<Decimal128Type>(), |v| v),
        other => {
            return Err(tethys_common::TethysError::Internal(format!(
                "pushed-down sum over {other}"
            )));
        }
    })
}

/// The smallest (`min`) or largest non-NULL value of `a` as a bound: the
/// zone map's, but for strings of any length.
fn bound_of(a: &ArrayRef, min: bool) -> Option<ZoneValue> {
    if let Some(s) = a.as_string_opt::<i32>() {
        let v = if min {
            arrow::compute::min_string(s)
        } else {
            arrow::compute::max_string(s)
        };
        return v.map(|v| ZoneValue::S(v.to_string()));
    }
    let zone = ZoneMap::of(a.as_ref());
    if min { zone.min } else { zone.max }
}

/// One aggregate's running value.
enum Acc {
    /// `count(*)` or `count(col)`.
    Count(i64),
    /// The wrapping sum of the values seen and how many there were (none:
    /// the sum is NULL).
    Sum { sum: i128, valid: u64 },
    /// The smallest (`min`) or largest value seen, as a zone-map bound.
    Bound { value: Option<ZoneValue>, min: bool },
}

impl Acc {
    fn new(agg: &PushedAgg) -> Acc {
        match agg.kind {
            PushedAggKind::CountRows | PushedAggKind::Count => Acc::Count(0),
            PushedAggKind::Sum => Acc::Sum { sum: 0, valid: 0 },
            PushedAggKind::Min => Acc::Bound {
                value: None,
                min: true,
            },
            PushedAggKind::Max => Acc::Bound {
                value: None,
                min: false,
            },
        }
    }

    /// Adds `rows` rows whose aggregated column (if any) is `column`.
    fn add_rows(&mut self, rows: usize, column: Option<&ArrayRef>) -> Result<()> {
        match (self, column) {
            (Acc::Count(n), None) => *n += rows as i64,
            (Acc::Count(n), Some(c)) => *n += (c.len() - c.logical_null_count()) as i64,
            (Acc::Sum { sum, valid }, Some(c)) => {
                let (s, v) = array_sum(c)?;
                *sum = sum.wrapping_add(s);
                *valid += v;
            }
            (Acc::Bound { value, min }, Some(c)) => {
                *value = pick_bound(value.take(), bound_of(c, *min), *min);
            }
            _ => {
                return Err(DataFusionError::Internal(
                    "pushed aggregate without its column".into(),
                ));
            }
        }
        Ok(())
    }

    /// The partial state as a one-row array of `dt`.
    fn state(self, dt: &DataType) -> Result<ArrayRef> {
        Ok(match (self, dt) {
            (Acc::Count(n), DataType::Int64) => Arc::new(Int64Array::from(vec![n])),
            (Acc::Sum { sum, valid }, DataType::Int64) => {
                // Truncation keeps the two's complement sum at 64 bits.
                Arc::new(Int64Array::from(vec![(valid > 0).then_some(sum as i64)]))
            }
            (Acc::Sum { sum, valid }, DataType::Decimal128(p, s)) => Arc::new(
                Decimal128Array::from(vec![(valid > 0).then_some(sum)])
                    .with_precision_and_scale(*p, *s)?,
            ),
            (Acc::Bound { value, .. }, dt) => to_scalar(&value, dt).to_array()?,
            (_, dt) => {
                return Err(DataFusionError::Internal(format!(
                    "pushed aggregate state of type {dt}"
                )));
            }
        })
    }
}

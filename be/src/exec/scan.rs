//! `TabletScanExec`: reads the visible segments of tablets, pruning segments
//! and pages with their zone maps, and yields Arrow batches of at most one
//! page (4064 rows) each.

use std::fmt;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::stream::RecordBatchReceiverStream;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use tethys_common::TethysError;
use tethys_common::plan::OlapScanExec;

use crate::storage::StorageEngine;
use crate::storage::page_cache::PageKey;
use crate::storage::segment::Segment;
use crate::storage::zone_map::{ZoneMap, ZoneStats};

/// Scan of local tablets at a snapshot version.
#[derive(Debug)]
pub struct TabletScanExec {
    scan: OlapScanExec,
    predicate: Option<Arc<dyn PhysicalExpr>>,
    engine: Arc<StorageEngine>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl TabletScanExec {
    /// Binds a scan description to `engine`.
    pub fn new(
        scan: OlapScanExec,
        predicate: Option<Arc<dyn PhysicalExpr>>,
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
            engine,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }
}

impl DisplayAs for TabletScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        self.scan.fmt_as(t, f)
    }
}

struct Counters {
    rows_read: Count,
    pages_read: Count,
    pages_skipped: Count,
    rows_stats_filtered: Count,
    bytes_read: Count,
    cached_pages: Count,
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
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let schema: SchemaRef = self.scan.schema();
        let tablets = self.scan.tablets_of_partition(partition);
        let table_schema = self.scan.table_schema().clone();
        let projection = self.scan.projection();
        let engine = self.engine.clone();
        let pruning = match &self.predicate {
            Some(p) => PruningPredicateBuilder::new()
                .with_file_schema(schema.clone())
                .build(p.clone()),
            None => None,
        };
        let m = |name: &'static str| MetricBuilder::new(&self.metrics).counter(name, partition);
        let counters = Counters {
            rows_read: m("RawRowsRead"),
            pages_read: m("PagesRead"),
            pages_skipped: m("PagesSkipped"),
            rows_stats_filtered: m("RowsStatsFiltered"),
            bytes_read: m("CompressedBytesRead"),
            cached_pages: m("CachedPagesNum"),
        };
        let mut builder = RecordBatchReceiverStream::builder(schema.clone(), 2);
        let tx = builder.tx();
        builder.spawn_blocking(move || {
            for (tablet_id, version) in tablets {
                let tablet = engine.tablet(tablet_id)?;
                for path in tablet.segments_at(version)? {
                    let seg = Segment::open_cached(&path, &table_schema, &engine.footers)?;
                    let pages = seg.num_pages();
                    let cols = &seg.footer().columns;
                    let keep: Vec<bool> = match &pruning {
                        Some(p) => {
                            // Whole segment first, then its pages.
                            let seg_zone: Vec<&ZoneMap> =
                                projection.iter().map(|&c| &cols[c].zone).collect();
                            let seg_stats = ZoneStats {
                                schema: &schema,
                                zones: vec![seg_zone],
                                rows: vec![seg.footer().num_rows],
                            };
                            if !p.prune(&seg_stats)?.first().copied().unwrap_or(true) {
                                vec![false; pages]
                            } else {
                                let stats = ZoneStats {
                                    schema: &schema,
                                    zones: (0..pages)
                                        .map(|pi| {
                                            projection
                                                .iter()
                                                .map(|&c| &cols[c].pages[pi].zone)
                                                .collect()
                                        })
                                        .collect(),
                                    rows: (0..pages)
                                        .map(|pi| cols[0].pages[pi].num_rows as u64)
                                        .collect(),
                                };
                                p.prune(&stats)?
                            }
                        }
                        None => vec![true; pages],
                    };
                    for (pi, keep) in keep.iter().enumerate() {
                        let page_rows =
                            cols.first().map(|c| c.pages[pi].num_rows).unwrap_or(0) as usize;
                        if !keep {
                            counters.pages_skipped.add(1);
                            counters.rows_stats_filtered.add(page_rows);
                            continue;
                        }
                        counters.pages_read.add(1);
                        let mut arrays = Vec::with_capacity(projection.len());
                        for (out_i, &c) in projection.iter().enumerate() {
                            let key = PageKey {
                                segment: seg.cache_id(),
                                column: c as u32,
                                page: pi as u32,
                            };
                            if key.segment != 0
                                && let Some(a) = engine.pages.get(&key)
                            {
                                counters.cached_pages.add(1);
                                arrays.push(a);
                                continue;
                            }
                            let (a, bytes) = seg
                                .read_page(c, pi, schema.field(out_i).data_type())
                                .map_err(|e| corrupt_in(tablet_id, e))?;
                            counters.bytes_read.add(bytes as usize);
                            if key.segment != 0 {
                                engine.pages.insert(key, a.clone());
                            }
                            arrays.push(a);
                        }
                        let batch = if arrays.is_empty() {
                            RecordBatch::try_new_with_options(
                                schema.clone(),
                                arrays,
                                &arrow::array::RecordBatchOptions::new()
                                    .with_row_count(Some(page_rows)),
                            )?
                        } else {
                            RecordBatch::try_new(schema.clone(), arrays)?
                        };
                        counters.rows_read.add(batch.num_rows());
                        if tx.blocking_send(Ok(batch)).is_err() {
                            // The consumer went away (query finished or cancelled).
                            return Ok(());
                        }
                    }
                }
            }
            Ok(())
        });
        Ok(builder.build())
    }
}

fn corrupt_in(tablet_id: i64, e: TethysError) -> DataFusionError {
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
    use arrow::array::{Int64Array, StringArray};
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{binary, col, lit};
    use datafusion::physical_plan::common::collect;
    use tethys_common::config::ROWS_PER_PAGE;
    use tethys_common::schema::{Column, TableSchema};
    use tethys_common::types::ColumnType;
    use tethys_proto::{OlapScanNodePb, TabletVersion};

    #[tokio::test]
    async fn zone_maps_skip_pages_and_segments() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Arc::new(
            StorageEngine::open(dir.path())
                .unwrap()
                .with_page_cache(16 << 20),
        );
        let column = |n: &str, t: &str, key: bool| Column {
            name: n.into(),
            column_type: ColumnType::parse(t).unwrap(),
            nullable: !key,
            is_key: key,
            default: None,
            comment: String::new(),
            aggregation: None,
        };
        let schema = TableSchema {
            columns: vec![
                column("k", "bigint", true),
                column("v", "varchar(16)", false),
            ],
            num_key_columns: 1,
            compression: "lz4".into(),
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
        let node = OlapScanNodePb {
            database: "d".into(),
            table: "t".into(),
            schema: Some(schema.to_pb()),
            projection: vec![0, 1],
            tablets: vec![TabletVersion {
                tablet_id: 1,
                version: 2,
            }],
            partitions: 1,
            ..Default::default()
        };
        let scan = OlapScanExec::try_new(node).unwrap();
        let s = scan.schema();
        let pred = binary(col("k", &s).unwrap(), Operator::Lt, lit(100i64), &s).unwrap();
        let exec = TabletScanExec::new(scan, Some(pred), engine.clone());
        let out = collect(exec.execute(0, Arc::new(TaskContext::default())).unwrap())
            .await
            .unwrap();
        // The scan returns whole surviving pages; the filter above trims rows.
        let rows: usize = out.iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows, ROWS_PER_PAGE);
        let m = exec.metrics().unwrap();
        let get = |name: &str| m.sum_by_name(name).map(|v| v.as_usize()).unwrap_or(0);
        assert_eq!(get("PagesRead"), 1);
        assert_eq!(get("PagesSkipped"), 4);
        assert_eq!(get("RowsStatsFiltered"), n as usize - ROWS_PER_PAGE);
        assert_eq!(get("CachedPagesNum"), 0);
        // Again: both columns' page come from the page cache, same rows.
        let again = TabletScanExec::new(exec.scan.clone(), exec.predicate.clone(), engine.clone());
        let out2 = collect(again.execute(0, Arc::new(TaskContext::default())).unwrap())
            .await
            .unwrap();
        assert_eq!(out2, out);
        let m = again.metrics().unwrap();
        let get = |name: &str| m.sum_by_name(name).map(|v| v.as_usize()).unwrap_or(0);
        assert_eq!(get("CachedPagesNum"), 2);
        assert_eq!(get("CompressedBytesRead"), 0);
        // At the old version nothing is visible.
        let node = OlapScanNodePb {
            schema: Some(schema.to_pb()),
            projection: vec![0],
            tablets: vec![TabletVersion {
                tablet_id: 1,
                version: 1,
            }],
            partitions: 1,
            ..Default::default()
        };
        let exec = TabletScanExec::new(OlapScanExec::try_new(node).unwrap(), None, engine);
        let out = collect(exec.execute(0, Arc::new(TaskContext::default())).unwrap())
            .await
            .unwrap();
        assert_eq!(out.iter().map(|b| b.num_rows()).sum::<usize>(), 0);
    }
}

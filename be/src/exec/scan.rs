//! `TabletScanExec`: reads the visible segments of tablets, pruning segments
//! and pages with their zone maps, evaluates the fragment's filter page by
//! page with late materialization (`predicate.rs`), and yields Arrow batches
//! of at most 4064 rows.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterPushdownPhase, FilterPushdownPropagation,
};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::TryStreamExt;
use tethys_common::plan::OlapScanExec;
use tethys_common::plan::build_keys::BuildKeys;

use super::runtime_filter::{CountedConjunct, RemoteFilters, RuntimeFilterSettings, with_filters};
use super::segment_scan::{Counters, ScanInputs, ScanState};
use crate::storage::StorageEngine;
use tethys_common::plan::runtime_filters::{offered_runtime_filters, wait_complete};

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
    /// Joins' dynamic filters on this scan's columns (a stage of a
    /// distributed plan, `runtime_filter.rs`), applied once their build
    /// sides are complete.
    runtime_filters: Vec<Arc<dyn PhysicalExpr>>,
    /// Filters of joins in other stages, among `runtime_filters`, fetched
    /// from the merge node when the scan starts.
    remote: Option<Arc<RemoteFilters>>,
    /// The runtime filters' conjuncts in `predicate`, once applied: the rows
    /// each removes are counted per filter.
    counted: Vec<CountedConjunct>,
    /// The keys collected from the build sides of the stage's joins whose
    /// filters this scan holds, by filter id (`collect_build_keys`).
    build_keys: HashMap<u64, Arc<BuildKeys>>,
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
        let remote = RemoteFilters::of(&scan);
        TabletScanExec {
            runtime_filters: remote.iter().flat_map(|r| r.exprs()).collect(),
            remote,
            scan,
            predicate,
            evaluates,
            engine,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
            counted: vec![],
            build_keys: HashMap::new(),
        }
    }

    /// The same scan with `predicate` as its filter, evaluated by the scan,
    /// counting into the same metrics.
    fn filtered_by(&self, predicate: Option<Arc<dyn PhysicalExpr>>) -> TabletScanExec {
        TabletScanExec {
            scan: self.scan.clone(),
            predicate,
            evaluates: true,
            engine: self.engine.clone(),
            properties: self.properties.clone(),
            metrics: self.metrics.clone(),
            runtime_filters: vec![],
            remote: self.remote.clone(),
            counted: vec![],
            build_keys: HashMap::new(),
        }
    }

    /// The ids of the joins' dynamic filters this scan holds.
    pub fn runtime_filter_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.runtime_filters
            .iter()
            .filter_map(|f| f.expression_id())
    }

    /// The same scan testing `keys` (by filter id) for its joins' filters.
    pub fn with_build_keys(&self, keys: HashMap<u64, Arc<BuildKeys>>) -> TabletScanExec {
        let mut node = self.filtered_by(self.predicate.clone());
        node.evaluates = self.evaluates;
        node.runtime_filters = self.runtime_filters.clone();
        node.build_keys = keys;
        node
    }
}

impl TabletScanExec {
    /// What the segment readers need of the scan.
    fn inputs(&self) -> ScanInputs<'_> {
        ScanInputs {
            scan: &self.scan,
            predicate: self.predicate.as_ref(),
            evaluates: self.evaluates,
            engine: &self.engine,
        }
    }
}

impl DisplayAs for TabletScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        self.scan.fmt_as(t, f)
    }
}

impl ExecutionPlan for TabletScanExec {
    tethys_common::leaf_exec_plan!(
        "TabletScanExec",
        // The runtime filters too: a join publishes its filter only when a
        // node below it holds the filter's expression.
        |node| node.predicate.iter().chain(node.runtime_filters.iter()),
        with metrics
    );

    /// Takes the dynamic filters of joins above (their runtime filters).
    /// The join still decides which rows match (`No`).
    fn handle_child_pushdown_result(
        &self,
        phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        _config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        let (mut out, dynamic) =
            offered_runtime_filters(phase, &child_pushdown_result, &self.runtime_filters);
        if !dynamic.is_empty() {
            let mut node = self.with_build_keys(self.build_keys.clone());
            node.runtime_filters = self
                .runtime_filters
                .iter()
                .cloned()
                .chain(dynamic)
                .collect();
            out = out.with_updated_node(Arc::new(node));
        }
        Ok(out)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if !self.runtime_filters.is_empty() {
            // Read once the joins' build sides are done, with their keys.
            let settings = context
                .session_config()
                .get_extension::<RuntimeFilterSettings>()
                .map_or_else(RuntimeFilterSettings::default, |s| *s);
            if let Some(remote) = &self.remote {
                remote.start(&context, settings.wait);
            }
            let filters = self.runtime_filters.clone();
            let this = self.filtered_by(None);
            let predicate = self.predicate.clone();
            let keys = self.build_keys.clone();
            let start = async move {
                wait_complete(&filters, settings.wait).await;
                // The scan evaluates its own filter too now (a filter above
                // that also projects evaluates it again: the same rows).
                let (all, counted) = with_filters(
                    predicate.as_ref(),
                    &filters,
                    &keys,
                    &this.scan.schema(),
                    settings.max_in,
                )?;
                let mut scan = this.filtered_by(all);
                scan.counted = counted;
                scan.execute(partition, context)
            };
            return Ok(Box::pin(RecordBatchStreamAdapter::new(
                self.scan.schema(),
                futures::stream::once(start).try_flatten(),
            )));
        }
        let schema: SchemaRef = self.scan.schema();
        let counters = Counters::new(&self.metrics, partition);
        let batch_size = context.session_config().batch_size().max(1);
        let tablets: VecDeque<(i64, i64)> = self.scan.tablets_of_partition(partition).into();
        let table_schema = self.scan.table_schema();
        if table_schema.merges_on_read() {
            let merges_before = MetricBuilder::new(&self.metrics).counter("MergedRows", partition);
            let mut state = super::merge_scan::MergeScan::new(
                self.inputs(),
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
        if let Some(p) = state.predicate.as_mut() {
            p.count_removed(&self.counted, |name| {
                MetricBuilder::new(&self.metrics).counter(name.to_string(), partition)
            });
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
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
        let column =
            |n: &str, key: bool| Column::new(n, ColumnType::parse("bigint").unwrap(), !key, key);
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
                bucket: 0,
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

    /// Tablet 1 of a table (k, v BIGINT) holding k = v = 0..n at version 2,
    /// in an engine in `dir`.
    fn counting_tablet(dir: &tempfile::TempDir, n: i64) -> (Arc<StorageEngine>, TableSchema) {
        let engine = cached_engine(dir);
        let schema = TableSchema {
            columns: vec![column("k", "bigint", true), column("v", "bigint", false)],
            num_key_columns: 1,
            compression: "lz4".into(),
            ..Default::default()
        };
        engine.create_tablet(1, 1, 1, schema.clone(), 1).unwrap();
        let keys = Int64Array::from_iter_values(0..n);
        let rows = RecordBatch::try_new(
            schema.arrow_schema(),
            vec![Arc::new(keys.clone()), Arc::new(keys)],
        )
        .unwrap();
        engine.write(7, 1, &[rows]).unwrap();
        engine.publish(7, 1, 2).unwrap();
        (engine, schema)
    }

    /// A column of type `t`, nullable unless a key.
    fn column(n: &str, t: &str, key: bool) -> Column {
        Column::new(n, ColumnType::parse(t).unwrap(), !key, key)
    }

    /// A filter over a scan that the FE sends as a `ScanFilterExec` arrives
    /// whole and is folded into the scan, which answers the filtered rows.
    #[tokio::test]
    async fn a_scan_filter_sent_by_the_fe_is_folded_into_the_scan() {
        use datafusion_proto::bytes::{
            physical_plan_from_bytes_with_extension_codec,
            physical_plan_to_bytes_with_extension_codec,
        };
        use tethys_common::plan::{ScanFilterExec, TethysCodec};
        let dir = tempfile::tempdir().unwrap();
        let (engine, schema) = counting_tablet(&dir, 5_000);
        let scan = Arc::new(OlapScanExec::try_new(scan_node(&schema, vec![0, 1], 2)).unwrap());
        let s = scan.schema();
        let pred = binary(col("v", &s).unwrap(), Operator::Lt, lit(100i64), &s).unwrap();
        let sent: Arc<dyn ExecutionPlan> = Arc::new(ScanFilterExec::try_new(scan, pred).unwrap());
        let bytes = physical_plan_to_bytes_with_extension_codec(sent, &TethysCodec).unwrap();
        let task = TaskContext::default();
        let got =
            physical_plan_from_bytes_with_extension_codec(&bytes, &task, &TethysCodec).unwrap();
        assert!(got.is::<ScanFilterExec>(), "{}", got.name());
        let bound = crate::exec::bind_scans(got, &engine).unwrap();
        assert!(bound.is::<TabletScanExec>(), "{}", bound.name());
        let out = collect(bound.execute(0, Arc::new(task)).unwrap())
            .await
            .unwrap();
        assert_eq!(out.iter().map(|b| b.num_rows()).sum::<usize>(), 100);
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

    /// A broadcast join's filter on a scan of its stage tests the keys
    /// collected from the join's build side (a bitmap here), not the join's
    /// hash table: SSB q2.3's lineorder scan on three BEs spent a third of
    /// its CPU looking rows up in the table.
    #[tokio::test]
    async fn a_joins_filter_in_a_stage_tests_the_collected_build_keys() {
        use crate::exec::collect_build_keys;
        use arrow::datatypes::{DataType, Field, Schema};
        use datafusion::common::NullEquality;
        use datafusion::common::tree_node::TreeNode;
        use datafusion::logical_expr::JoinType;
        use datafusion::physical_expr::expressions::InListExpr;
        use datafusion::physical_optimizer::PhysicalOptimizerRule;
        use datafusion::physical_optimizer::filter_pushdown::FilterPushdown;
        use datafusion::physical_plan::joins::{HashJoinExec, HashTableLookupExpr, PartitionMode};
        use datafusion::physical_plan::test::TestMemoryExec;
        use datafusion::prelude::SessionConfig;
        use tethys_common::plan::BitmapFilterExpr;
        use tethys_common::plan::build_keys::BuildKeysExec;

        let dir = tempfile::tempdir().unwrap();
        let n = 10_000i64;
        let (engine, schema) = counting_tablet(&dir, n);
        let scan = OlapScanExec::try_new(scan_node(&schema, vec![0, 1], 2)).unwrap();
        let probe: Arc<dyn ExecutionPlan> =
            Arc::new(TabletScanExec::new(scan.clone(), None, false, engine));
        let build_schema = Arc::new(Schema::new(vec![Field::new("b", DataType::Int64, false)]));
        let keys = RecordBatch::try_new(
            build_schema.clone(),
            vec![Arc::new(Int64Array::from(vec![5, 700, 9000]))],
        )
        .unwrap();
        let build =
            TestMemoryExec::try_new_exec(&[vec![keys]], build_schema.clone(), None).unwrap();
        let join = HashJoinExec::try_new(
            build,
            probe,
            vec![(
                col("b", &build_schema).unwrap(),
                col("k", &scan.schema()).unwrap(),
            )],
            None,
            &JoinType::Inner,
            None,
            PartitionMode::CollectLeft,
            NullEquality::NullEqualsNothing,
            false,
        )
        .unwrap();
        // A task's session, as the worker sets it from the FE's headers.
        let mut config = SessionConfig::new();
        let mut headers = tonic::codegen::http::HeaderMap::new();
        headers.insert(
            tethys_common::task_headers::RUNTIME_FILTER_WAIT_MS,
            "1000".parse().unwrap(),
        );
        crate::service::worker::statement_settings(&mut config, &headers);
        let plan = FilterPushdown::new_post_optimization()
            .optimize(Arc::new(join), config.options())
            .unwrap();
        let plan = collect_build_keys(plan).unwrap();
        let j = plan.downcast_ref::<HashJoinExec>().unwrap();
        assert!(j.left().is::<BuildKeysExec>(), "{j:?}");
        let scan = j.right().downcast_ref::<TabletScanExec>().unwrap();
        assert_eq!(scan.build_keys.len(), 1);
        let ctx = Arc::new(TaskContext::default().with_session_config(config));
        let out = collect(plan.execute(0, ctx).unwrap()).await.unwrap();
        assert_eq!(out.iter().map(|b| b.num_rows()).sum::<usize>(), 3);
        let m = plan.children()[1].metrics().unwrap();
        let get = |name: &str| m.sum_by_name(name).map(|v| v.as_usize()).unwrap_or(0);
        // The bounds skip the rows past the largest key, the keys the rest.
        let skipped = get("RowsKeyRangeFiltered") + get("RowsStatsFiltered");
        assert!(skipped > 0, "{m}");
        assert_eq!(get("RowsFilteredByRF(k)") + skipped, n as usize - 3, "{m}");
        // The filter the scan applied: the keys' bitmap, no lookup.
        let (filter, _) = crate::exec::runtime_filter::with_filters(
            None,
            &scan.runtime_filters,
            &scan.build_keys,
            &scan.schema(),
            1024,
        )
        .unwrap();
        let filter = filter.unwrap();
        let has = |f: &dyn Fn(&Arc<dyn PhysicalExpr>) -> bool| filter.exists(|e| Ok(f(e))).unwrap();
        assert!(has(&|e| e.is::<BitmapFilterExpr>()), "{filter}");
        assert!(!has(&|e| e.is::<HashTableLookupExpr>()), "{filter}");
        // Nor DataFusion's IN list of a small build side, probed per row in
        // a hash set (SSB q3.3's supplier keys on three backends).
        assert!(!has(&|e| e.is::<InListExpr>()), "{filter}");
    }
}

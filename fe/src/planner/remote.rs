//! `BeFragmentExec`: the FE side of an exchange. It holds the fragment each
//! backend runs (per backend, the scan of that backend's tablets), sends it
//! as datafusion-proto bytes over Arrow Flight, and streams the batches back.
//! Output partition `i` is partition `k` of one backend's fragment.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::common::Statistics;
use datafusion::common::stats::Precision;
use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterPushdownPhase, FilterPushdownPropagation,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use datafusion_proto::bytes::physical_plan_to_bytes_with_extension_codec;
use futures::{StreamExt, TryStreamExt};
use tethys_common::TethysError;
use tethys_common::plan::{FragmentProfile, TethysCodec};
use tethys_proto::ExecFragmentRequest;

use super::{StatementCtx, runtime_filter};
use crate::backends::Backends;
use crate::catalog::BackendInfo;
use tethys_common::plan::build_keys::BuildKeys;

/// Display facts of the scan, for EXPLAIN.
#[derive(Debug, Clone)]
pub struct FragmentInfo {
    pub table: String,
    pub table_name: String,
    pub partitions: Vec<String>,
    pub total_partitions: usize,
    pub tablets: usize,
    pub total_tablets: usize,
    pub predicates: Vec<String>,
    pub distribution: String,
    /// Rows the selected tablets hold, when the backends told.
    pub rows: Option<u64>,
    /// Columns whose equal values always meet in one fragment partition
    /// (the hash distribution columns, plus the partition column when more
    /// than one partition is read); `None` for random distribution. An
    /// aggregation grouping by all of them can finish on the backends.
    pub colocated: Option<Vec<String>>,
    /// The table's column statistics (`ANALYZE TABLE`), for estimates.
    pub column_stats: Arc<super::selectivity::ColumnStatsMap>,
    /// The hash distribution columns, in order (empty: random).
    pub bucket_columns: Vec<String>,
    /// The table's colocation group, when it is stable (each bucket read
    /// on one backend, the same for every table of the group).
    pub colocate_group: Option<String>,
    /// Buckets of each partition read, when hash distributed and the same
    /// for all of them (a row's bucket is its bucket hash modulo this).
    pub bucket_num: Option<u32>,
}

/// Fragments running on backends, seen as one DataFusion leaf.
#[derive(Debug)]
pub struct BeFragmentExec {
    backends: Arc<Backends>,
    schema: SchemaRef,
    fragments: Vec<(BackendInfo, Arc<dyn ExecutionPlan>)>,
    pub info: FragmentInfo,
    stmt: Arc<StatementCtx>,
    properties: Arc<PlanProperties>,
    /// Joins' dynamic filters on this scan's columns (runtime filters),
    /// applied on the backends once the joins' build sides are complete.
    runtime_filters: Vec<Arc<dyn PhysicalExpr>>,
    /// The build keys of the joins publishing `runtime_filters`, by filter
    /// expression id: the key sets the backends test come from these.
    build_keys: HashMap<u64, Arc<BuildKeys>>,
    /// The runtime filters' value as first taken, shared by all partitions:
    /// bitmaps and bloom filters are built once per scan, not per partition.
    applied: Arc<tokio::sync::OnceCell<Option<Arc<dyn PhysicalExpr>>>>,
    /// The backends' counters of this execution, summed over partitions as
    /// their streams finish (`EXPLAIN ANALYZE`, query profiles).
    profile: Arc<std::sync::Mutex<FragmentProfile>>,
    /// Dealt to partitions by bucket, hash partitioned on these (the
    /// distribution columns) by the table's bucket hash: one side of a
    /// colocate join (`colocate.rs`).
    by_bucket: Option<Vec<Arc<dyn PhysicalExpr>>>,
}

impl BeFragmentExec {
    pub fn new(
        backends: Arc<Backends>,
        schema: SchemaRef,
        fragments: Vec<(BackendInfo, Arc<dyn ExecutionPlan>)>,
        info: FragmentInfo,
        stmt: Arc<StatementCtx>,
    ) -> Self {
        let properties = properties(&schema, &fragments, None);
        BeFragmentExec {
            backends,
            schema,
            fragments,
            info,
            stmt,
            properties,
            runtime_filters: vec![],
            build_keys: HashMap::new(),
            applied: Default::default(),
            profile: Default::default(),
            by_bucket: None,
        }
    }

    /// This scan dealt to `n` partitions per backend by bucket, declared
    /// hash partitioned on the distribution columns (one side of a colocate
    /// join: `colocate.rs` checks the other side meets it).
    pub fn aligned_by_bucket(&self, n: usize) -> Result<BeFragmentExec> {
        let keys = self
            .info
            .bucket_columns
            .iter()
            .map(|c| {
                let i = self.schema.index_of(c)?;
                Ok(
                    Arc::new(datafusion::physical_expr::expressions::Column::new(c, i))
                        as Arc<dyn PhysicalExpr>,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let fragments = self
            .fragments
            .iter()
            .map(|(b, p)| {
                let p = tethys_common::plan::map_scans(p.clone(), |node| {
                    node.by_bucket = true;
                    node.partitions = n as u32;
                })?;
                Ok((b.clone(), p))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut out = self.with_runtime_filters(self.runtime_filters.clone());
        out.properties = properties(&self.schema, &fragments, Some(&keys));
        out.fragments = fragments;
        out.by_bucket = Some(keys);
        Ok(out)
    }

    /// Where each bucket is read once this scan is dealt by bucket into
    /// `n` partitions per backend ([`Self::aligned_by_bucket`]) over the
    /// tasks of `backends` (every alive backend, in id order; a stage so
    /// dealt runs a task on each): exchange partition `i * n + bucket % n`
    /// for the fragment on `backends[i]` (a bucket no fragment reads: 0).
    /// `None` when the bucket count is not one for all partitions read, a
    /// bucket is read on two backends (partitions placed apart), or a
    /// fragment's backend is not in `backends`.
    pub fn bucket_targets(&self, n: usize, backends: &[i64]) -> Option<Vec<u32>> {
        let buckets = self.info.bucket_num? as usize;
        let mut targets: Vec<Option<u32>> = vec![None; buckets];
        for (b, p) in &self.fragments {
            let i = backends.iter().position(|id| *id == b.id)?;
            for t in tethys_common::plan::scan_tablets(p) {
                let at = u32::try_from(i * n + t.bucket as usize % n).ok()?;
                let slot = targets.get_mut(t.bucket as usize)?;
                if slot.is_some_and(|s| s != at) {
                    return None;
                }
                *slot = Some(at);
            }
        }
        Some(targets.into_iter().map(|t| t.unwrap_or(0)).collect())
    }

    /// Whether this scan is dealt by bucket (a colocate join's side).
    pub fn is_aligned_by_bucket(&self) -> bool {
        self.by_bucket.is_some()
    }

    /// Whether this scan and `other` read each bucket they share on one
    /// backend, with their fragments on the same backends in one order: the
    /// condition for their partitions to meet bucket by bucket.
    pub fn meets_bucket_by_bucket(&self, other: &BeFragmentExec) -> bool {
        let ids = |s: &BeFragmentExec| s.fragments.iter().map(|(b, _)| b.id).collect::<Vec<_>>();
        if ids(self) != ids(other) {
            return false;
        }
        let placed = |s: &BeFragmentExec| {
            let mut m = HashMap::new();
            for (b, p) in &s.fragments {
                for t in tethys_common::plan::scan_tablets(p) {
                    m.insert(t.bucket, b.id);
                }
            }
            m
        };
        let (a, b) = (placed(self), placed(other));
        a.iter()
            .all(|(bucket, be)| b.get(bucket).is_none_or(|o| o == be))
    }

    /// A copy without the runtime filters whose expression ids are in
    /// `drop`, taking the keys of the joins publishing the others from
    /// `build_keys`.
    pub fn planned_runtime_filters(
        &self,
        drop: &HashSet<u64>,
        build_keys: HashMap<u64, Arc<BuildKeys>>,
    ) -> BeFragmentExec {
        let keep: Vec<_> = self
            .runtime_filters
            .iter()
            .filter(|f| !f.expression_id().is_some_and(|id| drop.contains(&id)))
            .cloned()
            .collect();
        let mut out = self.with_runtime_filters(keep);
        out.build_keys = build_keys;
        out
    }

    /// A copy applying `filters` as its runtime filters.
    fn with_runtime_filters(&self, filters: Vec<Arc<dyn PhysicalExpr>>) -> BeFragmentExec {
        let mut out = BeFragmentExec::new(
            self.backends.clone(),
            self.schema.clone(),
            self.fragments.clone(),
            self.info.clone(),
            self.stmt.clone(),
        );
        out.runtime_filters = filters;
        out.build_keys = self.build_keys.clone();
        if let Some(keys) = &self.by_bucket {
            out.properties = properties(&self.schema, &self.fragments, Some(keys));
            out.by_bucket = Some(keys.clone());
        }
        out
    }

    /// The runtime filters this scan applies.
    pub fn runtime_filters(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.runtime_filters
    }

    /// The counters the backends reported for the partitions that finished.
    pub fn profile(&self) -> FragmentProfile {
        self.profile
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The fragments, per backend.
    pub fn fragments(&self) -> &[(BackendInfo, Arc<dyn ExecutionPlan>)] {
        &self.fragments
    }

    /// A copy with each fragment wrapped by `f` (used to push work to backends).
    pub fn map_fragments(
        &self,
        schema: SchemaRef,
        f: impl Fn(Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>>,
    ) -> Result<BeFragmentExec> {
        let fragments = self
            .fragments
            .iter()
            .map(|(b, p)| Ok((b.clone(), f(p.clone())?)))
            .collect::<Result<Vec<_>>>()?;
        let mut out = BeFragmentExec::new(
            self.backends.clone(),
            schema,
            fragments,
            self.info.clone(),
            self.stmt.clone(),
        );
        // The filters read scan columns, and are added right above the scan.
        out.runtime_filters = self.runtime_filters.clone();
        out.build_keys = self.build_keys.clone();
        Ok(out)
    }

    /// Estimated share of the tablets' rows the fragment's filter keeps
    /// (`selectivity::selectivity` of the predicate above the scan, with the
    /// table's column statistics; 1 without a predicate).
    pub fn selectivity(&self) -> f64 {
        fn filter_of(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn PhysicalExpr>> {
            if let Some(f) = plan.downcast_ref::<datafusion::physical_plan::filter::FilterExec>() {
                return Some(f.predicate().clone());
            }
            plan.children().into_iter().find_map(filter_of)
        }
        self.fragments
            .first()
            .and_then(|(_, p)| filter_of(p))
            .map_or(1.0, |p| {
                super::selectivity::selectivity(&p, &self.info.column_stats)
            })
    }

    /// The aggregation the fragments end with (colocated or partial), if any.
    pub fn aggregate(&self) -> Option<&datafusion::physical_plan::aggregates::AggregateExec> {
        self.fragments.first().and_then(|(_, root)| {
            root.downcast_ref::<datafusion::physical_plan::aggregates::AggregateExec>()
        })
    }

    /// Distinct values of the table's column `name` (`ANALYZE TABLE`).
    pub fn column_ndv(&self, name: &str) -> Option<u64> {
        super::selectivity::column_stats(&self.info.column_stats, name).map(|s| s.ndv)
    }

    /// Estimated output: the tablets' rows, the share of them the fragment's
    /// filter keeps, and a width per row from the column types.
    pub fn estimate(&self, partition: Option<usize>) -> Statistics {
        let mut stats = Statistics::new_unknown(&self.schema);
        let Some(rows) = self.info.rows else {
            return stats;
        };
        let mut rows = rows as f64 * self.selectivity();
        // A fragment that aggregates (colocated) returns groups, not rows.
        if let Some(a) = self.aggregate() {
            rows = if a.group_expr().expr().is_empty() {
                1.0
            } else {
                rows * 0.1
            };
        }
        if partition.is_some() {
            rows /= self.properties.partitioning.partition_count().max(1) as f64;
        }
        let width: usize = self
            .schema
            .fields()
            .iter()
            .map(|f| f.data_type().primitive_width().unwrap_or(24))
            .sum();
        let rows = rows.ceil() as usize;
        stats.num_rows = Precision::Inexact(rows);
        stats.total_byte_size = Precision::Inexact(rows.saturating_mul(width.max(1)));
        stats
    }
}

/// A scan's properties: a partition per fragment partition (an empty scan
/// still has one), hash partitioned on `by_bucket` when dealt by bucket.
fn properties(
    schema: &SchemaRef,
    fragments: &[(BackendInfo, Arc<dyn ExecutionPlan>)],
    by_bucket: Option<&Vec<Arc<dyn PhysicalExpr>>>,
) -> Arc<PlanProperties> {
    let n: usize = fragments
        .iter()
        .map(|(_, p)| p.properties().partitioning.partition_count())
        .sum::<usize>()
        .max(1);
    Arc::new(PlanProperties::new(
        EquivalenceProperties::new(schema.clone()),
        match by_bucket {
            Some(keys) => Partitioning::Hash(keys.clone(), n),
            None => Partitioning::UnknownPartitioning(n),
        },
        EmissionType::Incremental,
        Boundedness::Bounded,
    ))
}

impl DisplayAs for BeFragmentExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "BeFragmentExec: table={}, partitions={}/{}, tablets={}/{}",
            self.info.table,
            self.info.partitions.len(),
            self.info.total_partitions,
            self.info.tablets,
            self.info.total_tablets
        )?;
        if !self.runtime_filters.is_empty() {
            write!(f, ", runtime_filters={}", self.runtime_filters.len())?;
        }
        if self.by_bucket.is_some() {
            write!(f, ", by_bucket")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for BeFragmentExec {
    // Visits the runtime filters: a join computes its dynamic filter only
    // when it finds a consumer of it under its probe side.
    tethys_common::leaf_exec_plan!("BeFragmentExec", |node| node.runtime_filters.iter());

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        Ok(Arc::new(self.estimate(partition)))
    }

    /// Accepts the dynamic filters of joins above (after the plan is
    /// otherwise optimized) as runtime filters. They stay unapplied on the
    /// FE side (`No`): the join itself still decides which rows match.
    fn handle_child_pushdown_result(
        &self,
        phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        _config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        let (mut out, dynamic) = tethys_common::plan::runtime_filters::offered_runtime_filters(
            phase,
            &child_pushdown_result,
            &self.runtime_filters,
        );
        if !dynamic.is_empty() {
            let node = self.with_runtime_filters(
                self.runtime_filters
                    .iter()
                    .cloned()
                    .chain(dynamic)
                    .collect(),
            );
            out = out.with_updated_node(Arc::new(node) as Arc<dyn ExecutionPlan>);
        }
        Ok(out)
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let mut k = partition;
        let mut target = None;
        for (be, plan) in &self.fragments {
            let n = plan.properties().partitioning.partition_count();
            if k < n {
                target = Some((be.clone(), plan.clone(), k));
                break;
            }
            k -= n;
        }
        let schema = self.schema.clone();
        let Some((be, plan, k)) = target else {
            // No tablet survived pruning.
            return Ok(Box::pin(RecordBatchStreamAdapter::new(
                schema,
                futures::stream::empty(),
            )));
        };
        let mut req = ExecFragmentRequest {
            query_id: self.stmt.query_id.clone(),
            plan: vec![],
            partition: k as u32,
            batch_size: self.stmt.batch_size as u32,
            time_zone: super::tz_offset_name(&self.stmt.time_zone),
            mem_limit: self.stmt.mem_limit as u64,
        };
        let client = self.backends.client(&be)?;
        let runtime_filters = self.runtime_filters.clone();
        let build_keys = self.build_keys.clone();
        let scan_schema = self.schema.clone();
        let applied = self.applied.clone();
        let max_in = self.stmt.runtime_filter_max_in;
        let wait = std::time::Duration::from_millis(self.stmt.runtime_filter_wait_ms);
        let profile = self.profile.clone();
        let stream = futures::stream::once(async move {
            // Polled first when the consumer wants rows, which for a join's
            // probe side is after its build side is complete: the runtime
            // filters hold their final value by now.
            let filter = applied
                .get_or_try_init(|| async {
                    runtime_filter::wait_complete(&runtime_filters, wait).await;
                    runtime_filter::current_filter(
                        &runtime_filters,
                        &build_keys,
                        &scan_schema,
                        max_in,
                    )
                })
                .await?;
            let plan = match filter {
                Some(f) => {
                    tracing::debug!(filter = %f, "runtime filter");
                    runtime_filter::inject(plan, f)?
                }
                None => plan,
            };
            req.plan = physical_plan_to_bytes_with_extension_codec(plan, &TethysCodec)?.to_vec();
            let s = client
                .execute_fragment(req, move |p| {
                    profile.lock().unwrap_or_else(|e| e.into_inner()).merge(&p)
                })
                .await?;
            let c2 = client.clone();
            Ok::<_, datafusion::error::DataFusionError>(s.map_err(move |e| {
                let err = match e {
                    arrow_flight::error::FlightError::Tonic(s) => c2.err(*s),
                    other => TethysError::Backend(other.to_string()),
                };
                datafusion::error::DataFusionError::from(err)
            }))
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            schema,
            stream.boxed(),
        )))
    }
}

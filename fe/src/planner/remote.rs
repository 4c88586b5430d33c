//! `BeFragmentExec`: the FE side of an exchange. It holds the fragment each
//! backend runs (per backend, the scan of that backend's tablets), sends it
//! as datafusion-proto bytes over Arrow Flight, and streams the batches back.
//! Output partition `i` is partition `k` of one backend's fragment.

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use datafusion_proto::bytes::physical_plan_to_bytes_with_extension_codec;
use futures::{StreamExt, TryStreamExt};
use tethys_common::TethysError;
use tethys_common::plan::TethysCodec;
use tethys_proto::ExecFragmentRequest;

use super::StatementCtx;
use crate::catalog::BackendInfo;
use crate::frontend::Frontend;

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
}

/// Fragments running on backends, seen as one DataFusion leaf.
#[derive(Debug)]
pub struct BeFragmentExec {
    fe: Arc<Frontend>,
    schema: SchemaRef,
    fragments: Vec<(BackendInfo, Arc<dyn ExecutionPlan>)>,
    pub info: FragmentInfo,
    stmt: Arc<StatementCtx>,
    properties: Arc<PlanProperties>,
}

impl BeFragmentExec {
    pub fn new(
        fe: Arc<Frontend>,
        schema: SchemaRef,
        fragments: Vec<(BackendInfo, Arc<dyn ExecutionPlan>)>,
        info: FragmentInfo,
        stmt: Arc<StatementCtx>,
    ) -> Self {
        let n: usize = fragments
            .iter()
            .map(|(_, p)| p.properties().partitioning.partition_count())
            .sum();
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            // An empty scan still has one (empty) partition.
            Partitioning::UnknownPartitioning(n.max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        BeFragmentExec {
            fe,
            schema,
            fragments,
            info,
            stmt,
            properties,
        }
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
        Ok(BeFragmentExec::new(
            self.fe.clone(),
            schema,
            fragments,
            self.info.clone(),
            self.stmt.clone(),
        ))
    }
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
        )
    }
}

impl ExecutionPlan for BeFragmentExec {
    fn name(&self) -> &str {
        "BeFragmentExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
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
        let bytes = physical_plan_to_bytes_with_extension_codec(plan, &TethysCodec)?;
        let req = ExecFragmentRequest {
            query_id: self.stmt.query_id.clone(),
            plan: bytes.to_vec(),
            partition: k as u32,
            batch_size: self.stmt.batch_size as u32,
            time_zone: super::tz_offset_name(&self.stmt.time_zone),
            mem_limit: self.stmt.mem_limit as u64,
        };
        let client = self.fe.pool.get(&be)?;
        let stream = futures::stream::once(async move {
            let s = client.execute_fragment(req).await?;
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

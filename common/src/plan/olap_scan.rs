//! `OlapScanExec`: the leaf of a fragment, naming the tablets (at a version)
//! and the columns to read. It is a description, not an executor: a backend
//! replaces it with its storage scan before running the fragment.

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use tethys_proto::OlapScanNodePb;

use crate::schema::TableSchema;

/// The scan of one Tethys table inside a fragment.
#[derive(Debug, Clone)]
pub struct OlapScanExec {
    node: OlapScanNodePb,
    table_schema: TableSchema,
    projected: SchemaRef,
    properties: Arc<PlanProperties>,
}

impl OlapScanExec {
    /// Builds the scan from its wire form.
    pub fn try_new(node: OlapScanNodePb) -> crate::Result<Self> {
        let pb_schema = node.schema.clone().unwrap_or_default();
        let table_schema = TableSchema::from_pb(&pb_schema)?;
        let full = table_schema.arrow_schema();
        let projection: Vec<usize> = node.projection.iter().map(|i| *i as usize).collect();
        if let Some(bad) = projection.iter().find(|i| **i >= full.fields().len()) {
            return Err(crate::TethysError::Corruption(format!(
                "scan of {}.{} projects column {bad} of {}",
                node.database,
                node.table,
                full.fields().len()
            )));
        }
        let projected = Arc::new(full.project(&projection)?);
        let partitions = node.partitions.max(1) as usize;
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(projected.clone()),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        Ok(OlapScanExec {
            node,
            table_schema,
            projected,
            properties,
        })
    }

    /// The same scan marked to answer the aggregate above it itself
    /// (`push_agg`: Doris' pushAggOp name, see [`super::pushable_agg`]).
    pub fn with_push_agg(&self, op: &str) -> Self {
        let mut s = self.clone();
        s.node.push_agg = op.to_string();
        s
    }

    /// The pushAggOp the FE marked this scan with (`None`: rows are read).
    pub fn push_agg(&self) -> Option<&str> {
        Some(self.node.push_agg.as_str()).filter(|s| !s.is_empty())
    }

    /// The wire form.
    pub fn node(&self) -> &OlapScanNodePb {
        &self.node
    }

    /// The full table schema.
    pub fn table_schema(&self) -> &TableSchema {
        &self.table_schema
    }

    /// Column indexes (into the table schema) this scan reads.
    pub fn projection(&self) -> Vec<usize> {
        self.node.projection.iter().map(|i| *i as usize).collect()
    }

    /// Number of parallel output partitions.
    pub fn partition_count(&self) -> usize {
        self.node.partitions.max(1) as usize
    }

    /// The tablets of output partition `i` (round-robin over the tablet list).
    pub fn tablets_of_partition(&self, i: usize) -> Vec<(i64, i64)> {
        let n = self.partition_count();
        self.node
            .tablets
            .iter()
            .enumerate()
            .filter(|(k, _)| k % n == i)
            .map(|(_, t)| (t.tablet_id, t.version))
            .collect()
    }
}

impl DisplayAs for OlapScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "OlapScanExec: table={}.{}, tablets={}, projection=[{}]",
            self.node.database,
            self.node.table,
            self.node.tablets.len(),
            self.projected
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

impl ExecutionPlan for OlapScanExec {
    crate::leaf_exec_plan!("OlapScanExec");

    fn schema(&self) -> SchemaRef {
        self.projected.clone()
    }

    fn execute(
        &self,
        _partition: usize,
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        Err(DataFusionError::Internal(
            "OlapScanExec is a fragment leaf and runs only on a backend".into(),
        ))
    }
}

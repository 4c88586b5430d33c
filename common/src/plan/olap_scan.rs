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

    /// The tablets of output partition `i`: round-robin over the tablet
    /// list, or (`by_bucket`) those whose bucket is `i` modulo the partition
    /// count, so two scans of colocated tables meet bucket by bucket.
    pub fn tablets_of_partition(&self, i: usize) -> Vec<(i64, i64)> {
        let n = self.partition_count();
        let by_bucket = self.node.by_bucket;
        self.node
            .tablets
            .iter()
            .enumerate()
            .filter(|(k, t)| {
                if by_bucket {
                    t.bucket as usize % n == i
                } else {
                    k % n == i
                }
            })
            .map(|(_, t)| (t.tablet_id, t.version))
            .collect()
    }
}

/// `plan` with `f` applied to the wire form of each of its scans, the
/// operators above a changed scan rebuilt (they take its new partition
/// count).
pub fn map_scans(
    plan: Arc<dyn ExecutionPlan>,
    f: impl Fn(&mut OlapScanNodePb),
) -> Result<Arc<dyn ExecutionPlan>> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    // Only what changes is rebuilt: a scan `f` leaves as it was keeps its
    // node and its parents theirs (each rebuilt parent computes its
    // properties again: a filter's statistics were more than half of the
    // FE's placing of SSB q1.2's scans on three backends, perf).
    let out = plan.transform_up(|p| {
        let Some(scan) = p.downcast_ref::<OlapScanExec>() else {
            return Ok(Transformed::no(p));
        };
        let mut node = scan.node().clone();
        f(&mut node);
        if &node == scan.node() {
            return Ok(Transformed::no(p));
        }
        let scan =
            OlapScanExec::try_new(node).map_err(|e| DataFusionError::External(Box::new(e)))?;
        Ok(Transformed::yes(Arc::new(scan) as Arc<dyn ExecutionPlan>))
    })?;
    Ok(out.data)
}

/// The tablets the scans of `plan` read.
pub fn scan_tablets(plan: &Arc<dyn ExecutionPlan>) -> Vec<tethys_proto::TabletVersion> {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    let mut out = vec![];
    let _ = plan.apply(|p| {
        if let Some(scan) = p.downcast_ref::<OlapScanExec>() {
            out.extend(scan.node().tablets.iter().cloned());
        }
        Ok(TreeNodeRecursion::Continue)
    });
    out
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

#[cfg(test)]
mod tests {
    use super::*;
    use tethys_proto::TabletVersion;

    fn scan(by_bucket: bool) -> OlapScanExec {
        // Two range partitions of four buckets, on one backend.
        let tablets = (0..8)
            .map(|i| TabletVersion {
                tablet_id: 100 + i,
                version: 2,
                bucket: (i % 4) as u32,
            })
            .collect();
        OlapScanExec::try_new(OlapScanNodePb {
            tablets,
            partitions: 3,
            by_bucket,
            ..Default::default()
        })
        .unwrap()
    }

    fn ids(s: &OlapScanExec, i: usize) -> Vec<i64> {
        s.tablets_of_partition(i).iter().map(|t| t.0).collect()
    }

    #[test]
    fn tablets_are_dealt_round_robin_or_by_bucket() {
        let rr = scan(false);
        assert_eq!(ids(&rr, 0), vec![100, 103, 106]);
        assert_eq!(ids(&rr, 1), vec![101, 104, 107]);
        // By bucket: a bucket's tablets of every partition in one output
        // partition, bucket b in partition b % 3.
        let bb = scan(true);
        assert_eq!(ids(&bb, 0), vec![100, 103, 104, 107]);
        assert_eq!(ids(&bb, 1), vec![101, 105]);
        assert_eq!(ids(&bb, 2), vec![102, 106]);
    }
}

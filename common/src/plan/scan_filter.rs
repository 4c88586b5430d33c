//! A filter directly over a scan, as a task's plan carries it to a backend.
//!
//! ```sql
//! -- SSB q1.2: lineorder's scan filtered on two columns
//! ... WHERE lo_discount BETWEEN 4 AND 6 AND lo_quantity BETWEEN 26 AND 35
//! ```
//!
//! Every node a backend decodes computes its properties; a `FilterExec`
//! analyses its predicate against its input's statistics (interval
//! arithmetic over the conjuncts) to find the columns it makes constant: a
//! quarter of what a backend spent decoding SSB q1.2's tasks (perf, three
//! BEs), for a node the worker then folds into the scan it filters
//! (`be/src/exec/bind.rs`), since the scan prunes pages with the predicate
//! and evaluates it. The FE sends such a filter as this node instead, whose
//! properties are its scan's (no analysis); run anywhere it filters as
//! `FilterExec` does.

use std::sync::Arc;

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};

use super::OlapScanExec;

/// `predicate` over `input`, a scan ([`OlapScanExec`]).
#[derive(Debug)]
pub struct ScanFilterExec {
    input: Arc<dyn ExecutionPlan>,
    predicate: Arc<dyn PhysicalExpr>,
}

impl ScanFilterExec {
    /// `predicate` over the scan `input` (an error for another input).
    pub fn try_new(
        input: Arc<dyn ExecutionPlan>,
        predicate: Arc<dyn PhysicalExpr>,
    ) -> Result<Self> {
        if !input.is::<OlapScanExec>() {
            return Err(DataFusionError::Internal(format!(
                "a scan filter over {}, not a scan",
                input.name()
            )));
        }
        Ok(ScanFilterExec { input, predicate })
    }

    /// `filter` as this node, when it filters a scan without projecting.
    pub fn of(filter: &FilterExec) -> Option<Self> {
        if filter.projection().is_some() {
            return None;
        }
        Self::try_new(filter.input().clone(), filter.predicate().clone()).ok()
    }

    pub fn predicate(&self) -> &Arc<dyn PhysicalExpr> {
        &self.predicate
    }

    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }
}

impl DisplayAs for ScanFilterExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "ScanFilterExec: {}", self.predicate)
    }
}

impl ExecutionPlan for ScanFilterExec {
    fn name(&self) -> &str {
        "ScanFilterExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        f(&self.predicate)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        match (children.pop(), children.is_empty()) {
            (Some(input), true) => Ok(Arc::new(Self::try_new(input, self.predicate.clone())?)),
            _ => Err(DataFusionError::Internal(
                "a scan filter has one input".into(),
            )),
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        FilterExec::try_new(self.predicate.clone(), self.input.clone())?.execute(partition, context)
    }
}

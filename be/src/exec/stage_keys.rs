//! The build keys of a stage's joins, for the scans of the stage they
//! filter:
//!
//! ```sql
//! SELECT sum(lo_revenue), d_year, p_brand FROM lineorder, dates, part, supplier
//! WHERE lo_orderdate = d_datekey AND lo_partkey = p_partkey
//!   AND lo_suppkey = s_suppkey AND p_brand = 'MFGR#2239' AND s_region = 'EUROPE'
//! GROUP BY d_year, p_brand;
//! ```
//!
//! SSB q2.3 on three BEs: `part` is broadcast, its join and the lineorder
//! scan are one stage, and the join's dynamic filter looked each of the
//! scan's 6 M rows up in the join's hash table: a third of the backends'
//! CPU, 145 ms of it per query against 66 ms on one BE, where the FE tests
//! the keys collected from the build side (a bitmap of 195 part keys). Here
//! a stage's scans do the same: each join whose filter a scan of the stage
//! holds collects its build keys on their way in, and the scan tests those
//! (`runtime_filter.rs::with_filters`).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::execution_plan::replace_children_if_necessary;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use tethys_common::plan::FragmentRootExec;
use tethys_common::plan::build_keys::{BuildKeys, BuildKeysExec, join_collectors, join_filter_ids};

use super::scan::TabletScanExec;

/// `plan` (a stage as a worker received it, its filters pushed down) with
/// the build keys of each join whose filter a scan of the stage holds
/// collected on their way into the join and given to those scans.
pub fn collect_build_keys(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    let keys = join_collectors(&plan, |_| true)?;
    if keys.is_empty() {
        return Ok(plan);
    }
    // Bottom-up: a join's probe-side scans come before the join.
    let mut held = HashSet::new();
    Ok(plan
        .transform_up(|p| {
            if let Some(scan) = p.downcast_ref::<TabletScanExec>() {
                let mine: HashMap<u64, Arc<BuildKeys>> = scan
                    .runtime_filter_ids()
                    .filter_map(|id| Some((id, keys.get(&id)?.clone())))
                    .collect();
                if mine.is_empty() {
                    return Ok(Transformed::no(p));
                }
                held.extend(mine.keys().copied());
                return Ok(Transformed::yes(Arc::new(scan.with_build_keys(mine))));
            }
            let Some(j) = p.downcast_ref::<HashJoinExec>() else {
                return Ok(Transformed::no(p));
            };
            let Some(k) = join_filter_ids(j)
                .into_iter()
                .filter(|id| held.contains(id))
                .find_map(|id| keys.get(&id))
            else {
                return Ok(Transformed::no(p));
            };
            let build = collecting(j.left().clone(), k.clone());
            let probe = j.right().clone();
            Ok(Transformed::yes(replace_children_if_necessary(
                p,
                vec![build, probe],
            )?))
        })?
        .data)
}

/// `build` collecting its keys into `keys`, its nodes one to one with the
/// coordinator's (a profiled task's counters are matched to the
/// coordinator's plan node by node): inside a fragment's marker, whose
/// nodes fold into one; over an exchange reader, which folds with it
/// (`service/worker.rs`); elsewhere in the place of the build side's root.
fn collecting(build: Arc<dyn ExecutionPlan>, keys: Arc<BuildKeys>) -> Arc<dyn ExecutionPlan> {
    if let Some(root) = build.downcast_ref::<FragmentRootExec>() {
        let inner = Arc::new(BuildKeysExec::new(root.input().clone(), keys));
        return Arc::new(FragmentRootExec::new(inner));
    }
    if build.children().is_empty() {
        return Arc::new(BuildKeysExec::new(build, keys));
    }
    Arc::new(CollectingRootExec::new(build, keys))
}

/// A build side's root that collects the join's keys from what it
/// produces: it shows the root's children, properties and counters, so the
/// plan keeps its shape.
#[derive(Debug)]
pub struct CollectingRootExec {
    root: Arc<dyn ExecutionPlan>,
    keys: Arc<BuildKeys>,
    /// The root under a collector: what runs.
    collect: Arc<BuildKeysExec>,
}

impl CollectingRootExec {
    fn new(root: Arc<dyn ExecutionPlan>, keys: Arc<BuildKeys>) -> Self {
        let collect = Arc::new(BuildKeysExec::new(root.clone(), keys.clone()));
        CollectingRootExec {
            root,
            keys,
            collect,
        }
    }

    /// The node it stands for.
    pub fn root(&self) -> &Arc<dyn ExecutionPlan> {
        &self.root
    }
}

impl DisplayAs for CollectingRootExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        self.root.fmt_as(t, f)?;
        write!(f, ", collecting its join's keys")
    }
}

impl ExecutionPlan for CollectingRootExec {
    fn name(&self) -> &str {
        self.root.name()
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.root.properties()
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        self.root.apply_expressions(f)
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        self.root.children()
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        self.root.maintains_input_order()
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        self.root.benefits_from_input_partitioning()
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let root = replace_children_if_necessary(self.root.clone(), children)?;
        Ok(Arc::new(CollectingRootExec::new(root, self.keys.clone())))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        self.collect.execute(partition, context)
    }

    fn metrics(&self) -> Option<MetricsSet> {
        self.root.metrics()
    }
}

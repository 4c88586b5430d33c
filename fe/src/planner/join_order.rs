//! Build-side choice for hash joins: the input expected to be smaller is put
//! on the build (left) side, before DataFusion's `JoinSelection` decides
//! between broadcast (collect) and partitioned joins.
//!
//! Without column statistics DataFusion estimates an inner join to return
//! as many rows as its smaller input, so after `lineorder ⋈ dates` it would
//! build the next hash table on the fact side. Analytical joins are mostly
//! fact-to-dimension (foreign key to primary key), whose output is about as
//! large as the bigger input; this rule estimates with that assumption, so
//! dimensions end up on the build side and their runtime filters on the
//! fact table's scan.

use std::sync::Arc;

use datafusion::common::JoinType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::HashJoinExec;

use super::remote::BeFragmentExec;

/// Rows assumed for an input nothing is known about.
const UNKNOWN_ROWS: f64 = 1e6;
/// Share of rows a filter keeps (DataFusion's default selectivity).
const FILTER_SELECTIVITY: f64 = 0.2;
/// Share of input rows a grouped aggregation returns.
const GROUPS_PER_ROW: f64 = 0.1;

/// Swaps hash join inputs so the smaller estimated side is built.
#[derive(Debug, Default)]
pub struct BuildSmallerSide;

impl PhysicalOptimizerRule for BuildSmallerSide {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(plan
            .transform_up(|p| {
                let Some(j) = p.downcast_ref::<HashJoinExec>() else {
                    return Ok(Transformed::no(p));
                };
                if !j.join_type().supports_swap()
                    || j.null_aware
                    || estimate_rows(j.left()) <= estimate_rows(j.right())
                {
                    return Ok(Transformed::no(p));
                }
                Ok(Transformed::yes(j.swap_inputs(*j.partition_mode())?))
            })?
            .data)
    }

    fn name(&self) -> &str {
        "tethys_build_smaller_side"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Estimated output rows of `plan`.
pub fn estimate_rows(plan: &Arc<dyn ExecutionPlan>) -> f64 {
    if let Some(be) = plan.downcast_ref::<BeFragmentExec>() {
        return be
            .estimate(None)
            .num_rows
            .get_value()
            .map_or(UNKNOWN_ROWS, |n| *n as f64);
    }
    let children = plan.children();
    let child = |i: usize| children.get(i).map_or(UNKNOWN_ROWS, |c| estimate_rows(c));
    if let Some(j) = plan.downcast_ref::<HashJoinExec>() {
        let (l, r) = (child(0), child(1));
        return match j.join_type() {
            JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark => l,
            JoinType::RightSemi | JoinType::RightAnti | JoinType::RightMark => r,
            JoinType::Full => l + r,
            JoinType::Inner | JoinType::Left | JoinType::Right => l.max(r),
        };
    }
    if plan.downcast_ref::<FilterExec>().is_some() {
        return child(0) * FILTER_SELECTIVITY;
    }
    if let Some(a) = plan.downcast_ref::<AggregateExec>() {
        return if a.group_expr().expr().is_empty() {
            1.0
        } else if matches!(
            a.mode(),
            AggregateMode::Partial | AggregateMode::Single | AggregateMode::SinglePartitioned
        ) {
            child(0) * GROUPS_PER_ROW
        } else {
            // Merging partial states: as many groups as the partial phase.
            child(0)
        };
    }
    if plan.name() == "UnionExec" {
        return children.iter().map(|c| estimate_rows(c)).sum();
    }
    if plan.name().contains("NestedLoopJoin") || plan.name() == "CrossJoinExec" {
        return child(0) * child(1);
    }
    if children.is_empty() {
        return match plan.name() {
            "PlaceholderRowExec" | "EmptyExec" => 1.0,
            _ => UNKNOWN_ROWS,
        };
    }
    // Projections, repartitions, sorts, limits, ...: as many as the input.
    child(0)
}

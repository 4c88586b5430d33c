//! Doris' join hints applied to the physical plan:
//!
//! ```sql
//! SELECT count(*) FROM lineitem JOIN [shuffle] supplier ON l_suppkey = s_suppkey;
//! --   join op: INNER JOIN(PARTITIONED)[]   (supplier alone would be broadcast)
//! ```
//!
//! A hint names the table after `JOIN [hint]` (`sql::join_hints`). After
//! `JoinSelection` and the broadcast row limit have chosen, the hash join
//! one of whose inputs is that table's scan (under projections and
//! filters) takes the hint: `[broadcast]` makes the table the collected
//! build side, swapping the inputs if it was the probe side; `[shuffle]`
//! partitions the join, both sides then hashed on the keys. A hint that
//! finds no such join (the table joined through a subquery or a nested loop)
//! fails the query naming it, rather than being ignored.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::projection::ProjectionExec;

use super::remote::BeFragmentExec;
use crate::sql::join_hints::{Distribution, JoinHint};

/// The rule; placed after `join_order::BroadcastRowLimit`.
#[derive(Debug)]
pub struct JoinHints(pub Vec<JoinHint>);

impl PhysicalOptimizerRule for JoinHints {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if self.0.is_empty() {
            return Ok(plan);
        }
        let mut used = vec![false; self.0.len()];
        let out = plan.transform_up(|p| {
            let Some(j) = p.downcast_ref::<HashJoinExec>() else {
                return Ok(Transformed::no(p));
            };
            for (hint, used) in self.0.iter().zip(used.iter_mut()) {
                if *used {
                    continue;
                }
                let on_left = scans(j.left(), &hint.table);
                if !on_left && !scans(j.right(), &hint.table) {
                    continue;
                }
                *used = true;
                return Ok(Transformed::yes(apply(j, hint, on_left)?));
            }
            Ok(Transformed::no(p))
        })?;
        if let Some((hint, _)) = self.0.iter().zip(&used).find(|(_, u)| !**u) {
            return Err(DataFusionError::Plan(format!(
                "join hint [{}] on table `{}` does not apply: no hash join reads that table \
                 directly (a subquery, or a join without equality conditions)",
                hint.distribution.name(),
                hint.table
            )));
        }
        Ok(out.data)
    }

    fn name(&self) -> &str {
        "tethys_join_hints"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Join `j` distributed as `hint` says; the hinted table is its left
/// (build) input when `on_left`.
fn apply(j: &HashJoinExec, hint: &JoinHint, on_left: bool) -> Result<Arc<dyn ExecutionPlan>> {
    match hint.distribution {
        Distribution::Broadcast if on_left => j
            .builder()
            .with_partition_mode(PartitionMode::CollectLeft)
            .build_exec(),
        Distribution::Broadcast => {
            if j.null_aware || !j.join_type().supports_swap() {
                return Err(DataFusionError::Plan(format!(
                    "join hint [broadcast] on table `{}`: this {} join cannot build from it",
                    hint.table,
                    j.join_type()
                )));
            }
            j.swap_inputs(PartitionMode::CollectLeft)
        }
        Distribution::Shuffle => {
            if j.null_aware {
                return Err(DataFusionError::Plan(format!(
                    "join hint [shuffle] on table `{}`: a NOT IN join runs broadcast only",
                    hint.table
                )));
            }
            j.builder()
                .with_partition_mode(PartitionMode::Partitioned)
                .build_exec()
        }
    }
}

/// Whether `p` is a scan of `table` under projections and filters.
fn scans(p: &Arc<dyn ExecutionPlan>, table: &str) -> bool {
    if let Some(s) = p.downcast_ref::<BeFragmentExec>() {
        return s.info.table_name.eq_ignore_ascii_case(table);
    }
    if p.is::<ProjectionExec>() || p.is::<FilterExec>() || p.name() == "CoalesceBatchesExec" {
        return scans(p.children()[0], table);
    }
    false
}

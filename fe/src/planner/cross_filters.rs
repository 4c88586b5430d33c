//! Runtime filters across the stages of a distributed plan:
//!
//! ```sql
//! SELECT sum(l_extendedprice) / 7.0 FROM lineitem JOIN part ON p_partkey = l_partkey
//!     WHERE p_brand = 'Brand#23' AND p_container = 'MED BOX'
//!       AND l_quantity < (SELECT 0.2 * avg(l_quantity) FROM lineitem
//!                         WHERE l_partkey = p_partkey);   -- TPC-H q17
//! ```
//!
//! DataFusion pushes each join's filter down its probe side to the scans,
//! through aggregates on the key and exchanges alike, and the FE's rules
//! keep those worth applying (`runtime_filter.rs`). Cut into stages, a scan
//! may sit in another stage than its join: here the second lineitem scan,
//! two exchanges below the partitioned join with the few parts. For each
//! such pair the join's build side gets a `BuildKeysExec` publishing to the
//! FE's merge node (every build partition sends its keys), and the scan's
//! fragment names the filter (`OlapScanNodePb::remote_filters`), which the
//! backend fetches when the scan starts
//! (`tethys_common::plan::cross_filters`). A join and a scan in one stage
//! meet on the backend, which plans their filter again
//! (`be/src/service/worker.rs`), except a colocate or bucket shuffle join's:
//! its inputs are dealt by bucket, not by DataFusion's hash, so the backend
//! plans none; its filter goes through the task's own merge node instead
//! (`in_task`: the task's build partitions are every key its scans' rows
//! can meet), or the FE's when a scan it filters is in another stage. Key
//! collectors shared with scans in the FE's process stay in the FE's own
//! stage only: they have no wire form.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::Result;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};
use datafusion_distributed::{DistributedLeafExec, NetworkBoundaryExt, Stage};
use tethys_common::plan::OlapScanExec;
use tethys_common::plan::build_keys::{BuildKeysExec, KeysTo};
use tethys_common::plan::cross_filters::{NO_COLUMN, Publish};
use tethys_proto::RemoteRuntimeFilterPb;

use super::remote::BeFragmentExec;

/// Where each join's filter is built and which stages' scans hold it.
#[derive(Default)]
struct Survey {
    /// Filter id -> its join, for joins whose build partitions can be
    /// counted.
    joins: HashMap<u64, JoinFilter>,
    /// (stage, filter id) of each scan on the backends holding a filter.
    scans: Vec<(usize, u64)>,
    /// Filters of colocate and bucket shuffle joins in backends' stages.
    by_bucket: HashSet<u64>,
    stages: usize,
}

impl Survey {
    fn walk(&mut self, plan: &Arc<dyn ExecutionPlan>, stage: usize, tasks: usize) {
        if let Some(nb) = plan.as_network_boundary() {
            if let Stage::Local(s) = nb.input_stage() {
                self.stages += 1;
                let below = self.stages;
                self.walk(&s.plan, below, s.tasks);
            }
            return;
        }
        if let Some(j) = plan.downcast_ref::<HashJoinExec>()
            && let Some(parts) = build_parts(j, tasks)
            && let Some(per_task) = build_parts(j, 1)
        {
            let by_bucket = stage > 0
                && (super::colocate::is_colocated(j)
                    || super::bucket_shuffle::is_bucket_shuffle(j));
            let join = JoinFilter {
                stage,
                parts,
                per_task,
                tasks: u32::try_from(tasks.max(1)).unwrap_or(u32::MAX),
            };
            for id in j
                .dynamic_expressions_produced()
                .iter()
                .filter_map(|d| d.expression_id())
            {
                self.joins.insert(id, join);
                if by_bucket {
                    self.by_bucket.insert(id);
                }
            }
        }
        if let Some(leaf) = plan.downcast_ref::<DistributedLeafExec>()
            && let Some(be) = leaf.original().downcast_ref::<BeFragmentExec>()
        {
            self.scans.extend(
                be.runtime_filters()
                    .iter()
                    .filter_map(|f| f.expression_id())
                    .map(|id| (stage, id)),
            );
        }
        for c in plan.children() {
            self.walk(c, stage, tasks);
        }
    }

    /// Filters whose join and some scan are in different stages (or in one
    /// stage of a colocate or bucket shuffle join), with how they are
    /// merged.
    fn crossing(&self) -> HashMap<u64, Crossing> {
        let mut out: HashMap<u64, Crossing> = HashMap::new();
        for (stage, id) in &self.scans {
            let Some(j) = self.joins.get(id) else {
                continue;
            };
            let by_bucket = self.by_bucket.contains(id);
            if j.stage == *stage && !by_bucket {
                continue;
            }
            // Within the task only while every scan it filters is there.
            let in_task = by_bucket && j.stage == *stage && out.get(id).is_none_or(|c| c.in_task);
            let crossing = match in_task {
                true => Crossing {
                    parts: j.per_task,
                    in_task,
                    key_share: j.tasks,
                },
                false => Crossing {
                    parts: j.parts,
                    in_task,
                    key_share: 1,
                },
            };
            out.insert(*id, crossing);
        }
        out
    }
}

/// A join producing a filter: its stage, the parts its build side
/// publishes (every partition of every task), those of one task, and the
/// stage's tasks.
#[derive(Debug, Clone, Copy)]
struct JoinFilter {
    stage: usize,
    parts: u32,
    per_task: u32,
    tasks: u32,
}

/// How a filter crossing to scans is merged: the parts its build side
/// publishes, whether in each task (its scans all in the join's task), and
/// how many tasks then share the join's keys.
#[derive(Debug, Clone, Copy)]
struct Crossing {
    parts: u32,
    in_task: bool,
    key_share: u32,
}

/// The build partitions that publish a join's keys in a stage of `tasks`
/// tasks: each partition of each task for a partitioned join (their keys
/// are disjoint); one for a broadcast join (every task builds all keys);
/// `None` when the count cannot be known.
fn build_parts(j: &HashJoinExec, tasks: usize) -> Option<u32> {
    let partitions = j.left().output_partitioning().partition_count();
    match j.partition_mode() {
        PartitionMode::Partitioned => u32::try_from(tasks.max(1) * partitions).ok(),
        PartitionMode::CollectLeft if partitions == 1 => Some(1),
        _ => None,
    }
}

/// `plan` (distributed) with the filters of joins feeding scans of other
/// stages sent through the merge node, and the FE-only key collectors
/// taken out of the stages that go to backends.
pub fn link(plan: Arc<dyn ExecutionPlan>, max_in: usize) -> Result<Arc<dyn ExecutionPlan>> {
    let mut survey = Survey::default();
    survey.walk(&plan, 0, 1);
    let crossing = survey.crossing();
    rewrite(plan, true, &crossing, max_in as u32)
}

fn rewrite(
    plan: Arc<dyn ExecutionPlan>,
    head: bool,
    crossing: &HashMap<u64, Crossing>,
    max_in: u32,
) -> Result<Arc<dyn ExecutionPlan>> {
    Ok(plan
        .transform_down(|p| {
            let mut p = p;
            let mut changed = false;
            if !head {
                while p
                    .downcast_ref::<BuildKeysExec>()
                    .is_some_and(|b| matches!(b.to(), KeysTo::Shared(_)))
                    && let Some(input) = p.children().first().map(|c| (*c).clone())
                {
                    p = input;
                    changed = true;
                }
            }
            if p.is_network_boundary() {
                let below: Vec<Arc<dyn ExecutionPlan>> =
                    p.children().into_iter().cloned().collect();
                let Ok([stage]) = <[_; 1]>::try_from(below) else {
                    return Ok(Transformed::new(p, changed, TreeNodeRecursion::Jump));
                };
                let stage = rewrite(stage, false, crossing, max_in)?;
                #[allow(deprecated)]
                let p = p.with_new_children(vec![stage])?;
                return Ok(Transformed::new(p, true, TreeNodeRecursion::Jump));
            }
            if let Some(j) = p.downcast_ref::<HashJoinExec>()
                && let Some((id, parts)) = j
                    .dynamic_expressions_produced()
                    .iter()
                    .filter_map(|d| d.expression_id())
                    .find_map(|id| Some((id, *crossing.get(&id)?)))
            {
                let publish = Publish {
                    filter_id: id,
                    keys: j.on().iter().map(|(l, _)| l.clone()).collect(),
                    expected_parts: parts.parts,
                    max_in,
                    in_task: parts.in_task,
                    key_share: parts.key_share,
                };
                let sink = BuildKeysExec::publishing(j.left().clone(), publish);
                let probe = j.right().clone();
                #[allow(deprecated)]
                let p = p.clone().with_new_children(vec![Arc::new(sink), probe])?;
                return Ok(Transformed::yes(p));
            }
            if let Some(leaf) = p.downcast_ref::<DistributedLeafExec>()
                && let Some(be) = leaf.original().downcast_ref::<BeFragmentExec>()
            {
                let filters: Vec<(&Arc<dyn PhysicalExpr>, bool)> = be
                    .runtime_filters()
                    .iter()
                    .filter_map(|f| Some((f, crossing.get(&f.expression_id()?)?.in_task)))
                    .collect();
                if filters.is_empty() {
                    return Ok(Transformed::new(p, changed, TreeNodeRecursion::Jump));
                }
                let variants = leaf
                    .variants()
                    .iter()
                    .map(|v| with_remote_filters(v, &filters))
                    .collect::<Result<Vec<_>>>()?;
                let leaf = DistributedLeafExec::try_new(leaf.original().clone(), variants)?;
                return Ok(Transformed::new(
                    Arc::new(leaf) as Arc<dyn ExecutionPlan>,
                    true,
                    TreeNodeRecursion::Jump,
                ));
            }
            Ok(Transformed::new(p, changed, TreeNodeRecursion::Continue))
        })?
        .data)
}

/// `variant` (a backend's fragment) with its scan naming `filters` (over
/// the fragment's output, which the FE's scan node had; each with whether
/// it is merged in the task) on the scan's own columns: a key that is not
/// the same column of the scan is not tested.
fn with_remote_filters(
    variant: &Arc<dyn ExecutionPlan>,
    filters: &[(&Arc<dyn PhysicalExpr>, bool)],
) -> Result<Arc<dyn ExecutionPlan>> {
    Ok(variant
        .clone()
        .transform_up(|p| {
            let Some(scan) = p.downcast_ref::<OlapScanExec>() else {
                return Ok(Transformed::no(p));
            };
            let schema = scan.schema();
            let mut node = scan.node().clone();
            let have: HashSet<u64> = node.remote_filters.iter().map(|f| f.filter_id).collect();
            for (f, in_task) in filters {
                let Some(id) = f.expression_id().filter(|id| !have.contains(id)) else {
                    continue;
                };
                let probe_columns: Vec<u32> = f
                    .children()
                    .into_iter()
                    .map(|c| {
                        c.downcast_ref::<Column>()
                            .filter(|c| {
                                schema
                                    .fields()
                                    .get(c.index())
                                    .is_some_and(|f| f.name() == c.name())
                            })
                            .and_then(|c| u32::try_from(c.index()).ok())
                            .unwrap_or(NO_COLUMN)
                    })
                    .collect();
                if probe_columns.iter().all(|c| *c == NO_COLUMN) {
                    continue;
                }
                node.remote_filters.push(RemoteRuntimeFilterPb {
                    filter_id: id,
                    probe_columns,
                    in_task: *in_task,
                });
            }
            let scan = OlapScanExec::try_new(node)
                .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
            Ok(Transformed::yes(Arc::new(scan) as Arc<dyn ExecutionPlan>))
        })?
        .data)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Filter 1: a partitioned join in stage 1 (3 tasks x 4 partitions)
    /// filtering a scan of stage 2. Filter 2: a bucket shuffle join in
    /// stage 1 filtering its own stage's scan. Filter 3: a bucket shuffle
    /// join whose filter also reaches a scan of another stage. Filter 4: a
    /// broadcast join's, in its scan's stage (the backend plans it).
    #[test]
    fn a_bucket_dealt_join_merges_its_filter_in_the_task_while_its_scans_are_there() {
        let mut s = Survey::default();
        let join = |parts, per_task| JoinFilter {
            stage: 1,
            parts,
            per_task,
            tasks: 3,
        };
        for id in 1..=3 {
            s.joins.insert(id, join(12, 4));
        }
        s.joins.insert(4, join(1, 1));
        s.by_bucket.extend([2, 3]);
        s.scans = vec![(2, 1), (1, 2), (1, 3), (2, 3), (1, 4)];
        let c = s.crossing();
        assert_eq!(c.len(), 3, "{c:?}");
        assert!(!c[&1].in_task && c[&1].parts == 12);
        assert!(c[&2].in_task && c[&2].parts == 4, "the task's 4 partitions");
        assert_eq!(c[&2].key_share, 3);
        assert!(!c[&3].in_task && c[&3].parts == 12);
        // Whichever scan is met first.
        s.scans = vec![(2, 3), (1, 3)];
        assert!(!s.crossing()[&3].in_task);
    }
}

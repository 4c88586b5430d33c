//! Colocate joins: two tables of one stable colocation group joined on
//! their distribution columns meet bucket by bucket, so nothing moves.
//!
//! ```sql
//! -- orders and lineitem: "colocate_with" = "tpch", HASH(orderkey) BUCKETS 8
//! SELECT o_orderpriority, count(*) FROM orders JOIN lineitem
//!     ON l_orderkey = o_orderkey GROUP BY o_orderpriority;
//! --   join op: INNER JOIN(COLOCATE)[]      HAS_COLO_PLAN_NODE: true
//! ```
//!
//! After `EnsureRequirements` (DataFusion's distribution pass), a hash join whose two inputs are (through
//! projections and filters) scans of one group, keyed so that distribution
//! column `j` of one side equals distribution column `j` of the other, loses
//! the exchanges below it: both scans deal their tablets to output
//! partitions by bucket (`OlapScanNodePb::by_bucket`), in as many partitions
//! on each backend, read each bucket on the same backend (`table.rs`), and
//! declare that as hash partitioning on the distribution columns.
//!
//! That partitioning is not DataFusion's hash, so nothing above may combine
//! it with an input DataFusion hashed: the join is made colocated only where
//! no operator above it relies on its output partitioning before an
//! exchange re-partitions it (`safe` in [`rewrite`]). A broadcast join of two
//! such scans becomes colocated too (Doris prefers colocate to broadcast):
//! its output partitioning was the probe scan's, which nothing relied on.
//!
//! The join's runtime filter: DataFusion routes a partitioned join's filter
//! by its own hash (`CASE hash(k) % n WHEN i THEN <partition i's keys>`),
//! which is wrong for rows dealt by bucket. The FE's scans never apply that
//! routing (`runtime_filter::current_filter` tests all the build keys), and
//! on a backend DataFusion gives a partitioned join no filter when its
//! inputs do not declare hash partitioning, as the stage's bound scans do
//! not: a colocated join in a distributed plan sends its filter through
//! the FE's merge node, all its build keys, to the probe scan of its own
//! stage (`cross_filters.rs`).

use std::sync::Arc;

use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::limit::{GlobalLimitExec, LocalLimitExec};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;

use datafusion_distributed::DistributedLeafExec;

use super::remote::BeFragmentExec;

/// The rule; placed right after `EnsureRequirements`. Joins reading a
/// table of `hinted` (a join hint's) keep the distribution it chose.
#[derive(Debug)]
pub struct ColocateJoins {
    pub hinted: Vec<String>,
}

impl PhysicalOptimizerRule for ColocateJoins {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        // The result's partitions are merged: nothing relies on them.
        let n = config.execution.target_partitions.max(1);
        rewrite(plan, true, &|j, safe| colocated(j, safe, n, &self.hinted))
    }

    fn name(&self) -> &str {
        "tethys_colocate_joins"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// [`colocated`] of a join, given whether nothing above relies on its
/// output partitioning.
pub(super) type Colocate<'a> =
    dyn Fn(&HashJoinExec, bool) -> Result<Option<Arc<dyn ExecutionPlan>>> + 'a;

/// `plan` with its eligible joins colocated; `safe`: nothing above `plan`
/// relies on its output partitioning.
pub(super) fn rewrite(
    plan: Arc<dyn ExecutionPlan>,
    safe: bool,
    colocate: &Colocate<'_>,
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(j) = plan.downcast_ref::<HashJoinExec>()
        && let Some(new) = colocate(j, safe)?
    {
        return Ok(new);
    }
    let children_safe = children_safety(&plan, safe);
    #[allow(deprecated)]
    let children: Vec<Arc<dyn ExecutionPlan>> = plan.children().into_iter().cloned().collect();
    if children.is_empty() {
        return Ok(plan);
    }
    let mut changed = false;
    let mut out = Vec::with_capacity(children.len());
    for (c, s) in children.into_iter().zip(children_safe) {
        let new = rewrite(c.clone(), s, colocate)?;
        changed |= !Arc::ptr_eq(&new, &c);
        out.push(new);
    }
    if changed {
        #[allow(deprecated)]
        plan.with_new_children(out)
    } else {
        Ok(plan)
    }
}

/// For each child of `plan`: whether nothing relies on its partitioning.
fn children_safety(plan: &Arc<dyn ExecutionPlan>, safe: bool) -> Vec<bool> {
    let n = plan.children().len();
    // Exchanges and merges re-partition what they read.
    if plan.is::<RepartitionExec>()
        || plan.is::<CoalescePartitionsExec>()
        || plan.is::<SortPreservingMergeExec>()
        || plan.name() == "AnalyzeExec"
    {
        return vec![true; n];
    }
    if let Some(j) = plan.downcast_ref::<HashJoinExec>() {
        return match j.partition_mode() {
            // The build side is collected; the output is partitioned as the
            // probe side.
            PartitionMode::CollectLeft => vec![true, safe],
            // Both sides are hashed alike (DataFusion's hash).
            _ => vec![false, false],
        };
    }
    // Single-input operators pass their input's partitioning up (or only
    // group within a partition by keys it already keeps together).
    if plan.is::<ProjectionExec>()
        || plan.is::<FilterExec>()
        || plan.is::<AggregateExec>()
        || plan.is::<SortExec>()
        || plan.is::<LocalLimitExec>()
        || plan.is::<GlobalLimitExec>()
        || plan.name() == "CoalesceBatchesExec"
        || plan.name() == "OutputRequirementExec"
        || plan.name().ends_with("WindowAggExec")
    {
        return vec![safe; n];
    }
    // Anything else may combine its inputs' partitions.
    vec![false; n]
}

/// The colocated form of join `j` (dealt in `n` partitions per backend),
/// when it qualifies and reads no table of `hinted`.
fn colocated(
    j: &HashJoinExec,
    safe: bool,
    n: usize,
    hinted: &[String],
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let mode = *j.partition_mode();
    let qualifies = match mode {
        PartitionMode::Partitioned => safe,
        PartitionMode::CollectLeft => !j.null_aware,
        PartitionMode::Auto => false,
    };
    if !qualifies {
        return Ok(None);
    }
    let (Some(left), Some(right)) = (ScanPath::of(j.left()), ScanPath::of(j.right())) else {
        return Ok(None);
    };
    let (Some(lg), Some(rg)) = (
        &left.scan.info.colocate_group,
        &right.scan.info.colocate_group,
    ) else {
        return Ok(None);
    };
    if lg != rg
        || reads_hinted(left.scan, hinted)
        || reads_hinted(right.scan, hinted)
        || !left.scan.meets_bucket_by_bucket(right.scan)
    {
        return Ok(None);
    }
    // Distribution column k of the left joined to distribution column k of
    // the right, for every k.
    let lcols = &left.scan.info.bucket_columns;
    let rcols = &right.scan.info.bucket_columns;
    if lcols.is_empty() || lcols.len() != rcols.len() {
        return Ok(None);
    }
    let pairs: Vec<(Option<String>, Option<String>)> = j
        .on()
        .iter()
        .map(|(l, r)| (left.scan_column(l), right.scan_column(r)))
        .collect();
    let eq = |a: &Option<String>, b: &String| a.as_ref().is_some_and(|a| a.eq_ignore_ascii_case(b));
    let keyed = lcols
        .iter()
        .zip(rcols)
        .all(|(lc, rc)| pairs.iter().any(|(l, r)| eq(l, lc) && eq(r, rc)));
    if !keyed {
        return Ok(None);
    }
    let inner = |c| rewrite(c, true, &|j, safe| colocated(j, safe, n, hinted));
    let new_left = left.rebuild(Arc::new(left.scan.aligned_by_bucket(n)?), &inner)?;
    let new_right = right.rebuild(Arc::new(right.scan.aligned_by_bucket(n)?), &inner)?;
    let join = j
        .builder()
        .with_partition_mode(PartitionMode::Partitioned)
        .with_new_children(vec![new_left, new_right])?
        .recompute_properties()
        .build_exec()?;
    Ok(Some(join))
}

/// Whether `scan` reads a table a join hint names (its join keeps the
/// distribution the hint chose).
pub(super) fn reads_hinted(scan: &BeFragmentExec, hinted: &[String]) -> bool {
    hinted
        .iter()
        .any(|t| t.eq_ignore_ascii_case(&scan.info.table_name))
}

/// A join input that is a scan under projections, filters and broadcast
/// joins it probes (under the exchange `EnsureRequirements` put there,
/// which goes): each keeps its input's rows in their partitions.
pub(super) struct ScanPath<'a> {
    /// The operators above the scan, top first, with the child the path
    /// goes through.
    above: Vec<(&'a Arc<dyn ExecutionPlan>, usize)>,
    pub(super) scan: &'a BeFragmentExec,
}

impl<'a> ScanPath<'a> {
    pub(super) fn of(input: &'a Arc<dyn ExecutionPlan>) -> Option<ScanPath<'a>> {
        let mut p = input;
        while p.is::<RepartitionExec>() || p.is::<CoalescePartitionsExec>() {
            p = p.children()[0];
        }
        let mut above = vec![];
        loop {
            if let Some(scan) = p.downcast_ref::<BeFragmentExec>() {
                return Some(ScanPath { above, scan });
            }
            let passes = p.is::<ProjectionExec>()
                || p.is::<FilterExec>()
                || p.name() == "CoalesceBatchesExec";
            let child = if passes && p.children().len() == 1 {
                0
            } else if p
                .downcast_ref::<HashJoinExec>()
                .is_some_and(|j| broadcast_probe_columns(j).is_some())
            {
                1
            } else {
                return None;
            };
            above.push((p, child));
            p = p.children()[child];
        }
    }

    /// The scan column that key `e` (over the path's top) is, if it is one.
    pub(super) fn scan_column(&self, e: &Arc<dyn PhysicalExpr>) -> Option<String> {
        let mut index = e.downcast_ref::<Column>()?.index();
        for (node, _) in &self.above {
            if let Some(p) = node.downcast_ref::<ProjectionExec>() {
                index = p.expr().get(index)?.expr.downcast_ref::<Column>()?.index();
            } else if let Some(f) = node.downcast_ref::<FilterExec>()
                && let Some(proj) = f.projection()
            {
                index = *proj.get(index)?;
            } else if let Some(j) = node.downcast_ref::<HashJoinExec>() {
                index = broadcast_probe_columns(j)?(index)?;
            }
        }
        Some(self.scan.schema().field(index).name().clone())
    }

    /// The path rebuilt over `scan`, the inputs off the path (broadcast
    /// joins' build sides) passed through `off_path` (the rewrite of the
    /// joins inside them: TPC-H q09's lineitem side, staying for the
    /// orders join, builds from `part ⋈ partsupp`, a bucket shuffle).
    pub(super) fn rebuild(
        &self,
        scan: Arc<dyn ExecutionPlan>,
        off_path: &dyn Fn(Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let mut out = scan;
        for (node, child) in self.above.iter().rev() {
            #[allow(deprecated)]
            let mut children = node
                .children()
                .into_iter()
                .enumerate()
                .map(|(i, c)| match i == *child {
                    true => Ok(c.clone()),
                    false => off_path(c.clone()),
                })
                .collect::<Result<Vec<_>>>()?;
            children[*child] = out;
            #[allow(deprecated)]
            let rebuilt = Arc::clone(node).with_new_children(children)?;
            out = rebuilt;
        }
        Ok(out)
    }
}

/// For a broadcast join whose output rows stay in its probe side's
/// partitions: the probe input column each output column is (if any).
fn broadcast_probe_columns(j: &HashJoinExec) -> Option<impl Fn(usize) -> Option<usize> + '_> {
    use datafusion::logical_expr::JoinType;
    if *j.partition_mode() != PartitionMode::CollectLeft {
        return None;
    }
    let left = j.left().schema().fields().len();
    let offset = match j.join_type() {
        JoinType::Inner => left,
        JoinType::RightSemi | JoinType::RightAnti => 0,
        _ => return None,
    };
    Some(move |i: usize| {
        let i = match j.projection.as_ref() {
            Some(p) => *p.get(i)?,
            None => i,
        };
        i.checked_sub(offset)
    })
}

/// Whether `join` is colocated: partitioned, both inputs reading scans
/// dealt by bucket with no exchange between (EXPLAIN's `COLOCATE`).
pub fn is_colocated(join: &HashJoinExec) -> bool {
    fn by_bucket(p: &Arc<dyn ExecutionPlan>) -> bool {
        if let Some(s) = p.downcast_ref::<BeFragmentExec>() {
            return s.is_aligned_by_bucket();
        }
        if let Some(leaf) = p.downcast_ref::<DistributedLeafExec>() {
            return by_bucket(leaf.original());
        }
        if p.is::<RepartitionExec>() || p.is::<CoalescePartitionsExec>() {
            return false;
        }
        match p.children().as_slice() {
            [c] => by_bucket(c),
            _ => false,
        }
    }
    *join.partition_mode() == PartitionMode::Partitioned
        && by_bucket(join.left())
        && by_bucket(join.right())
}

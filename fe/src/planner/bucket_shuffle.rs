//! Bucket shuffle joins: when the join keys cover one table's distribution
//! columns, that table stays where it is and only the other side moves, to
//! the backend and partition reading the bucket each row hashes to.
//!
//! ```sql
//! -- lineitem: HASH(l_orderkey) BUCKETS 32; orders in no colocation group
//! SELECT o_orderpriority, count(*) FROM orders JOIN lineitem
//!     ON l_orderkey = o_orderkey GROUP BY o_orderpriority;
//! --   join op: INNER JOIN(BUCKET_SHUFFLE)[]
//! --   STREAM DATA SINK ... BUCKET_SHFFULE_HASH_PARTITIONED: o_orderkey
//! ```
//!
//! A partitioned join (both sides hashed by `EnsureRequirements`) or a
//! broadcast join, one of whose inputs is a scan path (`colocate::ScanPath`:
//! a scan under projections, filters and broadcast joins it probes) keyed
//! on all its table's distribution columns, of the same types, loses that
//! side's exchange: the scan deals its tablets to partitions by bucket
//! (`BeFragmentExec::aligned_by_bucket`, as a colocate join's sides do).
//! The other side is hashed on a `tethys_bucket_route` call over its keys
//! (`common/src/plan/bucket_route.rs`), which sends each row to the
//! exchange partition reading its bucket.
//!
//! Distributed plans only (enable_bucket_shuffle_join, Doris' variable): the
//! route addresses `n` partitions in a task on every alive backend, in id
//! order (SSB's `dates` has one tablet, yet its join's stage takes three
//! tasks from lineorder's side), and a stage reading a table dealt by
//! bucket runs such a task on each (`distribute.rs::desired_tasks`; those
//! without its tablets read nothing); `distribute.rs` checks the stage
//! once planned and otherwise plans again without them. The rewrite
//! follows DataFusion's planning, checks included
//! ([`BucketShufflePlanner`]), as the route is not the join keys' hash
//! they ask for. As for colocate joins, the declared partitioning is
//! not DataFusion's hash, so the rule fires only where nothing above the
//! join relies on its output partitioning, and its runtime filter goes
//! through the FE's merge node (`cross_filters.rs`).

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::error::Result;
use datafusion::execution::context::QueryPlanner;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, Partitioning};
use datafusion::physical_planner::{DefaultPhysicalPlanner, PhysicalPlanner};
use datafusion_distributed::{DistributedLeafExec, NetworkBoundaryExt};
use tethys_common::plan::BucketRoute;
use tethys_common::plan::build_keys::BuildKeysExec;

use super::colocate::{ScanPath, reads_hinted, rewrite};
use super::join_order::{estimate_join_rows, estimate_rows, row_width};

/// Session config extension of a planning without bucket shuffle joins
/// (`distribute.rs`, when a plan with them cannot be placed).
#[derive(Debug)]
pub struct WithoutBucketShuffle;

/// The physical plan with its bucket shuffle joins: DataFusion's physical
/// planner (our rules included), then the rewrite, before the distributed
/// planner cuts stages. After DataFusion's checks on purpose: the route is
/// not the distribution `SanityCheckPlan` and the join's invariant ask for.
/// Joins reading a table of `hinted` (a join hint's) keep the distribution
/// it chose.
#[derive(Debug)]
pub struct BucketShufflePlanner {
    pub hinted: Vec<String>,
    /// The alive backends, in id order: a route addresses a task on each.
    pub backends: Vec<i64>,
}

#[async_trait]
impl QueryPlanner for BucketShufflePlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session_state: &dyn datafusion::catalog::Session,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let plan = DefaultPhysicalPlanner::default()
            .create_physical_plan(logical_plan, session_state)
            .await?;
        let config = session_state.config();
        if config.get_extension::<WithoutBucketShuffle>().is_some() {
            return Ok(plan);
        }
        let n = config.target_partitions().max(1);
        rewrite(plan, true, &|j, safe| bucket_shuffled(j, safe, n, self))
    }
}

/// The bucket shuffle form of join `j` (the staying side dealt in `n`
/// partitions per backend), when it qualifies. A partitioned join may keep
/// either side in place: the one whose other side is expected to move
/// fewer bytes ([`moved_bytes`]). TPC-H q09's `orders` and its lineitem
/// side are both dealt by order key; sending lineitem's side (six columns
/// of 319,404 rows at SF1) moved 26.6 MB; the orders its runtime filter
/// keeps (two columns) move 3.5. A broadcast join keeps
/// its probe side, its build side sent once rather than to every backend,
/// as Doris prefers bucket shuffle to broadcast. A broadcast join's output
/// partitioning was its probe side's (not hashed), so nothing above relies
/// on it.
fn bucket_shuffled(
    j: &HashJoinExec,
    safe: bool,
    n: usize,
    planner: &BucketShufflePlanner,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let mode = *j.partition_mode();
    let sides: &[bool] = match mode {
        PartitionMode::Partitioned if safe => &[true, false],
        PartitionMode::CollectLeft => &[true],
        _ => &[],
    };
    if j.null_aware {
        return Ok(None);
    }
    let mut best: Option<(f64, Side<'_>)> = None;
    for &stays_right in sides {
        let side = match Side::of(j, stays_right, n, planner) {
            Chosen::Side(side) => side,
            Chosen::Not => continue,
            // A hinted join (`JOIN [shuffle] t`) keeps its distribution.
            Chosen::Hinted => return Ok(None),
        };
        let bytes = moved_bytes(j, &side);
        if best.as_ref().is_none_or(|(b, _)| bytes < *b) {
            best = Some((bytes, side));
        }
    }
    let Some((_, side)) = best else {
        return Ok(None);
    };
    side.join(j, n, planner).map(Some)
}

/// A side of a join that can stay in place, and what the other sends.
struct Side<'a> {
    stays_right: bool,
    /// The moving side's rows and its key collector, if any.
    input: &'a Plan,
    collector: Option<Plan>,
    /// The staying side's scan path and key collector, if any.
    path: ScanPath<'a>,
    kept_collector: Option<Plan>,
    /// The moving side's key for each distribution column, in order.
    keys: Vec<Arc<dyn PhysicalExpr>>,
    targets: Vec<u32>,
}

enum Chosen<'a> {
    Side(Side<'a>),
    Not,
    Hinted,
}

impl<'a> Side<'a> {
    /// The right (`stays_right`) or left input of `j` staying in place,
    /// if it can.
    fn of(
        j: &'a HashJoinExec,
        stays_right: bool,
        n: usize,
        planner: &BucketShufflePlanner,
    ) -> Chosen<'a> {
        let (stays, moves) = match stays_right {
            true => (j.right(), j.left()),
            false => (j.left(), j.right()),
        };
        let Some((collector, input)) = moving_input(moves, *j.partition_mode()) else {
            return Chosen::Not;
        };
        // A filtered build side staying in place keeps its key collector
        // on top (SSB q4.1's customers of AMERICA, dealt by bucket, filter
        // lineorder's scans in another stage through the FE's merge node).
        let (kept_collector, stays) = staying(stays);
        let Some(path) = ScanPath::of(stays) else {
            return Chosen::Not;
        };
        let scan = path.scan;
        if reads_hinted(scan, &planner.hinted)
            || ScanPath::of(input).is_some_and(|p| reads_hinted(p.scan, &planner.hinted))
        {
            return Chosen::Hinted;
        }
        let Some(keys) = scan
            .info
            .bucket_columns
            .iter()
            .try_fold(vec![], |mut keys, c| {
                let key = j.on().iter().find_map(|(l, r)| {
                    let (s, m) = if stays_right { (r, l) } else { (l, r) };
                    path.scan_column(s)
                        .is_some_and(|col| col.eq_ignore_ascii_case(c))
                        .then(|| m.clone())
                })?;
                keys.push(key);
                Some(keys)
            })
        else {
            return Chosen::Not;
        };
        if keys.is_empty() || !same_hashed_types(&keys, input, scan) {
            return Chosen::Not;
        }
        let Some(targets) = scan.bucket_targets(n, &planner.backends) else {
            return Chosen::Not;
        };
        Chosen::Side(Side {
            stays_right,
            input,
            collector,
            path,
            kept_collector,
            keys,
            targets,
        })
    }

    /// `j` with this side in place and the other hashed on its route.
    fn join(self, j: &HashJoinExec, n: usize, planner: &BucketShufflePlanner) -> Result<Plan> {
        let backends = planner.backends.clone();
        let partitions = u32::try_from(backends.len() * n).unwrap_or(u32::MAX);
        let route = BucketRoute::try_new(self.targets, partitions, backends)?
            .call(self.keys, &self.input.schema())?;
        // Joins below the moving side, now under an exchange, and in the
        // build sides along the staying side's path may be bucket
        // shuffled too.
        let inner = |c| rewrite(c, true, &|j, safe| bucket_shuffled(j, safe, n, planner));
        let input = inner(self.input.clone())?;
        let mut moved: Plan = Arc::new(RepartitionExec::try_new(
            input,
            Partitioning::Hash(vec![route], n),
        )?);
        if let Some(c) = self.collector {
            #[allow(deprecated)]
            let with = c.with_new_children(vec![moved])?;
            moved = with;
        }
        let mut stayed = self
            .path
            .rebuild(Arc::new(self.path.scan.aligned_by_bucket(n)?), &inner)?;
        if let Some(c) = self.kept_collector {
            #[allow(deprecated)]
            let with = c.with_new_children(vec![stayed])?;
            stayed = with;
        }
        let children = match self.stays_right {
            true => vec![moved, stayed],
            false => vec![stayed, moved],
        };
        j.builder()
            .with_partition_mode(PartitionMode::Partitioned)
            .with_new_children(children)?
            .recompute_properties()
            .build_exec()
    }
}

/// Bytes the moving input of `j` is expected to send when `side` stays:
/// its estimated rows times its row width. A moving probe side whose scan
/// receives the staying build side's runtime filter keeps at most the
/// rows the join is expected to return.
fn moved_bytes(j: &HashJoinExec, side: &Side<'_>) -> f64 {
    let rows = estimate_rows(side.input);
    let rows = match !side.stays_right && side.kept_collector.is_some() {
        true => rows.min(estimate_join_rows(j)),
        false => rows,
    };
    rows * row_width(&side.input.schema())
}

type Plan = Arc<dyn ExecutionPlan>;

/// The moving side's rows before the exchange `EnsureRequirements` put
/// over them (a hash repartition; a broadcast join's build side, the merge
/// of its partitions, if any), and the key collector over them
/// (`runtime_filter.rs`: on top, or under a broadcast join's merge), which
/// goes on top of the moving side.
fn moving_input(moves: &Plan, mode: PartitionMode) -> Option<(Option<Plan>, &Plan)> {
    let (collector, below) = collected(moves);
    let input = match mode {
        PartitionMode::Partitioned => {
            let r = below.downcast_ref::<RepartitionExec>()?;
            matches!(r.partitioning(), Partitioning::Hash(..)).then_some(r.input())?
        }
        _ if below.is::<CoalescePartitionsExec>() => {
            let (under, input) = collected(below.children()[0]);
            return Some((collector.or(under), input));
        }
        _ => below,
    };
    Some((collector, input))
}

/// The staying side below the exchange `EnsureRequirements` put over it,
/// and its key collector (on top of the exchange or under it), if any.
fn staying(stays: &Plan) -> (Option<Plan>, &Plan) {
    let (above, below) = collected(stays);
    let below = match below.is::<RepartitionExec>() || below.is::<CoalescePartitionsExec>() {
        true => below.children()[0],
        false => below,
    };
    let (under, input) = collected(below);
    (above.or(under), input)
}

/// `p`'s key collector, if it is one, and what it collects from.
fn collected(p: &Plan) -> (Option<Plan>, &Plan) {
    match p.is::<BuildKeysExec>() {
        true => (Some(p.clone()), p.children()[0]),
        false => (None, p),
    }
}

/// Whether each moving key has its distribution column's type, one the
/// bucket hash reads as loads do (a wider or other type hashes apart).
fn same_hashed_types(
    keys: &[Arc<dyn PhysicalExpr>],
    input: &Arc<dyn ExecutionPlan>,
    scan: &super::remote::BeFragmentExec,
) -> bool {
    use arrow::datatypes::DataType::*;
    let schema = input.schema();
    let scan_schema = scan.schema();
    keys.iter().zip(&scan.info.bucket_columns).all(|(k, c)| {
        let Ok(field) = scan_schema.field_with_name(c) else {
            return false;
        };
        let t = field.data_type();
        k.data_type(&schema).is_ok_and(|kt| &kt == t)
            && matches!(
                t,
                Int8 | Int16 | Int32 | Int64 | Date32 | Decimal128(..) | Utf8
            )
    })
}

/// The route `plan` (a repartition or the exchange reading one) hashes
/// by, and its keys.
pub fn route_of(
    plan: &Arc<dyn ExecutionPlan>,
) -> Option<(BucketRoute, Vec<Arc<dyn PhysicalExpr>>)> {
    match plan.output_partitioning() {
        Partitioning::Hash(keys, _) => match keys.as_slice() {
            [k] => BucketRoute::of_call(k).map(|(r, keys)| (r, keys.to_vec())),
            _ => None,
        },
        _ => None,
    }
}

/// Whether `join` is a bucket shuffle join (EXPLAIN's `BUCKET_SHUFFLE`):
/// one input arrives hashed on a route.
pub fn is_bucket_shuffle(join: &HashJoinExec) -> bool {
    fn routed(p: &Arc<dyn ExecutionPlan>) -> bool {
        route_of(p).is_some()
            || (p.is::<BuildKeysExec>() && p.children().first().is_some_and(|c| routed(c)))
    }
    *join.partition_mode() == PartitionMode::Partitioned
        && (routed(join.left()) || routed(join.right()))
}

/// How [`misplaced`]'s reasons begin.
pub const MISPLACED: &str = "a bucket shuffle";

/// Why the bucket shuffle joins of a stage cannot run as planned: each
/// route names the backends of its consumer tasks, in order, and `tasks`
/// (the backend of each of the stage's tasks; `None`: the FE's stage or a
/// plan run in one process) must be those.
pub fn misplaced(stage: &Arc<dyn ExecutionPlan>, tasks: Option<&[i64]>) -> Option<String> {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    let mut why = None;
    let _ = stage.apply(|p| {
        // Below the stage's own root (a producer's repartition sends by
        // the route; the stage reading it is checked).
        let reads = p.is_network_boundary() || !Arc::ptr_eq(p, stage);
        if reads
            && let Some((route, _)) = route_of(p)
            && tasks != Some(route.backends.as_slice())
        {
            why = Some(format!(
                "{MISPLACED} to tasks on backends {:?} read by tasks on {tasks:?}",
                route.backends
            ));
            return Ok(TreeNodeRecursion::Stop);
        }
        if p.is_network_boundary() || p.is::<DistributedLeafExec>() {
            return Ok(TreeNodeRecursion::Jump);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    why
}

//! MPP execution over the backends (issue 37), on datafusion-distributed:
//!
//! ```sql
//! SELECT o_orderpriority, count(*) FROM orders JOIN lineitem
//!     ON l_orderkey = o_orderkey GROUP BY o_orderpriority;
//! ```
//!
//! With three backends, the two scans run where their tablets are, both
//! sides are hashed on `orderkey` to the backends, each backend joins and
//! aggregates its share, and the FE only merges the final groups. The
//! single-process plan is planned as before (our rules, `BeFragmentExec`
//! leaves); the distributed planner then cuts it into stages at its
//! exchanges. Each stage holding a scan runs one task per backend: the
//! task's variant of the leaf is the fragment of that backend's tablets
//! (`OlapScanNodePb::backend_id`), and the task is routed there, where the
//! worker binds it to local tablets (`be/src/service/worker.rs`).
//!
//! A plan whose scans cannot be placed that way (a stage with fewer tasks
//! than the backends its scan reads, or scans of one stage on different
//! backends) is planned again without distribution: correct first.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::context::QueryPlanner;
use datafusion::execution::{SessionState, SessionStateBuilder};
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_planner::{DefaultPhysicalPlanner, PhysicalPlanner};
use datafusion_distributed::{
    DesiredTaskCountEvent, DesiredTaskCountEventResponse, DistributedExec, DistributedExt,
    DistributedLeafExec, NetworkBoundaryExt, RouteTasksEvent, RouteTasksEventResponse,
    ScaleUpLeafNodeEvent, ScaleUpLeafNodeEventResponse, SessionStateBuilderExt, Stage,
};
use tethys_common::plan::{FragmentRootExec, OlapScanExec, ScanFilterExec};
use tethys_common::task_headers;
use tonic::codegen::http::{HeaderMap, HeaderName, HeaderValue};
use url::Url;

use super::StatementCtx;
use super::remote::BeFragmentExec;
use super::small_stages::SmallStageRows;
use super::task_functions::{NamingChannels, PlanFunctions, called_functions, header_value};
use crate::backends::Backends;
use crate::backends::workers::BackendWorkers;

/// `builder`, planning its queries over the alive backends.
pub fn distributed(
    builder: SessionStateBuilder,
    backends: Arc<Backends>,
    token: &str,
    stmt: &StatementCtx,
    runtime_filters: bool,
    bucket_shuffle: bool,
) -> tethys_common::Result<SessionStateBuilder> {
    let mut headers = HeaderMap::new();
    let mut put = |k: &'static str, v: String| -> tethys_common::Result<()> {
        let v = HeaderValue::from_str(&v).map_err(|e| {
            tethys_common::TethysError::Internal(format!("header {k} of value {v:?}: {e}"))
        })?;
        headers.insert(HeaderName::from_static(k), v);
        Ok(())
    };
    put(tethys_common::token::TOKEN_KEY, token.to_string())?;
    put(task_headers::BATCH_SIZE, stmt.batch_size.to_string())?;
    put(
        task_headers::TIME_ZONE,
        super::tz_offset_name(&stmt.time_zone),
    )?;
    put(task_headers::MEM_LIMIT, stmt.mem_limit.to_string())?;
    // The backends' tasks of one query share one memory pool.
    put(task_headers::QUERY_ID, stmt.query_id.clone())?;
    // A stage's joins filter its scans (broadcast joins: the build side and
    // the probe scan meet in one task); absent: runtime_filter_mode OFF.
    if runtime_filters {
        put(
            task_headers::RUNTIME_FILTER_WAIT_MS,
            stmt.runtime_filter_wait_ms.to_string(),
        )?;
        put(
            task_headers::RUNTIME_FILTER_MAX_IN,
            stmt.runtime_filter_max_in.to_string(),
        )?;
    }
    let profile = stmt.profile;
    if profile {
        put(task_headers::PROFILE, "1".into())?;
    }
    let router = backends.clone();
    // The physical plan the distributed planner cuts into stages: with
    // bucket shuffle joins, made once DataFusion has checked the plan, and
    // joins that must be partitioned keeping their probe side's hashing.
    let bucket_shuffle = bucket_shuffle.then(|| {
        Arc::new(super::bucket_shuffle::BucketShufflePlanner {
            hinted: stmt.join_hints.iter().map(|h| h.table.clone()).collect(),
            backends: {
                let mut ids = backends.alive_ids();
                ids.sort_unstable();
                ids
            },
        }) as Arc<dyn QueryPlanner + Send + Sync>
    });
    let physical = Arc::new(ReusedPhysical {
        inner: Arc::new(super::probe_hashing::KeepProbeHashing(bucket_shuffle)),
        last: Arc::default(),
    });
    let last = physical.last.clone();
    let builder = builder.with_query_planner(physical);
    // The tasks register the functions the placed plan calls.
    let functions = PlanFunctions::default();
    let channels = NamingChannels {
        channels: backends.worker_channels(),
        functions: functions.clone(),
    };
    let mut builder = builder
        .with_distributed_planner()
        .with_distributed_worker_resolver(BackendWorkers(backends.clone()))
        .with_distributed_channel_resolver(channels)
        .with_distributed_user_codec(tethys_common::plan::TethysCodec)
        .with_distributed_passthrough_headers(headers)?
        // Backends exchange batches uncompressed: on one machine or a LAN the
        // CPU LZ4 costs is dearer than the bytes it saves (TPC-H SF1 on three
        // BEs, benches/results/tpch-sf1-be3-2026-12-05-*-notes.md).
        .with_distributed_compression(None)?
        // Tasks report their counters for EXPLAIN ANALYZE and profiles.
        .with_distributed_metrics_collection(profile)?
        .with_distributed_desired_task_count_handler({
            let backends = backends.clone();
            move |ev: DesiredTaskCountEvent| desired_tasks(ev, &backends)
        })
        .with_distributed_scale_up_leaf_node_handler(move |ev: ScaleUpLeafNodeEvent| {
            scale_up(ev, &backends, profile)
        })
        .with_distributed_route_tasks_handler(move |ev: RouteTasksEvent| route(ev, &router));
    // Stages above exchanges bringing few rows run as one task.
    if let Some(cfg) = builder.config().as_mut() {
        cfg.set_extension(Arc::new(SmallStageRows(stmt.small_stage_rows)));
    }
    let distributed = builder.query_planner().take().ok_or_else(|| {
        tethys_common::TethysError::Internal("the distributed planner was not installed".into())
    })?;
    Ok(builder.with_query_planner(Arc::new(PlaceOrFallBack {
        distributed,
        last,
        max_in: stmt.runtime_filter_max_in,
        functions,
    })))
}

/// How long EXPLAIN ANALYZE waits for the backends' tasks to report their
/// counters once the query has run.
const COUNTERS_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// `plan`, a distributed plan that has run, with the counters of every
/// task of its stages (`Err`: why they are not there); any other plan as
/// it is.
pub async fn with_task_counters(
    plan: Arc<dyn ExecutionPlan>,
) -> Result<Arc<dyn ExecutionPlan>, String> {
    if !plan.is::<DistributedExec>() {
        return Ok(plan);
    }
    let rewrite = datafusion_distributed::rewrite_distributed_plan_with_metrics(
        plan,
        datafusion_distributed::DistributedMetricsFormat::PerTask,
    );
    match tokio::time::timeout(COUNTERS_WAIT, rewrite).await {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!(
            "not every task reported within {} s",
            COUNTERS_WAIT.as_secs()
        )),
    }
}

/// A stage reading a table runs a task per backend its tablets are read on
/// or, planned again with [`SpreadScans`], one on every alive backend, as
/// does a stage reading a table dealt by bucket (a colocate or bucket
/// shuffle join's: a bucket shuffle's route addresses every alive backend,
/// and a stage takes the largest task count of its inputs, so SSB's
/// `dates`, one tablet, meets lineorder's side shuffled from three tasks).
fn desired_tasks(
    ev: DesiredTaskCountEvent,
    backends: &Backends,
) -> Option<DfResult<DesiredTaskCountEventResponse>> {
    let Some(scan) = ev.plan.downcast_ref::<BeFragmentExec>() else {
        let limit = ev.session_config.get_extension::<SmallStageRows>()?;
        return super::small_stages::one_task(ev.plan, limit.0);
    };
    let mut n = scan.fragments().len().max(1);
    let spread = ev.session_config.get_extension::<SpreadScans>();
    let table = &scan.info.table;
    if scan.is_aligned_by_bucket() || spread.as_ref().is_some_and(|s| s.covers(table)) {
        n = n.max(backends.alive_ids().len());
    } else if n == 1 && spread.is_some_and(|s| s.probed.contains(table)) {
        return Some(Ok(DesiredTaskCountEventResponse::maximum(1)));
    }
    Some(Ok(DesiredTaskCountEventResponse::desired(n)))
}

/// Session config extension of a planning whose stages reading some
/// tables (`spread`; `None`: every table) run a task on every alive
/// backend, those without the stage's tablets reading nothing. Used when
/// the plan cannot be placed otherwise: datafusion-distributed merges a
/// stage of one task into the one task consuming it, so TPC-H q05's
/// `region` (one tablet, on one backend) broadcast to `nation` (one
/// tablet, on another) would be one stage reading both. Spreading `region`
/// alone keeps the two stages apart ([`Apart`]), and `nation`'s scan
/// (`probed`) keeps its one task, which a stage would otherwise raise to
/// its broadcast input's three: spreading both, as before, gave `nation`'s
/// broadcast to `supplier` a stream from each of three tasks to each of
/// three, twice in q02.
#[derive(Debug)]
struct SpreadScans {
    spread: Option<BTreeSet<String>>,
    probed: BTreeSet<String>,
}

impl SpreadScans {
    fn covers(&self, table: &str) -> bool {
        self.spread.as_ref().is_none_or(|t| t.contains(table))
    }
}

/// How the reason a stage cannot run its scans' tasks begins.
const SCANS_APART: &str = "scans of one stage on backends";

/// Placements tried with [`SpreadScans`], the last (or one whose tables
/// would be those of the one before) spreading every table's scans.
const SPREAD_ATTEMPTS: usize = 3;

/// Tasks of a stage, `task_count` of them, each on one backend: the
/// backends the fragments are on, or (as many tasks as alive backends) every
/// alive backend in id order, those without tablets of this scan reading
/// nothing. Either way task `i` of two scans in one stage meets on one
/// backend, checked once planned ([`placement`]).
fn scale_up(
    ev: ScaleUpLeafNodeEvent,
    backends: &Backends,
    profile: bool,
) -> Option<DfResult<ScaleUpLeafNodeEventResponse>> {
    let scan = ev.plan.downcast_ref::<BeFragmentExec>()?;
    if ev.task_count <= 1 && scan.fragments().len() != 1 {
        // Only the FE's stage (run once, by the FE) reads fragments of
        // several backends in one task, as it does without distribution.
        return None;
    }
    Some(scale_up_fragments(
        ev.plan,
        scan,
        ev.task_count.max(1),
        backends,
        profile,
    ))
}

fn scale_up_fragments(
    original: &Arc<dyn ExecutionPlan>,
    scan: &BeFragmentExec,
    task_count: usize,
    backends: &Backends,
    profile: bool,
) -> DfResult<ScaleUpLeafNodeEventResponse> {
    let fragments = scan.fragments();
    let Some((_, template)) = fragments.first() else {
        return Err(cannot_place("a scan with no fragments"));
    };
    let on: Vec<i64> = if task_count == fragments.len() {
        fragments.iter().map(|(b, _)| b.id).collect()
    } else {
        let alive: BTreeSet<i64> = backends.alive_ids().into_iter().collect();
        if alive.len() != task_count || fragments.iter().any(|(b, _)| !alive.contains(&b.id)) {
            return Err(cannot_place(&format!(
                "{} tasks for fragments on {} backends",
                task_count,
                fragments.len()
            )));
        }
        alive.into_iter().collect()
    };
    let partitions = fragments
        .iter()
        .map(|(_, p)| p.properties().partitioning.partition_count())
        .max()
        .unwrap_or(1);
    let variants = on
        .iter()
        .map(|b| {
            let v = match fragments.iter().find(|(f, _)| f.id == *b) {
                Some((_, plan)) => with_scan(plan, partitions, *b, false)?,
                None => with_scan(template, partitions, *b, true)?,
            };
            // A profiled task reports the fragment's counters as this one
            // leaf's (`tethys_common::plan::counted_leaves`).
            Ok(match profile {
                true => Arc::new(FragmentRootExec::new(v)) as Arc<dyn ExecutionPlan>,
                false => v,
            })
        })
        .collect::<DfResult<Vec<_>>>()?;
    let leaf = DistributedLeafExec::try_new(original.clone(), variants)?;
    Ok(ScaleUpLeafNodeEventResponse::new(Arc::new(leaf)))
}

/// `fragment` with its scan on `backend` in `partitions` partitions (all
/// variants of a leaf have as many), reading nothing when `empty`; a
/// filter directly over the scan sent as a `ScanFilterExec` (the backend
/// folds it into the scan without analysing its predicate, nor does the
/// change of scan here).
fn with_scan(
    fragment: &Arc<dyn ExecutionPlan>,
    partitions: usize,
    backend: i64,
    empty: bool,
) -> DfResult<Arc<dyn ExecutionPlan>> {
    let fragment = fragment.clone().transform_up(|p| {
        match p.downcast_ref::<FilterExec>().and_then(ScanFilterExec::of) {
            Some(f) => Ok(Transformed::yes(Arc::new(f) as Arc<dyn ExecutionPlan>)),
            None => Ok(Transformed::no(p)),
        }
    })?;
    tethys_common::plan::map_scans(fragment.data, |node| {
        node.partitions = partitions as u32;
        node.backend_id = backend;
        if empty {
            node.tablets.clear();
        }
    })
}

/// Each task of a stage reading tables goes to the backend of its variant.
fn route(ev: RouteTasksEvent, backends: &Backends) -> Option<DfResult<RouteTasksEventResponse>> {
    let per_task = match task_backends(ev.plan, ev.task_count) {
        Ok(Some(ids)) => ids,
        Ok(None) => return None,
        Err(e) => return Some(Err(e)),
    };
    let registered = backends.registered();
    let urls = per_task
        .into_iter()
        .map(|id| {
            let b = registered.iter().find(|b| b.id == id).ok_or_else(|| {
                DataFusionError::External(Box::new(tethys_common::TethysError::Backend(format!(
                    "backend {id} is not registered"
                ))))
            })?;
            Url::parse(&b.rpc_url()).map_err(|e| DataFusionError::External(Box::new(e)))
        })
        .collect::<DfResult<Vec<_>>>();
    Some(urls.map(RouteTasksEventResponse::new))
}

/// The backend each task of the stage `plan` must run on, when it reads
/// tables (`None`: it does not, any backend will do); an error when two of
/// its scans put one task on different backends.
fn task_backends(plan: &Arc<dyn ExecutionPlan>, tasks: usize) -> DfResult<Option<Vec<i64>>> {
    let leaves = stage_leaves(plan);
    let mut ids = leaves.iter().map(|(ids, _)| ids);
    let out = ids.next().cloned();
    if let Some(first) = &out
        && let Some(other) = ids.find(|ids| *ids != first)
    {
        return Err(cannot_place(&format!(
            "{SCANS_APART} {first:?} and {other:?}"
        )));
    }
    match out {
        Some(ids) if ids.len() != tasks => Err(cannot_place(&format!(
            "{tasks} tasks for scans on {} backends",
            ids.len()
        ))),
        other => Ok(other),
    }
}

/// Tables (`db.name`) of scans that share a stage with a scan on another
/// backend: the scan the stage's joins probe (found down probe sides), and
/// the others, which spread over every backend ([`SpreadScans`]) keep their
/// stages apart from it.
#[derive(Debug, Default)]
struct Apart {
    builds: BTreeSet<String>,
    probed: BTreeSet<String>,
}

impl Apart {
    fn of(plan: &Arc<dyn ExecutionPlan>) -> Apart {
        let mut out = Apart::default();
        plan.children().iter().for_each(|c| out.stage(c));
        out
    }

    /// Adds the stage `plan`'s tables, if its scans are apart (as
    /// [`task_backends`] finds them), and those of the stages below.
    fn stage(&mut self, plan: &Arc<dyn ExecutionPlan>) {
        let leaves = stage_leaves(plan);
        let apart = leaves.windows(2).any(|w| w[0].0 != w[1].0);
        if apart && let Some(probed) = probed_table(plan) {
            let builds = leaves.into_iter().map(|(_, t)| t).filter(|t| *t != probed);
            self.builds.extend(builds);
            self.probed.insert(probed);
        }
        let _ = plan.apply(|p| {
            if let Some(nb) = p.as_network_boundary() {
                if let Stage::Local(s) = nb.input_stage() {
                    self.stage(&s.plan);
                }
                return Ok(TreeNodeRecursion::Jump);
            }
            Ok(TreeNodeRecursion::Continue)
        });
    }
}

/// The scans of the stage `plan` (not of the stages below it): for each,
/// the backend of each task's variant and its table (`db.name`).
fn stage_leaves(plan: &Arc<dyn ExecutionPlan>) -> Vec<(Vec<i64>, String)> {
    let mut leaves = vec![];
    let _ = plan.apply(|p| {
        if p.is_network_boundary() {
            return Ok(TreeNodeRecursion::Jump);
        }
        if let Some(leaf) = p.downcast_ref::<DistributedLeafExec>() {
            let variants = leaf.variants();
            let ids = variants.iter().map(variant_backend).collect();
            let table = leaf_table(leaf).unwrap_or_default();
            leaves.push((ids, table));
        }
        Ok(TreeNodeRecursion::Continue)
    });
    leaves
}

/// The table of the scan a stage's joins probe: down hash joins' probe
/// sides and single inputs, to a leaf of the stage.
fn probed_table(plan: &Arc<dyn ExecutionPlan>) -> Option<String> {
    if plan.is_network_boundary() {
        return None;
    }
    if let Some(leaf) = plan.downcast_ref::<DistributedLeafExec>() {
        return leaf_table(leaf);
    }
    if let Some(j) = plan.downcast_ref::<HashJoinExec>() {
        return probed_table(j.right());
    }
    match plan.children().as_slice() {
        [only] => probed_table(only),
        _ => None,
    }
}

/// The table (`db.name`) a leaf reads, as [`desired_tasks`] names it.
fn leaf_table(leaf: &DistributedLeafExec) -> Option<String> {
    let scan = leaf.original().downcast_ref::<BeFragmentExec>()?;
    Some(scan.info.table.clone())
}

/// The backend a leaf variant's scan reads tablets on (0: none named).
fn variant_backend(variant: &Arc<dyn ExecutionPlan>) -> i64 {
    let mut id = 0;
    let _ = variant.apply(|p| {
        if let Some(scan) = p.downcast_ref::<OlapScanExec>() {
            id = scan.node().backend_id;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    id
}

fn cannot_place(what: &str) -> DataFusionError {
    DataFusionError::Plan(format!("cannot place the plan on the backends: {what}"))
}

/// Whether a distributed plan runs every scan where its tablets are: the
/// head stage (run by the FE) reads through `BeFragmentExec`, no stage sent
/// to a backend holds one, and the scans of each stage agree on the backend
/// of each task; the reason when not.
pub fn placement(plan: &Arc<dyn ExecutionPlan>) -> Result<(), String> {
    fn stage(plan: &Arc<dyn ExecutionPlan>, tasks: Option<usize>) -> Result<(), String> {
        let mut bad = None;
        let mut below: Vec<(Arc<dyn ExecutionPlan>, usize)> = vec![];
        let _ = plan.apply(|p| {
            if let Some(nb) = p.as_network_boundary() {
                if let Stage::Local(s) = nb.input_stage() {
                    below.push((s.plan.clone(), s.tasks));
                }
                return Ok(TreeNodeRecursion::Jump);
            }
            if tasks.is_some() && p.is::<BeFragmentExec>() {
                bad = Some("a stage sent to a backend reads through the FE".to_string());
            } else if tasks.is_none() && p.is::<DistributedLeafExec>() {
                bad = Some("the FE's stage holds a backend's scan".to_string());
            }
            Ok(match bad {
                Some(_) => TreeNodeRecursion::Stop,
                None => TreeNodeRecursion::Continue,
            })
        });
        if let Some(b) = bad {
            return Err(b);
        }
        let on = match tasks {
            Some(n) => task_backends(plan, n).map_err(|e| e.to_string())?,
            None => None,
        };
        if let Some(why) = super::bucket_shuffle::misplaced(plan, on.as_deref()) {
            return Err(why);
        }
        below.iter().try_for_each(|(p, n)| stage(p, Some(*n)))
    }
    match plan.downcast_ref::<DistributedExec>() {
        Some(d) => d.children().iter().try_for_each(|c| stage(c, None)),
        None => super::bucket_shuffle::misplaced(plan, None).map_or(Ok(()), Err),
    }
}

/// `plan` with the scans of its FE stage (the head, run by the FE in one
/// task) read through `BeFragmentExec` again: a leaf scaled up to one task
/// there would run its backend's fragment on the FE, which has no tablets.
fn fe_reads_its_own(plan: Arc<dyn ExecutionPlan>) -> DfResult<Arc<dyn ExecutionPlan>> {
    if !plan.is::<DistributedExec>() {
        return Ok(plan);
    }
    let out = plan.transform_down(|p| {
        if p.is_network_boundary() {
            return Ok(Transformed::new(p, false, TreeNodeRecursion::Jump));
        }
        if let Some(leaf) = p.downcast_ref::<DistributedLeafExec>()
            && leaf.original().is::<BeFragmentExec>()
        {
            let original = leaf.original().clone();
            return Ok(Transformed::new(original, true, TreeNodeRecursion::Jump));
        }
        Ok(Transformed::no(p))
    })?;
    Ok(out.data)
}

/// The physical plan of the logical plan being placed, kept for a placement
/// again with other task counts ([`SpreadScans`]): the plan before the
/// distributed planner does not depend on them. Planning it again was about
/// a seventh of the FE's CPU on TPC-H q02 on three BEs (perf), whose
/// `region` and `nation` are on different backends: 16.0 ms of FE CPU a
/// query before, 12.2-14.6 after.
#[derive(Debug, Default)]
struct LastPhysical(Mutex<Option<(usize, Arc<dyn ExecutionPlan>)>>);

impl LastPhysical {
    fn key(plan: &LogicalPlan) -> usize {
        plan as *const LogicalPlan as usize
    }

    fn of(&self, plan: &LogicalPlan) -> Option<Arc<dyn ExecutionPlan>> {
        let last = self.0.lock().unwrap_or_else(|p| p.into_inner());
        last.as_ref()
            .filter(|(k, _)| *k == Self::key(plan))
            .map(|(_, p)| p.clone())
    }

    fn set(&self, plan: Option<(&LogicalPlan, Arc<dyn ExecutionPlan>)>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = plan.map(|(l, p)| (Self::key(l), p));
    }
}

/// `inner`'s physical plan, or the one kept in `last` for this logical
/// plan (set by [`PlaceOrFallBack`] for the length of one placement).
#[derive(Debug)]
struct ReusedPhysical {
    inner: Arc<dyn QueryPlanner + Send + Sync>,
    last: Arc<LastPhysical>,
}

#[async_trait]
impl QueryPlanner for ReusedPhysical {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session_state: &dyn datafusion::catalog::Session,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        if let Some(plan) = self.last.of(logical_plan) {
            return Ok(plan);
        }
        let plan = self
            .inner
            .create_physical_plan(logical_plan, session_state)
            .await?;
        self.last.set(Some((logical_plan, plan.clone())));
        Ok(plan)
    }
}

/// The distributed planner, and the single-process plan when its result
/// cannot be placed ([`placement`]).
#[derive(Debug)]
struct PlaceOrFallBack {
    distributed: Arc<dyn QueryPlanner + Send + Sync>,
    /// The physical plan the first placement made, reused by the second.
    last: Arc<LastPhysical>,
    /// `runtime_filter_max_in_num`, for filters merged across backends.
    max_in: usize,
    /// The functions the placed plan calls, named to its tasks.
    functions: PlanFunctions,
}

#[async_trait]
impl QueryPlanner for PlaceOrFallBack {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session_state: &dyn datafusion::catalog::Session,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        tracing::debug!("logical plan:\n{}", logical_plan.display_indent_schema());
        // Each statement's plan (and a retry's) is planned afresh.
        self.last.set(None);
        let placed = self.place_or_fall_back(logical_plan, session_state).await;
        self.last.set(None);
        placed
    }
}

impl PlaceOrFallBack {
    async fn place_or_fall_back(
        &self,
        logical_plan: &LogicalPlan,
        session_state: &dyn datafusion::catalog::Session,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let (mut why, mut apart) = match self.place(logical_plan, session_state).await {
            Ok(plan) => return Ok(plan),
            Err(unplaced) => unplaced,
        };
        tracing::debug!("not distributed as planned: {why}");
        let Some(state) = session_state.as_any().downcast_ref::<SessionState>() else {
            return Err(DataFusionError::Internal(
                "the distributed planner was given another kind of session".into(),
            ));
        };
        let mut state = state.clone();
        // Stages of one task merged into one reading tables on different
        // backends: plan again with a task on every backend for the scans
        // merged into another's stage, then for every scan.
        let (mut spread, mut probed) = (BTreeSet::new(), BTreeSet::new());
        for attempt in 1..=SPREAD_ATTEMPTS {
            if !why.contains(SCANS_APART) {
                break;
            }
            let before = spread.len();
            spread.extend(apart.builds);
            probed.extend(apart.probed);
            let grown = spread.len() > before;
            let all = !grown || attempt == SPREAD_ATTEMPTS;
            let ext = SpreadScans {
                spread: (!all).then(|| spread.clone()),
                probed: probed.clone(),
            };
            state = with_extension(&state, ext);
            (why, apart) = match self.place(logical_plan, &state).await {
                Ok(plan) => return Ok(plan),
                Err(again) => again,
            };
            tracing::debug!("not distributed with tasks on every backend for {spread:?}: {why}");
            if all {
                break;
            }
        }
        // Bucket shuffle joins need their stage's tasks where the route
        // sends rows (and a plan in one process has none of them): plan
        // again without them, distributed, then in one process.
        self.last.set(None);
        let without = with_extension(&state, super::bucket_shuffle::WithoutBucketShuffle);
        if why.starts_with(super::bucket_shuffle::MISPLACED) {
            match self.place(logical_plan, &without).await {
                Ok(plan) => return Ok(plan),
                Err((why, _)) => tracing::debug!("planned in one process: {why}"),
            }
        }
        DefaultPhysicalPlanner::default()
            .create_physical_plan(logical_plan, &without)
            .await
    }

    /// The distributed plan, if it can be placed ([`placement`]); if not,
    /// why, and the tables whose scans share a stage with another's on
    /// another backend ([`Apart`]).
    async fn place(
        &self,
        logical_plan: &LogicalPlan,
        session_state: &dyn datafusion::catalog::Session,
    ) -> Result<Arc<dyn ExecutionPlan>, (String, Apart)> {
        let unplaced = |e: DataFusionError| (e.to_string(), Apart::default());
        let plan = self
            .distributed
            .create_physical_plan(logical_plan, session_state)
            .await
            .map_err(unplaced)?;
        let plan = fe_reads_its_own(plan).map_err(unplaced)?;
        placement(&plan).map_err(|why| (why, Apart::of(&plan)))?;
        let plan = super::cross_filters::link(plan, self.max_in).map_err(unplaced)?;
        let names = called_functions(logical_plan, &plan).map_err(unplaced)?;
        self.functions.set(header_value(&names));
        tracing::debug!(
            "distributed plan:\n{}",
            datafusion_distributed::display_plan_ascii(plan.as_ref(), false)
        );
        Ok(plan)
    }
}

/// `state` with `ext` in its config (a clone: building the session again
/// would register every function again).
fn with_extension<T: Send + Sync + 'static>(state: &SessionState, ext: T) -> SessionState {
    let mut state = state.clone();
    state.config_mut().set_extension(Arc::new(ext));
    state
}

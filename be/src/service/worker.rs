//! datafusion-distributed's `Worker` on the BE's gRPC port, behind the
//! cluster token like every other service here: the stages of a query
//! planned over the backends (`fe/src/planner/distribute.rs`) run here.
//! Each task's session takes the statement's settings from the headers the
//! FE sent, our functions and plan codec; the tasks of one query here
//! clone one session (`QuerySession`: the functions registered once, the
//! query's memory pool in its runtime); its scans are bound to local
//! tablets as a fragment's are (`exec::bind_scans`), and its calls to other
//! backends carry the token it came with. A profiled query's task reports
//! its counters in the coordinator's node order (`plan::counted_leaves`).

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::memory_pool::{GreedyMemoryPool, MemoryPool, TrackConsumersPool};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::{SessionState, SessionStateBuilder};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_optimizer::filter_pushdown::FilterPushdown;
use datafusion::prelude::SessionConfig;
use datafusion_distributed::{
    DistributedExt, NetworkBoundaryExt, Worker, WorkerPlanRewriteEvent,
    WorkerPlanRewriteEventResponse, WorkerQueryContext,
};
use futures::future::BoxFuture;
use tethys_common::plan::TethysCodec;
use tethys_common::plan::build_keys::{BuildKeysExec, KeysTo};
use tethys_common::plan::cross_filters::{self, CrossFilters, FilterMerge};
use tethys_common::plan::filter_merge::{FilterMergeNode, LocalMerge};
use tethys_common::plan::runtime_filters::join_filter_options;
use tethys_common::task_headers;
use tethys_common::worker_channels::WorkerChannels;
use tethys_proto::{
    AwaitRuntimeFilterRequest, AwaitRuntimeFilterResponse, PublishRuntimeFilterRequest,
};
use tonic::codegen::http::HeaderMap;

use crate::exec::bind_scans;
use crate::exec::cancel::{CancelCheckExec, QueryCancels, with_cancel_checks};
use crate::exec::collect_build_keys;
use crate::exec::runtime_filter::RuntimeFilterSettings;
use crate::load::{FrontendClient, LoadContext};
use crate::storage::StorageEngine;

/// Largest message a worker call sends or takes: batches are cut to fit.
pub const MAX_MESSAGE: usize = 64 << 20;

/// The sessions of the queries running here, by query id: every task of
/// one query on this backend starts from one [`QuerySession`].
#[derive(Default)]
struct QuerySessions(Mutex<HashMap<String, Weak<QuerySession>>>);

impl QuerySessions {
    /// The session of `query`'s tasks calling `functions` (the header's
    /// list): a statement run again under its id after a failure (the FE
    /// retries when a backend was unreachable) may call others, a bucket
    /// shuffle's route, and gets a session of its own.
    fn of(&self, query: &str, functions: Option<&str>) -> Arc<QuerySession> {
        if query.is_empty() {
            // No id to share under (the FE always sends one).
            return Arc::default();
        }
        let key = format!("{query}\n{}", functions.unwrap_or("*"));
        let mut sessions = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(session) = sessions.get(&key).and_then(Weak::upgrade) {
            return session;
        }
        sessions.retain(|_, s| s.strong_count() > 0);
        let session = Arc::new(QuerySession::default());
        sessions.insert(key, Arc::downgrade(&session));
        session
    }
}

/// One query's session on this backend, built by its first task: the
/// functions (DataFusion's and Tethys', ~430 names registered by each build: 9%
/// of a backend's CPU on SSB q1.2 when every task built its own; only
/// those the plan calls when the FE names them, `task_headers::FUNCTIONS`,
/// as every task clones the session and its function tables) and the
/// runtime with the query's memory pool, so that every task of the query
/// here draws from one pool of `exec_mem_limit` bytes (Doris' limit is per
/// query per backend). A task's session is a clone of it with the task's
/// own config, which holds this: it lives as long as the query's tasks.
#[derive(Default)]
struct QuerySession(tokio::sync::OnceCell<SessionState>);

impl QuerySession {
    /// The query's session, built from `builder` (with `limit` bytes of
    /// memory, 0: the worker's runtime; the functions named in `functions`,
    /// comma separated, or all) by the first task to ask.
    async fn state(
        &self,
        builder: SessionStateBuilder,
        limit: usize,
        functions: Option<&str>,
    ) -> DfResult<&SessionState> {
        self.0
            .get_or_try_init(|| async move {
                let mut builder = builder;
                if limit > 0 {
                    let pool: Arc<dyn MemoryPool> = Arc::new(TrackConsumersPool::new(
                        GreedyMemoryPool::new(limit),
                        NonZeroUsize::MIN.saturating_add(4),
                    ));
                    let runtime = RuntimeEnvBuilder::new()
                        .with_memory_pool(pool)
                        .build_arc()?;
                    builder = builder.with_runtime_env(runtime);
                }
                match functions {
                    Some(names) => tethys_common::functions::add_named(
                        &mut builder,
                        names.split(',').filter(|n| !n.is_empty()),
                    ),
                    None => tethys_common::functions::add_all(&mut builder),
                }
                Ok(builder.build())
            })
            .await
    }
}

fn header<'a>(headers: &'a HeaderMap, key: &str) -> Option<&'a str> {
    headers.get(key).and_then(|v| v.to_str().ok())
}

fn external(e: impl std::error::Error + Send + Sync + 'static) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// Runtime filters across backends are merged by the FE this backend
/// reports to (`FrontendService`'s `PublishRuntimeFilter` /
/// `AwaitRuntimeFilter`).
#[derive(Debug)]
struct FrontendMerge(Arc<LoadContext>);

impl FrontendMerge {
    fn client(&self) -> DfResult<FrontendClient> {
        Ok(self
            .0
            .require_frontend()
            .map_err(external)?
            .max_decoding_message_size(cross_filters::MAX_MESSAGE)
            .max_encoding_message_size(cross_filters::MAX_MESSAGE))
    }
}

impl FilterMerge for FrontendMerge {
    fn publish(&self, part: PublishRuntimeFilterRequest) -> BoxFuture<'static, DfResult<()>> {
        let client = self.client();
        Box::pin(async move {
            client?
                .publish_runtime_filter(part)
                .await
                .map_err(external)?;
            Ok(())
        })
    }

    fn fetch(
        &self,
        req: AwaitRuntimeFilterRequest,
    ) -> BoxFuture<'static, DfResult<AwaitRuntimeFilterResponse>> {
        let client = self.client();
        Box::pin(async move {
            Ok(client?
                .await_runtime_filter(req)
                .await
                .map_err(external)?
                .into_inner())
        })
    }
}

/// The worker this BE serves stages with, over `engine`'s tablets; `loads`
/// knows the FE (the merge node of runtime filters across backends).
pub fn worker(
    engine: Arc<StorageEngine>,
    loads: Arc<LoadContext>,
    cancels: Arc<QueryCancels>,
) -> Worker {
    let sessions = Arc::new(QuerySessions::default());
    let merge: Arc<dyn FilterMerge> = Arc::new(FrontendMerge(loads));
    // The other backends' workers, over one channel each for every task.
    let channels = WorkerChannels::default();
    Worker::from_session_builder(move |ctx: WorkerQueryContext| {
        let engine = engine.clone();
        let sessions = sessions.clone();
        let merge = merge.clone();
        let cancels = cancels.clone();
        let channels = channels.clone();
        async move {
            let headers = ctx.headers;
            let mut builder = ctx.builder;
            let query_id = header(&headers, task_headers::QUERY_ID).unwrap_or_default();
            let profiled = header(&headers, task_headers::PROFILE).is_some();
            // The task's config: datafusion-distributed's (the task's index,
            // its work unit feeds) with the statement's settings and ours.
            let mut cfg = builder.config().take().unwrap_or_default();
            statement_settings(&mut cfg, &headers);
            // The FE's CancelQuery stops the query's stages here.
            cfg.set_extension(cancels.of(query_id));
            // A session per task: the task's own merge node, for its
            // colocate and bucket shuffle joins' filters.
            let in_task = Arc::new(LocalMerge(Arc::new(FilterMergeNode::default())));
            cfg.set_extension(Arc::new(CrossFilters {
                query_id: query_id.to_string(),
                merge,
                in_task,
            }));
            // Calls to other backends' workers (their exchanges) carry the
            // token this call came with.
            let mut passthrough = HeaderMap::new();
            if let Some(token) = headers.get(tethys_common::token::TOKEN_KEY) {
                passthrough.insert(tethys_common::token::TOKEN_KEY, token.clone());
            }
            cfg.set_distributed_user_codec(TethysCodec);
            cfg.set_distributed_channel_resolver(channels);
            cfg.set_distributed_passthrough_headers(passthrough)?;
            cfg.set_distributed_worker_plan_rewrite_handler(move |ev: WorkerPlanRewriteEvent| {
                rewrite_task_plan(ev, &engine, profiled)
            });
            let limit: usize = header(&headers, task_headers::MEM_LIMIT)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            // The query's session is built with the statement's options
            // only: no task's extensions live on in it.
            let options = SessionConfig::from(cfg.options().as_ref().clone());
            let functions = header(&headers, task_headers::FUNCTIONS);
            let query = sessions.of(query_id, functions);
            let mut state = query
                .state(builder.with_config(options), limit, functions)
                .await?
                .clone();
            cfg.set_extension(query);
            *state.config_mut() = cfg;
            Ok(state)
        }
    })
    .with_max_message_size(MAX_MESSAGE)
}

/// A task's plan as it runs here: its scans bound to local tablets, its
/// joins' runtime filters planned again for the scans of this stage, the
/// checks that stop it on cancel.
fn rewrite_task_plan(
    ev: WorkerPlanRewriteEvent,
    engine: &Arc<StorageEngine>,
    profiled: bool,
) -> DfResult<WorkerPlanRewriteEventResponse> {
    let plan = match profiled {
        true => ev.plan,
        false => tethys_common::plan::without_fragment_roots(ev.plan)?,
    };
    let plan = bind_scans(plan, engine).map_err(external)?;
    // Joins arrive with the FE's filters, which no scan here holds: dropped,
    // so that the pushdown below gives them new ones for the scans of this
    // stage.
    let plan = without_join_filters(plan)?;
    // The stage's joins and the scans they filter meet again here (a plan
    // arrives without its joins' filters).
    let plan =
        FilterPushdown::new_post_optimization().optimize(plan, ev.session_config.options())?;
    // Scans test the keys of their joins' build sides, as the FE's do, not
    // the joins' hash tables.
    let plan = collect_build_keys(plan)?;
    // DECIMAL arithmetic that cannot overflow runs unchecked.
    let plan = tethys_common::plan::exact_decimal_arithmetic(plan).map_err(external)?;
    // Last: a check over each leaf stops the stage once the FE cancels the
    // query.
    let plan = with_cancel_checks(plan)?;
    // Last: the nodes the coordinator does not have (the fragments' own, the
    // checks over exchange readers) hidden in the leaves it has.
    let plan = match profiled {
        true => tethys_common::plan::counted_leaves(plan, |p| {
            // A reader whose keys this stage's join collects for its scans
            // (not the coordinator's collector for the merge node) is one
            // leaf of the coordinator's too.
            let p = match p.downcast_ref::<BuildKeysExec>() {
                Some(b) if matches!(b.to(), KeysTo::Shared(_)) => b.input(),
                _ => p,
            };
            p.downcast_ref::<CancelCheckExec>()
                .is_some_and(|c| c.input().is_network_boundary())
        })?,
        false => plan,
    };
    Ok(WorkerPlanRewriteEventResponse::new(plan))
}

/// The statement's settings a task's session takes from the headers the FE
/// sent: batch size, time zone and runtime filters (a stage names no
/// table: its scans arrive bound, so no default catalog).
pub(crate) fn statement_settings(cfg: &mut SessionConfig, headers: &HeaderMap) {
    if let Some(n) = header(headers, task_headers::BATCH_SIZE).and_then(|v| v.parse().ok()) {
        cfg.options_mut().execution.batch_size = n;
    }
    cfg.options_mut().catalog.create_default_catalog_and_schema = false;
    if let Some(tz) = header(headers, task_headers::TIME_ZONE) {
        cfg.options_mut().execution.time_zone = Some(tz.to_string());
    }
    // Joins publish runtime filters to the scans of their stage unless the
    // statement turned them off (no wait header).
    let wait = header(headers, task_headers::RUNTIME_FILTER_WAIT_MS).and_then(|v| v.parse().ok());
    join_filter_options(&mut cfg.options_mut().optimizer, wait.is_some());
    let max_in = header(headers, task_headers::RUNTIME_FILTER_MAX_IN).and_then(|v| v.parse().ok());
    cfg.set_extension(Arc::new(RuntimeFilterSettings {
        wait: Duration::from_millis(wait.unwrap_or(0)),
        max_in: max_in.unwrap_or(RuntimeFilterSettings::default().max_in),
    }));
}

/// `plan` with its hash joins' dynamic filters dropped (planned again).
fn without_join_filters(
    plan: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
) -> DfResult<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    use datafusion::physical_plan::ExecutionPlan;
    use datafusion::physical_plan::joins::HashJoinExec;
    Ok(plan
        .transform_up(|p| {
            if p.downcast_ref::<HashJoinExec>()
                .is_some_and(|j| !j.dynamic_expressions_produced().is_empty())
            {
                return Ok(Transformed::yes(p.reset_state()?));
            }
            Ok(Transformed::no(p))
        })?
        .data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::execution::FunctionRegistry;

    fn runtime(state: &SessionState) -> *const datafusion::execution::runtime_env::RuntimeEnv {
        Arc::as_ptr(state.runtime_env())
    }

    /// The tasks of one query here share one session (one memory pool, one
    /// registration of the functions); another query gets its own.
    #[tokio::test]
    async fn tasks_of_a_query_share_its_session() {
        let sessions = QuerySessions::default();
        let builder = || SessionStateBuilder::new().with_default_features();
        let q1 = sessions.of("q1", None);
        let first = q1.state(builder(), 1 << 20, None).await.unwrap().clone();
        let again = sessions.of("q1", None);
        assert!(Arc::ptr_eq(&q1, &again));
        let second = again.state(builder(), 1 << 20, None).await.unwrap().clone();
        assert_eq!(runtime(&first), runtime(&second));
        // Tethys' functions beside DataFusion's.
        let defaults = builder().build().scalar_functions().len();
        assert!(second.scalar_functions().len() > defaults);
        let other = sessions.of("q2", None);
        let third = other.state(builder(), 1 << 20, None).await.unwrap();
        assert_ne!(runtime(&first), runtime(third));
        // Once the query's tasks are gone, its session goes with them.
        drop((q1, again));
        let q1 = sessions.of("q1", None);
        let fourth = q1.state(builder(), 1 << 20, None).await.unwrap();
        assert_ne!(runtime(&first), runtime(fourth));
        // A query whose functions the FE named registers those alone.
        let q3 = sessions.of("q3", Some("sum,upper"));
        let named = q3.state(builder(), 0, Some("sum,upper")).await.unwrap();
        assert!(named.udf("upper").is_ok() && named.udaf("sum").is_ok());
        assert!(named.udf("lower").is_err());
        // Run again under its id calling others, it gets a session of its own.
        assert!(Arc::ptr_eq(&q3, &sessions.of("q3", Some("sum,upper"))));
        assert!(!Arc::ptr_eq(&q3, &sessions.of("q3", Some("lpad,sum"))));
    }
}

//! Planning with DataFusion over the Tethys catalog.
//!
//! Every statement gets a DataFusion `SessionContext` configured from the
//! session (batch size, parallelism, time zone, current database) whose
//! catalog `internal` exposes Tethys tables. A table scan becomes a
//! [`remote::BeFragmentExec`]: the part of the plan that runs on backends
//! (scan, filter, projection), serialized and sent over Arrow Flight.

mod bucket_shuffle;
mod colocate;
mod cross_filters;
pub mod distribute;
pub mod explain;
mod join_hints;
pub mod join_keys;
pub mod join_order;
pub mod join_reorder;
mod probe_hashing;
mod push_agg;
pub mod remote;
pub mod run;
pub mod runtime_filter;
pub mod selectivity;
pub mod sink;
mod small_stages;
pub mod table;
pub mod task_functions;

use std::sync::{Arc, Mutex};

use arrow::datatypes::DataType;
use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, SchemaProvider, TableProvider};
use datafusion::common::ScalarValue;
use datafusion::error::Result as DfResult;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::variable::{VarProvider, VarType};

use crate::metadata::information_schema::{self, SessionView};
use tethys_common::functions::ConstFn;
use tethys_common::plan::cross_filters::CrossFilters;
use tethys_common::plan::filter_merge::LocalMerge;
use tethys_common::{Result, TethysError};

use crate::frontend::Frontend;
use crate::session::{Session, Variables};

/// Name of the internal catalog, as in Doris.
pub const INTERNAL_CATALOG: &str = "internal";

/// What an INSERT reports back for the OK packet.
#[derive(Debug, Clone)]
pub struct InsertOutcome {
    pub label: String,
    pub txn_id: i64,
    pub status: tethys_proto::TxnStatus,
}

/// Facts one statement carries into planning and execution.
#[derive(Debug)]
pub struct StatementCtx {
    pub query_id: String,
    pub label: Option<String>,
    pub batch_size: usize,
    pub time_zone: String,
    /// The session's exec_mem_limit, per fragment and for the FE part of the plan.
    pub mem_limit: usize,
    pub outcome: Mutex<Option<InsertOutcome>>,
    /// `sync_mode` / `async_mode` when this INSERT goes through group commit.
    pub group_commit: Option<tethys_proto::GroupCommitMode>,
    /// The session's insert timeout, seconds.
    pub insert_timeout_secs: u64,
    /// Runtime filter IN lists longer than this become bloom filters
    /// (`runtime_filter_max_in_num`).
    pub runtime_filter_max_in: usize,
    /// How long a scan waits for its runtime filters to be complete
    /// (`runtime_filter_wait_time_ms`).
    pub runtime_filter_wait_ms: u64,
    /// A stage above exchanges expected to bring at most this many rows
    /// runs as one task (`small_stage_row_limit`, 0: off).
    pub small_stage_rows: usize,
    /// The INSERT's rows delete their keys: DELETE on a merge-on-write
    /// UNIQUE table, run as `INSERT INTO t SELECT * FROM t WHERE ...`.
    pub delete_rows: bool,
    /// A partial column update (`SET enable_unique_key_partial_update =
    /// true` and an INSERT column list): the table columns it gives.
    pub partial_columns: Vec<u32>,
    /// `enable_insert_strict` for a partial update: new keys are refused.
    pub partial_strict: bool,
    /// The statement's join hints (`JOIN [broadcast] t`).
    pub join_hints: Vec<crate::sql::join_hints::JoinHint>,
    /// Its counters are kept (EXPLAIN ANALYZE, `enable_profile`): the
    /// backends' tasks report theirs.
    pub profile: bool,
}

/// DataFusion's physical optimizer rules with Tethys' own: colocated
/// aggregations finished on the backends first, the build-side choice
/// before `JoinSelection`, hash keys a runtime filter can push down and the
/// broadcast row limit after it, the runtime filters' key collection, and
/// the partial aggregation pushed into backend fragments (and, with
/// `scan_agg`, ungrouped ones onto their scans) and the unchecked DECIMAL
/// arithmetic of the FE's operators at the end.
fn physical_rules(
    scan_agg: bool,
    distributed: bool,
    colocate: bool,
    hints: &[crate::sql::join_hints::JoinHint],
) -> Vec<Arc<dyn datafusion::physical_optimizer::PhysicalOptimizerRule + Send + Sync>> {
    let mut rules = datafusion::physical_optimizer::optimizer::PhysicalOptimizer::new().rules;
    if colocate && let Some(at) = rules.iter().position(|r| r.name() == "EnsureRequirements") {
        // A hinted join keeps the distribution its hint asks for.
        let hinted = hints.iter().map(|h| h.table.clone()).collect();
        rules.insert(at + 1, Arc::new(colocate::ColocateJoins { hinted }));
    }
    let at = rules
        .iter()
        .position(|r| r.name() == "join_selection")
        .unwrap_or(0);
    rules.insert(at, Arc::new(join_order::BuildSmallerSide { distributed }));
    // After JoinSelection (at + 1) has fixed the probe sides.
    rules.insert(at + 2, Arc::new(join_keys::KeyOnOneProbeInput));
    rules.insert(at + 3, Arc::new(join_order::BroadcastRowLimit));
    rules.insert(at + 4, Arc::new(join_hints::JoinHints(hints.to_vec())));
    rules.insert(0, Arc::new(push_agg::FinishColocatedAggOnBackend));
    // Distributed too: the FE's own stage and a plan that falls back to one
    // process apply them as ever; the stages sent to backends lose the key
    // collectors and get their filters across backends instead
    // (`cross_filters.rs`).
    rules.push(Arc::new(runtime_filter::PlanRuntimeFilters));
    rules.push(Arc::new(push_agg::PushPartialAggToBackend { scan_agg }));
    // Stages sent to backends carry no unchecked arithmetic (it has no wire
    // form); their workers apply it as they do to fragments.
    if !distributed {
        rules.push(Arc::new(ExactDecimalArithmetic));
    }
    rules
}

/// DECIMAL arithmetic of the operators the FE runs made unchecked where no
/// overflow can occur (`tethys_common::plan::exact_decimal_arithmetic`).
/// Last: backend fragments are already cut out (a backend does the same
/// to the fragments it runs), and the expression has no wire form.
#[derive(Debug, Default)]
struct ExactDecimalArithmetic;

impl datafusion::physical_optimizer::PhysicalOptimizerRule for ExactDecimalArithmetic {
    fn optimize(
        &self,
        plan: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
        _config: &datafusion::config::ConfigOptions,
    ) -> datafusion::error::Result<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        tethys_common::plan::exact_decimal_arithmetic(plan)
    }

    fn name(&self) -> &str {
        "tethys_exact_decimal_arithmetic"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Builds the DataFusion context of one statement.
pub fn statement_context(
    fe: &Arc<Frontend>,
    session: &Session,
    stmt: Arc<StatementCtx>,
) -> Result<SessionContext> {
    let vars = &session.vars;
    // Queries run over the backends (MPP) when more than one is alive.
    let distributed = vars.mpp() && fe.backends.alive().len() > 1;
    let mut config = SessionConfig::new()
        .with_batch_size(vars.batch_size())
        .with_target_partitions(vars.parallelism())
        // Tethys serves its own, MySQL-shaped information_schema.
        .with_information_schema(false)
        .with_default_catalog_and_schema(
            INTERNAL_CATALOG,
            session.database.clone().unwrap_or_default(),
        )
        .with_create_default_catalog_and_schema(false);
    config
        .options_mut()
        .set("datafusion.sql_parser.dialect", "mysql")
        .map_err(TethysError::from)?;
    config.options_mut().execution.time_zone = Some(tz_offset_name(&vars.time_zone()));
    // MySQL reads numeric literals with a point (and integers too large for
    // BIGINT) as exact DECIMAL values, not floats.
    config.options_mut().sql_parser.parse_float_as_decimal = true;
    // MySQL and Doris sort NULL as the smallest value: first in ASC, last in
    // DESC (DataFusion's default is the opposite).
    config.options_mut().sql_parser.default_null_ordering = "nulls_min".into();
    let opts = config.options_mut();
    // Joins publish their build keys for the probe scans (runtime filters):
    // DataFusion's filter gives the key bounds and a lookup into the join's
    // hash table (never an IN list, built a literal per key); the key set
    // the backends test comes from `build_keys`.
    // A distributed plan's joins feed scans of their own stage (planned
    // again on the backend) and of other stages (`cross_filters.rs`).
    tethys_common::plan::runtime_filters::join_filter_options(
        &mut opts.optimizer,
        vars.runtime_filters(),
    );
    // Broadcast (collect) build sides up to this size and row count
    // (`broadcast_row_count_limit`), as Doris broadcasts small tables: one
    // hash table, one runtime filter per join.
    opts.optimizer.hash_join_single_partition_threshold = 32 << 20;
    // Build sides are chosen by `join_order::BuildSmallerSide`.
    opts.optimizer.join_reordering = false;
    opts.optimizer.hash_join_single_partition_threshold_rows = vars.broadcast_row_count_limit();
    let runtime = datafusion::execution::runtime_env::RuntimeEnvBuilder::new()
        .with_memory_limit(vars.exec_mem_limit(), 1.0)
        .build_arc()
        .map_err(TethysError::from)?;
    let mut builder = SessionStateBuilder::new()
        .with_config(config)
        .with_runtime_env(runtime)
        .with_default_features()
        .with_physical_optimizer_rules(physical_rules(
            vars.pushdown_agg_to_scan(),
            distributed,
            !vars.disable_colocate_plan(),
            &stmt.join_hints,
        ));
    if !vars.disable_join_reorder() {
        builder = builder.with_optimizer_rule(Arc::new(join_reorder::ReorderJoins {
            max_relations: vars.max_join_number_of_reorder(),
        }));
    }
    // Tethys' planner goes first so MySQL semantics win over the defaults.
    if let Some(planners) = builder.expr_planners() {
        planners.insert(0, Arc::new(MySqlSemantics));
    }
    if distributed {
        // Runtime filters of joins the FE runs, for scans on the backends.
        if let Some(cfg) = builder.config().as_mut() {
            // (A join the FE runs is never one of a task's own filters.)
            let merge = Arc::new(LocalMerge(fe.filter_merge.clone()));
            cfg.set_extension(Arc::new(CrossFilters {
                query_id: stmt.query_id.clone(),
                merge: merge.clone(),
                in_task: merge,
            }));
        }
        let token = fe.catalog.read().cluster_token.clone();
        builder = distribute::distributed(
            builder,
            fe.backends.clone(),
            &token,
            &stmt,
            vars.runtime_filters(),
            vars.enable_bucket_shuffle_join(),
        )?;
    }
    let state = builder.build();
    let mut ctx = SessionContext::new_with_state(state);
    tethys_common::functions::register_all(&mut ctx)?;
    let db = session.database.clone();
    ctx.register_udf(ConstFn::udf("database", ScalarValue::Utf8(db.clone())));
    ctx.register_udf(ConstFn::udf("schema", ScalarValue::Utf8(db)));
    let who = ScalarValue::Utf8(Some(format!(
        "'{}'@'{}'",
        session.user, session.client_host
    )));
    ctx.register_udf(ConstFn::udf("user", who.clone()));
    ctx.register_udf(ConstFn::udf("current_user", who.clone()));
    ctx.register_udf(ConstFn::udf("session_user", who));
    ctx.register_udf(ConstFn::udf(
        "connection_id",
        ScalarValue::Int64(Some(session.conn_id as i64)),
    ));
    ctx.register_udf(ConstFn::udf(
        "version",
        ScalarValue::Utf8(Some(tethys_common::config::MYSQL_SERVER_VERSION.into())),
    ));
    ctx.register_udf(ConstFn::udf("last_insert_id", ScalarValue::Int64(Some(0))));
    let view = SessionView::of(fe, session);
    ctx.register_variable(
        VarType::System,
        Arc::new(SystemVars {
            session: vars.clone(),
            globals: view.globals.clone(),
        }),
    );
    ctx.register_variable(
        VarType::UserDefined,
        Arc::new(UserVars(session.user_vars.clone())),
    );
    ctx.register_catalog(
        INTERNAL_CATALOG,
        Arc::new(TethysCatalog {
            fe: fe.clone(),
            stmt,
            session: view,
        }),
    );
    Ok(ctx)
}

/// DataFusion wants an offset or an IANA name it knows; `UTC` becomes `+00:00`.
pub fn tz_offset_name(tz: &str) -> String {
    if tz.eq_ignore_ascii_case("utc")
        || tz.eq_ignore_ascii_case("system")
        || tz.eq_ignore_ascii_case("gmt")
    {
        "+00:00".into()
    } else {
        tz.to_string()
    }
}

/// `@@var` lookups: `@@global.var` reads the `SET GLOBAL` values, the
/// rest this session's.
#[derive(Debug)]
struct SystemVars {
    session: Variables,
    globals: Variables,
}

impl SystemVars {
    fn scope(&self, names: &[String]) -> &Variables {
        let global = names.iter().any(|n| {
            let n = n.trim_start_matches("@@").to_ascii_lowercase();
            n == "global" || n.starts_with("global.")
        });
        if global { &self.globals } else { &self.session }
    }
}

fn var_name(names: &[String]) -> String {
    let last = names.last().cloned().unwrap_or_default();
    last.trim_start_matches("@@")
        .trim_start_matches("session.")
        .trim_start_matches("global.")
        .trim_start_matches("local.")
        .to_ascii_lowercase()
}

impl VarProvider for SystemVars {
    fn get_value(&self, var_names: Vec<String>) -> DfResult<ScalarValue> {
        let name = var_name(&var_names);
        match self.scope(&var_names).get(&name) {
            Some(v) if Variables::is_int(&name) => Ok(ScalarValue::Int64(v.parse().ok())),
            Some(v) => Ok(ScalarValue::Utf8(Some(v))),
            None => Err(TethysError::UnknownVariable(name).into()),
        }
    }

    fn get_type(&self, var_names: &[String]) -> Option<DataType> {
        let name = var_name(var_names);
        // Unknown variables are reported by get_value with MySQL's error.
        Some(if Variables::is_int(&name) {
            DataType::Int64
        } else {
            DataType::Utf8
        })
    }
}

/// `@var` lookups: the value with its type; NULL (a string) if never set.
#[derive(Debug)]
struct UserVars(std::collections::BTreeMap<String, ScalarValue>);

impl UserVars {
    fn lookup(&self, var_names: &[String]) -> ScalarValue {
        let name = var_names.last().cloned().unwrap_or_default();
        self.0
            .get(name.trim_start_matches('@').to_ascii_lowercase().as_str())
            .cloned()
            .unwrap_or(ScalarValue::Utf8(None))
    }
}

impl VarProvider for UserVars {
    fn get_value(&self, var_names: Vec<String>) -> DfResult<ScalarValue> {
        Ok(self.lookup(&var_names))
    }

    fn get_type(&self, var_names: &[String]) -> Option<DataType> {
        Some(self.lookup(var_names).data_type())
    }
}

/// The `internal` catalog: one schema per database.
#[derive(Debug)]
struct TethysCatalog {
    fe: Arc<Frontend>,
    stmt: Arc<StatementCtx>,
    session: SessionView,
}

impl CatalogProvider for TethysCatalog {
    fn schema_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.fe.catalog.read().databases.keys().cloned().collect();
        names.push(information_schema::NAME.into());
        names
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        if name.eq_ignore_ascii_case(information_schema::NAME) {
            return Some(Arc::new(information_schema::InformationSchema {
                fe: self.fe.clone(),
                session: self.session.clone(),
            }));
        }
        let db = self.fe.catalog.read().database(name)?.name.clone();
        Some(Arc::new(TethysSchema {
            fe: self.fe.clone(),
            db,
            stmt: self.stmt.clone(),
        }))
    }
}

/// One database as a DataFusion schema.
#[derive(Debug)]
struct TethysSchema {
    fe: Arc<Frontend>,
    db: String,
    stmt: Arc<StatementCtx>,
}

#[async_trait]
impl SchemaProvider for TethysSchema {
    fn table_names(&self) -> Vec<String> {
        self.fe
            .catalog
            .read()
            .database(&self.db)
            .map(|d| d.tables.keys().cloned().collect())
            .unwrap_or_default()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        // `t PARTITION (p1, p2)`: a snapshot holding only those partitions.
        let (name, only) = match crate::sql::partitions::split(name) {
            Some((t, parts)) => (t, Some(parts)),
            None => (name, None),
        };
        let table = {
            let state = self.fe.catalog.read();
            state
                .database(&self.db)
                .and_then(|d| d.table(name))
                .cloned()
        };
        let table = match (table, only) {
            (Some(mut t), Some(parts)) => {
                if let Some(p) = parts
                    .iter()
                    .find(|p| !t.partitions.iter().any(|q| q.name.eq_ignore_ascii_case(p)))
                {
                    return Err(TethysError::Analysis(format!(
                        "Unknown partition '{p}' in table '{}'",
                        t.name
                    ))
                    .into());
                }
                t.partitions
                    .retain(|q| parts.iter().any(|p| q.name.eq_ignore_ascii_case(p)));
                Some(t)
            }
            (t, _) => t,
        };
        Ok(match table {
            Some(t) => {
                let rows = self.fe.backends.table_rows(&t).await;
                Some(Arc::new(table::OlapTable::new(
                    self.fe.clone(),
                    self.db.clone(),
                    t,
                    rows,
                    self.stmt.clone(),
                )?))
            }
            None => None,
        })
    }

    fn table_exist(&self, name: &str) -> bool {
        self.fe
            .catalog
            .read()
            .database(&self.db)
            .is_some_and(|d| d.table(name).is_some())
    }
}

/// MySQL expression semantics DataFusion does not share: `/` on integers is
/// exact division (`7 / 2 = 3.5`), not integer division.
#[derive(Debug)]
struct MySqlSemantics;

impl datafusion::logical_expr::planner::ExprPlanner for MySqlSemantics {
    fn plan_binary_op(
        &self,
        expr: datafusion::logical_expr::planner::RawBinaryExpr,
        schema: &datafusion::common::DFSchema,
    ) -> DfResult<
        datafusion::logical_expr::planner::PlannerResult<
            datafusion::logical_expr::planner::RawBinaryExpr,
        >,
    > {
        use datafusion::logical_expr::planner::PlannerResult;
        use datafusion::logical_expr::{ExprSchemable, cast};
        use datafusion::sql::sqlparser::ast::BinaryOperator;
        if expr.op == BinaryOperator::Divide {
            let lt = expr.left.get_type(schema)?;
            let rt = expr.right.get_type(schema)?;
            if lt.is_integer() && rt.is_integer() {
                let l = cast(expr.left, DataType::Float64);
                let r = cast(expr.right, DataType::Float64);
                return Ok(PlannerResult::Planned(l / r));
            }
        }
        Ok(PlannerResult::Original(expr))
    }

    /// `SUBSTRING(s FROM p FOR n)` with MySQL's rules (negative positions
    /// count from the end; a length below one is `''`).
    fn plan_substring(
        &self,
        args: Vec<datafusion::logical_expr::Expr>,
    ) -> DfResult<
        datafusion::logical_expr::planner::PlannerResult<Vec<datafusion::logical_expr::Expr>>,
    > {
        use datafusion::logical_expr::expr::ScalarFunction;
        use datafusion::logical_expr::planner::PlannerResult;
        Ok(PlannerResult::Planned(
            datafusion::logical_expr::Expr::ScalarFunction(ScalarFunction::new_udf(
                tethys_common::functions::substring_udf(),
                args,
            )),
        ))
    }
}

//! A statement's SQL planned and run in its own DataFusion context: the one
//! parse -> statement context -> plan sequence every query path (SELECT,
//! INSERT, EXPLAIN, COM_STMT_PREPARE's columns) and the FE's internal
//! queries (ANALYZE's aggregates, SET's expressions) go through.

use std::sync::{Arc, Mutex};

use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;
use tethys_common::{Result, TethysError};

use crate::frontend::Frontend;
use crate::session::Session;

use super::StatementCtx;

/// The context of statement `sql` (its text, for what the parser does not
/// keep: the join hints).
pub(crate) fn statement_ctx(
    fe: &Frontend,
    session: &Session,
    label: Option<String>,
    sql: &str,
) -> StatementCtx {
    StatementCtx {
        query_id: fe.next_query_id(),
        label,
        batch_size: session.vars.batch_size(),
        time_zone: session.vars.time_zone(),
        mem_limit: session.vars.exec_mem_limit(),
        outcome: Mutex::new(None),
        group_commit: None,
        insert_timeout_secs: session.vars.insert_timeout_secs(),
        runtime_filter_max_in: session.vars.runtime_filter_max_in(),
        runtime_filter_wait_ms: session.vars.runtime_filter_wait_ms(),
        small_stage_rows: session.vars.small_stage_row_limit(),
        delete_rows: false,
        partial_columns: vec![],
        partial_strict: false,
        // The parser refused bad hints already.
        join_hints: crate::sql::join_hints::strip(sql)
            .map(|(_, h)| h)
            .unwrap_or_default(),
        profile: session.vars.enable_profile(),
    }
}

/// A parsed statement planned in its own statement context: the one parse ->
/// context -> plan sequence every query path (SELECT, INSERT, EXPLAIN,
/// internal queries, COM_STMT_PREPARE's columns) goes through. The tables it
/// names are checked first, so a missing one is MySQL's error for it.
pub(crate) async fn plan(
    fe: &Arc<Frontend>,
    session: &Session,
    stmt: Arc<StatementCtx>,
    parsed: datafusion::sql::parser::Statement,
) -> Result<(SessionContext, LogicalPlan)> {
    let ctx = super::statement_context(fe, session, stmt)?;
    check_relations(&ctx, &parsed)?;
    let plan = ctx.state().statement_to_plan(parsed).await?;
    Ok((ctx, plan))
}

/// Every table the statement reads or writes (CTEs aside) exists, or the
/// error MySQL gives: no database selected, unknown database, unknown table.
/// An unqualified name of a table function (`numbers(...)`) is not a table.
fn check_relations(
    ctx: &SessionContext,
    parsed: &datafusion::sql::parser::Statement,
) -> Result<()> {
    let state = ctx.state();
    let options = &state.config_options().catalog;
    for reference in state.resolve_table_references(parsed)? {
        if reference.schema().is_none() && state.table_functions().contains_key(reference.table()) {
            continue;
        }
        let resolved = reference.resolve(&options.default_catalog, &options.default_schema);
        let (db, table) = (resolved.schema.to_string(), resolved.table.to_string());
        if db.is_empty() {
            return Err(TethysError::NoDatabaseSelected);
        }
        let Some(catalog) = state.catalog_list().catalog(&resolved.catalog) else {
            return Err(TethysError::Analysis(format!(
                "Unknown catalog '{}'",
                resolved.catalog
            )));
        };
        let Some(schema) = catalog.schema(&db) else {
            return Err(TethysError::UnknownDatabase(db));
        };
        // `t PARTITION (p)` names table `t`.
        let name = crate::sql::partitions::split(&table).map_or(&table[..], |(t, _)| t);
        if !schema.table_exist(name) {
            return Err(TethysError::UnknownTable {
                database: db,
                table: name.to_string(),
            });
        }
    }
    Ok(())
}

/// Runs an internal query (such as `ANALYZE`'s aggregate) with the
/// session's settings and returns its batches; only for small answers.
pub(crate) async fn collect_query(
    fe: &Arc<Frontend>,
    session: &Session,
    sql: &str,
) -> Result<Vec<arrow::array::RecordBatch>> {
    let parsed = crate::sql::rewrite::parse_for_datafusion(sql)?;
    let stmt = Arc::new(statement_ctx(fe, session, None, sql));
    let (ctx, plan) = plan(fe, session, stmt, parsed).await?;
    Ok(ctx.execute_logical_plan(plan).await?.collect().await?)
}

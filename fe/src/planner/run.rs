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

pub(crate) fn statement_ctx(
    fe: &Frontend,
    session: &Session,
    label: Option<String>,
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
        delete_rows: false,
        partial_columns: vec![],
        partial_strict: false,
    }
}

/// A parsed statement planned in its own statement context, DataFusion's
/// "table not found" mapped to MySQL's errors: the one parse -> context ->
/// plan sequence every query path (SELECT, INSERT, EXPLAIN, internal
/// queries, COM_STMT_PREPARE's columns) goes through.
pub(crate) async fn plan(
    fe: &Arc<Frontend>,
    session: &Session,
    stmt: Arc<StatementCtx>,
    parsed: datafusion::sql::parser::Statement,
) -> Result<(SessionContext, LogicalPlan)> {
    let ctx = super::statement_context(fe, session, stmt)?;
    let plan = ctx
        .state()
        .statement_to_plan(parsed)
        .await
        .map_err(|e| map_not_found(fe, session, e.into()))?;
    Ok((ctx, plan))
}

/// Runs an internal query (such as `ANALYZE`'s aggregate) with the
/// session's settings and returns its batches; only for small answers.
pub(crate) async fn collect_query(
    fe: &Arc<Frontend>,
    session: &Session,
    sql: &str,
) -> Result<Vec<arrow::array::RecordBatch>> {
    let parsed = crate::sql::rewrite::parse_for_datafusion(sql)?;
    let stmt = Arc::new(statement_ctx(fe, session, None));
    let (ctx, plan) = plan(fe, session, stmt, parsed).await?;
    Ok(ctx.execute_logical_plan(plan).await?.collect().await?)
}

/// Maps DataFusion's "table not found" into the MySQL errors users expect.
pub(crate) fn map_not_found(fe: &Frontend, session: &Session, e: TethysError) -> TethysError {
    let msg = e.to_string();
    if let Some(start) = msg.find("table '")
        && msg.contains("not found")
    {
        let rest = &msg[start + 7..];
        let name = rest.split('\'').next().unwrap_or_default();
        let parts: Vec<&str> = name.split('.').collect();
        let (db, table) = match parts.as_slice() {
            [_, db, t] => (db.to_string(), t.to_string()),
            [db, t] => (db.to_string(), t.to_string()),
            [t] => (session.database.clone().unwrap_or_default(), t.to_string()),
            _ => return e,
        };
        if db.is_empty() {
            return TethysError::NoDatabaseSelected;
        }
        if !db.eq_ignore_ascii_case(crate::metadata::information_schema::NAME)
            && fe.catalog.read().database(&db).is_none()
        {
            return TethysError::UnknownDatabase(db);
        }
        return TethysError::UnknownTable {
            database: db,
            table,
        };
    }
    e
}

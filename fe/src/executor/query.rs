//! Queries, INSERTs and EXPLAIN: parsed for DataFusion, planned in the
//! statement's session context, run, and their errors mapped to MySQL's.

use super::Fe;
use std::sync::{Arc, Mutex};

use arrow::datatypes::SchemaRef;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::StreamExt;
use tethys_common::{Result, TethysError};

use crate::frontend::Frontend;
use crate::planner::explain;
use crate::session::Session;
use crate::sql::statement::Statement;

use super::{Output, string_rows, table_snapshot};
use crate::planner::run::{plan, statement_ctx};

/// Runs one of the statements this module's doc names.
pub(super) async fn execute(fe: &Fe, session: &mut Session, stmt: Statement) -> Result<Output> {
    match stmt {
        Statement::Query(sql) => run_query(fe, session, &sql, None).await,
        Statement::Insert { sql, label } => run_query(fe, session, &sql, label).await,
        Statement::Bound(b) => {
            let parsed = crate::sql::rewrite::rewrite_for_datafusion(b.parsed)?;
            run_retrying(fe, session, parsed, &b.text, b.label, false).await
        }
        Statement::Explain {
            sql,
            verbose: _,
            analyze,
        } => {
            let parsed = crate::sql::rewrite::parse_for_datafusion(&sql)?;
            let mut stmt = statement_ctx(fe, session, None, &sql);
            stmt.profile |= analyze;
            let (ctx, plan) = plan(fe, session, Arc::new(stmt), parsed).await?;
            let names = output_names(&plan);
            let df = ctx.execute_logical_plan(plan).await?;
            let physical = df.create_physical_plan().await?;
            let lines = if analyze {
                // Run it to the end, rows discarded as they come.
                let mut stream =
                    datafusion::physical_plan::execute_stream(physical.clone(), ctx.task_ctx())?;
                while let Some(batch) = stream.next().await {
                    batch?;
                }
                drop(stream);
                explain::analyze_lines_after_run(&physical, &names).await
            } else {
                explain::explain_lines(&physical, &names)
            };
            string_rows(
                &["Explain String(Nereids Planner)"],
                lines.into_iter().map(|l| vec![l]).collect(),
            )
        }
        other => Err(super::not_in_family("query", &other)),
    }
}

pub(super) async fn run_query(
    fe: &Arc<Frontend>,
    session: &Session,
    sql: &str,
    label: Option<String>,
) -> Result<Output> {
    run_query_as(fe, session, sql, label, false).await
}

/// [`run_query`]; with `delete_rows` an INSERT's rows delete their keys.
pub(super) async fn run_query_as(
    fe: &Arc<Frontend>,
    session: &Session,
    sql: &str,
    label: Option<String>,
    delete_rows: bool,
) -> Result<Output> {
    let parsed = crate::sql::rewrite::parse_for_datafusion(sql)?;
    run_retrying(fe, session, parsed, sql, label, delete_rows).await
}

/// Queries a backend died under are planned and run again (twice at most)
/// when they failed before their first row and a call found a backend
/// unreachable meanwhile: the new plan reads other replicas. Statements
/// that change data are not retried here.
async fn run_retrying(
    fe: &Arc<Frontend>,
    session: &Session,
    parsed: datafusion::sql::parser::Statement,
    sql: &str,
    label: Option<String>,
    delete_rows: bool,
) -> Result<Output> {
    let mut attempts = 0;
    loop {
        let started = std::time::Instant::now();
        let out = run_parsed(fe, session, parsed.clone(), sql, label.clone(), delete_rows).await;
        let retry = |attempts: usize| attempts < 2 && fe.backends.pool().suspected_since(started);
        let Ok(Output::Rows(mut stream)) = out else {
            return out;
        };
        let schema = stream.schema();
        let first = stream.next().await;
        if matches!(first, Some(Err(_))) && attempts < 2 && fe.backends.alive().len() > 1 {
            // A distributed query's exchanges are calls between backends,
            // not the FE's: find out whether one of them is gone.
            fe.backends.probe(std::time::Duration::from_secs(2)).await;
        }
        match first {
            Some(Err(e)) if retry(attempts) => {
                tracing::info!("a backend was unreachable, running the query again: {e}");
                attempts += 1;
            }
            first => {
                let rest = futures::stream::iter(first).chain(stream);
                return Ok(Output::Rows(Box::pin(RecordBatchStreamAdapter::new(
                    schema, rest,
                ))));
            }
        }
    }
}

/// A query or INSERT parsed and rewritten for DataFusion, planned and run;
/// `sql` is its text for the profile.
async fn run_parsed(
    fe: &Arc<Frontend>,
    session: &Session,
    mut parsed: datafusion::sql::parser::Statement,
    sql: &str,
    label: Option<String>,
    delete_rows: bool,
) -> Result<Output> {
    let started = chrono::Local::now();
    let assigned = match &mut parsed {
        datafusion::sql::parser::Statement::Statement(s) => crate::sql::assign::rewrite(s)?,
        _ => vec![],
    };
    let mut ctx_of_stmt = statement_ctx(fe, session, label, sql);
    ctx_of_stmt.delete_rows = delete_rows;
    if session
        .vars
        .get("enable_unique_key_partial_update")
        .is_some_and(|v| v == "true")
    {
        ctx_of_stmt.partial_columns = partial_update_columns(fe, session, &parsed)?;
        ctx_of_stmt.partial_strict = session
            .vars
            .get("enable_insert_strict")
            .is_none_or(|v| v == "true");
    }
    // Group commit takes INSERT ... VALUES without a label, as in Doris.
    if ctx_of_stmt.label.is_none()
        && ctx_of_stmt.partial_columns.is_empty()
        && crate::sql::rewrite::is_insert_values(&parsed)
    {
        ctx_of_stmt.group_commit = session.vars.group_commit();
    }
    let stmt = Arc::new(ctx_of_stmt);
    let (ctx, plan) = plan(fe, session, stmt.clone(), parsed).await?;
    match &plan {
        LogicalPlan::Dml(_) => {
            let df = ctx.execute_logical_plan(plan).await?;
            let batches = df.collect().await?;
            let affected = batches
                .first()
                .and_then(|b| {
                    b.column(0)
                        .as_any()
                        .downcast_ref::<arrow::array::UInt64Array>()
                        .map(|a| a.value(0))
                })
                .unwrap_or(0);
            let info = match stmt
                .outcome
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
            {
                Some(o) => format!(
                    "{{'label':'{}', 'status':'{}', 'txnId':'{}'}}",
                    o.label,
                    o.status.doris_name(),
                    o.txn_id
                ),
                None => String::new(),
            };
            Ok(Output::Ok { affected, info })
        }
        LogicalPlan::Ddl(_) | LogicalPlan::Statement(_) | LogicalPlan::Copy(_) => Err(
            TethysError::NotSupported("this statement is not supported".into()),
        ),
        _ => {
            let plan = with_select_limit(plan, session.vars.sql_select_limit())?;
            let names = output_names(&plan);
            let df = ctx.execute_logical_plan(plan).await?;
            let stream = if session.vars.enable_profile() {
                let physical = df.create_physical_plan().await?;
                let inner =
                    datafusion::physical_plan::execute_stream(physical.clone(), ctx.task_ctx())?;
                let pending = super::profiled::Pending {
                    store: fe.profiles.clone(),
                    plan: physical,
                    names,
                    id: stmt.query_id.clone(),
                    start: started,
                    user: session.user.clone(),
                    db: session.database.clone().unwrap_or_default(),
                    sql: sql.to_string(),
                };
                Box::pin(super::profiled::ProfiledStream::new(inner, pending))
            } else {
                df.execute_stream().await?
            };
            let stream = ended_on_drop(fe, stream, stmt.query_id.clone());
            let stream = if assigned.is_empty() {
                stream
            } else {
                keep_assigned(stream, assigned, session.assigned.clone())?
            };
            Ok(Output::Rows(stream))
        }
    }
}

/// The columns a query returns, planned but not run (COM_STMT_PREPARE);
/// `None` for statements that return no rows or are not plain queries.
pub(crate) async fn result_schema(
    fe: &Arc<Frontend>,
    session: &Session,
    stmt: Statement,
) -> Result<Option<SchemaRef>> {
    let mut parsed = match stmt {
        Statement::Query(q) => crate::sql::rewrite::parse_for_datafusion(&q)?,
        Statement::Bound(b) if !b.insert => crate::sql::rewrite::rewrite_for_datafusion(b.parsed)?,
        _ => return Ok(None),
    };
    let hidden = match &mut parsed {
        datafusion::sql::parser::Statement::Statement(s) => crate::sql::assign::rewrite(s)?.len(),
        _ => 0,
    };
    // Only the result's columns: no physical plan, no join hints.
    let stmt = Arc::new(statement_ctx(fe, session, None, ""));
    let (_, plan) = plan(fe, session, stmt, parsed).await?;
    if matches!(
        plan,
        LogicalPlan::Dml(_) | LogicalPlan::Ddl(_) | LogicalPlan::Statement(_)
    ) {
        return Ok(None);
    }
    let schema = plan.schema().as_arrow();
    let visible: Vec<usize> = (0..schema.fields().len().saturating_sub(hidden)).collect();
    Ok(Some(Arc::new(schema.project(&visible)?)))
}

/// Takes the hidden trailing columns of `@v := expr` (see `sql::assign`)
/// off a result, keeping their last row's values in `sink`.
fn keep_assigned(
    stream: SendableRecordBatchStream,
    vars: Vec<String>,
    sink: Arc<Mutex<Vec<(String, datafusion::scalar::ScalarValue)>>>,
) -> Result<SendableRecordBatchStream> {
    let schema = stream.schema();
    let visible = schema.fields().len().saturating_sub(vars.len());
    let indices: Vec<usize> = (0..visible).collect();
    let out_schema = Arc::new(schema.project(&indices)?);
    let mapped = stream.map(move |r| {
        let batch = r?;
        if batch.num_rows() > 0 {
            let last = batch.num_rows() - 1;
            let values = vars
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    datafusion::scalar::ScalarValue::try_from_array(batch.column(visible + i), last)
                        .map(|s| (v.clone(), s))
                })
                .collect::<datafusion::error::Result<Vec<_>>>()?;
            *sink.lock().unwrap_or_else(|p| p.into_inner()) = values;
        }
        Ok(batch.project(&indices)?)
    });
    Ok(Box::pin(RecordBatchStreamAdapter::new(out_schema, mapped)))
}

/// Under `enable_unique_key_partial_update`, the table columns an INSERT
/// with a column list gives, when its target is a merge-on-write UNIQUE
/// table and the list leaves columns out (as in Doris, other INSERTs are
/// ordinary ones).
fn partial_update_columns(
    fe: &Frontend,
    session: &Session,
    parsed: &datafusion::sql::parser::Statement,
) -> Result<Vec<u32>> {
    use datafusion::sql::sqlparser::ast::{Statement as Sql, TableObject};
    let datafusion::sql::parser::Statement::Statement(s) = parsed else {
        return Ok(vec![]);
    };
    let Sql::Insert(ins) = s.as_ref() else {
        return Ok(vec![]);
    };
    if ins.columns.is_empty() {
        return Ok(vec![]);
    }
    let TableObject::TableName(name) = &ins.table else {
        return Ok(vec![]);
    };
    let (db, tname) = match crate::session::table_name_of(name, &session.database) {
        Ok(n) => n,
        // A name of another shape is the planner's to refuse.
        Err(TethysError::Syntax(_)) => return Ok(vec![]),
        Err(e) => return Err(e),
    };
    let Ok(t) = table_snapshot(fe, &db, &tname) else {
        return Ok(vec![]);
    };
    let s = &t.schema;
    if s.keys_type != tethys_common::schema::KeysType::Unique || !s.merge_on_write {
        return Ok(vec![]);
    }
    let mut given = vec![];
    for c in &ins.columns {
        let name = c.to_string();
        let name = name.trim_matches('`');
        let i = s.index_of(name).ok_or_else(|| {
            TethysError::UnknownColumn(format!("Unknown column '{name}' in 'table list'"))
        })?;
        given.push(i as u32);
    }
    given.sort_unstable();
    given.dedup();
    if let Some(k) = (0..s.num_key_columns).find(|k| !given.contains(&(*k as u32))) {
        return Err(TethysError::Analysis(format!(
            "a partial column update must give every key column; {} is missing",
            s.columns[k].name
        )));
    }
    Ok(if given.len() == s.columns.len() {
        vec![]
    } else {
        given
    })
}

/// The names of a plan's output columns, as the client sees them.
fn output_names(plan: &datafusion::logical_expr::LogicalPlan) -> Vec<String> {
    plan.schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect()
}

/// A query's plan under `sql_select_limit` (MySQL's: at most that many rows
/// of a SELECT that has no LIMIT of its own).
fn with_select_limit(plan: LogicalPlan, limit: u64) -> Result<LogicalPlan> {
    if limit >= i64::MAX as u64 || matches!(plan, LogicalPlan::Limit(_)) {
        return Ok(plan);
    }
    Ok(datafusion::logical_expr::LogicalPlanBuilder::from(plan)
        .limit(0, Some(limit as usize))?
        .build()?)
}

/// `stream`, the result of query `query_id`: when it is dropped (read to the
/// end, failed, killed, timed out, its client gone) the query's runtime
/// filters leave the merge node and, with more than one backend alive (a
/// distributed plan), every backend is told to stop what of its stages
/// still runs there (`CancelQuery`; a LIMIT met early leaves stages
/// running too).
fn ended_on_drop(
    fe: &Arc<Frontend>,
    stream: SendableRecordBatchStream,
    query_id: String,
) -> SendableRecordBatchStream {
    struct Ended(Arc<Frontend>, String);
    impl Drop for Ended {
        fn drop(&mut self) {
            self.0.filter_merge.forget(&self.1);
            let alive = self.0.backends.alive();
            if alive.len() < 2 {
                return;
            }
            let Ok(rt) = tokio::runtime::Handle::try_current() else {
                return;
            };
            // To every backend at once: a backend busy with the query may
            // take a while to answer.
            for b in alive {
                let backends = self.0.backends.clone();
                let req = tethys_proto::CancelQueryRequest {
                    query_id: self.1.clone(),
                };
                rt.spawn(async move {
                    let sent = match backends.client(&b) {
                        Ok(c) => c.cancel_query(req).await.map(|_| ()),
                        Err(e) => Err(e),
                    };
                    if let Err(e) = sent {
                        tracing::debug!(backend = b.id, error = %e, "query not cancelled");
                    }
                });
            }
        }
    }
    let guard = Ended(fe.clone(), query_id);
    let schema = stream.schema();
    let inner = stream.map(move |b| {
        let _ = &guard;
        b
    });
    Box::pin(RecordBatchStreamAdapter::new(schema, inner))
}

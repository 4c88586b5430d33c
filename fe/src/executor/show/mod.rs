//! The SHOW statements that read the catalog, the backends and the
//! transaction manager (the `information_schema`-backed ones are
//! `crate::show`'s), and DESCRIBE.

use super::Fe;
use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use tethys_common::{Result, TethysError};

use crate::catalog::Distribution;
use crate::frontend::Frontend;
use crate::session::Session;
use crate::sql::statement::{ShowFilter, Statement};

mod cluster;
mod create_table;
mod loads;
mod meta;
mod tablets;

use super::{Output, nullable_string_rows, string_rows, table_snapshot};
use crate::metadata::fmt_time;

/// Runs a SHOW statement or DESCRIBE.
pub(super) async fn execute(fe: &Fe, session: &Session, stmt: Statement) -> Result<Output> {
    let sdb = &session.database;
    match stmt {
        Statement::ShowColumnStats { db, table, columns } => {
            let db = crate::session::resolve_db(sdb, &db)?;
            let t = table_snapshot(fe, &db, &table)?;
            string_rows(
                super::analyze::SHOW_COLUMNS,
                super::analyze::show_rows(&t, &columns),
            )
        }
        Statement::ShowDatabases(filter) => {
            let mut rows: Vec<Vec<String>> = fe
                .catalog
                .read()
                .databases
                .keys()
                .map(|d| vec![d.clone()])
                .collect();
            rows.push(vec!["information_schema".into()]);
            rows.sort();
            filtered(&["Database"], rows, &filter).await
        }
        Statement::ShowMeta(m) => meta::execute(fe, session, m).await,
        Statement::ShowCreateTable { db, name } => {
            let db = crate::session::resolve_db(sdb, &db)?;
            let t = table_snapshot(fe, &db, &name)?;
            string_rows(
                &["Table", "Create Table"],
                vec![vec![t.name.clone(), create_table::show_create_table(&t)]],
            )
        }
        Statement::ShowCreateDatabase(name) => {
            let d = fe
                .catalog
                .read()
                .database(&name)
                .map(|d| d.name.clone())
                .ok_or(TethysError::UnknownDatabase(name))?;
            string_rows(
                &["Database", "Create Database"],
                vec![vec![d.clone(), format!("CREATE DATABASE `{d}`")]],
            )
        }
        Statement::Describe { db, name, all } => {
            let db = crate::session::resolve_db(sdb, &db)?;
            let t = table_snapshot(fe, &db, &name)?;
            if all {
                return string_rows(&meta::DESCRIBE_ALL_COLUMNS, meta::describe_all_rows(&t));
            }
            let rows = meta::describe_rows(&t, false);
            string_rows(&meta::DESCRIBE_COLUMNS, rows)
        }
        Statement::ShowPartitions { db, table } => tablets::partitions(fe, sdb, db, table).await,
        Statement::ShowTablets {
            db,
            table,
            partition,
        } => tablets::tablets(fe, sdb, db, table, partition).await,
        Statement::ShowVariables { global, filter } => {
            let globals;
            let vars = if global {
                globals = fe.global_variables();
                &globals
            } else {
                &session.vars
            };
            let rows = vars
                .all()
                .into_iter()
                .map(|(n, v, d, c)| vec![n, v, d, if c { "1".into() } else { "0".into() }])
                .collect();
            filtered(
                &["Variable_name", "Value", "Default_Value", "Changed"],
                rows,
                &filter,
            )
            .await
        }
        Statement::ShowQueryProfile { id: None } => string_rows(
            &crate::profile::LIST_COLUMNS,
            fe.profiles.list().iter().map(|p| p.list_row()).collect(),
        ),
        Statement::ShowQueryProfile { id: Some(id) } => match fe.profiles.get(&id) {
            Some(p) => string_rows(
                &["Profile"],
                p.lines().into_iter().map(|l| vec![l]).collect(),
            ),
            None => Err(TethysError::Analysis(format!(
                "query profile {id} not found: it was not recorded (SET enable_profile = true \
                 before the query) or is no longer kept (the last {} are)",
                crate::profile::MAX_PROFILES
            ))),
        },
        Statement::ShowProcessList => cluster::processlist(fe, session).await,
        Statement::ShowBackends => cluster::backends(fe).await,
        Statement::ShowFrontends => cluster::frontends(),
        Statement::ShowColocationGroups => cluster::colocation_groups(fe),
        Statement::ShowTransaction { db, where_sql } => {
            loads::transactions(fe, sdb, db, where_sql).await
        }
        Statement::ShowLoad { db, stream, filter } => {
            loads::loads(fe, sdb, db, stream, filter).await
        }
        Statement::ShowEmpty { columns } => string_rows(&columns, vec![]),
        Statement::ShowEngines => string_rows(
            &[
                "Engine",
                "Support",
                "Comment",
                "Transactions",
                "XA",
                "Savepoints",
            ],
            vec![vec![
                "Olap".into(),
                "DEFAULT".into(),
                "Tethys columnar OLAP storage".into(),
                "YES".into(),
                "NO".into(),
                "NO".into(),
            ]],
        ),
        other => Err(super::not_in_family("show", &other)),
    }
}

/// Filters SHOW output by LIKE on the first column, or by a WHERE clause
/// evaluated with DataFusion over the rows.
async fn filtered(columns: &[&str], rows: Vec<Vec<String>>, filter: &ShowFilter) -> Result<Output> {
    let rows = rows
        .into_iter()
        .map(|r| r.into_iter().map(Some).collect())
        .collect();
    filtered_nullable(columns, rows, filter).await
}

/// [`filtered`] over rows that may hold NULLs.
pub(crate) async fn filtered_nullable(
    columns: &[&str],
    mut rows: Vec<Vec<Option<String>>>,
    filter: &ShowFilter,
) -> Result<Output> {
    if let Some(p) = &filter.like {
        let p = tethys_common::like::LikePattern::new(p);
        rows.retain(|r| r[0].as_deref().is_some_and(|v| p.matches(v)));
    }
    let out = nullable_string_rows(columns, rows)?;
    let Some(w) = &filter.where_sql else {
        return Ok(out);
    };
    let Output::Rows(stream) = out else {
        return Ok(out);
    };
    let schema = stream.schema();
    let batches: Vec<RecordBatch> = datafusion::physical_plan::common::collect(stream).await?;
    let ctx = SessionContext::new();
    let mut cfg = ctx.copied_config();
    cfg.options_mut().sql_parser.enable_ident_normalization = false;
    let ctx = SessionContext::new_with_config(cfg);
    ctx.register_table(
        "show_rows",
        Arc::new(MemTable::try_new(schema, vec![batches])?),
    )?;
    let df = ctx
        .sql(&format!("SELECT * FROM show_rows WHERE {w}"))
        .await?;
    Ok(Output::Rows(df.execute_stream().await?))
}

/// `WHERE id = n` or `WHERE label = 'x'` of SHOW TRANSACTION.
fn parse_txn_filter(where_sql: Option<&str>) -> Result<(Option<i64>, Option<String>)> {
    let usage =
        || TethysError::Analysis("SHOW TRANSACTION needs WHERE id = n or WHERE label = 'x'".into());
    let w = where_sql.ok_or_else(usage)?;
    let mut t = crate::sql::tokens::Tokens::new(w)?;
    let key = t.ident()?.to_ascii_lowercase();
    t.expect(&datafusion::sql::sqlparser::tokenizer::Token::Eq)?;
    let r = match key.as_str() {
        "id" => (Some(t.number()? as i64), None),
        "label" => (None, Some(t.string()?)),
        _ => return Err(usage()),
    };
    t.finish()?;
    Ok(r)
}

/// Stats of every tablet of `t`.
async fn tablet_stats(
    fe: &Arc<Frontend>,
    t: &crate::catalog::Table,
) -> Result<std::collections::HashMap<i64, tethys_proto::TabletStat>> {
    let tablets: Vec<_> = t
        .partitions
        .iter()
        .flat_map(|p| p.tablets.iter().cloned())
        .collect();
    fe.backends.tablet_stats(&tablets).await
}

pub(super) fn fmt_size(bytes: i64) -> String {
    let b = bytes as f64;
    if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.3} GB", b / 1024.0 / 1024.0 / 1024.0)
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.3} MB", b / 1024.0 / 1024.0)
    } else if b >= 1024.0 {
        format!("{:.3} KB", b / 1024.0)
    } else {
        format!("{bytes}.000 B")
    }
}

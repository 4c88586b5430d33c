//! DELETE and UPDATE, which Tethys runs as loads (`delete_update.rs`).

use super::Fe;

use tethys_common::Result;

use crate::session::Session;
use crate::sql::statement::Statement;

mod delete_update;

use super::query::{run_query, run_query_as};
use super::{Output, table_snapshot};

/// Runs DELETE or UPDATE.
pub(super) async fn execute(fe: &Fe, session: &Session, stmt: Statement) -> Result<Output> {
    let sdb = &session.database;
    match stmt {
        Statement::Delete {
            db,
            table,
            partitions,
            condition,
        } => {
            let db = crate::session::resolve_db(sdb, &db)?;
            let t = table_snapshot(fe, &db, &table)?;
            // Merge-on-write UNIQUE tables delete rows by key: the matching
            // rows are loaded back as deletes of their keys.
            if let Some(insert) = delete_update::delete_as_insert(&db, &t, &partitions, &condition)?
            {
                return run_query_as(fe, session, &insert, None, true).await;
            }
            let d = delete_update::delete(fe, &db, &t, &partitions, &condition).await?;
            Ok(Output::Ok {
                affected: 0,
                info: format!(
                    "{{'label':'{}', 'status':'VISIBLE', 'txnId':'{}'}}",
                    d.label, d.txn_id
                ),
            })
        }
        Statement::Update(sql) => {
            let insert = delete_update::update_as_insert(&sql, sdb, fe)?;
            run_query(fe, session, &insert, None).await
        }
        other => Err(super::not_in_family("dml", &other)),
    }
}

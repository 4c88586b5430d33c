//! DDL: databases, tables and partitions (CREATE, DROP, TRUNCATE, ALTER ...
//! PARTITION and table properties). The catalog change is logged first;
//! tablets are then created on (or dropped from) backends ([`tablets`]).

use super::Fe;

use tethys_common::Result;

use crate::session::Session;
use crate::sql::statement::Statement;

use super::{Output, ok};

mod alter;
mod create_table;
mod database;
mod tablets;

pub use tablets::ensure_all_tablets;

/// Runs a DDL statement: databases, tables, partitions, table properties.
pub(super) async fn execute(fe: &Fe, session: &mut Session, stmt: Statement) -> Result<Output> {
    let sdb = session.database.clone();
    match stmt {
        Statement::CreateDatabase {
            name,
            if_not_exists,
        } => {
            database::create_database(fe, &name, if_not_exists)?;
            Ok(ok())
        }
        Statement::DropDatabase { name, if_exists } => {
            database::drop_database(fe, &name, if_exists).await?;
            if session
                .database
                .as_deref()
                .is_some_and(|d| d.eq_ignore_ascii_case(&name))
            {
                session.database = None;
            }
            Ok(ok())
        }
        Statement::CreateTable(ct) => {
            create_table::create_table(fe, &sdb, &ct).await?;
            Ok(ok())
        }
        Statement::DropTable {
            db,
            name,
            if_exists,
        } => {
            alter::drop_table(fe, &sdb, &db, &name, if_exists).await?;
            Ok(ok())
        }
        Statement::TruncateTable {
            db,
            name,
            partitions,
        } => {
            alter::truncate_table(fe, &sdb, &db, &name, &partitions).await?;
            Ok(ok())
        }
        Statement::AddPartition {
            db,
            table,
            partition,
        } => {
            alter::add_partition(fe, &sdb, &db, &table, &partition).await?;
            Ok(ok())
        }
        Statement::DropPartition {
            db,
            table,
            name,
            if_exists,
        } => {
            alter::drop_partition(fe, &sdb, &db, &table, &name, if_exists).await?;
            Ok(ok())
        }
        Statement::SetTableProperties {
            db,
            table,
            properties,
        } => {
            alter::set_table_properties(fe, &sdb, &db, &table, &properties)?;
            Ok(ok())
        }
        other => Err(super::not_in_family("ddl", &other)),
    }
}

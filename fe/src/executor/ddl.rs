//! Databases, tables and partitions: CREATE, DROP, TRUNCATE, ALTER ...
//! PARTITION and table properties (the catalog edits are `crate::ddl`'s).

use std::sync::Arc;

use tethys_common::Result;

use crate::ddl;
use crate::frontend::Frontend;
use crate::session::Session;
use crate::sql::statement::Statement;

use super::{Output, ok};

/// Runs one of the statements this module's doc names.
pub(super) async fn execute(
    fe: &Arc<Frontend>,
    session: &mut Session,
    stmt: Statement,
) -> Result<Output> {
    let sdb = session.database.clone();
    match stmt {
        Statement::CreateDatabase {
            name,
            if_not_exists,
        } => {
            ddl::create_database(fe, &name, if_not_exists)?;
            Ok(ok())
        }
        Statement::DropDatabase { name, if_exists } => {
            ddl::drop_database(fe, &name, if_exists).await?;
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
            ddl::create_table(fe, &sdb, &ct).await?;
            Ok(ok())
        }
        Statement::DropTable {
            db,
            name,
            if_exists,
        } => {
            ddl::drop_table(fe, &sdb, &db, &name, if_exists).await?;
            Ok(ok())
        }
        Statement::TruncateTable {
            db,
            name,
            partitions,
        } => {
            ddl::truncate_table(fe, &sdb, &db, &name, &partitions).await?;
            Ok(ok())
        }
        Statement::AddPartition {
            db,
            table,
            partition,
        } => {
            ddl::add_partition(fe, &sdb, &db, &table, &partition).await?;
            Ok(ok())
        }
        Statement::DropPartition {
            db,
            table,
            name,
            if_exists,
        } => {
            ddl::drop_partition(fe, &sdb, &db, &table, &name, if_exists).await?;
            Ok(ok())
        }
        Statement::SetTableProperties {
            db,
            table,
            properties,
        } => {
            ddl::set_table_properties(fe, &sdb, &db, &table, &properties)?;
            Ok(ok())
        }
        other => Err(super::not_in_family("ddl", &other)),
    }
}

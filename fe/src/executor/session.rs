//! What changes only the session: USE, SET, PREPARE / EXECUTE /
//! DEALLOCATE, and BEGIN / COMMIT / ROLLBACK.

use super::Fe;

use tethys_common::{Result, TethysError};

use crate::session::Session;
use crate::sql::statement::Statement;

use super::{Output, ok};

/// Runs one of the statements this module's doc names.
pub(super) async fn execute(fe: &Fe, session: &mut Session, stmt: Statement) -> Result<Output> {
    match stmt {
        Statement::Use(db) => {
            let name = if db.eq_ignore_ascii_case("information_schema") {
                "information_schema".to_string()
            } else {
                fe.catalog
                    .read()
                    .database(&db)
                    .map(|d| d.name.clone())
                    .ok_or(TethysError::UnknownDatabase(db))?
            };
            session.database = Some(name);
            Ok(ok())
        }
        Statement::Prepare { name, source } => {
            let max = fe.limits.max_prepared_stmts.load(std::sync::atomic::Ordering::Relaxed);
            super::prepared::prepare(session, &name, source, max)?;
            Ok(ok())
        }
        Statement::ExecutePrepared { name, using } => {
            super::prepared::execute(fe, session, &name, &using).await
        }
        Statement::Deallocate(name) => {
            super::prepared::deallocate(session, &name)?;
            Ok(ok())
        }
        Statement::Set(set) => {
            super::set_var::execute(fe, session, set).await?;
            Ok(ok())
        }
        Statement::Begin => Err(TethysError::NotSupported(
            "explicit transactions (BEGIN) are not supported yet; every statement commits on its own".into(),
        )),
        Statement::Commit | Statement::Rollback => Ok(ok()),
        other => Err(super::not_in_family("session", &other)),
    }
}

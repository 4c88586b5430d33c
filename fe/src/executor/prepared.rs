//! SQL-level prepared statements, as the `mysql` shell uses them:
//!
//! ```sql
//! PREPARE by_key FROM 'SELECT * FROM t WHERE k = ?';
//! SET @k = 1;
//! EXECUTE by_key USING @k;
//! DEALLOCATE PREPARE by_key;
//! ```
//!
//! The statement is parsed once and kept per session; EXECUTE binds the
//! user variables' values into it (`sql::params`), the way
//! COM_STMT_EXECUTE binds its parameters.

use std::sync::Arc;

use datafusion::scalar::ScalarValue;
use tethys_common::{Result, TethysError};

use crate::executor::{self, Output};
use crate::frontend::Frontend;
use crate::session::Session;
use crate::sql::params::{Param, Prepared};
use crate::sql::statement::PrepareSource;

/// `PREPARE name FROM ...`: parses the statement once and keeps it; at
/// most `max` prepared statements in the whole server.
pub fn prepare(session: &mut Session, name: &str, source: PrepareSource, max: usize) -> Result<()> {
    let text = match source {
        PrepareSource::Text(t) => t,
        PrepareSource::UserVar(v) => match session.user_vars.get(&v) {
            Some(ScalarValue::Utf8(Some(s))) => s.clone(),
            _ => {
                return Err(TethysError::Analysis(format!(
                    "PREPARE {name} FROM @{v}: @{v} does not hold a statement's text"
                )));
            }
        },
    };
    let prepared = Prepared::new(&text)?;
    session.prepared.set_named(name, prepared, max)
}

/// `EXECUTE name USING @a, ...`: the kept statement with the variables'
/// values bound, not parsed again.
pub async fn execute(
    fe: &Arc<Frontend>,
    session: &mut Session,
    name: &str,
    using: &[String],
) -> Result<Output> {
    let values: Vec<Param> = using
        .iter()
        .map(|v| param(session.user_vars.get(v).unwrap_or(&ScalarValue::Null)))
        .collect();
    let stmt = session
        .prepared
        .named(name)
        .ok_or_else(|| {
            TethysError::Analysis(format!(
                "Unknown prepared statement handler ({name}) given to EXECUTE"
            ))
        })?
        .bind(&values)?;
    Box::pin(executor::execute(fe, session, stmt)).await
}

/// `DEALLOCATE PREPARE name`.
pub fn deallocate(session: &mut Session, name: &str) -> Result<()> {
    if session.prepared.deallocate(name) {
        Ok(())
    } else {
        Err(TethysError::Analysis(format!(
            "Unknown prepared statement handler ({name}) given to DEALLOCATE PREPARE"
        )))
    }
}

/// A user variable's value as a parameter.
fn param(v: &ScalarValue) -> Param {
    if v.is_null() {
        return Param::Null;
    }
    match v {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Param::Text(s.clone()),
        ScalarValue::Boolean(Some(b)) => Param::Bool(*b),
        v if v.data_type().is_numeric() => Param::number(&v.to_string()),
        other => Param::Text(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_become_parameters() {
        assert_eq!(
            param(&ScalarValue::Int64(Some(-3))),
            Param::Number("-3".into())
        );
        assert_eq!(
            param(&ScalarValue::Utf8(Some("it's".into()))),
            Param::Text("it's".into())
        );
        assert_eq!(
            param(&ScalarValue::Decimal128(Some(1234), 10, 2)),
            Param::Number("12.34".into())
        );
        assert_eq!(param(&ScalarValue::Utf8(None)), Param::Null);
        assert_eq!(param(&ScalarValue::Boolean(Some(true))), Param::Bool(true));
    }

    #[test]
    fn prepare_checks_and_keeps_the_statement() {
        let mut s = Session::new(1, "root".into(), "h".into());
        let text = |t: &str| PrepareSource::Text(t.into());
        prepare(&mut s, "q", text("SELECT ? + 1"), 2).unwrap();
        assert!(s.prepared.named("Q").is_some());
        assert!(prepare(&mut s, "bad", text("SELEC 1"), 2).is_err());
        assert!(prepare(&mut s, "v", PrepareSource::UserVar("none".into()), 2).is_err());
        // At most two; preparing a name again replaces it.
        prepare(&mut s, "r", text("SELECT 2"), 2).unwrap();
        prepare(&mut s, "r", text("SELECT 3"), 2).unwrap();
        assert!(matches!(
            prepare(&mut s, "t", text("SELECT 4"), 2),
            Err(TethysError::TooManyPreparedStatements(2))
        ));
        deallocate(&mut s, "R").unwrap();
        deallocate(&mut s, "Q").unwrap();
        assert!(deallocate(&mut s, "q").is_err());
    }
}

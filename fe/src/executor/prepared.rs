//! SQL-level prepared statements, as the `mysql` shell uses them:
//!
//! ```sql
//! PREPARE by_key FROM 'SELECT * FROM t WHERE k = ?';
//! SET @k = 1;
//! EXECUTE by_key USING @k;
//! DEALLOCATE PREPARE by_key;
//! ```
//!
//! The statement is kept per session; EXECUTE binds the user variables'
//! values as literals, the way COM_STMT_EXECUTE binds its parameters.

use std::sync::Arc;

use datafusion::scalar::ScalarValue;
use tethys_common::{Result, TethysError};

use crate::executor::{self, Output};
use crate::frontend::Frontend;
use crate::session::Session;
use crate::sql::params::{bind_params, count_placeholders, number_literal, quote_str};
use crate::sql::statement::PrepareSource;

/// `PREPARE name FROM ...`: checks the statement's syntax and keeps it;
/// at most `max` per session.
pub fn prepare(session: &mut Session, name: &str, source: PrepareSource, max: usize) -> Result<()> {
    let key = name.to_ascii_lowercase();
    if session.prepared.len() >= max && !session.prepared.contains_key(&key) {
        return Err(TethysError::TooManyPreparedStatements(max));
    }
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
    let n = count_placeholders(&text);
    crate::sql::parse(&bind_params(&text, &vec!["NULL".to_string(); n])?)?;
    session.prepared.insert(key, text);
    Ok(())
}

/// `EXECUTE name USING @a, ...`.
pub async fn execute(
    fe: &Arc<Frontend>,
    session: &mut Session,
    name: &str,
    using: &[String],
) -> Result<Output> {
    let text = session
        .prepared
        .get(&name.to_ascii_lowercase())
        .cloned()
        .ok_or_else(|| {
            TethysError::Analysis(format!(
                "Unknown prepared statement handler ({name}) given to EXECUTE"
            ))
        })?;
    if count_placeholders(&text) != using.len() {
        return Err(TethysError::Analysis(format!(
            "Incorrect arguments to EXECUTE: {name} takes {} parameters, {} given",
            count_placeholders(&text),
            using.len()
        )));
    }
    let values: Vec<String> = using
        .iter()
        .map(|v| literal(session.user_vars.get(v).unwrap_or(&ScalarValue::Null)))
        .collect();
    let stmt = crate::sql::parse(&bind_params(&text, &values)?)?;
    Box::pin(executor::execute(fe, session, stmt)).await
}

/// `DEALLOCATE PREPARE name`.
pub fn deallocate(session: &mut Session, name: &str) -> Result<()> {
    session
        .prepared
        .remove(&name.to_ascii_lowercase())
        .map(|_| ())
        .ok_or_else(|| {
            TethysError::Analysis(format!(
                "Unknown prepared statement handler ({name}) given to DEALLOCATE PREPARE"
            ))
        })
}

/// A user variable's value as a SQL literal.
fn literal(v: &ScalarValue) -> String {
    if v.is_null() {
        return "NULL".into();
    }
    match v {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => quote_str(s),
        ScalarValue::Boolean(Some(b)) => if *b { "TRUE" } else { "FALSE" }.into(),
        v if v.data_type().is_numeric() => number_literal(&v.to_string()),
        other => quote_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_become_literals() {
        assert_eq!(literal(&ScalarValue::Int64(Some(-3))), "(-3)");
        assert_eq!(literal(&ScalarValue::Utf8(Some("it's".into()))), "'it''s'");
        assert_eq!(
            literal(&ScalarValue::Decimal128(Some(1234), 10, 2)),
            "12.34"
        );
        assert_eq!(literal(&ScalarValue::Utf8(None)), "NULL");
        assert_eq!(literal(&ScalarValue::Boolean(Some(true))), "TRUE");
    }

    #[test]
    fn prepare_checks_and_keeps_the_text() {
        let mut s = Session::new(1, "root".into(), "h".into());
        let text = |t: &str| PrepareSource::Text(t.into());
        prepare(&mut s, "q", text("SELECT ? + 1"), 2).unwrap();
        assert!(s.prepared.contains_key("q"));
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

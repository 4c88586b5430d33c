//! Executing `SET`: system variables through `Variables::set` (which
//! validates each), user variables keeping the type of their value, and
//! `SET NAMES` / `SET CHARACTER SET` as Doris takes them.
//!
//! ```sql
//! set autocommit=1, sql_mode = concat(@@sql_mode,',STRICT_TRANS_TABLES')
//! ```
//!
//! Items run left to right, each seeing what the earlier ones set, and a
//! failing item leaves the session as it was (MySQL's rule); an
//! expression is evaluated as `SELECT <expr>` through the normal query path,
//! so functions, `@@var` and `@var` references and `CASE` all work.

use std::sync::Arc;

use datafusion::scalar::ScalarValue;
use tethys_common::{Result, TethysError};

use crate::catalog::journal::EditOp;
use crate::frontend::Frontend;
use crate::planner::run::collect_query;
use crate::session::charsets;
use crate::session::{Session, Variables};
use crate::sql::set::{SetItem, SetScope, SetStatement, SetValue};

/// Applies a SET statement to the session.
pub async fn execute(fe: &Arc<Frontend>, session: &mut Session, stmt: SetStatement) -> Result<()> {
    match stmt {
        SetStatement::Transaction => Ok(()),
        SetStatement::Names {
            charset, collate, ..
        } => set_names(&charset, collate.as_deref()),
        // All or nothing, as in MySQL: items run on a copy of the session,
        // which replaces it only when every one succeeded.
        SetStatement::Vars(items) => {
            let mut staged = session.staged();
            let mut globals = fe.global_variables();
            let mut global_names = vec![];
            for item in items {
                if item.scope == SetScope::Global {
                    global_names.push(item.name.clone());
                }
                set_one(fe, &mut staged, &mut globals, item).await?;
            }
            // SET GLOBAL is durable (the edit log) and applies to sessions
            // that start later, not to this one, as in MySQL and Doris.
            for name in global_names {
                let Some(name) = Variables::canonical_name(&name) else {
                    continue;
                };
                let value = globals.get(name).unwrap_or_default();
                fe.catalog.mutate(|_, _| {
                    Ok((
                        EditOp::SetGlobalVariable {
                            name: name.to_string(),
                            value,
                        },
                        (),
                    ))
                })?;
            }
            session.vars = staged.vars;
            session.user_vars = staged.user_vars;
            Ok(())
        }
    }
}

/// `SET NAMES` / `SET CHARACTER SET` as Doris takes them: any UTF-8
/// character set (what Tethys always speaks) and, after `COLLATE`, any UTF-8
/// collation name are accepted and change nothing; anything else is refused.
fn set_names(cs: &str, collate: Option<&str>) -> Result<()> {
    if !cs.eq_ignore_ascii_case("default") && charsets::charset(cs).is_none() {
        return Err(TethysError::UnknownCharset(cs.into()));
    }
    match collate {
        Some(c) if !c.to_ascii_lowercase().starts_with("utf8") => {
            Err(TethysError::UnknownCollation(c.to_string()))
        }
        _ => Ok(()),
    }
}

async fn set_one(
    fe: &Arc<Frontend>,
    session: &mut Session,
    globals: &mut Variables,
    item: SetItem,
) -> Result<()> {
    match item.scope {
        SetScope::User => {
            let value = match item.value {
                SetValue::Str(s) => ScalarValue::Utf8(Some(s)),
                SetValue::Default => {
                    return Err(TethysError::Syntax(format!(
                        "You have an error in your SQL syntax: a user variable (@{}) has no DEFAULT",
                        item.name
                    )));
                }
                SetValue::Word(e) | SetValue::Expr(e) => evaluate(fe, session, &e).await?,
            };
            session.user_vars.insert(item.name, value);
            Ok(())
        }
        SetScope::Session | SetScope::Global => {
            let text = match item.value {
                // NULL is no value: only character_set_results takes it.
                SetValue::Word(w)
                    if w.eq_ignore_ascii_case("null") && item.name != "character_set_results" =>
                {
                    return Err(TethysError::WrongVariableValue(item.name, "NULL".into()));
                }
                SetValue::Word(w) => w,
                SetValue::Str(s) => s,
                SetValue::Default => "default".into(),
                SetValue::Expr(e) => match e.parse::<i64>() {
                    Ok(n) => n.to_string(),
                    Err(_) => {
                        let v = evaluate(fe, session, &e).await?;
                        system_value(&item.name, v)?
                    }
                },
            };
            if item.scope == SetScope::Global {
                globals.set(&item.name, &text)
            } else {
                session.vars.set(&item.name, &text)
            }
        }
    }
}

/// `SELECT <expr>`'s one value (NULL when it returns no row).
async fn evaluate(fe: &Arc<Frontend>, session: &Session, expr: &str) -> Result<ScalarValue> {
    let batches = collect_query(fe, session, &format!("SELECT {expr}")).await?;
    let Some(batch) = batches.iter().find(|b| b.num_rows() > 0) else {
        return Ok(ScalarValue::Null);
    };
    if batch.num_rows() > 1 || batches.iter().map(|b| b.num_rows()).sum::<usize>() > 1 {
        return Err(TethysError::Analysis(
            "Subquery returns more than 1 row".into(),
        ));
    }
    Ok(ScalarValue::try_from_array(batch.column(0), 0)?)
}

/// A system variable's text from an evaluated value.
fn system_value(name: &str, v: ScalarValue) -> Result<String> {
    if v.is_null() {
        return Err(TethysError::WrongVariableValue(name.into(), "NULL".into()));
    }
    Ok(match v {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => s,
        ScalarValue::Boolean(Some(b)) => if b { "1" } else { "0" }.to_string(),
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluated_values_become_variable_text() {
        assert_eq!(
            system_value("sql_mode", ScalarValue::Utf8(Some("A,B".into()))).unwrap(),
            "A,B"
        );
        assert_eq!(
            system_value("autocommit", ScalarValue::Boolean(Some(true))).unwrap(),
            "1"
        );
        assert_eq!(
            system_value("batch_size", ScalarValue::Int64(Some(7))).unwrap(),
            "7"
        );
        assert!(matches!(
            system_value("sql_mode", ScalarValue::Utf8(None)),
            Err(TethysError::WrongVariableValue(_, v)) if v == "NULL"
        ));
    }

    #[test]
    fn names_accepts_utf8_and_refuses_the_rest() {
        set_names("utf8", Some("utf8_general_ci")).unwrap();
        set_names("utf8mb4", None).unwrap();
        set_names("default", None).unwrap();
        assert!(matches!(
            set_names("latin1", None),
            Err(TethysError::UnknownCharset(_))
        ));
        assert!(matches!(
            set_names("utf8mb4", Some("latin1_swedish_ci")),
            Err(TethysError::UnknownCollation(_))
        ));
    }
}

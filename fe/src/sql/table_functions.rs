//! Doris' table-valued functions in FROM:
//!
//! ```sql
//! INSERT INTO t SELECT number, 'x' FROM numbers("number" = "20");
//! ```
//!
//! `numbers("number" = "N")` is the rows 0 .. N-1 of one BIGINT column
//! `number`; the FE reads it as `(SELECT value AS number FROM range(N))`.
//! Another property is refused by name.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, Ident, ObjectNamePart, Statement,
    TableAlias, TableFactor, Value, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::MySqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use tethys_common::{Result, TethysError};

/// Rewrites every `numbers(...)` of a statement.
pub fn rewrite(stmt: &mut Statement) -> Result<()> {
    let mut v = Tvfs { error: None };
    let _ = stmt.visit(&mut v);
    match v.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

struct Tvfs {
    error: Option<TethysError>,
}

/// `"key" = "value"` of one argument.
fn property(arg: &FunctionArg) -> Option<(String, String)> {
    let text = |e: &Expr| match e {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Some(s.clone()),
            Value::Number(n, _) => Some(n.clone()),
            _ => None,
        },
        Expr::Identifier(i) => Some(i.value.clone()),
        _ => None,
    };
    match arg {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        })) => Some((text(left)?, text(right)?)),
        FunctionArg::Named {
            name,
            arg: FunctionArgExpr::Expr(e),
            ..
        } => Some((name.value.clone(), text(e)?)),
        _ => None,
    }
}

/// The subquery `numbers(...)` stands for.
fn numbers(args: &[FunctionArg]) -> Result<TableFactor> {
    let mut count = None;
    for a in args {
        match property(a) {
            Some((k, v)) if k.eq_ignore_ascii_case("number") => {
                let n: u64 = v.trim().parse().map_err(|_| {
                    TethysError::Analysis(format!(
                        "numbers: \"number\" must be a non-negative integer, not '{v}'"
                    ))
                })?;
                count = Some(n);
            }
            Some((k, _)) => {
                return Err(TethysError::NotSupported(format!(
                    "numbers: the property \"{k}\" is not supported (only \"number\")"
                )));
            }
            None => {
                return Err(TethysError::Analysis(
                    "numbers takes properties: numbers(\"number\" = \"N\")".into(),
                ));
            }
        }
    }
    let n = count.ok_or_else(|| {
        TethysError::Analysis("numbers: the property \"number\" is required".into())
    })?;
    let sql = format!("SELECT value AS number FROM range({n})");
    let query = Parser::new(&MySqlDialect {})
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
        .map_err(|e| TethysError::Internal(e.to_string()))?;
    Ok(TableFactor::Derived {
        lateral: false,
        subquery: query,
        alias: None,
        sample: None,
    })
}

impl VisitorMut for Tvfs {
    type Break = ();

    fn pre_visit_table_factor(&mut self, tf: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::Table {
            name,
            alias,
            args: Some(args),
            ..
        } = tf
        else {
            return ControlFlow::Continue(());
        };
        let is_numbers = name.0.len() == 1
            && matches!(name.0.last(), Some(ObjectNamePart::Identifier(i)) if i.value.eq_ignore_ascii_case("numbers"));
        if !is_numbers {
            return ControlFlow::Continue(());
        }
        let alias = alias.take().unwrap_or(TableAlias {
            explicit: true,
            name: Ident::new("numbers"),
            columns: vec![],
            at: None,
        });
        match numbers(&args.args) {
            Ok(mut derived) => {
                if let TableFactor::Derived { alias: a, .. } = &mut derived {
                    *a = Some(alias);
                }
                *tf = derived;
                ControlFlow::Continue(())
            }
            Err(e) => {
                self.error = Some(e);
                ControlFlow::Break(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> Result<String> {
        let mut s = Parser::parse_sql(&MySqlDialect {}, sql)
            .map_err(|e| TethysError::Syntax(e.to_string()))?
            .remove(0);
        rewrite(&mut s)?;
        Ok(s.to_string())
    }

    #[test]
    fn numbers_is_a_range() {
        let s = rewritten("select number from numbers(\"number\" = \"20\") t").expect("rewrites");
        assert!(
            s.contains("FROM (SELECT value AS number FROM range(20)) t"),
            "{s}"
        );
        let s = rewritten("select * from numbers('number' = '3')").expect("rewrites");
        assert!(s.contains("AS numbers"), "{s}");
        let e = rewritten("select * from numbers(\"backend_num\" = \"2\", \"number\" = \"3\")")
            .expect_err("refused");
        assert!(e.to_string().contains("backend_num"), "{e}");
    }
}

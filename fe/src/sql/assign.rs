//! MySQL's `@var := expr` inside a SELECT list. MariaDB Connector/ODBC's
//! `SQLColumns` selects
//!
//! ```sql
//! CASE DATA_TYPE WHEN 'bit' THEN @dt:= IF(...) WHEN 'tinyint' THEN @dt:=(-6) ... END AS DATA_TYPE,
//! ..., @tol:=CAST(CASE @dt WHEN (-7) THEN 1 ... END AS SIGNED) AS BUFFER_LENGTH
//! ```
//!
//! MySQL evaluates a row's select list left to right, so a variable read
//! after its assignment sees the value assigned in the same row, and after
//! the statement the variable holds the last row's value. The rewrite
//! replaces each assignment by its value, each later read by that value,
//! and appends one hidden column per variable whose last value the
//! executor stores into the session when the result has been sent. A
//! variable read before it is assigned would carry a value from one row to
//! the next (`@n := @n + 1`), which a set-oriented engine does not do: that
//! is refused, as is an assignment whose value cannot be told apart from
//! the expression around it.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, Ident,
    SelectItem, SetExpr, Statement, visit_expressions, visit_expressions_mut,
};
use tethys_common::{Result, TethysError};

/// Prefix of the hidden columns that carry an assigned variable's value.
pub const HIDDEN_PREFIX: &str = "__tethys_assign_";

/// Rewrites the assignments of a query's outermost SELECT list; returns
/// the variables (lower case) whose values the trailing hidden columns
/// carry, in order. Statements without assignments are left alone.
pub fn rewrite(stmt: &mut Statement) -> Result<Vec<String>> {
    let Statement::Query(q) = stmt else {
        return Ok(vec![]);
    };
    let SetExpr::Select(sel) = q.body.as_mut() else {
        return Ok(vec![]);
    };
    if !sel.projection.iter().any(item_assigns) {
        return Ok(vec![]);
    }
    let mut bound: BTreeMap<String, Expr> = BTreeMap::new();
    for item in sel.projection.iter_mut() {
        let expr = match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
            _ => continue,
        };
        mark_targets(expr);
        let assigned = assigned_vars(expr);
        // Reads of variables assigned earlier in the row become their values;
        // a read of one assigned later (or here) would cross rows.
        let mut err = None;
        let _ = visit_expressions_mut(expr, |e| {
            if let Some(name) = var_name(e) {
                if let Some(v) = bound.get(&name) {
                    *e = Expr::Nested(Box::new(v.clone()));
                } else if assigned.contains(&name) {
                    err = Some(name);
                }
            }
            ControlFlow::<()>::Continue(())
        });
        if let Some(name) = err {
            return Err(TethysError::NotSupported(format!(
                "@{name} is read before it is assigned in the same row: values carried from one \
                 row to the next (@{name} := @{name} + 1) are not supported"
            )));
        }
        for name in assigned {
            let value = value_of(expr, &name).ok_or_else(|| {
                TethysError::NotSupported(format!(
                    "the value assigned to @{name} cannot be told apart from the expression around \
                     it; assign it as a whole select item (@{name} := expr)"
                ))
            })?;
            bound.insert(name, value);
        }
        *expr = strip(expr.clone());
    }
    let vars: Vec<String> = bound.keys().cloned().collect();
    for (i, name) in vars.iter().enumerate() {
        sel.projection.push(SelectItem::ExprWithAlias {
            expr: bound[name].clone(),
            alias: Ident::with_quote('`', format!("{HIDDEN_PREFIX}{i}")),
        });
    }
    Ok(vars)
}

fn item_assigns(item: &SelectItem) -> bool {
    match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
            let mut found = false;
            let _ = visit_expressions(e, |x| {
                found |= matches!(
                    x,
                    Expr::BinaryOp {
                        op: BinaryOperator::Assignment,
                        ..
                    }
                );
                ControlFlow::<()>::Continue(())
            });
            found
        }
        _ => false,
    }
}

/// Marks an assignment's target, so it is not taken for a read.
const TARGET: &str = "\u{1}assign:";

/// Turns the `@v` of each `@v := x` in `e` into a marked target.
fn mark_targets(e: &mut Expr) {
    let _ = visit_expressions_mut(e, |x| {
        if let Expr::BinaryOp {
            left,
            op: BinaryOperator::Assignment,
            ..
        } = x
            && let Some(name) = var_name(left)
        {
            **left = Expr::Identifier(Ident::new(format!("{TARGET}{name}")));
        }
        ControlFlow::<()>::Continue(())
    });
}

/// `@name` (lower case) if `e` reads a user variable.
fn var_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Identifier(i)
            if i.quote_style.is_none()
                && i.value.starts_with('@')
                && !i.value.starts_with("@@") =>
        {
            Some(i.value.trim_start_matches('@').to_ascii_lowercase())
        }
        _ => None,
    }
}

/// `(name, value)` of a (marked) assignment `@name := value`.
fn assignment(e: &Expr) -> Option<(String, &Expr)> {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Assignment,
            right,
        } => match left.as_ref() {
            Expr::Identifier(i) => {
                Some((i.value.strip_prefix(TARGET)?.to_string(), right.as_ref()))
            }
            _ => None,
        },
        _ => None,
    }
}

/// The variables assigned anywhere in `e`.
fn assigned_vars(e: &Expr) -> Vec<String> {
    let mut out = vec![];
    let _ = visit_expressions(e, |x| {
        if let Some((name, _)) = assignment(x)
            && !out.contains(&name)
        {
            out.push(name);
        }
        ControlFlow::<()>::Continue(())
    });
    out
}

/// `e` with every `@v := x` replaced by `x`.
fn strip(mut e: Expr) -> Expr {
    let _ = visit_expressions_mut(&mut e, |x| {
        if let Expr::BinaryOp {
            op: BinaryOperator::Assignment,
            right,
            ..
        } = x
        {
            *x = Expr::Nested(Box::new(strip(right.as_ref().clone())));
        }
        ControlFlow::<()>::Continue(())
    });
    e
}

/// The value `@name` holds after `e` is evaluated, when every way through
/// `e` assigns it the value `e` itself takes (or one of its branches).
fn value_of(e: &Expr, name: &str) -> Option<Expr> {
    if let Some((n, v)) = assignment(e) {
        return (n == name).then(|| strip(v.clone()));
    }
    match e {
        Expr::Nested(inner) => value_of(inner, name),
        Expr::Cast { expr, .. } => value_of(expr, name),
        Expr::Case {
            case_token,
            end_token,
            operand,
            conditions,
            else_result,
        } => {
            let mut conds = conditions.clone();
            for c in conds.iter_mut() {
                c.condition = strip(c.condition.clone());
                c.result = value_of(&c.result, name)?;
            }
            Some(Expr::Case {
                case_token: case_token.clone(),
                end_token: end_token.clone(),
                operand: operand
                    .as_ref()
                    .map(|o| Box::new(strip(o.as_ref().clone()))),
                conditions: conds,
                else_result: Some(Box::new(value_of(else_result.as_deref()?, name)?)),
            })
        }
        Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("if") => {
            let FunctionArguments::List(list) = &f.args else {
                return None;
            };
            let args: Vec<&Expr> = list
                .args
                .iter()
                .map(|a| match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) => Some(x),
                    _ => None,
                })
                .collect::<Option<_>>()?;
            let [c, a, b] = args.as_slice() else {
                return None;
            };
            let mut g: Function = f.clone();
            let FunctionArguments::List(l) = &mut g.args else {
                return None;
            };
            l.args = vec![
                FunctionArg::Unnamed(FunctionArgExpr::Expr(strip((*c).clone()))),
                FunctionArg::Unnamed(FunctionArgExpr::Expr(value_of(a, name)?)),
                FunctionArg::Unnamed(FunctionArgExpr::Expr(value_of(b, name)?)),
            ];
            Some(Expr::Function(g))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::MySqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn rewritten(sql: &str) -> Result<(String, Vec<String>)> {
        let mut stmt = Parser::parse_sql(&MySqlDialect {}, sql)
            .expect("parses")
            .remove(0);
        let vars = rewrite(&mut stmt)?;
        Ok((stmt.to_string(), vars))
    }

    #[test]
    fn later_reads_see_the_value_assigned_in_the_row() {
        let (sql, vars) = rewritten(
            "SELECT CASE t WHEN 'a' THEN @dt := 1 ELSE @dt := IF(p = 1, 2, 3) END AS k, \
             IF(p = 1, @x := 2, @x := 3) AS xx, \
             @tol := CAST(CASE @dt WHEN 1 THEN 5 ELSE 6 END AS SIGNED) AS b FROM c",
        )
        .unwrap();
        assert_eq!(vars, vec!["dt", "tol", "x"]);
        assert!(
            sql.contains("CASE (CASE t WHEN 'a' THEN 1 ELSE IF(p = 1, 2, 3) END) WHEN 1"),
            "{sql}"
        );
        assert!(sql.ends_with("AS `__tethys_assign_2` FROM c"), "{sql}");
        assert!(!sql.contains(":="), "{sql}");
    }

    #[test]
    fn values_carried_across_rows_are_refused() {
        assert!(matches!(
            rewritten("SELECT @n := @n + 1 AS rn, x FROM t"),
            Err(TethysError::NotSupported(m)) if m.contains("@n")
        ));
        assert!(matches!(
            rewritten("SELECT (@a := 1) + 2 FROM t"),
            Err(TethysError::NotSupported(m)) if m.contains("@a")
        ));
        // Assigned on one branch only: the row's value is not an expression.
        assert!(matches!(
            rewritten("SELECT CASE WHEN p THEN @a := 1 ELSE 2 END FROM t"),
            Err(TethysError::NotSupported(m)) if m.contains("@a")
        ));
        assert_eq!(
            rewritten("SELECT @a, 1 FROM t").unwrap().1,
            Vec::<String>::new()
        );
    }
}

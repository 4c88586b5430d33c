//! Doris-isms rewritten before DataFusion plans a query: Doris / MySQL type
//! names in `CAST` (`DATETIME`, `LARGEINT`, `SIGNED`, `DATEV2`, ...), and
//! `x + INTERVAL n unit` / `x - INTERVAL n unit` as Doris' `date_add` /
//! `date_sub` (a DATE plus hours is a DATETIME there; DataFusion would drop
//! the hours).

use std::ops::ControlFlow;

use datafusion::sql::parser::{DFParser, Statement as DFStatement};
use std::collections::HashSet;

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, DataType, ExactNumberInfo, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArgumentList, FunctionArguments, Ident, ObjectName, SelectItem, SetExpr, Statement,
    TimezoneInfo, visit_expressions_mut,
};
use datafusion::sql::sqlparser::dialect::MySqlDialect;
use tethys_common::{Result, TethysError};

fn fix_type(t: &mut DataType) {
    let replacement = match t {
        DataType::Datetime(_) => Some(DataType::Timestamp(Some(6), TimezoneInfo::None)),
        DataType::Signed | DataType::SignedInteger => Some(DataType::BigInt(None)),
        DataType::Unsigned | DataType::UnsignedInteger => Some(DataType::BigIntUnsigned(None)),
        DataType::Custom(name, args) => {
            let n = name.to_string().to_ascii_lowercase();
            let nums: Vec<u64> = args.iter().filter_map(|a| a.trim().parse().ok()).collect();
            match n.as_str() {
                "largeint" => Some(DataType::Decimal(ExactNumberInfo::PrecisionAndScale(38, 0))),
                "datev2" => Some(DataType::Date),
                "datetimev2" => Some(DataType::Timestamp(Some(6), TimezoneInfo::None)),
                "decimalv3" | "decimalv2" => Some(DataType::Decimal(match nums.as_slice() {
                    [p, s] => ExactNumberInfo::PrecisionAndScale(*p, *s as i64),
                    [p] => ExactNumberInfo::Precision(*p),
                    _ => ExactNumberInfo::PrecisionAndScale(9, 0),
                })),
                _ => None,
            }
        }
        _ => None,
    };
    if let Some(r) = replacement {
        *t = r;
    }
}

/// `x + INTERVAL ...`, `INTERVAL ... + x` and `x - INTERVAL ...` as calls of
/// `date_add` / `date_sub`, which follow Doris' result types and month-end
/// rule; other expressions are left alone.
fn interval_arithmetic_as_date_add(e: &mut Expr) {
    let Expr::BinaryOp { left, op, right } = e else {
        return;
    };
    let is_interval = |x: &Expr| matches!(x, Expr::Interval(_));
    let (name, value, by) = match op {
        BinaryOperator::Plus if is_interval(right) && !is_interval(left) => {
            ("date_add", left, right)
        }
        BinaryOperator::Plus if is_interval(left) && !is_interval(right) => {
            ("date_add", right, left)
        }
        BinaryOperator::Minus if is_interval(right) && !is_interval(left) => {
            ("date_sub", left, right)
        }
        _ => return,
    };
    let take = |x: &mut Box<Expr>| {
        std::mem::replace(
            x.as_mut(),
            Expr::value(datafusion::sql::sqlparser::ast::Value::Null),
        )
    };
    let args = vec![take(value), take(by)];
    *e = call(name, args);
}

/// A call of function `name` with plain arguments.
pub(super) fn call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(Function {
        name: ObjectName::from(vec![Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|a| FunctionArg::Unnamed(FunctionArgExpr::Expr(a)))
                .collect(),
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

/// `CAST(x AS DATETIME[(p)])` keeps `p` fractional digits (0 by default),
/// rounded half up as MySQL and Doris do; DataFusion's cast to TIMESTAMP
/// kept them all (`CAST('2026-08-01 11:11:11.6' AS DATETIME)` showed `.600000`).
fn round_datetime_cast(e: &mut Expr) {
    let Expr::Cast {
        data_type: DataType::Datetime(p),
        ..
    } = e
    else {
        return;
    };
    let precision = p.unwrap_or(0).min(6);
    let inner = std::mem::replace(e, Expr::value(datafusion::sql::sqlparser::ast::Value::Null));
    let Expr::Cast {
        kind,
        expr,
        array,
        format,
        ..
    } = inner
    else {
        return;
    };
    let cast = Expr::Cast {
        kind,
        expr,
        data_type: DataType::Timestamp(Some(6), TimezoneInfo::None),
        array,
        format,
    };
    let p = Expr::value(datafusion::sql::sqlparser::ast::Value::Number(
        precision.to_string(),
        false,
    ));
    *e = call(tethys_common::functions::ROUND_DATETIME, vec![cast, p]);
}

/// `CAST(x AS STRING)` (VARCHAR, CHAR, TEXT) prints a datetime as MySQL
/// does, with a space (DataFusion's cast wrote ISO's `T`).
fn text_cast(e: &mut Expr) {
    let Expr::Cast {
        data_type, expr, ..
    } = e
    else {
        return;
    };
    let is_text = match data_type {
        DataType::String(_)
        | DataType::Varchar(_)
        | DataType::Char(_)
        | DataType::Text
        | DataType::CharVarying(_)
        | DataType::Character(_)
        | DataType::Nvarchar(_) => true,
        DataType::Custom(name, _) => name.to_string().eq_ignore_ascii_case("string"),
        _ => false,
    };
    if is_text {
        let inner = std::mem::replace(
            expr.as_mut(),
            Expr::value(datafusion::sql::sqlparser::ast::Value::Null),
        );
        *e = call(tethys_common::functions::CAST_TO_TEXT, vec![inner]);
    }
}

/// A numeric literal with an exponent (`1e300`, `1.5e-7`) is a DOUBLE in
/// MySQL and Doris; without one it is an exact DECIMAL
/// (`parse_float_as_decimal`). `SELECT 1e300` failed as a decimal of scale
/// -300.
fn exponent_literal_to_double(e: &mut Expr) {
    use datafusion::sql::sqlparser::ast::{CastKind, Value};
    if let Expr::Value(v) = e
        && let Value::Number(n, _) = &v.value
        && n.contains(['e', 'E'])
    {
        *e = Expr::Cast {
            kind: CastKind::Cast,
            expr: Box::new(Expr::value(Value::SingleQuotedString(n.clone()))),
            data_type: DataType::Double(ExactNumberInfo::None),
            array: false,
            format: None,
        };
    }
}

/// MySQL's `CONVERT(expr, type)` is `CAST(expr AS type)`, and
/// `CONVERT(expr USING charset)` is `expr` (strings are UTF-8). MariaDB
/// Connector/J's `getColumns` selects `CONVERT(CASE ... END, UNSIGNED INTEGER)`.
fn convert_to_cast(e: &mut Expr) {
    let Expr::Convert {
        is_try: false,
        expr,
        data_type,
        target_before_value: false,
        ..
    } = e
    else {
        return;
    };
    let inner = std::mem::replace(
        expr.as_mut(),
        Expr::value(datafusion::sql::sqlparser::ast::Value::Null),
    );
    *e = match data_type.take() {
        Some(data_type) => Expr::Cast {
            kind: datafusion::sql::sqlparser::ast::CastKind::Cast,
            expr: Box::new(inner),
            data_type,
            array: false,
            format: None,
        },
        None => Expr::Nested(Box::new(inner)),
    };
}

/// MySQL's `BINARY 'x'` makes a comparison byte-wise; Tethys' string
/// comparisons always are, so the operator is dropped before parsing
/// (sqlparser reads it as a cast of everything after it:
/// `a = BINARY 'x' AND b` became `a = CAST(('x' AND b) AS BINARY)`).
/// MariaDB Connector/ODBC's `SQLColumns` filters with `TABLE_SCHEMA = BINARY 'db'`.
fn drop_binary_operator(sql: &str) -> std::borrow::Cow<'_, str> {
    use datafusion::sql::sqlparser::tokenizer::Token;
    if !sql.to_ascii_lowercase().contains("binary") {
        return sql.into();
    }
    let Some(toks) = super::tokens::with_spans(sql) else {
        return sql.into();
    };
    let mut cuts = vec![];
    let significant: Vec<_> = toks
        .iter()
        .filter(|(t, _)| !matches!(t, Token::Whitespace(_)))
        .collect();
    for pair in significant.windows(2) {
        if let Token::Word(w) = &pair[0].0
            && w.quote_style.is_none()
            && w.value.eq_ignore_ascii_case("binary")
            && matches!(
                pair[1].0,
                Token::SingleQuotedString(_) | Token::DoubleQuotedString(_)
            )
        {
            cuts.push((pair[0].1.start, pair[1].1.start));
        }
    }
    if cuts.is_empty() {
        return sql.into();
    }
    let mut out = String::with_capacity(sql.len());
    let mut at = 0;
    for (a, b) in cuts {
        out.push_str(&sql[at..a]);
        at = b;
    }
    out.push_str(&sql[at..]);
    out.into()
}

/// Marks a de-duplicated result column name; the MySQL layer shows only the
/// part before it, so `SELECT a, a` returns two columns named `a`.
pub const DUPLICATE_NAME_MARK: char = '\u{1}';

/// Names result columns of the outermost SELECT the way MySQL does: an
/// unaliased expression is named by its SQL text (`SELECT 7 / 2` has a column
/// `7 / 2`), and repeated names are allowed.
fn name_columns_like_mysql(stmt: &mut Statement) {
    let query = match stmt {
        Statement::Query(q) => q,
        Statement::Insert(ins) => match ins.source.as_mut() {
            Some(q) => q,
            None => return,
        },
        _ => return,
    };
    let SetExpr::Select(sel) = query.body.as_mut() else {
        return;
    };
    let mut seen: HashSet<String> = HashSet::new();
    let mut dup = 0usize;
    for item in sel.projection.iter_mut() {
        let (expr, name, aliased) = match item {
            SelectItem::UnnamedExpr(e) => {
                let name = match &*e {
                    Expr::Identifier(i) => i.value.clone(),
                    Expr::CompoundIdentifier(parts) => {
                        parts.last().map(|i| i.value.clone()).unwrap_or_default()
                    }
                    other => other.to_string(),
                };
                (e.clone(), name, false)
            }
            SelectItem::ExprWithAlias { expr, alias } => (expr.clone(), alias.value.clone(), true),
            _ => continue,
        };
        if name.len() > 256 {
            continue;
        }
        let plain = matches!(expr, Expr::Identifier(_) | Expr::CompoundIdentifier(_));
        let alias = if seen.insert(name.to_ascii_lowercase()) {
            if aliased || plain {
                continue;
            }
            name
        } else {
            dup += 1;
            format!("{name}{DUPLICATE_NAME_MARK}{dup}")
        };
        *item = SelectItem::ExprWithAlias {
            expr,
            alias: Ident::with_quote('`', alias),
        };
    }
}

/// Parses a query or INSERT for DataFusion, with Doris type names mapped.
pub fn parse_for_datafusion(sql: &str) -> Result<DFStatement> {
    rewrite_for_datafusion(parse_unrewritten(sql)?)
}

/// A query or INSERT parsed, not yet rewritten: what a prepared statement
/// keeps, its `?` placeholders still in it (`sql::params`).
pub fn parse_unrewritten(sql: &str) -> Result<DFStatement> {
    // Join hints are taken from the text by the planner (`statement_ctx`).
    let (sql, _) = super::join_hints::strip(sql)?;
    let sql = drop_binary_operator(&sql);
    let mut stmts = DFParser::parse_sql_with_dialect(&sql, &MySqlDialect {})
        .map_err(|e| TethysError::Syntax(e.to_string()))?;
    if stmts.len() != 1 {
        return Err(TethysError::Syntax(format!(
            "expected one statement, found {}",
            stmts.len()
        )));
    }
    stmts
        .pop_front()
        .ok_or_else(|| TethysError::Syntax("empty statement".into()))
}

/// The function checks and Doris rewrites of [`parse_for_datafusion`] on a
/// statement [`parse_unrewritten`] gave (with its placeholders bound).
pub fn rewrite_for_datafusion(mut stmt: DFStatement) -> Result<DFStatement> {
    if let DFStatement::Statement(s) = &mut stmt {
        super::functions::check_calls(s.as_ref())?;
        name_columns_like_mysql(s.as_mut());
        super::partitions::rewrite(s.as_mut());
        super::table_functions::rewrite(s.as_mut())?;
        let _ = visit_expressions_mut(s.as_mut(), |e| {
            convert_to_cast(e);
            exponent_literal_to_double(e);
            round_datetime_cast(e);
            text_cast(e);
            if let Expr::Cast { data_type, .. } = e {
                fix_type(data_type);
            }
            interval_arithmetic_as_date_add(e);
            super::calls::rewrite(e);
            ControlFlow::<()>::Continue(())
        });
    }
    Ok(stmt)
}

/// One expression (a Stream Load `columns` or `where` header) with the
/// function checks and Doris rewrites a query's expressions get, as SQL
/// text for DataFusion's expression parser.
pub fn expr_for_datafusion(text: &str) -> Result<String> {
    let stmt = parse_for_datafusion(&format!("SELECT {text}"))?;
    let expr = match &stmt {
        DFStatement::Statement(s) => match s.as_ref() {
            Statement::Query(q) => match q.body.as_ref() {
                SetExpr::Select(sel) if sel.projection.len() == 1 && sel.from.is_empty() => {
                    match &sel.projection[0] {
                        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                            Some(e.to_string())
                        }
                        _ => None,
                    }
                }
                _ => None,
            },
            _ => None,
        },
        _ => None,
    };
    expr.ok_or_else(|| TethysError::Syntax(format!("not one expression: {text}")))
}

/// Whether a statement is `INSERT INTO t [(cols)] VALUES (...)`, the form
/// group commit takes (Doris falls back to a normal load for others).
pub fn is_insert_values(stmt: &DFStatement) -> bool {
    use datafusion::sql::sqlparser::ast::{SetExpr, Statement};
    let DFStatement::Statement(s) = stmt else {
        return false;
    };
    let Statement::Insert(insert) = s.as_ref() else {
        return false;
    };
    insert
        .source
        .as_ref()
        .is_some_and(|q| matches!(q.body.as_ref(), SetExpr::Values(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sql` as DataFusion is given it.
    fn rewritten(sql: &str) -> String {
        parse_for_datafusion(sql).unwrap().to_string()
    }

    #[test]
    fn doris_cast_types() {
        let s = rewritten(
            "select cast('2026-01-01' as datetime), cast(1 as largeint), cast(2 as signed)",
        );
        assert!(s.contains("AS TIMESTAMP"), "{s}");
        assert!(s.contains("DECIMAL(38,0)"), "{s}");
        assert!(s.contains("AS BIGINT"), "{s}");
    }

    #[test]
    fn interval_arithmetic_calls_date_add() {
        let s = rewritten(
            "select d + interval 3 hour, interval 1 day + d, d - interval '90' day, \
             interval 1 day + interval 2 day, d - e from t",
        );
        assert!(s.contains("date_add(d, INTERVAL 3 HOUR)"), "{s}");
        assert!(s.contains("date_add(d, INTERVAL 1 DAY)"), "{s}");
        assert!(s.contains("date_sub(d, INTERVAL '90' DAY)"), "{s}");
        assert!(s.contains("INTERVAL 1 DAY + INTERVAL 2 DAY"), "{s}");
        assert!(s.contains("d - e"), "{s}");
        // The result column keeps the text the user wrote.
        assert!(s.contains("AS `d + INTERVAL 3 HOUR`"), "{s}");
    }

    #[test]
    fn binary_strings_are_strings() {
        let s = parse_for_datafusion(
            "select 'binary' where s = BINARY 'd' and\n n like binary \"é%\" AND binary_col = 1",
        )
        .unwrap()
        .to_string();
        assert!(
            s.ends_with("WHERE s = 'd' AND n LIKE \"é%\" AND binary_col = 1"),
            "{s}"
        );
    }

    #[test]
    fn mysql_convert() {
        let s = rewritten(
            "select convert(a, unsigned integer), convert('x' using utf8mb4), convert(b, char)",
        );
        assert!(s.contains("CAST(a AS BIGINT UNSIGNED)"), "{s}");
        assert!(s.contains("('x')"), "{s}");
        assert!(s.contains("tethys_text(b)"), "{s}");
    }
}

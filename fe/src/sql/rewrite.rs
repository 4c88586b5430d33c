//! Doris-isms rewritten before DataFusion plans a query: Doris / MySQL type
//! names in `CAST` (`DATETIME`, `LARGEINT`, `SIGNED`, `DATEV2`, ...).

use std::ops::ControlFlow;

use datafusion::sql::parser::{DFParser, Statement as DFStatement};
use std::collections::HashSet;

use datafusion::sql::sqlparser::ast::{
    DataType, ExactNumberInfo, Expr, Ident, SelectItem, SetExpr, Statement, TimezoneInfo,
    visit_expressions_mut,
};
use datafusion::sql::sqlparser::dialect::MySqlDialect;
use tethys_common::{Result, TethysError};

fn fix_type(t: &mut DataType) {
    let replacement = match t {
        DataType::Datetime(_) => Some(DataType::Timestamp(None, TimezoneInfo::None)),
        DataType::Signed | DataType::SignedInteger => Some(DataType::BigInt(None)),
        DataType::Unsigned | DataType::UnsignedInteger => Some(DataType::BigIntUnsigned(None)),
        DataType::Custom(name, args) => {
            let n = name.to_string().to_ascii_lowercase();
            let nums: Vec<u64> = args.iter().filter_map(|a| a.trim().parse().ok()).collect();
            match n.as_str() {
                "largeint" => Some(DataType::Decimal(ExactNumberInfo::PrecisionAndScale(38, 0))),
                "datev2" => Some(DataType::Date),
                "datetimev2" => Some(DataType::Timestamp(None, TimezoneInfo::None)),
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

/// Names unaliased result columns of the outermost SELECT by their SQL text,
/// as MySQL does (`SELECT 7 / 2` has a column named `7 / 2`).
fn name_columns_like_mysql(stmt: &mut Statement) {
    let Statement::Query(q) = stmt else { return };
    let SetExpr::Select(sel) = q.body.as_mut() else {
        return;
    };
    let mut seen = HashSet::new();
    for item in &sel.projection {
        if let SelectItem::ExprWithAlias { alias, .. } = item {
            seen.insert(alias.value.to_ascii_lowercase());
        }
    }
    for item in sel.projection.iter_mut() {
        let SelectItem::UnnamedExpr(e) = item else {
            continue;
        };
        if matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) {
            continue;
        }
        let text = e.to_string();
        if text.len() > 256 || !seen.insert(text.to_ascii_lowercase()) {
            continue;
        }
        *item = SelectItem::ExprWithAlias {
            expr: e.clone(),
            alias: Ident::with_quote('`', text),
        };
    }
}

/// Parses a query or INSERT for DataFusion, with Doris type names mapped.
pub fn parse_for_datafusion(sql: &str) -> Result<DFStatement> {
    let mut stmts = DFParser::parse_sql_with_dialect(sql, &MySqlDialect {})
        .map_err(|e| TethysError::Syntax(e.to_string()))?;
    if stmts.len() != 1 {
        return Err(TethysError::Syntax(format!(
            "expected one statement, found {}",
            stmts.len()
        )));
    }
    let mut stmt = stmts
        .pop_front()
        .ok_or_else(|| TethysError::Syntax("empty statement".into()))?;
    if let DFStatement::Statement(s) = &mut stmt {
        name_columns_like_mysql(s.as_mut());
        let _ = visit_expressions_mut(s.as_mut(), |e| {
            if let Expr::Cast { data_type, .. } = e {
                fix_type(data_type);
            }
            ControlFlow::<()>::Continue(())
        });
    }
    Ok(stmt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doris_cast_types() {
        let s = parse_for_datafusion(
            "select cast('2026-01-01' as datetime), cast(1 as largeint), cast(2 as signed)",
        )
        .unwrap()
        .to_string();
        assert!(s.contains("AS TIMESTAMP"), "{s}");
        assert!(s.contains("DECIMAL(38,0)"), "{s}");
        assert!(s.contains("AS BIGINT"), "{s}");
    }
}

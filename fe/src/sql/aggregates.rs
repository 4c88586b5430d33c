//! Doris' aggregate spellings (and `timestampdiff`'s unit word), rewritten
//! onto DataFusion's functions before planning:
//!
//! ```sql
//! SELECT group_concat(DISTINCT city ORDER BY city SEPARATOR '; '), ndv(user_id),
//!        count(DISTINCT region, city), max_by(name, amount) FROM orders
//! ```
//!
//! - `group_concat(x [, sep] [ORDER BY ...] [SEPARATOR sep])` is
//!   `string_agg(CAST(x AS STRING), sep ORDER BY ...)`; Doris' default
//!   separator is `', '`; NULLs are skipped, no rows give NULL.
//! - `ndv(x)` and `approx_count_distinct(x)` are `approx_distinct(x)`.
//! - `count(DISTINCT a, b, ...)` counts the distinct tuples with no NULL in
//!   them, as MySQL and Doris do.
//! - `max_by(x, y)` / `min_by(x, y)` are `x` of the row with the largest /
//!   smallest `y` (NULL `y`s sort last).

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, CastKind, DataType, DuplicateTreatment, Expr, FunctionArg, FunctionArgExpr,
    FunctionArgumentClause, FunctionArgumentList, FunctionArguments, Ident, ObjectName,
    OrderByExpr, OrderByOptions, Value,
};

use super::rewrite::call;

fn unnamed(e: Expr) -> FunctionArg {
    FunctionArg::Unnamed(FunctionArgExpr::Expr(e))
}

/// The plain expression arguments of a call, `None` if any is not one.
fn plain_args(list: &FunctionArgumentList) -> Option<Vec<Expr>> {
    list.args
        .iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

/// Rewrites one expression if it is one of the Doris aggregates above.
pub fn rewrite(e: &mut Expr) {
    let Expr::Function(f) = e else {
        return;
    };
    if f.over.is_some() {
        return;
    }
    let name = f.name.to_string().to_ascii_lowercase();
    let FunctionArguments::List(list) = &mut f.args else {
        return;
    };
    let Some(args) = plain_args(list) else {
        return;
    };
    match name.as_str() {
        "group_concat" if !args.is_empty() && args.len() <= 2 => {
            let mut sep = args
                .get(1)
                .cloned()
                .unwrap_or_else(|| Expr::value(Value::SingleQuotedString(", ".into())));
            list.clauses.retain(|c| match c {
                FunctionArgumentClause::Separator(v) => {
                    sep = Expr::value(v.clone());
                    false
                }
                _ => true,
            });
            let text = Expr::Cast {
                kind: CastKind::Cast,
                expr: Box::new(args[0].clone()),
                data_type: DataType::String(None),
                array: false,
                format: None,
            };
            // DISTINCT needs an ORDER BY on the argument to name it as cast.
            for c in list.clauses.iter_mut() {
                if let FunctionArgumentClause::OrderBy(keys) = c {
                    for k in keys.iter_mut().filter(|k| k.expr == args[0]) {
                        k.expr = text.clone();
                    }
                }
            }
            list.args = vec![unnamed(text), unnamed(sep)];
            f.name = ObjectName::from(vec![Ident::new("string_agg")]);
        }
        "ndv" | "approx_count_distinct" if args.len() == 1 => {
            f.name = ObjectName::from(vec![Ident::new("approx_distinct")]);
        }
        "count"
            if args.len() > 1
                && matches!(list.duplicate_treatment, Some(DuplicateTreatment::Distinct)) =>
        {
            // One value per row: the tuple, or NULL when any part is NULL.
            let any_null = args
                .iter()
                .map(|a| Expr::IsNull(Box::new(a.clone())))
                .reduce(|l, r| Expr::BinaryOp {
                    left: Box::new(l),
                    op: BinaryOperator::Or,
                    right: Box::new(r),
                })
                .unwrap_or(Expr::value(Value::Boolean(false)));
            let tuple = Expr::Case {
                case_token:
                    datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
                end_token:
                    datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
                operand: None,
                conditions: vec![datafusion::sql::sqlparser::ast::CaseWhen {
                    condition: any_null,
                    result: Expr::value(Value::Null),
                }],
                else_result: Some(Box::new(call("struct", args))),
            };
            list.args = vec![unnamed(tuple)];
        }
        // `timestampdiff(MONTH, a, b)`: the unit is a word, not a column.
        "timestampdiff" | "timestampadd" if args.len() == 3 => {
            if let Expr::Identifier(unit) = &args[0]
                && unit.quote_style.is_none()
            {
                list.args[0] = unnamed(Expr::value(Value::SingleQuotedString(
                    unit.value.to_ascii_uppercase(),
                )));
            }
        }
        "max_by" | "min_by" if args.len() == 2 && list.clauses.is_empty() => {
            let asc = name == "min_by";
            // The candidates' order by y, NULL ys last, and the first x.
            list.args = vec![unnamed(args[0].clone())];
            list.clauses = vec![FunctionArgumentClause::OrderBy(vec![OrderByExpr {
                expr: args[1].clone(),
                options: OrderByOptions {
                    asc: Some(asc),
                    nulls_first: Some(false),
                },
                with_fill: None,
            }])];
            f.name = ObjectName::from(vec![Ident::new("first_value")]);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use crate::sql::rewrite::parse_for_datafusion;

    #[test]
    fn doris_aggregates_become_datafusion_ones() {
        let s = parse_for_datafusion(
            "select group_concat(DISTINCT a ORDER BY a SEPARATOR ';'), group_concat(b), \
             group_concat(b, '-'), ndv(c), count(distinct a, b), max_by(n, v) from t",
        )
        .expect("parses")
        .to_string();
        assert!(
            s.contains("string_agg(DISTINCT CAST(a AS STRING), ';' ORDER BY CAST(a AS STRING))"),
            "{s}"
        );
        assert!(s.contains("string_agg(CAST(b AS STRING), ', ')"), "{s}");
        assert!(s.contains("string_agg(CAST(b AS STRING), '-')"), "{s}");
        assert!(s.contains("approx_distinct(c)"), "{s}");
        assert!(
            s.contains(
                "count(DISTINCT CASE WHEN a IS NULL OR b IS NULL THEN NULL ELSE struct(a, b) END)"
            ),
            "{s}"
        );
        assert!(
            s.contains("first_value(n ORDER BY v DESC NULLS LAST)"),
            "{s}"
        );
    }
}

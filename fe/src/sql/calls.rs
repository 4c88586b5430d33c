//! Doris' spellings of aggregates and functions, rewritten onto
//! DataFusion's (and Tethys') before planning:
//!
//! ```sql
//! SELECT group_concat(DISTINCT city ORDER BY city SEPARATOR '; '), ndv(user_id),
//!        count(DISTINCT region, city), max_by(name, amount) FROM orders
//! ```
//!
//! - `group_concat(x [, sep] [SEPARATOR sep])` is
//!   `string_agg(tethys_text(x), sep)` (x as MySQL prints it); with
//!   `ORDER BY k ...` it collects `struct(k, ..., x)` with `array_agg` for
//!   `group_concat_of`, which sorts each group's rows (DataFusion refuses two
//!   aggregates with different orders in one query); Doris' default
//!   separator is `', '`; NULLs are skipped, no rows give NULL.
//! - `ndv(x)` and `approx_count_distinct(x)` are `approx_distinct(x)`.
//! - `count(DISTINCT a, b, ...)` counts the distinct tuples with no NULL in
//!   them, as MySQL and Doris do.
//! - `max_by(x, y)` / `min_by(x, y)` are `x` of the row with the largest /
//!   smallest `y` (NULL `y`s sort last).
//! - `timestampdiff(UNIT, a, b)` gets its unit word as a string;
//!   `timestampadd(UNIT, n, d)` is `<unit>s_add(d, n)` (a quarter is 3 months).
//! - `date_trunc(d, 'unit')` (either argument order) is `<unit>_floor(d)`:
//!   a DATE stays a DATE, and years up to 9999 work (DataFusion's
//!   `date_trunc` counts nanoseconds and failed on `9999-11-11`).
//! - `date(x)` is `to_date(x)`.
//! - `elt(n, s1, s2, ...)` is the n-th string (NULL out of range).
//! - `regexp_replace(s, p, r)` replaces every match, as Doris does
//!   (DataFusion's replaces the first unless told `'g'`);
//!   `regexp_replace_one` replaces the first.
//! - `date_floor(t, INTERVAL n unit)` / `date_ceil` are `<unit>_floor(t, n)`
//!   / `<unit>_ceil(t, n)`.
//! - `percentile(x, p)` is the exact, interpolated `percentile_cont(p)
//!   WITHIN GROUP (ORDER BY x)`; `percentile_approx(x, p[, c])` is
//!   `approx_percentile_cont`; `percentile_array(x, [p1, p2])` an array of
//!   `percentile_cont`s.
//! - `retention(c1, c2, ...)` is `[c1 held, c1 and c2 held, ...]` over the
//!   group, as 1s and 0s.
//! - `greatest` / `least` are NULL when any argument is (DataFusion's
//!   skip NULLs); `log(x)` is `ln(x)`; `mod(a, b)` is `a % b`; `sign` is
//!   `signum`; `array_size` and `size` are `cardinality`.
//! - Doris' `null_or_empty(s)` / `not_null_or_empty(s)`; MySQL's `space(n)`, `dayname`, `monthname`, `weekday`, `pmod`,
//!   `strcmp`, `field(x, a, b, ...)` and `sha2(s, bits)` (bits a literal)
//!   in terms of the planner's functions.
//! - `stddev` / `std` / `variance` / `covar` are the population ones, as in
//!   MySQL and Doris (DataFusion's `stddev` and `covar` are the sample ones).
//! - `struct(a, b)` names its fields `col1`, `col2` as Doris does.
//! - `now()` / `current_timestamp` are DATETIME(0): whole seconds;
//!   `curtime()` / `current_time` are `HH:MM:SS` text.
//! - `GROUP BY ROLLUP(a, b)` and `CUBE(a, b)` are grouping sets (the MySQL
//!   dialect reads them as calls).
//! - `topn(x, k)` and `window_funnel(window, mode, t, c1, ...)` collect the
//!   group's rows (`array_agg`) for Tethys' `topn_of` / `window_funnel_of`.

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

/// An integer literal.
fn number(n: i64) -> Expr {
    Expr::value(Value::Number(n.to_string(), false))
}

/// A string literal.
fn text(s: &str) -> Expr {
    Expr::value(Value::SingleQuotedString(s.into()))
}

/// `CASE WHEN a IS NULL OR b IS NULL ... THEN NULL ELSE value END`.
/// `CASE [operand] WHEN .. THEN .. [ELSE else_result] END`.
fn case(
    operand: Option<Box<Expr>>,
    conditions: Vec<datafusion::sql::sqlparser::ast::CaseWhen>,
    else_result: Option<Box<Expr>>,
) -> Expr {
    use datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken;
    Expr::Case {
        case_token: AttachedToken::empty(),
        end_token: AttachedToken::empty(),
        operand,
        conditions,
        else_result,
    }
}

fn null_if_any_null(args: &[Expr], value: Expr) -> Expr {
    let any_null = args
        .iter()
        .map(|a| Expr::IsNull(Box::new(a.clone())))
        .reduce(|l, r| Expr::BinaryOp {
            left: Box::new(l),
            op: BinaryOperator::Or,
            right: Box::new(r),
        })
        .unwrap_or(Expr::value(Value::Boolean(false)));
    case(
        None,
        vec![datafusion::sql::sqlparser::ast::CaseWhen {
            condition: any_null,
            result: Expr::value(Value::Null),
        }],
        Some(Box::new(value)),
    )
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
    let no_args = match &f.args {
        FunctionArguments::None => true,
        FunctionArguments::List(l) => l.args.is_empty(),
        FunctionArguments::Subquery(_) => false,
    };
    if no_args {
        match name.as_str() {
            "now" | "current_timestamp" | "localtime" | "localtimestamp" => {
                let at = call("now", vec![]);
                *e = call("date_trunc", vec![text("second"), at]);
            }
            "curtime" | "current_time" => {
                *e = call("date_format", vec![call("now", vec![]), text("%H:%i:%s")]);
            }
            _ => {}
        }
        return;
    }
    let FunctionArguments::List(list) = &mut f.args else {
        return;
    };
    let Some(args) = plain_args(list) else {
        return;
    };
    let no_clauses = list.clauses.is_empty();
    let replaced = date_call(&name, &args)
        .or_else(|| text_call(&name, &args))
        .or_else(|| math_call(&name, &args))
        .or_else(|| agg_call(&name, &args, no_clauses));
    if let Some(new) = replaced {
        *e = new;
    } else if let Some(to) = renamed(&name, args.len()) {
        f.name = ObjectName::from(vec![Ident::new(to)]);
    } else {
        rewrite_in_place(&name, e, args);
    }
}

/// Date and time spellings.
fn date_call(name: &str, args: &[Expr]) -> Option<Expr> {
    match name {
        "timestampadd" if args.len() == 3 => {
            let Expr::Identifier(unit) = &args[0] else {
                return None;
            };
            let (func, times) = match unit.value.to_ascii_uppercase().as_str() {
                "YEAR" => ("years_add", 1),
                "QUARTER" => ("months_add", 3),
                "MONTH" => ("months_add", 1),
                "WEEK" => ("weeks_add", 1),
                "DAY" => ("days_add", 1),
                "HOUR" => ("hours_add", 1),
                "MINUTE" => ("minutes_add", 1),
                "SECOND" => ("seconds_add", 1),
                _ => return None,
            };
            let n = if times == 1 {
                args[1].clone()
            } else {
                Expr::BinaryOp {
                    left: Box::new(args[1].clone()),
                    op: BinaryOperator::Multiply,
                    right: Box::new(Expr::value(Value::Number(times.to_string(), false))),
                }
            };
            Some(call(func, vec![args[2].clone(), n]))
        }
        // Doris' `date_trunc(d, 'unit')`: DataFusion takes the unit first.
        "date_trunc" if args.len() == 2 => {
            let unit = |x: &Expr| match x {
                Expr::Value(v) => match &v.value {
                    Value::SingleQuotedString(u) | Value::DoubleQuotedString(u) => {
                        let u = u.to_ascii_lowercase();
                        [
                            "year", "quarter", "month", "week", "day", "hour", "minute", "second",
                        ]
                        .contains(&u.as_str())
                        .then_some(u)
                    }
                    _ => None,
                },
                _ => None,
            };
            // Either argument order; Tethys' floor works in microseconds over
            // years 1 to 9999 (DataFusion's failed on 9999-11-11 in nanoseconds).
            let (u, t) = match (unit(&args[0]), unit(&args[1])) {
                (None, Some(u)) => (u, &args[0]),
                (Some(u), None) => (u, &args[1]),
                _ => return None,
            };
            Some(call(&format!("{u}_floor"), vec![t.clone()]))
        }
        "dayname" if args.len() == 1 => {
            Some(call("date_format", vec![args[0].clone(), text("%W")]))
        }
        "monthname" if args.len() == 1 => {
            Some(call("date_format", vec![args[0].clone(), text("%M")]))
        }
        // Monday 0 .. Sunday 6 (dayofweek is Sunday 1 .. Saturday 7).
        "weekday" if args.len() == 1 => Some(Expr::Nested(Box::new(Expr::BinaryOp {
            left: Box::new(Expr::Nested(Box::new(Expr::BinaryOp {
                left: Box::new(call("dayofweek", vec![args[0].clone()])),
                op: BinaryOperator::Plus,
                right: Box::new(number(5)),
            }))),
            op: BinaryOperator::Modulo,
            right: Box::new(number(7)),
        }))),
        "date_floor" | "date_ceil" if args.len() == 2 => {
            let Expr::Interval(iv) = &args[1] else {
                return None;
            };
            let Some(unit) = &iv.leading_field else {
                return None;
            };
            let unit = unit.to_string().to_ascii_lowercase();
            if ![
                "year", "quarter", "month", "week", "day", "hour", "minute", "second",
            ]
            .contains(&unit.as_str())
            {
                return None;
            }
            let side = name.trim_start_matches("date_");
            Some(call(
                &format!("{unit}_{side}"),
                vec![args[0].clone(), (*iv.value).clone()],
            ))
        }
        _ => None,
    }
}

/// String and struct spellings.
fn text_call(name: &str, args: &[Expr]) -> Option<Expr> {
    match name {
        "elt" if args.len() >= 2 => {
            let conditions = args[1..]
                .iter()
                .enumerate()
                .map(|(i, s)| datafusion::sql::sqlparser::ast::CaseWhen {
                    condition: Expr::value(Value::Number((i + 1).to_string(), false)),
                    result: s.clone(),
                })
                .collect();
            Some(case(Some(Box::new(args[0].clone())), conditions, None))
        }
        "null_or_empty" | "not_null_or_empty" if args.len() == 1 => {
            let empty = Expr::BinaryOp {
                left: Box::new(Expr::IsNull(Box::new(args[0].clone()))),
                op: BinaryOperator::Or,
                right: Box::new(Expr::BinaryOp {
                    left: Box::new(args[0].clone()),
                    op: BinaryOperator::Eq,
                    right: Box::new(text("")),
                }),
            };
            Some(if name == "null_or_empty" {
                Expr::Nested(Box::new(empty))
            } else {
                Expr::UnaryOp {
                    op: datafusion::sql::sqlparser::ast::UnaryOperator::Not,
                    expr: Box::new(Expr::Nested(Box::new(empty))),
                }
            })
        }
        "space" if args.len() == 1 => Some(call("repeat", vec![text(" "), args[0].clone()])),
        "strcmp" if args.len() == 2 => {
            let cmp = |op| Expr::BinaryOp {
                left: Box::new(args[0].clone()),
                op,
                right: Box::new(args[1].clone()),
            };
            Some(null_if_any_null(
                args,
                case(
                    None,
                    vec![
                        datafusion::sql::sqlparser::ast::CaseWhen {
                            condition: cmp(BinaryOperator::Lt),
                            result: number(-1),
                        },
                        datafusion::sql::sqlparser::ast::CaseWhen {
                            condition: cmp(BinaryOperator::Gt),
                            result: number(1),
                        },
                    ],
                    Some(Box::new(number(0))),
                ),
            ))
        }
        // field(x, a, b, ...): the position of x among a, b, ... (0 if absent).
        "field" if args.len() >= 2 => {
            let conditions = args[1..]
                .iter()
                .enumerate()
                .map(|(i, s)| datafusion::sql::sqlparser::ast::CaseWhen {
                    condition: Expr::BinaryOp {
                        left: Box::new(args[0].clone()),
                        op: BinaryOperator::Eq,
                        right: Box::new(s.clone()),
                    },
                    result: number(i as i64 + 1),
                })
                .collect();
            Some(case(None, conditions, Some(Box::new(number(0)))))
        }
        // sha2(s, bits): MySQL's lower-case hex digest (0 is 256 bits).
        "sha2" if args.len() == 2 => {
            let bits = match &args[1] {
                Expr::Value(v) => match &v.value {
                    Value::Number(n, _) => n.clone(),
                    _ => return None,
                },
                _ => return None,
            };
            let digest = match bits.as_str() {
                "224" => "sha224",
                "256" | "0" => "sha256",
                "384" => "sha384",
                "512" => "sha512",
                _ => return None,
            };
            Some(call(
                "encode",
                vec![call(digest, vec![args[0].clone()]), text("hex")],
            ))
        }
        "struct" => {
            let named = args
                .iter()
                .enumerate()
                .flat_map(|(i, a)| [text(&format!("col{}", i + 1)), a.clone()])
                .collect();
            Some(call("named_struct", named))
        }
        _ => None,
    }
}

/// Arithmetic spellings.
fn math_call(name: &str, args: &[Expr]) -> Option<Expr> {
    match name {
        // ((a % b) + b) % b: the remainder with b's sign.
        "pmod" if args.len() == 2 => {
            let rem = |l: Expr| Expr::BinaryOp {
                left: Box::new(l),
                op: BinaryOperator::Modulo,
                right: Box::new(args[1].clone()),
            };
            Some(Expr::Nested(Box::new(rem(Expr::Nested(Box::new(
                Expr::BinaryOp {
                    left: Box::new(Expr::Nested(Box::new(rem(args[0].clone())))),
                    op: BinaryOperator::Plus,
                    right: Box::new(args[1].clone()),
                },
            ))))))
        }
        "mod" if args.len() == 2 => Some(Expr::Nested(Box::new(Expr::BinaryOp {
            left: Box::new(args[0].clone()),
            op: BinaryOperator::Modulo,
            right: Box::new(args[1].clone()),
        }))),
        _ => None,
    }
}

/// Aggregate spellings, and `ROLLUP` / `CUBE` read as calls.
fn agg_call(name: &str, args: &[Expr], no_clauses: bool) -> Option<Expr> {
    match name {
        "percentile" | "percentile_approx" | "percentile_array"
            if (2..=3).contains(&args.len()) && no_clauses =>
        {
            let within = |p: Expr, extra: Option<Expr>, func: &str| {
                let mut c = call(func, std::iter::once(p).chain(extra).collect());
                if let Expr::Function(f) = &mut c {
                    f.within_group = vec![OrderByExpr {
                        expr: args[0].clone(),
                        options: OrderByOptions {
                            asc: None,
                            nulls_first: None,
                        },
                        with_fill: None,
                    }];
                }
                c
            };
            Some(match name {
                "percentile" if args.len() == 2 => within(args[1].clone(), None, "percentile_cont"),
                "percentile_approx" => within(
                    args[1].clone(),
                    args.get(2).cloned(),
                    "approx_percentile_cont",
                ),
                "percentile_array" if args.len() == 2 => {
                    let Expr::Array(arr) = &args[1] else {
                        return None;
                    };
                    let each = arr
                        .elem
                        .iter()
                        .map(|p| within(p.clone(), None, "percentile_cont"))
                        .collect();
                    call("make_array", each)
                }
                _ => return None,
            })
        }
        "retention" if !args.is_empty() && no_clauses => {
            let held = |c: &Expr| {
                call(
                    "coalesce",
                    vec![
                        call("bool_or", vec![c.clone()]),
                        Expr::value(Value::Boolean(false)),
                    ],
                )
            };
            let first = held(&args[0]);
            let steps = args
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let cond = if i == 0 {
                        first.clone()
                    } else {
                        Expr::BinaryOp {
                            left: Box::new(first.clone()),
                            op: BinaryOperator::And,
                            right: Box::new(held(c)),
                        }
                    };
                    Expr::Cast {
                        kind: CastKind::Cast,
                        expr: Box::new(Expr::Nested(Box::new(cond))),
                        data_type: DataType::TinyInt(None),
                        array: false,
                        format: None,
                    }
                })
                .collect();
            Some(call("make_array", steps))
        }
        "topn" if (2..=3).contains(&args.len()) && no_clauses => Some(call(
            "topn_of",
            vec![call("array_agg", vec![args[0].clone()]), args[1].clone()],
        )),
        "window_funnel" if args.len() >= 4 && no_clauses => {
            let events = call("struct", args[2..].to_vec());
            Some(call(
                "window_funnel_of",
                vec![
                    args[0].clone(),
                    args[1].clone(),
                    call("array_agg", vec![events]),
                ],
            ))
        }
        // `GROUP BY ROLLUP(a, b)` / `CUBE(a, b)`, which the MySQL dialect
        // reads as calls.
        "rollup" => Some(Expr::Rollup(args.iter().map(|a| vec![a.clone()]).collect())),
        "cube" => Some(Expr::Cube(args.iter().map(|a| vec![a.clone()]).collect())),
        _ => None,
    }
}

/// Functions DataFusion has under another name.
fn renamed(name: &str, nargs: usize) -> Option<&'static str> {
    match name {
        "ndv" | "approx_count_distinct" if nargs == 1 => Some("approx_distinct"),
        "date" if nargs == 1 => Some("to_date"),
        "log" if nargs == 1 => Some("ln"),
        "array_size" | "size" if nargs == 1 => Some("cardinality"),
        "sign" if nargs == 1 => Some("signum"),
        "stddev" | "std" if nargs == 1 => Some("stddev_pop"),
        "variance" if nargs == 1 => Some("var_pop"),
        "covar" if nargs == 2 => Some("covar_pop"),
        "regexp_replace_one" if nargs == 3 => Some("regexp_replace"),
        _ => None,
    }
}

/// Calls rewritten in place: their arguments or clauses change.
fn rewrite_in_place(name: &str, e: &mut Expr, args: Vec<Expr>) {
    let Expr::Function(f) = e else {
        return;
    };
    let FunctionArguments::List(list) = &mut f.args else {
        return;
    };
    match name {
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
            let value = call(
                tethys_common::functions::CAST_TO_TEXT,
                vec![args[0].clone()],
            );
            let order_by = list.clauses.iter().find_map(|c| match c {
                FunctionArgumentClause::OrderBy(keys) => Some(keys.clone()),
                _ => None,
            });
            let Some(keys) = order_by else {
                list.args = vec![unnamed(value), unnamed(sep)];
                f.name = ObjectName::from(vec![Ident::new("string_agg")]);
                return;
            };
            // Ordered: the rows collected with their keys, sorted per group
            // (no ordering requirement, so differently ordered aggregates
            // share a query). NULLs sort smallest, as in MySQL.
            let orders: Vec<String> = keys
                .iter()
                .map(|k| {
                    let asc = k.options.asc.unwrap_or(true);
                    let nulls_first = k.options.nulls_first.unwrap_or(asc);
                    format!(
                        "{} nulls {}",
                        if asc { "asc" } else { "desc" },
                        if nulls_first { "first" } else { "last" }
                    )
                })
                .collect();
            let row = call(
                "struct",
                keys.iter().map(|k| k.expr.clone()).chain([value]).collect(),
            );
            let mut collect = call("array_agg", vec![row]);
            if let Expr::Function(agg) = &mut collect
                && let FunctionArguments::List(l) = &mut agg.args
            {
                l.duplicate_treatment = list.duplicate_treatment;
            }
            *e = call(
                "group_concat_of",
                vec![collect, sep, text(&orders.join(","))],
            );
        }
        "count"
            if args.len() > 1
                && matches!(list.duplicate_treatment, Some(DuplicateTreatment::Distinct)) =>
        {
            // One value per row: the tuple, or NULL when any part is NULL.
            let tuple = null_if_any_null(&args, call("struct", args.clone()));
            list.args = vec![unnamed(tuple)];
        }
        // `timestampdiff(MONTH, a, b)`: the unit is a word, not a column.
        "timestampdiff" if args.len() == 3 => {
            if let Expr::Identifier(unit) = &args[0]
                && unit.quote_style.is_none()
            {
                list.args[0] = unnamed(Expr::value(Value::SingleQuotedString(
                    unit.value.to_ascii_uppercase(),
                )));
            }
        }
        "greatest" | "least" if args.len() > 1 => {
            *e = null_if_any_null(&args, Expr::Function(f.clone()));
        }
        "regexp_replace" if args.len() == 3 => {
            list.args
                .push(unnamed(Expr::value(Value::SingleQuotedString("g".into()))));
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
    fn doris_functions_become_datafusion_ones() {
        let s = parse_for_datafusion(
            "select timestampadd(QUARTER, 2, d), timestampadd(day, n, d), date_trunc(d, 'month'), \
             date_trunc('month', d), elt(2, 'a', 'b') from t",
        )
        .expect("parses")
        .to_string();
        assert!(s.contains("months_add(d, 2 * 3)"), "{s}");
        assert!(s.contains("days_add(d, n)"), "{s}");
        assert!(
            s.contains("month_floor(d) AS `date_trunc(d, 'month')`"),
            "{s}"
        );
        assert!(
            s.contains("month_floor(d) AS `date_trunc('month', d)`"),
            "{s}"
        );
        assert!(
            s.contains("CASE 2 WHEN 1 THEN 'a' WHEN 2 THEN 'b' END"),
            "{s}"
        );
    }

    #[test]
    fn doris_aggregates_become_datafusion_ones() {
        let s = parse_for_datafusion(
            "select group_concat(DISTINCT a ORDER BY a SEPARATOR ';'), group_concat(b), \
             group_concat(b, '-'), ndv(c), count(distinct a, b), max_by(n, v) from t",
        )
        .expect("parses")
        .to_string();
        assert!(
            s.contains(
                "group_concat_of(array_agg(DISTINCT struct(a, tethys_text(a))), ';', 'asc nulls first')"
            ),
            "{s}"
        );
        assert!(s.contains("string_agg(tethys_text(b), ', ')"), "{s}");
        assert!(s.contains("string_agg(tethys_text(b), '-')"), "{s}");
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

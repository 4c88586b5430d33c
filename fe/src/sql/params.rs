//! `?` placeholders of a prepared statement (`COM_STMT_PREPARE`, `PREPARE s
//! FROM '...'`) and the values bound to them:
//!
//! ```sql
//! PREPARE q FROM 'SELECT * FROM t WHERE k = ? AND note = ?';
//! SET @k = 1, @note = '1-- ';
//! EXECUTE q USING @k, @note;  -- @note stays one string
//! ```
//!
//! A query or INSERT is parsed once, at PREPARE ([`Prepared::new`]); EXECUTE
//! puts each value into a copy of the kept syntax tree as one literal node
//! ([`Prepared::bind`]): no value is read as SQL, nothing is parsed again.
//! Other statements (SET, SHOW, DDL, EXPLAIN: rarely prepared) keep their
//! text; EXECUTE writes each value into it as one escaped literal
//! ([`Param::literal`]) and parses that.

use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    Expr, UnaryOperator, Value, ValueWithSpan, visit_expressions, visit_expressions_mut,
};
use datafusion::sql::sqlparser::tokenizer::{Location, Token};
use std::ops::ControlFlow;
use tethys_common::TethysError;

use super::statement::{BoundQuery, Statement};

/// Placeholders one statement may hold (the count is 16 bits on the wire).
pub const MAX_PLACEHOLDERS: usize = u16::MAX as usize;

/// A value bound to a placeholder.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    Null,
    Bool(bool),
    /// A plain number's text (`-12`, `1.5e-3`), as [`Param::number`] checked.
    Number(String),
    Text(String),
    /// Bytes that are not UTF-8.
    Bytes(Vec<u8>),
}

impl Param {
    /// A number's text; text that is no plain number (a DECIMAL parameter
    /// `1-- `, which once commented out the rest of the statement, or `NaN`)
    /// is a string, which the statement then casts or refuses like any.
    pub fn number(text: &str) -> Param {
        if is_plain_number(text) {
            Param::Number(text.to_string())
        } else {
            Param::Text(text.to_string())
        }
    }

    /// As SQL text that pastes safely where a `?` stood: a negative number
    /// in parentheses (`10 -?` bound to -5 reads `10 -(-5)`, one operand
    /// whatever the operator before it), a string quoted and escaped.
    pub fn literal(&self) -> String {
        match self {
            Param::Null => "NULL".into(),
            Param::Bool(true) => "TRUE".into(),
            Param::Bool(false) => "FALSE".into(),
            Param::Number(n) if n.starts_with(['-', '+']) => format!("({n})"),
            Param::Number(n) => n.clone(),
            Param::Text(s) => quote_str(s),
            Param::Bytes(b) => format!("X'{}'", hex(b)),
        }
    }

    /// As one literal node of a syntax tree.
    fn expr(&self) -> Expr {
        let value = match self {
            Param::Null => Value::Null,
            Param::Bool(b) => Value::Boolean(*b),
            Param::Number(n) => match n.strip_prefix('-') {
                Some(abs) => {
                    return Expr::UnaryOp {
                        op: UnaryOperator::Minus,
                        expr: Box::new(Expr::value(Value::Number(abs.to_string(), false))),
                    };
                }
                None => Value::Number(n.trim_start_matches('+').to_string(), false),
            },
            Param::Text(s) => Value::SingleQuotedString(s.clone()),
            Param::Bytes(b) => Value::HexStringLiteral(hex(b)),
        };
        Expr::value(value)
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

/// Byte offsets of the `?` placeholders of `sql`, in text order: `?` tokens
/// as MySQL reads them, so one in a string, a quoted name or a comment is
/// none. `None` when `sql` does not tokenize (an unterminated quote).
fn placeholder_offsets(sql: &str) -> Option<Vec<usize>> {
    Some(
        super::tokens::with_spans(sql)?
            .into_iter()
            .filter(|(t, _)| matches!(t, Token::Placeholder(p) if p.starts_with('?')))
            .map(|(_, r)| r.start)
            .collect(),
    )
}

/// The `?` placeholders of a statement.
pub fn count_placeholders(sql: &str) -> usize {
    placeholder_offsets(sql).map_or(0, |v| v.len())
}

/// `sql` with its placeholders replaced by `params`' literals, in order.
pub fn bind_params(sql: &str, params: &[Param]) -> Result<String, TethysError> {
    let offsets = placeholder_offsets(sql).ok_or_else(|| {
        TethysError::Syntax("the statement has an unterminated quoted string or comment".into())
    })?;
    check_count(offsets.len(), params.len())?;
    let mut out = String::with_capacity(sql.len());
    let mut from = 0;
    for (at, p) in offsets.iter().zip(params) {
        out.push_str(sql.get(from..*at).unwrap_or_default());
        out.push_str(&p.literal());
        from = at + 1;
    }
    out.push_str(sql.get(from..).unwrap_or_default());
    Ok(out)
}

fn check_count(placeholders: usize, given: usize) -> Result<(), TethysError> {
    if placeholders == given {
        Ok(())
    } else {
        Err(TethysError::Analysis(format!(
            "Incorrect arguments to EXECUTE: the statement takes {placeholders} parameters, {given} given"
        )))
    }
}

/// A prepared statement: its text, how many placeholders it has and, for
/// a query or INSERT, its syntax tree.
#[derive(Debug)]
pub struct Prepared {
    text: String,
    params: usize,
    tree: Option<Tree>,
    /// The parameter types COM_STMT_EXECUTE last sent: a client sends them
    /// with the first execution only.
    pub wire_types: Vec<(u8, u8)>,
}

#[derive(Debug)]
struct Tree {
    parsed: DFStatement,
    label: Option<String>,
    insert: bool,
}

impl Prepared {
    /// Checks `text` and keeps it, parsed when it is a query or INSERT. A
    /// statement no values could make valid is refused now, with the
    /// parser's error.
    pub fn new(text: &str) -> Result<Prepared, TethysError> {
        let Some(offsets) = placeholder_offsets(text) else {
            return Err(super::parse(text).err().unwrap_or_else(|| {
                TethysError::Syntax("unterminated quoted string or comment".into())
            }));
        };
        let params = offsets.len();
        if params > MAX_PLACEHOLDERS {
            return Err(TethysError::Analysis(format!(
                "Prepared statement contains too many placeholders ({params}; at most {MAX_PLACEHOLDERS})"
            )));
        }
        let tree = match super::parse(text) {
            Ok(Statement::Query(q)) => Tree::of(&q, None, false, params)?,
            Ok(Statement::Insert { sql, label }) => Tree::of(&sql, label, true, params)?,
            Ok(_) => None,
            // Placeholders make some statements unparsable until bound.
            Err(e) => {
                super::parse(&bind_params(text, &vec![Param::Null; params])?).map_err(|_| e)?;
                None
            }
        };
        Ok(Prepared {
            text: text.to_string(),
            params,
            tree,
            wire_types: vec![],
        })
    }

    pub fn params(&self) -> usize {
        self.params
    }

    /// The statement as prepared, placeholders and all.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The statement with `values` in place of its placeholders, in order.
    pub fn bind(&self, values: &[Param]) -> Result<Statement, TethysError> {
        check_count(self.params, values.len())?;
        let Some(tree) = &self.tree else {
            return super::parse(&bind_params(&self.text, values)?);
        };
        let mut parsed = tree.parsed.clone();
        bind_tree(&mut parsed, values)?;
        Ok(Statement::Bound(Box::new(BoundQuery {
            text: parsed.to_string(),
            parsed,
            label: tree.label.clone(),
            insert: tree.insert,
        })))
    }
}

impl Tree {
    /// The query or INSERT `sql` parsed, when the parse holds every one of
    /// its `params` placeholders (else the text is bound at EXECUTE); a
    /// syntax error no values could mend is refused.
    fn of(
        sql: &str,
        label: Option<String>,
        insert: bool,
        params: usize,
    ) -> Result<Option<Tree>, TethysError> {
        match super::rewrite::parse_unrewritten(sql) {
            Ok(parsed) if placeholders_in_tree(&parsed).len() == params => Ok(Some(Tree {
                parsed,
                label,
                insert,
            })),
            Ok(_) => Ok(None),
            Err(e) => {
                super::rewrite::parse_unrewritten(&bind_params(sql, &vec![Param::Null; params])?)
                    .map_err(|_| e)?;
                Ok(None)
            }
        }
    }
}

/// Where each placeholder of a syntax tree stands, in the order the tree
/// is walked.
fn placeholders_in_tree(stmt: &DFStatement) -> Vec<Location> {
    let mut at = vec![];
    if let DFStatement::Statement(s) = stmt {
        let _ = visit_expressions(s.as_ref(), |e| {
            if let Some(l) = placeholder_at(e) {
                at.push(l);
            }
            ControlFlow::<()>::Continue(())
        });
    }
    at
}

fn placeholder_at(e: &Expr) -> Option<Location> {
    match e {
        Expr::Value(ValueWithSpan {
            value: Value::Placeholder(p),
            span,
        }) if p.starts_with('?') => Some(span.start),
        _ => None,
    }
}

/// Replaces a tree's placeholders by `values`: the i-th value goes to the
/// placeholder i-th in the text, whatever order the tree is walked in.
fn bind_tree(stmt: &mut DFStatement, values: &[Param]) -> Result<(), TethysError> {
    let at = placeholders_in_tree(stmt);
    check_count(at.len(), values.len())?;
    let mut by_text: Vec<usize> = (0..at.len()).collect();
    by_text.sort_by_key(|&i| (at[i].line, at[i].column));
    let mut value_of = vec![0; at.len()];
    for (rank, &walked) in by_text.iter().enumerate() {
        value_of[walked] = rank;
    }
    let mut walked = 0;
    if let DFStatement::Statement(s) = stmt {
        let _ = visit_expressions_mut(s.as_mut(), |e| {
            if placeholder_at(e).is_some()
                && let Some(v) = value_of.get(walked).and_then(|&i| values.get(i))
            {
                *e = v.expr();
                walked += 1;
            }
            ControlFlow::<()>::Continue(())
        });
    }
    Ok(())
}

/// `[+-]digits[.digits][e[+-]digits]`, with digits on at least one side of
/// the point.
fn is_plain_number(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    let mut mantissa = digits(&mut i);
    if b.get(i) == Some(&b'.') {
        i += 1;
        mantissa += digits(&mut i);
    }
    if mantissa == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// A string as a SQL literal.
pub fn quote_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('\'');
    for c in s.chars() {
        match c {
            '\'' => o.push_str("''"),
            '\\' => o.push_str("\\\\"),
            _ => o.push(c),
        }
    }
    o.push('\'');
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound_text(sql: &str, values: &[Param]) -> String {
        match Prepared::new(sql).unwrap().bind(values).unwrap() {
            Statement::Bound(b) => b.text,
            other => panic!("not bound as a tree: {other:?}"),
        }
    }

    #[test]
    fn placeholders_are_tokens() {
        assert_eq!(
            count_placeholders("select ?, '?', `?`, \"?\" from t where a = ? -- what?\n"),
            2
        );
        assert_eq!(count_placeholders("select /* ? */ ? # ?"), 1);
        assert_eq!(
            bind_params("select ? , 'x?'", &[Param::Text("a'b".into())]).unwrap(),
            "select 'a''b' , 'x?'"
        );
        assert!(bind_params("select ?", &[]).is_err());
        assert!(bind_params("select '?", &[]).is_err());
        assert_eq!(quote_str("it's"), "'it''s'");
    }

    #[test]
    fn numbers_paste_as_one_literal() {
        let lit = |t: &str| Param::number(t).literal();
        assert_eq!(lit("12"), "12");
        assert_eq!(lit("-5"), "(-5)");
        assert_eq!(lit("1.5e-3"), "1.5e-3");
        assert_eq!(lit(".5"), ".5");
        assert_eq!(lit("1--"), "'1--'");
        assert_eq!(lit("1e"), "'1e'");
        assert_eq!(lit("NaN"), "'NaN'");
        assert_eq!(lit("-"), "'-'");
        assert_eq!(
            bind_params("select 10 -?", &[Param::number("-5")]).unwrap(),
            "select 10 -(-5)"
        );
        assert_eq!(Param::Bytes(vec![0xff, 1]).literal(), "X'FF01'");
    }

    #[test]
    fn queries_bind_into_the_tree_parsed_once() {
        let n = |v: i64| Param::number(&v.to_string());
        assert_eq!(
            bound_text(
                "SELECT ? AS a FROM t WHERE k IN (?, ?) GROUP BY a HAVING count(*) > ? ORDER BY a LIMIT ?",
                &[n(1), n(2), n(3), n(4), n(5)]
            ),
            "SELECT 1 AS a FROM t WHERE k IN (2, 3) GROUP BY a HAVING count(*) > 4 ORDER BY a LIMIT 5"
        );
        // A DECIMAL parameter `1-- ` is one string, not a comment.
        assert_eq!(
            bound_text("SELECT ? + 1, ?", &[Param::number("1-- "), n(-7)]),
            "SELECT '1-- ' + 1, -7"
        );
        assert_eq!(
            bound_text(
                "INSERT INTO t VALUES (?, ?)",
                &[Param::Null, Param::Text("x\\y".into())]
            ),
            "INSERT INTO t VALUES (NULL, 'x\\y')"
        );
        let p = Prepared::new("INSERT INTO t WITH LABEL l1 VALUES (?)").unwrap();
        assert!(matches!(
            p.bind(&[n(1)]).unwrap(),
            Statement::Bound(b) if b.insert && b.label.as_deref() == Some("l1")
        ));
        assert!(p.bind(&[]).is_err());
        assert!(p.bind(&[n(1), n(2)]).is_err());
    }

    #[test]
    fn other_statements_bind_their_text() {
        let p = Prepared::new("SET @a = ?").unwrap();
        assert_eq!(p.params(), 1);
        assert!(matches!(
            p.bind(&[Param::number("5")]).unwrap(),
            Statement::Set(_)
        ));
        assert!(Prepared::new("SELEC ?").is_err());
        assert!(Prepared::new("SELECT 'abc").is_err());
        assert!(Prepared::new("SELECT 1 +").is_err());
    }
}

//! `SET` as MySQL parses it. MariaDB Connector/J opens every connection with
//!
//! ```sql
//! set autocommit=1, sql_mode = concat(@@sql_mode,',STRICT_TRANS_TABLES')
//! ```
//!
//! so a comma list may mix scopes (`GLOBAL x`, `@@session.x`, `@u`) and the
//! right side may be any constant expression, evaluated left to right with
//! the variables the earlier items set (see the executor's `set_var`). A bare word
//! (`SET sql_mode = STRICT_TRANS_TABLES`, `SET autocommit = ON`) is the
//! word itself, as in MySQL.

use datafusion::sql::sqlparser::tokenizer::Token;
use tethys_common::{Result, TethysError};

use super::tokens::Tokens;

/// Scope of a SET target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SetScope {
    Session,
    Global,
    User,
}

/// The right side of one assignment.
#[derive(Debug, Clone, PartialEq)]
pub enum SetValue {
    /// A bare word: a system variable takes it as written (`ON`,
    /// `STRICT_TRANS_TABLES`); for a user variable it is a column, as in MySQL.
    Word(String),
    /// A quoted string.
    Str(String),
    /// `DEFAULT`: the variable's default.
    Default,
    /// An expression (SQL text, numbers included) evaluated as `SELECT <expr>`.
    Expr(String),
}

/// One `target = value` of a SET.
#[derive(Debug, Clone, PartialEq)]
pub struct SetItem {
    pub scope: SetScope,
    /// Lower-cased variable name, without `@`/`@@` and scope prefix.
    pub name: String,
    pub value: SetValue,
}

/// What a SET statement sets.
#[derive(Debug, Clone, PartialEq)]
pub enum SetStatement {
    Vars(Vec<SetItem>),
    /// `SET NAMES cs [COLLATE co]`, `SET CHARACTER SET cs` (no collation).
    Names {
        charset: String,
        collate: Option<String>,
        /// `SET CHARACTER SET` leaves `character_set_connection` alone in
        /// MySQL; `SET NAMES` sets it.
        names: bool,
    },
    /// `SET [GLOBAL|SESSION] TRANSACTION ...`: Doris accepts it and keeps
    /// its one isolation level.
    Transaction,
}

/// Parses a statement starting with `SET` (already the next token).
pub fn parse_set(t: &mut Tokens) -> Result<SetStatement> {
    t.advance();
    if t.eat_kw("names") {
        let charset = name_or_string(t, "a character set name")?;
        let collate = if t.eat_kw("collate") {
            Some(name_or_string(t, "a collation name")?)
        } else {
            None
        };
        t.finish()?;
        return Ok(SetStatement::Names {
            charset,
            collate,
            names: true,
        });
    }
    if t.eat_kws(&["character", "set"]) || t.eat_kw("charset") {
        let charset = name_or_string(t, "a character set name")?;
        t.finish()?;
        return Ok(SetStatement::Names {
            charset,
            collate: None,
            names: false,
        });
    }
    if t.peek_kws(&["transaction"])
        || t.peek_kws(&["session", "transaction"])
        || t.peek_kws(&["global", "transaction"])
    {
        return Ok(SetStatement::Transaction);
    }
    if t.peek_kws(&["password"]) {
        return Err(TethysError::NotSupported(
            "SET PASSWORD is not supported yet".into(),
        ));
    }
    let mut out = vec![];
    loop {
        let (scope, name) = target(t)?;
        if !t.eat(&Token::Eq) && !t.eat(&Token::Assignment) {
            return Err(t.unexpected("'='"));
        }
        let value = value(t)?;
        out.push(SetItem { scope, name, value });
        if !t.eat(&Token::Comma) {
            break;
        }
    }
    t.finish()?;
    Ok(SetStatement::Vars(out))
}

fn name_or_string(t: &mut Tokens, what: &str) -> Result<String> {
    match t.advance() {
        Some(Token::Word(w)) => Ok(w.value),
        Some(Token::SingleQuotedString(s)) | Some(Token::DoubleQuotedString(s)) => Ok(s),
        _ => Err(t.unexpected(what)),
    }
}

/// `[GLOBAL|SESSION|LOCAL] name`, `@@[global.|session.|local.]name`, `@name`.
fn target(t: &mut Tokens) -> Result<(SetScope, String)> {
    let mut scope = SetScope::Session;
    if t.eat_kw("global") {
        scope = SetScope::Global;
    } else if t.eat_kw("session") || t.eat_kw("local") {
        scope = SetScope::Session;
    }
    let name = match t.peek() {
        Some(Token::Word(w)) if w.value.starts_with("@@") => {
            let w = w.value.trim_start_matches("@@").to_ascii_lowercase();
            t.advance();
            match w.as_str() {
                "global" | "session" | "local" => {
                    if w == "global" {
                        scope = SetScope::Global;
                    }
                    t.expect(&Token::Period)?;
                    t.ident()?
                }
                _ => match w.split_once('.') {
                    Some(("global", rest)) => {
                        scope = SetScope::Global;
                        rest.to_string()
                    }
                    Some(("session" | "local", rest)) => rest.to_string(),
                    _ => w,
                },
            }
        }
        Some(Token::Word(w)) if w.value.starts_with('@') => {
            let w = w.value.trim_start_matches('@').to_string();
            t.advance();
            scope = SetScope::User;
            w
        }
        _ => t.ident()?,
    };
    Ok((scope, name.to_ascii_lowercase()))
}

/// The tokens up to the next top-level comma or the end.
fn value(t: &mut Tokens) -> Result<SetValue> {
    let mut toks = vec![];
    let mut depth = 0usize;
    while let Some(tok) = t.peek() {
        match tok {
            Token::EOF | Token::SemiColon => break,
            Token::Comma if depth == 0 => break,
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            _ => {}
        }
        toks.push(tok.clone());
        t.advance();
    }
    Ok(match toks.as_slice() {
        [] => return Err(t.unexpected("a value")),
        [Token::Word(w)] if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("default") => {
            SetValue::Default
        }
        // A bare word is the word itself (ON, OFF, STRICT_TRANS_TABLES, utf8mb4).
        [Token::Word(w)] if !w.value.starts_with('@') => SetValue::Word(w.value.clone()),
        [Token::SingleQuotedString(s)] | [Token::DoubleQuotedString(s)] => SetValue::Str(s.clone()),
        _ => SetValue::Expr(render(&toks)),
    })
}

/// Tokens back to SQL text; string literals re-quoted with their escapes.
fn render(toks: &[Token]) -> String {
    let mut out = String::new();
    for tok in toks {
        if !out.is_empty() {
            out.push(' ');
        }
        match tok {
            Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => {
                out.push('\'');
                out.push_str(&s.replace('\\', "\\\\").replace('\'', "''"));
                out.push('\'');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(sql: &str) -> Result<SetStatement> {
        parse_set(&mut Tokens::new(sql)?)
    }

    fn item(scope: SetScope, name: &str, value: SetValue) -> SetItem {
        SetItem {
            scope,
            name: name.into(),
            value,
        }
    }

    #[test]
    fn connector_j_connect_statement() {
        assert_eq!(
            parse("set autocommit=1, sql_mode = concat(@@sql_mode,',STRICT_TRANS_TABLES')")
                .unwrap(),
            SetStatement::Vars(vec![
                item(SetScope::Session, "autocommit", SetValue::Expr("1".into())),
                item(
                    SetScope::Session,
                    "sql_mode",
                    SetValue::Expr("concat ( @@sql_mode , ',STRICT_TRANS_TABLES' )".into())
                ),
            ])
        );
    }

    #[test]
    fn scopes_words_and_user_variables() {
        assert_eq!(
            parse(
                "SET GLOBAL query_timeout = DEFAULT, @@session.batch_size = 1024, \
                 @@global.time_zone='+08:00', @X := 5, sql_mode = STRICT_TRANS_TABLES, \
                 @s = 'it''s \\\\ x', LOCAL wait_timeout = -1"
            )
            .unwrap(),
            SetStatement::Vars(vec![
                item(SetScope::Global, "query_timeout", SetValue::Default),
                item(
                    SetScope::Session,
                    "batch_size",
                    SetValue::Expr("1024".into())
                ),
                item(
                    SetScope::Global,
                    "time_zone",
                    SetValue::Str("+08:00".into())
                ),
                item(SetScope::User, "x", SetValue::Expr("5".into())),
                item(
                    SetScope::Session,
                    "sql_mode",
                    SetValue::Word("STRICT_TRANS_TABLES".into())
                ),
                item(SetScope::User, "s", SetValue::Str("it's \\ x".into())),
                item(
                    SetScope::Session,
                    "wait_timeout",
                    SetValue::Expr("- 1".into())
                ),
            ])
        );
        assert_eq!(
            parse("SET @a = @b + 1, @c = CASE WHEN 1 > 0 THEN 'y''s' ELSE 'n' END").unwrap(),
            SetStatement::Vars(vec![
                item(SetScope::User, "a", SetValue::Expr("@b + 1".into())),
                item(
                    SetScope::User,
                    "c",
                    SetValue::Expr("CASE WHEN 1 > 0 THEN 'y''s' ELSE 'n' END".into())
                ),
            ])
        );
    }

    #[test]
    fn names_and_charset() {
        assert_eq!(
            parse("SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci").unwrap(),
            SetStatement::Names {
                charset: "utf8mb4".into(),
                collate: Some("utf8mb4_unicode_ci".into()),
                names: true
            }
        );
        assert_eq!(
            parse("SET CHARACTER SET 'utf8'").unwrap(),
            SetStatement::Names {
                charset: "utf8".into(),
                collate: None,
                names: false
            }
        );
        assert!(parse("SET NAMES utf8 garbage").is_err());
        assert!(parse("SET x").is_err());
        assert!(parse("SET x = ").is_err());
    }
}

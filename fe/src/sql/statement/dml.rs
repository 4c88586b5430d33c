//! DELETE, and INSERT's Doris clauses (`WITH LABEL`, `PARTITION`).

use tethys_common::{Result, TethysError};

use crate::sql::tokens::Tokens;

use super::*;

pub(super) fn parse_delete(t: &mut Tokens, sql: &str) -> Result<Statement> {
    t.advance();
    t.expect_kw("from")?;
    let (db, table) = t.object_name()?;
    let partitions = partition_list(t)?;
    if t.peek_kws(&["using"]) {
        return Err(TethysError::NotSupported(
            "DELETE ... USING is not supported yet".into(),
        ));
    }
    if !t.peek_kws(&["where"]) {
        return Err(TethysError::Analysis(
            "DELETE needs a WHERE condition (TRUNCATE TABLE empties a table)".into(),
        ));
    }
    let at = find_top_level_kw(sql, "where").ok_or_else(|| t.unexpected("WHERE"))?;
    Ok(Statement::Delete {
        db,
        table,
        partitions,
        condition: sql[at + 5..].trim().to_string(),
    })
}

pub(super) fn parse_insert(sql: &str) -> Result<Statement> {
    // INSERT INTO t [PARTITION (p, ...)] [WITH LABEL l] [(cols)] VALUES|SELECT ...
    let mut t = Tokens::new(sql)?;
    t.advance();
    if t.peek_kws(&["overwrite"]) {
        return Err(TethysError::NotSupported(
            "INSERT OVERWRITE is not supported yet".into(),
        ));
    }
    if !t.eat_kw("into") {
        return Err(t.unexpected("INTO"));
    }
    let mut label = None;
    let mut sql = sql.to_string();
    if let Some(at) = find_top_level_kw(&sql, "with") {
        let after = sql[at + 4..].trim_start();
        // (`get`: the word after WITH may be `订单`, not ASCII; found by fuzzing.)
        if after
            .get(..5)
            .is_some_and(|w| w.eq_ignore_ascii_case("label"))
        {
            let rest = after[5..].trim_start();
            let end = rest
                .find(|c: char| c.is_whitespace() || c == '(')
                .unwrap_or(rest.len());
            let l = rest[..end].trim_matches('`').to_string();
            if l.is_empty() {
                return Err(TethysError::Syntax("WITH LABEL needs a label".into()));
            }
            label = Some(l);
            let tail = rest[end..].to_string();
            sql = format!("{} {}", &sql[..at], tail);
        }
    }
    if let Some(at) = find_top_level_kw(&sql, "partition") {
        let head = &sql[..at];
        if !head.to_ascii_lowercase().contains("select") {
            return Err(TethysError::NotSupported(
                "INSERT INTO ... PARTITION (...) is not supported yet; rows are routed to partitions by value".into(),
            ));
        }
    }
    Ok(Statement::Insert { sql, label })
}

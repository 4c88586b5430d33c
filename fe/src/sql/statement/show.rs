//! SHOW statements, and their `LIKE` / `WHERE` filters.

use tethys_common::{Result, TethysError};

use crate::sql::tokens::Tokens;

use super::*;

pub(super) fn show_filter(t: &mut Tokens, sql: &str) -> Result<ShowFilter> {
    if t.eat_kw("like") {
        let like = t.string()?;
        t.finish()?;
        return Ok(ShowFilter {
            like: Some(like),
            where_sql: None,
        });
    }
    if t.peek_kws(&["where"]) {
        let at = find_top_level_kw(sql, "where").ok_or_else(|| t.unexpected("WHERE"))?;
        let w = sql[at + 5..].trim().trim_end_matches(';').to_string();
        return Ok(ShowFilter {
            like: None,
            where_sql: Some(w),
        });
    }
    t.finish()?;
    Ok(ShowFilter::default())
}

/// `[FROM | IN db]`.
fn from_db(t: &mut Tokens) -> Result<Option<String>> {
    let given = t.eat_kw("from") || t.eat_kw("in");
    given.then(|| t.ident()).transpose()
}

/// `FROM | IN [db.]table [FROM | IN db]`.
fn from_table(t: &mut Tokens) -> Result<(Option<String>, String)> {
    if !(t.eat_kw("from") || t.eat_kw("in")) {
        return Err(t.unexpected("FROM"));
    }
    let (db, table) = t.object_name()?;
    Ok((from_db(t)?.or(db), table))
}

/// Parses the SHOW statements.
// Over 150 lines on purpose: one arm per SHOW form, in the order of Doris' grammar.
pub(super) fn parse_show(t: &mut Tokens, sql: &str) -> Result<Statement> {
    t.advance();
    let full = t.eat_kw("full");
    if t.eat_kw("databases") || t.eat_kw("schemas") {
        return Ok(Statement::ShowDatabases(show_filter(t, sql)?));
    }
    if t.eat_kw("tables") {
        let db = from_db(t)?;
        return Ok(Statement::ShowMeta(ShowMeta::Tables {
            db,
            full,
            filter: show_filter(t, sql)?,
        }));
    }
    if t.eat_kw("triggers") {
        let db = from_db(t)?;
        return Ok(Statement::ShowMeta(ShowMeta::Triggers {
            db,
            filter: show_filter(t, sql)?,
        }));
    }
    if t.eat_kws(&["table", "status"]) {
        let db = from_db(t)?;
        return Ok(Statement::ShowMeta(ShowMeta::TableStatus {
            db,
            filter: show_filter(t, sql)?,
        }));
    }
    if t.eat_kws(&["create", "table"]) {
        let (db, name) = t.object_name()?;
        t.finish()?;
        return Ok(Statement::ShowCreateTable { db, name });
    }
    if t.eat_kws(&["create", "database"]) || t.eat_kws(&["create", "schema"]) {
        let name = t.ident()?;
        t.finish()?;
        return Ok(Statement::ShowCreateDatabase(name));
    }
    if t.eat_kw("columns") || t.eat_kw("fields") {
        let (db, table) = from_table(t)?;
        return Ok(Statement::ShowMeta(ShowMeta::Columns {
            db,
            table,
            full,
            filter: show_filter(t, sql)?,
        }));
    }
    if t.eat_kw("column") {
        t.eat_kw("cached");
        t.expect_kw("stats")?;
        let (db, table) = t.object_name()?;
        let columns = optional_ident_list(t)?;
        t.finish()?;
        return Ok(Statement::ShowColumnStats { db, table, columns });
    }
    if t.eat_kw("partitions") {
        t.expect_kw("from")?;
        let (db, table) = t.object_name()?;
        t.finish()?;
        return Ok(Statement::ShowPartitions { db, table });
    }
    if t.eat_kw("tablets") {
        t.expect_kw("from")?;
        let (db, table) = t.object_name()?;
        let partition = if t.eat_kw("partition") {
            Some(t.ident()?)
        } else if t.eat_kw("partitions") {
            t.ident_list()?.into_iter().next()
        } else {
            None
        };
        t.finish()?;
        return Ok(Statement::ShowTablets {
            db,
            table,
            partition,
        });
    }
    let global = t.eat_kw("global");
    t.eat_kw("session");
    if t.eat_kw("variables") {
        return Ok(Statement::ShowVariables {
            global,
            filter: show_filter(t, sql)?,
        });
    }
    if t.eat_kw("status") {
        return Ok(Statement::ShowMeta(ShowMeta::Status(show_filter(t, sql)?)));
    }
    if t.eat_kws(&["query", "profile"]) {
        let path = if t.at_end() {
            "/".to_string()
        } else {
            t.string()?
        };
        let id = path.trim().trim_matches('/');
        if id.contains('/') {
            return Err(TethysError::NotSupported(format!(
                "profile path {path}: only \"/\" and \"/<query id>\" are supported"
            )));
        }
        return Ok(Statement::ShowQueryProfile {
            id: (!id.is_empty()).then(|| id.to_string()),
        });
    }
    if t.eat_kw("processlist") {
        return Ok(Statement::ShowProcessList);
    }
    if t.eat_kw("backends") {
        return Ok(Statement::ShowBackends);
    }
    // `SHOW PROC '/backends'`: Doris' path to the same rows (a decommission's
    // progress shows in them), the colocation groups; other PROC paths are
    // refused by name.
    if t.eat_kw("proc") {
        let path = t.string()?;
        t.finish()?;
        return match path.trim_end_matches('/') {
            "/backends" => Ok(Statement::ShowBackends),
            "/frontends" => Ok(Statement::ShowFrontends),
            "/colocation_group" => Ok(Statement::ShowColocationGroups),
            _ => Err(TethysError::NotSupported(format!(
                "SHOW PROC '{path}': only '/backends', '/frontends' and '/colocation_group' \
                 are supported"
            ))),
        };
    }
    if t.eat_kw("frontends") {
        return Ok(Statement::ShowFrontends);
    }
    if t.eat_kw("warnings") || t.eat_kw("errors") {
        return Ok(Statement::ShowEmpty {
            columns: vec!["Level", "Code", "Message"],
        });
    }
    if t.eat_kws(&["stream", "load"]) || t.peek_kws(&["load"]) {
        let stream = !t.eat_kw("load");
        let db = from_db(t)?;
        return Ok(Statement::ShowLoad {
            db,
            stream,
            filter: show_filter(t, sql)?,
        });
    }
    if t.eat_kw("transaction") {
        let db = from_db(t)?;
        let where_sql = if t.peek_kws(&["where"]) {
            find_top_level_kw(sql, "where").map(|at| sql[at + 5..].trim().to_string())
        } else {
            None
        };
        return Ok(Statement::ShowTransaction { db, where_sql });
    }
    if t.eat_kw("charset") || t.eat_kws(&["character", "set"]) {
        return Ok(Statement::ShowMeta(ShowMeta::Charset(show_filter(t, sql)?)));
    }
    if t.eat_kw("collation") {
        return Ok(Statement::ShowMeta(ShowMeta::Collation(show_filter(
            t, sql,
        )?)));
    }
    if t.eat_kw("engines") {
        return Ok(Statement::ShowEngines);
    }
    if t.eat_kw("index") || t.eat_kw("indexes") || t.eat_kw("keys") {
        let (db, table) = from_table(t)?;
        return Ok(Statement::ShowMeta(ShowMeta::Index {
            db,
            table,
            filter: show_filter(t, sql)?,
        }));
    }
    Err(TethysError::NotSupported(format!(
        "this SHOW statement is not supported yet: {sql}"
    )))
}

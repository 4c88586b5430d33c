//! Classifying and parsing statements. Doris DDL, SHOW, SET and session
//! statements are parsed here; queries and INSERT go to DataFusion's SQL
//! planner (sqlparser's MySQL dialect), after Doris-only clauses such as
//! `WITH LABEL` are taken out.
//!
//! `parse` classifies a statement by its first words and hands it to the
//! parser of its family: `ddl`, `dml`, `show`, `admin` (ANALYZE), or
//! `super::set` (SET); the values are in `ast`, and `split` cuts a
//! multi-statement string.

use datafusion::sql::sqlparser::tokenizer::Token;
use tethys_common::{Result, TethysError};

use super::set::parse_set;
use super::tokens::Tokens;

mod admin;
mod ast;
mod ddl;
mod dml;
mod show;
mod split;
mod system;

use admin::*;
pub use ast::*;
use ddl::*;
use dml::*;
use show::*;
use split::find_top_level_kw;
pub use split::{complete_statements, split_statements};
use system::parse_alter_system;

/// Parses one statement.
// Over 150 lines on purpose: the routing of every statement form by its first words, in one table.
pub fn parse(sql: &str) -> Result<Statement> {
    let trimmed = sql.trim().trim_end_matches(';').trim();
    if trimmed.is_empty() {
        return Ok(Statement::Empty);
    }
    let mut t = Tokens::new(trimmed)?;
    if t.at_end() {
        return Ok(Statement::Empty);
    }
    crate::sql::depth::check(t.all())?;
    let first = match t.peek() {
        Some(Token::Word(w)) => w.value.to_ascii_lowercase(),
        Some(Token::LParen) => return Ok(Statement::Query(trimmed.to_string())),
        _ => return Err(t.unexpected("a statement")),
    };
    match first.as_str() {
        "select" | "with" | "values" | "table" => Ok(Statement::Query(trimmed.to_string())),
        "insert" => parse_insert(trimmed),
        "explain" => {
            t.advance();
            let verbose = t.eat_kw("verbose");
            let analyze = t.eat_kw("analyze");
            let words = 1 + usize::from(verbose) + usize::from(analyze);
            let rest = rest_after_words(trimmed, words);
            Ok(Statement::Explain {
                sql: rest.to_string(),
                verbose,
                analyze,
            })
        }
        "create" => parse_create(&mut t),
        "drop" => parse_drop(&mut t),
        "truncate" => {
            t.advance();
            t.eat_kw("table");
            let (db, name) = t.object_name()?;
            let partitions = partition_list(&mut t)?;
            t.finish()?;
            Ok(Statement::TruncateTable {
                db,
                name,
                partitions,
            })
        }
        "alter" => parse_alter(&mut t),
        "use" => {
            t.advance();
            let db = t.ident()?;
            t.finish()?;
            Ok(Statement::Use(db))
        }
        "set" => parse_set(&mut t).map(Statement::Set),
        "show" => parse_show(&mut t, trimmed),
        "desc" | "describe" => {
            t.advance();
            if t.peek_kws(&["select"]) || t.peek_kws(&["with"]) {
                return Ok(Statement::Explain {
                    sql: rest_after_words(trimmed, 1).to_string(),
                    verbose: false,
                    analyze: false,
                });
            }
            let (db, name) = t.object_name()?;
            let all = t.eat_kw("all");
            t.finish()?;
            Ok(Statement::Describe { db, name, all })
        }
        "prepare" => {
            t.advance();
            let name = t.ident()?;
            t.expect_kw("from")?;
            let source = match t.advance() {
                Some(Token::SingleQuotedString(s)) | Some(Token::DoubleQuotedString(s)) => {
                    PrepareSource::Text(s)
                }
                Some(Token::Word(w)) if w.value.starts_with('@') && !w.value.starts_with("@@") => {
                    PrepareSource::UserVar(w.value.trim_start_matches('@').to_ascii_lowercase())
                }
                _ => return Err(t.unexpected("a quoted statement or @variable")),
            };
            t.finish()?;
            Ok(Statement::Prepare { name, source })
        }
        "execute" => {
            t.advance();
            let name = t.ident()?;
            let mut using = vec![];
            if t.eat_kw("using") {
                loop {
                    match t.advance() {
                        Some(Token::Word(w))
                            if w.value.starts_with('@') && !w.value.starts_with("@@") =>
                        {
                            using.push(w.value.trim_start_matches('@').to_ascii_lowercase())
                        }
                        _ => return Err(t.unexpected("a @variable")),
                    }
                    if !t.eat(&Token::Comma) {
                        break;
                    }
                }
            }
            t.finish()?;
            Ok(Statement::ExecutePrepared { name, using })
        }
        "deallocate" => {
            t.advance();
            t.expect_kw("prepare")?;
            let name = t.ident()?;
            t.finish()?;
            Ok(Statement::Deallocate(name))
        }
        "kill" => {
            t.advance();
            let connection = if t.eat_kw("query") {
                false
            } else {
                t.eat_kw("connection");
                true
            };
            let id = t.number()?;
            t.finish()?;
            Ok(Statement::Kill { connection, id })
        }
        "admin" => {
            t.advance();
            if t.eat_kws(&["repair", "table"]) {
                let (db, table) = t.object_name()?;
                t.finish()?;
                return Ok(Statement::AdminRepair { db, table });
            }
            if t.eat_kws(&["show", "replica", "status", "from"]) {
                let (db, table) = t.object_name()?;
                let status = if t.eat_kw("where") {
                    t.expect_kw("status")?;
                    let equal = if t.eat(&Token::Eq) {
                        true
                    } else {
                        t.expect(&Token::Neq)?;
                        false
                    };
                    Some((equal, t.string()?.to_ascii_uppercase()))
                } else {
                    None
                };
                t.finish()?;
                return Ok(Statement::AdminShowReplicaStatus { db, table, status });
            }
            if !t.eat_kws(&["compact", "table"]) {
                return Err(TethysError::NotSupported(
                    "of the ADMIN statements Tethys supports ADMIN COMPACT TABLE, ADMIN REPAIR \
                     TABLE and ADMIN SHOW REPLICA STATUS"
                        .into(),
                ));
            }
            let (db, table) = t.object_name()?;
            let partition = if t.eat_kw("partition") {
                Some(t.ident()?)
            } else {
                None
            };
            let kind = if t.eat_kw("where") {
                t.expect_kw("type")?;
                t.expect(&Token::Eq)?;
                t.string()?.to_ascii_lowercase()
            } else {
                "full".into()
            };
            t.finish()?;
            if !matches!(kind.as_str(), "cumulative" | "base" | "full") {
                return Err(TethysError::Analysis(format!(
                    "Compaction type must be 'cumulative', 'base' or 'full', not '{kind}'"
                )));
            }
            Ok(Statement::AdminCompact {
                db,
                table,
                partition,
                kind,
            })
        }
        "analyze" => parse_analyze(&mut t),
        "begin" => Ok(Statement::Begin),
        "start" => {
            t.advance();
            t.expect_kw("transaction")?;
            Ok(Statement::Begin)
        }
        "commit" => Ok(Statement::Commit),
        "rollback" => Ok(Statement::Rollback),
        "delete" => parse_delete(&mut t, trimmed),
        "update" => Ok(Statement::Update(trimmed.to_string())),
        other => Err(TethysError::Syntax(format!(
            "You have an error in your SQL syntax: unknown statement starting with '{other}'"
        ))),
    }
}

/// The text after the first `n` words.
fn rest_after_words(sql: &str, n: usize) -> &str {
    let mut s = sql.trim_start();
    for _ in 0..n {
        let end = s.find(|c: char| c.is_whitespace()).unwrap_or(s.len());
        s = s[end..].trim_start();
    }
    s
}

/// An optional `PARTITION p`, `PARTITION (p, ...)` or `PARTITIONS (p, ...)`.
fn partition_list(t: &mut Tokens) -> Result<Vec<String>> {
    if !(t.eat_kw("partition") || t.eat_kw("partitions")) {
        return Ok(vec![]);
    }
    if t.peek() == Some(&Token::LParen) {
        t.ident_list()
    } else {
        Ok(vec![t.ident()?])
    }
}

/// `( a, b )` when the next token opens one; empty otherwise.
fn optional_ident_list(t: &mut Tokens) -> Result<Vec<String>> {
    if t.peek() == Some(&Token::LParen) {
        t.ident_list()
    } else {
        Ok(vec![])
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The table of the article Tethys was designed from.
    const ORDERS: &str = include_str!("../../../../sql-tests/fixtures/orders.sql");

    #[test]
    fn parses_the_orders_example() {
        let Statement::CreateTable(ct) = parse(ORDERS).unwrap() else {
            panic!("not a create table")
        };
        assert_eq!(ct.columns.len(), 7);
        assert_eq!(ct.key_columns, vec!["created_at", "region", "category"]);
        assert_eq!(ct.partitions.len(), 3);
        assert_eq!(
            ct.partitions[1].values,
            PartitionValues::Fixed("2026-08-01".into(), "2026-09-01".into())
        );
        let d = ct.distribution.unwrap();
        assert_eq!(d.hash_columns, vec!["order_id"]);
        assert_eq!(d.buckets, Some(10));
        assert_eq!(ct.properties, vec![("replication_num".into(), "1".into())]);
        assert_eq!(ct.columns[0].nullable, Some(false));
    }

    #[test]
    fn statistics_statements() {
        assert_eq!(
            parse("ANALYZE TABLE db1.t (a, b) WITH SYNC").unwrap(),
            Statement::Analyze {
                target: AnalyzeTarget::Table {
                    db: Some("db1".into()),
                    name: "t".into()
                },
                columns: vec!["a".into(), "b".into()],
            }
        );
        assert_eq!(
            parse("analyze database d").unwrap(),
            Statement::Analyze {
                target: AnalyzeTarget::Database("d".into()),
                columns: vec![],
            }
        );
        assert!(matches!(
            parse("ANALYZE TABLE t WITH SAMPLE PERCENT 10"),
            Err(TethysError::NotSupported(_))
        ));
        assert!(parse("ANALYZE t").is_err());
        assert_eq!(
            parse("SHOW COLUMN CACHED STATS t (a)").unwrap(),
            Statement::ShowColumnStats {
                db: None,
                table: "t".into(),
                columns: vec!["a".into()],
            }
        );
        assert_eq!(
            parse("DROP STATS d.t").unwrap(),
            Statement::DropStats {
                db: Some("d".into()),
                table: "t".into(),
                columns: vec![],
            }
        );
    }

    #[test]
    fn less_than_partitions_and_errors() {
        let s = parse(
            "create table t (k int, v int) duplicate key(k) partition by range(k) \
             (partition p1 values less than (\"10\"), partition p2 values less than maxvalue) \
             distributed by random buckets auto",
        )
        .unwrap();
        let Statement::CreateTable(ct) = s else {
            panic!()
        };
        assert_eq!(ct.partitions[1].values, PartitionValues::LessThan(None));
        assert!(ct.distribution.unwrap().buckets.is_none());
        assert!(matches!(
            parse("create table t (k int) engine = mysql"),
            Err(TethysError::NotSupported(_))
        ));
        assert!(matches!(
            parse("create table t (k int"),
            Err(TethysError::Syntax(_))
        ));
        assert!(matches!(parse("selec 1"), Err(TethysError::Syntax(_))));
    }

    #[test]
    fn insert_with_label() {
        let Statement::Insert { sql, label } =
            parse("INSERT INTO t WITH LABEL my_l (a) VALUES (1)").unwrap()
        else {
            panic!()
        };
        assert_eq!(label.as_deref(), Some("my_l"));
        assert!(!sql.to_lowercase().contains("label"));
    }

    #[test]
    fn split() {
        assert_eq!(
            split_statements("CREATE DATABASE demo; USE demo; select ';' -- c;\n ;"),
            vec!["CREATE DATABASE demo", "USE demo", "select ';'"]
        );
    }

    #[test]
    fn show_where() {
        let Statement::ShowVariables { filter, .. } =
            parse("SHOW VARIABLES WHERE Variable_name = 'language' OR Variable_name = 'x'")
                .unwrap()
        else {
            panic!()
        };
        assert_eq!(
            filter.where_sql.unwrap(),
            "Variable_name = 'language' OR Variable_name = 'x'"
        );
    }

    use proptest::prelude::*;

    /// SQL-shaped noise: keywords, names in several scripts, literals,
    /// comments and punctuation in any order.
    pub(crate) fn sql_soup() -> impl Strategy<Value = String> {
        let token = prop::sample::select(vec![
            "SELECT",
            "INSERT",
            "INTO",
            "DELETE",
            "FROM",
            "WHERE",
            "CREATE",
            "TABLE",
            "DATABASE",
            "SHOW",
            "SET",
            "GLOBAL",
            "PREPARE",
            "EXECUTE",
            "USING",
            "LABEL",
            "WITH",
            "VALUES",
            "PARTITION",
            "PROPERTIES",
            "DUPLICATE",
            "KEY",
            "DISTRIBUTED",
            "BY",
            "HASH",
            "BUCKETS",
            "LIKE",
            "ALTER",
            "ADD",
            "DROP",
            "EXPLAIN",
            "ANALYZE",
            "订单",
            "金额",
            "`x`",
            "`a``b`",
            "'s'",
            "'it''s'",
            "\"q\"",
            "'\\'",
            "?",
            "@v",
            "@@global.x",
            "1",
            "-1",
            "1e9",
            "--",
            "-- c\n",
            "/* 注释 */",
            "/*",
            "#",
            ";",
            ",",
            "(",
            ")",
            "=",
            ".",
            "*",
            "%",
            "\n",
            " ",
            "；",
            "，",
            "（",
        ]);
        prop::collection::vec(token, 0..40).prop_map(|t| t.join(" "))
    }

    #[test]
    fn a_non_ascii_word_after_with_is_no_label() {
        // Sliced mid-character, this panicked (found by benches/fuzz); the
        // text stays the INSERT's, for the planner to judge.
        assert!(matches!(
            parse("INSERT INTO t WITH 订单 GLOBAL"),
            Ok(Statement::Insert { label: None, .. })
        ));
        assert!(matches!(
            parse("INSERT INTO t WITH LABEL 标签 VALUES (1)"),
            Ok(Statement::Insert { label: Some(l), .. }) if l == "标签"
        ));
    }

    proptest! {
        /// No text, however broken, panics the statement front end: it is
        /// a statement or an error.
        #[test]
        fn fuzz_statements_never_panic(
            soup in sql_soup(),
            noise in "\\PC{0,80}",
        ) {
            let started = std::time::Instant::now();
            for sql in [soup.as_str(), noise.as_str(), &format!("{soup}{noise}")] {
                let _ = parse(sql);
                let _ = split_statements(sql);
                let _ = crate::sql::rewrite::parse_for_datafusion(sql);
                let _ = crate::sql::params::count_placeholders(sql);
            }
            // An input that takes a second is a hang.
            prop_assert!(started.elapsed().as_secs() < 1, "{:?}", started.elapsed());
        }
    }
}

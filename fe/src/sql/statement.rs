//! Classifying and parsing statements. Doris DDL, SHOW, SET and session
//! statements are parsed here; queries and INSERT go to DataFusion's SQL
//! planner (sqlparser's MySQL dialect), after Doris-only clauses such as
//! `WITH LABEL` are taken out.

use datafusion::sql::sqlparser::tokenizer::Token;
use tethys_common::types::ColumnType;
use tethys_common::{Result, TethysError};

use super::set::{SetStatement, parse_set};
use super::tokens::Tokens;

/// A column definition in CREATE TABLE.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDef {
    pub name: String,
    pub column_type: ColumnType,
    pub nullable: Option<bool>,
    pub is_key: bool,
    pub aggregation: Option<String>,
    pub default: Option<String>,
    pub comment: String,
}

/// The values clause of a range partition.
#[derive(Debug, Clone, PartialEq)]
pub enum PartitionValues {
    /// `VALUES LESS THAN ("x")`; `None` = MAXVALUE.
    LessThan(Option<String>),
    /// `VALUES [("a"), ("b"))`.
    Fixed(String, String),
}

/// One partition definition.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionDef {
    pub name: String,
    pub if_not_exists: bool,
    pub values: PartitionValues,
    pub buckets: Option<u32>,
}

/// DISTRIBUTED BY.
#[derive(Debug, Clone, PartialEq)]
pub struct DistributionDef {
    /// Hash columns; empty for RANDOM.
    pub hash_columns: Vec<String>,
    /// `None` for BUCKETS AUTO (or no BUCKETS clause).
    pub buckets: Option<u32>,
}

/// What `ANALYZE` collects statistics for.
#[derive(Debug, Clone, PartialEq)]
pub enum AnalyzeTarget {
    Table { db: Option<String>, name: String },
    Database(String),
}

/// CREATE TABLE in Doris' grammar.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateTable {
    pub db: Option<String>,
    pub name: String,
    pub if_not_exists: bool,
    pub columns: Vec<ColumnDef>,
    pub keys_type: Option<String>,
    pub key_columns: Vec<String>,
    pub comment: Option<String>,
    pub partition_column: Option<Vec<String>>,
    pub partitions: Vec<PartitionDef>,
    pub distribution: Option<DistributionDef>,
    pub properties: Vec<(String, String)>,
}

/// `SHOW ... LIKE 'x'` / `WHERE expr`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShowFilter {
    pub like: Option<String>,
    /// The text of the WHERE expression.
    pub where_sql: Option<String>,
}

/// A SHOW answered from `information_schema`'s rows.
#[derive(Debug, Clone, PartialEq)]
pub enum ShowMeta {
    Tables {
        db: Option<String>,
        full: bool,
        filter: ShowFilter,
    },
    TableStatus {
        db: Option<String>,
        filter: ShowFilter,
    },
    Columns {
        db: Option<String>,
        table: String,
        full: bool,
        filter: ShowFilter,
    },
    Index {
        db: Option<String>,
        table: String,
        filter: ShowFilter,
    },
    Charset(ShowFilter),
    Collation(ShowFilter),
    Status(ShowFilter),
    /// `SHOW [FULL] TRIGGERS [FROM db]`: Tethys has none (DBeaver asks).
    Triggers {
        db: Option<String>,
        filter: ShowFilter,
    },
}

/// Where `PREPARE` takes the statement's text from.
#[derive(Debug, Clone, PartialEq)]
pub enum PrepareSource {
    Text(String),
    UserVar(String),
}

/// A parsed statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    /// A query (or other statement) for DataFusion's planner.
    Query(String),
    /// INSERT, with Doris-only clauses removed.
    Insert {
        sql: String,
        label: Option<String>,
    },
    /// EXPLAIN; with ANALYZE the query runs and its counters are shown.
    Explain {
        sql: String,
        verbose: bool,
        analyze: bool,
    },
    CreateDatabase {
        name: String,
        if_not_exists: bool,
    },
    DropDatabase {
        name: String,
        if_exists: bool,
    },
    CreateTable(Box<CreateTable>),
    DropTable {
        db: Option<String>,
        name: String,
        if_exists: bool,
    },
    TruncateTable {
        db: Option<String>,
        name: String,
        partitions: Vec<String>,
    },
    AddPartition {
        db: Option<String>,
        table: String,
        partition: PartitionDef,
    },
    DropPartition {
        db: Option<String>,
        table: String,
        name: String,
        if_exists: bool,
    },
    /// `ALTER TABLE t SET ("k" = "v", ...)`.
    SetTableProperties {
        db: Option<String>,
        table: String,
        properties: Vec<(String, String)>,
    },
    Use(String),
    Set(SetStatement),
    ShowDatabases(ShowFilter),
    ShowCreateTable {
        db: Option<String>,
        name: String,
    },
    ShowCreateDatabase(String),
    Describe {
        db: Option<String>,
        name: String,
        all: bool,
    },
    ShowPartitions {
        db: Option<String>,
        table: String,
    },
    ShowTablets {
        db: Option<String>,
        table: String,
        partition: Option<String>,
    },
    /// `DELETE FROM t [PARTITION p | PARTITIONS (p, ...)] WHERE cond`.
    Delete {
        db: Option<String>,
        table: String,
        partitions: Vec<String>,
        /// The condition's text, after WHERE.
        condition: String,
    },
    /// `UPDATE t SET c = expr, ... [WHERE cond]` (the statement's text).
    Update(String),
    /// `ADMIN COMPACT TABLE t [PARTITION p] [WHERE type = 'cumulative' | 'base' | 'full']`:
    /// compacts the table's tablets now (Doris' statement; `full` when no
    /// type is given) and returns when done.
    AdminCompact {
        db: Option<String>,
        table: String,
        partition: Option<String>,
        kind: String,
    },
    /// `ANALYZE TABLE t [(cols)] [WITH SYNC]` or `ANALYZE DATABASE db`:
    /// collects column statistics for the optimizer.
    Analyze {
        target: AnalyzeTarget,
        columns: Vec<String>,
    },
    /// `SHOW COLUMN [CACHED] STATS t [(cols)]`.
    ShowColumnStats {
        db: Option<String>,
        table: String,
        columns: Vec<String>,
    },
    /// `DROP STATS t [(cols)]`.
    DropStats {
        db: Option<String>,
        table: String,
        columns: Vec<String>,
    },
    ShowVariables {
        global: bool,
        filter: ShowFilter,
    },
    ShowProcessList,
    /// `SHOW QUERY PROFILE ["/" | "/<query id>"]`.
    ShowQueryProfile {
        /// The query id, or `None` for the list.
        id: Option<String>,
    },
    ShowBackends,
    ShowFrontends,
    ShowTransaction {
        db: Option<String>,
        where_sql: Option<String>,
    },
    /// SHOW LOAD / SHOW STREAM LOAD.
    ShowLoad {
        db: Option<String>,
        stream: bool,
        filter: ShowFilter,
    },
    ShowEmpty {
        columns: Vec<&'static str>,
    },
    ShowEngines,
    /// The SHOW statements MySQL clients and BI tools read metadata with,
    /// answered from `information_schema` (see `crate::show`).
    ShowMeta(ShowMeta),
    Kill {
        connection: bool,
        id: u64,
    },
    /// `PREPARE name FROM 'text' | @var`.
    Prepare {
        name: String,
        source: PrepareSource,
    },
    /// `EXECUTE name [USING @a, @b, ...]`.
    ExecutePrepared {
        name: String,
        using: Vec<String>,
    },
    /// `DEALLOCATE PREPARE name`.
    Deallocate(String),
    Begin,
    Commit,
    Rollback,
    Empty,
}

/// Splits a multi-statement string on `;` outside quotes and comments.
pub fn split_statements(sql: &str) -> Vec<String> {
    let mut out = vec![];
    let mut cur = String::new();
    let mut chars = sql.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                cur.push(c);
                if c == '\\' && q != '`' {
                    if let Some(n) = chars.next() {
                        cur.push(n);
                    }
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' | '`' => {
                    quote = Some(c);
                    cur.push(c);
                }
                '-' if chars.peek() == Some(&'-') => {
                    for n in chars.by_ref() {
                        if n == '\n' {
                            cur.push('\n');
                            break;
                        }
                    }
                }
                '#' => {
                    for n in chars.by_ref() {
                        if n == '\n' {
                            cur.push('\n');
                            break;
                        }
                    }
                }
                '/' if chars.peek() == Some(&'*') => {
                    chars.next();
                    let mut prev = ' ';
                    for n in chars.by_ref() {
                        if prev == '*' && n == '/' {
                            break;
                        }
                        prev = n;
                    }
                    cur.push(' ');
                }
                ';' => {
                    if !cur.trim().is_empty() {
                        out.push(cur.trim().to_string());
                    }
                    cur.clear();
                }
                _ => cur.push(c),
            },
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// Finds the byte offset of a keyword at top level (outside quotes/parens).
fn find_top_level_kw(sql: &str, kw: &str) -> Option<usize> {
    let b = sql.as_bytes();
    let mut quote: Option<u8> = None;
    let mut depth = 0i32;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if let Some(q) = quote {
            if c == b'\\' {
                i += 2;
                continue;
            }
            if c == q {
                quote = None;
            }
        } else {
            match c {
                b'\'' | b'"' | b'`' => quote = Some(c),
                b'(' => depth += 1,
                b')' => depth -= 1,
                _ => {
                    if depth == 0
                        && sql[i..].len() >= kw.len()
                        && sql.is_char_boundary(i + kw.len())
                        && sql[i..i + kw.len()].eq_ignore_ascii_case(kw)
                        && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
                        && sql[i + kw.len()..]
                            .bytes()
                            .next()
                            .is_none_or(|n| !(n.is_ascii_alphanumeric() || n == b'_'))
                    {
                        return Some(i);
                    }
                }
            }
        }
        i += 1;
    }
    None
}

fn show_filter(t: &mut Tokens, sql: &str) -> Result<ShowFilter> {
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

/// Parses one statement.
pub fn parse(sql: &str) -> Result<Statement> {
    let trimmed = sql.trim().trim_end_matches(';').trim();
    if trimmed.is_empty() {
        return Ok(Statement::Empty);
    }
    let mut t = Tokens::new(trimmed)?;
    if t.at_end() {
        return Ok(Statement::Empty);
    }
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
            if !t.eat_kws(&["compact", "table"]) {
                return Err(TethysError::NotSupported(
                    "of the ADMIN statements only ADMIN COMPACT TABLE is supported".into(),
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

fn parse_delete(t: &mut Tokens, sql: &str) -> Result<Statement> {
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

fn parse_insert(sql: &str) -> Result<Statement> {
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
        if after.len() >= 5 && after[..5].eq_ignore_ascii_case("label") {
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

fn parse_create(t: &mut Tokens) -> Result<Statement> {
    t.advance();
    if t.eat_kw("database") || t.eat_kw("schema") {
        let if_not_exists = t.eat_kws(&["if", "not", "exists"]);
        let name = t.ident()?;
        if t.eat_kw("properties") {
            t.properties()?;
        }
        t.finish()?;
        return Ok(Statement::CreateDatabase {
            name,
            if_not_exists,
        });
    }
    t.eat_kw("external");
    if !t.eat_kw("table") {
        return Err(TethysError::NotSupported(
            "only CREATE DATABASE and CREATE TABLE are supported yet".into(),
        ));
    }
    let if_not_exists = t.eat_kws(&["if", "not", "exists"]);
    let (db, name) = t.object_name()?;
    if t.peek_kws(&["like"]) || t.peek_kws(&["as"]) {
        return Err(TethysError::NotSupported(
            "CREATE TABLE ... LIKE / AS SELECT is not supported yet".into(),
        ));
    }
    t.expect(&Token::LParen)?;
    let mut columns = vec![];
    loop {
        if t.peek_kws(&["index"]) {
            return Err(TethysError::NotSupported(
                "INDEX clauses are not supported yet".into(),
            ));
        }
        columns.push(parse_column(t)?);
        if !t.eat(&Token::Comma) {
            break;
        }
    }
    t.expect(&Token::RParen)?;
    let mut ct = CreateTable {
        db,
        name,
        if_not_exists,
        columns,
        keys_type: None,
        key_columns: vec![],
        comment: None,
        partition_column: None,
        partitions: vec![],
        distribution: None,
        properties: vec![],
    };
    loop {
        if t.at_end() {
            break;
        }
        if t.eat_kw("engine") {
            t.expect(&Token::Eq)?;
            let e = t.ident()?;
            if !e.eq_ignore_ascii_case("olap") {
                return Err(TethysError::NotSupported(format!(
                    "ENGINE = {e} is not supported; use OLAP"
                )));
            }
        } else if t.peek_kws(&["duplicate", "key"])
            || t.peek_kws(&["aggregate", "key"])
            || t.peek_kws(&["unique", "key"])
        {
            let kind = t.ident()?.to_ascii_uppercase();
            t.advance();
            ct.keys_type = Some(kind);
            ct.key_columns = t.ident_list()?;
        } else if t.eat_kw("comment") {
            ct.comment = Some(t.string()?);
        } else if t.peek_kws(&["auto", "partition"]) {
            return Err(TethysError::NotSupported(
                "AUTO PARTITION is not supported yet".into(),
            ));
        } else if t.eat_kws(&["partition", "by"]) {
            if t.eat_kw("list") {
                return Err(TethysError::NotSupported(
                    "PARTITION BY LIST is not supported yet".into(),
                ));
            }
            t.expect_kw("range")?;
            ct.partition_column = Some(t.ident_list()?);
            t.expect(&Token::LParen)?;
            if !t.eat(&Token::RParen) {
                loop {
                    if t.peek_kws(&["from"]) {
                        return Err(TethysError::NotSupported(
                            "batch partitions (FROM ... TO ... INTERVAL) are not supported yet"
                                .into(),
                        ));
                    }
                    t.expect_kw("partition")?;
                    ct.partitions.push(parse_partition_def(t)?);
                    if !t.eat(&Token::Comma) {
                        break;
                    }
                }
                t.expect(&Token::RParen)?;
            }
        } else if t.eat_kws(&["distributed", "by"]) {
            ct.distribution = Some(parse_distribution(t)?);
        } else if t.eat_kw("properties") {
            ct.properties = t.properties()?;
        } else if t.peek_kws(&["rollup"]) {
            return Err(TethysError::NotSupported(
                "ROLLUP is not supported yet".into(),
            ));
        } else {
            return Err(t.unexpected(
                "a table clause (ENGINE, KEY, PARTITION BY, DISTRIBUTED BY, PROPERTIES)",
            ));
        }
    }
    Ok(Statement::CreateTable(Box::new(ct)))
}

fn parse_distribution(t: &mut Tokens) -> Result<DistributionDef> {
    let hash_columns = if t.eat_kw("hash") {
        t.ident_list()?
    } else if t.eat_kw("random") {
        vec![]
    } else {
        return Err(t.unexpected("HASH or RANDOM"));
    };
    let buckets = if t.eat_kw("buckets") {
        if t.eat_kw("auto") {
            None
        } else {
            let n = t.number()?;
            if n == 0 || n > 65535 {
                return Err(TethysError::Analysis(
                    "BUCKETS must be between 1 and 65535".into(),
                ));
            }
            Some(n as u32)
        }
    } else {
        None
    };
    Ok(DistributionDef {
        hash_columns,
        buckets,
    })
}

fn parse_partition_value_tuple(t: &mut Tokens) -> Result<Option<String>> {
    if t.eat_kw("maxvalue") {
        return Ok(None);
    }
    t.expect(&Token::LParen)?;
    let v = if t.eat_kw("maxvalue") {
        None
    } else {
        let s = match t.peek() {
            Some(Token::Number(n, _)) => {
                let n = n.clone();
                t.advance();
                n
            }
            Some(Token::Minus) => {
                t.advance();
                format!("-{}", t.number()?)
            }
            _ => t.string()?,
        };
        Some(s)
    };
    if t.eat(&Token::Comma) {
        return Err(TethysError::NotSupported(
            "multi-column range partitions are not supported yet".into(),
        ));
    }
    t.expect(&Token::RParen)?;
    Ok(v)
}

fn parse_partition_def(t: &mut Tokens) -> Result<PartitionDef> {
    let if_not_exists = t.eat_kws(&["if", "not", "exists"]);
    let name = t.ident()?;
    t.expect_kw("values")?;
    let values = if t.eat_kws(&["less", "than"]) {
        PartitionValues::LessThan(parse_partition_value_tuple(t)?)
    } else if t.eat(&Token::LBracket) {
        let lo = parse_partition_value_tuple(t)?;
        t.expect(&Token::Comma)?;
        let hi = parse_partition_value_tuple(t)?;
        t.expect(&Token::RParen)?;
        match (lo, hi) {
            (Some(lo), Some(hi)) => PartitionValues::Fixed(lo, hi),
            _ => {
                return Err(TethysError::Analysis(
                    "a fixed range [(\"a\"), (\"b\")) needs two values".into(),
                ));
            }
        }
    } else if t.peek_kws(&["in"]) {
        return Err(TethysError::NotSupported(
            "LIST partitions are not supported yet".into(),
        ));
    } else {
        return Err(t.unexpected("LESS THAN or ["));
    };
    Ok(PartitionDef {
        name,
        if_not_exists,
        values,
        buckets: None,
    })
}

fn parse_column(t: &mut Tokens) -> Result<ColumnDef> {
    let name = t.ident()?;
    let tname = t.ident()?;
    let mut args = vec![];
    if t.eat(&Token::LParen) {
        loop {
            args.push(t.number()?);
            if !t.eat(&Token::Comma) {
                break;
            }
        }
        t.expect(&Token::RParen)?;
    }
    if t.eat(&Token::Lt) {
        return Err(TethysError::NotSupported(format!(
            "column type {}<...> is not supported yet",
            tname.to_uppercase()
        )));
    }
    let column_type = ColumnType::from_parts(&tname, &args)?;
    let mut c = ColumnDef {
        name,
        column_type,
        nullable: None,
        is_key: false,
        aggregation: None,
        default: None,
        comment: String::new(),
    };
    loop {
        if t.eat_kw("key") {
            c.is_key = true;
        } else if t.eat_kws(&["not", "null"]) {
            c.nullable = Some(false);
        } else if t.eat_kw("null") {
            c.nullable = Some(true);
        } else if t.eat_kw("default") {
            c.default = match t.advance() {
                Some(Token::SingleQuotedString(s)) | Some(Token::DoubleQuotedString(s)) => Some(s),
                Some(Token::Number(n, _)) => Some(n),
                Some(Token::Minus) => Some(format!("-{}", t.number()?)),
                Some(Token::Word(w)) if w.value.eq_ignore_ascii_case("null") => None,
                Some(Token::Word(w)) if w.value.eq_ignore_ascii_case("bitmap_empty") => {
                    Some("BITMAP_EMPTY".into())
                }
                Some(Token::Word(w))
                    if w.value.eq_ignore_ascii_case("current_timestamp")
                        || w.value.eq_ignore_ascii_case("current_date") =>
                {
                    if t.eat(&Token::LParen) {
                        while !t.eat(&Token::RParen) {
                            if t.advance().is_none() {
                                return Err(t.unexpected("')'"));
                            }
                        }
                    }
                    Some(w.value.to_ascii_uppercase())
                }
                _ => return Err(t.unexpected("a default value")),
            };
        } else if t.eat_kw("comment") {
            c.comment = t.string()?;
        } else if t.eat_kw("auto_increment") {
            return Err(TethysError::NotSupported(
                "AUTO_INCREMENT columns are not supported yet".into(),
            ));
        } else if let Some(agg) = [
            "sum",
            "max",
            "min",
            "replace",
            "replace_if_not_null",
            "hll_union",
            "bitmap_union",
        ]
        .iter()
        .find(|a| t.peek_kws(&[a]))
        {
            t.advance();
            c.aggregation = Some(agg.to_ascii_uppercase());
        } else {
            break;
        }
    }
    Ok(c)
}

fn parse_drop(t: &mut Tokens) -> Result<Statement> {
    t.advance();
    if t.eat_kw("database") || t.eat_kw("schema") {
        let if_exists = t.eat_kws(&["if", "exists"]);
        let name = t.ident()?;
        t.eat_kw("force");
        t.finish()?;
        return Ok(Statement::DropDatabase { name, if_exists });
    }
    if t.eat_kw("table") {
        let if_exists = t.eat_kws(&["if", "exists"]);
        let (db, name) = t.object_name()?;
        t.eat_kw("force");
        t.finish()?;
        return Ok(Statement::DropTable {
            db,
            name,
            if_exists,
        });
    }
    if t.eat_kw("stats") {
        let (db, table) = t.object_name()?;
        let columns = optional_ident_list(t)?;
        t.finish()?;
        return Ok(Statement::DropStats { db, table, columns });
    }
    Err(TethysError::NotSupported(
        "only DROP DATABASE, DROP TABLE and DROP STATS are supported yet".into(),
    ))
}

/// `( a, b )` when the next token opens one; empty otherwise.
fn optional_ident_list(t: &mut Tokens) -> Result<Vec<String>> {
    if t.peek() == Some(&Token::LParen) {
        t.ident_list()
    } else {
        Ok(vec![])
    }
}

/// `ANALYZE TABLE t [(cols)] [WITH SYNC]` / `ANALYZE DATABASE db [WITH SYNC]`.
/// Collection always finishes before the statement returns (as `WITH SYNC`
/// does in Doris); sampling is refused rather than silently ignored.
fn parse_analyze(t: &mut Tokens) -> Result<Statement> {
    t.advance();
    let (target, columns) = if t.eat_kw("table") {
        let (db, name) = t.object_name()?;
        (AnalyzeTarget::Table { db, name }, optional_ident_list(t)?)
    } else if t.eat_kw("database") {
        (AnalyzeTarget::Database(t.ident()?), vec![])
    } else {
        return Err(t.unexpected("TABLE or DATABASE"));
    };
    while t.eat_kw("with") {
        if t.eat_kw("sample") {
            return Err(TethysError::NotSupported(
                "ANALYZE ... WITH SAMPLE; Tethys analyzes every row".into(),
            ));
        }
        if !(t.eat_kw("sync") || t.eat_kw("full")) {
            return Err(t.unexpected("SYNC or FULL"));
        }
    }
    t.finish()?;
    Ok(Statement::Analyze { target, columns })
}

fn parse_alter(t: &mut Tokens) -> Result<Statement> {
    t.advance();
    t.expect_kw("table")?;
    let (db, table) = t.object_name()?;
    if t.eat_kws(&["add", "partition"]) {
        let mut p = parse_partition_def(t)?;
        if t.peek() == Some(&Token::LParen) {
            t.properties()?;
        }
        if t.eat_kws(&["distributed", "by"]) {
            let d = parse_distribution(t)?;
            p.buckets = d.buckets;
        }
        t.finish()?;
        return Ok(Statement::AddPartition {
            db,
            table,
            partition: p,
        });
    }
    if t.eat_kws(&["drop", "partition"]) {
        let if_exists = t.eat_kws(&["if", "exists"]);
        let name = t.ident()?;
        t.eat_kw("force");
        t.finish()?;
        return Ok(Statement::DropPartition {
            db,
            table,
            name,
            if_exists,
        });
    }
    if t.eat_kw("set") {
        let properties = t.properties()?;
        t.finish()?;
        return Ok(Statement::SetTableProperties {
            db,
            table,
            properties,
        });
    }
    Err(TethysError::NotSupported(
        "only ALTER TABLE ... ADD PARTITION / DROP PARTITION / SET (...) is supported yet".into(),
    ))
}

fn parse_show(t: &mut Tokens, sql: &str) -> Result<Statement> {
    t.advance();
    let full = t.eat_kw("full");
    if t.eat_kw("databases") || t.eat_kw("schemas") {
        return Ok(Statement::ShowDatabases(show_filter(t, sql)?));
    }
    if t.eat_kw("tables") {
        let db = if t.eat_kw("from") || t.eat_kw("in") {
            Some(t.ident()?)
        } else {
            None
        };
        return Ok(Statement::ShowMeta(ShowMeta::Tables {
            db,
            full,
            filter: show_filter(t, sql)?,
        }));
    }
    if t.eat_kw("triggers") {
        let db = if t.eat_kw("from") || t.eat_kw("in") {
            Some(t.ident()?)
        } else {
            None
        };
        return Ok(Statement::ShowMeta(ShowMeta::Triggers {
            db,
            filter: show_filter(t, sql)?,
        }));
    }
    if t.eat_kws(&["table", "status"]) {
        let db = if t.eat_kw("from") || t.eat_kw("in") {
            Some(t.ident()?)
        } else {
            None
        };
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
        if !(t.eat_kw("from") || t.eat_kw("in")) {
            return Err(t.unexpected("FROM"));
        }
        let (mut db, table) = t.object_name()?;
        if t.eat_kw("from") || t.eat_kw("in") {
            db = Some(t.ident()?);
        }
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
        let db = if t.eat_kw("from") || t.eat_kw("in") {
            Some(t.ident()?)
        } else {
            None
        };
        return Ok(Statement::ShowLoad {
            db,
            stream,
            filter: show_filter(t, sql)?,
        });
    }
    if t.eat_kw("transaction") {
        let db = if t.eat_kw("from") || t.eat_kw("in") {
            Some(t.ident()?)
        } else {
            None
        };
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
        if !(t.eat_kw("from") || t.eat_kw("in")) {
            return Err(t.unexpected("FROM"));
        }
        let (mut db, table) = t.object_name()?;
        if t.eat_kw("from") || t.eat_kw("in") {
            db = Some(t.ident()?);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    const ORDERS: &str = r#"CREATE TABLE orders (
 created_at DATETIME NOT NULL,
 region VARCHAR(32),
 category VARCHAR(32),
 order_id BIGINT NOT NULL,
 user_id BIGINT,
 amount DECIMAL(10, 2),
 status VARCHAR(16)
) ENGINE = OLAP
DUPLICATE KEY(created_at, region, category)
PARTITION BY RANGE(created_at) (
 PARTITION p202607 VALUES [("2026-07-01"), ("2026-08-01")),
 PARTITION p202608 VALUES [("2026-08-01"), ("2026-09-01")),
 PARTITION p202609 VALUES [("2026-09-01"), ("2026-10-01"))
)
DISTRIBUTED BY HASH(order_id) BUCKETS 10
PROPERTIES ("replication_num" = "1");"#;

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
}

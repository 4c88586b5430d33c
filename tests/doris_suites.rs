//! Apache Doris' own function regression cases, ported to
//! `sql-tests/doris/*.test`: each case is a query of a Doris suite
//! (`regression-test/suites/...groovy`) with the answer from its `.out`
//! file, copied as Doris' regression framework prints it (NULL as `\N`,
//! datetimes as Java's `LocalDateTime` prints them, booleans as
//! `true`/`false`, other values as the server sent them).
//! The queries run through the MySQL protocol against one Tethys; every
//! case must give Doris' answer unless `sql-tests/doris/differences.txt`
//! lists it with the reason, and a listed case that passes fails the test
//! too (the list stays true). The counts go to README.md.
//!
//! File format: `-- statement --` and SQL (setup that must succeed), or
//! `-- case TAG [unordered] --`, the SQL, `-- answer --` and the answer's
//! lines (tab-separated columns) up to the next `-- ` line; `#` lines at
//! the top name the source.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mysql_async::consts::ColumnType;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};
use tethys_sql_tests::TethysServer;

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tethys"))
}

fn suites_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sql-tests/doris")
}

#[derive(Debug)]
enum Step {
    Statement(String),
    Case {
        id: String,
        sql: String,
        answer: Vec<String>,
        unordered: bool,
    },
}

/// The steps of one `.test` file; case ids are `suite:tag#n`, n counting
/// the tag's occurrences.
fn parse(suite: &str, text: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line == "-- statement --" {
            let mut sql = Vec::new();
            while let Some(l) = lines.next_if(|l| !l.starts_with("-- ")) {
                sql.push(l);
            }
            steps.push(Step::Statement(sql.join("\n")));
        } else if let Some(head) = line
            .strip_prefix("-- case ")
            .and_then(|h| h.strip_suffix(" --"))
        {
            let (tag, unordered) = match head.strip_suffix(" unordered") {
                Some(t) => (t, true),
                None => (head, false),
            };
            let n = seen.entry(tag.to_string()).or_default();
            *n += 1;
            let mut sql = Vec::new();
            while let Some(l) = lines.next_if(|l| *l != "-- answer --") {
                sql.push(l);
            }
            lines.next();
            let mut answer: Vec<String> = Vec::new();
            while let Some(l) = lines.next_if(|l| !l.starts_with("-- ")) {
                answer.push(l.to_string());
            }
            // The blank line that ends a block in a `.out` file.
            if answer.last().is_some_and(|l| l.is_empty()) {
                answer.pop();
            }
            steps.push(Step::Case {
                id: format!("{suite}:{tag}#{n}"),
                sql: sql.join("\n"),
                answer,
                unordered,
            });
        }
    }
    steps
}

/// A datetime as Java's `LocalDateTime.toString` writes it.
fn java_datetime(text: &str) -> String {
    let Some((date, time)) = text.split_once(' ') else {
        return text.to_string();
    };
    let (clock, frac) = time.split_once('.').unwrap_or((time, ""));
    let frac = frac.trim_end_matches('0');
    let hm = clock.get(..5).unwrap_or(clock);
    let secs = clock.get(6..8).unwrap_or("00");
    let mut out = format!("{date}T{hm}");
    if secs != "00" || !frac.is_empty() {
        out.push(':');
        out.push_str(secs);
    }
    if !frac.is_empty() {
        let width = if frac.len() <= 3 {
            3
        } else if frac.len() <= 6 {
            6
        } else {
            9
        };
        out.push('.');
        out.push_str(&format!("{frac:0<width$}"));
    }
    out
}

/// One result value as Doris' regression framework prints it.
fn doris_text(v: &Value, t: ColumnType) -> String {
    let text = match v {
        Value::NULL => return "\\N".into(),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => other.as_sql(true).trim_matches('\'').to_string(),
    };
    match t {
        ColumnType::MYSQL_TYPE_DATETIME
        | ColumnType::MYSQL_TYPE_DATETIME2
        | ColumnType::MYSQL_TYPE_TIMESTAMP
        | ColumnType::MYSQL_TYPE_TIMESTAMP2 => java_datetime(&text),
        _ => text,
    }
}

/// Whether one printed row matches Doris' (a 1/0 TINYINT reads as Doris'
/// true/false: Doris' BOOLEAN).
fn same_row(ours: &[(String, ColumnType)], theirs: &str) -> bool {
    let cells: Vec<&str> = theirs.split('\t').collect();
    cells.len() == ours.len()
        && ours.iter().zip(&cells).all(|((v, t), d)| {
            v == d
                || (*t == ColumnType::MYSQL_TYPE_TINY
                    && ((v == "1" && *d == "true") || (v == "0" && *d == "false")))
        })
}

async fn answer(c: &mut Conn, sql: &str) -> Result<Vec<Vec<(String, ColumnType)>>, String> {
    let rows: Vec<Row> = c.query(sql).await.map_err(|e| e.to_string())?;
    Ok(rows
        .iter()
        .map(|r| {
            let cols = r.columns_ref();
            (0..r.len())
                .map(|i| {
                    let t = cols[i].column_type();
                    (doris_text(r.as_ref(i).unwrap_or(&Value::NULL), t), t)
                })
                .collect()
        })
        .collect())
}

fn matches(ours: &[Vec<(String, ColumnType)>], theirs: &[String], unordered: bool) -> bool {
    if ours.len() != theirs.len() {
        return false;
    }
    if !unordered {
        return ours.iter().zip(theirs).all(|(o, t)| same_row(o, t));
    }
    let mut left: Vec<&String> = theirs.iter().collect();
    ours.iter()
        .all(|o| match left.iter().position(|t| same_row(o, t)) {
            Some(i) => {
                left.remove(i);
                true
            }
            None => false,
        })
}

/// `differences.txt`: case id to the reason Tethys' answer differs.
fn differences() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(suites_dir().join("differences.txt")).unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('|'))
        .map(|(id, why)| (id.trim().to_string(), why.trim().to_string()))
        .collect()
}

#[tokio::test]
async fn doris_function_suites() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(suites_dir())
        .expect("sql-tests/doris")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "test"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no ported suites");
    let server = TethysServer::start(&binary()).await.expect("start");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    let known = differences();
    let (mut total, mut passed) = (0, 0);
    let mut unexpected = Vec::new();
    let mut failing = Vec::new();
    let mut all_ids = std::collections::BTreeSet::new();
    for file in &files {
        let suite = file.file_stem().and_then(|s| s.to_str()).unwrap_or("suite");
        let text = std::fs::read_to_string(file).expect("read suite");
        let db = format!("doris_{suite}");
        c.query_drop(format!("CREATE DATABASE {db}"))
            .await
            .expect("create db");
        c.query_drop(format!("USE {db}")).await.expect("use");
        for step in parse(suite, &text) {
            match step {
                Step::Statement(sql) => {
                    if let Err(e) = c.query_drop(&sql).await {
                        unexpected.push(format!("{suite}: setup failed: {sql}\n  {e}"));
                    }
                }
                Step::Case {
                    id,
                    sql,
                    answer: want,
                    unordered,
                } => {
                    total += 1;
                    all_ids.insert(id.clone());
                    let got = answer(&mut c, &sql).await;
                    let ok = got.as_ref().is_ok_and(|g| matches(g, &want, unordered));
                    if ok {
                        passed += 1;
                        if known.contains_key(&id) {
                            unexpected
                                .push(format!("{id} passes but is listed in differences.txt"));
                        }
                        continue;
                    }
                    failing.push(id.clone());
                    if !known.contains_key(&id) {
                        let shown = match got {
                            Ok(rows) => rows
                                .iter()
                                .map(|r| {
                                    r.iter()
                                        .map(|(v, _)| v.as_str())
                                        .collect::<Vec<_>>()
                                        .join("\t")
                                })
                                .collect::<Vec<_>>()
                                .join("\n         "),
                            Err(e) => format!("error: {e}"),
                        };
                        unexpected.push(format!(
                            "{id}: {sql}\n  want {}\n  got  {shown}",
                            want.join("\n       ")
                        ));
                    }
                }
            }
        }
    }
    for id in known.keys() {
        if !all_ids.contains(id) {
            unexpected.push(format!(
                "{id} is listed in differences.txt but no suite has it"
            ));
        }
    }
    println!(
        "doris suites: {total} cases in {} files, {passed} give Doris' answer, {} listed differences",
        files.len(),
        failing.len()
    );
    assert!(
        unexpected.is_empty(),
        "{} unexpected results:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
}

#[test]
fn java_formats() {
    assert_eq!(java_datetime("2023-07-14 10:51:10"), "2023-07-14T10:51:10");
    assert_eq!(java_datetime("2023-07-14 10:50:00"), "2023-07-14T10:50");
    assert_eq!(
        java_datetime("2023-07-14 10:50:00.120000"),
        "2023-07-14T10:50:00.120"
    );
}

//! Rule zero, enumerated: everything Tethys accepts is in docs/accepted.md
//! with its effect and the test that shows it, and what is not there is
//! refused by name. Checked through the real interface: `SHOW VARIABLES`
//! lists the variables, `CREATE TABLE` tries every Doris table property,
//! Stream Load tries every Doris header.

use std::collections::BTreeSet;
use std::path::PathBuf;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use tethys_sql_tests::{LoadFixture, json_field};

/// One row of docs/accepted.md.
#[derive(Debug)]
struct Row {
    name: String,
    example: String,
    evidence: String,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The rows of the section titled `title`.
fn section(title: &str) -> Vec<Row> {
    let doc = std::fs::read_to_string(root().join("docs/accepted.md")).expect("docs/accepted.md");
    let start = doc
        .find(&format!("## {title}\n"))
        .unwrap_or_else(|| panic!("no section {title}"));
    let body = &doc[start..];
    let end = body[3..].find("\n## ").map_or(body.len(), |i| i + 3);
    body[..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            assert_eq!(
                cells.len(),
                4,
                "a row has name, example, effect, evidence: {l}"
            );
            Row {
                name: cells[0].trim_matches('`').to_string(),
                example: cells[1].trim_matches('`').to_string(),
                evidence: cells[3].to_string(),
            }
        })
        .collect()
}

/// Each row's evidence: a test file that names it, `none in Doris either`,
/// or `untested: why` (returned, to be listed).
fn check_evidence(rows: &[Row]) -> Vec<String> {
    let mut untested = vec![];
    for r in rows {
        if r.evidence == "none in Doris either" {
            continue;
        }
        if r.evidence.starts_with("untested: ") {
            untested.push(r.name.clone());
            continue;
        }
        for file in r.evidence.split(", ") {
            let text = std::fs::read_to_string(root().join(file))
                .unwrap_or_else(|e| panic!("{}: evidence {file}: {e}", r.name));
            assert!(
                text.contains(&r.name),
                "{}: its evidence {file} does not mention it",
                r.name
            );
        }
    }
    untested
}

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tethys"))
}

/// Doris 2.1's table properties (doris-behavior.md 3.7, and one of the
/// dynamic partition family).
const DORIS_TABLE_PROPERTIES: &[&str] = &[
    "replication_num",
    "replication_allocation",
    "min_load_replica_num",
    "storage_medium",
    "storage_cooldown_time",
    "storage_format",
    "inverted_index_storage_format",
    "compression",
    "light_schema_change",
    "enable_unique_key_merge_on_write",
    "store_row_column",
    "row_store_columns",
    "bloom_filter_columns",
    "bloom_filter_fpp",
    "colocate_with",
    "function_column.sequence_col",
    "function_column.sequence_type",
    "disable_auto_compaction",
    "enable_single_replica_compaction",
    "compaction_policy",
    "time_series_compaction_goal_size_mbytes",
    "time_series_compaction_file_count_threshold",
    "time_series_compaction_time_threshold_seconds",
    "group_commit_interval_ms",
    "group_commit_data_bytes",
    "is_being_synced",
    "skip_write_index_on_load",
    "enable_mow_light_delete",
    "dynamic_partition.enable",
    "in_memory",
];

/// Doris 2.1's Stream Load headers (doris-behavior.md 6.2).
const DORIS_HEADERS: &[&str] = &[
    "label",
    "format",
    "column_separator",
    "line_delimiter",
    "enclose",
    "escape",
    "trim_double_quotes",
    "skip_lines",
    "columns",
    "where",
    "max_filter_ratio",
    "strict_mode",
    "partitions",
    "temporary_partitions",
    "timeout",
    "timezone",
    "time_zone",
    "exec_mem_limit",
    "jsonpaths",
    "json_root",
    "strip_outer_array",
    "read_json_by_line",
    "fuzzy_parse",
    "num_as_string",
    "merge_type",
    "delete",
    "function_column.sequence_col",
    "hidden_columns",
    "compress_type",
    "send_batch_parallelism",
    "load_to_single_tablet",
    "two_phase_commit",
    "partial_columns",
    "group_commit",
    "comment",
    "memtable_on_sink_node",
    "load_stream_per_node",
    "enable_profile",
    "negative",
];

async fn fixture() -> LoadFixture {
    LoadFixture::start(
        &binary(),
        &[],
        "acc",
        "t",
        &[
            "CREATE DATABASE acc",
            "CREATE TABLE acc.t (k INT NOT NULL, v INT) UNIQUE KEY(k) \
             DISTRIBUTED BY HASH(k) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\")",
        ],
    )
    .await
}

fn sql_value(v: &str) -> String {
    if v.parse::<f64>().is_ok() {
        v.to_string()
    } else {
        format!("'{}'", v.replace('\'', "''"))
    }
}

#[tokio::test]
async fn every_session_variable_is_listed_with_its_effect() {
    let rows = section("Session variables");
    // What no test shows yet is named so in the doc; the run lists it.
    let untested = check_evidence(&rows);
    eprintln!("variables whose effect no test shows yet: {untested:?}");
    let f = fixture().await;
    let mut c: Conn = f.conn().await;
    let shown: BTreeSet<String> = c
        .query::<(String, String, String, String), _>("SHOW VARIABLES")
        .await
        .expect("SHOW VARIABLES")
        .into_iter()
        .map(|(n, ..)| n)
        .collect();
    let listed: BTreeSet<String> = rows.iter().map(|r| r.name.clone()).collect();
    assert_eq!(
        shown.difference(&listed).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "variables SHOW VARIABLES lists that docs/accepted.md does not"
    );
    assert_eq!(
        listed.difference(&shown).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "rows of docs/accepted.md that are no variable"
    );
    for r in rows.iter().filter(|r| r.example != "(read only)") {
        let set = format!("SET {} = {}", r.name, sql_value(&r.example));
        c.query_drop(&set)
            .await
            .unwrap_or_else(|e| panic!("{set}: {e}"));
    }
    for r in rows.iter().filter(|r| r.example == "(read only)") {
        let err = c
            .query_drop(format!("SET {} = 'x'", r.name))
            .await
            .expect_err("read only");
        assert!(err.to_string().contains("read only"), "{}: {err}", r.name);
    }
}

#[tokio::test]
async fn every_table_property_is_listed_or_refused_by_name() {
    let rows = section("Table properties");
    let untested = check_evidence(&rows);
    assert_eq!(untested, Vec::<String>::new(), "properties without a test");
    let f = fixture().await;
    let mut c = f.conn().await;
    let names: BTreeSet<&str> = DORIS_TABLE_PROPERTIES
        .iter()
        .copied()
        .chain(rows.iter().map(|r| r.name.as_str()))
        .collect();
    for (i, name) in names.into_iter().enumerate() {
        let create = |value: &str| {
            format!(
                "CREATE TABLE acc.p{i} (k INT NOT NULL, v INT) UNIQUE KEY(k) \
                 DISTRIBUTED BY HASH(k) BUCKETS 1 PROPERTIES (\"{name}\" = \"{value}\")"
            )
        };
        match rows.iter().find(|r| r.name == name) {
            Some(r) => {
                let sql = create(&r.example);
                c.query_drop(&sql)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
            }
            None => {
                for value in ["true", "1", "x", "v"] {
                    let err = c
                        .query_drop(create(value))
                        .await
                        .expect_err(&format!("{name} = {value} is not in docs/accepted.md"));
                    assert!(err.to_string().contains(name), "{name}: {err}");
                }
            }
        }
    }
}

#[tokio::test]
async fn every_stream_load_header_is_listed_or_refused_by_name() {
    let rows = section("Stream Load headers");
    let untested = check_evidence(&rows);
    assert_eq!(untested, Vec::<String>::new(), "headers without a test");
    let f = fixture().await;
    let csv = f.file("one.csv", "1,2\n");
    let names: BTreeSet<&str> = DORIS_HEADERS
        .iter()
        .copied()
        .chain(rows.iter().map(|r| r.name.as_str()))
        .collect();
    for name in names {
        let refused_by_name = |body: &str| {
            json_field(body, "Status") == "Fail"
                && json_field(body, "Message")
                    .as_str()
                    .is_some_and(|m| m.contains(name) && m.contains("not supported"))
        };
        match rows.iter().find(|r| r.name == name) {
            Some(r) => {
                let header = format!("{name}:{}", r.example);
                let body = f.load(&csv, &["column_separator:,", &header]);
                assert!(!refused_by_name(&body), "{header} refused: {body}");
            }
            None => {
                let header = format!("{name}:true");
                let body = f.load(&csv, &["column_separator:,", &header]);
                assert!(refused_by_name(&body), "{header} taken: {body}");
            }
        }
    }
}

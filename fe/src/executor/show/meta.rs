//! The SHOW statements MySQL clients and BI tools read metadata with,
//! answered from the same rows as `information_schema`, with MySQL's (and
//! Doris') columns. DBeaver's MySQL navigator opens a database with
//!
//! ```sql
//! SHOW ENGINES; SHOW CHARSET; SHOW COLLATION; SHOW FULL TABLES FROM `demo`;
//! SHOW FULL TRIGGERS FROM `demo`; SHOW TABLE STATUS FROM `demo` LIKE 'orders'
//! ```

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tethys_common::schema::KeysType;
use tethys_common::{Result, TethysError};

use crate::catalog::Table;
use crate::executor::{Output, filtered_nullable, table_snapshot};
use crate::frontend::Frontend;
use crate::metadata::columns::{Col, table_def};
use crate::metadata::information_schema::{self, InformationSchema, SessionView};
use crate::session::Session;
use crate::sql::statement::ShowMeta;

/// The columns of `DESC t` / `SHOW COLUMNS`.
pub const DESCRIBE_COLUMNS: [&str; 6] = ["Field", "Type", "Null", "Key", "Default", "Extra"];
/// The columns of `SHOW FULL COLUMNS`.
const FULL_COLUMNS: [&str; 9] = [
    "Field",
    "Type",
    "Collation",
    "Null",
    "Key",
    "Default",
    "Extra",
    "Privileges",
    "Comment",
];
const TABLE_STATUS_COLUMNS: [&str; 18] = [
    "Name",
    "Engine",
    "Version",
    "Row_format",
    "Rows",
    "Avg_row_length",
    "Data_length",
    "Max_data_length",
    "Index_length",
    "Data_free",
    "Auto_increment",
    "Create_time",
    "Update_time",
    "Check_time",
    "Collation",
    "Checksum",
    "Create_options",
    "Comment",
];
/// `information_schema.tables` columns SHOW TABLE STATUS shows, in order.
const TABLE_STATUS_SOURCE: [&str; 18] = [
    "TABLE_NAME",
    "ENGINE",
    "VERSION",
    "ROW_FORMAT",
    "TABLE_ROWS",
    "AVG_ROW_LENGTH",
    "DATA_LENGTH",
    "MAX_DATA_LENGTH",
    "INDEX_LENGTH",
    "DATA_FREE",
    "AUTO_INCREMENT",
    "CREATE_TIME",
    "UPDATE_TIME",
    "CHECK_TIME",
    "TABLE_COLLATION",
    "CHECKSUM",
    "CREATE_OPTIONS",
    "TABLE_COMMENT",
];
const INDEX_COLUMNS: [&str; 13] = [
    "Table",
    "Non_unique",
    "Key_name",
    "Seq_in_index",
    "Column_name",
    "Collation",
    "Cardinality",
    "Sub_part",
    "Packed",
    "Null",
    "Index_type",
    "Comment",
    "Properties",
];
const INDEX_SOURCE: [&str; 12] = [
    "TABLE_NAME",
    "NON_UNIQUE",
    "INDEX_NAME",
    "SEQ_IN_INDEX",
    "COLUMN_NAME",
    "COLLATION",
    "CARDINALITY",
    "SUB_PART",
    "PACKED",
    "NULLABLE",
    "INDEX_TYPE",
    "COMMENT",
];

/// Runs one metadata SHOW.
pub async fn execute(fe: &Arc<Frontend>, session: &Session, show: ShowMeta) -> Result<Output> {
    let is = InformationSchema {
        fe: fe.clone(),
        session: SessionView::of(fe, session),
    };
    match show {
        ShowMeta::Tables { db, full, filter } => {
            let db = database(fe, session, &db)?;
            let col = format!("Tables_in_{db}");
            let mut names = vec![col.as_str()];
            let mut source = vec!["TABLE_NAME"];
            if full {
                names.push("Table_type");
                source.push("TABLE_TYPE");
            }
            let rows = is
                .select("tables", &source, |r| r.is("TABLE_SCHEMA", &db))
                .await;
            filtered_nullable(&names, rows, &filter).await
        }
        ShowMeta::TableStatus { db, filter } => {
            let db = database(fe, session, &db)?;
            let rows = is
                .select("tables", &TABLE_STATUS_SOURCE, |r| {
                    r.is("TABLE_SCHEMA", &db)
                })
                .await;
            filtered_nullable(&TABLE_STATUS_COLUMNS, rows, &filter).await
        }
        ShowMeta::Columns {
            db,
            table,
            full,
            filter,
        } => {
            let db = database(fe, session, &db)?;
            let rows = if db == information_schema::NAME {
                system_columns(&table, full)?
            } else {
                let t = table_snapshot(fe, &db, &table)?;
                describe_rows(&t, full)
                    .into_iter()
                    .map(|r| r.into_iter().map(Some).collect())
                    .collect()
            };
            let names: &[&str] = if full {
                &FULL_COLUMNS
            } else {
                &DESCRIBE_COLUMNS
            };
            filtered_nullable(names, rows, &filter).await
        }
        ShowMeta::Index { db, table, filter } => {
            let db = database(fe, session, &db)?;
            let name = if db == information_schema::NAME {
                table_def(&table)
                    .map(|d| d.name.to_string())
                    .ok_or_else(|| unknown_table(&db, &table))?
            } else {
                table_snapshot(fe, &db, &table)?.name
            };
            let mut rows = is
                .select("statistics", &INDEX_SOURCE, |r| {
                    r.is("TABLE_SCHEMA", &db) && r.is("TABLE_NAME", &name)
                })
                .await;
            for r in &mut rows {
                r.push(Some(String::new()));
            }
            filtered_nullable(&INDEX_COLUMNS, rows, &filter).await
        }
        ShowMeta::Charset(filter) => {
            let source = [
                "CHARACTER_SET_NAME",
                "DESCRIPTION",
                "DEFAULT_COLLATE_NAME",
                "MAXLEN",
            ];
            let rows = is.select("character_sets", &source, |_| true).await;
            let names = ["Charset", "Description", "Default collation", "Maxlen"];
            filtered_nullable(&names, rows, &filter).await
        }
        ShowMeta::Collation(filter) => {
            let source = [
                "COLLATION_NAME",
                "CHARACTER_SET_NAME",
                "ID",
                "IS_DEFAULT",
                "IS_COMPILED",
                "SORTLEN",
            ];
            let rows = is.select("collations", &source, |_| true).await;
            let names = [
                "Collation",
                "Charset",
                "Id",
                "Default",
                "Compiled",
                "Sortlen",
            ];
            filtered_nullable(&names, rows, &filter).await
        }
        ShowMeta::Triggers { db, filter } => {
            database(fe, session, &db)?;
            let names = [
                "Trigger",
                "Event",
                "Table",
                "Statement",
                "Timing",
                "Created",
                "sql_mode",
                "Definer",
                "character_set_client",
                "collation_connection",
                "Database Collation",
            ];
            filtered_nullable(&names, vec![], &filter).await
        }
        ShowMeta::Status(filter) => {
            let conns = fe.conns();
            let running = conns
                .iter()
                .filter(|c| {
                    !c.info
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                        .is_empty()
                })
                .count();
            let rows = [
                ("Connections", fe.connections.load(Ordering::Relaxed)),
                ("Queries", fe.queries.load(Ordering::Relaxed)),
                ("Questions", fe.queries.load(Ordering::Relaxed)),
                ("Threads_connected", conns.len() as u64),
                ("Threads_running", running as u64),
                ("Uptime", fe.started.elapsed().as_secs()),
            ]
            .into_iter()
            .map(|(n, v)| vec![Some(n.to_string()), Some(v.to_string())])
            .collect();
            filtered_nullable(&["Variable_name", "Value"], rows, &filter).await
        }
    }
}

/// The database a SHOW names (or the session's), as the catalog spells it.
fn database(fe: &Frontend, session: &Session, db: &Option<String>) -> Result<String> {
    let db = crate::session::resolve_db(&session.database, db)?;
    if db.eq_ignore_ascii_case(information_schema::NAME) {
        return Ok(information_schema::NAME.into());
    }
    fe.catalog
        .read()
        .database(&db)
        .map(|d| d.name.clone())
        .ok_or(TethysError::UnknownDatabase(db))
}

fn unknown_table(db: &str, table: &str) -> TethysError {
    TethysError::UnknownTable {
        database: db.to_string(),
        table: table.to_string(),
    }
}

/// `DESC t` rows as Doris 2.1 prints them: types lower-case as in SHOW
/// CREATE TABLE (`int`, `char(10)`), Key `true`/`false`, the aggregation of
/// an AGGREGATE table's value column in Extra (`NONE` for DUPLICATE and
/// UNIQUE tables, whose REPLACE is implicit); with `full`, MySQL's
/// Collation, Privileges and Comment too.
pub fn describe_rows(t: &Table, full: bool) -> Vec<Vec<String>> {
    t.schema
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let extra = match t.schema.merge_rule(i) {
                _ if c.is_key => String::new(),
                Some(a) if t.schema.keys_type == KeysType::Aggregate => a.sql().to_string(),
                _ => "NONE".into(),
            };
            let null = if c.nullable { "Yes" } else { "No" };
            let key = if c.is_key { "true" } else { "false" };
            let default = c.default.clone().unwrap_or_else(|| "NULL".into());
            if full {
                let collation = information_schema::mysql_type(&c.column_type)
                    .char_len
                    .map(|_| "utf8mb4_0900_bin")
                    .unwrap_or("");
                vec![
                    c.name.clone(),
                    c.column_type.sql(),
                    collation.into(),
                    null.into(),
                    key.into(),
                    default,
                    extra,
                    "select,insert,update,references".into(),
                    c.comment.clone(),
                ]
            } else {
                vec![
                    c.name.clone(),
                    c.column_type.sql(),
                    null.into(),
                    key.into(),
                    default,
                    extra,
                ]
            }
        })
        .collect()
}

/// The columns of `DESC t ALL`.
pub const DESCRIBE_ALL_COLUMNS: [&str; 12] = [
    "IndexName",
    "IndexKeysType",
    "Field",
    "Type",
    "InternalType",
    "Null",
    "Key",
    "Default",
    "Extra",
    "Visible",
    "DefineExpr",
    "WhereClause",
];

/// `DESC t ALL`: every index of the table (Tethys has only the base
/// index, no rollups), its name and model on its first row; Extra holds the
/// aggregation (NONE for a value column of a DUPLICATE table, REPLACE of a
/// UNIQUE one) and BLOOM_FILTER, as Doris lists them.
pub fn describe_all_rows(t: &Table) -> Vec<Vec<String>> {
    t.schema
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut extra = vec![];
            if !c.is_key {
                extra.push(match t.schema.merge_rule(i) {
                    Some(a) if t.schema.keys_type == KeysType::Aggregate => a.sql().to_string(),
                    _ if t.schema.keys_type == KeysType::Unique => "REPLACE".into(),
                    _ => "NONE".into(),
                });
            }
            if t.schema.bloom_filter_columns.contains(&c.name) {
                extra.push("BLOOM_FILTER".into());
            }
            let (index, keys) = if i == 0 {
                (t.name.clone(), t.schema.keys_type.doris_name().to_string())
            } else {
                (String::new(), String::new())
            };
            vec![
                index,
                keys,
                c.name.clone(),
                c.column_type.desc(),
                c.column_type.internal_name(),
                if c.nullable { "Yes" } else { "No" }.into(),
                c.is_key.to_string(),
                c.default.clone().unwrap_or_else(|| "NULL".into()),
                extra.join(","),
                "true".into(),
                String::new(),
                String::new(),
            ]
        })
        .collect()
}

/// `SHOW COLUMNS FROM information_schema.x`.
fn system_columns(table: &str, full: bool) -> Result<Vec<Vec<Option<String>>>> {
    let def = table_def(table).ok_or_else(|| unknown_table(information_schema::NAME, table))?;
    Ok(def
        .columns
        .iter()
        .map(|(name, col)| {
            let ty = match col {
                Col::Str => "varchar(256)",
                Col::Int => "bigint",
                Col::Int32 => "int",
                Col::Time => "datetime",
            };
            let mut row = vec![Some(name.to_string()), Some(ty.to_string())];
            if full {
                row.push(matches!(col, Col::Str).then(|| "utf8mb4_0900_bin".to_string()));
            }
            row.extend([
                Some("Yes".to_string()),
                Some("false".to_string()),
                None,
                Some(String::new()),
            ]);
            if full {
                row.extend([Some("select".to_string()), Some(String::new())]);
            }
            row
        })
        .collect())
}

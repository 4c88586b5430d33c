//! The MySQL-shaped `information_schema`, served from the catalog. MariaDB
//! Connector/J's `DatabaseMetaData.getColumns` (what Metabase syncs with)
//! runs
//!
//! ```sql
//! SELECT TABLE_SCHEMA TABLE_CAT, ..., COLUMN_COMMENT REMARKS, ...
//! FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = 'd' AND TABLE_NAME LIKE 't'
//! ```
//!
//! so the tables have Doris 2.1's columns and types (MySQL's, with Doris'
//! additions) and answer joins and filters through the normal query path:
//! each is built as an in-memory table when a statement names it.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Int32Builder, Int64Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::datasource::MemTable;
use datafusion::error::Result as DfResult;
use tethys_common::schema::KeysType;
use tethys_common::types::ColumnType;

use super::columns::{Col, TABLES, V, table_def};
use crate::catalog::{Distribution, Table};
use crate::frontend::Frontend;
use crate::session::Variables;
use crate::session::charsets::{CHARSETS, COLLATIONS};

/// The name of the schema, as clients spell it.
pub const NAME: &str = "information_schema";
/// The catalog every table belongs to, as Doris names it.
pub const CATALOG: &str = "internal";

/// What a statement's `information_schema` sees of its session.
#[derive(Debug, Clone)]
pub struct SessionView {
    pub user: String,
    pub vars: Variables,
    /// The `SET GLOBAL` values (what new sessions start from).
    pub globals: Variables,
}

impl SessionView {
    pub fn of(fe: &Frontend, session: &crate::session::Session) -> SessionView {
        SessionView {
            user: session.user.clone(),
            vars: session.vars.clone(),
            globals: fe.global_variables(),
        }
    }
}

/// `information_schema` for one statement.
#[derive(Debug)]
pub struct InformationSchema {
    pub fe: Arc<Frontend>,
    pub session: SessionView,
}

#[async_trait]
impl SchemaProvider for InformationSchema {
    fn table_names(&self) -> Vec<String> {
        TABLES.iter().map(|t| t.name.to_string()).collect()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let Some(def) = table_def(name) else {
            return Ok(None);
        };
        let rows = self.rows(def.name).await;
        let batch = build(def.columns, rows)?;
        Ok(Some(Arc::new(MemTable::try_new(
            batch.schema(),
            vec![vec![batch]],
        )?)))
    }

    fn table_exist(&self, name: &str) -> bool {
        table_def(name).is_some()
    }
}

/// The arrow schema of a table definition.
fn schema(cols: &[(&str, Col)]) -> SchemaRef {
    Arc::new(Schema::new(
        cols.iter()
            .map(|(n, c)| {
                let t = match c {
                    Col::Str => DataType::Utf8,
                    Col::Int => DataType::Int64,
                    Col::Int32 => DataType::Int32,
                    Col::Time => DataType::Timestamp(TimeUnit::Microsecond, None),
                };
                // Lower case, as user tables' fields are: the planner
                // folds unquoted names, and MySQL's are case-insensitive.
                Field::new(n.to_ascii_lowercase(), t, true)
            })
            .collect::<Vec<_>>(),
    ))
}

/// Rows into one batch; a value of the wrong kind is NULL.
fn build(cols: &[(&str, Col)], rows: Vec<Vec<V>>) -> DfResult<RecordBatch> {
    let arrays: Vec<ArrayRef> = cols
        .iter()
        .enumerate()
        .map(|(i, (_, c))| {
            let cell = |r: &Vec<V>| r.get(i).cloned().unwrap_or(V::Null);
            match c {
                Col::Str => {
                    let mut b = StringBuilder::new();
                    for r in &rows {
                        match cell(r) {
                            V::S(s) => b.append_value(s),
                            V::I(n) => b.append_value(n.to_string()),
                            _ => b.append_null(),
                        }
                    }
                    Arc::new(b.finish()) as ArrayRef
                }
                Col::Int => {
                    let mut b = Int64Builder::new();
                    for r in &rows {
                        b.append_option(match cell(r) {
                            V::I(n) => Some(n),
                            _ => None,
                        });
                    }
                    Arc::new(b.finish())
                }
                Col::Int32 => {
                    let mut b = Int32Builder::new();
                    for r in &rows {
                        b.append_option(match cell(r) {
                            V::I(n) => i32::try_from(n).ok(),
                            _ => None,
                        });
                    }
                    Arc::new(b.finish())
                }
                Col::Time => {
                    let mut b = TimestampMicrosecondBuilder::new();
                    for r in &rows {
                        b.append_option(match cell(r) {
                            V::T(ms) => Some(local_micros(ms)),
                            _ => None,
                        });
                    }
                    Arc::new(b.finish())
                }
            }
        })
        .collect();
    Ok(RecordBatch::try_new(schema(cols), arrays)?)
}

/// Epoch milliseconds as the server's wall-clock DATETIME (as SHOW shows times).
fn local_micros(ms: i64) -> i64 {
    use chrono::TimeZone;
    chrono::Local
        .timestamp_millis_opt(ms)
        .single()
        .map(|t| t.naive_local().and_utc().timestamp_micros())
        .unwrap_or(ms.saturating_mul(1000))
}

/// `(name, value, default, changed)` rows of a set of variables.
fn variable_rows(vars: &Variables) -> Vec<Vec<V>> {
    vars.all()
        .into_iter()
        .map(|(n, v, d, c)| vec![s(n), s(v), s(d), s(if c { "1" } else { "0" })])
        .collect()
}

fn s(v: impl Into<String>) -> V {
    V::S(v.into())
}

/// MySQL's view of a Doris type: DATA_TYPE, COLUMN_TYPE, character length,
/// numeric precision and scale, datetime precision.
pub struct MySqlType {
    pub data_type: &'static str,
    pub column_type: String,
    pub char_len: Option<i64>,
    pub precision: Option<i64>,
    pub scale: Option<i64>,
    pub datetime_precision: Option<i64>,
}

/// How a column of type `t` is described to MySQL clients.
pub fn mysql_type(t: &ColumnType) -> MySqlType {
    let num = |d: &'static str, ct: &str, p: i64| MySqlType {
        data_type: d,
        column_type: ct.into(),
        char_len: None,
        precision: Some(p),
        scale: Some(0),
        datetime_precision: None,
    };
    let text = |d: &'static str, ct: String, n: i64| MySqlType {
        data_type: d,
        column_type: ct,
        char_len: Some(n),
        precision: None,
        scale: None,
        datetime_precision: None,
    };
    match t {
        // MySQL's BOOLEAN is TINYINT(1); drivers map it to BIT/BOOLEAN.
        ColumnType::Boolean => num("tinyint", "tinyint(1)", 3),
        ColumnType::TinyInt => num("tinyint", "tinyint(4)", 3),
        ColumnType::SmallInt => num("smallint", "smallint(6)", 5),
        ColumnType::Int => num("int", "int(11)", 10),
        ColumnType::BigInt => num("bigint", "bigint(20)", 19),
        // 128-bit integers reach clients as DECIMAL(38, 0).
        ColumnType::LargeInt => num("decimal", "largeint", 38),
        ColumnType::Float => MySqlType {
            scale: None,
            ..num("float", "float", 7)
        },
        ColumnType::Double => MySqlType {
            scale: None,
            ..num("double", "double", 15)
        },
        ColumnType::Decimal { precision, scale } => MySqlType {
            scale: Some(*scale as i64),
            ..num(
                "decimal",
                &format!("decimal({precision},{scale})"),
                *precision as i64,
            )
        },
        ColumnType::Date => MySqlType {
            data_type: "date",
            column_type: "date".into(),
            char_len: None,
            precision: None,
            scale: None,
            datetime_precision: None,
        },
        ColumnType::DateTime { precision } => MySqlType {
            data_type: "datetime",
            column_type: t.sql(),
            char_len: None,
            precision: None,
            scale: None,
            datetime_precision: Some(*precision as i64),
        },
        ColumnType::Char(n) => text("char", t.sql(), *n as i64),
        ColumnType::Varchar(n) => text("varchar", t.sql(), *n as i64),
        ColumnType::String => text("text", "text".into(), 2_147_483_647),
        ColumnType::Bitmap => text("blob", "bitmap".into(), 2_147_483_647),
        ColumnType::Hll => text("blob", "hll".into(), 2_147_483_647),
    }
}

/// Doris' COLUMN_KEY of a key column: the table's key model.
pub fn column_key(keys: KeysType) -> &'static str {
    match keys {
        KeysType::Duplicate => "DUP",
        KeysType::Aggregate => "AGG",
        KeysType::Unique => "UNI",
    }
}

impl InformationSchema {
    /// The databases and tables of the catalog, sorted.
    fn tables(&self) -> Vec<(String, Table)> {
        let state = self.fe.catalog.read();
        state
            .databases
            .values()
            .flat_map(|d| d.tables.values().map(|t| (d.name.clone(), t.clone())))
            .collect()
    }

    /// The rows of table `table` (its name as [`TABLES`] spells it).
    pub async fn rows(&self, table: &str) -> Vec<Vec<V>> {
        self.rows_with(table, true).await
    }

    /// [`Self::rows`]; without `sizes`, `tables` leaves its row counts and
    /// sizes NULL rather than asking the backends (`SHOW TABLES` needs none).
    pub async fn rows_with(&self, table: &str, sizes: bool) -> Vec<Vec<V>> {
        match table {
            "schemata" => self.schemata(),
            "tables" => self.tables_rows(sizes).await,
            "columns" => self.columns(),
            "statistics" => self.statistics(),
            "key_column_usage" | "table_constraints" => vec![],
            "partitions" => self.partitions(),
            "engines" => vec![vec![
                s("Doris"),
                s("YES"),
                s("Apache Doris"),
                s("YES"),
                s("NO"),
                s("NO"),
            ]],
            "character_sets" => CHARSETS
                .iter()
                .map(|c| {
                    vec![
                        s(c.name),
                        s(c.default_collation),
                        s(c.description),
                        V::I(c.maxlen as i64),
                    ]
                })
                .collect(),
            "collations" => COLLATIONS
                .iter()
                .map(|c| {
                    vec![
                        s(c.name),
                        s(c.charset),
                        V::I(c.id as i64),
                        s(if c.is_default { "Yes" } else { "" }),
                        s("Yes"),
                        V::I(1),
                    ]
                })
                .collect(),
            "session_variables" => variable_rows(&self.session.vars),
            "global_variables" => variable_rows(&self.session.globals),
            "processlist" => self.processlist(),
            "user_privileges" => vec![vec![
                s(format!("'{}'@'%'", self.session.user)),
                s("def"),
                s("Admin_priv"),
                s("YES"),
            ]],
            "schema_privileges" => self
                .fe
                .catalog
                .read()
                .databases
                .keys()
                .map(|d| {
                    vec![
                        s(format!("'{}'@'%'", self.session.user)),
                        s("def"),
                        s(d.clone()),
                        s("ALL"),
                        s("YES"),
                    ]
                })
                .collect(),
            // views, routines, events, referential constraints, table
            // privileges: Tethys has no views, procedures, events or foreign
            // keys, and grants are per schema.
            _ => vec![],
        }
    }

    fn schemata(&self) -> Vec<Vec<V>> {
        let mut names: Vec<String> = self.fe.catalog.read().databases.keys().cloned().collect();
        names.push(NAME.into());
        names.sort();
        names
            .into_iter()
            .map(|n| {
                vec![
                    s(CATALOG),
                    s(n),
                    s("utf8mb4"),
                    s("utf8mb4_0900_bin"),
                    V::Null,
                    s("NO"),
                ]
            })
            .collect()
    }

    async fn tables_rows(&self, sizes: bool) -> Vec<Vec<V>> {
        let tables = self.tables();
        let tablets: Vec<_> = tables
            .iter()
            .flat_map(|(_, t)| t.partitions.iter().flat_map(|p| p.tablets.iter().cloned()))
            .collect();
        // Sizes are what the backends answer; a backend that cannot be
        // asked leaves them NULL rather than failing the metadata query.
        let stats = if sizes {
            self.fe
                .backends
                .tablet_stats(&tablets)
                .await
                .unwrap_or_default()
        } else {
            Default::default()
        };
        let system = TABLES.iter().map(|d| {
            let mut row = vec![
                s(CATALOG),
                s(NAME),
                s(d.name),
                s("SYSTEM VIEW"),
                s("MEMORY"),
            ];
            row.extend((5..21).map(|_| V::Null));
            row
        });
        let user = tables.into_iter().map(|(db, t)| {
            let (mut rows, mut bytes, mut known) = (0i64, 0i64, true);
            for tb in t.partitions.iter().flat_map(|p| p.tablets.iter()) {
                match stats.get(&tb.id).filter(|s| s.found) {
                    Some(st) => {
                        rows += st.row_count;
                        bytes += st.data_size;
                    }
                    None => known = false,
                }
            }
            let known_i = |v: i64| if known { V::I(v) } else { V::Null };
            let update = t
                .partitions
                .iter()
                .map(|p| p.visible_version_time)
                .max()
                .filter(|&v| v > 0);
            vec![
                s(CATALOG),
                s(db),
                s(t.name.clone()),
                s("BASE TABLE"),
                s("Doris"),
                V::I(10),
                s("Dynamic"),
                known_i(rows),
                known_i(if rows > 0 { bytes / rows } else { 0 }),
                known_i(bytes),
                V::I(0),
                V::I(0),
                V::I(0),
                V::Null,
                V::T(t.create_time),
                update.map(V::T).unwrap_or(V::Null),
                V::Null,
                s("utf8mb4_0900_bin"),
                V::Null,
                s(""),
                s(t.comment.clone()),
            ]
        });
        user.chain(system).collect()
    }

    fn columns(&self) -> Vec<Vec<V>> {
        let mut out = vec![];
        for (db, t) in self.tables() {
            for (i, c) in t.schema.columns.iter().enumerate() {
                let m = mysql_type(&c.column_type);
                let is_text = m.char_len.is_some()
                    && !matches!(c.column_type, ColumnType::Bitmap | ColumnType::Hll);
                let extra = match t.schema.merge_rule(i) {
                    _ if c.is_key => String::new(),
                    Some(a) if !t.schema.merge_on_write => a.sql().to_string(),
                    _ => String::new(),
                };
                let opt = |v: Option<i64>| v.map(V::I).unwrap_or(V::Null);
                out.push(vec![
                    s(CATALOG),
                    s(db.clone()),
                    s(t.name.clone()),
                    s(c.name.clone()),
                    V::I(i as i64 + 1),
                    c.default.clone().map(V::S).unwrap_or(V::Null),
                    s(if c.nullable { "YES" } else { "NO" }),
                    s(m.data_type),
                    opt(m.char_len),
                    opt(m.char_len.map(|n| n.saturating_mul(4).min(2_147_483_647))),
                    opt(m.precision),
                    opt(m.scale),
                    opt(m.datetime_precision),
                    if is_text { s("utf8mb4") } else { V::Null },
                    if is_text {
                        s("utf8mb4_0900_bin")
                    } else {
                        V::Null
                    },
                    s(m.column_type.clone()),
                    s(if c.is_key {
                        column_key(t.schema.keys_type)
                    } else {
                        ""
                    }),
                    s(extra),
                    s("select,insert,update,references"),
                    s(c.comment.clone()),
                    opt(m.char_len.or(m.precision)),
                    opt(m.scale.or(m.datetime_precision)),
                    V::Null,
                    V::Null,
                ]);
            }
        }
        out
    }

    /// Doris' sort key, as the one index MySQL clients know to ask about.
    fn statistics(&self) -> Vec<Vec<V>> {
        let mut out = vec![];
        for (db, t) in self.tables() {
            let non_unique = if t.schema.keys_type == KeysType::Duplicate {
                1
            } else {
                0
            };
            for (i, c) in t.schema.columns.iter().filter(|c| c.is_key).enumerate() {
                out.push(vec![
                    s(CATALOG),
                    s(db.clone()),
                    s(t.name.clone()),
                    V::I(non_unique),
                    s(db.clone()),
                    s(t.schema
                        .keys_type
                        .sql()
                        .trim_end_matches(" KEY")
                        .to_string()),
                    V::I(i as i64 + 1),
                    s(c.name.clone()),
                    s("A"),
                    V::Null,
                    V::Null,
                    V::Null,
                    s(if c.nullable { "YES" } else { "" }),
                    s("SORT KEY"),
                    s(""),
                    s(""),
                ]);
            }
        }
        out
    }

    fn partitions(&self) -> Vec<Vec<V>> {
        let mut out = vec![];
        for (db, t) in self.tables() {
            let ty = t.partition_column_type();
            let dist = match &t.distribution {
                Distribution::Hash { columns, .. } => format!("HASH({})", columns.join(", ")),
                Distribution::Random { .. } => "RANDOM".into(),
            };
            for (i, p) in t.partitions.iter().enumerate() {
                let range = match (p.range, &ty) {
                    (Some((lo, hi)), Some(ty)) => {
                        format!("[{}, {})", lo.display(ty), hi.display(ty))
                    }
                    _ => String::new(),
                };
                let method = if t.partition_column.is_some() {
                    "RANGE"
                } else {
                    ""
                };
                out.push(vec![
                    V::I(p.id),
                    s(CATALOG),
                    s(db.clone()),
                    s(t.name.clone()),
                    s(p.name.clone()),
                    V::Null,
                    V::I(i as i64 + 1),
                    V::Null,
                    s(method),
                    V::Null,
                    t.partition_column.clone().map(V::S).unwrap_or(V::Null),
                    V::Null,
                    s(range.clone()),
                    V::Null,
                    V::Null,
                    V::Null,
                    V::Null,
                    V::Null,
                    V::Null,
                    V::Null,
                    V::T(p.visible_version_time),
                    V::Null,
                    V::Null,
                    s(""),
                    V::Null,
                    V::Null,
                    V::Null,
                    V::Null,
                    s("NORMAL"),
                    s("tag.location.default: 1"),
                    V::I(1),
                    s(""),
                    s("HDD"),
                    V::Null,
                    V::Null,
                    V::I(p.buckets as i64),
                    V::I(p.committed_version),
                    V::I(p.visible_version),
                    t.partition_column.clone().map(V::S).unwrap_or(V::Null),
                    s(range),
                    s(dist.clone()),
                ]);
            }
        }
        out
    }

    fn processlist(&self) -> Vec<Vec<V>> {
        self.fe
            .conns()
            .iter()
            .map(|c| {
                let (info, since) = c.info.lock().unwrap_or_else(|p| p.into_inner()).clone();
                let db = c.db.lock().unwrap_or_else(|p| p.into_inner()).clone();
                vec![
                    V::I(c.id as i64),
                    s(c.user.clone()),
                    s(c.host.clone()),
                    db.map(V::S).unwrap_or(V::Null),
                    s(if info.is_empty() { "Sleep" } else { "Query" }),
                    V::I(since.elapsed().as_secs() as i64),
                    s("OK"),
                    if info.is_empty() { V::Null } else { s(info) },
                ]
            })
            .collect()
    }
}

/// A row of an `information_schema` table with its column names.
pub struct Row<'a> {
    names: &'a [(&'static str, Col)],
    cells: &'a [V],
}

impl Row<'_> {
    fn get(&self, name: &str) -> Option<&V> {
        let i = self.names.iter().position(|(n, _)| *n == name)?;
        self.cells.get(i)
    }

    /// Whether the string column `name` equals `value`.
    pub fn is(&self, name: &str, value: &str) -> bool {
        matches!(self.get(name), Some(V::S(s)) if s == value)
    }
}

impl InformationSchema {
    /// The `columns` of table `table`'s rows that pass `keep`, as text.
    pub async fn select(
        &self,
        table: &str,
        columns: &[&str],
        keep: impl Fn(&Row) -> bool,
    ) -> Vec<Vec<Option<String>>> {
        let Some(def) = table_def(table) else {
            return vec![];
        };
        // Only the size columns make the backends be asked.
        let sizes = columns
            .iter()
            .any(|c| ["TABLE_ROWS", "AVG_ROW_LENGTH", "DATA_LENGTH"].contains(c));
        self.rows_with(def.name, sizes)
            .await
            .iter()
            .map(|cells| Row {
                names: def.columns,
                cells,
            })
            .filter(|r| keep(r))
            .map(|r| columns.iter().map(|c| r.get(c).and_then(text)).collect())
            .collect()
    }
}

fn text(v: &V) -> Option<String> {
    match v {
        V::S(s) => Some(s.clone()),
        V::I(n) => Some(n.to_string()),
        V::T(ms) => Some(super::fmt_time(*ms)),
        V::Null => None,
    }
}

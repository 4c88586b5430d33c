//! The statements Tethys parses itself, as values: Doris DDL, SHOW,
//! SET and session statements (queries and INSERT stay SQL text for
//! DataFusion).

use tethys_common::types::ColumnType;

use crate::sql::set::SetStatement;

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

/// A prepared query or INSERT with its parameters bound (`sql::params`):
/// the syntax tree parsed at PREPARE, each `?` replaced by a literal node.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundQuery {
    /// Not yet rewritten for DataFusion (`rewrite::rewrite_for_datafusion`).
    pub parsed: datafusion::sql::parser::Statement,
    pub label: Option<String>,
    pub insert: bool,
    /// The bound statement as text, for SHOW PROCESSLIST and profiles.
    pub text: String,
}

/// What `ALTER SYSTEM ... BACKEND` does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BackendAction {
    Add,
    /// `DROP` (refused, as Doris refuses it) or `DROPP` (`force`).
    Drop {
        force: bool,
    },
    Decommission,
}

/// `ALTER SYSTEM <action> BACKEND "host:port"[, ...]`.
#[derive(Debug, Clone, PartialEq)]
pub struct AlterSystem {
    pub action: BackendAction,
    pub backends: Vec<(String, u16)>,
}

/// A parsed statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    /// A query (or other statement) for DataFusion's planner.
    Query(String),
    /// A prepared query or INSERT, bound.
    Bound(Box<BoundQuery>),
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
    /// `ADMIN REPAIR TABLE t`: the tablet scheduler looks at its tablets
    /// first.
    AdminRepair {
        db: Option<String>,
        table: String,
    },
    /// `ADMIN SHOW REPLICA STATUS FROM t [WHERE STATUS = | != 'S']`: the
    /// replicas not OK (or of status S): DEAD, VERSION_ERROR, MISSING.
    AdminShowReplicaStatus {
        db: Option<String>,
        table: String,
        /// (equal?, status).
        status: Option<(bool, String)>,
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
    /// `SHOW PROC '/colocation_group'`.
    ShowColocationGroups,
    AlterSystem(AlterSystem),
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
    /// answered from `information_schema` (see the executor's `show`).
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

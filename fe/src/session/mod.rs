//! Per-connection session state: current database, user, and session
//! variables with Doris' names and defaults.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tethys_common::config::{DEFAULT_BATCH_SIZE, MYSQL_SERVER_VERSION, VERSION_COMMENT};
use tethys_common::{Result, TethysError};

pub mod charsets;
pub mod prepared;

/// A session variable's definition.
struct VarDef {
    name: &'static str,
    default: &'static str,
    kind: Kind,
    read_only: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Int,
    Bool,
    Str,
}

const fn v(name: &'static str, default: &'static str, kind: Kind) -> VarDef {
    VarDef {
        name,
        default,
        kind,
        read_only: false,
    }
}

const fn ro(name: &'static str, default: &'static str, kind: Kind) -> VarDef {
    VarDef {
        name,
        default,
        kind,
        read_only: true,
    }
}

/// Variables Tethys takes only at their default: their Doris or MySQL
/// effect (a default LIMIT under ORDER BY, the scale of a division, the
/// mode of `week()`, Doris' legacy planner, `WHERE id IS NULL` finding the
/// last insert, SHOW CREATE TABLE without quotes) is not built.
const DEFAULT_ONLY_VARS: &[&str] = &[
    "default_order_by_limit",
    "div_precision_increment",
    "default_week_format",
    "enable_nereids_planner",
    "sql_auto_is_null",
    "sql_quote_show_create",
];

/// `sql_mode` names with no effect in Doris either (it checks them and
/// shows them; strictness is `enable_insert_strict`), in Doris' order.
const SQL_MODES: &[&str] = &[
    "REAL_AS_FLOAT",
    "IGNORE_SPACE",
    "ONLY_FULL_GROUP_BY",
    "NO_UNSIGNED_SUBTRACTION",
    "NO_DIR_IN_CREATE",
    "NO_AUTO_VALUE_ON_ZERO",
    "STRICT_TRANS_TABLES",
    "STRICT_ALL_TABLES",
    "NO_ZERO_IN_DATE",
    "NO_ZERO_DATE",
    "INVALID_DATES",
    "ERROR_FOR_DIVISION_BY_ZERO",
    "HIGH_NOT_PRECEDENCE",
    "NO_ENGINE_SUBSTITUTION",
    "PAD_CHAR_TO_FULL_LENGTH",
    "TRADITIONAL",
    "TIME_TRUNCATE_FRACTIONAL",
];

/// `sql_mode` names that change how Doris reads SQL (`||` as concat,
/// `"x"` as a name, `\` as a plain character): not built yet, refused.
const SQL_MODES_NOT_YET: &[&str] = &[
    "PIPES_AS_CONCAT",
    "ANSI_QUOTES",
    "NO_BACKSLASH_ESCAPES",
    "ANSI",
];

/// The canonical value of a variable with a fixed set of values
/// (`sql_mode`, the isolation level, `runtime_filter_mode`); `None` for
/// other variables.
fn enum_value(name: &str, value: &str) -> Result<Option<String>> {
    let bad = |why: &str| {
        TethysError::Analysis(format!(
            "Variable '{name}' can't be set to the value of '{value}'{why}"
        ))
    };
    let one_of = |allowed: &[&str]| {
        let v = value.trim().to_ascii_uppercase();
        if allowed.contains(&v.as_str()) {
            Ok(Some(v))
        } else {
            Err(bad(&format!(": it must be one of {}", allowed.join(", "))))
        }
    };
    match name {
        "sql_mode" => {
            let mut modes: Vec<&str> = vec![];
            for m in value.split(',').map(str::trim).filter(|m| !m.is_empty()) {
                let m = m.to_ascii_uppercase();
                if SQL_MODES_NOT_YET.contains(&m.as_str()) {
                    return Err(TethysError::NotSupported(format!(
                        "sql_mode {m} is not supported yet"
                    )));
                }
                match SQL_MODES.iter().find(|k| **k == m) {
                    Some(k) => modes.push(k),
                    None => return Err(bad("")),
                }
            }
            Ok(Some(
                SQL_MODES
                    .iter()
                    .filter(|k| modes.contains(k))
                    .copied()
                    .collect::<Vec<_>>()
                    .join(","),
            ))
        }
        "transaction_isolation" | "tx_isolation" => one_of(&[
            "READ-UNCOMMITTED",
            "READ-COMMITTED",
            "REPEATABLE-READ",
            "SERIALIZABLE",
        ]),
        "runtime_filter_mode" => one_of(&["OFF", "LOCAL", "GLOBAL"]),
        _ => Ok(None),
    }
}

/// The values a number variable may take: MySQL's and Doris' bounds, and
/// ours where a bigger value would exhaust the server (a pipeline of 2^31
/// tasks) or a negative one would mean nothing.
fn int_bounds(name: &str) -> std::ops::RangeInclusive<i64> {
    const INT_MAX: i64 = i32::MAX as i64;
    match name {
        "batch_size" => 1..=65_536,
        "query_timeout" | "insert_timeout" => 1..=INT_MAX,
        "wait_timeout" | "interactive_timeout" | "net_read_timeout" | "net_write_timeout" => {
            1..=31_536_000
        }
        "parallel_pipeline_task_num" => 0..=1024,
        "parallel_fragment_exec_instance_num" => 1..=1024,
        "max_allowed_packet" => 1024..=1 << 30,
        "net_buffer_length" => 1024..=1 << 20,
        "auto_increment_increment" => 1..=65_535,
        "div_precision_increment" => 0..=30,
        "default_week_format" => 0..=7,
        "default_order_by_limit" => -1..=i64::MAX,
        "max_join_number_of_reorder" => 0..=INT_MAX,
        "autocommit"
        | "sql_notes"
        | "sql_warnings"
        | "sql_safe_updates"
        | "transaction_read_only"
        | "tx_read_only"
        | "session_track_schema"
        | "session_track_state_change" => 0..=1,
        "query_cache_type" => 0..=2,
        // Memory: zero or less is no limit.
        "exec_mem_limit" => i64::MIN..=i64::MAX,
        _ => 0..=i64::MAX,
    }
}

const BATCH_SIZE_DEFAULT: &str = {
    // Kept in sync with DEFAULT_BATCH_SIZE by the unit test below.
    "4064"
};

static VARS: &[VarDef] = &[
    v("auto_increment_increment", "1", Kind::Int),
    v("autocommit", "1", Kind::Int),
    v("batch_size", BATCH_SIZE_DEFAULT, Kind::Int),
    v("character_set_client", "utf8mb4", Kind::Str),
    v("character_set_connection", "utf8mb4", Kind::Str),
    v("character_set_results", "utf8mb4", Kind::Str),
    v("character_set_database", "utf8mb4", Kind::Str),
    ro("character_set_filesystem", "binary", Kind::Str),
    ro("character_set_system", "utf8", Kind::Str),
    v("character_set_server", "utf8mb4", Kind::Str),
    v("collation_connection", "utf8mb4_0900_bin", Kind::Str),
    v("collation_database", "utf8mb4_0900_bin", Kind::Str),
    v("collation_server", "utf8mb4_0900_bin", Kind::Str),
    v("default_order_by_limit", "-1", Kind::Int),
    v("default_week_format", "0", Kind::Int),
    v("error_count", "0", Kind::Int),
    ro("hostname", "localhost", Kind::Str),
    v("identity", "0", Kind::Int),
    v("last_insert_id", "0", Kind::Int),
    ro("lower_case_file_system", "OFF", Kind::Str),
    v("max_connections", "1024", Kind::Int),
    ro("protocol_version", "10", Kind::Int),
    ro("socket", "", Kind::Str),
    v("sql_notes", "1", Kind::Int),
    v("sql_warnings", "0", Kind::Int),
    ro("version_compile_machine", "x86_64", Kind::Str),
    ro("version_compile_os", "Linux", Kind::Str),
    v("warning_count", "0", Kind::Int),
    v("div_precision_increment", "4", Kind::Int),
    v("enable_insert_strict", "true", Kind::Bool),
    v("enable_profile", "false", Kind::Bool),
    v("enable_unique_key_partial_update", "false", Kind::Bool),
    v("exec_mem_limit", "2147483648", Kind::Int),
    ro("have_query_cache", "false", Kind::Bool),
    v("init_connect", "", Kind::Str),
    v("insert_timeout", "14400", Kind::Int),
    v("interactive_timeout", "3600", Kind::Int),
    ro("language", "/palo/share/english/", Kind::Str),
    ro("license", "Apache License, Version 2.0", Kind::Str),
    ro("lower_case_table_names", "0", Kind::Int),
    v("max_allowed_packet", "16777216", Kind::Int),
    v("max_execution_time", "900000", Kind::Int),
    v("net_buffer_length", "16384", Kind::Int),
    v("net_read_timeout", "600", Kind::Int),
    v("net_write_timeout", "600", Kind::Int),
    v("parallel_fragment_exec_instance_num", "8", Kind::Int),
    v("parallel_pipeline_task_num", "0", Kind::Int),
    ro("performance_schema", "OFF", Kind::Str),
    v("query_cache_size", "1048576", Kind::Int),
    v("query_cache_type", "0", Kind::Int),
    v("query_timeout", "900", Kind::Int),
    v("sql_mode", "ONLY_FULL_GROUP_BY", Kind::Str),
    v("sql_select_limit", "9223372036854775807", Kind::Int),
    v("sql_safe_updates", "0", Kind::Int),
    ro("system_time_zone", "UTC", Kind::Str),
    v("time_zone", "UTC", Kind::Str),
    v("transaction_isolation", "REPEATABLE-READ", Kind::Str),
    v("transaction_read_only", "0", Kind::Int),
    v("tx_isolation", "REPEATABLE-READ", Kind::Str),
    v("tx_read_only", "0", Kind::Int),
    ro("version", MYSQL_SERVER_VERSION, Kind::Str),
    ro("version_comment", VERSION_COMMENT, Kind::Str),
    v("wait_timeout", "28800", Kind::Int),
    v("storage_engine", "olap", Kind::Str),
    v("default_storage_engine", "olap", Kind::Str),
    v("event_scheduler", "OFF", Kind::Str),
    v("sql_auto_is_null", "false", Kind::Bool),
    v("sql_quote_show_create", "true", Kind::Bool),
    v("runtime_filter_mode", "GLOBAL", Kind::Str),
    v("runtime_filter_max_in_num", "1024", Kind::Int),
    v("runtime_filter_wait_time_ms", "1000", Kind::Int),
    // Doris' default is 30000000; on a few cores a partitioned join of more
    // rows builds its hash tables in parallel, which pays off sooner.
    v("broadcast_row_count_limit", "1048576", Kind::Int),
    v("enable_nereids_planner", "true", Kind::Bool),
    v("disable_join_reorder", "false", Kind::Bool),
    v("disable_colocate_plan", "false", Kind::Bool),
    v("enable_bucket_shuffle_join", "true", Kind::Bool),
    v("max_join_number_of_reorder", "63", Kind::Int),
    // Tethys' own: ungrouped count/sum/min/max directly over a scan are
    // answered by the backends' storage (EXPLAIN: pushAggOp).
    v("enable_pushdown_agg_to_scan", "true", Kind::Bool),
    // Tethys' own: with more than one alive backend, queries run as stages
    // over the backends with exchanges between them (MPP); false: joins and
    // final aggregations run on the FE.
    v("enable_mpp_execution", "true", Kind::Bool),
    // Tethys' own: a stage above exchanges expected to bring at most this
    // many rows runs as one task (in the FE's stage when it feeds it); 0:
    // every stage on the backends its inputs come from.
    v("small_stage_row_limit", "65536", Kind::Int),
    v("group_commit", "off_mode", Kind::Str),
    // What OK packets report to clients that negotiated CLIENT_SESSION_TRACK
    // (MySQL's defaults); transaction state is not tracked.
    v(
        "session_track_system_variables",
        "time_zone,autocommit,character_set_client,character_set_results,character_set_connection",
        Kind::Str,
    ),
    v("session_track_schema", "1", Kind::Int),
    v("session_track_state_change", "0", Kind::Int),
    v("session_track_transaction_info", "OFF", Kind::Str),
];

/// The cores this process may use, read once: the standard library reads
/// the cgroup files on every call, a few percent of a small query's time.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    })
}

fn def(name: &str) -> Option<&'static VarDef> {
    VARS.iter().find(|d| d.name.eq_ignore_ascii_case(name))
}

/// The canonical value of a `character_set_*` / `collation_*` variable
/// (any UTF-8 spelling is utf8mb4), an error for one Tethys does not have,
/// `None` for other variables. `character_set_results` may be NULL (no
/// conversion).
fn charset_value(name: &str, value: &str) -> Result<Option<String>> {
    use crate::session::charsets;
    if name.starts_with("character_set_") {
        if name == "character_set_results" && value.eq_ignore_ascii_case("null") {
            return Ok(Some("NULL".into()));
        }
        let cs = charsets::charset(value)
            .ok_or_else(|| TethysError::UnknownCharset(value.to_string()))?;
        return Ok(Some(cs.name.to_string()));
    }
    if name.starts_with("collation_") {
        let co = charsets::collation(value)
            .ok_or_else(|| TethysError::UnknownCollation(value.to_string()))?;
        return Ok(Some(co.name.to_string()));
    }
    Ok(None)
}

/// The variables of one session (and the server-wide globals).
#[derive(Debug, Clone, Default)]
pub struct Variables {
    overrides: BTreeMap<String, String>,
}

impl Variables {
    /// Variables starting from the given values (the `SET GLOBAL` ones).
    pub fn with_values(values: BTreeMap<String, String>) -> Variables {
        Variables { overrides: values }
    }

    /// A variable's name as Tethys spells it, `None` if unknown.
    pub fn canonical_name(name: &str) -> Option<&'static str> {
        def(name).map(|d| d.name)
    }

    /// Current value of a variable, `None` if unknown.
    pub fn get(&self, name: &str) -> Option<String> {
        let d = def(name)?;
        Some(
            self.overrides
                .get(d.name)
                .cloned()
                .unwrap_or_else(|| d.default.to_string()),
        )
    }

    /// Sets a variable after validating the value.
    pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
        let d = def(name).ok_or_else(|| TethysError::UnknownVariable(name.to_string()))?;
        if d.read_only {
            return Err(TethysError::Analysis(format!(
                "Variable '{}' is a read only variable",
                d.name
            )));
        }
        let bad = || TethysError::WrongVariableValue(d.name.to_string(), value.to_string());
        let value = if value.eq_ignore_ascii_case("default") {
            d.default.to_string()
        } else {
            match d.kind {
                Kind::Int => {
                    let v = match value.to_ascii_lowercase().as_str() {
                        "on" | "true" => 1,
                        "off" | "false" => 0,
                        s => s.parse::<i64>().map_err(|_| bad())?,
                    };
                    if !int_bounds(d.name).contains(&v) {
                        return Err(bad());
                    }
                    v.to_string()
                }
                Kind::Bool => match value.to_ascii_lowercase().as_str() {
                    "1" | "on" | "true" => "true".into(),
                    "0" | "off" | "false" => "false".into(),
                    _ => return Err(bad()),
                },
                Kind::Str => {
                    if d.name == "time_zone" {
                        tethys_common::functions::timezone::parse_tz(value)?;
                    }
                    if let Some(v) = charset_value(d.name, value)? {
                        return self.store(d, v);
                    }
                    if d.name == "session_track_transaction_info"
                        && !value.eq_ignore_ascii_case("off")
                    {
                        return Err(TethysError::Analysis(format!(
                            "Variable 'session_track_transaction_info' can't be set to the value of \
                             '{value}': Tethys does not track transaction state (OFF only)"
                        )));
                    }
                    if let Some(v) = enum_value(d.name, value)? {
                        return self.store(d, v);
                    }
                    if d.name == "group_commit" {
                        if tethys_proto::GroupCommitMode::parse(value).is_err() {
                            return Err(TethysError::Analysis(format!(
                                "Variable 'group_commit' can't be set to the value of '{value}': \
                                 it must be off_mode, sync_mode or async_mode"
                            )));
                        }
                        value.to_ascii_lowercase()
                    } else {
                        value.to_string()
                    }
                }
            }
        };
        if DEFAULT_ONLY_VARS.contains(&d.name) && value != d.default {
            return Err(TethysError::NotSupported(format!(
                "SET {} = {value} is not supported yet (only its default, {}, is)",
                d.name, d.default
            )));
        }
        self.store(d, value)
    }

    fn store(&mut self, d: &VarDef, value: String) -> Result<()> {
        if value == d.default {
            self.overrides.remove(d.name);
        } else {
            self.overrides.insert(d.name.to_string(), value);
        }
        Ok(())
    }

    /// Every variable: (name, value, default, changed).
    pub fn all(&self) -> Vec<(String, String, String, bool)> {
        VARS.iter()
            .map(|d| {
                let val = self.get(d.name).unwrap_or_default();
                let changed = val != d.default;
                (d.name.to_string(), val, d.default.to_string(), changed)
            })
            .collect()
    }

    /// Whether the variable is a known one whose values are integers.
    pub fn is_int(name: &str) -> bool {
        def(name).is_some_and(|d| d.kind == Kind::Int)
    }

    /// The value of the number variable `name`, or `default` when it is
    /// unset (SET checks a number variable's value when it is set).
    fn number<T: std::str::FromStr>(&self, name: &str, default: T) -> T {
        self.get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    pub fn batch_size(&self) -> usize {
        self.number("batch_size", DEFAULT_BATCH_SIZE)
    }

    pub fn query_timeout_secs(&self) -> u64 {
        self.number("query_timeout", 900)
    }

    /// Rows a SELECT without a LIMIT returns at most.
    pub fn sql_select_limit(&self) -> u64 {
        self.number("sql_select_limit", i64::MAX as u64)
    }

    /// How long a query may run: `query_timeout`, or `max_execution_time`
    /// (milliseconds; 0 for none) when that is shorter.
    pub fn query_timeout(&self) -> std::time::Duration {
        let timeout = std::time::Duration::from_secs(self.query_timeout_secs());
        match self.number("max_execution_time", 0u64) {
            0 => timeout,
            ms => timeout.min(std::time::Duration::from_millis(ms)),
        }
    }

    pub fn insert_timeout_secs(&self) -> u64 {
        self.number("insert_timeout", 14400)
    }

    /// Whether joins push runtime filters to scans (`runtime_filter_mode`
    /// other than OFF).
    pub fn enable_profile(&self) -> bool {
        self.get("enable_profile").is_some_and(|v| v == "true")
    }

    pub fn runtime_filters(&self) -> bool {
        !self
            .get("runtime_filter_mode")
            .is_some_and(|m| m.eq_ignore_ascii_case("off") || m == "0")
    }

    /// Runtime filter IN lists longer than this become bloom filters.
    pub fn runtime_filter_max_in(&self) -> usize {
        self.number("runtime_filter_max_in_num", 1024)
    }

    /// A stage above exchanges expected to bring at most this many rows runs
    /// as one task (`small_stage_row_limit`, Tethys' own; 0: off).
    pub fn small_stage_row_limit(&self) -> usize {
        self.number("small_stage_row_limit", 65_536)
    }

    /// How long a scan waits for the runtime filters it applies to be
    /// complete (`runtime_filter_wait_time_ms`, Doris' default 1000).
    pub fn runtime_filter_wait_ms(&self) -> u64 {
        self.number("runtime_filter_wait_time_ms", 1000)
    }

    /// Join build sides of at most this many rows are broadcast (one hash
    /// table per join); bigger ones are partitioned by the join keys.
    pub fn broadcast_row_count_limit(&self) -> usize {
        self.number("broadcast_row_count_limit", 1 << 20)
    }

    /// `disable_join_reorder`: inner joins run in the order the query
    /// lists them.
    pub fn disable_join_reorder(&self) -> bool {
        self.get("disable_join_reorder")
            .is_some_and(|v| v == "true")
    }

    /// `disable_colocate_plan`: joins of colocated tables exchange data as
    /// others do.
    pub fn disable_colocate_plan(&self) -> bool {
        self.get("disable_colocate_plan")
            .is_some_and(|v| v == "true")
    }

    /// `enable_bucket_shuffle_join`: a join keyed on a table's
    /// distribution columns moves only its other side.
    pub fn enable_bucket_shuffle_join(&self) -> bool {
        self.get("enable_bucket_shuffle_join")
            .is_none_or(|v| v == "true")
    }

    /// Inner join trees of more relations than this keep their order.
    pub fn max_join_number_of_reorder(&self) -> usize {
        self.number("max_join_number_of_reorder", 63)
    }

    /// `enable_pushdown_agg_to_scan`: an ungrouped `count`, `sum`, `min`
    /// and `max` directly over a scan is answered by the storage layer
    /// (zone maps, in-place page sums) instead of from rows.
    pub fn pushdown_agg_to_scan(&self) -> bool {
        self.get("enable_pushdown_agg_to_scan")
            .is_none_or(|v| v == "true")
    }

    /// Queries run over the backends, exchanging data between them.
    pub fn mpp(&self) -> bool {
        self.get("enable_mpp_execution").is_none_or(|v| v == "true")
    }

    /// Parallel partitions a query runs in: `parallel_pipeline_task_num`,
    /// or (0) the cores this process may use.
    pub fn parallelism(&self) -> usize {
        let n: usize = self.number("parallel_pipeline_task_num", 0);
        if n == 0 { cores() } else { n }
    }

    /// Bytes one statement may use on each node (0 or less: unbounded).
    pub fn exec_mem_limit(&self) -> usize {
        self.get("exec_mem_limit")
            .and_then(|v| v.parse::<i64>().ok())
            .filter(|v| *v > 0)
            .map(|v| v as usize)
            .unwrap_or(usize::MAX)
    }

    /// `sync_mode` / `async_mode`, or `None` for off_mode.
    /// The `group_commit` mode INSERTs join (`None`: off).
    pub fn group_commit(&self) -> Option<tethys_proto::GroupCommitMode> {
        let v = self.get("group_commit")?;
        tethys_proto::GroupCommitMode::parse(&v).ok().flatten()
    }

    pub fn time_zone(&self) -> String {
        self.get("time_zone").unwrap_or_else(|| "UTC".into())
    }
}

/// One client session.
#[derive(Debug)]
pub struct Session {
    pub conn_id: u32,
    pub user: String,
    pub client_host: String,
    pub database: Option<String>,
    pub vars: Variables,
    /// `@name` variables with the type of the value they were set to.
    pub user_vars: BTreeMap<String, datafusion::scalar::ScalarValue>,
    /// Values a query's `@v := expr` left in its last row, written as the
    /// result streams out and taken into `user_vars` by the next statement.
    pub assigned: Arc<Mutex<Vec<(String, datafusion::scalar::ScalarValue)>>>,
    /// COM_STMT_PREPARE's and `PREPARE`'s statements.
    pub prepared: prepared::PreparedStatements,
}

impl Session {
    /// Takes the values the previous query assigned into the user variables.
    pub fn take_assigned(&mut self) {
        let done = std::mem::take(&mut *self.assigned.lock().unwrap_or_else(|p| p.into_inner()));
        self.user_vars.extend(done);
    }

    pub fn new(conn_id: u32, user: String, client_host: String) -> Self {
        Session {
            conn_id,
            user,
            client_host,
            database: None,
            vars: Variables::default(),
            user_vars: BTreeMap::new(),
            assigned: Default::default(),
            prepared: Default::default(),
        }
    }

    /// A copy to try changes on (SET's items, all or nothing), without the
    /// prepared statements, which stay with this session.
    pub fn staged(&self) -> Session {
        Session {
            conn_id: self.conn_id,
            user: self.user.clone(),
            client_host: self.client_host.clone(),
            database: self.database.clone(),
            vars: self.vars.clone(),
            user_vars: self.user_vars.clone(),
            assigned: self.assigned.clone(),
            prepared: Default::default(),
        }
    }
}

/// The database a statement means: the one it names, else the session's.
pub fn resolve_db(session_db: &Option<String>, db: &Option<String>) -> Result<String> {
    db.clone()
        .or_else(|| session_db.clone())
        .ok_or(TethysError::NoDatabaseSelected)
}

/// The database and table a statement names (`t` or `db.t`).
pub fn table_name_of(
    name: &datafusion::sql::sqlparser::ast::ObjectName,
    session_db: &Option<String>,
) -> Result<(String, String)> {
    let parts: Vec<String> = name
        .0
        .iter()
        .filter_map(|p| p.as_ident().map(|i| i.value.clone()))
        .collect();
    match parts.as_slice() {
        [t] => Ok((resolve_db(session_db, &None)?, t.clone())),
        [d, t] => Ok((d.clone(), t.clone())),
        _ => Err(TethysError::Syntax(format!("bad table name {name}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_number_default_is_in_its_bounds_and_out_of_bounds_is_refused() {
        let mut v = Variables::default();
        for d in VARS.iter().filter(|d| d.kind == Kind::Int && !d.read_only) {
            let n: i64 = d.default.parse().unwrap();
            assert!(int_bounds(d.name).contains(&n), "{}", d.name);
            v.set(d.name, d.default).unwrap();
        }
        assert!(matches!(
            v.set("div_precision_increment", "6"),
            Err(TethysError::NotSupported(_))
        ));
        v.set("default_order_by_limit", "-1").unwrap();
        for (name, value) in [
            ("parallel_pipeline_task_num", "2147483647"),
            ("query_timeout", "9223372036854775807"),
            ("runtime_filter_max_in_num", "-5"),
            ("wait_timeout", "0"),
            ("batch_size", "0"),
        ] {
            let e = v.set(name, value).unwrap_err();
            assert!(
                matches!(&e, TethysError::WrongVariableValue(n, _) if n == name),
                "{name}: {e}"
            );
        }
    }

    #[test]
    fn defaults_and_validation() {
        let mut v = Variables::default();
        assert_eq!(v.batch_size(), DEFAULT_BATCH_SIZE);
        assert_eq!(BATCH_SIZE_DEFAULT, DEFAULT_BATCH_SIZE.to_string());
        v.set("batch_size", "1024").unwrap();
        assert_eq!(v.batch_size(), 1024);
        assert!(v.set("batch_size", "abc").is_err());
        assert!(matches!(
            v.set("nope", "1"),
            Err(TethysError::UnknownVariable(_))
        ));
        v.set("time_zone", "Asia/Shanghai").unwrap();
        assert!(v.set("time_zone", "Nowhere/City").is_err());
        v.set("autocommit", "ON").unwrap();
        assert_eq!(v.get("autocommit").unwrap(), "1");
        assert!(v.set("version", "1").is_err());
        v.set("character_set_client", "UTF8").unwrap();
        assert_eq!(v.get("character_set_client").unwrap(), "utf8mb4");
        assert!(matches!(
            v.set("character_set_client", "latin1"),
            Err(TethysError::UnknownCharset(_))
        ));
        v.set("character_set_results", "NULL").unwrap();
        assert!(matches!(
            v.set("collation_connection", "latin1_swedish_ci"),
            Err(TethysError::UnknownCollation(_))
        ));
    }
}

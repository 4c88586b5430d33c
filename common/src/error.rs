//! The error vocabulary of Tethys.
//!
//! Every error a user can meet is a variant here, so that it maps to one MySQL
//! error code and SQLSTATE on the wire and to one gRPC status between FE and BE.

use std::io;

/// Result alias used across Tethys.
pub type Result<T, E = TethysError> = std::result::Result<T, E>;

/// A Tethys error, carrying enough context for a user to act on it.
#[derive(Debug, thiserror::Error)]
pub enum TethysError {
    /// The statement does not parse.
    #[error("{0}")]
    Syntax(String),
    /// `USE db` or a qualified name names a database that does not exist.
    #[error("Unknown database '{0}'")]
    UnknownDatabase(String),
    /// A table that does not exist.
    #[error("Table [{table}] does not exist in database [{database}]")]
    UnknownTable { database: String, table: String },
    /// A column that does not exist.
    #[error("{0}")]
    UnknownColumn(String),
    /// `CREATE DATABASE` of an existing database.
    #[error("Can't create database '{0}'; database exists")]
    DatabaseExists(String),
    /// `DROP DATABASE` of a missing database.
    #[error("Can't drop database '{0}'; database doesn't exist")]
    DatabaseNotExists(String),
    /// `CREATE TABLE` of an existing table.
    #[error("Table '{0}' already exists")]
    TableExists(String),
    /// `DROP TABLE` of a missing table.
    #[error("Unknown table '{0}'")]
    DropMissingTable(String),
    /// A statement needs a current database and none is selected.
    #[error("No database selected")]
    NoDatabaseSelected,
    /// Authentication failed.
    #[error("Access denied for user '{user}' (using password: {})", if *.using_password { "YES" } else { "NO" })]
    AccessDenied { user: String, using_password: bool },
    /// A column declared twice.
    #[error("Duplicate column name '{0}'")]
    DuplicateColumn(String),
    /// `SET` of a variable that does not exist.
    #[error("Unknown system variable '{0}'")]
    UnknownVariable(String),
    /// `SET` of a variable to a value it cannot take.
    #[error("Variable '{0}' can't be set to the value of '{1}'")]
    WrongVariableValue(String, String),
    /// `SET NAMES` with a character set other than utf8.
    #[error("Unknown character set: '{0}'")]
    UnknownCharset(String),
    /// A collation Tethys does not know (`SET NAMES x COLLATE y`, `SET collation_connection`).
    #[error("Unknown collation: '{0}'")]
    UnknownCollation(String),
    /// A load label already used by a transaction that was not aborted.
    #[error(
        "[LABEL_ALREADY_EXISTS] Label [{label}] has already been used, relate to txn [{txn_id}], status [{}].",
        status.doris_name()
    )]
    LabelAlreadyExists {
        label: String,
        txn_id: i64,
        status: tethys_proto::TxnStatus,
    },
    /// The server holds as many connections as it takes (`qe_max_connection`).
    #[error("Too many connections")]
    TooManyConnections,
    /// A user holds as many connections as it may (`max_user_connections`).
    #[error("User {0} already has more than 'max_user_connections' active connections")]
    TooManyUserConnections(String),
    /// A connection holds as many prepared statements as it may.
    #[error("Can't create more than max_prepared_stmt_count statements (current value: {0})")]
    TooManyPreparedStatements(usize),
    /// A tablet has too many unmerged versions to take another load (-235).
    #[error("{0}")]
    TooManyVersions(String),
    /// A statement or feature Tethys does not support (yet).
    #[error("{0}")]
    NotSupported(String),
    /// A semantically invalid statement (bad DDL, wrong types, ...).
    #[error("{0}")]
    Analysis(String),
    /// Rows that violate the schema in a load or INSERT.
    #[error("{0}")]
    DataQuality(String),
    /// The statement was cancelled by `KILL QUERY` or the client.
    #[error("Query was cancelled")]
    Cancelled,
    /// The statement ran longer than `query_timeout`.
    #[error("Query timeout: the statement ran longer than query_timeout ({0} s)")]
    Timeout(u64),
    /// Stored data failed a checksum or structural check.
    #[error("data corruption: {0}")]
    Corruption(String),
    /// An I/O error, with what was being done.
    #[error("I/O error while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    /// A backend could not be reached or failed.
    #[error("backend error: {0}")]
    Backend(String),
    /// A backend that belongs to another cluster (its data directory says
    /// so) was asked to join this one.
    #[error("{0}")]
    WrongCluster(String),
    /// An error from the query engine.
    #[error("{0}")]
    Execution(String),
    /// A bug or an unexpected state.
    #[error("internal error: {0}")]
    Internal(String),
}

impl TethysError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        TethysError::Io {
            context: context.into(),
            source,
        }
    }

    /// The MySQL error number and SQLSTATE of this error.
    pub fn mysql_code(&self) -> (u16, &'static str) {
        use TethysError::*;
        match self {
            Syntax(_) => (1064, "42000"),
            UnknownDatabase(_) => (1049, "42000"),
            UnknownTable { .. } => (1146, "42S02"),
            UnknownColumn(_) => (1054, "42S22"),
            DatabaseExists(_) => (1007, "HY000"),
            DatabaseNotExists(_) => (1008, "HY000"),
            TableExists(_) => (1050, "42S01"),
            DropMissingTable(_) => (1051, "42S02"),
            NoDatabaseSelected => (1046, "3D000"),
            AccessDenied { .. } => (1045, "28000"),
            UnknownVariable(_) => (1193, "HY000"),
            DuplicateColumn(_) => (1060, "42S21"),
            WrongVariableValue(..) => (1231, "42000"),
            UnknownCharset(_) => (1115, "42000"),
            UnknownCollation(_) => (1273, "HY000"),
            NotSupported(_) => (1235, "42000"),
            LabelAlreadyExists { .. } | TooManyVersions(_) => (1105, "HY000"),
            TooManyConnections => (1040, "08004"),
            TooManyUserConnections(_) => (1203, "42000"),
            TooManyPreparedStatements(_) => (1461, "42000"),
            DataQuality(_) => (5025, "HY000"),
            Cancelled => (1317, "70100"),
            Timeout(_) => (3024, "HY000"),
            Analysis(_)
            | Corruption(_)
            | Io { .. }
            | Backend(_)
            | WrongCluster(_)
            | Execution(_)
            | Internal(_) => (1105, "HY000"),
        }
    }
}

impl From<TethysError> for tonic::Status {
    fn from(e: TethysError) -> Self {
        use TethysError::*;
        let msg = e.to_string();
        match e {
            Cancelled => tonic::Status::cancelled(msg),
            Timeout(_) => tonic::Status::deadline_exceeded(msg),
            Corruption(_) => tonic::Status::data_loss(msg),
            NotSupported(_) => tonic::Status::unimplemented(msg),
            WrongCluster(_) => tonic::Status::failed_precondition(msg),
            Analysis(_) | DataQuality(_) | Syntax(_) => tonic::Status::invalid_argument(msg),
            TooManyVersions(_)
            | TooManyConnections
            | TooManyUserConnections(_)
            | TooManyPreparedStatements(_) => tonic::Status::resource_exhausted(msg),
            _ => tonic::Status::internal(msg),
        }
    }
}

impl From<tonic::Status> for TethysError {
    fn from(s: tonic::Status) -> Self {
        match s.code() {
            tonic::Code::Cancelled => TethysError::Cancelled,
            _ => TethysError::Backend(s.message().to_string()),
        }
    }
}

impl From<datafusion::error::DataFusionError> for TethysError {
    fn from(e: datafusion::error::DataFusionError) -> Self {
        refine(from_datafusion(e))
    }
}

/// Gives engine errors the MySQL meaning a user expects.
fn refine(e: TethysError) -> TethysError {
    let m = match &e {
        TethysError::Execution(m) | TethysError::Analysis(m) | TethysError::UnknownColumn(m) => {
            m.clone()
        }
        _ => return e,
    };
    if let Some(at) = m.find("No field named ") {
        let rest = &m[at + "No field named ".len()..];
        let line = rest.split('\n').next().unwrap_or_default();
        let name = line
            .split(". ")
            .next()
            .unwrap_or_default()
            .trim_end_matches('.');
        let hint = m
            .find("Valid fields are")
            .map(|i| format!(" {}", &m[i..]))
            .unwrap_or_default();
        TethysError::UnknownColumn(format!("Unknown column '{name}' in 'table list'.{hint}"))
    } else if m.contains("non-nullable but contains null values") {
        TethysError::DataQuality(
            "Insert has filtered data in strict mode: a NULL value was given for a NOT NULL column"
                .into(),
        )
    } else if m.contains("Query was cancelled") {
        TethysError::Cancelled
    } else {
        e
    }
}

fn from_datafusion(e: datafusion::error::DataFusionError) -> TethysError {
    {
        use datafusion::error::DataFusionError as D;
        // However deep it is wrapped (a join's shared build-side error, a
        // backend's error come back through an exchange).
        if let D::ResourcesExhausted(m) = e.find_root() {
            return TethysError::Execution(format!(
                "[MEM_LIMIT_EXCEEDED] the statement needs more memory than exec_mem_limit allows: {m}"
            ));
        }
        match e {
            D::External(inner) => match inner.downcast::<TethysError>() {
                Ok(t) => *t,
                Err(other) => TethysError::Execution(other.to_string()),
            },
            D::Context(ctx, inner) => match from_datafusion(*inner) {
                TethysError::Execution(m) => TethysError::Execution(format!("{ctx}: {m}")),
                other => other,
            },
            D::SQL(err, _) => TethysError::Syntax(err.to_string()),
            D::NotImplemented(m) => TethysError::NotSupported(m),
            D::ArrowError(a, _) => TethysError::Execution(a.to_string()),
            D::Plan(m) => TethysError::Analysis(m),
            D::SchemaError(s, _) => TethysError::UnknownColumn(s.to_string()),
            other => {
                let m = other.to_string();
                if m.contains("Query was cancelled") {
                    TethysError::Cancelled
                } else {
                    TethysError::Execution(m)
                }
            }
        }
    }
}

impl From<TethysError> for datafusion::error::DataFusionError {
    fn from(e: TethysError) -> Self {
        datafusion::error::DataFusionError::External(Box::new(e))
    }
}

impl From<arrow::error::ArrowError> for TethysError {
    fn from(e: arrow::error::ArrowError) -> Self {
        TethysError::Execution(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_mysql() {
        assert_eq!(
            TethysError::UnknownDatabase("x".into()).mysql_code().0,
            1049
        );
        assert_eq!(
            TethysError::UnknownTable {
                database: "d".into(),
                table: "t".into()
            }
            .mysql_code()
            .0,
            1146
        );
        assert_eq!(
            TethysError::Syntax("x".into()).mysql_code(),
            (1064, "42000")
        );
    }

    #[test]
    fn tethys_error_survives_datafusion_roundtrip() {
        let df: datafusion::error::DataFusionError = TethysError::Cancelled.into();
        assert!(matches!(TethysError::from(df), TethysError::Cancelled));
    }

    /// A join's build side fails once and every probe partition sees the
    /// shared error: still Doris' MEM_LIMIT_EXCEEDED.
    #[test]
    fn memory_exhausted_however_wrapped_is_mem_limit_exceeded() {
        use datafusion::error::DataFusionError as D;
        let shared = D::Shared(std::sync::Arc::new(D::ResourcesExhausted("join".into())));
        let wrapped = D::Context("probe".into(), Box::new(shared));
        let m = TethysError::from(wrapped).to_string();
        assert!(m.contains("[MEM_LIMIT_EXCEEDED]"), "{m}");
    }
}

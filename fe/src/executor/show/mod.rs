//! The SHOW statements that read the catalog, the backends and the
//! transaction manager (the `information_schema`-backed ones are
//! `crate::show`'s), and DESCRIBE.

use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use tethys_common::{Result, TethysError};

use crate::catalog::Distribution;
use crate::frontend::Frontend;
use crate::session::Session;
use crate::sql::statement::{ShowFilter, Statement};

mod create_table;
mod meta;

use super::{Output, nullable_string_rows, string_rows, table_snapshot};
use crate::metadata::fmt_time;

/// Runs one of the statements this module's doc names.
pub(super) async fn execute(
    fe: &Arc<Frontend>,
    session: &mut Session,
    stmt: Statement,
) -> Result<Output> {
    let sdb = session.database.clone();
    match stmt {
        Statement::ShowColumnStats { db, table, columns } => {
            let db = crate::session::resolve_db(&sdb, &db)?;
            let t = table_snapshot(fe, &db, &table)?;
            string_rows(
                super::analyze::SHOW_COLUMNS,
                super::analyze::show_rows(&t, &columns),
            )
        }
        Statement::ShowDatabases(filter) => {
            let mut rows: Vec<Vec<String>> = fe
                .catalog
                .read()
                .databases
                .keys()
                .map(|d| vec![d.clone()])
                .collect();
            rows.push(vec!["information_schema".into()]);
            rows.sort();
            filtered(&["Database"], rows, &filter).await
        }
        Statement::ShowMeta(m) => meta::execute(fe, session, m).await,
        Statement::ShowCreateTable { db, name } => {
            let db = crate::session::resolve_db(&sdb, &db)?;
            let t = table_snapshot(fe, &db, &name)?;
            string_rows(
                &["Table", "Create Table"],
                vec![vec![t.name.clone(), create_table::show_create_table(&t)]],
            )
        }
        Statement::ShowCreateDatabase(name) => {
            let d = fe
                .catalog
                .read()
                .database(&name)
                .map(|d| d.name.clone())
                .ok_or(TethysError::UnknownDatabase(name))?;
            string_rows(
                &["Database", "Create Database"],
                vec![vec![d.clone(), format!("CREATE DATABASE `{d}`")]],
            )
        }
        Statement::Describe { db, name, all: _ } => {
            let db = crate::session::resolve_db(&sdb, &db)?;
            let t = table_snapshot(fe, &db, &name)?;
            let rows = meta::describe_rows(&t, false);
            string_rows(&meta::DESCRIBE_COLUMNS, rows)
        }
        Statement::ShowPartitions { db, table } => {
            let db = crate::session::resolve_db(&sdb, &db)?;
            let t = table_snapshot(fe, &db, &table)?;
            let ty = t.partition_column_type();
            let (dist_key, buckets) = match &t.distribution {
                Distribution::Hash { columns, buckets } => (columns.join(", "), *buckets),
                Distribution::Random { buckets } => ("RANDOM".into(), *buckets),
            };
            let sizes = tablet_stats(fe, &t).await.unwrap_or_default();
            let rows = t
                .partitions
                .iter()
                .map(|p| {
                    let range = match (p.range, &ty) {
                        (Some((lo, hi)), Some(ty)) => {
                            format!("[{}, {})", lo.display(ty), hi.display(ty))
                        }
                        _ => String::new(),
                    };
                    let size: i64 = p
                        .tablets
                        .iter()
                        .filter_map(|tb| sizes.get(&tb.id).map(|s| s.data_size))
                        .sum();
                    let rows: i64 = p
                        .tablets
                        .iter()
                        .filter_map(|tb| sizes.get(&tb.id).map(|s| s.row_count))
                        .sum();
                    vec![
                        p.id.to_string(),
                        p.name.clone(),
                        p.visible_version.to_string(),
                        fmt_time(p.visible_version_time),
                        "NORMAL".into(),
                        t.partition_column.clone().unwrap_or_default(),
                        range,
                        dist_key.clone(),
                        buckets.to_string(),
                        "1".into(),
                        "HDD".into(),
                        "9999-12-31 23:59:59".into(),
                        String::new(),
                        "NULL".into(),
                        fmt_size(size),
                        "false".into(),
                        "tag.location.default: 1".into(),
                        "true".into(),
                        "\\N".into(),
                        "\\N".into(),
                        p.committed_version.to_string(),
                        rows.to_string(),
                    ]
                })
                .collect();
            string_rows(
                &[
                    "PartitionId",
                    "PartitionName",
                    "VisibleVersion",
                    "VisibleVersionTime",
                    "State",
                    "PartitionKey",
                    "Range",
                    "DistributionKey",
                    "Buckets",
                    "ReplicationNum",
                    "StorageMedium",
                    "CooldownTime",
                    "RemoteStoragePolicy",
                    "LastConsistencyCheckTime",
                    "DataSize",
                    "IsInMemory",
                    "ReplicaAllocation",
                    "IsMutable",
                    "SyncWithBaseTables",
                    "UnsyncTables",
                    "CommittedVersion",
                    "RowCount",
                ],
                rows,
            )
        }
        Statement::ShowTablets {
            db,
            table,
            partition,
        } => {
            let db = crate::session::resolve_db(&sdb, &db)?;
            let t = table_snapshot(fe, &db, &table)?;
            if let Some(p) = &partition {
                t.existing_partition(p)?;
            }
            let stats = tablet_stats(fe, &t).await?;
            let backends = fe.catalog.read().backends.clone();
            let mut rows = vec![];
            for p in &t.partitions {
                if partition
                    .as_ref()
                    .is_some_and(|n| !n.eq_ignore_ascii_case(&p.name))
                {
                    continue;
                }
                for tb in &p.tablets {
                    let s = stats.get(&tb.id).cloned().unwrap_or_default();
                    let url = |path: &str| {
                        backends
                            .get(&tb.backend_id)
                            .map(|b| {
                                format!("http://{}:{}/api/{path}{}", b.host, b.http_port, tb.id)
                            })
                            .unwrap_or_default()
                    };
                    rows.push(vec![
                        tb.id.to_string(),
                        (tb.id + 1).to_string(),
                        tb.backend_id.to_string(),
                        "0".into(),
                        s.version.to_string(),
                        s.version.to_string(),
                        "-1".into(),
                        "NULL".into(),
                        s.data_size.to_string(),
                        "0".into(),
                        s.row_count.to_string(),
                        if s.found {
                            "NORMAL".into()
                        } else {
                            "MISSING".into()
                        },
                        "NULL".into(),
                        "-1".into(),
                        s.rowset_count.to_string(),
                        "0".into(),
                        "0".into(),
                        url("meta/header/"),
                        url("compaction/show?tablet_id="),
                        "-1".into(),
                        "-1".into(),
                    ]);
                }
            }
            string_rows(
                &[
                    "TabletId",
                    "ReplicaId",
                    "BackendId",
                    "SchemaHash",
                    "Version",
                    "LstSuccessVersion",
                    "LstFailedVersion",
                    "LstFailedTime",
                    "LocalDataSize",
                    "RemoteDataSize",
                    "RowCount",
                    "State",
                    "LstConsistencyCheckTime",
                    "CheckVersion",
                    "VersionCount",
                    "QueryHits",
                    "PathHash",
                    "MetaUrl",
                    "CompactionStatus",
                    "CooldownReplicaId",
                    "CooldownMetaId",
                ],
                rows,
            )
        }
        Statement::ShowVariables { global, filter } => {
            let globals;
            let vars = if global {
                globals = fe.global_variables();
                &globals
            } else {
                &session.vars
            };
            let rows = vars
                .all()
                .into_iter()
                .map(|(n, v, d, c)| vec![n, v, d, if c { "1".into() } else { "0".into() }])
                .collect();
            filtered(
                &["Variable_name", "Value", "Default_Value", "Changed"],
                rows,
                &filter,
            )
            .await
        }
        Statement::ShowQueryProfile { id: None } => string_rows(
            &crate::profile::LIST_COLUMNS,
            fe.profiles.list().iter().map(|p| p.list_row()).collect(),
        ),
        Statement::ShowQueryProfile { id: Some(id) } => match fe.profiles.get(&id) {
            Some(p) => string_rows(
                &["Profile"],
                p.lines().into_iter().map(|l| vec![l]).collect(),
            ),
            None => Err(TethysError::Analysis(format!(
                "query profile {id} not found: it was not recorded (SET enable_profile = true \
                 before the query) or is no longer kept (the last {} are)",
                crate::profile::MAX_PROFILES
            ))),
        },
        Statement::ShowProcessList => {
            // information_schema.processlist's rows; no value is shown as ''.
            let is = crate::metadata::information_schema::InformationSchema {
                fe: fe.clone(),
                session: crate::metadata::information_schema::SessionView::of(fe, session),
            };
            let source = [
                "ID", "USER", "HOST", "DB", "COMMAND", "TIME", "STATE", "INFO",
            ];
            let rows = is
                .select("processlist", &source, |_| true)
                .await
                .into_iter()
                .map(|r| r.into_iter().map(Option::unwrap_or_default).collect())
                .collect();
            string_rows(
                &[
                    "Id", "User", "Host", "db", "Command", "Time", "State", "Info",
                ],
                rows,
            )
        }
        Statement::ShowBackends => {
            let backends: Vec<_> = fe.catalog.read().backends.values().cloned().collect();
            let mut rows = vec![];
            for b in backends {
                let alive = match fe.backends.client(&b) {
                    Ok(c) => c
                        .heartbeat(tethys_proto::HeartbeatRequest { backend_id: b.id })
                        .await
                        .ok(),
                    Err(_) => None,
                };
                rows.push(vec![
                    b.id.to_string(),
                    b.host.clone(),
                    b.rpc_port.to_string(),
                    b.http_port.to_string(),
                    alive
                        .as_ref()
                        .map(|h| fmt_time(h.start_time_ms))
                        .unwrap_or_else(|| "NULL".into()),
                    (alive.is_some()).to_string(),
                    alive
                        .as_ref()
                        .map(|h| h.tablet_count.to_string())
                        .unwrap_or_default(),
                    alive
                        .as_ref()
                        .map(|h| fmt_size(h.data_used_bytes))
                        .unwrap_or_default(),
                    alive
                        .as_ref()
                        .map(|h| h.version.clone())
                        .unwrap_or_default(),
                ]);
            }
            string_rows(
                &[
                    "BackendId",
                    "Host",
                    "BePort",
                    "HttpPort",
                    "LastStartTime",
                    "Alive",
                    "TabletNum",
                    "DataUsedCapacity",
                    "Version",
                ],
                rows,
            )
        }
        Statement::ShowFrontends => string_rows(
            &[
                "Name",
                "Host",
                "QueryPort",
                "Role",
                "IsMaster",
                "Alive",
                "Version",
            ],
            vec![vec![
                "fe_standalone".into(),
                "127.0.0.1".into(),
                String::new(),
                "FOLLOWER".into(),
                "true".into(),
                "true".into(),
                env!("CARGO_PKG_VERSION").into(),
            ]],
        ),
        Statement::ShowTransaction { db, where_sql } => {
            let db = crate::session::resolve_db(&sdb, &db)?;
            let (by_id, by_label) = parse_txn_filter(where_sql.as_deref())?;
            let rows: Vec<Vec<String>> = fe
                .catalog
                .read()
                .txns
                .values()
                .filter(|t| t.db.eq_ignore_ascii_case(&db))
                .filter(|t| by_id.is_none_or(|id| t.id == id))
                .filter(|t| by_label.as_ref().is_none_or(|l| &t.label == l))
                .map(|t| {
                    vec![
                        t.id.to_string(),
                        t.label.clone(),
                        "FE: 127.0.0.1".into(),
                        t.state.name().into(),
                        t.source.clone(),
                        fmt_time(t.prepare_time),
                        "NULL".into(),
                        fmt_time(t.commit_time),
                        fmt_time(t.finish_time),
                        fmt_time(t.finish_time),
                        t.reason.clone(),
                        "0".into(),
                        "-1".into(),
                        t.timeout_ms.to_string(),
                        String::new(),
                    ]
                })
                .collect();
            string_rows(
                &[
                    "TransactionId",
                    "Label",
                    "Coordinator",
                    "TransactionStatus",
                    "LoadJobSourceType",
                    "PrepareTime",
                    "PreCommitTime",
                    "CommitTime",
                    "PublishTime",
                    "FinishTime",
                    "Reason",
                    "ErrorReplicasCount",
                    "ListenerId",
                    "TimeoutMs",
                    "ErrMsg",
                ],
                rows,
            )
        }
        Statement::ShowLoad { db, stream, filter } => {
            let db = crate::session::resolve_db(&sdb, &db)?;
            let txns: Vec<crate::catalog::TxnRecord> = fe
                .catalog
                .read()
                .txns
                .values()
                .filter(|t| t.db.eq_ignore_ascii_case(&db))
                .filter(|t| !stream || t.source == "BACKEND_STREAMING")
                .cloned()
                .collect();
            if stream {
                let rows = txns
                    .iter()
                    .map(|t| {
                        let s = t.stats.clone().unwrap_or_default();
                        let status = match t.state {
                            crate::catalog::TxnState::Visible
                            | crate::catalog::TxnState::Precommitted => "Success",
                            crate::catalog::TxnState::Aborted => "Fail",
                            _ => "Running",
                        };
                        vec![
                            t.label.clone(),
                            t.db.clone(),
                            s.table,
                            String::new(),
                            status.into(),
                            s.message,
                            s.error_url,
                            s.total_rows.to_string(),
                            s.loaded_rows.to_string(),
                            s.filtered_rows.to_string(),
                            s.unselected_rows.to_string(),
                            s.load_bytes.to_string(),
                            fmt_time(t.prepare_time),
                            fmt_time(t.finish_time),
                            s.user,
                            s.comment,
                        ]
                    })
                    .collect();
                filtered(
                    &[
                        "Label",
                        "Db",
                        "Table",
                        "ClientIp",
                        "Status",
                        "Message",
                        "Url",
                        "TotalRows",
                        "LoadedRows",
                        "FilteredRows",
                        "UnselectedRows",
                        "LoadBytes",
                        "StartTime",
                        "FinishTime",
                        "User",
                        "Comment",
                    ],
                    rows,
                    &filter,
                )
                .await
            } else {
                let rows = txns
                    .iter()
                    .map(|t| {
                        let s = t.stats.clone().unwrap_or_default();
                        let state = match t.state {
                            crate::catalog::TxnState::Visible => "FINISHED",
                            crate::catalog::TxnState::Aborted => "CANCELLED",
                            crate::catalog::TxnState::Committed => "COMMITTED",
                            _ => "LOADING",
                        };
                        let kind = if t.source == "BACKEND_STREAMING" {
                            "STREAM_LOAD"
                        } else {
                            "INSERT"
                        };
                        vec![
                            t.id.to_string(),
                            t.label.clone(),
                            state.into(),
                            "N/A".into(),
                            kind.into(),
                            "NULL".into(),
                            format!(
                                "total:{}; loaded:{}; filtered:{}; unselected:{}; bytes:{}",
                                s.total_rows,
                                s.loaded_rows,
                                s.filtered_rows,
                                s.unselected_rows,
                                s.load_bytes
                            ),
                            if t.state == crate::catalog::TxnState::Aborted {
                                t.reason.clone()
                            } else {
                                String::new()
                            },
                            fmt_time(t.prepare_time),
                            fmt_time(t.prepare_time),
                            fmt_time(t.prepare_time),
                            fmt_time(t.prepare_time),
                            fmt_time(t.finish_time),
                            s.error_url,
                            format!("{{\"Table\":\"{}\"}}", s.table),
                            t.id.to_string(),
                            String::new(),
                            s.user,
                            s.comment,
                        ]
                    })
                    .collect();
                filtered(
                    &[
                        "JobId",
                        "Label",
                        "State",
                        "Progress",
                        "Type",
                        "EtlInfo",
                        "TaskInfo",
                        "ErrorMsg",
                        "CreateTime",
                        "EtlStartTime",
                        "EtlFinishTime",
                        "LoadStartTime",
                        "LoadFinishTime",
                        "URL",
                        "JobDetails",
                        "TransactionId",
                        "ErrorTablets",
                        "User",
                        "Comment",
                    ],
                    rows,
                    &filter,
                )
                .await
            }
        }
        Statement::ShowEmpty { columns } => string_rows(&columns, vec![]),
        Statement::ShowEngines => string_rows(
            &[
                "Engine",
                "Support",
                "Comment",
                "Transactions",
                "XA",
                "Savepoints",
            ],
            vec![vec![
                "Olap".into(),
                "DEFAULT".into(),
                "Tethys columnar OLAP storage".into(),
                "YES".into(),
                "NO".into(),
                "NO".into(),
            ]],
        ),
        other => Err(super::not_in_family("show", &other)),
    }
}

/// SQL LIKE, case-insensitive, as SHOW ... LIKE uses it.
pub fn like_match(pattern: &str, s: &str) -> bool {
    fn go(p: &[char], s: &[char]) -> bool {
        match (p.first(), s.first()) {
            (None, None) => true,
            (Some('%'), _) => go(&p[1..], s) || (!s.is_empty() && go(p, &s[1..])),
            (Some('_'), Some(_)) => go(&p[1..], &s[1..]),
            (Some('\\'), Some(c)) if p.len() > 1 => p[1] == *c && go(&p[2..], &s[1..]),
            (Some(a), Some(b)) => a.eq_ignore_ascii_case(b) && go(&p[1..], &s[1..]),
            _ => false,
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = s.chars().collect();
    go(&p, &s)
}

/// Filters SHOW output by LIKE on the first column, or by a WHERE clause
/// evaluated with DataFusion over the rows.
async fn filtered(columns: &[&str], rows: Vec<Vec<String>>, filter: &ShowFilter) -> Result<Output> {
    let rows = rows
        .into_iter()
        .map(|r| r.into_iter().map(Some).collect())
        .collect();
    filtered_nullable(columns, rows, filter).await
}

/// [`filtered`] over rows that may hold NULLs.
pub(crate) async fn filtered_nullable(
    columns: &[&str],
    mut rows: Vec<Vec<Option<String>>>,
    filter: &ShowFilter,
) -> Result<Output> {
    if let Some(p) = &filter.like {
        rows.retain(|r| r[0].as_deref().is_some_and(|v| like_match(p, v)));
    }
    let out = nullable_string_rows(columns, rows)?;
    let Some(w) = &filter.where_sql else {
        return Ok(out);
    };
    let Output::Rows(stream) = out else {
        return Ok(out);
    };
    let schema = stream.schema();
    let batches: Vec<RecordBatch> = datafusion::physical_plan::common::collect(stream).await?;
    let ctx = SessionContext::new();
    let mut cfg = ctx.copied_config();
    cfg.options_mut().sql_parser.enable_ident_normalization = false;
    let ctx = SessionContext::new_with_config(cfg);
    ctx.register_table(
        "show_rows",
        Arc::new(MemTable::try_new(schema, vec![batches])?),
    )?;
    let df = ctx
        .sql(&format!("SELECT * FROM show_rows WHERE {w}"))
        .await?;
    Ok(Output::Rows(df.execute_stream().await?))
}

/// `WHERE id = n` or `WHERE label = 'x'` of SHOW TRANSACTION.
fn parse_txn_filter(where_sql: Option<&str>) -> Result<(Option<i64>, Option<String>)> {
    let usage =
        || TethysError::Analysis("SHOW TRANSACTION needs WHERE id = n or WHERE label = 'x'".into());
    let w = where_sql.ok_or_else(usage)?;
    let mut t = crate::sql::tokens::Tokens::new(w)?;
    let key = t.ident()?.to_ascii_lowercase();
    t.expect(&datafusion::sql::sqlparser::tokenizer::Token::Eq)?;
    let r = match key.as_str() {
        "id" => (Some(t.number()? as i64), None),
        "label" => (None, Some(t.string()?)),
        _ => return Err(usage()),
    };
    t.finish()?;
    Ok(r)
}

/// Stats of every tablet of `t`.
async fn tablet_stats(
    fe: &Arc<Frontend>,
    t: &crate::catalog::Table,
) -> Result<std::collections::HashMap<i64, tethys_proto::TabletStat>> {
    let tablets: Vec<_> = t
        .partitions
        .iter()
        .flat_map(|p| p.tablets.iter().cloned())
        .collect();
    fe.backends.tablet_stats(&tablets).await
}

pub(super) fn fmt_size(bytes: i64) -> String {
    let b = bytes as f64;
    if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.3} GB", b / 1024.0 / 1024.0 / 1024.0)
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.3} MB", b / 1024.0 / 1024.0)
    } else if b >= 1024.0 {
        format!("{:.3} KB", b / 1024.0)
    } else {
        format!("{bytes}.000 B")
    }
}

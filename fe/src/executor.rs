//! Runs one statement for a session and produces what the protocol layer
//! sends back: an OK with affected rows, or a stream of result batches.

use std::sync::{Arc, Mutex};

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::datasource::MemTable;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::prelude::SessionContext;
use futures::StreamExt;
use tethys_common::{Result, TethysError};

use crate::catalog::Distribution;
use crate::ddl;
use crate::frontend::Frontend;
use crate::planner::{self, StatementCtx, explain};
use crate::session::Session;
use crate::sql::statement::{AnalyzeTarget, ShowFilter, Statement};

/// What a statement returns.
pub enum Output {
    Ok { affected: u64, info: String },
    Rows(SendableRecordBatchStream),
}

fn ok() -> Output {
    Output::Ok {
        affected: 0,
        info: String::new(),
    }
}

/// A result of string columns.
pub(crate) fn string_rows(columns: &[&str], rows: Vec<Vec<String>>) -> Result<Output> {
    nullable_string_rows(
        columns,
        rows.into_iter()
            .map(|r| r.into_iter().map(Some).collect())
            .collect(),
    )
}

/// A result of string columns that may hold NULLs.
pub(crate) fn nullable_string_rows(
    columns: &[&str],
    rows: Vec<Vec<Option<String>>>,
) -> Result<Output> {
    let schema: SchemaRef = Arc::new(Schema::new(
        columns
            .iter()
            .map(|c| Field::new(*c, DataType::Utf8, true))
            .collect::<Vec<_>>(),
    ));
    let arrays: Vec<ArrayRef> = (0..columns.len())
        .map(|i| {
            Arc::new(StringArray::from(
                rows.iter().map(|r| r[i].clone()).collect::<Vec<_>>(),
            )) as ArrayRef
        })
        .collect();
    let batch = RecordBatch::try_new(schema.clone(), arrays)?;
    Ok(Output::Rows(Box::pin(RecordBatchStreamAdapter::new(
        schema,
        futures::stream::once(async move { Ok(batch) }),
    ))))
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

/// Maps DataFusion's "table not found" into the MySQL errors users expect.
fn map_not_found(fe: &Frontend, session: &Session, e: TethysError) -> TethysError {
    let msg = e.to_string();
    if let Some(start) = msg.find("table '")
        && msg.contains("not found")
    {
        let rest = &msg[start + 7..];
        let name = rest.split('\'').next().unwrap_or_default();
        let parts: Vec<&str> = name.split('.').collect();
        let (db, table) = match parts.as_slice() {
            [_, db, t] => (db.to_string(), t.to_string()),
            [db, t] => (db.to_string(), t.to_string()),
            [t] => (session.database.clone().unwrap_or_default(), t.to_string()),
            _ => return e,
        };
        if db.is_empty() {
            return TethysError::NoDatabaseSelected;
        }
        if !db.eq_ignore_ascii_case(crate::metadata::information_schema::NAME)
            && fe.catalog.read().database(&db).is_none()
        {
            return TethysError::UnknownDatabase(db);
        }
        return TethysError::UnknownTable {
            database: db,
            table,
        };
    }
    e
}

/// Executes one statement.
pub async fn execute(fe: &Arc<Frontend>, session: &mut Session, stmt: Statement) -> Result<Output> {
    fe.queries
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    session.take_assigned();
    let sdb = session.database.clone();
    match stmt {
        Statement::Empty => Ok(ok()),
        Statement::Query(sql) => run_query(fe, session, &sql, None).await,
        Statement::Insert { sql, label } => run_query(fe, session, &sql, label).await,
        Statement::Explain {
            sql,
            verbose: _,
            analyze,
        } => {
            let stmt = Arc::new(statement_ctx(fe, session, None));
            let ctx = planner::statement_context(fe, session, stmt)?;
            let parsed = crate::sql::rewrite::parse_for_datafusion(&sql)?;
            let plan = ctx
                .state()
                .statement_to_plan(parsed)
                .await
                .map_err(|e| map_not_found(fe, session, e.into()))?;
            let names: Vec<String> = plan.schema().fields().iter().map(|f| f.name().clone()).collect();
            let df = ctx.execute_logical_plan(plan).await?;
            let physical = df.create_physical_plan().await?;
            let lines = if analyze {
                // Run it to the end, rows discarded as they come.
                let mut stream =
                    datafusion::physical_plan::execute_stream(physical.clone(), ctx.task_ctx())?;
                while let Some(batch) = stream.next().await {
                    batch?;
                }
                explain::analyze_lines(&physical, &names)
            } else {
                explain::explain_lines(&physical, &names)
            };
            string_rows(&["Explain String(Nereids Planner)"], lines.into_iter().map(|l| vec![l]).collect())
        }
        Statement::CreateDatabase { name, if_not_exists } => {
            ddl::create_database(fe, &name, if_not_exists)?;
            Ok(ok())
        }
        Statement::DropDatabase { name, if_exists } => {
            ddl::drop_database(fe, &name, if_exists).await?;
            if session.database.as_deref().is_some_and(|d| d.eq_ignore_ascii_case(&name)) {
                session.database = None;
            }
            Ok(ok())
        }
        Statement::CreateTable(ct) => {
            ddl::create_table(fe, &sdb, &ct).await?;
            Ok(ok())
        }
        Statement::DropTable { db, name, if_exists } => {
            ddl::drop_table(fe, &sdb, &db, &name, if_exists).await?;
            Ok(ok())
        }
        Statement::Delete {
            db,
            table,
            partitions,
            condition,
        } => {
            let db = ddl::resolve_db(&sdb, &db)?;
            let t = table_snapshot(fe, &db, &table)?;
            // Merge-on-write UNIQUE tables delete rows by key: the matching
            // rows are loaded back as deletes of their keys.
            if let Some(insert) = crate::dml::delete_as_insert(&db, &t, &partitions, &condition)? {
                return run_query_as(fe, session, &insert, None, true).await;
            }
            let d = crate::dml::delete(fe, &db, &t, &partitions, &condition).await?;
            Ok(Output::Ok {
                affected: 0,
                info: format!(
                    "{{'label':'{}', 'status':'VISIBLE', 'txnId':'{}'}}",
                    d.label, d.txn_id
                ),
            })
        }
        Statement::Update(sql) => {
            let insert = crate::dml::update_as_insert(&sql, &sdb, fe)?;
            run_query(fe, session, &insert, None).await
        }
        Statement::AdminCompact {
            db,
            table,
            partition,
            kind,
        } => {
            let db = ddl::resolve_db(&sdb, &db)?;
            let t = table_snapshot(fe, &db, &table)?;
            if let Some(p) = &partition {
                t.existing_partition(p)?;
            }
            let tablets: Vec<_> = t
                .partitions
                .iter()
                .filter(|p| partition.as_ref().is_none_or(|n| n.eq_ignore_ascii_case(&p.name)))
                .flat_map(|p| p.tablets.iter().cloned())
                .collect();
            let r = planner::stats::compact_tablets(fe, &tablets, &kind).await?;
            Ok(Output::Ok {
                affected: 0,
                info: format!(
                    "{} compactions merged {} rowsets of {} rows into {} rows",
                    r.compactions, r.input_rowsets, r.input_rows, r.output_rows
                ),
            })
        }
        Statement::Analyze { target, columns } => {
            let started = std::time::Instant::now();
            let tables = match target {
                AnalyzeTarget::Table { db, name } => vec![(ddl::resolve_db(&sdb, &db)?, name)],
                AnalyzeTarget::Database(db) => {
                    let state = fe.catalog.read();
                    let d = state
                        .database(&db)
                        .ok_or_else(|| TethysError::UnknownDatabase(db.clone()))?;
                    let names = d.tables.keys().cloned().collect::<Vec<_>>();
                    names.into_iter().map(|t| (d.name.clone(), t)).collect()
                }
            };
            let (mut cols, mut rows) = (0, 0);
            for (db, table) in &tables {
                let a = crate::analyze::analyze_table(fe, session, db, table, &columns).await?;
                cols += a.columns;
                rows += a.rows;
            }
            Ok(Output::Ok {
                affected: 0,
                info: format!(
                    "analyzed {cols} columns of {} tables ({rows} rows) in {} ms",
                    tables.len(),
                    started.elapsed().as_millis()
                ),
            })
        }
        Statement::ShowColumnStats { db, table, columns } => {
            let db = ddl::resolve_db(&sdb, &db)?;
            let t = table_snapshot(fe, &db, &table)?;
            string_rows(
                crate::analyze::SHOW_COLUMNS,
                crate::analyze::show_rows(&t, &columns),
            )
        }
        Statement::DropStats { db, table, columns } => {
            let db = ddl::resolve_db(&sdb, &db)?;
            crate::analyze::drop_stats(fe, &db, &table, &columns)?;
            Ok(ok())
        }
        Statement::TruncateTable { db, name, partitions } => {
            ddl::truncate_table(fe, &sdb, &db, &name, &partitions).await?;
            Ok(ok())
        }
        Statement::AddPartition { db, table, partition } => {
            ddl::add_partition(fe, &sdb, &db, &table, &partition).await?;
            Ok(ok())
        }
        Statement::DropPartition {
            db,
            table,
            name,
            if_exists,
        } => {
            ddl::drop_partition(fe, &sdb, &db, &table, &name, if_exists).await?;
            Ok(ok())
        }
        Statement::SetTableProperties {
            db,
            table,
            properties,
        } => {
            ddl::set_table_properties(fe, &sdb, &db, &table, &properties)?;
            Ok(ok())
        }
        Statement::Use(db) => {
            let name = if db.eq_ignore_ascii_case("information_schema") {
                "information_schema".to_string()
            } else {
                fe.catalog
                    .read()
                    .database(&db)
                    .map(|d| d.name.clone())
                    .ok_or(TethysError::UnknownDatabase(db))?
            };
            session.database = Some(name);
            Ok(ok())
        }
        Statement::Prepare { name, source } => {
            crate::prepared::prepare(session, &name, source)?;
            Ok(ok())
        }
        Statement::ExecutePrepared { name, using } => {
            crate::prepared::execute(fe, session, &name, &using).await
        }
        Statement::Deallocate(name) => {
            crate::prepared::deallocate(session, &name)?;
            Ok(ok())
        }
        Statement::Set(set) => {
            crate::set_var::execute(fe, session, set).await?;
            Ok(ok())
        }
        Statement::ShowDatabases(filter) => {
            let mut rows: Vec<Vec<String>> = fe.catalog.read().databases.keys().map(|d| vec![d.clone()]).collect();
            rows.push(vec!["information_schema".into()]);
            rows.sort();
            filtered(&["Database"], rows, &filter).await
        }
        Statement::ShowMeta(m) => crate::show::execute(fe, session, m).await,
        Statement::ShowCreateTable { db, name } => {
            let db = ddl::resolve_db(&sdb, &db)?;
            let t = table_snapshot(fe, &db, &name)?;
            string_rows(&["Table", "Create Table"], vec![vec![t.name.clone(), ddl::show_create_table(&t)]])
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
            let db = ddl::resolve_db(&sdb, &db)?;
            let t = table_snapshot(fe, &db, &name)?;
            let rows = crate::show::describe_rows(&t, false);
            string_rows(&crate::show::DESCRIBE_COLUMNS, rows)
        }
        Statement::ShowPartitions { db, table } => {
            let db = ddl::resolve_db(&sdb, &db)?;
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
                        (Some((lo, hi)), Some(ty)) => format!("[{}, {})", lo.display(ty), hi.display(ty)),
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
        Statement::ShowTablets { db, table, partition } => {
            let db = ddl::resolve_db(&sdb, &db)?;
            let t = table_snapshot(fe, &db, &table)?;
            if let Some(p) = &partition {
                t.existing_partition(p)?;
            }
            let stats = tablet_stats(fe, &t).await?;
            let backends = fe.catalog.read().backends.clone();
            let mut rows = vec![];
            for p in &t.partitions {
                if partition.as_ref().is_some_and(|n| !n.eq_ignore_ascii_case(&p.name)) {
                    continue;
                }
                for tb in &p.tablets {
                    let s = stats.get(&tb.id).cloned().unwrap_or_default();
                    let url = |path: &str| {
                        backends
                            .get(&tb.backend_id)
                            .map(|b| format!("http://{}:{}/api/{path}{}", b.host, b.http_port, tb.id))
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
                        if s.found { "NORMAL".into() } else { "MISSING".into() },
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
            filtered(&["Variable_name", "Value", "Default_Value", "Changed"], rows, &filter).await
        }
        Statement::ShowQueryProfile { id: None } => string_rows(
            &crate::profile::LIST_COLUMNS,
            fe.profiles.list().iter().map(|p| p.list_row()).collect(),
        ),
        Statement::ShowQueryProfile { id: Some(id) } => match fe.profiles.get(&id) {
            Some(p) => string_rows(&["Profile"], p.lines().into_iter().map(|l| vec![l]).collect()),
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
            let source = ["ID", "USER", "HOST", "DB", "COMMAND", "TIME", "STATE", "INFO"];
            let rows = is
                .select("processlist", &source, |_| true)
                .await
                .into_iter()
                .map(|r| r.into_iter().map(Option::unwrap_or_default).collect())
                .collect();
            string_rows(&["Id", "User", "Host", "db", "Command", "Time", "State", "Info"], rows)
        }
        Statement::ShowBackends => {
            let backends: Vec<_> = fe.catalog.read().backends.values().cloned().collect();
            let mut rows = vec![];
            for b in backends {
                let alive = match fe.pool.get(&b) {
                    Ok(c) => c
                        .rpc()
                        .heartbeat(tethys_proto::HeartbeatRequest { backend_id: b.id })
                        .await
                        .ok()
                        .map(|r| r.into_inner()),
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
                    alive.as_ref().map(|h| h.tablet_count.to_string()).unwrap_or_default(),
                    alive
                        .as_ref()
                        .map(|h| fmt_size(h.data_used_bytes))
                        .unwrap_or_default(),
                    alive.as_ref().map(|h| h.version.clone()).unwrap_or_default(),
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
            &["Name", "Host", "QueryPort", "Role", "IsMaster", "Alive", "Version"],
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
            let db = ddl::resolve_db(&sdb, &db)?;
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
            let db = ddl::resolve_db(&sdb, &db)?;
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
                            crate::catalog::TxnState::Visible | crate::catalog::TxnState::Precommitted => "Success",
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
                        "Label", "Db", "Table", "ClientIp", "Status", "Message", "Url", "TotalRows", "LoadedRows",
                        "FilteredRows", "UnselectedRows", "LoadBytes", "StartTime", "FinishTime", "User", "Comment",
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
                        let kind = if t.source == "BACKEND_STREAMING" { "STREAM_LOAD" } else { "INSERT" };
                        vec![
                            t.id.to_string(),
                            t.label.clone(),
                            state.into(),
                            "N/A".into(),
                            kind.into(),
                            "NULL".into(),
                            format!(
                                "total:{}; loaded:{}; filtered:{}; unselected:{}; bytes:{}",
                                s.total_rows, s.loaded_rows, s.filtered_rows, s.unselected_rows, s.load_bytes
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
                        "JobId", "Label", "State", "Progress", "Type", "EtlInfo", "TaskInfo", "ErrorMsg", "CreateTime",
                        "EtlStartTime", "EtlFinishTime", "LoadStartTime", "LoadFinishTime", "URL", "JobDetails",
                        "TransactionId", "ErrorTablets", "User", "Comment",
                    ],
                    rows,
                    &filter,
                )
                .await
            }
        }
        Statement::ShowEmpty { columns } => string_rows(&columns, vec![]),
        Statement::ShowEngines => string_rows(
            &["Engine", "Support", "Comment", "Transactions", "XA", "Savepoints"],
            vec![vec![
                "Olap".into(),
                "DEFAULT".into(),
                "Tethys columnar OLAP storage".into(),
                "YES".into(),
                "NO".into(),
                "NO".into(),
            ]],
        ),
        Statement::Kill { connection, id } => {
            let target = fe
                .conn(id as u32)
                .ok_or_else(|| TethysError::Analysis(format!("Unknown thread id: {id}")))?;
            target.kill(connection);
            Ok(ok())
        }
        Statement::Begin => Err(TethysError::NotSupported(
            "explicit transactions (BEGIN) are not supported yet; every statement commits on its own".into(),
        )),
        Statement::Commit | Statement::Rollback => Ok(ok()),
    }
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

/// Under `enable_unique_key_partial_update`, the table columns an INSERT
/// with a column list gives, when its target is a merge-on-write UNIQUE
/// table and the list leaves columns out (as in Doris, other INSERTs are
/// ordinary ones).
fn partial_update_columns(
    fe: &Frontend,
    session: &Session,
    parsed: &datafusion::sql::parser::Statement,
) -> Result<Vec<u32>> {
    use datafusion::sql::sqlparser::ast::{Statement as Sql, TableObject};
    let datafusion::sql::parser::Statement::Statement(s) = parsed else {
        return Ok(vec![]);
    };
    let Sql::Insert(ins) = s.as_ref() else {
        return Ok(vec![]);
    };
    if ins.columns.is_empty() {
        return Ok(vec![]);
    }
    let TableObject::TableName(name) = &ins.table else {
        return Ok(vec![]);
    };
    let (db, tname) = match ddl::table_name_of(name, &session.database) {
        Ok(n) => n,
        // A name of another shape is the planner's to refuse.
        Err(TethysError::Syntax(_)) => return Ok(vec![]),
        Err(e) => return Err(e),
    };
    let Ok(t) = table_snapshot(fe, &db, &tname) else {
        return Ok(vec![]);
    };
    let s = &t.schema;
    if s.keys_type != tethys_common::schema::KeysType::Unique || !s.merge_on_write {
        return Ok(vec![]);
    }
    let mut given = vec![];
    for c in &ins.columns {
        let name = c.to_string();
        let name = name.trim_matches('`');
        let i = s.index_of(name).ok_or_else(|| {
            TethysError::UnknownColumn(format!("Unknown column '{name}' in 'table list'"))
        })?;
        given.push(i as u32);
    }
    given.sort_unstable();
    given.dedup();
    if let Some(k) = (0..s.num_key_columns).find(|k| !given.contains(&(*k as u32))) {
        return Err(TethysError::Analysis(format!(
            "a partial column update must give every key column; {} is missing",
            s.columns[k].name
        )));
    }
    Ok(if given.len() == s.columns.len() {
        vec![]
    } else {
        given
    })
}

fn statement_ctx(fe: &Frontend, session: &Session, label: Option<String>) -> StatementCtx {
    StatementCtx {
        query_id: fe.next_query_id(),
        label,
        batch_size: session.vars.batch_size(),
        time_zone: session.vars.time_zone(),
        mem_limit: session.vars.exec_mem_limit(),
        outcome: Mutex::new(None),
        group_commit: None,
        insert_timeout_secs: session.vars.insert_timeout_secs(),
        runtime_filter_max_in: session.vars.runtime_filter_max_in(),
        runtime_filter_wait_ms: session.vars.runtime_filter_wait_ms(),
        delete_rows: false,
        partial_columns: vec![],
        partial_strict: false,
    }
}

/// Runs an internal query (such as `ANALYZE`'s aggregate) with the
/// session's settings and returns its batches; only for small answers.
pub(crate) async fn collect_query(
    fe: &Arc<Frontend>,
    session: &Session,
    sql: &str,
) -> Result<Vec<arrow::array::RecordBatch>> {
    let parsed = crate::sql::rewrite::parse_for_datafusion(sql)?;
    let stmt = Arc::new(statement_ctx(fe, session, None));
    let ctx = planner::statement_context(fe, session, stmt)?;
    let plan = ctx
        .state()
        .statement_to_plan(parsed)
        .await
        .map_err(|e| map_not_found(fe, session, e.into()))?;
    Ok(ctx.execute_logical_plan(plan).await?.collect().await?)
}

async fn run_query(
    fe: &Arc<Frontend>,
    session: &Session,
    sql: &str,
    label: Option<String>,
) -> Result<Output> {
    run_query_as(fe, session, sql, label, false).await
}

/// [`run_query`]; with `delete_rows` an INSERT's rows delete their keys.
async fn run_query_as(
    fe: &Arc<Frontend>,
    session: &Session,
    sql: &str,
    label: Option<String>,
    delete_rows: bool,
) -> Result<Output> {
    let started = chrono::Local::now();
    let mut parsed = crate::sql::rewrite::parse_for_datafusion(sql)?;
    let assigned = match &mut parsed {
        datafusion::sql::parser::Statement::Statement(s) => crate::sql::assign::rewrite(s)?,
        _ => vec![],
    };
    let mut ctx_of_stmt = statement_ctx(fe, session, label);
    ctx_of_stmt.delete_rows = delete_rows;
    if session
        .vars
        .get("enable_unique_key_partial_update")
        .is_some_and(|v| v == "true")
    {
        ctx_of_stmt.partial_columns = partial_update_columns(fe, session, &parsed)?;
        ctx_of_stmt.partial_strict = session
            .vars
            .get("enable_insert_strict")
            .is_none_or(|v| v == "true");
    }
    // Group commit takes INSERT ... VALUES without a label, as in Doris.
    if ctx_of_stmt.label.is_none()
        && ctx_of_stmt.partial_columns.is_empty()
        && crate::sql::rewrite::is_insert_values(&parsed)
    {
        ctx_of_stmt.group_commit = session.vars.group_commit();
    }
    let stmt = Arc::new(ctx_of_stmt);
    let ctx = planner::statement_context(fe, session, stmt.clone())?;
    let plan = ctx
        .state()
        .statement_to_plan(parsed)
        .await
        .map_err(|e| map_not_found(fe, session, e.into()))?;
    match &plan {
        LogicalPlan::Dml(_) => {
            let df = ctx.execute_logical_plan(plan).await?;
            let batches = df
                .collect()
                .await
                .map_err(|e| map_not_found(fe, session, e.into()))?;
            let affected = batches
                .first()
                .and_then(|b| {
                    b.column(0)
                        .as_any()
                        .downcast_ref::<arrow::array::UInt64Array>()
                        .map(|a| a.value(0))
                })
                .unwrap_or(0);
            let info = match stmt
                .outcome
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
            {
                Some(o) => format!(
                    "{{'label':'{}', 'status':'{}', 'txnId':'{}'}}",
                    o.label, o.status, o.txn_id
                ),
                None => String::new(),
            };
            Ok(Output::Ok { affected, info })
        }
        LogicalPlan::Ddl(_) | LogicalPlan::Statement(_) | LogicalPlan::Copy(_) => Err(
            TethysError::NotSupported("this statement is not supported".into()),
        ),
        _ => {
            let names: Vec<String> = plan
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            let df = ctx.execute_logical_plan(plan).await?;
            let stream = if session.vars.enable_profile() {
                let physical = df.create_physical_plan().await?;
                let inner =
                    datafusion::physical_plan::execute_stream(physical.clone(), ctx.task_ctx())?;
                let pending = crate::profile::Pending {
                    store: fe.profiles.clone(),
                    plan: physical,
                    names,
                    id: stmt.query_id.clone(),
                    start: started,
                    user: session.user.clone(),
                    db: session.database.clone().unwrap_or_default(),
                    sql: sql.to_string(),
                };
                Box::pin(crate::profile::ProfiledStream::new(inner, pending))
            } else {
                df.execute_stream().await?
            };
            let stream = if assigned.is_empty() {
                stream
            } else {
                keep_assigned(stream, assigned, session.assigned.clone())?
            };
            let fe2 = fe.clone();
            let session2 = session.clone();
            let schema = stream.schema();
            let mapped =
                stream.map(move |r| r.map_err(|e| map_not_found(&fe2, &session2, e.into()).into()));
            Ok(Output::Rows(Box::pin(RecordBatchStreamAdapter::new(
                schema, mapped,
            ))))
        }
    }
}

/// The columns a query returns, planned but not run (COM_STMT_PREPARE);
/// `None` for statements that return no rows or are not plain queries.
pub(crate) async fn result_schema(
    fe: &Arc<Frontend>,
    session: &Session,
    sql: &str,
) -> Result<Option<SchemaRef>> {
    let Statement::Query(q) = crate::sql::parse(sql)? else {
        return Ok(None);
    };
    let mut parsed = crate::sql::rewrite::parse_for_datafusion(&q)?;
    let hidden = match &mut parsed {
        datafusion::sql::parser::Statement::Statement(s) => crate::sql::assign::rewrite(s)?.len(),
        _ => 0,
    };
    let stmt = Arc::new(statement_ctx(fe, session, None));
    let ctx = planner::statement_context(fe, session, stmt)?;
    let plan = ctx.state().statement_to_plan(parsed).await?;
    if matches!(
        plan,
        LogicalPlan::Dml(_) | LogicalPlan::Ddl(_) | LogicalPlan::Statement(_)
    ) {
        return Ok(None);
    }
    let schema = plan.schema().as_arrow();
    let visible: Vec<usize> = (0..schema.fields().len().saturating_sub(hidden)).collect();
    Ok(Some(Arc::new(schema.project(&visible)?)))
}

/// Takes the hidden trailing columns of `@v := expr` (see `sql::assign`)
/// off a result, keeping their last row's values in `sink`.
fn keep_assigned(
    stream: SendableRecordBatchStream,
    vars: Vec<String>,
    sink: Arc<Mutex<Vec<(String, datafusion::scalar::ScalarValue)>>>,
) -> Result<SendableRecordBatchStream> {
    let schema = stream.schema();
    let visible = schema.fields().len().saturating_sub(vars.len());
    let indices: Vec<usize> = (0..visible).collect();
    let out_schema = Arc::new(schema.project(&indices)?);
    let mapped = stream.map(move |r| {
        let batch = r?;
        if batch.num_rows() > 0 {
            let last = batch.num_rows() - 1;
            let values = vars
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    datafusion::scalar::ScalarValue::try_from_array(batch.column(visible + i), last)
                        .map(|s| (v.clone(), s))
                })
                .collect::<datafusion::error::Result<Vec<_>>>()?;
            *sink.lock().unwrap_or_else(|p| p.into_inner()) = values;
        }
        Ok(batch.project(&indices)?)
    });
    Ok(Box::pin(RecordBatchStreamAdapter::new(out_schema, mapped)))
}

pub(crate) fn table_snapshot(fe: &Frontend, db: &str, name: &str) -> Result<crate::catalog::Table> {
    let state = fe.catalog.read();
    let d = state
        .database(db)
        .ok_or_else(|| TethysError::UnknownDatabase(db.to_string()))?;
    d.table(name)
        .cloned()
        .ok_or_else(|| TethysError::UnknownTable {
            database: d.name.clone(),
            table: name.to_string(),
        })
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
    planner::stats::tablet_stats(fe, &tablets).await
}

pub(crate) fn fmt_time(ms: i64) -> String {
    if ms <= 0 {
        return "NULL".into();
    }
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
        .map(|d| d.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|| "NULL".into())
}

fn fmt_size(bytes: i64) -> String {
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

#[cfg(test)]
mod tests {
    use super::like_match;

    #[test]
    fn like() {
        assert!(like_match("char%", "character_set_client"));
        assert!(like_match("%_size", "batch_size"));
        assert!(!like_match("batch", "batch_size"));
        assert!(like_match("BATCH_SIZE", "batch_size"));
    }
}

//! SHOW TRANSACTION and SHOW [STREAM] LOAD: the transaction manager's records.

use super::*;

/// `ShowTransaction { db, where_sql }`.
pub(super) async fn transactions(
    fe: &Arc<Frontend>,
    sdb: &Option<String>,
    db: Option<String>,
    where_sql: Option<String>,
) -> Result<Output> {
    let db = crate::session::resolve_db(sdb, &db)?;
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

/// `ShowLoad { db, stream, filter }`.
pub(super) async fn loads(
    fe: &Arc<Frontend>,
    sdb: &Option<String>,
    db: Option<String>,
    stream: bool,
    filter: ShowFilter,
) -> Result<Output> {
    let db = crate::session::resolve_db(sdb, &db)?;
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
        let rows =
            txns.iter()
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

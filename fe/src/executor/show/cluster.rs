//! SHOW PROCESSLIST, SHOW BACKENDS and SHOW FRONTENDS.

use super::*;

/// `ShowProcessList`.
pub(super) async fn processlist(fe: &Arc<Frontend>, session: &Session) -> Result<Output> {
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

/// Doris' SHOW BACKENDS columns, in order.
const BACKEND_COLUMNS: [&str; 28] = [
    "BackendId",
    "Host",
    "HeartbeatPort",
    "BePort",
    "HttpPort",
    "BrpcPort",
    "ArrowFlightSqlPort",
    "LastStartTime",
    "LastHeartbeat",
    "Alive",
    "SystemDecommissioned",
    "TabletNum",
    "DataUsedCapacity",
    "TrashUsedCapacity",
    "AvailCapacity",
    "TotalCapacity",
    "UsedPct",
    "MaxDiskUsedPct",
    "RemoteUsedCapacity",
    "Tag",
    "ErrMsg",
    "Version",
    "Status",
    "HeartbeatFailureCounter",
    "CpuCores",
    "Memory",
    "RunningTasks",
    "NodeRole",
];

/// `ShowBackends`: every registered backend as the last heartbeat round
/// found it (asking none of them now, so a dead one costs nothing), sorted
/// by host as Doris sorts them. One port serves heartbeats, the backend
/// service and fragment exchange, so HeartbeatPort, BePort and BrpcPort
/// are the same; Tethys has no Arrow Flight SQL port (-1), trash, remote
/// storage or resource tags beyond the default.
pub(super) async fn backends(fe: &Arc<Frontend>) -> Result<Output> {
    let mut backends = fe.backends.registered();
    backends.sort_by(|a, b| (&a.host, a.rpc_port).cmp(&(&b.host, b.rpc_port)));
    let decommissioned = fe.catalog.read().decommissioned.clone();
    let tablets = fe.catalog.read().replicas_per_backend();
    let rows = backends
        .into_iter()
        .map(|b| {
            let st = fe.backends.status(b.id);
            let used_pct = if st.disk_total_bytes > 0 {
                let used = (st.disk_total_bytes - st.disk_avail_bytes).max(0) as f64;
                format!("{:.2} %", used * 100.0 / st.disk_total_bytes as f64)
            } else {
                "0.00 %".into()
            };
            let port = b.rpc_port.to_string();
            vec![
                b.id.to_string(),
                b.host.clone(),
                port.clone(),
                port.clone(),
                b.http_port.to_string(),
                port,
                "-1".into(),
                fmt_time(st.last_start_ms),
                fmt_time(st.last_heartbeat_ms),
                st.alive.to_string(),
                decommissioned.contains(&b.id).to_string(),
                tablets.get(&b.id).copied().unwrap_or(0).to_string(),
                fmt_size(st.data_used_bytes),
                fmt_size(0),
                fmt_size(st.disk_avail_bytes),
                fmt_size(st.disk_total_bytes),
                used_pct.clone(),
                used_pct,
                fmt_size(0),
                r#"{"location" : "default"}"#.into(),
                st.err_msg.clone(),
                st.version.clone(),
                format!(
                    r#"{{"lastSuccessReportTabletsTime":"{}","lastStreamLoadTime":-1,"isQueryDisabled":false,"isLoadDisabled":false}}"#,
                    fmt_time(st.last_heartbeat_ms)
                ),
                st.failures.to_string(),
                st.cpu_cores.to_string(),
                fmt_size(0),
                "0".into(),
                if st.alive { "mix" } else { "" }.into(),
            ]
        })
        .collect();
    string_rows(&BACKEND_COLUMNS, rows)
}

/// `ShowColocationGroups`: Doris' columns; a group is stable while every
/// tablet of its tables sits on its bucket's backends.
pub(super) fn colocation_groups(fe: &Arc<Frontend>) -> Result<Output> {
    let state = fe.catalog.read();
    let rows = state
        .colocate_groups()
        .iter()
        .map(|g| {
            let stable = g.is_stable();
            vec![
                g.id.clone(),
                g.name.clone(),
                g.tables
                    .iter()
                    .map(|t| t.id.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                g.buckets().to_string(),
                format!("tag.location.default: {}", g.replicas()),
                g.dist_types().join(", "),
                stable.to_string(),
                if stable {
                    String::new()
                } else {
                    "some tablets are not on their bucket's backends (a replica was repaired \
                     elsewhere); joins exchange data"
                        .into()
                },
            ]
        })
        .collect();
    string_rows(
        &[
            "GroupId",
            "GroupName",
            "TableIds",
            "BucketsNum",
            "ReplicaAllocation",
            "DistCols",
            "IsStable",
            "ErrorMsg",
        ],
        rows,
    )
}

/// `ShowFrontends`.
pub(super) fn frontends() -> Result<Output> {
    string_rows(
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
    )
}

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

/// `ShowBackends`.
pub(super) async fn backends(fe: &Arc<Frontend>) -> Result<Output> {
    let backends = fe.backends.registered();
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

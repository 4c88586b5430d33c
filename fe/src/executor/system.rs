//! The cluster's membership: `ALTER SYSTEM ... BACKEND` and the heartbeat
//! rounds that follow backends (every `--heartbeat-interval-second`,
//! Doris' 5 s):
//!
//! ```sql
//! ALTER SYSTEM ADD BACKEND "10.0.0.7:9060";
//! SHOW BACKENDS;  -- Alive once it answers a heartbeat
//! ```
//!
//! A backend that comes back, or that restarted, is caught up (its tablets
//! re-created where missing, its pending data of finished transactions
//! aborted); its HTTP port, which ADD BACKEND does not name, is learnt from
//! its answer and journaled.

use std::sync::Arc;

use tethys_common::{Result, TethysError};

use super::{Output, ok};
use crate::catalog::{BackendInfo, EditOp};
use crate::frontend::Frontend;
use crate::sql::statement::{AlterSystem, BackendAction};

/// How long one backend's heartbeat answer is awaited.
const HEARTBEAT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// `ALTER SYSTEM ... BACKEND`.
pub(super) async fn alter_system(fe: &Arc<Frontend>, a: AlterSystem) -> Result<Output> {
    match a.action {
        BackendAction::Add => {
            for (host, port) in &a.backends {
                fe.catalog.mutate(|state, ids| {
                    if state
                        .backends
                        .values()
                        .any(|b| b.host == *host && b.rpc_port == *port)
                    {
                        return Err(TethysError::Analysis(format!(
                            "Same backend already exists[{host}:{port}]"
                        )));
                    }
                    let backend = BackendInfo {
                        id: ids.alloc(),
                        host: host.clone(),
                        rpc_port: *port,
                        http_port: 0,
                    };
                    Ok((EditOp::AddBackend { backend }, ()))
                })?;
            }
            // Heartbeat at once: SHOW BACKENDS shows it alive right away.
            heartbeat_round(fe).await;
            Ok(ok())
        }
        BackendAction::Drop { force: false } => Err(TethysError::Analysis(
            "It is highly NOT RECOMMENDED to use DROP BACKEND stmt. It is not safe to directly \
             drop a backend. All data on this backend will be discarded permanently. If you \
             insist, use DROPP instead of DROP"
                .into(),
        )),
        BackendAction::Drop { force: true } => {
            for (host, port) in &a.backends {
                fe.catalog.mutate(|state, _| {
                    let id = find(state, host, *port)?;
                    Ok((EditOp::DropBackend { id }, ()))
                })?;
            }
            Ok(ok())
        }
        BackendAction::Decommission => {
            for (host, port) in &a.backends {
                fe.catalog.mutate(|state, _| {
                    let id = find(state, host, *port)?;
                    // Its replicas must fit on the others.
                    let others = fe
                        .backends
                        .alive_ids()
                        .into_iter()
                        .filter(|b| *b != id && !state.decommissioned.contains(b))
                        .count();
                    let need = state
                        .databases
                        .values()
                        .flat_map(|d| d.tables.values())
                        .filter(|t| {
                            t.partitions
                                .iter()
                                .flat_map(|p| &p.tablets)
                                .any(|x| x.replica_on(id).is_some())
                        })
                        .map(|t| t.replication_num())
                        .max()
                        .unwrap_or(0);
                    if need > others {
                        return Err(TethysError::Analysis(format!(
                            "No available backends to move the replicas of backend {host}:{port} \
                             to: a table has {need} replicas and {others} other backend(s) are \
                             alive and not decommissioned"
                        )));
                    }
                    Ok((EditOp::DecommissionBackend { id }, ()))
                })?;
            }
            Ok(ok())
        }
    }
}

/// The id of the backend at `host:port`.
fn find(state: &crate::catalog::CatalogState, host: &str, port: u16) -> Result<i64> {
    state
        .backends
        .values()
        .find(|b| b.host == host && b.rpc_port == port)
        .map(|b| b.id)
        .ok_or_else(|| TethysError::Analysis(format!("backend does not exist[{host}:{port}]")))
}

/// Drops the decommissioned backends that hold no replica any more (the
/// tablet scheduler moved them all).
pub fn finish_decommissions(fe: &Arc<Frontend>) -> Result<()> {
    let done: Vec<i64> = {
        let state = fe.catalog.read();
        let held = state.replicas_per_backend();
        state
            .decommissioned
            .iter()
            .filter(|id| !held.contains_key(id))
            .copied()
            .collect()
    };
    for id in done {
        tracing::info!("backend {id} is decommissioned: every replica moved, dropping it");
        fe.catalog
            .mutate(|_, _| Ok((EditOp::DropBackend { id }, ())))?;
    }
    Ok(())
}

/// One heartbeat round: every backend heartbeated at once, those that came
/// back or restarted caught up, HTTP ports learnt journaled.
pub async fn heartbeat_round(fe: &Arc<Frontend>) {
    let Some(me) = fe.backends.heartbeater() else {
        return;
    };
    let beats = fe.backends.heartbeat_all(&me, HEARTBEAT_TIMEOUT).await;
    for beat in beats {
        let b = &beat.backend;
        let http_port = fe.backends.status(b.id).http_port;
        if http_port != 0 && http_port != b.http_port {
            let backend = BackendInfo {
                http_port,
                ..b.clone()
            };
            if let Err(e) = fe
                .catalog
                .mutate(|_, _| Ok((EditOp::AddBackend { backend }, ())))
            {
                tracing::warn!("recording backend {}'s http port: {e}", b.id);
            }
        }
        // The loads it ran before a restart ended with it.
        if beat.restarted
            && let Err(e) = fe.txn.abort_coordinated_by(b.id).await
        {
            tracing::warn!("aborting the loads of restarted backend {}: {e}", b.id);
        }
        if (beat.came_alive || beat.restarted)
            && let Err(e) = catch_up(fe, b).await
        {
            tracing::warn!(
                "catching up backend {} at {}:{}: {e}",
                b.id,
                b.host,
                b.rpc_port
            );
        }
    }
}

/// Brings a backend that was away up to the catalog.
async fn catch_up(fe: &Arc<Frontend>, be: &BackendInfo) -> Result<()> {
    super::ensure_all_tablets(fe, be).await?;
    fe.txn.reconcile(be).await
}

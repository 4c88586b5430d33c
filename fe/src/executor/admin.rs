//! ADMIN COMPACT, ANALYZE, DROP STATS and KILL.

use super::Fe;

use tethys_common::{Result, TethysError};

use crate::session::Session;
use crate::sql::statement::{AnalyzeTarget, Statement};

use super::{Output, ok, table_snapshot};

/// Runs ADMIN COMPACT, ANALYZE, DROP STATS or KILL.
pub(super) async fn execute(fe: &Fe, session: &Session, stmt: Statement) -> Result<Output> {
    let sdb = &session.database;
    match stmt {
        Statement::AdminRepair { db, table } => {
            let db = crate::session::resolve_db(sdb, &db)?;
            let t = table_snapshot(fe, &db, &table)?;
            fe.repair_table_first(t.id);
            Ok(ok())
        }
        Statement::AdminShowReplicaStatus { db, table, status } => {
            let db = crate::session::resolve_db(sdb, &db)?;
            replica_status(fe, &table_snapshot(fe, &db, &table)?, status)
        }
        Statement::AdminCompact {
            db,
            table,
            partition,
            kind,
        } => {
            let db = crate::session::resolve_db(sdb, &db)?;
            let t = table_snapshot(fe, &db, &table)?;
            if let Some(p) = &partition {
                t.existing_partition(p)?;
            }
            let tablets: Vec<_> = t
                .partitions
                .iter()
                .filter(|p| {
                    partition
                        .as_ref()
                        .is_none_or(|n| n.eq_ignore_ascii_case(&p.name))
                })
                .flat_map(|p| p.tablets.iter().cloned())
                .collect();
            let r = fe.backends.compact_tablets(&tablets, &kind).await?;
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
                AnalyzeTarget::Table { db, name } => {
                    vec![(crate::session::resolve_db(sdb, &db)?, name)]
                }
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
                let a = super::analyze::analyze_table(fe, session, db, table, &columns).await?;
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
        Statement::DropStats { db, table, columns } => {
            let db = crate::session::resolve_db(sdb, &db)?;
            super::analyze::drop_stats(fe, &db, &table, &columns)?;
            Ok(ok())
        }
        Statement::Kill { connection, id } => {
            let target = fe
                .conn(id as u32)
                .ok_or_else(|| TethysError::Analysis(format!("Unknown thread id: {id}")))?;
            target.kill(connection);
            Ok(ok())
        }
        other => Err(super::not_in_family("admin", &other)),
    }
}

/// `ADMIN SHOW REPLICA STATUS`: each replica's status as Doris names it
/// (DEAD: its backend is not alive; VERSION_ERROR: it lacks versions;
/// MISSING: its backend is gone; OK), the ones not OK unless a WHERE says.
fn replica_status(
    fe: &Fe,
    t: &crate::catalog::Table,
    only: Option<(bool, String)>,
) -> Result<Output> {
    let alive: std::collections::BTreeSet<i64> = fe.backends.alive_ids().into_iter().collect();
    let registered = fe.catalog.read().backends.clone();
    let mut rows = vec![];
    for p in &t.partitions {
        for tb in &p.tablets {
            for r in &tb.replicas {
                let status = if !registered.contains_key(&r.backend_id) {
                    "MISSING"
                } else if !alive.contains(&r.backend_id) {
                    "DEAD"
                } else if r.lagging(p.visible_version) {
                    "VERSION_ERROR"
                } else {
                    "OK"
                };
                let shown = match &only {
                    None => status != "OK",
                    Some((true, s)) => status == s,
                    Some((false, s)) => status != s,
                };
                if !shown {
                    continue;
                }
                rows.push(vec![
                    tb.id.to_string(),
                    r.id.to_string(),
                    r.backend_id.to_string(),
                    r.version.to_string(),
                    if r.last_failed_version > 0 {
                        r.last_failed_version
                    } else {
                        -1
                    }
                    .to_string(),
                    r.last_success_version.to_string(),
                    p.committed_version.to_string(),
                    "0".into(),
                    "0".into(),
                    "false".into(),
                    "false".into(),
                    "NORMAL".into(),
                    status.into(),
                ]);
            }
        }
    }
    super::string_rows(
        &[
            "TabletId",
            "ReplicaId",
            "BackendId",
            "Version",
            "LastFailedVersion",
            "LastSuccessVersion",
            "CommittedVersion",
            "SchemaHash",
            "VersionNum",
            "IsBad",
            "IsUserDrop",
            "State",
            "Status",
        ],
        rows,
    )
}

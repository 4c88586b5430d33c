//! Tablets on backends for the catalog's partitions: created after the
//! catalog change is logged, idempotently, and again at FE start for every
//! tablet the catalog lists, so a crash between the two steps heals itself.

use std::collections::BTreeMap;
use std::sync::Arc;

use tethys_common::{Result, TethysError};
use tethys_proto::{CreateTabletsRequest, DropTabletsRequest, TabletSpec};

use crate::catalog::*;
use crate::frontend::Frontend;

/// Buckets used for `BUCKETS AUTO` or no DISTRIBUTED clause (Doris' default seed).
pub const DEFAULT_BUCKETS: u32 = 10;

pub(super) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Picks the backend for a new tablet (round-robin over registered backends).
fn pick_backend(state: &CatalogState, seq: i64) -> Result<i64> {
    let ids: Vec<i64> = state.backends.keys().copied().collect();
    if ids.is_empty() {
        return Err(TethysError::Analysis("no backend is registered".into()));
    }
    Ok(ids[(seq as usize) % ids.len()])
}

pub(super) fn new_partition(
    state: &CatalogState,
    ids: &mut IdGen,
    name: &str,
    range: Option<(Bound, Bound)>,
    buckets: u32,
) -> Result<Partition> {
    let id = ids.alloc();
    let mut tablets = vec![];
    for _ in 0..buckets {
        let tid = ids.alloc();
        tablets.push(TabletRef {
            id: tid,
            backend_id: pick_backend(state, tid)?,
        });
    }
    Ok(Partition {
        id,
        name: name.to_string(),
        range,
        buckets,
        tablets,
        visible_version: tethys_common::config::INITIAL_VERSION,
        visible_version_time: now_ms(),
        committed_version: tethys_common::config::INITIAL_VERSION,
    })
}

/// Creates the tablets of `partitions` on their backends.
pub async fn create_tablets(
    fe: &Arc<Frontend>,
    table: &Table,
    partitions: &[Partition],
) -> Result<()> {
    let backends = fe.catalog.read().backends.clone();
    let mut per_be: BTreeMap<i64, Vec<TabletSpec>> = BTreeMap::new();
    for p in partitions {
        for t in &p.tablets {
            per_be.entry(t.backend_id).or_default().push(TabletSpec {
                tablet_id: t.id,
                table_id: table.id,
                partition_id: p.id,
                schema: Some(table.schema.to_pb()),
                initial_version: tethys_common::config::INITIAL_VERSION,
            });
        }
    }
    for (be, tablets) in per_be {
        let info = backends
            .get(&be)
            .ok_or_else(|| TethysError::Internal(format!("backend {be} is not registered")))?;
        let c = fe.backends.client(info)?;
        c.create_tablets(CreateTabletsRequest { tablets }).await?;
    }
    Ok(())
}

/// Drops tablets from their backends (best effort: a backend that misses it
/// keeps an orphan tablet no query reads).
pub async fn drop_tablets(fe: &Arc<Frontend>, partitions: &[Partition]) {
    let backends = fe.catalog.read().backends.clone();
    let mut per_be: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for p in partitions {
        for t in &p.tablets {
            per_be.entry(t.backend_id).or_default().push(t.id);
        }
    }
    for (be, ids) in per_be {
        if let Some(info) = backends.get(&be)
            && let Ok(c) = fe.backends.client(info)
        {
            let _ = c.drop_tablets(DropTabletsRequest { tablet_ids: ids }).await;
        }
    }
}

/// Re-creates every tablet the catalog lists (idempotent on backends).
pub async fn ensure_all_tablets(fe: &Arc<Frontend>) -> Result<()> {
    let tables: Vec<Table> = fe
        .catalog
        .read()
        .databases
        .values()
        .flat_map(|d| d.tables.values().cloned())
        .collect();
    for t in tables {
        create_tablets(fe, &t, &t.partitions).await?;
    }
    Ok(())
}

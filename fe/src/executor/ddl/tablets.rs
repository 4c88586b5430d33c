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

/// Where new tablets go: the alive backends, each new tablet's replicas on
/// distinct ones holding the fewest replicas (ties to the lowest id), so
/// replicas spread evenly and a backend that joins gets the next ones.
pub(super) struct Placement {
    tablets: BTreeMap<i64, usize>,
    /// A colocation group's backends per bucket: bucket `b` of every new
    /// partition goes to `sequence[b]` (`catalog/colocation.rs`).
    sequence: Option<Vec<Vec<i64>>>,
}

impl Placement {
    /// The backends of `alive` that `state` registers, with the tablets
    /// each holds.
    pub(super) fn new(state: &CatalogState, alive: &[i64]) -> Placement {
        let held = state.replicas_per_backend();
        let tablets = alive
            .iter()
            .filter(|id| state.backends.contains_key(id))
            .map(|id| (*id, held.get(id).copied().unwrap_or(0)))
            .collect();
        Placement {
            tablets,
            sequence: None,
        }
    }

    /// The placement for new partitions of `table` (of `db`): its
    /// colocation group's sequence when it has one.
    pub(super) fn for_table(
        state: &CatalogState,
        alive: &[i64],
        db: &Database,
        table: &Table,
    ) -> Placement {
        Placement::new(state, alive).following(state.sequence_of(db, table))
    }

    /// This placement, putting bucket `b` on `sequence[b]` when given.
    pub(super) fn following(mut self, sequence: Option<Vec<Vec<i64>>>) -> Placement {
        self.sequence = sequence;
        self
    }

    /// Backends new tablets may go to.
    pub(super) fn backends(&self) -> usize {
        self.tablets.len()
    }

    /// The backends of bucket `bucket`'s `replicas` replicas.
    fn pick(&mut self, bucket: usize, replicas: usize) -> Result<Vec<i64>> {
        if let Some(seq) = &self.sequence {
            let on = seq.get(bucket).cloned().unwrap_or_default();
            if on.len() != replicas {
                return Err(TethysError::Internal(format!(
                    "colocation group places bucket {bucket} on {on:?}, not on {replicas} backends"
                )));
            }
            if let Some(b) = on.iter().find(|b| !self.tablets.contains_key(b)) {
                return Err(TethysError::Backend(format!(
                    "backend {b} of the colocation group's bucket {bucket} is not alive"
                )));
            }
            return Ok(on);
        }
        if replicas == 0 || replicas > self.tablets.len() {
            return Err(not_enough_backends(replicas, self.tablets.len()));
        }
        let mut by_load: Vec<(usize, i64)> = self.tablets.iter().map(|(id, n)| (*n, *id)).collect();
        by_load.sort_unstable();
        let chosen: Vec<i64> = by_load.iter().take(replicas).map(|(_, id)| *id).collect();
        for id in &chosen {
            if let Some(n) = self.tablets.get_mut(id) {
                *n += 1;
            }
        }
        Ok(chosen)
    }
}

/// Doris' error for a table asking more replicas than there are alive
/// backends.
pub(super) fn not_enough_backends(replicas: usize, alive: usize) -> TethysError {
    TethysError::Analysis(format!(
        "Failed to find enough backend, please check the replication num,replication tag and storage medium. \
         Create {replicas} replicas, but only {alive} backend(s) are available"
    ))
}

pub(super) fn new_partition(
    place: &mut Placement,
    ids: &mut IdGen,
    name: &str,
    range: Option<(Bound, Bound)>,
    buckets: u32,
    replicas: usize,
) -> Result<Partition> {
    let id = ids.alloc();
    let mut tablets = vec![];
    let version = tethys_common::config::INITIAL_VERSION;
    for bucket in 0..buckets as usize {
        let tid = ids.alloc();
        tablets.push(TabletRef {
            id: tid,
            replicas: place
                .pick(bucket, replicas)?
                .into_iter()
                .map(|b| Replica::new(ids.alloc(), b, version))
                .collect(),
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
            for b in t.backend_ids() {
                per_be.entry(b).or_default().push(TabletSpec {
                    tablet_id: t.id,
                    table_id: table.id,
                    partition_id: p.id,
                    schema: Some(table.schema.to_pb()),
                    initial_version: tethys_common::config::INITIAL_VERSION,
                });
            }
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
            for b in t.backend_ids() {
                per_be.entry(b).or_default().push(t.id);
            }
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

/// Re-creates every tablet the catalog lists on backend `be` (idempotent
/// there): at FE start for each alive backend, and when one comes back.
pub async fn ensure_all_tablets(fe: &Arc<Frontend>, be: &BackendInfo) -> Result<()> {
    let tables: Vec<Table> = fe
        .catalog
        .read()
        .databases
        .values()
        .flat_map(|d| d.tables.values().cloned())
        .collect();
    let mut specs = vec![];
    for t in &tables {
        for p in &t.partitions {
            for tablet in p.tablets.iter().filter(|x| x.replica_on(be.id).is_some()) {
                specs.push(TabletSpec {
                    tablet_id: tablet.id,
                    table_id: t.id,
                    partition_id: p.id,
                    schema: Some(t.schema.to_pb()),
                    initial_version: tethys_common::config::INITIAL_VERSION,
                });
            }
        }
    }
    if specs.is_empty() {
        return Ok(());
    }
    let c = fe.backends.client(be)?;
    for chunk in specs.chunks(1024) {
        c.create_tablets(CreateTabletsRequest {
            tablets: chunk.to_vec(),
        })
        .await?;
    }
    Ok(())
}

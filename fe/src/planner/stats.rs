//! Table statistics for the optimizer: rows (and stored bytes) per
//! partition, asked of the backends and cached by the partition's visible
//! version, so a table is asked again only after a load made a new version.
//!
//! DataFusion uses them to put the smaller input of a join on the build
//! side and to broadcast (collect) small build sides, which in turn is what
//! lets a join's runtime filter reach the probe scan as one simple predicate.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use tethys_common::Result;
use tethys_proto::{TabletStat, TabletStatsRequest};

use crate::catalog::{Table, TabletRef};
use crate::frontend::Frontend;

/// Rows of one partition at one visible version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionStats {
    pub version: i64,
    pub rows: u64,
}

/// Per-partition statistics, shared by every statement of the FE.
#[derive(Debug, Default)]
pub struct StatsCache {
    partitions: Mutex<HashMap<i64, PartitionStats>>,
}

impl StatsCache {
    fn get(&self, partition_id: i64, version: i64) -> Option<PartitionStats> {
        let m = self.partitions.lock().unwrap_or_else(|p| p.into_inner());
        m.get(&partition_id)
            .copied()
            .filter(|s| s.version == version)
    }

    fn put(&self, partition_id: i64, s: PartitionStats) {
        let mut m = self.partitions.lock().unwrap_or_else(|p| p.into_inner());
        m.insert(partition_id, s);
    }
}

/// Rows per partition id of `table` at the partitions' visible versions.
/// Partitions whose backends cannot be asked are left out (unknown), so a
/// down backend costs the optimizer an estimate, never the query.
pub async fn table_rows(fe: &Arc<Frontend>, table: &Table) -> HashMap<i64, u64> {
    let mut out = HashMap::new();
    let mut missing = vec![];
    for p in &table.partitions {
        match fe.stats.get(p.id, p.visible_version) {
            Some(s) => {
                out.insert(p.id, s.rows);
            }
            None => missing.push(p),
        }
    }
    if missing.is_empty() {
        return out;
    }
    let tablets: Vec<TabletRef> = missing
        .iter()
        .flat_map(|p| p.tablets.iter().cloned())
        .collect();
    let Ok(stats) = tablet_stats(fe, &tablets).await else {
        return out;
    };
    for p in missing {
        let rows: Option<u64> = p
            .tablets
            .iter()
            .map(|t| {
                stats
                    .get(&t.id)
                    .filter(|s| s.found)
                    .map(|s| s.row_count.max(0) as u64)
            })
            .sum();
        if let Some(rows) = rows {
            fe.stats.put(
                p.id,
                PartitionStats {
                    version: p.visible_version,
                    rows,
                },
            );
            out.insert(p.id, rows);
        }
    }
    out
}

/// Asks each backend for the stats of its tablets among `tablets`.
pub async fn tablet_stats(
    fe: &Arc<Frontend>,
    tablets: &[TabletRef],
) -> Result<HashMap<i64, TabletStat>> {
    let backends = fe.catalog.read().backends.clone();
    let mut per_be: BTreeMap<i64, Vec<i64>> = Default::default();
    for tb in tablets {
        per_be.entry(tb.backend_id).or_default().push(tb.id);
    }
    let mut out = HashMap::new();
    for (be, ids) in per_be {
        let Some(info) = backends.get(&be) else {
            continue;
        };
        let c = fe.pool.get(info)?;
        let r = c
            .rpc()
            .tablet_stats(TabletStatsRequest { tablet_ids: ids })
            .await
            .map_err(|s| c.err(s))?;
        for s in r.into_inner().tablets {
            out.insert(s.tablet_id, s);
        }
    }
    Ok(out)
}

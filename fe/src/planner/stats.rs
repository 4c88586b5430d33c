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
use tethys_common::backend_client::BackendClient;
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

/// Calls `call` once per backend holding some of `tablets`, with a client
/// of it and the ids of its tablets; the answers in backend order.
pub(crate) async fn per_backend<T, F, Fut>(
    fe: &Arc<Frontend>,
    tablets: &[TabletRef],
    mut call: F,
) -> Result<Vec<T>>
where
    F: FnMut(Arc<BackendClient>, Vec<i64>) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let backends = fe.catalog.read().backends.clone();
    let mut per_be: BTreeMap<i64, Vec<i64>> = Default::default();
    for tb in tablets {
        per_be.entry(tb.backend_id).or_default().push(tb.id);
    }
    let mut out = Vec::with_capacity(per_be.len());
    for (be, ids) in per_be {
        let Some(info) = backends.get(&be) else {
            continue;
        };
        out.push(call(fe.pool.get(info)?, ids).await?);
    }
    Ok(out)
}

/// Asks each backend for the stats of its tablets among `tablets`.
pub async fn tablet_stats(
    fe: &Arc<Frontend>,
    tablets: &[TabletRef],
) -> Result<HashMap<i64, TabletStat>> {
    let answers = per_backend(fe, tablets, |c, ids| async move {
        let r = c
            .tablet_stats(TabletStatsRequest { tablet_ids: ids })
            .await?;
        Ok(r.tablets)
    })
    .await?;
    Ok(answers
        .into_iter()
        .flatten()
        .map(|s| (s.tablet_id, s))
        .collect())
}

/// Compacts `tablets` on their backends (`kind`: cumulative, base or full,
/// as ADMIN COMPACT spells it) and adds up what the backends did.
pub async fn compact_tablets(
    fe: &Arc<Frontend>,
    tablets: &[TabletRef],
    kind: &str,
) -> Result<tethys_proto::CompactResponse> {
    use tethys_proto::CompactionType;
    let kind = match kind.to_ascii_lowercase().as_str() {
        "cumulative" => CompactionType::Cumulative,
        "base" => CompactionType::Base,
        "full" => CompactionType::Full,
        other => {
            return Err(tethys_common::TethysError::Analysis(format!(
                "unknown compaction type '{other}': cumulative, base or full"
            )));
        }
    };
    let answers = per_backend(fe, tablets, |c, ids| async move {
        let req = tethys_proto::CompactRequest {
            tablet_ids: ids,
            kind: kind.into(),
        };
        c.compact(req).await
    })
    .await?;
    let mut total = tethys_proto::CompactResponse::default();
    for r in answers {
        total.compactions += r.compactions;
        total.input_rowsets += r.input_rowsets;
        total.input_rows += r.input_rows;
        total.output_rows += r.output_rows;
    }
    Ok(total)
}

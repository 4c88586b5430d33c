//! The FE's one way to reach its backends: the typed clients of the
//! registered backends (every `BackendService` call is a method of
//! [`BackendClient`], with one error mapping), fan-out over the backends
//! holding some tablets, and the table statistics the optimizer asks of them.
//!
//! Statistics are rows (and stored bytes) per partition, cached by the
//! partition's visible version, so a table is asked again only after a load
//! made a new version. DataFusion uses them to put the smaller input of a
//! join on the build side and to broadcast (collect) small build sides,
//! which in turn is what lets a join's runtime filter reach the probe scan
//! as one simple predicate.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use tethys_common::worker_channels::WorkerChannels;

use tethys_common::Result;
use tethys_common::backend_client::{BackendClient, BackendInfo, BackendPool};
use tethys_proto::{TabletStat, TabletStatsRequest};

use crate::catalog::{Catalog, Table, TabletRef};

mod liveness;
pub mod workers;
pub use liveness::{BackendStatus, Beat, Heartbeater};

/// Rows of one partition at one visible version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionStats {
    pub version: i64,
    pub rows: u64,
}

/// The FE's backends: every call the FE makes to a backend goes through
/// here (or through the typed [`BackendClient`] it hands out).
#[derive(Debug)]
pub struct Backends {
    catalog: Arc<Catalog>,
    pool: Arc<BackendPool>,
    /// Rows per partition id, as the backends last reported them.
    rows: Mutex<HashMap<i64, PartitionStats>>,
    /// What the last heartbeats said, by backend id (`liveness.rs`).
    status: Mutex<HashMap<i64, BackendStatus>>,
    /// Who this FE's heartbeats say it is (set when the FE opens).
    me: Mutex<Option<Heartbeater>>,
    /// The channels distributed plans reach the backends' workers over.
    workers: WorkerChannels,
}

impl Backends {
    pub fn new(catalog: Arc<Catalog>) -> Self {
        Backends {
            catalog,
            pool: Default::default(),
            rows: Default::default(),
            status: Default::default(),
            me: Default::default(),
            workers: Default::default(),
        }
    }

    /// The channels to the backends' workers, one per backend, shared by
    /// every query (`tethys_common::worker_channels`).
    pub fn worker_channels(&self) -> WorkerChannels {
        self.workers.clone()
    }

    /// The connection pool, for the write path ([`tethys_common::ship`]).
    pub fn pool(&self) -> Arc<BackendPool> {
        self.pool.clone()
    }

    /// The client of a backend.
    pub fn client(&self, info: &BackendInfo) -> Result<Arc<BackendClient>> {
        self.pool.get(info)
    }

    /// The registered backends, by id.
    pub fn registered(&self) -> Vec<BackendInfo> {
        self.catalog.read().backends.values().cloned().collect()
    }

    fn cached_rows(&self, partition_id: i64, version: i64) -> Option<u64> {
        let m = self.rows.lock().unwrap_or_else(|p| p.into_inner());
        m.get(&partition_id)
            .filter(|s| s.version == version)
            .map(|s| s.rows)
    }

    fn cache_rows(&self, partition_id: i64, s: PartitionStats) {
        let mut m = self.rows.lock().unwrap_or_else(|p| p.into_inner());
        m.insert(partition_id, s);
    }

    /// Rows per partition id of `table` at the partitions' visible versions.
    /// Partitions whose backends cannot be asked are left out (unknown), so a
    /// down backend costs the optimizer an estimate, never the query.
    pub async fn table_rows(&self, table: &Table) -> HashMap<i64, u64> {
        let mut out = HashMap::new();
        let mut missing = vec![];
        for p in &table.partitions {
            match self.cached_rows(p.id, p.visible_version) {
                Some(rows) => {
                    out.insert(p.id, rows);
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
        let Ok(stats) = self.tablet_stats(&tablets).await else {
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
                self.cache_rows(
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
    /// of it and the ids of its tablets; the answers by backend id.
    /// `every`: each replica on an alive backend (compaction); otherwise
    /// one replica per tablet, the most recent on an alive backend
    /// (statistics).
    pub async fn per_backend<T, F, Fut>(
        &self,
        tablets: &[TabletRef],
        every: bool,
        mut call: F,
    ) -> Result<Vec<(i64, T)>>
    where
        F: FnMut(Arc<BackendClient>, Vec<i64>) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let backends = self.catalog.read().backends.clone();
        let alive: std::collections::BTreeSet<i64> = self.alive_ids().into_iter().collect();
        let mut per_be: BTreeMap<i64, Vec<i64>> = Default::default();
        for tb in tablets {
            let up = tb.replicas.iter().filter(|r| alive.contains(&r.backend_id));
            let chosen: Vec<i64> = if every {
                up.map(|r| r.backend_id).collect()
            } else {
                up.max_by_key(|r| (r.version, -r.backend_id))
                    .map(|r| r.backend_id)
                    .into_iter()
                    .collect()
            };
            for b in chosen {
                per_be.entry(b).or_default().push(tb.id);
            }
        }
        let mut out = Vec::with_capacity(per_be.len());
        for (be, ids) in per_be {
            let Some(info) = backends.get(&be) else {
                continue;
            };
            out.push((be, call(self.pool.get(info)?, ids).await?));
        }
        Ok(out)
    }

    /// Asks each backend for the stats of its tablets among `tablets`.
    pub async fn tablet_stats(&self, tablets: &[TabletRef]) -> Result<HashMap<i64, TabletStat>> {
        let answers = self
            .per_backend(tablets, false, |c, ids| async move {
                let r = c
                    .tablet_stats(TabletStatsRequest { tablet_ids: ids })
                    .await?;
                Ok(r.tablets)
            })
            .await?;
        Ok(answers
            .into_iter()
            .flat_map(|(_, s)| s)
            .map(|s| (s.tablet_id, s))
            .collect())
    }

    /// Asks every alive backend for the stats of its replicas of `tablets`,
    /// by (tablet id, backend id).
    pub async fn replica_stats(
        &self,
        tablets: &[TabletRef],
    ) -> Result<HashMap<(i64, i64), TabletStat>> {
        let answers = self
            .per_backend(tablets, true, |c, ids| async move {
                // A backend that died since the last heartbeat reports nothing.
                Ok(c.tablet_stats(TabletStatsRequest { tablet_ids: ids })
                    .await
                    .map(|r| r.tablets)
                    .unwrap_or_default())
            })
            .await?;
        Ok(answers
            .into_iter()
            .flat_map(|(be, s)| s.into_iter().map(move |s| ((s.tablet_id, be), s)))
            .collect())
    }

    /// Compacts `tablets` on their backends (`kind`: cumulative, base or full,
    /// as ADMIN COMPACT spells it) and adds up what the backends did.
    pub async fn compact_tablets(
        &self,
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
        let answers = self
            .per_backend(tablets, true, |c, ids| async move {
                let req = tethys_proto::CompactRequest {
                    tablet_ids: ids,
                    kind: kind.into(),
                };
                c.compact(req).await
            })
            .await?;
        let mut total = tethys_proto::CompactResponse::default();
        for (_, r) in answers {
            total.compactions += r.compactions;
            total.input_rowsets += r.input_rowsets;
            total.input_rows += r.input_rows;
            total.output_rows += r.output_rows;
        }
        Ok(total)
    }
}

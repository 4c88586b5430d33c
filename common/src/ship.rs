//! The one write path: `INSERT INTO t SELECT ...` (FE), a Stream Load and a
//! group commit (coordinator BE) all hand rows already in the table's schema
//! to a [`RowShipper`]. It routes them to tablets with the table's
//! [`Router`] (partition by range, bucket by hash), buffers them per tablet
//! and ships each buffer to every replica of the tablet as pending rowset
//! data of one transaction. A replica whose write fails is skipped from then
//! on; the replicas written are reported (`RowShipper::writes`) so only they
//! get the load's version; the load fails only when a tablet
//! can no longer reach a majority of its replicas (`replicas.rs`).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::RecordBatch;
use tethys_proto::{LoadPlanPb, WriteRequest};

use crate::backend_client::{BackendInfo, BackendPool};
use crate::config::SEGMENT_FLUSH_ROWS;
use crate::replicas::ReplicaWrites;
use crate::routing::{Router, TabletRoute};
use crate::{Result, TethysError};

/// Rows buffered across tablets before the largest buffers are shipped.
const MAX_BUFFERED_ROWS: usize = 1 << 20;

/// Tablet writes kept in flight while the caller goes on producing rows:
/// parsing and segment writing overlap on different cores.
fn max_in_flight() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, 4)
}

/// Rows that fit no partition fail an INSERT (as in Doris' strict mode).
pub fn refuse_unroutable(rejected: &[(usize, String)]) -> Result<()> {
    match rejected.first() {
        Some((_, reason)) => Err(TethysError::DataQuality(format!(
            "Insert has filtered data in strict mode: {reason}"
        ))),
        None => Ok(()),
    }
}

/// Routes the rows of one transaction to tablets and ships them to their
/// backends.
pub struct RowShipper {
    pool: Arc<BackendPool>,
    txn_id: i64,
    backends: HashMap<i64, BackendInfo>,
    router: Router,
    buffers: HashMap<i64, (Vec<RecordBatch>, usize, TabletRoute)>,
    /// Every tablet shipped to, for the final quorum check.
    written: HashMap<i64, TabletRoute>,
    /// Replicas whose writes failed.
    pub writes: ReplicaWrites,
    buffered: usize,
    /// Partitions that received rows.
    pub touched: BTreeSet<i64>,
    /// Rows routed to a tablet.
    pub loaded: u64,
    /// Milliseconds spent sending rows to backends (writes overlap, so
    /// this can exceed the wall time).
    pub write_ms: u64,
    /// Replica writes: (tablet, backend, milliseconds or the error).
    in_flight: tokio::task::JoinSet<(i64, i64, Result<u64>)>,
    max_in_flight: usize,
    /// What the rows are (`merge_type: DELETE`, `partial_columns`).
    pub rows: WriteRequest,
}

impl RowShipper {
    /// A shipper for transaction `txn_id` into the table of `plan`, routing
    /// with `router` (the plan's, possibly limited to some partitions).
    pub fn new(
        pool: Arc<BackendPool>,
        txn_id: i64,
        plan: &LoadPlanPb,
        router: Router,
        rows: WriteRequest,
    ) -> Self {
        RowShipper {
            pool,
            txn_id,
            backends: plan
                .backends
                .iter()
                .map(|b| {
                    let info = BackendInfo {
                        id: b.id,
                        host: b.host.clone(),
                        rpc_port: b.rpc_port as u16,
                        http_port: b.http_port as u16,
                    };
                    (b.id, info)
                })
                .collect(),
            router,
            buffers: HashMap::new(),
            written: HashMap::new(),
            writes: ReplicaWrites::default(),
            buffered: 0,
            touched: BTreeSet::new(),
            loaded: 0,
            write_ms: 0,
            in_flight: tokio::task::JoinSet::new(),
            max_in_flight: max_in_flight(),
            rows,
        }
    }

    /// Routes and buffers a batch; returns the rows that fit no partition as
    /// (row index, reason). Full buffers are shipped.
    pub async fn add(&mut self, batch: &RecordBatch) -> Result<Vec<(usize, String)>> {
        let (routed, rejected) = self.router.route(batch)?;
        for r in routed {
            self.touched.insert(r.partition_id);
            self.loaded += r.batch.num_rows() as u64;
            let tablet_id = r.tablet.tablet_id;
            let e = self
                .buffers
                .entry(tablet_id)
                .or_insert_with(|| (vec![], 0, r.tablet));
            e.1 += r.batch.num_rows();
            self.buffered += r.batch.num_rows();
            e.0.push(r.batch);
            if e.1 >= SEGMENT_FLUSH_ROWS {
                self.ship(tablet_id).await?;
            }
        }
        while self.buffered > MAX_BUFFERED_ROWS {
            let Some((&tid, _)) = self.buffers.iter().max_by_key(|(_, v)| v.1) else {
                break;
            };
            self.ship(tid).await?;
        }
        Ok(rejected)
    }

    /// Starts shipping one tablet's buffer to each of its replicas not
    /// failed yet; waits for earlier writes when enough are in flight.
    async fn ship(&mut self, tablet_id: i64) -> Result<()> {
        let Some((batches, n, route)) = self.buffers.remove(&tablet_id) else {
            return Ok(());
        };
        self.buffered -= n;
        self.writes
            .check(tablet_id, &route.backends, route.replica_num)?;
        for &backend_id in &route.backends {
            if self.writes.is_failed(tablet_id, backend_id) {
                continue;
            }
            let info = self.backends.get(&backend_id).ok_or_else(|| {
                TethysError::Internal(format!("backend {backend_id} is not in the load plan"))
            })?;
            let client = self.pool.get(info)?;
            while self.in_flight.len() >= self.max_in_flight {
                self.join_one().await?;
            }
            let (txn_id, rows, batches) = (self.txn_id, self.rows.clone(), batches.clone());
            self.in_flight.spawn(async move {
                let t = Instant::now();
                let r = client.write(txn_id, tablet_id, batches, &rows).await;
                (
                    tablet_id,
                    backend_id,
                    r.map(|_| t.elapsed().as_millis() as u64),
                )
            });
        }
        self.written.insert(tablet_id, route);
        Ok(())
    }

    /// Waits for one replica write. A failed one is recorded; the load
    /// fails when its tablet can no longer reach a majority (with a single
    /// replica: the write's own error).
    async fn join_one(&mut self) -> Result<()> {
        let Some(r) = self.in_flight.join_next().await else {
            return Ok(());
        };
        let (tablet_id, backend_id, r) =
            r.map_err(|e| TethysError::Internal(format!("tablet write task: {e}")))?;
        match r {
            Ok(ms) => {
                self.write_ms += ms;
                self.writes.succeed(tablet_id, backend_id);
            }
            Err(TethysError::Cancelled) => return Err(TethysError::Cancelled),
            Err(e) => {
                let route = self.written.get(&tablet_id).cloned();
                let Some(route) = route.filter(|r| r.replica_num > 1) else {
                    return Err(e);
                };
                tracing::warn!("replica of tablet {tablet_id} on backend {backend_id}: {e}");
                self.writes.fail(tablet_id, backend_id, e.to_string());
                self.writes
                    .check(tablet_id, &route.backends, route.replica_num)?;
            }
        }
        Ok(())
    }

    /// Waits for the writes in flight, ignoring their outcome (the load is
    /// being aborted).
    pub async fn drain(&mut self) {
        while self.in_flight.join_next().await.is_some() {}
    }

    /// Ships everything still buffered and waits for every write; fails
    /// unless each tablet written reached a majority of its replicas.
    pub async fn finish(&mut self) -> Result<()> {
        let ids: Vec<i64> = self.buffers.keys().copied().collect();
        for id in ids {
            self.ship(id).await?;
        }
        while !self.in_flight.is_empty() {
            self.join_one().await?;
        }
        for (id, route) in &self.written {
            self.writes.check(*id, &route.backends, route.replica_num)?;
        }
        Ok(())
    }
}

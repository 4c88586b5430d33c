//! The one write path: `INSERT INTO t SELECT ...` (FE), a Stream Load and a
//! group commit (coordinator BE) all hand rows already in the table's schema
//! to a [`RowShipper`]. It routes them to tablets with the table's
//! [`Router`] (partition by range, bucket by hash), buffers them per tablet
//! and ships each buffer to the tablet's backend as pending rowset data of
//! one transaction. Replicas, when they come, are added here.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::RecordBatch;
use tethys_proto::{LoadPlanPb, WriteRequest};

use crate::backend_client::{BackendInfo, BackendPool};
use crate::config::SEGMENT_FLUSH_ROWS;
use crate::routing::Router;
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
    buffers: HashMap<i64, (Vec<RecordBatch>, usize, i64)>,
    buffered: usize,
    /// Partitions that received rows.
    pub touched: BTreeSet<i64>,
    /// Rows routed to a tablet.
    pub loaded: u64,
    /// Milliseconds spent sending rows to backends (writes overlap, so
    /// this can exceed the wall time).
    pub write_ms: u64,
    in_flight: tokio::task::JoinSet<Result<u64>>,
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
            let e = self
                .buffers
                .entry(r.tablet_id)
                .or_insert_with(|| (vec![], 0, r.backend_id));
            e.1 += r.batch.num_rows();
            self.buffered += r.batch.num_rows();
            e.0.push(r.batch);
            if e.1 >= SEGMENT_FLUSH_ROWS {
                self.ship(r.tablet_id).await?;
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

    /// Starts shipping one tablet's buffer; waits for an earlier write when
    /// enough are in flight. A failed write fails the load.
    async fn ship(&mut self, tablet_id: i64) -> Result<()> {
        let Some((batches, n, backend_id)) = self.buffers.remove(&tablet_id) else {
            return Ok(());
        };
        self.buffered -= n;
        let info = self.backends.get(&backend_id).ok_or_else(|| {
            TethysError::Internal(format!("backend {backend_id} is not in the load plan"))
        })?;
        let client = self.pool.get(info)?;
        while self.in_flight.len() >= self.max_in_flight {
            self.join_one().await?;
        }
        let (txn_id, rows) = (self.txn_id, self.rows.clone());
        self.in_flight.spawn(async move {
            let t = Instant::now();
            client.write(txn_id, tablet_id, batches, &rows).await?;
            Ok(t.elapsed().as_millis() as u64)
        });
        Ok(())
    }

    async fn join_one(&mut self) -> Result<()> {
        if let Some(r) = self.in_flight.join_next().await {
            let ms = r.map_err(|e| TethysError::Internal(format!("tablet write task: {e}")))??;
            self.write_ms += ms;
        }
        Ok(())
    }

    /// Waits for the writes in flight, ignoring their outcome (the load is
    /// being aborted).
    pub async fn drain(&mut self) {
        while self.in_flight.join_next().await.is_some() {}
    }

    /// Ships everything still buffered and waits for every write.
    pub async fn finish(&mut self) -> Result<()> {
        let ids: Vec<i64> = self.buffers.keys().copied().collect();
        for id in ids {
            self.ship(id).await?;
        }
        while !self.in_flight.is_empty() {
            self.join_one().await?;
        }
        Ok(())
    }
}

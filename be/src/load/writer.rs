//! `TabletWriter`: the write side of a load. Rows already in the table's
//! schema are routed to tablets (partition by range, bucket by hash),
//! buffered per tablet and sent to the tablet's backend as pending rowset
//! data of one transaction. Both a Stream Load and a group commit use it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::RecordBatch;
use tethys_common::backend_client::BackendInfo;
use tethys_common::config::SEGMENT_FLUSH_ROWS;
use tethys_common::routing::{BucketRule, PartitionRoute, Router};
use tethys_common::{Result, TethysError};
use tethys_proto::LoadPlanPb;

use crate::service::Backend;

/// Rows buffered across tablets before the largest buffers are written.
const MAX_BUFFERED_ROWS: usize = 1 << 20;

/// Tablet writes a load keeps in flight while it goes on reading and
/// converting: parsing and segment writing overlap on different cores.
fn max_in_flight() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, 4)
}

/// The router of a load plan, limited to the named partitions when given.
pub fn router_of(plan: &LoadPlanPb, only: Option<&Vec<String>>) -> Result<Router> {
    let parse = |s: &Option<String>| s.as_ref().and_then(|v| v.parse::<i128>().ok());
    if let Some(names) = only {
        for n in names {
            if !plan
                .partitions
                .iter()
                .any(|p| p.name.eq_ignore_ascii_case(n))
            {
                return Err(TethysError::Analysis(format!("unknown partition: {n}")));
            }
        }
    }
    let partitions = plan
        .partitions
        .iter()
        .filter(|p| only.is_none_or(|names| names.iter().any(|n| n.eq_ignore_ascii_case(&p.name))))
        .map(|p| PartitionRoute {
            partition_id: p.partition_id,
            lower: parse(&p.lower),
            upper: parse(&p.upper),
            tablets: p
                .tablet_ids
                .iter()
                .copied()
                .zip(p.backend_ids.iter().copied())
                .collect(),
        })
        .collect();
    let buckets = if plan.random_buckets {
        BucketRule::Random
    } else {
        BucketRule::Hash(plan.hash_columns.iter().map(|c| *c as usize).collect())
    };
    let pc = (plan.partition_column >= 0).then_some(plan.partition_column as usize);
    Ok(Router::new(pc, partitions, buckets))
}

/// Writes the rows of one transaction to tablets.
pub struct TabletWriter {
    be: Arc<Backend>,
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
    pub rows: tethys_proto::WriteRequest,
}

impl TabletWriter {
    pub fn new(be: Arc<Backend>, txn_id: i64, plan: &LoadPlanPb, router: Router) -> Self {
        TabletWriter {
            be,
            txn_id,
            backends: plan
                .backends
                .iter()
                .map(|b| {
                    (
                        b.id,
                        BackendInfo {
                            id: b.id,
                            host: b.host.clone(),
                            rpc_port: b.rpc_port as u16,
                            http_port: b.http_port as u16,
                        },
                    )
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
            rows: Default::default(),
        }
    }

    /// Routes and buffers a batch; returns the rows that fit no partition as
    /// (row index, reason). Full buffers are written out.
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
                self.flush(r.tablet_id).await?;
            }
        }
        while self.buffered > MAX_BUFFERED_ROWS {
            let Some((&tid, _)) = self.buffers.iter().max_by_key(|(_, v)| v.1) else {
                break;
            };
            self.flush(tid).await?;
        }
        Ok(rejected)
    }

    /// Starts writing one tablet's buffer; waits for an earlier write when
    /// enough are in flight. A failed write fails the load.
    async fn flush(&mut self, tablet_id: i64) -> Result<()> {
        let Some((batches, n, backend_id)) = self.buffers.remove(&tablet_id) else {
            return Ok(());
        };
        self.buffered -= n;
        let info = self.backends.get(&backend_id).ok_or_else(|| {
            TethysError::Internal(format!("backend {backend_id} is not in the load plan"))
        })?;
        let client = self.be.pool.get(info)?;
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

    /// Writes out everything still buffered.
    pub async fn flush_all(&mut self) -> Result<()> {
        let ids: Vec<i64> = self.buffers.keys().copied().collect();
        for id in ids {
            self.flush(id).await?;
        }
        while !self.in_flight.is_empty() {
            self.join_one().await?;
        }
        Ok(())
    }
}

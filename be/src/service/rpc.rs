//! `BackendService`: tablet lifecycle, transaction publish/abort and stats.

use std::sync::Arc;

use crate::storage::CompactionKind;
use tethys_common::TethysError;
use tethys_common::schema::TableSchema;
use tethys_proto::backend_service_server::BackendService;
use tethys_proto::*;
use tonic::{Request, Response, Status};

use crate::node::Backend;

pub struct BackendRpc {
    backend: Arc<Backend>,
}

impl BackendRpc {
    pub fn new(backend: Arc<Backend>) -> Self {
        BackendRpc { backend }
    }

    /// Runs blocking storage work off the async threads.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Backend) -> Result<T, TethysError> + Send + 'static,
    ) -> Result<T, Status> {
        let b = self.backend.clone();
        tokio::task::spawn_blocking(move || f(&b))
            .await
            .map_err(|e| Status::internal(format!("storage task failed: {e}")))?
            .map_err(Status::from)
    }
}

#[tonic::async_trait]
impl BackendService for BackendRpc {
    async fn heartbeat(
        &self,
        req: Request<HeartbeatRequest>,
    ) -> Result<Response<HeartbeatResponse>, Status> {
        let req = req.into_inner();
        let b = &self.backend;
        // Another cluster's heartbeat is refused before anything changes.
        if req.cluster_id != 0 {
            b.membership.join(req.cluster_id, &req.token)?;
        }
        b.loads.set_backend_id(req.backend_id);
        if !req.fe_host.is_empty() && req.fe_rpc_port != 0 {
            let host = if req.fe_host.contains(':') {
                format!("[{}]", req.fe_host)
            } else {
                req.fe_host.clone()
            };
            b.loads
                .set_frontend(&format!("http://{host}:{}", req.fe_rpc_port))?;
        }
        let (tablets, bytes) = b.engine.totals();
        let (total, avail) = b.disk_capacity();
        Ok(Response::new(HeartbeatResponse {
            backend_id: req.backend_id,
            tablet_count: tablets as i64,
            data_used_bytes: bytes as i64,
            version: env!("CARGO_PKG_VERSION").into(),
            start_time_ms: b.started_ms,
            http_port: u32::from(b.http_port),
            disk_total_bytes: total,
            disk_avail_bytes: avail,
            cpu_cores: std::thread::available_parallelism()
                .map(|n| n.get() as u32)
                .unwrap_or(1),
        }))
    }

    async fn create_tablets(
        &self,
        req: Request<CreateTabletsRequest>,
    ) -> Result<Response<CreateTabletsResponse>, Status> {
        let specs = req.into_inner().tablets;
        self.blocking(move |b| {
            for s in specs {
                let schema = TableSchema::from_pb(&s.schema.unwrap_or_default())?;
                b.engine.create_tablet(
                    s.tablet_id,
                    s.table_id,
                    s.partition_id,
                    schema,
                    s.initial_version,
                )?;
            }
            Ok(())
        })
        .await?;
        Ok(Response::new(CreateTabletsResponse {}))
    }

    async fn drop_tablets(
        &self,
        req: Request<DropTabletsRequest>,
    ) -> Result<Response<DropTabletsResponse>, Status> {
        let ids = req.into_inner().tablet_ids;
        self.blocking(move |b| {
            for id in ids {
                b.engine.drop_tablet(id)?;
            }
            Ok(())
        })
        .await?;
        Ok(Response::new(DropTabletsResponse {}))
    }

    async fn publish_version(
        &self,
        req: Request<PublishVersionRequest>,
    ) -> Result<Response<PublishVersionResponse>, Status> {
        let r = req.into_inner();
        self.blocking(move |b| {
            // Tablets publish independently (each its own meta rewrite and,
            // for merge-on-write tables, key lookups): a few at a time.
            let workers = std::thread::available_parallelism()
                .map_or(1, |n| n.get() * 2)
                .min(r.tablets.len());
            if workers <= 1 {
                for t in &r.tablets {
                    b.engine.publish(r.txn_id, t.tablet_id, t.version)?;
                }
                return Ok(());
            }
            let next = std::sync::atomic::AtomicUsize::new(0);
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..workers)
                    .map(|_| {
                        s.spawn(|| -> tethys_common::Result<()> {
                            loop {
                                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                let Some(t) = r.tablets.get(i) else {
                                    return Ok(());
                                };
                                b.engine.publish(r.txn_id, t.tablet_id, t.version)?;
                            }
                        })
                    })
                    .collect();
                for h in handles {
                    h.join().map_err(|_| {
                        tethys_common::TethysError::Internal("a publish thread panicked".into())
                    })??;
                }
                Ok(())
            })
        })
        .await?;
        Ok(Response::new(PublishVersionResponse {}))
    }

    async fn abort_txn(
        &self,
        req: Request<AbortTxnRequest>,
    ) -> Result<Response<AbortTxnResponse>, Status> {
        let txn = req.into_inner().txn_id;
        self.blocking(move |b| b.engine.abort(txn)).await?;
        Ok(Response::new(AbortTxnResponse {}))
    }

    async fn pending_txns(
        &self,
        _req: Request<PendingTxnsRequest>,
    ) -> Result<Response<PendingTxnsResponse>, Status> {
        Ok(Response::new(PendingTxnsResponse {
            txn_ids: self.backend.engine.pending_txns(),
        }))
    }

    async fn tablet_stats(
        &self,
        req: Request<TabletStatsRequest>,
    ) -> Result<Response<TabletStatsResponse>, Status> {
        let tablets = req
            .into_inner()
            .tablet_ids
            .into_iter()
            .map(|id| match self.backend.engine.stats(id) {
                Some(s) => TabletStat {
                    tablet_id: id,
                    version: s.version,
                    row_count: s.row_count as i64,
                    data_size: s.data_size as i64,
                    rowset_count: s.rowset_count as i64,
                    segment_count: s.segment_count as i64,
                    found: true,
                    compaction_score: s.compaction_score as i64,
                    cumulative_point: s.cumulative_point,
                },
                None => TabletStat {
                    tablet_id: id,
                    found: false,
                    ..Default::default()
                },
            })
            .collect();
        Ok(Response::new(TabletStatsResponse { tablets }))
    }

    async fn write_delete(
        &self,
        req: Request<WriteDeleteRequest>,
    ) -> Result<Response<WriteDeleteResponse>, Status> {
        let req = req.into_inner();
        let conds: Vec<tethys_common::delete::DeleteCondition> = req
            .conditions
            .iter()
            .map(tethys_common::delete::DeleteCondition::from_pb)
            .collect();
        self.blocking(move |b| b.engine.write_delete(req.txn_id, &req.tablet_ids, &conds))
            .await?;
        Ok(Response::new(WriteDeleteResponse {}))
    }

    async fn compact(
        &self,
        req: Request<CompactRequest>,
    ) -> Result<Response<CompactResponse>, Status> {
        let req = req.into_inner();
        let kind = match req.kind() {
            tethys_proto::CompactionType::Cumulative => CompactionKind::Cumulative,
            tethys_proto::CompactionType::Base => CompactionKind::Base,
            tethys_proto::CompactionType::Full => CompactionKind::Full,
            tethys_proto::CompactionType::Unspecified => {
                return Err(Status::invalid_argument(
                    "a compaction names no type (cumulative, base or full)",
                ));
            }
        };
        let done = self
            .blocking(move |b| {
                let mut all = vec![];
                for id in req.tablet_ids {
                    all.extend(b.engine.compact(id, kind)?);
                }
                Ok(all)
            })
            .await?;
        Ok(Response::new(CompactResponse {
            compactions: done.len() as i64,
            input_rowsets: done.iter().map(|o| o.input_rowsets as i64).sum(),
            input_rows: done.iter().map(|o| o.input_rows as i64).sum(),
            output_rows: done.iter().map(|o| o.output_rows as i64).sum(),
        }))
    }

    async fn clone_tablet(
        &self,
        req: Request<CloneTabletRequest>,
    ) -> Result<Response<CloneTabletResponse>, Status> {
        let b = &self.backend;
        let r =
            crate::clone::clone_tablet(b.engine.clone(), &b.loads.pool, req.into_inner()).await?;
        Ok(Response::new(r))
    }

    async fn make_snapshot(
        &self,
        req: Request<MakeSnapshotRequest>,
    ) -> Result<Response<MakeSnapshotResponse>, Status> {
        let id = req.into_inner().tablet_id;
        let snap = self.blocking(move |b| b.engine.make_snapshot(id)).await?;
        let meta = serde_json::to_vec(&snap.meta)
            .map_err(|e| Status::internal(format!("encoding tablet {id}'s meta: {e}")))?;
        Ok(Response::new(MakeSnapshotResponse {
            snapshot_id: snap.id,
            meta,
            version: snap.meta.version,
            files: snap
                .files
                .into_iter()
                .map(|(name, size)| SnapshotFilePb { name, size })
                .collect(),
        }))
    }

    async fn read_snapshot(
        &self,
        req: Request<ReadSnapshotRequest>,
    ) -> Result<Response<ReadSnapshotResponse>, Status> {
        let r = req.into_inner();
        // Bounded: a chunk is at most 8 MiB however much is asked.
        let len = (r.length as usize).min(8 << 20);
        let data = self
            .blocking(move |b| {
                b.engine
                    .read_snapshot(&r.snapshot_id, &r.file, r.offset, len)
            })
            .await?;
        Ok(Response::new(ReadSnapshotResponse { data }))
    }

    async fn release_snapshot(
        &self,
        req: Request<ReleaseSnapshotRequest>,
    ) -> Result<Response<ReleaseSnapshotResponse>, Status> {
        let id = req.into_inner().snapshot_id;
        self.blocking(move |b| b.engine.release_snapshot(&id))
            .await?;
        Ok(Response::new(ReleaseSnapshotResponse {}))
    }

    async fn cancel_query(
        &self,
        req: Request<CancelQueryRequest>,
    ) -> Result<Response<CancelQueryResponse>, Status> {
        self.backend.cancels.cancel(&req.into_inner().query_id);
        Ok(Response::new(CancelQueryResponse {}))
    }
}

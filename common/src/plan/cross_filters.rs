//! Runtime filters across backends (Doris' merge node):
//!
//! ```sql
//! SELECT sum(l_extendedprice) / 7.0 FROM lineitem JOIN part ON p_partkey = l_partkey
//!     WHERE p_brand = 'Brand#23' AND p_container = 'MED BOX'
//!       AND l_quantity < (SELECT 0.2 * avg(l_quantity) FROM lineitem
//!                         WHERE l_partkey = p_partkey);   -- TPC-H q17
//! ```
//!
//! The decorrelated `avg` runs over lineitem hashed on `l_partkey` to every
//! backend and is joined there with the few parts; without a filter each
//! backend aggregates all 6 M rows. The join's build side is split over the
//! backends (a partitioned join), so no single instance knows every key:
//! each build partition sends its keys to the FE (`BuildKeysExec` with
//! [`Publish`], `PublishRuntimeFilter`), the FE merges them once every part has arrived
//! (`fe/src/filter_merge.rs`), and the probe scans in other stages,
//! on every backend, fetch the merged filter when they start
//! (`AwaitRuntimeFilter`), waiting at most `runtime_filter_wait_time_ms`
//! before reading without it. The FE plans which join feeds which scan
//! (`fe/src/planner/cross_filters.rs`).

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_expr::PhysicalExprRef;
use futures::future::BoxFuture;
use tethys_proto::{
    AwaitRuntimeFilterRequest, AwaitRuntimeFilterResponse, PublishRuntimeFilterRequest,
};

use super::build_keys::BuildKeys;

/// A probe key that is not one of the scan's columns
/// (`RemoteRuntimeFilterPb::probe_columns`).
pub const NO_COLUMN: u32 = u32::MAX;

/// The most bytes of keys one part sends; a larger part sends its bounds.
pub const MAX_PART_BYTES: usize = 16 << 20;

/// The largest message of the merge node's calls (a part, a merged filter).
pub const MAX_MESSAGE: usize = 32 << 20;

/// Where runtime filters are merged: the FE, called in process or over gRPC.
pub trait FilterMerge: Send + Sync + fmt::Debug {
    fn publish(&self, part: PublishRuntimeFilterRequest) -> BoxFuture<'static, Result<()>>;
    /// The merged filter, once every part is in or `wait_ms` has passed.
    fn fetch(
        &self,
        req: AwaitRuntimeFilterRequest,
    ) -> BoxFuture<'static, Result<AwaitRuntimeFilterResponse>>;
}

/// A session extension: the query a task belongs to and its merge node.
#[derive(Debug, Clone)]
pub struct CrossFilters {
    pub query_id: String,
    pub merge: Arc<dyn FilterMerge>,
}

/// How a build partition publishes its keys (`BuildKeysExec` with
/// `KeysTo::Merge`): the filter, the join's build key expressions (over the
/// build side), the parts the merge node waits for and Doris'
/// `runtime_filter_max_in_num` for the merged IN list.
#[derive(Debug, Clone)]
pub struct Publish {
    pub filter_id: u64,
    pub keys: Vec<PhysicalExprRef>,
    pub expected_parts: u32,
    pub max_in: u32,
}

impl Publish {
    /// Sends the complete `keys` of one build partition to `cross`'s merge
    /// node, in the background: the join goes on at once, and a part that
    /// cannot be delivered leaves the scans to their bounded wait.
    pub fn send(&self, keys: &BuildKeys, cross: &CrossFilters) -> Result<()> {
        let (mut batch, mut overflow) = keys.export()?;
        if batch.get_array_memory_size() > MAX_PART_BYTES {
            // Too many bytes for one message: its bounds still prune.
            (batch, overflow) = (keys.export_bounds()?, true);
        }
        let part = PublishRuntimeFilterRequest {
            query_id: cross.query_id.clone(),
            filter_id: self.filter_id,
            part: rand::random(),
            expected_parts: self.expected_parts,
            max_in: self.max_in,
            keys: ipc_bytes(&batch)?,
            overflow,
        };
        let send = cross.merge.publish(part);
        let filter_id = self.filter_id;
        tokio::spawn(async move {
            if let Err(e) = send.await {
                tracing::warn!(filter_id, error = %e, "runtime filter part not delivered");
            }
        });
        Ok(())
    }
}

/// `batch` as an Arrow IPC stream.
pub fn ipc_bytes(batch: &RecordBatch) -> Result<Vec<u8>> {
    let mut out = vec![];
    let mut w = arrow::ipc::writer::StreamWriter::try_new(&mut out, &batch.schema())?;
    w.write(batch)?;
    w.finish()?;
    drop(w);
    Ok(out)
}

/// An Arrow IPC stream of just `schema`.
pub fn ipc_schema_bytes(schema: &arrow::datatypes::Schema) -> Result<Vec<u8>> {
    let mut out = vec![];
    let mut w = arrow::ipc::writer::StreamWriter::try_new(&mut out, schema)?;
    w.finish()?;
    drop(w);
    Ok(out)
}

/// The schema and the one batch (if any) of an Arrow IPC stream.
pub fn from_ipc(bytes: &[u8]) -> Result<(SchemaRef, Option<RecordBatch>)> {
    let mut r = arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes), None)?;
    let schema = r.schema();
    let batch = r.next().transpose()?;
    if r.next().is_some() {
        return Err(DataFusionError::Internal(
            "a runtime filter part holds more than one batch".into(),
        ));
    }
    Ok((schema, batch))
}

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
//! ([`super::filter_merge`]), and the probe scans in other stages,
//! on every backend, fetch the merged filter when they start
//! (`AwaitRuntimeFilter`), waiting at most `runtime_filter_wait_time_ms`
//! before reading without it. The FE plans which join feeds which scan
//! (`fe/src/planner/cross_filters.rs`).
//!
//! A colocate or bucket shuffle join deals both its inputs by bucket, not
//! by DataFusion's hash, so DataFusion's own filter (routed by its hash)
//! cannot serve its scans; but a task's probe rows meet only that task's
//! build keys. Its partitions publish to the task's own merge node
//! ([`CrossFilters::in_task`], `in_task` on both ends), which waits for the
//! task's build partitions only, and its scans, in the same task, fetch
//! from there: no call to the FE, no wait for other backends.

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

/// A session extension: the query a task belongs to, its merge node and
/// the task's own (for joins whose build and probe sides are all in the
/// task).
#[derive(Debug, Clone)]
pub struct CrossFilters {
    pub query_id: String,
    pub merge: Arc<dyn FilterMerge>,
    pub in_task: Arc<dyn FilterMerge>,
}

impl CrossFilters {
    /// The merge node of filters `in_task` or not.
    pub fn node(&self, in_task: bool) -> &Arc<dyn FilterMerge> {
        match in_task {
            true => &self.in_task,
            false => &self.merge,
        }
    }
}

/// How a build partition publishes its keys (`BuildKeysExec` with
/// `KeysTo::Merge`): the filter, the join's build key expressions (over the
/// build side), the parts the merge node waits for, Doris'
/// `runtime_filter_max_in_num` for the merged IN list, whether it goes
/// to the task's own merge node, and then how many tasks share the join's
/// keys (`BuildKeys::share_key_range`).
#[derive(Debug, Clone)]
pub struct Publish {
    pub filter_id: u64,
    pub keys: Vec<PhysicalExprRef>,
    pub expected_parts: u32,
    pub max_in: u32,
    pub in_task: bool,
    pub key_share: u32,
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
            key_share: self.key_share,
        };
        let send = cross.node(self.in_task).publish(part);
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

#[cfg(test)]
mod tests {
    use super::super::filter_merge::{FilterMergeNode, LocalMerge};
    use super::*;
    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::physical_expr::expressions::col;
    use std::time::Duration;

    /// A part of a filter merged in the task goes to the task's own merge
    /// node, the others to the FE's.
    #[tokio::test]
    async fn a_part_goes_to_the_merge_node_it_names() {
        let (fe, task) = (
            Arc::new(FilterMergeNode::default()),
            Arc::new(FilterMergeNode::default()),
        );
        let cross = CrossFilters {
            query_id: "q".into(),
            merge: Arc::new(LocalMerge(fe.clone())),
            in_task: Arc::new(LocalMerge(task.clone())),
        };
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
        let keys = BuildKeys::try_new(vec![col("k", &schema).unwrap()], &schema).unwrap();
        keys.start(1);
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(vec![7]))])
            .unwrap();
        keys.add(&batch).unwrap();
        keys.finish_partition();
        for (id, in_task) in [(1, true), (2, false)] {
            let publish = Publish {
                filter_id: id,
                keys: keys.exprs().to_vec(),
                expected_parts: 1,
                max_in: 1024,
                in_task,
                key_share: 1,
            };
            publish.send(&keys, &cross).unwrap();
        }
        let wait = Duration::from_secs(5);
        assert!(task.fetch("q", 1, wait).await.ready);
        assert!(fe.fetch("q", 2, wait).await.ready);
        let short = Duration::from_millis(20);
        assert!(!fe.fetch("q", 1, short).await.ready, "not sent to the FE");
        assert!(!task.fetch("q", 2, short).await.ready);
    }
}

//! The merge node of runtime filters across backends
//! (`cross_filters.rs` explains the flow): the build partitions of a join,
//! on any backend or on the FE, send their keys here; once every part has
//! arrived the keys become one filter (bounds, and a bitmap, IN list or
//! bloom filter as for a join on the FE), which probe scans on every
//! backend fetch, waiting for it a bounded time. The FE keeps one for all
//! queries; each task of a backend keeps its own for the joins whose build
//! partitions and probe scans all run in that task (a colocate or bucket
//! shuffle join's: `CrossFilters::in_task`).
//!
//! Filters live here per query; a query's are dropped when it ends, and any
//! left behind (a query that never ran its scans) after [`IDLE`]. At most
//! [`MAX_FILTERS`] filters are kept at once: beyond, parts are refused and
//! scans read without the filter, which is always correct.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::TethysCodec;
use super::build_keys::BuildKeys;
use super::cross_filters::{FilterMerge, from_ipc, ipc_schema_bytes};
use arrow::datatypes::Schema;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_expr::conjunction;
use datafusion::physical_expr::expressions::col;
use datafusion_proto::physical_plan::to_proto::serialize_physical_expr;
use futures::future::BoxFuture;
use prost::Message;
use tethys_proto::{
    AwaitRuntimeFilterRequest, AwaitRuntimeFilterResponse, PublishRuntimeFilterRequest,
};
use tokio::sync::watch;

/// Filters kept at once (every query's).
pub const MAX_FILTERS: usize = 1024;

/// A filter nobody published to or fetched for this long is dropped.
pub const IDLE: Duration = Duration::from_secs(600);

/// The longest a fetch is held, whatever it asks.
const MAX_WAIT: Duration = Duration::from_secs(60);

type Key = (String, u64);

/// One filter being merged.
struct Entry {
    /// The parts' keys, merged (`None` until the first part).
    keys: Option<BuildKeys>,
    /// Parts already taken (a part delivered twice counts once).
    parts: std::collections::HashSet<u64>,
    /// The answer once complete.
    done: watch::Sender<Option<Arc<AwaitRuntimeFilterResponse>>>,
    touched: Instant,
}

impl Entry {
    fn new() -> Self {
        Entry {
            keys: None,
            parts: Default::default(),
            done: watch::channel(None).0,
            touched: Instant::now(),
        }
    }
}

/// A merge node: the FE's, or a backend task's own.
#[derive(Default)]
pub struct FilterMergeNode {
    filters: Mutex<HashMap<Key, Entry>>,
}

impl std::fmt::Debug for FilterMergeNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilterMergeNode").finish_non_exhaustive()
    }
}

fn internal(what: String) -> DataFusionError {
    DataFusionError::Internal(what)
}

impl FilterMergeNode {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Entry>> {
        self.filters.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The entry of `key`, made if there is room.
    fn entry(map: &mut HashMap<Key, Entry>, key: Key) -> Option<&mut Entry> {
        if !map.contains_key(&key) {
            map.retain(|_, e| e.touched.elapsed() < IDLE);
            if map.len() >= MAX_FILTERS {
                return None;
            }
        }
        let e = map.entry(key).or_insert_with(Entry::new);
        e.touched = Instant::now();
        Some(e)
    }

    /// Takes one part; merges when it is the last.
    pub fn publish(&self, part: &PublishRuntimeFilterRequest) -> Result<()> {
        let (schema, batch) = from_ipc(&part.keys)?;
        let batch = batch.ok_or_else(|| internal("a runtime filter part without keys".into()))?;
        let mut map = self.lock();
        let key = (part.query_id.clone(), part.filter_id);
        let Some(e) = Self::entry(&mut map, key) else {
            return Err(internal(format!(
                "too many runtime filters being merged ({MAX_FILTERS})"
            )));
        };
        if e.done.borrow().is_some() || !e.parts.insert(part.part) {
            return Ok(());
        }
        let keys = match &mut e.keys {
            Some(k) => k,
            None => {
                let exprs = schema
                    .fields()
                    .iter()
                    .map(|f| col(f.name(), &schema))
                    .collect::<Result<Vec<_>>>()?;
                let k = BuildKeys::try_new(exprs, &schema)?;
                k.start(part.expected_parts.max(1) as usize);
                k.share_key_range(part.key_share as usize);
                e.keys.insert(k)
            }
        };
        keys.absorb(&batch, part.overflow)?;
        if keys.complete() {
            let answer = merged(keys, &schema, part.max_in as usize)?;
            e.keys = None;
            e.done.send_replace(Some(Arc::new(answer)));
        }
        Ok(())
    }

    /// The merged filter, waiting up to `wait` for the last part.
    pub async fn fetch(
        &self,
        query_id: &str,
        filter_id: u64,
        wait: Duration,
    ) -> AwaitRuntimeFilterResponse {
        let rx = {
            let mut map = self.lock();
            match Self::entry(&mut map, (query_id.to_string(), filter_id)) {
                Some(e) => e.done.subscribe(),
                None => return AwaitRuntimeFilterResponse::default(),
            }
        };
        let mut rx = rx;
        let ready = tokio::time::timeout(wait.min(MAX_WAIT), rx.wait_for(|v| v.is_some())).await;
        match ready {
            Ok(Ok(v)) => v.as_deref().cloned().unwrap_or_default(),
            _ => AwaitRuntimeFilterResponse::default(),
        }
    }

    /// Drops the filters of a query that has ended.
    pub fn forget(&self, query_id: &str) {
        self.lock().retain(|(q, _), _| q != query_id);
    }
}

/// The answer for complete `keys` over `schema`'s key columns: their bounds
/// and key set, as one expression over `k0..kn`.
fn merged(keys: &BuildKeys, schema: &Schema, max_in: usize) -> Result<AwaitRuntimeFilterResponse> {
    let probe = keys.exprs().to_vec();
    let parts: Vec<_> = [keys.bounds(&probe), keys.membership(&probe, schema, max_in)]
        .into_iter()
        .flatten()
        .collect();
    let filter = match parts.is_empty() {
        true => vec![],
        false => serialize_physical_expr(&conjunction(parts), &TethysCodec)?.encode_to_vec(),
    };
    Ok(AwaitRuntimeFilterResponse {
        ready: true,
        key_schema: ipc_schema_bytes(schema)?,
        filter,
    })
}

/// Publishing to and fetching from a merge node in this process: the FE's
/// own stage (joins it runs), a backend task's filters within the task.
#[derive(Debug, Clone)]
pub struct LocalMerge(pub Arc<FilterMergeNode>);

impl FilterMerge for LocalMerge {
    fn publish(&self, part: PublishRuntimeFilterRequest) -> BoxFuture<'static, Result<()>> {
        let node = self.0.clone();
        Box::pin(async move { node.publish(&part) })
    }

    fn fetch(
        &self,
        req: AwaitRuntimeFilterRequest,
    ) -> BoxFuture<'static, Result<AwaitRuntimeFilterResponse>> {
        let node = self.0.clone();
        Box::pin(async move {
            Ok(node
                .fetch(
                    &req.query_id,
                    req.filter_id,
                    Duration::from_millis(req.wait_ms),
                )
                .await)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::cross_filters::ipc_bytes;
    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field};
    use arrow::record_batch::RecordBatch;
    use datafusion::physical_expr::PhysicalExpr;
    use datafusion_proto::physical_plan::from_proto::parse_physical_expr;

    fn part(query: &str, part: u64, keys: Vec<i64>) -> PublishRuntimeFilterRequest {
        let schema = Arc::new(Schema::new(vec![Field::new("k0", DataType::Int64, true)]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(keys))]).unwrap();
        PublishRuntimeFilterRequest {
            query_id: query.into(),
            filter_id: 7,
            part,
            expected_parts: 2,
            max_in: 1024,
            keys: ipc_bytes(&batch).unwrap(),
            overflow: false,
            key_share: 1,
        }
    }

    fn decode(a: &AwaitRuntimeFilterResponse) -> Arc<dyn PhysicalExpr> {
        let (schema, _) = from_ipc(&a.key_schema).unwrap();
        let node =
            datafusion_proto::protobuf::PhysicalExprNode::decode(a.filter.as_slice()).unwrap();
        let ctx = datafusion::execution::TaskContext::default();
        parse_physical_expr(&node, &ctx, &schema, &TethysCodec).unwrap()
    }

    #[tokio::test]
    async fn parts_merge_into_one_filter_once_all_are_in() {
        let node = FilterMergeNode::default();
        node.publish(&part("q", 1, vec![3, 40])).unwrap();
        // One of two parts: not ready, after the wait.
        let a = node.fetch("q", 7, Duration::from_millis(50)).await;
        assert!(!a.ready);
        // A part delivered twice counts once.
        node.publish(&part("q", 1, vec![3, 40])).unwrap();
        assert!(!node.fetch("q", 7, Duration::from_millis(10)).await.ready);
        node.publish(&part("q", 2, vec![1000])).unwrap();
        let a = node.fetch("q", 7, Duration::from_secs(5)).await;
        assert!(a.ready);
        let f = decode(&a);
        let (schema, _) = from_ipc(&a.key_schema).unwrap();
        let probe = RecordBatch::try_new(
            schema,
            vec![Arc::new(Int64Array::from(vec![3, 4, 40, 1000, 1001, 2]))],
        )
        .unwrap();
        let out = f.evaluate(&probe).unwrap().into_array(6).unwrap();
        let out: Vec<bool> = out.as_boolean().iter().map(|v| v == Some(true)).collect();
        assert_eq!(out, [true, false, true, true, false, false], "{f}");
        // Another query's filter of the same id is its own.
        assert!(
            !node
                .fetch("other", 7, Duration::from_millis(10))
                .await
                .ready
        );
        node.forget("q");
        assert!(!node.fetch("q", 7, Duration::from_millis(10)).await.ready);
    }

    #[tokio::test]
    async fn a_fetch_waiting_is_answered_when_the_last_part_arrives() {
        let node = Arc::new(FilterMergeNode::default());
        let waiting = {
            let node = node.clone();
            tokio::spawn(async move { node.fetch("q", 7, Duration::from_secs(30)).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        node.publish(&part("q", 1, vec![1])).unwrap();
        node.publish(&part("q", 2, vec![2])).unwrap();
        let a = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .unwrap()
            .unwrap();
        assert!(a.ready);
    }

    #[tokio::test]
    async fn a_part_sent_as_bounds_gives_bounds_only() {
        let node = FilterMergeNode::default();
        let mut p = part("q", 1, vec![10, 20]);
        p.overflow = true;
        node.publish(&p).unwrap();
        node.publish(&part("q", 2, vec![15])).unwrap();
        let a = node.fetch("q", 7, Duration::from_secs(5)).await;
        let f = decode(&a);
        let (schema, _) = from_ipc(&a.key_schema).unwrap();
        let probe = RecordBatch::try_new(
            schema,
            vec![Arc::new(Int64Array::from(vec![9, 12, 20, 21]))],
        )
        .unwrap();
        let out = f.evaluate(&probe).unwrap().into_array(4).unwrap();
        let out: Vec<bool> = out.as_boolean().iter().map(|v| v == Some(true)).collect();
        assert_eq!(out, [false, true, true, false], "{f}");
    }
}

//! Runtime filters inside a stage of a distributed plan:
//!
//! ```sql
//! SELECT sum(lo_revenue) FROM lineorder JOIN dates ON lo_orderdate = d_datekey
//!     WHERE d_year = 1993;
//! ```
//!
//! The `dates` side is broadcast to every backend; each backend's join
//! publishes the keys it built as a dynamic filter, which its lineorder scan
//! takes (`TabletScanExec`'s filter pushdown) and applies once the build side
//! is complete: the bounds prune pages by their zone maps, the hash-table
//! lookup drops rows before they reach the join. The worker re-plans filter
//! pushdown on each stage it receives (`service/worker.rs`), since a plan
//! arrives without its joins' filters.
//!
//! A join in another stage (a partitioned join's build side spread over the
//! backends) filters this scan through the FE's merge node
//! (`tethys_common::plan::cross_filters`): [`RemoteFilters`] fetches the
//! merged filter when the scan starts and applies it as it would a local
//! join's. So does a colocate or bucket shuffle join of the scan's own
//! task, through the task's own merge node (`in_task`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arrow::datatypes::Schema;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::expressions::{Column, DynamicFilterPhysicalExpr, Literal, lit};
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::{PhysicalExpr, conjunction, split_conjunction};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::scalar::ScalarValue;
use datafusion_proto::physical_plan::from_proto::parse_physical_expr;
use datafusion_proto::protobuf::PhysicalExprNode;
use prost::Message;
use tethys_common::plan::build_keys::BuildKeys;
use tethys_common::plan::cross_filters::{CrossFilters, from_ipc};
use tethys_common::plan::runtime_filters::{Uncollected, filter_now};
use tethys_common::plan::{OlapScanExec, TethysCodec};
use tethys_proto::{AwaitRuntimeFilterRequest, AwaitRuntimeFilterResponse};

/// The statement's runtime filter settings a task's scans follow, a
/// session extension.
#[derive(Debug, Clone, Copy)]
pub struct RuntimeFilterSettings {
    /// How long a scan waits for its joins' build sides before reading
    /// without their filters (`runtime_filter_wait_time_ms`).
    pub wait: Duration,
    /// Build keys tested as an IN list at most (`runtime_filter_max_in_num`).
    pub max_in: usize,
}

impl Default for RuntimeFilterSettings {
    fn default() -> Self {
        RuntimeFilterSettings {
            wait: Duration::from_secs(1),
            max_in: 1024,
        }
    }
}

/// `predicate` AND the filters as they now stand; `None` when nothing
/// filters (a filter still `true`: its build side is not done). A join's
/// lookup into its hash table becomes a test of the keys collected from its
/// build side (`keys`, by filter id) once they are all in. With it, each
/// filter's conjuncts and the counter of the rows they remove.
pub fn with_filters(
    predicate: Option<&Arc<dyn PhysicalExpr>>,
    filters: &[Arc<dyn PhysicalExpr>],
    keys: &HashMap<u64, Arc<BuildKeys>>,
    schema: &Schema,
    max_in: usize,
) -> Result<Filtered> {
    let mut parts: Vec<Arc<dyn PhysicalExpr>> = predicate.into_iter().cloned().collect();
    let mut counted = vec![];
    for f in filters {
        let now = filter_now(f, keys, schema, max_in, Uncollected::Kept)?;
        let counter = tethys_common::plan::runtime_filters::rows_filtered_counter(f);
        for c in split_conjunction(&now) {
            let trivially_true = c
                .downcast_ref::<Literal>()
                .is_some_and(|l| l.value() == &ScalarValue::Boolean(Some(true)));
            if !trivially_true {
                parts.push(c.clone());
                counted.push((c.clone(), counter.clone()));
            }
        }
    }
    Ok(((!parts.is_empty()).then(|| conjunction(parts)), counted))
}

/// A runtime filter's conjunct in a scan predicate, and the name of the
/// scan counter of the rows it removes.
pub type CountedConjunct = (Arc<dyn PhysicalExpr>, String);

/// A scan predicate with runtime filters, and their conjuncts in it.
pub type Filtered = (Option<Arc<dyn PhysicalExpr>>, Vec<CountedConjunct>);

/// Filters of joins in other stages (`OlapScanNodePb::remote_filters`):
/// each a dynamic filter on the scan's columns, fetched from the merge node
/// once, when the scan first starts, and then complete (with the merged
/// keys, or unchanged when they did not come in time).
#[derive(Debug)]
pub struct RemoteFilters {
    filters: Vec<RemoteFilter>,
    started: std::sync::atomic::AtomicBool,
}

#[derive(Debug)]
struct RemoteFilter {
    id: u64,
    /// From the task's own merge node (`RemoteRuntimeFilterPb::in_task`).
    in_task: bool,
    /// Per join key: the scan's column it is, if any.
    probe: Vec<Option<Arc<dyn PhysicalExpr>>>,
    dynamic: Arc<DynamicFilterPhysicalExpr>,
}

impl RemoteFilters {
    /// The remote filters `scan` was given (`None`: none it can test).
    pub fn of(scan: &OlapScanExec) -> Option<Arc<RemoteFilters>> {
        let schema = scan.schema();
        let filters: Vec<RemoteFilter> = scan
            .node()
            .remote_filters
            .iter()
            .filter_map(|f| {
                let probe: Vec<Option<Arc<dyn PhysicalExpr>>> = f
                    .probe_columns
                    .iter()
                    .map(|&c| {
                        let field = schema.fields().get(c as usize)?;
                        Some(Arc::new(Column::new(field.name(), c as usize))
                            as Arc<dyn PhysicalExpr>)
                    })
                    .collect();
                let columns: Vec<_> = probe.iter().flatten().cloned().collect();
                (!columns.is_empty()).then(|| RemoteFilter {
                    id: f.filter_id,
                    in_task: f.in_task,
                    probe,
                    dynamic: Arc::new(DynamicFilterPhysicalExpr::new(columns, lit(true))),
                })
            })
            .collect();
        (!filters.is_empty()).then(|| {
            Arc::new(RemoteFilters {
                filters,
                started: Default::default(),
            })
        })
    }

    /// The filters, as the scan's runtime filters.
    pub fn exprs(&self) -> impl Iterator<Item = Arc<dyn PhysicalExpr>> + '_ {
        self.filters
            .iter()
            .map(|f| f.dynamic.clone() as Arc<dyn PhysicalExpr>)
    }

    /// Fetches the merged filters (once, whichever partition starts first),
    /// waiting at most `wait` for them.
    pub fn start(&self, context: &TaskContext, wait: Duration) {
        if self.started.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        let Some(cross) = context.session_config().get_extension::<CrossFilters>() else {
            self.filters.iter().for_each(|f| f.dynamic.mark_complete());
            return;
        };
        for f in &self.filters {
            let req = AwaitRuntimeFilterRequest {
                query_id: cross.query_id.clone(),
                filter_id: f.id,
                wait_ms: wait.as_millis() as u64,
            };
            let fetch = cross.node(f.in_task).fetch(req);
            let probe = f.probe.clone();
            let dynamic = f.dynamic.clone();
            let id = f.id;
            tokio::spawn(async move {
                match fetch.await.and_then(|a| merged_filter(&a, &probe)) {
                    Ok(Some(filter)) => {
                        if let Err(e) = dynamic.update(filter) {
                            tracing::warn!(filter_id = id, error = %e, "runtime filter not applied");
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(filter_id = id, error = %e, "runtime filter not fetched")
                    }
                }
                dynamic.mark_complete();
            });
        }
    }
}

/// The merge node's answer as a filter on the scan's columns: the parts of
/// the merged filter on keys the scan has (`None`: nothing to apply).
fn merged_filter(
    answer: &AwaitRuntimeFilterResponse,
    probe: &[Option<Arc<dyn PhysicalExpr>>],
) -> Result<Option<Arc<dyn PhysicalExpr>>> {
    if !answer.ready || answer.filter.is_empty() {
        return Ok(None);
    }
    let (schema, _) = from_ipc(&answer.key_schema)?;
    let node = PhysicalExprNode::decode(answer.filter.as_slice())
        .map_err(|e| DataFusionError::Internal(format!("bad runtime filter: {e}")))?;
    let task = TaskContext::default();
    let filter = parse_physical_expr(&node, &task, &schema, &TethysCodec)?;
    let mut parts = vec![];
    for part in split_conjunction(&filter) {
        let on_scan = |k: &Column| probe.get(k.index()).cloned().flatten();
        if !collect_columns(part).iter().all(|k| on_scan(k).is_some()) {
            continue;
        }
        let part =
            part.clone()
                .transform(|e| match e.downcast_ref::<Column>().and_then(on_scan) {
                    Some(col) => Ok(Transformed::yes(col)),
                    None => Ok(Transformed::no(e)),
                })?;
        parts.push(part.data);
    }
    Ok((!parts.is_empty()).then(|| conjunction(parts)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{BinaryExpr, col};
    use datafusion_proto::physical_plan::to_proto::serialize_physical_expr;
    use tethys_common::plan::cross_filters::ipc_schema_bytes;

    /// A merged filter over keys `k0` and `k1` applied to a scan that has
    /// only the first key (as its column 1): the parts on `k1` are dropped,
    /// those on `k0` read the scan's column.
    #[test]
    fn a_merged_filter_reads_the_scan_columns_of_its_keys() {
        let keys = Schema::new(vec![
            Field::new("k0", DataType::Int64, true),
            Field::new("k1", DataType::Int64, true),
        ]);
        let bound = |k: &str, op, v: i64| -> Arc<dyn PhysicalExpr> {
            Arc::new(BinaryExpr::new(col(k, &keys).unwrap(), op, lit(v)))
        };
        let filter = conjunction([
            bound("k0", Operator::GtEq, 3),
            bound("k1", Operator::LtEq, 5),
            bound("k0", Operator::LtEq, 9),
        ]);
        let answer = AwaitRuntimeFilterResponse {
            ready: true,
            key_schema: ipc_schema_bytes(&keys).unwrap(),
            filter: serialize_physical_expr(&filter, &TethysCodec)
                .unwrap()
                .encode_to_vec(),
        };
        let scan = Schema::new(vec![
            Field::new("x", DataType::Int64, true),
            Field::new("a", DataType::Int64, true),
        ]);
        let probe = vec![Some(col("a", &scan).unwrap()), None];
        let f = merged_filter(&answer, &probe).unwrap().unwrap();
        assert_eq!(split_conjunction(&f).len(), 2, "{f}");
        let batch = RecordBatch::try_new(
            Arc::new(scan),
            vec![
                Arc::new(Int64Array::from(vec![100, 100, 100, 100])),
                Arc::new(Int64Array::from(vec![2, 3, 9, 10])),
            ],
        )
        .unwrap();
        let out = f.evaluate(&batch).unwrap().into_array(4).unwrap();
        let out: Vec<bool> = out.as_boolean().iter().map(|v| v == Some(true)).collect();
        assert_eq!(out, [false, true, true, false]);
        // Not ready, or nothing to filter by: no filter.
        let not_ready = AwaitRuntimeFilterResponse::default();
        assert!(merged_filter(&not_ready, &probe).unwrap().is_none());
    }
}

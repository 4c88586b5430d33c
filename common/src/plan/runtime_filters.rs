//! What the two scans that take joins' runtime filters share: the FE's
//! `BeFragmentExec` (filters shipped with a fragment) and the BE's
//! `TabletScanExec` inside a stage of a distributed plan. Both accept a
//! join's dynamic filter in the post-optimization pushdown phase without
//! claiming it (the join still decides which rows match), and both wait a
//! bounded time for the joins' build sides before reading.

use std::sync::Arc;
use std::time::Duration;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::DynamicFilterPhysicalExpr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterPushdownPhase, FilterPushdownPropagation, PushedDown,
};

/// What a leaf scan answers to the filters pushed onto it.
pub type Propagation = FilterPushdownPropagation<Arc<dyn ExecutionPlan>>;

/// The answer to the filters pushed onto a leaf scan (each `No`), and the
/// joins' dynamic filters among them the scan does not `hold` yet, when
/// `phase` is the post phase.
pub fn offered_runtime_filters(
    phase: FilterPushdownPhase,
    pushed: &ChildPushdownResult,
    hold: &[Arc<dyn PhysicalExpr>],
) -> (Propagation, Vec<Arc<dyn PhysicalExpr>>) {
    let filters = &pushed.parent_filters;
    let out =
        FilterPushdownPropagation::with_parent_pushdown_result(vec![PushedDown::No; filters.len()]);
    if phase != FilterPushdownPhase::Post {
        return (out, vec![]);
    }
    let dynamic = filters
        .iter()
        .map(|f| f.filter.clone())
        .filter(|f| f.downcast_ref::<DynamicFilterPhysicalExpr>().is_some())
        .filter(|f| {
            !hold
                .iter()
                .any(|r| r.expression_id().is_some() && r.expression_id() == f.expression_id())
        })
        .collect();
    (out, dynamic)
}

/// Waits (at most `wait`, Doris' `runtime_filter_wait_time_ms`) until every
/// dynamic filter in `filters` is final. A probe scan is polled only after
/// its own join's build side is complete, but a scan under another join's
/// build side (TPC-H q18: orders, filtered by the `IN (subquery)` semi join
/// above) may be started early by an operator that runs its inputs eagerly;
/// the bound keeps a scan from waiting on a join that never finishes.
pub async fn wait_complete(filters: &[Arc<dyn PhysicalExpr>], wait: Duration) {
    let mut dynamic = vec![];
    for f in filters {
        let _ = f.apply(|e| {
            if let Some(d) = e.downcast_ref::<DynamicFilterPhysicalExpr>() {
                dynamic.push(d);
            }
            Ok(TreeNodeRecursion::Continue)
        });
    }
    if dynamic.is_empty() {
        return;
    }
    let all = futures::future::join_all(dynamic.iter().map(|d| d.wait_complete()));
    let _ = tokio::time::timeout(wait, all).await;
}

/// How the counters of [`rows_filtered_counter`] start.
pub const ROWS_FILTERED_PREFIX: &str = "RowsFilteredByRF";

/// The scan counter of the rows runtime filter `filter` removed, named by
/// its probe columns (`RowsFilteredByRF(l_orderkey)`): the FE and the
/// backend name a filter alike, whatever its id on either side.
pub fn rows_filtered_counter(filter: &Arc<dyn PhysicalExpr>) -> String {
    use datafusion::physical_expr::expressions::Column;
    let names: Vec<String> = filter
        .children()
        .into_iter()
        .map(|c| match c.downcast_ref::<Column>() {
            Some(col) => col.name().to_string(),
            None => c.to_string(),
        })
        .collect();
    format!("{ROWS_FILTERED_PREFIX}({})", names.join(", "))
}

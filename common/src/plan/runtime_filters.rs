//! What the two scans that take joins' runtime filters share: the FE's
//! `BeFragmentExec` (filters shipped with a fragment) and the BE's
//! `TabletScanExec` inside a stage of a distributed plan. Both accept a
//! join's dynamic filter in the post-optimization pushdown phase without
//! claiming it (the join still decides which rows match), and both wait a
//! bounded time for the joins' build sides before reading; and both test
//! the keys collected from a join's build side (`build_keys.rs`) rather
//! than look each probe row up in the join's hash table.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arrow::datatypes::Schema;
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::Result;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{
    BinaryExpr, CaseExpr, DynamicFilterPhysicalExpr, Literal, lit,
};
use datafusion::physical_expr::{PhysicalExpr, conjunction};
use datafusion::physical_plan::joins::{HashExpr, HashTableLookupExpr};

use super::build_keys::BuildKeys;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterPushdownPhase, FilterPushdownPropagation, PushedDown,
};

/// The join settings every session that plans or runs joins with runtime
/// filters takes (the FE's statement, a backend's task): joins publish
/// dynamic filters when `enabled`, always as the key bounds and a lookup
/// into the join's hash table, never as DataFusion's IN list of the build
/// keys. The lookup is what [`with_collected_keys`] replaces with the key
/// set collected from the build side (a bitmap, IN list or bloom filter);
/// an IN list stays DataFusion's hash set probed per row (SSB q3.3 on three
/// backends: a quarter of their CPU, where one backend tests a bitmap).
pub fn join_filter_options(opts: &mut datafusion::config::OptimizerOptions, enabled: bool) {
    opts.enable_join_dynamic_filter_pushdown = enabled;
    opts.hash_join_inlist_pushdown_max_distinct_values = 0;
}

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

/// Runtime filter `f` as it now stands, its lookups into a join's hash
/// table replaced by a test of the join's collected build keys (`keys`, by
/// filter id) once they are all in ([`with_collected_keys`]).
pub fn filter_now(
    f: &Arc<dyn PhysicalExpr>,
    keys: &HashMap<u64, Arc<BuildKeys>>,
    schema: &Schema,
    max_in: usize,
    uncollected: Uncollected,
) -> Result<Arc<dyn PhysicalExpr>> {
    let collected = f
        .expression_id()
        .and_then(|id| keys.get(&id))
        .filter(|k| k.complete());
    let now = datafusion::physical_expr_common::physical_expr::snapshot_physical_expr(f.clone())?;
    with_collected_keys(now, collected, schema, max_in, uncollected)
}

/// What becomes of the parts of a join's dynamic filter that the collected
/// build keys cannot replace (none were collected, or not all yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uncollected {
    /// `true`, no filter: the FE's scans, whose filter goes to a backend
    /// that has no join hash table to look into.
    True,
    /// Kept as they are: a backend's scan in the join's own stage.
    Kept,
}

/// Replaces the parts of a join's dynamic filter that need the join's hash
/// table by what the collected build keys give: a lookup into the hash
/// table becomes the keys' bitmap, IN list or bloom filter (a bit test
/// where the lookup hashes every probe row and probes the table: SSB q2.3's
/// lineorder scan on three BEs spent a third of its CPU there); a
/// partitioned join's per-partition filters (`CASE hash(key) % n WHEN i
/// THEN ...`) become the bounds and set of all its keys, which every branch
/// implies. Without collected keys they become what `uncollected` says;
/// `true` (no filter) is always correct.
pub fn with_collected_keys(
    e: Arc<dyn PhysicalExpr>,
    keys: Option<&Arc<BuildKeys>>,
    schema: &Schema,
    max_in: usize,
    uncollected: Uncollected,
) -> Result<Arc<dyn PhysicalExpr>> {
    let otherwise = |e: &Arc<dyn PhysicalExpr>| match uncollected {
        Uncollected::True => lit(true),
        Uncollected::Kept => e.clone(),
    };
    Ok(e.transform_down(|e| {
        if let Some(lookup) = e.downcast_ref::<HashTableLookupExpr>() {
            let probe: Vec<_> = lookup.children().into_iter().cloned().collect();
            let m = keys.and_then(|k| k.membership(&probe, schema, max_in));
            return Ok(Transformed::new(
                m.unwrap_or_else(|| otherwise(&e)),
                true,
                TreeNodeRecursion::Jump,
            ));
        }
        if let Some(case) = e.downcast_ref::<CaseExpr>()
            && let Some(probe) = case.expr().and_then(partition_routing_keys)
        {
            // An ELSE of `true` means some partition's keys are unknown.
            let known = case.else_expr().is_none_or(|e| !is_true(e));
            let filter = keys.filter(|_| known).and_then(|k| {
                let parts: Vec<_> = [k.bounds(&probe), k.membership(&probe, schema, max_in)]
                    .into_iter()
                    .flatten()
                    .collect();
                (!parts.is_empty()).then(|| conjunction(parts))
            });
            return Ok(Transformed::new(
                filter.unwrap_or_else(|| otherwise(&e)),
                true,
                TreeNodeRecursion::Jump,
            ));
        }
        Ok(Transformed::no(e))
    })?
    .data)
}

/// The join keys a partitioned join's dynamic filter routes probe rows by
/// (`hash(keys) % n`), when `e` is that routing expression.
fn partition_routing_keys(e: &Arc<dyn PhysicalExpr>) -> Option<Vec<Arc<dyn PhysicalExpr>>> {
    let b = e.downcast_ref::<BinaryExpr>()?;
    let hash = b.left().downcast_ref::<HashExpr>()?;
    (*b.op() == Operator::Modulo).then(|| hash.on_columns().to_vec())
}

/// Whether `e` is the literal `true`.
pub fn is_true(e: &Arc<dyn PhysicalExpr>) -> bool {
    e.downcast_ref::<Literal>()
        .is_some_and(|l| l.value() == &ScalarValue::Boolean(Some(true)))
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

//! Runtime filters: a hash join's build side, once built, becomes a filter on
//! the probe side's scan (Doris' `RF000[min_max]`, `RF001[in_or_bloom]`).
//!
//! DataFusion's joins publish their build keys as a dynamic filter (key
//! bounds AND an IN list of the keys, when there are few enough) and push it
//! down the probe side; `BeFragmentExec` accepts it (see `remote.rs`) and,
//! when its scan starts, which is after the build side is complete, takes the
//! filter's current form, turns long IN lists into bloom filters, and adds it
//! to the fragment's filter right above the `OlapScanExec`. The backend then
//! prunes segments and pages with the bounds (zone maps) and drops rows
//! before they are sent to the FE.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::ArrayRef;
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::physical_expr::expressions::{DynamicFilterPhysicalExpr, InListExpr, Literal};
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::{PhysicalExpr, conjunction, split_conjunction};
use datafusion::physical_expr_common::physical_expr::snapshot_physical_expr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::execution_plan::replace_children_if_necessary;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion_proto::physical_plan::to_proto::serialize_physical_expr;
use tethys_common::plan::{BitmapFilterExpr, BloomFilterExpr, OlapScanExec, TethysCodec};

use super::remote::BeFragmentExec;

/// Build sides with up to this many distinct keys give an IN list (or bloom
/// filter); bigger ones give only the key bounds.
pub const MAX_FILTER_KEYS: usize = 1 << 18;

/// The filter the fragment's scan should apply now: every accepted runtime
/// filter as it currently stands, IN lists of more than `max_in` values
/// turned into bloom filters, and parts that are trivially true or cannot be
/// sent to a backend left out. `None` when nothing is left.
/// Waits, at most `wait`, for the joins publishing `filters` to have built
/// them. A probe scan is polled only after its own join's build side is
/// complete, but a scan under another join's build side (TPC-H q18: orders,
/// filtered by the `IN (subquery)` semi join above) may be started early by
/// an operator that runs its inputs eagerly; it would otherwise take an
/// empty filter. The bound (Doris' `runtime_filter_wait_time_ms`) keeps a
/// scan from waiting on a join that never finishes its build.
pub async fn wait_complete(filters: &[Arc<dyn PhysicalExpr>], wait: std::time::Duration) {
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

pub fn current_filter(
    filters: &[Arc<dyn PhysicalExpr>],
    max_in: usize,
) -> Result<Option<Arc<dyn PhysicalExpr>>> {
    let mut parts: Vec<Arc<dyn PhysicalExpr>> = vec![];
    for f in filters {
        let now = snapshot_physical_expr(f.clone())?;
        for c in split_conjunction(&now) {
            if is_true(c) {
                continue;
            }
            let c = compact_in_lists(c.clone(), max_in)?;
            if serialize_physical_expr(&c, &TethysCodec).is_ok() {
                parts.push(c);
            }
        }
    }
    Ok((!parts.is_empty()).then(|| conjunction(parts)))
}

fn is_true(e: &Arc<dyn PhysicalExpr>) -> bool {
    e.downcast_ref::<Literal>()
        .is_some_and(|l| l.value() == &ScalarValue::Boolean(Some(true)))
}

/// Replaces IN lists by cheaper tests of the same keys: a bitmap when the
/// keys are integers in a range not much wider than the list (exact, one bit
/// load per row), else a bloom filter when the list has more than `max_in`
/// values.
fn compact_in_lists(e: Arc<dyn PhysicalExpr>, max_in: usize) -> Result<Arc<dyn PhysicalExpr>> {
    // Not `transform_up`: that would visit every literal of a list of a
    // quarter million keys; an IN list's own children are never rewritten.
    let Some(list) = e.downcast_ref::<InListExpr>() else {
        let children = e.children();
        if children.is_empty() {
            return Ok(e);
        }
        let mut changed = false;
        let mut new_children = Vec::with_capacity(children.len());
        for c in children {
            let n = compact_in_lists(c.clone(), max_in)?;
            changed |= !Arc::ptr_eq(&n, c);
            new_children.push(n);
        }
        return if changed {
            e.with_new_children(new_children)
        } else {
            Ok(e)
        };
    };
    if list.negated() {
        return Ok(e);
    }
    let Some(values) = literal_values(list.list()) else {
        return Ok(e);
    };
    if let Some(b) = BitmapFilterExpr::build(list.expr().clone(), &values)
        && b.wire_len() <= (64 << 10).max(16 * list.len())
    {
        return Ok(Arc::new(b));
    }
    if list.len() <= max_in {
        return Ok(e);
    }
    Ok(match BloomFilterExpr::build(list.expr().clone(), &values) {
        Some(b) => Arc::new(b),
        None => e,
    })
}

/// The values of an IN list of literals as one array. Integer and date keys
/// (the usual join keys, in lists of up to `MAX_FILTER_KEYS`) are copied
/// straight into their array, without a `ScalarValue` per key.
fn literal_values(list: &[Arc<dyn PhysicalExpr>]) -> Option<ArrayRef> {
    let values = || {
        list.iter()
            .map(|e| e.downcast_ref::<Literal>().map(|l| l.value()))
    };
    macro_rules! typed {
        ($variant:ident, $array:ty) => {{
            let keys = values()
                .map(|v| match v {
                    Some(ScalarValue::$variant(k)) => Some(*k),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>();
            if let Some(keys) = keys {
                return Some(Arc::new(<$array>::from(keys)));
            }
        }};
    }
    match values().next().flatten() {
        Some(ScalarValue::Int32(_)) => typed!(Int32, arrow::array::Int32Array),
        Some(ScalarValue::Int64(_)) => typed!(Int64, arrow::array::Int64Array),
        Some(ScalarValue::Date32(_)) => typed!(Date32, arrow::array::Date32Array),
        _ => {}
    }
    let scalars = values().map(|v| v.cloned()).collect::<Option<Vec<_>>>()?;
    ScalarValue::iter_to_array(scalars).ok()
}

/// Adds `filter` (over the scan's output columns) to the filter directly
/// above each `OlapScanExec` of `plan`, or puts a filter there.
pub fn inject(
    plan: Arc<dyn ExecutionPlan>,
    filter: &Arc<dyn PhysicalExpr>,
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(f) = plan.downcast_ref::<FilterExec>()
        && f.input().downcast_ref::<OlapScanExec>().is_some()
    {
        if f.projection().is_some() || !fits(filter, f.input()) {
            return Ok(plan);
        }
        let pred = conjunction([f.predicate().clone(), filter.clone()]);
        return Ok(Arc::new(FilterExec::try_new(pred, f.input().clone())?));
    }
    if plan.downcast_ref::<OlapScanExec>().is_some() {
        if !fits(filter, &plan) {
            return Ok(plan);
        }
        return Ok(Arc::new(FilterExec::try_new(filter.clone(), plan)?));
    }
    let children: Vec<Arc<dyn ExecutionPlan>> = plan.children().into_iter().cloned().collect();
    if children.is_empty() {
        return Ok(plan);
    }
    let children = children
        .into_iter()
        .map(|c| inject(c, filter))
        .collect::<Result<Vec<_>>>()?;
    replace_children_if_necessary(plan, children)
}

/// Whether every column `filter` reads is the same column of `scan`'s output.
fn fits(filter: &Arc<dyn PhysicalExpr>, scan: &Arc<dyn ExecutionPlan>) -> bool {
    let schema = scan.schema();
    collect_columns(filter).iter().all(|c| {
        schema
            .fields()
            .get(c.index())
            .is_some_and(|f| f.name() == c.name())
    })
}

/// Keeps only the runtime filters of hash joins, and drops those of joins
/// whose build side reads whole tables:
/// their keys are every key the table has, so the filter would cost a check
/// per probe row and drop nothing (Doris prunes these too). Runs after
/// DataFusion has pushed the dynamic filters down; a join whose filter no
/// scan holds does not compute it.
#[derive(Debug, Default)]
pub struct PruneUselessRuntimeFilters;

impl PhysicalOptimizerRule for PruneUselessRuntimeFilters {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        // The join filters worth applying.
        let mut useful = HashSet::new();
        plan.apply(|p| {
            if let Some(j) = p.downcast_ref::<HashJoinExec>()
                && !reads_whole_tables(j.left())
            {
                useful.extend(
                    j.dynamic_expressions_produced()
                        .iter()
                        .filter_map(|d| d.expression_id()),
                );
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
        Ok(plan
            .transform_up(|p| {
                let Some(be) = p.downcast_ref::<BeFragmentExec>() else {
                    return Ok(Transformed::no(p));
                };
                // Dropped too: dynamic filters of other operators (a TopK
                // sort's threshold), which are complete only once the scan
                // has been read, so a scan would wait on them in vain.
                let drop: HashSet<u64> = be
                    .runtime_filters()
                    .iter()
                    .filter_map(|f| f.expression_id())
                    .filter(|id| !useful.contains(id))
                    .collect();
                match be.without_runtime_filters(&drop) {
                    Some(n) => Ok(Transformed::yes(Arc::new(n) as Arc<dyn ExecutionPlan>)),
                    None => Ok(Transformed::no(p)),
                }
            })?
            .data)
    }

    fn name(&self) -> &str {
        "tethys_prune_useless_runtime_filters"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Whether `plan` returns every row of the tables it scans: only scans
/// without predicates (or runtime filters) under operators that keep rows.
fn reads_whole_tables(plan: &Arc<dyn ExecutionPlan>) -> bool {
    if let Some(be) = plan.downcast_ref::<BeFragmentExec>() {
        // A fragment that aggregates and filters the groups (a colocated
        // GROUP BY ... HAVING) does not return every key of its table.
        return be.info.predicates.is_empty()
            && be.runtime_filters().is_empty()
            && be
                .fragments()
                .iter()
                .all(|(_, f)| super::explain::over_scan(f));
    }
    super::explain::transparent(plan) && plan.children().iter().all(|c| reads_whole_tables(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::physical_expr::expressions::{DynamicFilterPhysicalExpr, col, in_list, lit};

    #[test]
    fn in_lists_become_bitmaps_or_bloom_filters_and_true_parts_drop() {
        let schema = Schema::new(vec![Field::new("k", DataType::Int64, false)]);
        let k = col("k", &schema).unwrap();
        let filter_of = |values: Vec<i64>| {
            let dynamic = Arc::new(DynamicFilterPhysicalExpr::new(vec![k.clone()], lit(true)));
            let as_expr: Arc<dyn PhysicalExpr> = dynamic.clone();
            // Before the build side reports, the filter is just `true`: nothing to ship.
            assert!(current_filter(&[as_expr.clone()], 4).unwrap().is_none());
            let values: Vec<Arc<dyn PhysicalExpr>> = values.into_iter().map(lit).collect();
            let list = in_list(k.clone(), values, &false, &schema).unwrap();
            dynamic.update(conjunction([lit(true), list])).unwrap();
            as_expr
        };
        // Dense integer keys: an exact bitmap whatever the list length.
        let dense = filter_of((0..10).collect());
        let f = current_filter(&[dense], 100).unwrap().unwrap();
        assert!(f.downcast_ref::<BitmapFilterExpr>().is_some(), "{f}");
        // Sparse keys: the IN list stays up to max_in values, a bloom filter beyond.
        let sparse = filter_of((0..10).map(|i| i * 1_000_000_007).collect());
        let f = current_filter(&[sparse.clone()], 100).unwrap().unwrap();
        assert!(f.downcast_ref::<InListExpr>().is_some(), "{f}");
        let f = current_filter(&[sparse], 4).unwrap().unwrap();
        assert!(f.downcast_ref::<BloomFilterExpr>().is_some(), "{f}");
        let batch = arrow::record_batch::RecordBatch::try_new(
            Arc::new(schema.clone()),
            vec![Arc::new(Int64Array::from(vec![3_000_000_021, 5]))],
        )
        .unwrap();
        let out = f.evaluate(&batch).unwrap().into_array(2).unwrap();
        assert!(out.as_boolean().value(0));
    }
}

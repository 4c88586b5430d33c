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

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::datatypes::Schema;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::{PhysicalExpr, conjunction, split_conjunction};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::execution_plan::replace_children_if_necessary;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion_proto::physical_plan::to_proto::serialize_physical_expr;
use tethys_common::plan::{OlapScanExec, TethysCodec};

use super::remote::BeFragmentExec;
use tethys_common::plan::build_keys::{BuildKeys, BuildKeysExec, join_collectors, join_filter_ids};

pub use tethys_common::plan::runtime_filters::wait_complete;
use tethys_common::plan::runtime_filters::{Uncollected, filter_now, is_true};

/// The filter the fragment's scan should apply now: every accepted runtime
/// filter as it currently stands, with the joins' hash-table lookups
/// replaced by the key sets collected from their build sides (`build_keys`,
/// by filter id; a bitmap, an IN list of up to `max_in` values or a bloom
/// filter), and parts that are trivially true or cannot be sent to a
/// backend left out. `None` when nothing is left.
pub fn current_filter(
    filters: &[Arc<dyn PhysicalExpr>],
    build_keys: &HashMap<u64, Arc<BuildKeys>>,
    schema: &Schema,
    max_in: usize,
) -> Result<Option<Arc<dyn PhysicalExpr>>> {
    let mut parts: Vec<Arc<dyn PhysicalExpr>> = vec![];
    for f in filters {
        let now = filter_now(f, build_keys, schema, max_in, Uncollected::True)?;
        for c in split_conjunction(&now) {
            if is_true(c) {
                continue;
            }
            if serialize_physical_expr(c, &TethysCodec).is_ok() {
                parts.push(c.clone());
            }
        }
    }
    Ok((!parts.is_empty()).then(|| conjunction(parts)))
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

/// Plans the runtime filters. Keeps only those of hash joins, and drops
/// those of joins whose build side reads whole tables: their keys are every
/// key the table has, so the filter would cost a check per probe row and
/// drop nothing (Doris prunes these too). For each join whose filter a
/// backend scan holds, puts a [`BuildKeysExec`] over the build side and
/// gives the scan its [`BuildKeys`], from which the filter's key set is
/// built. Runs after DataFusion has pushed the dynamic filters down; a join
/// whose filter no scan holds does not compute it.
#[derive(Debug, Default)]
pub struct PlanRuntimeFilters;

impl PhysicalOptimizerRule for PlanRuntimeFilters {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        // The join filters worth applying, with their key collectors.
        let useful = join_collectors(&plan, |j| !reads_whole_tables(j.left()))?;
        // Bottom-up: a join's probe-side scans come before the join.
        let mut held = HashSet::new();
        Ok(plan
            .transform_up(|p| {
                if let Some(j) = p.downcast_ref::<HashJoinExec>() {
                    let Some(keys) = join_filter_ids(j)
                        .into_iter()
                        .filter(|id| held.contains(id))
                        .find_map(|id| useful.get(&id))
                    else {
                        return Ok(Transformed::no(p));
                    };
                    let build = collecting(j.left(), keys.clone())?;
                    let probe = j.right().clone();
                    return Ok(Transformed::yes(replace_children_if_necessary(
                        p,
                        vec![build, probe],
                    )?));
                }
                let Some(be) = p.downcast_ref::<BeFragmentExec>() else {
                    return Ok(Transformed::no(p));
                };
                // Dropped too: dynamic filters of other operators (a TopK
                // sort's threshold), which are complete only once the scan
                // has been read, so a scan would wait on them in vain.
                let ids: Vec<u64> = be
                    .runtime_filters()
                    .iter()
                    .filter_map(|f| f.expression_id())
                    .collect();
                let drop: HashSet<u64> = ids
                    .iter()
                    .copied()
                    .filter(|id| !useful.contains_key(id))
                    .collect();
                let keys: HashMap<u64, Arc<BuildKeys>> = ids
                    .iter()
                    .filter_map(|id| Some((*id, useful.get(id)?.clone())))
                    .collect();
                held.extend(keys.keys().copied());
                if drop.is_empty() && keys.is_empty() {
                    return Ok(Transformed::no(p));
                }
                Ok(Transformed::yes(
                    Arc::new(be.planned_runtime_filters(&drop, keys)) as Arc<dyn ExecutionPlan>,
                ))
            })?
            .data)
    }

    fn name(&self) -> &str {
        "tethys_plan_runtime_filters"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `build` (a join's build side) under a collector of its keys; one that
/// merges its partitions (a broadcast join's) with the collector below the
/// merge, over every partition: the distributed planner then broadcasts
/// the partitions from the stage that reads them, where a collector on top
/// made it add a stage of one task to merge them first (SSB q2.1: three
/// such stages, each a hop between backends more).
fn collecting(
    build: &Arc<dyn ExecutionPlan>,
    keys: Arc<BuildKeys>,
) -> Result<Arc<dyn ExecutionPlan>> {
    match build.downcast_ref::<CoalescePartitionsExec>() {
        // A merge with a limit may leave partitions unread, and keys
        // collected below it would never be complete: those go above.
        Some(merge) if merge.fetch().is_none() => {
            let collector = Arc::new(BuildKeysExec::new(merge.input().clone(), keys));
            replace_children_if_necessary(build.clone(), vec![collector])
        }
        _ => Ok(Arc::new(BuildKeysExec::new(build.clone(), keys))),
    }
}

/// Whether `plan` returns every row of the tables it scans: only scans
/// without predicates (or runtime filters) under operators that keep rows.
pub(super) fn reads_whole_tables(plan: &Arc<dyn ExecutionPlan>) -> bool {
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
    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field};
    use arrow::record_batch::RecordBatch;
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{BinaryExpr, DynamicFilterPhysicalExpr, col, lit};
    use datafusion::physical_plan::test::TestMemoryExec;
    use futures::StreamExt;

    /// `runtime_filter_wait_time_ms`: a scan waits for a join still
    /// building its filter that long and no longer, and not at all for one
    /// that has finished.
    #[tokio::test]
    async fn a_scan_waits_for_runtime_filters_as_long_as_the_variable_says() {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        let k = col("k", &schema).unwrap();
        let dynamic = Arc::new(DynamicFilterPhysicalExpr::new(vec![k], lit(true)));
        let filters: Vec<Arc<dyn PhysicalExpr>> = vec![dynamic.clone()];
        let wait = std::time::Duration::from_millis(300);
        let started = std::time::Instant::now();
        wait_complete(&filters, wait).await;
        let waited = started.elapsed();
        assert!(waited >= wait, "{waited:?}");
        assert!(waited < std::time::Duration::from_secs(30), "{waited:?}");
        dynamic.mark_complete();
        let long = std::time::Duration::from_secs(3600);
        tokio::time::timeout(
            std::time::Duration::from_secs(30),
            wait_complete(&filters, long),
        )
        .await
        .expect("a complete filter is not waited for");
    }

    #[tokio::test]
    async fn a_filter_ships_its_bounds_and_never_its_true_parts() {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        let k = col("k", &schema).unwrap();
        let dynamic = Arc::new(DynamicFilterPhysicalExpr::new(vec![k.clone()], lit(true)));
        let as_expr: Arc<dyn PhysicalExpr> = dynamic.clone();
        let none = HashMap::new();
        // Before the build side reports, the filter is just `true`: nothing to ship.
        assert!(
            current_filter(std::slice::from_ref(&as_expr), &none, &schema, 4)
                .unwrap()
                .is_none()
        );
        let bounds = conjunction([
            Arc::new(BinaryExpr::new(k.clone(), Operator::GtEq, lit(3i64))) as _,
            lit(true),
            Arc::new(BinaryExpr::new(k.clone(), Operator::LtEq, lit(9i64))) as _,
        ]);
        dynamic.update(bounds).unwrap();
        let f = current_filter(std::slice::from_ref(&as_expr), &none, &schema, 4)
            .unwrap()
            .unwrap();
        assert_eq!(split_conjunction(&f).len(), 2, "{f}");

        // Keys collected from a build side that has not finished are not used.
        let keys = Arc::new(BuildKeys::try_new(vec![k.clone()], &schema).unwrap());
        let batch =
            RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(vec![3, 9]))])
                .unwrap();
        let input = TestMemoryExec::try_new_exec(&[vec![batch]], schema.clone(), None).unwrap();
        let exec = BuildKeysExec::new(input, keys.clone());
        let ctx = Arc::new(datafusion::execution::TaskContext::default());
        let mut stream = exec.execute(0, ctx).unwrap();
        assert!(stream.next().await.unwrap().is_ok());
        assert!(!keys.complete());
        assert!(stream.next().await.is_none());
        assert!(keys.complete());
        assert_eq!(keys.rows(), 2);
    }
}

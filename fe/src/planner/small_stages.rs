//! Stages too small to spread: one task, folded into their consumer when
//! that runs one too (the FE's own stage).
//!
//! ```sql
//! -- TPC-H q01: four groups
//! SELECT l_returnflag, l_linestatus, sum(l_quantity), ... FROM lineitem
//! WHERE l_shipdate <= date '1998-12-01' - interval '90' day
//! GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus;
//! ```
//!
//! On three backends the final aggregation of those groups ran as a stage
//! of three tasks: every task its own session and plan on its backend, and
//! a stream from every producer task to every consumer task (nine per
//! exchange) for a few dozen rows; per-task and per-stream costs are most
//! of what three BEs spend beyond one process on small queries
//! (`benches/results/tpch-sf1-be3-2026-12-07-022701-notes.md`). An
//! aggregation or a join whose inputs are all hash exchanges (a stage with
//! no scan of its own starts there) and are expected to bring at most
//! `small_stage_row_limit` rows (Tethys' own variable, 0: off) is asked for
//! one task; datafusion-distributed folds a one-task stage into a one-task
//! consumer, so such a stage under the FE's head runs there, and its
//! producers send it one stream each.
//!
//! The estimate is an upper bound where one is known (a scan's estimated
//! rows, filters and aggregations keep at most their input, an aggregation
//! at most its group columns' distinct values, a semi or anti join its
//! preserved side); an inner equi-join keeps `left x right / the key's
//! distinct values` (a foreign key meeting a filtered primary key keeps
//! that share of its rows; the larger input without statistics), an outer
//! join at least its preserved side; a node it does not know (a cross
//! join, a scan without statistics) makes the stage not small.

use std::sync::Arc;

use datafusion::common::JoinType;
use datafusion::error::Result as DfResult;
use datafusion::physical_expr::PhysicalExprRef;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::Partitioning;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::execution_plan::CardinalityEffect;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::{HashJoinExec, SortMergeJoinExec, SymmetricHashJoinExec};
use datafusion::physical_plan::limit::{GlobalLimitExec, LocalLimitExec};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::union::UnionExec;
use datafusion_distributed::DesiredTaskCountEventResponse;
use tethys_common::plan::build_keys::BuildKeysExec;

use super::remote::BeFragmentExec;

/// Session config extension: `small_stage_row_limit` of the statement.
#[derive(Debug, Clone, Copy)]
pub struct SmallStageRows(pub usize);

/// One task for `plan`, an aggregation or a join every input of which is a
/// hash exchange (the stage above them starts here, with no scan of its
/// own), when the rows they are expected to bring together are at most
/// `limit`.
pub fn one_task(
    plan: &Arc<dyn ExecutionPlan>,
    limit: usize,
) -> Option<DfResult<DesiredTaskCountEventResponse>> {
    // An aggregation or a join over hash exchanges only: a node passing
    // rows on (a key collector over a bucket shuffle's moving side) may
    // sit in a stage whose scans are below its parent.
    let works = plan.is::<AggregateExec>()
        || plan.is::<HashJoinExec>()
        || plan.is::<SortMergeJoinExec>()
        || plan.is::<SymmetricHashJoinExec>();
    let children = plan.children();
    if limit == 0 || !works || !children.iter().all(|c| is_hash_exchange(c)) {
        return None;
    }
    let mut rows = 0usize;
    for c in children {
        rows = rows.saturating_add(rows_at_most(c)?);
    }
    tracing::debug!(
        "{} over exchanges expected to receive {rows} rows",
        plan.name()
    );
    (rows <= limit).then(|| Ok(DesiredTaskCountEventResponse::maximum(1)))
}

/// A hash exchange, under nodes passing its rows on (a projection, a
/// filter, a runtime filter's key collector).
fn is_hash_exchange(plan: &Arc<dyn ExecutionPlan>) -> bool {
    if let Some(r) = plan.downcast_ref::<RepartitionExec>() {
        return matches!(r.partitioning(), Partitioning::Hash(..));
    }
    let passes =
        plan.is::<ProjectionExec>() || plan.is::<FilterExec>() || plan.is::<BuildKeysExec>();
    match plan.children().as_slice() {
        [only] if passes => is_hash_exchange(only),
        _ => false,
    }
}

/// Rows `plan` is expected to produce at most; `None`: not known.
fn rows_at_most(plan: &Arc<dyn ExecutionPlan>) -> Option<usize> {
    if let Some(scan) = plan.downcast_ref::<BeFragmentExec>() {
        let rows = scan.estimate(None).num_rows.get_value().copied()?;
        // A fragment that aggregates does so partially.
        return Some(match scan.aggregate() {
            Some(agg) => capped_by_groups(rows, agg, plan, |name| scan.column_ndv(name)),
            None => rows,
        });
    }
    let children = plan.children();
    let side = |i: usize| children.get(i).and_then(|c| rows_at_most(c));
    if let Some(j) = plan.downcast_ref::<HashJoinExec>() {
        let keys = key_ndv(&children, j.on());
        return join_rows(j.join_type(), side(0)?, side(1)?, keys);
    }
    if let Some(j) = plan.downcast_ref::<SortMergeJoinExec>() {
        let keys = key_ndv(&children, j.on());
        return join_rows(&j.join_type(), side(0)?, side(1)?, keys);
    }
    if let Some(j) = plan.downcast_ref::<SymmetricHashJoinExec>() {
        let keys = key_ndv(&children, j.on());
        return join_rows(j.join_type(), side(0)?, side(1)?, keys);
    }
    if plan.is::<UnionExec>() {
        return children
            .iter()
            .try_fold(0usize, |n, c| Some(n.saturating_add(rows_at_most(c)?)));
    }
    let fetch = plan
        .downcast_ref::<GlobalLimitExec>()
        .and_then(|l| l.fetch())
        .or_else(|| plan.downcast_ref::<LocalLimitExec>().map(|l| l.fetch()));
    match children.as_slice() {
        // Leaves other than scans (VALUES, a constant row).
        [] => None,
        // Filters, projections, aggregations, sorts, exchanges, limits: at
        // most their input (an unnest: not known).
        [_] if matches!(plan.cardinality_effect(), CardinalityEffect::GreaterEqual) => None,
        [only] => {
            let mut rows = rows_at_most(only)?;
            if let Some(agg) = plan.downcast_ref::<AggregateExec>() {
                rows = capped_by_groups(rows, agg, only, |name| ndv_below(only, name));
            }
            Some(fetch.map_or(rows, |f| rows.min(f)))
        }
        // Other nodes of several inputs (cross joins, nested loops).
        _ => None,
    }
}

/// `rows` of `agg`'s input `input`, at most its groups: once per input
/// partition for a partial aggregation (each partition sends its own).
fn capped_by_groups(
    rows: usize,
    agg: &AggregateExec,
    input: &Arc<dyn ExecutionPlan>,
    ndv: impl Fn(&str) -> Option<u64>,
) -> usize {
    let Some(groups) = groups_at_most(agg, ndv) else {
        return rows;
    };
    let per = match agg.mode() {
        AggregateMode::Partial => input.properties().partitioning.partition_count(),
        _ => 1,
    };
    rows.min(groups.saturating_mul(per))
}

/// Groups of `agg` at most: the product of its group columns' distinct
/// values (`ANALYZE TABLE`, by `ndv`); `None` when a group key is not a
/// column with statistics.
fn groups_at_most(agg: &AggregateExec, ndv: impl Fn(&str) -> Option<u64>) -> Option<usize> {
    let keys = agg.group_expr();
    if keys.expr().is_empty() {
        return Some(1);
    }
    if keys.has_grouping_set() {
        return None;
    }
    keys.expr().iter().try_fold(1usize, |n, (e, _)| {
        let col = e.downcast_ref::<Column>()?;
        let ndv = usize::try_from(ndv(col.name())?).ok()?;
        Some(n.saturating_mul(ndv.max(1)))
    })
}

/// Distinct values of the column `name` in the first scan below `plan`
/// whose statistics know it.
fn ndv_below(plan: &Arc<dyn ExecutionPlan>, name: &str) -> Option<u64> {
    if let Some(scan) = plan.downcast_ref::<BeFragmentExec>() {
        return scan.column_ndv(name);
    }
    plan.children().into_iter().find_map(|c| ndv_below(c, name))
}

/// The distinct values an equi-join's key takes, for its selectivity: for
/// each key pair of columns the larger of the two sides' distinct values
/// (a foreign key meets the primary key it refers to), the smallest over
/// the pairs (the least selective); `None` when a key is not a column with
/// statistics on both sides.
fn key_ndv(
    sides: &[&Arc<dyn ExecutionPlan>],
    on: &[(PhysicalExprRef, PhysicalExprRef)],
) -> Option<u64> {
    let [left, right] = sides else { return None };
    let ndv = |side: &Arc<dyn ExecutionPlan>, e: &PhysicalExprRef| {
        ndv_below(side, e.downcast_ref::<Column>()?.name())
    };
    on.iter()
        .map(|(l, r)| Some(ndv(left, l)?.max(ndv(right, r)?)))
        .collect::<Option<Vec<u64>>>()?
        .into_iter()
        .min()
}

/// Rows of an equi-join of `left` and `right` rows: the preserved side of
/// a semi or anti join, both sides of a full join; for an inner join
/// `left x right / keys` when the key's distinct values are known (SSB
/// q3.4: lineorder's 6 M rows meeting 2 of 250 cities' customers keep
/// that share), else the larger side; an outer join at least its
/// preserved side.
fn join_rows(join: &JoinType, left: usize, right: usize, keys: Option<u64>) -> Option<usize> {
    let inner = match keys {
        Some(k) if k > 0 => {
            let rows = (left as u128).saturating_mul(right as u128) / k as u128;
            usize::try_from(rows).unwrap_or(usize::MAX)
        }
        _ => left.max(right),
    };
    Some(match join {
        JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark => left,
        JoinType::RightSemi | JoinType::RightAnti | JoinType::RightMark => right,
        JoinType::Full => left.saturating_add(right),
        JoinType::Inner => inner,
        JoinType::Left => inner.max(left),
        JoinType::Right => inner.max(right),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_keep_their_preserved_or_larger_side() {
        assert_eq!(join_rows(&JoinType::Inner, 10, 1000, None), Some(1000));
        assert_eq!(join_rows(&JoinType::LeftSemi, 10, 1000, None), Some(10));
        assert_eq!(join_rows(&JoinType::RightAnti, 10, 1000, None), Some(1000));
        assert_eq!(join_rows(&JoinType::Full, 10, 1000, None), Some(1010));
    }

    #[test]
    fn an_inner_join_keeps_the_share_its_keys_select() {
        // 6 M fact rows meeting 1,200 of 150,000 customers.
        let rows = join_rows(&JoinType::Inner, 6_000_000, 1_200, Some(150_000));
        assert_eq!(rows, Some(48_000));
        // A left join keeps every left row; semi joins are unchanged.
        assert_eq!(
            join_rows(&JoinType::Left, 6_000_000, 1_200, Some(150_000)),
            Some(6_000_000)
        );
        assert_eq!(
            join_rows(&JoinType::LeftSemi, 500, 1_200, Some(150_000)),
            Some(500)
        );
        // Unknown distinct values: the larger side, as before.
        assert_eq!(
            join_rows(&JoinType::Inner, 6_000, 1_200, Some(0)),
            Some(6_000)
        );
    }
}

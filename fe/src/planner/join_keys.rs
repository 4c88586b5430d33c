//! Hash join keys that let the runtime filter reach a scan.
//!
//! A join's runtime filter covers all its key columns at once. When the
//! probe-side keys come from different inputs below (TPC-H q05: supplier is
//! joined on `l_suppkey = s_suppkey AND c_nationkey = s_nationkey`, with
//! `l_suppkey` from lineitem and `c_nationkey` from customer, joined
//! further down), no single scan holds all of them and the filter stops at
//! the join below: lineitem is read whole although only a fifth of its
//! suppliers qualify. This rule keeps as hash keys only the pairs whose
//! probe columns come from the biggest input and checks the others as the
//! join's filter, which is equivalent for every row: a filter on `l_suppkey`
//! alone then reaches the lineitem scan. Grouping columns count as their
//! input's: q02's decorrelated `min(ps_supplycost)` per part is semi-joined
//! on `ps_partkey` and the minimum; keyed on `ps_partkey` alone, the filter
//! passes the aggregation and reaches partsupp's scan.

use std::sync::Arc;

use arrow::datatypes::{Field, Schema};
use datafusion::common::JoinSide;
use datafusion::common::JoinType;
use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{BinaryExpr, Column};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::joins::utils::{ColumnIndex, JoinFilter};
use datafusion::physical_plan::projection::ProjectionExec;

use super::join_order::{estimate_rows, rewrite_hash_joins};

/// Moves the hash key pairs whose probe columns come from other inputs than
/// the biggest one into the join filter (inner and semi joins).
#[derive(Debug, Default)]
pub struct KeyOnOneProbeInput;

impl PhysicalOptimizerRule for KeyOnOneProbeInput {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        rewrite_hash_joins(plan, split_keys)
    }

    fn name(&self) -> &str {
        "tethys_key_on_one_probe_input"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

fn split_keys(j: &HashJoinExec) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    // For inner and semi joins a row pair matching the hash keys and the
    // filter is exactly one matching all equalities.
    let kind_ok = matches!(
        j.join_type(),
        JoinType::Inner | JoinType::LeftSemi | JoinType::RightSemi
    );
    if j.on().len() < 2 || !kind_ok || j.null_aware {
        return Ok(None);
    }
    // The probe-side input each pair's probe column comes from.
    let mut sources = Vec::with_capacity(j.on().len());
    for (l, r) in j.on() {
        let (Some(_), Some(rc)) = (l.downcast_ref::<Column>(), r.downcast_ref::<Column>()) else {
            return Ok(None);
        };
        let Some(src) = source_of(j.right(), rc.index()) else {
            return Ok(None);
        };
        sources.push(src);
    }
    let first = &sources[0];
    if sources.iter().all(|s| Arc::ptr_eq(s, first)) {
        tracing::debug!(on = ?j.on(), "join keys: one probe input");
        return Ok(None);
    }
    let Some(biggest) = sources
        .iter()
        .max_by(|a, b| estimate_rows(a).total_cmp(&estimate_rows(b)))
        .cloned()
    else {
        return Ok(None);
    };
    let (mut keep, mut moved) = (vec![], vec![]);
    for (pair, src) in j.on().iter().zip(&sources) {
        if Arc::ptr_eq(src, &biggest) {
            keep.push(pair.clone());
        } else {
            moved.push(pair.clone());
        }
    }
    // The moved pairs become `left = right` terms of the join filter, over
    // columns appended to the filter's own schema.
    let (mut expr, mut indices, mut fields) = match j.filter() {
        Some(f) => (
            Some(f.expression().clone()),
            f.column_indices().to_vec(),
            f.schema().fields().iter().cloned().collect::<Vec<_>>(),
        ),
        None => (None, vec![], vec![]),
    };
    let (ls, rs) = (j.left().schema(), j.right().schema());
    for (l, r) in &moved {
        let (Some(lc), Some(rc)) = (l.downcast_ref::<Column>(), r.downcast_ref::<Column>()) else {
            return Ok(None);
        };
        let mut term_side = |side: JoinSide, index: usize, field: &Field| {
            let at = fields.len();
            let name = format!("{}#{at}", field.name());
            fields.push(Arc::new(field.clone().with_name(name.clone())));
            indices.push(ColumnIndex { index, side });
            Arc::new(Column::new(&name, at)) as Arc<dyn PhysicalExpr>
        };
        let le = term_side(JoinSide::Left, lc.index(), ls.field(lc.index()));
        let re = term_side(JoinSide::Right, rc.index(), rs.field(rc.index()));
        let eq = Arc::new(BinaryExpr::new(le, Operator::Eq, re)) as Arc<dyn PhysicalExpr>;
        expr = Some(match expr {
            Some(e) => Arc::new(BinaryExpr::new(e, Operator::And, eq)),
            None => eq,
        });
    }
    let Some(expr) = expr else {
        return Ok(None);
    };
    let filter = JoinFilter::new(expr, indices, Arc::new(Schema::new(fields)));
    Ok(Some(
        j.builder()
            .with_on(keep)
            .with_filter(Some(filter))
            .build_exec()?,
    ))
}

/// The input below `plan` that column `index` of its output comes from:
/// followed through joins, column projections, filters and operators that
/// pass their input's columns through, and an aggregation's grouping
/// columns; the node where it stops (a backend fragment, an aggregate
/// value, a computed column) is the source.
fn source_of(plan: &Arc<dyn ExecutionPlan>, index: usize) -> Option<Arc<dyn ExecutionPlan>> {
    if let Some(j) = plan.downcast_ref::<HashJoinExec>() {
        let at = match j.projection.as_deref() {
            Some(p) => *p.get(index)?,
            None => index,
        };
        let left_len = j.left().schema().fields().len();
        let right_len = j.right().schema().fields().len();
        // Output columns before projection (DataFusion's join schema).
        let (side, i) = match j.join_type() {
            JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full => {
                if at < left_len {
                    (JoinSide::Left, at)
                } else {
                    (JoinSide::Right, at - left_len)
                }
            }
            JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark => (JoinSide::Left, at),
            JoinType::RightSemi | JoinType::RightAnti | JoinType::RightMark => {
                (JoinSide::Right, at)
            }
        };
        return match side {
            JoinSide::Left if i < left_len => source_of(j.left(), i),
            JoinSide::Right if i < right_len => source_of(j.right(), i),
            _ => None,
        };
    }
    if let Some(p) = plan.downcast_ref::<ProjectionExec>() {
        let e = &p.expr().get(index)?.expr;
        return match e.downcast_ref::<Column>() {
            Some(c) => source_of(p.input(), c.index()),
            None => Some(plan.clone()),
        };
    }
    if let Some(f) = plan.downcast_ref::<FilterExec>() {
        let at = match f.projection() {
            Some(p) => *p.get(index)?,
            None => index,
        };
        return source_of(f.input(), at);
    }
    if let Some(a) = plan.downcast_ref::<AggregateExec>() {
        // A grouping column is its input's column; an aggregate value is
        // made here.
        let groups = a.group_expr().expr();
        return match groups.get(index).map(|(e, _)| e.downcast_ref::<Column>()) {
            Some(Some(c)) if a.group_expr().groups().len() <= 1 => source_of(a.input(), c.index()),
            _ => Some(plan.clone()),
        };
    }
    let children = plan.children();
    match children.as_slice() {
        [child] if is_pass_through(plan.name()) => source_of(child, index),
        _ => Some(plan.clone()),
    }
}

/// Operators whose output columns are their input's, in order.
fn is_pass_through(name: &str) -> bool {
    matches!(
        name,
        "RepartitionExec"
            | "CoalesceBatchesExec"
            | "CoalescePartitionsExec"
            | "SortExec"
            | "SortPreservingMergeExec"
            | "GlobalLimitExec"
            | "LocalLimitExec"
            | "CooperativeExec"
    )
}

//! Aggregates a scan answers itself (Doris' `pushAggOp`).
//!
//! An ungrouped first-phase aggregate directly over a scan (`SELECT
//! count(*), sum(v), min(k) FROM t`) needs no rows: a count is the tablets'
//! row counts minus nulls, a minimum or maximum is in the zone maps, and a
//! sum can be taken from the encoded pages (a FOR page's sum is its row
//! count times its reference plus the sum of its packed deltas) without
//! building Arrow arrays. The FE decides (this module's [`pushable`], gated by
//! `enable_pushdown_agg_to_scan`) and marks the scan's `push_agg`; a backend
//! binding the fragment checks the same shape again and runs the pair as
//! one storage operator that yields the aggregate's partial state.

use std::sync::Arc;

use arrow::datatypes::{DataType, TimeUnit};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{CastExpr, Column, Literal};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::projection::ProjectionExec;

use super::OlapScanExec;

/// What one pushed aggregate computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushedAggKind {
    /// `count(*)` (or `count` of a constant).
    CountRows,
    /// `count(col)`: rows where the column is not NULL.
    Count,
    /// `sum(col)` of an integer (as BIGINT) or DECIMAL column.
    Sum,
    Min,
    Max,
}

/// One aggregate of a pushed-down aggregation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushedAgg {
    pub kind: PushedAggKind,
    /// The table column it reads (`None` for `count(*)`).
    pub column: Option<usize>,
    /// The Arrow type of its partial state (the aggregate's output field).
    pub state_type: DataType,
}

/// The aggregates of `agg` and the scan under it, when `agg` is an
/// ungrouped partial aggregate of `count`, `sum`, `min` and `max` over plain
/// columns of a scan (through projections that only pick columns) of a
/// table whose rows need no merging on read. `None` otherwise.
pub fn pushable(agg: &AggregateExec) -> Option<(Vec<PushedAgg>, &OlapScanExec)> {
    if *agg.mode() != AggregateMode::Partial
        || !agg.group_expr().is_empty()
        || agg.filter_expr().iter().any(Option::is_some)
    {
        return None;
    }
    // The table column behind each output column of the aggregate's input.
    let mut input: &Arc<dyn ExecutionPlan> = agg.input();
    let mut maps: Vec<Vec<usize>> = Vec::new();
    let scan = loop {
        if let Some(s) = input.downcast_ref::<OlapScanExec>() {
            break s;
        }
        let p = input.downcast_ref::<ProjectionExec>()?;
        let picks = p
            .expr()
            .iter()
            .map(|e| e.expr.downcast_ref::<Column>().map(Column::index))
            .collect::<Option<Vec<usize>>>()?;
        maps.push(picks);
        input = p.input();
    };
    // A scan with a pushed LIMIT reads some rows, not the table.
    if scan.table_schema().merges_on_read() || scan.node().limit.is_some() {
        return None;
    }
    let projection = scan.projection();
    let table_column = |i: usize| -> Option<usize> {
        let at_scan = maps.iter().try_fold(i, |i, picks| picks.get(i).copied())?;
        projection.get(at_scan).copied()
    };
    let input_schema = agg.input().schema();
    let out = agg.schema();
    if out.fields().len() != agg.aggr_expr().len() {
        return None;
    }
    let mut aggs = Vec::with_capacity(agg.aggr_expr().len());
    for (f, field) in agg.aggr_expr().iter().zip(out.fields()) {
        if f.is_distinct() {
            return None;
        }
        let [arg] = f.expressions().try_into().ok()?;
        let state_type = field.data_type().clone();
        let column_of = |e: &Arc<dyn PhysicalExpr>| {
            let c = e.downcast_ref::<Column>()?;
            let dt = input_schema.fields().get(c.index())?.data_type().clone();
            Some((table_column(c.index())?, dt))
        };
        let (kind, column) = match f.fun().name() {
            "count" => match arg.downcast_ref::<Literal>() {
                Some(l) if !l.value().is_null() => (PushedAggKind::CountRows, None),
                Some(_) => return None,
                None => (PushedAggKind::Count, Some(column_of(&arg)?.0)),
            },
            "sum" => {
                // Integers are summed as BIGINT (a cast DataFusion adds).
                let (col, dt) = match arg.downcast_ref::<CastExpr>() {
                    Some(c) if c.cast_type() == &DataType::Int64 => column_of(c.expr())?,
                    Some(_) => return None,
                    None => column_of(&arg)?,
                };
                let ok = match (&dt, &state_type) {
                    (
                        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64,
                        DataType::Int64,
                    ) => true,
                    (DataType::Decimal128(_, s), DataType::Decimal128(_, ss)) => s == ss,
                    _ => false,
                };
                if !ok {
                    return None;
                }
                (PushedAggKind::Sum, Some(col))
            }
            name @ ("min" | "max") => {
                let (col, dt) = column_of(&arg)?;
                if dt != state_type || !exact_bounds(&dt) {
                    return None;
                }
                let kind = if name == "min" {
                    PushedAggKind::Min
                } else {
                    PushedAggKind::Max
                };
                (kind, Some(col))
            }
            _ => return None,
        };
        aggs.push(PushedAgg {
            kind,
            column,
            state_type,
        });
    }
    Some((aggs, scan))
}

/// Types whose zone-map bounds are the exact minimum and maximum (floats
/// are left out: NaN and signed zeros order differently there).
fn exact_bounds(dt: &DataType) -> bool {
    dt.is_signed_integer()
        || matches!(
            dt,
            DataType::Decimal128(_, _)
                | DataType::Date32
                | DataType::Timestamp(TimeUnit::Microsecond, _)
                | DataType::Utf8
                | DataType::Boolean
        )
}

/// Doris' name for what a set of pushed aggregates computes: `COUNT`,
/// `MINMAX`, `SUM` (Tethys' own; Doris pushes no sums) or `MIX`.
pub fn op_name(aggs: &[PushedAgg]) -> &'static str {
    use PushedAggKind::*;
    let all = |f: fn(PushedAggKind) -> bool| aggs.iter().all(|a| f(a.kind));
    if all(|k| matches!(k, CountRows | Count)) {
        "COUNT"
    } else if all(|k| matches!(k, Min | Max)) {
        "MINMAX"
    } else if all(|k| k == Sum) {
        "SUM"
    } else {
        "MIX"
    }
}

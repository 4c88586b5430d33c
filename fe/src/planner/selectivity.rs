//! The share of a table's rows a scan predicate is expected to keep, which
//! decides join build sides and broadcasts.
//!
//! With column statistics from `ANALYZE TABLE` an equality keeps one
//! distinct value's share (`1 / ndv`), `IN` one share per value, and the
//! range bounds on one column (`BETWEEN`, `>= .. AND <`) keep the part of
//! the column's `[min, max]` they cover. Without statistics the estimate
//! comes from the predicate's shape alone: `=` keeps a tenth, a range bound
//! 40%, `IN` a tenth per value, `LIKE` a fifth. TPC-H q08's
//! `p_type = 'ECONOMY ANODIZED STEEL'` is then 1/150 of `part`, not a tenth,
//! which is what puts `lineitem ⋈ part` rather than two years of `orders`
//! on the build side.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{
    BinaryExpr, Column, InListExpr, IsNotNullExpr, IsNullExpr, LikeExpr, Literal, NotExpr,
};

use crate::catalog::ColumnStats;

/// Column statistics of one table, by column name.
pub type ColumnStatsMap = BTreeMap<String, ColumnStats>;

/// The smallest share a shape-only estimate gives; with statistics an
/// equality on a unique column may legitimately keep one row in millions.
const SHAPE_FLOOR: f64 = 0.0005;
const STATS_FLOOR: f64 = 1e-9;

/// Share of rows `expr` keeps, using `stats` where they cover its columns.
pub fn selectivity(expr: &Arc<dyn PhysicalExpr>, stats: &ColumnStatsMap) -> f64 {
    let (s, used_stats) = conjunction(expr, stats);
    s.clamp(if used_stats { STATS_FLOOR } else { SHAPE_FLOOR }, 1.0)
}

/// A value on the axis range predicates compare on: the number for
/// integers, floats and decimals, days for DATE, microseconds for DATETIME.
/// `None` for strings, booleans and anything else without such an axis.
pub fn axis_value(v: &ScalarValue) -> Option<f64> {
    use datafusion::arrow::datatypes::TimeUnit;
    let micros = |v: Option<i64>, unit: TimeUnit| {
        v.map(|v| match unit {
            TimeUnit::Second => v as f64 * 1e6,
            TimeUnit::Millisecond => v as f64 * 1e3,
            TimeUnit::Microsecond => v as f64,
            TimeUnit::Nanosecond => v as f64 / 1e3,
        })
    };
    match v {
        ScalarValue::Int8(v) => v.map(f64::from),
        ScalarValue::Int16(v) => v.map(f64::from),
        ScalarValue::Int32(v) => v.map(f64::from),
        ScalarValue::Int64(v) => v.map(|v| v as f64),
        ScalarValue::UInt8(v) => v.map(f64::from),
        ScalarValue::UInt16(v) => v.map(f64::from),
        ScalarValue::UInt32(v) => v.map(f64::from),
        ScalarValue::UInt64(v) => v.map(|v| v as f64),
        ScalarValue::Float32(v) => v.map(f64::from),
        ScalarValue::Float64(v) => *v,
        ScalarValue::Decimal128(v, _, s) => v.map(|v| v as f64 / 10f64.powi(i32::from(*s))),
        ScalarValue::Date32(v) => v.map(f64::from),
        ScalarValue::Date64(v) => v.map(|ms| (ms as f64 / 86_400_000.0).floor()),
        ScalarValue::TimestampSecond(v, _) => micros(*v, TimeUnit::Second),
        ScalarValue::TimestampMillisecond(v, _) => micros(*v, TimeUnit::Millisecond),
        ScalarValue::TimestampMicrosecond(v, _) => micros(*v, TimeUnit::Microsecond),
        ScalarValue::TimestampNanosecond(v, _) => micros(*v, TimeUnit::Nanosecond),
        _ => None,
    }
    .filter(|f| f.is_finite())
}

/// Selectivity of a conjunction and whether statistics informed it. Range
/// bounds on one analyzed column are combined into one interval first, so
/// `d >= a AND d < b` keeps the interval's share, not the product of two
/// half-lines.
fn conjunction(expr: &Arc<dyn PhysicalExpr>, stats: &ColumnStatsMap) -> (f64, bool) {
    let mut intervals: BTreeMap<&str, (f64, f64, &ColumnStats)> = BTreeMap::new();
    let mut s = 1.0;
    let mut used = false;
    for c in datafusion::physical_expr::split_conjunction(expr) {
        if let Some((name, op, v)) = column_vs_literal(c)
            && let Some(st) = column_stats(stats, name)
            && let (Some(min), Some(max)) = (st.min_num, st.max_num)
            && let Some(v) = axis_value(v)
            && matches!(
                op,
                Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq
            )
        {
            let e = intervals.entry(name).or_insert((min, max, st));
            if matches!(op, Operator::Gt | Operator::GtEq) {
                e.0 = e.0.max(v);
            } else {
                e.1 = e.1.min(v);
            }
            continue;
        }
        let (p, u) = predicate(c, stats);
        s *= p;
        used |= u;
    }
    for (lo, hi, st) in intervals.values() {
        used = true;
        s *= interval_share(*lo, *hi, st);
    }
    (s, used)
}

/// Share of a column's rows in `[lo, hi]`, assuming values spread evenly
/// between its min and max; one distinct value's share at least when the
/// interval is not empty.
fn interval_share(lo: f64, hi: f64, st: &ColumnStats) -> f64 {
    let (Some(min), Some(max)) = (st.min_num, st.max_num) else {
        return 1.0;
    };
    let non_null = non_null_share(st);
    if hi < lo || hi < min || lo > max {
        return 0.0;
    }
    let one_value = 1.0 / st.ndv.max(1) as f64;
    if max <= min {
        return non_null;
    }
    let covered = (hi.min(max) - lo.max(min)) / (max - min);
    covered.clamp(one_value, 1.0) * non_null
}

fn non_null_share(st: &ColumnStats) -> f64 {
    if st.count == 0 {
        1.0
    } else {
        1.0 - (st.num_null as f64 / st.count as f64).min(1.0)
    }
}

/// The statistics of column `name` (exact name first, then ignoring case).
pub(crate) fn column_stats<'a>(stats: &'a ColumnStatsMap, name: &str) -> Option<&'a ColumnStats> {
    stats.get(name).or_else(|| {
        stats
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    })
}

/// `column op literal` (or `literal op column`, with `op` turned around).
fn column_vs_literal(e: &Arc<dyn PhysicalExpr>) -> Option<(&str, Operator, &ScalarValue)> {
    let b = e.downcast_ref::<BinaryExpr>()?;
    fn col(x: &Arc<dyn PhysicalExpr>) -> Option<&str> {
        x.downcast_ref::<Column>().map(|c| c.name())
    }
    fn lit(x: &Arc<dyn PhysicalExpr>) -> Option<&ScalarValue> {
        x.downcast_ref::<Literal>().map(|l| l.value())
    }
    if let (Some(c), Some(v)) = (col(b.left()), lit(b.right())) {
        return Some((c, *b.op(), v));
    }
    let (Some(v), Some(c)) = (lit(b.left()), col(b.right())) else {
        return None;
    };
    Some((c, b.op().swap()?, v))
}

/// Selectivity of one predicate that is not a conjunction of range bounds.
fn predicate(expr: &Arc<dyn PhysicalExpr>, stats: &ColumnStatsMap) -> (f64, bool) {
    if let Some((name, op, v)) = column_vs_literal(expr)
        && let Some(st) = column_stats(stats, name)
        && st.ndv > 0
    {
        let one_value = non_null_share(st) / st.ndv as f64;
        let outside = axis_value(v).is_some_and(|v| {
            st.min_num.is_some_and(|m| v < m) || st.max_num.is_some_and(|m| v > m)
        });
        match op {
            Operator::Eq | Operator::IsNotDistinctFrom => {
                return (if outside { 0.0 } else { one_value }, true);
            }
            Operator::NotEq | Operator::IsDistinctFrom => {
                return (
                    non_null_share(st) - if outside { 0.0 } else { one_value },
                    true,
                );
            }
            // Range bounds with a numeric axis were merged into intervals
            // by `conjunction`; others (strings) fall to the shape below.
            _ => {}
        }
    }
    if let Some(b) = expr.downcast_ref::<BinaryExpr>() {
        return match b.op() {
            Operator::And => conjunction(expr, stats),
            Operator::Or => {
                let (l, ul) = conjunction(b.left(), stats);
                let (r, ur) = conjunction(b.right(), stats);
                ((l + r).min(1.0), ul || ur)
            }
            Operator::Eq | Operator::IsNotDistinctFrom => (0.1, false),
            Operator::NotEq | Operator::IsDistinctFrom => (0.9, false),
            Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq => (0.4, false),
            _ => (0.5, false),
        };
    }
    if let Some(i) = expr.downcast_ref::<InListExpr>() {
        let values = i.list().len() as f64;
        let (s, used) = match i
            .expr()
            .downcast_ref::<Column>()
            .and_then(|c| column_stats(stats, c.name()))
            .filter(|st| st.ndv > 0)
        {
            Some(st) => ((values / st.ndv as f64).min(1.0) * non_null_share(st), true),
            None => (0.1 * values, false),
        };
        return if i.negated() {
            (1.0 - s.min(0.9), used)
        } else {
            (s.min(1.0), used)
        };
    }
    if let Some(n) = expr.downcast_ref::<NotExpr>() {
        let (s, used) = conjunction(n.arg(), stats);
        return (1.0 - s, used);
    }
    let null_share = |arg: &Arc<dyn PhysicalExpr>| {
        arg.downcast_ref::<Column>()
            .and_then(|c| column_stats(stats, c.name()))
            .map(|st| 1.0 - non_null_share(st))
    };
    if let Some(n) = expr.downcast_ref::<IsNullExpr>() {
        return null_share(n.arg()).map_or((0.5, false), |s| (s, true));
    }
    if let Some(n) = expr.downcast_ref::<IsNotNullExpr>() {
        return null_share(n.arg()).map_or((0.5, false), |s| (1.0 - s, true));
    }
    if expr.downcast_ref::<LikeExpr>().is_some() {
        return (0.2, false);
    }
    (0.5, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::physical_expr::expressions::{binary, col, in_list, lit};

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("b", DataType::Utf8, false),
            Field::new("d", DataType::Date32, true),
        ])
    }

    fn stats() -> ColumnStatsMap {
        let st = |ndv: u64, nulls: u64, min: Option<f64>, max: Option<f64>| ColumnStats {
            count: 1000,
            ndv,
            num_null: nulls,
            data_size: 0,
            min: None,
            max: None,
            min_num: min,
            max_num: max,
            updated_time: 0,
        };
        [
            ("a".to_string(), st(1000, 0, Some(1.0), Some(1000.0))),
            ("b".to_string(), st(150, 0, None, None)),
            ("d".to_string(), st(2000, 250, Some(0.0), Some(2000.0))),
        ]
        .into_iter()
        .collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn shapes_estimate_their_share_without_statistics() {
        let s = schema();
        let none = ColumnStatsMap::new();
        let a = col("a", &s).unwrap();
        let b = col("b", &s).unwrap();
        let eq_a = binary(a.clone(), Operator::Eq, lit(1i64), &s).unwrap();
        let eq_b = binary(b.clone(), Operator::Eq, lit("x"), &s).unwrap();
        let both = binary(eq_a.clone(), Operator::And, eq_b.clone(), &s).unwrap();
        assert!(close(selectivity(&both, &none), 0.01));
        let either = binary(eq_a.clone(), Operator::Or, eq_b, &s).unwrap();
        assert!(close(selectivity(&either, &none), 0.2));
        let list = in_list(a.clone(), vec![lit(1i64), lit(2i64), lit(3i64)], &false, &s).unwrap();
        assert!(close(selectivity(&list, &none), 0.3));
        let lo = binary(a.clone(), Operator::GtEq, lit(1i64), &s).unwrap();
        let hi = binary(a, Operator::Lt, lit(9i64), &s).unwrap();
        let range = binary(lo, Operator::And, hi, &s).unwrap();
        assert!(close(selectivity(&range, &none), 0.16));
    }

    #[test]
    fn statistics_give_distinct_value_and_interval_shares() {
        let s = schema();
        let st = stats();
        let a = col("a", &s).unwrap();
        let b = col("b", &s).unwrap();
        let d = col("d", &s).unwrap();
        // One of 150 strings.
        let eq_b = binary(b.clone(), Operator::Eq, lit("x"), &s).unwrap();
        assert!(close(selectivity(&eq_b, &st), 1.0 / 150.0));
        // Three of 150.
        let list = in_list(b, vec![lit("x"), lit("y"), lit("z")], &false, &s).unwrap();
        assert!(close(selectivity(&list, &st), 3.0 / 150.0));
        // An equality outside [min, max] keeps nothing (down to the floor).
        let out = binary(a.clone(), Operator::Eq, lit(5000i64), &s).unwrap();
        assert!(selectivity(&out, &st) < 1e-6);
        // Two bounds on one column make one interval: 100..300 of 1..1000,
        // whichever side the literal is on.
        let lo = binary(lit(100i64), Operator::LtEq, a.clone(), &s).unwrap();
        let hi = binary(a.clone(), Operator::Lt, lit(300i64), &s).unwrap();
        let range = binary(lo, Operator::And, hi, &s).unwrap();
        assert!(close(selectivity(&range, &st), 200.0 / 999.0));
        // A quarter of `d` is null; the upper half of its range keeps half
        // of the rest.
        let half = binary(
            d.clone(),
            Operator::Gt,
            lit(ScalarValue::Date32(Some(1000))),
            &s,
        )
        .unwrap();
        assert!(close(selectivity(&half, &st), 0.5 * 0.75));
        let nulls: Arc<dyn PhysicalExpr> = Arc::new(IsNullExpr::new(d));
        assert!(close(selectivity(&nulls, &st), 0.25));
        // Bounds that exclude each other keep nothing.
        let lo = binary(a.clone(), Operator::Gt, lit(600i64), &s).unwrap();
        let hi = binary(a, Operator::Lt, lit(500i64), &s).unwrap();
        let empty = binary(lo, Operator::And, hi, &s).unwrap();
        assert!(selectivity(&empty, &st) < 1e-6);
    }

    #[test]
    fn axis_values_share_one_scale_per_type() {
        assert_eq!(
            axis_value(&ScalarValue::Decimal128(Some(1234), 10, 2)),
            Some(12.34)
        );
        assert_eq!(axis_value(&ScalarValue::Date32(Some(9000))), Some(9000.0));
        assert_eq!(
            axis_value(&ScalarValue::TimestampSecond(Some(2), None)),
            axis_value(&ScalarValue::TimestampMicrosecond(Some(2_000_000), None))
        );
        assert_eq!(axis_value(&ScalarValue::Utf8(Some("x".into()))), None);
        assert_eq!(axis_value(&ScalarValue::Int32(None)), None);
    }
}

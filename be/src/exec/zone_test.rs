//! Zone-map tests of a scan's simplest conjuncts, without DataFusion's
//! pruning machinery.
//!
//! ```sql
//! -- SSB q4.3 on three backends: lineorder's scan carries the joins'
//! -- key bounds (lo_custkey >= <least kept> AND lo_custkey <= <greatest>
//! -- AND the same for lo_suppkey, lo_partkey, lo_orderdate)
//! SELECT d_year, s_city, p_brand, sum(lo_revenue - lo_supplycost) ...
//! ```
//!
//! Each segment of such a scan was tested three ways through
//! `PruningPredicate::prune` (the segment, its pages, and each conjunct's
//! negation to skip evaluating what its pages prove true), each call
//! building arrays of the zone maps' bounds, a statistics batch and the
//! rewritten predicate's evaluation over a dozen rows: a fifth of a
//! backend's CPU (perf), for comparisons of one column with literals. A
//! [`ZoneTest`] compares such a conjunct's literals with a zone map's
//! bounds directly: `column op literal` (`=`, `<`, `<=`, `>`, `>=`, either
//! side) and `column IN (literals)`, on integer, date, datetime, decimal
//! and string columns whose literal has the column's own type. Anything
//! else (floats, whose NaN and signed zeros the zone maps order their own
//! way; casts; expressions) is left to `PruningPredicate` ([`Pruning`]).

use std::cmp::Ordering;
use std::sync::Arc;

use arrow::datatypes::{DataType, Schema, SchemaRef, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, InListExpr, Literal};
use datafusion::physical_expr::{PhysicalExpr, conjunction, split_conjunction};
use datafusion::physical_optimizer::pruning::{PruningPredicate, PruningPredicateBuilder};

use crate::storage::read::{ZoneMap, ZoneStats, ZoneValue};

/// How a conjunct compares its column with its literals.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cmp {
    Eq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    In,
}

/// A literal in the form zone maps store bounds.
#[derive(Debug, Clone, PartialEq)]
enum Bound {
    I(i64),
    D(i128),
    S(String),
}

/// `column op literal(s)` tested against zone maps.
#[derive(Debug, Clone)]
pub struct ZoneTest {
    /// The column, as an index of the scan's output (the stats' schema).
    column: usize,
    cmp: Cmp,
    values: Vec<Bound>,
}

impl ZoneTest {
    /// The test of conjunct `e` over `schema` (the scan's output), when it
    /// has one of the shapes this module knows.
    pub fn of(e: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Option<ZoneTest> {
        if let Some(b) = e.downcast_ref::<BinaryExpr>() {
            let cmp = match b.op() {
                Operator::Eq => Cmp::Eq,
                Operator::Lt => Cmp::Lt,
                Operator::LtEq => Cmp::LtEq,
                Operator::Gt => Cmp::Gt,
                Operator::GtEq => Cmp::GtEq,
                _ => return None,
            };
            let (col, lit, cmp) = match (
                b.left().downcast_ref::<Column>(),
                b.right().downcast_ref::<Literal>(),
            ) {
                (Some(c), Some(l)) => (c, l, cmp),
                _ => {
                    let c = b.right().downcast_ref::<Column>()?;
                    let l = b.left().downcast_ref::<Literal>()?;
                    (c, l, flipped(cmp))
                }
            };
            let column = column_of(col, schema)?;
            let value = bound(lit.value(), schema.field(column).data_type())?;
            return Some(ZoneTest {
                column,
                cmp,
                values: vec![value],
            });
        }
        let list = e.downcast_ref::<InListExpr>()?;
        if list.negated() {
            return None;
        }
        let column = column_of(list.expr().downcast_ref::<Column>()?, schema)?;
        let dt = schema.field(column).data_type();
        let values = list
            .list()
            .iter()
            .map(|v| bound(v.downcast_ref::<Literal>()?.value(), dt))
            .collect::<Option<Vec<_>>>()?;
        (!values.is_empty()).then_some(ZoneTest {
            column,
            cmp: Cmp::In,
            values,
        })
    }

    /// The conjunct's column (an index of the scan's output).
    pub fn column(&self) -> usize {
        self.column
    }

    /// Whether some of the `rows` rows `zone` describes may pass. A row
    /// whose value is NULL never does; unknown bounds may.
    pub fn may_match(&self, zone: &ZoneMap, rows: u64) -> bool {
        if zone.null_count >= rows {
            return false;
        }
        self.any_value(zone, true, |cmp, lo, hi| match cmp {
            Cmp::Eq | Cmp::In => lo.is_le() && hi.is_ge(),
            Cmp::Lt => lo.is_lt(),
            Cmp::LtEq => lo.is_le(),
            Cmp::Gt => hi.is_gt(),
            Cmp::GtEq => hi.is_ge(),
        })
    }

    /// Whether every one of the rows `zone` describes passes (no NULLs,
    /// bounds inside the literals' range).
    pub fn all_match(&self, zone: &ZoneMap) -> bool {
        if zone.null_count > 0 {
            return false;
        }
        self.any_value(zone, false, |cmp, lo, hi| match cmp {
            Cmp::Eq | Cmp::In => lo.is_eq() && hi.is_eq(),
            Cmp::Lt => hi.is_lt(),
            Cmp::LtEq => hi.is_le(),
            Cmp::Gt => lo.is_gt(),
            Cmp::GtEq => lo.is_ge(),
        })
    }

    /// Whether `holds(cmp, min vs literal, max vs literal)` for some
    /// literal; `unknown` where the bounds are missing or do not compare.
    fn any_value(
        &self,
        zone: &ZoneMap,
        unknown: bool,
        holds: impl Fn(Cmp, Ordering, Ordering) -> bool,
    ) -> bool {
        let (Some(min), Some(max)) = (&zone.min, &zone.max) else {
            return unknown;
        };
        self.values
            .iter()
            .any(|v| match (compare(min, v), compare(max, v)) {
                (Some(lo), Some(hi)) => holds(self.cmp, lo, hi),
                _ => unknown,
            })
    }
}

/// `a op b` as `b op' a`.
fn flipped(cmp: Cmp) -> Cmp {
    match cmp {
        Cmp::Lt => Cmp::Gt,
        Cmp::LtEq => Cmp::GtEq,
        Cmp::Gt => Cmp::Lt,
        Cmp::GtEq => Cmp::LtEq,
        other => other,
    }
}

/// `col`'s index in `schema`, checked by name.
fn column_of(col: &Column, schema: &Schema) -> Option<usize> {
    let field = schema.fields().get(col.index())?;
    (field.name() == col.name()).then_some(col.index())
}

/// `v` as a bound of a column of type `dt`: only a non-NULL literal of the
/// column's own type, of a type whose zone maps order as SQL does.
fn bound(v: &ScalarValue, dt: &DataType) -> Option<Bound> {
    if &v.data_type() != dt {
        return None;
    }
    Some(match v {
        ScalarValue::Int8(Some(x)) => Bound::I(*x as i64),
        ScalarValue::Int16(Some(x)) => Bound::I(*x as i64),
        ScalarValue::Int32(Some(x)) => Bound::I(*x as i64),
        ScalarValue::Int64(Some(x)) => Bound::I(*x),
        ScalarValue::Date32(Some(x)) => Bound::I(*x as i64),
        ScalarValue::TimestampMicrosecond(Some(x), _)
            if matches!(dt, DataType::Timestamp(TimeUnit::Microsecond, _)) =>
        {
            Bound::I(*x)
        }
        ScalarValue::Decimal128(Some(x), _, _) => Bound::D(*x),
        ScalarValue::Utf8(Some(s)) => Bound::S(s.clone()),
        _ => return None,
    })
}

/// A stored bound against a literal; `None` when they do not compare (a
/// footer whose bound has another form: nothing is concluded).
fn compare(z: &ZoneValue, b: &Bound) -> Option<Ordering> {
    match (z, b) {
        (ZoneValue::I(x), Bound::I(y)) => Some(x.cmp(y)),
        (ZoneValue::D(x), Bound::D(y)) => Some(x.parse::<i128>().ok()?.cmp(y)),
        (ZoneValue::S(x), Bound::S(y)) => Some(x.as_str().cmp(y.as_str())),
        _ => None,
    }
}

/// A scan predicate's zone-map pruning: the conjuncts [`ZoneTest`] knows
/// tested directly, the others through DataFusion's `PruningPredicate`.
pub struct Pruning {
    tests: Vec<ZoneTest>,
    rest: Option<Arc<PruningPredicate>>,
}

impl Pruning {
    /// The pruning of `predicate` over `schema` (the scan's output);
    /// `None` when nothing in it can rule out a page.
    pub fn new(predicate: &Arc<dyn PhysicalExpr>, schema: &SchemaRef) -> Option<Pruning> {
        let mut tests = vec![];
        let mut rest = vec![];
        for c in split_conjunction(predicate) {
            match ZoneTest::of(c, schema) {
                Some(t) => tests.push(t),
                None => rest.push(c.clone()),
            }
        }
        let rest = (!rest.is_empty())
            .then(|| {
                PruningPredicateBuilder::new()
                    .with_file_schema(schema.clone())
                    .build(conjunction(rest))
            })
            .flatten();
        (!tests.is_empty() || rest.is_some()).then_some(Pruning { tests, rest })
    }

    /// For each container of `stats`, whether some of its rows may pass.
    pub fn prune(&self, stats: &ZoneStats<'_>) -> Result<Vec<bool>> {
        let mut keep: Vec<bool> = match &self.rest {
            Some(p) => p.prune(stats)?,
            None => vec![true; stats.zones.len()],
        };
        for (k, (zones, rows)) in keep.iter_mut().zip(stats.zones.iter().zip(&stats.rows)) {
            *k = *k
                && self
                    .tests
                    .iter()
                    .all(|t| zones.get(t.column).is_none_or(|z| t.may_match(z, *rows)));
        }
        Ok(keep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::Field;
    use datafusion::physical_expr::expressions::{binary, col, in_list, lit};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("i", DataType::Int32, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("d", DataType::Decimal128(10, 2), true),
            Field::new("f", DataType::Float64, true),
        ]))
    }

    fn zone(min: Option<ZoneValue>, max: Option<ZoneValue>, nulls: u64) -> ZoneMap {
        ZoneMap {
            min,
            max,
            null_count: nulls,
        }
    }

    fn ints(min: i64, max: i64) -> ZoneMap {
        zone(Some(ZoneValue::I(min)), Some(ZoneValue::I(max)), 0)
    }

    fn test_of(e: Arc<dyn PhysicalExpr>) -> ZoneTest {
        ZoneTest::of(&e, &schema()).unwrap()
    }

    fn cmp(op: Operator, v: i32) -> ZoneTest {
        let s = schema();
        test_of(binary(col("i", &s).unwrap(), op, lit(v), &s).unwrap())
    }

    #[test]
    fn comparisons_with_a_literal_against_bounds() {
        let page = ints(10, 20);
        let cases = [
            (Operator::Eq, 15, true, false),
            (Operator::Eq, 21, false, false),
            (Operator::Lt, 10, false, false),
            (Operator::Lt, 21, true, true),
            (Operator::LtEq, 10, true, false),
            (Operator::LtEq, 20, true, true),
            (Operator::Gt, 20, false, false),
            (Operator::Gt, 9, true, true),
            (Operator::GtEq, 20, true, false),
            (Operator::GtEq, 10, true, true),
        ];
        for (op, v, may, all) in cases {
            let t = cmp(op, v);
            assert_eq!(t.may_match(&page, 100), may, "i {op} {v}");
            assert_eq!(t.all_match(&page), all, "i {op} {v}");
        }
        // One value: `=` holds for every row.
        assert!(cmp(Operator::Eq, 7).all_match(&ints(7, 7)));
        // The literal on the left: 15 > i is i < 15.
        let s = schema();
        let t = test_of(binary(lit(15), Operator::Gt, col("i", &s).unwrap(), &s).unwrap());
        assert!(t.may_match(&ints(10, 20), 100));
        assert!(!t.may_match(&ints(15, 20), 100));
        assert!(t.all_match(&ints(10, 14)));
    }

    #[test]
    fn nulls_and_unknown_bounds() {
        let t = cmp(Operator::Eq, 15);
        // Every row NULL: no row passes; some NULL: none proven.
        assert!(!t.may_match(&zone(None, None, 100), 100));
        let with_nulls = zone(Some(ZoneValue::I(15)), Some(ZoneValue::I(15)), 3);
        assert!(t.may_match(&with_nulls, 100));
        assert!(!t.all_match(&with_nulls));
        // Bounds not kept (e.g. long strings): anything may pass.
        assert!(t.may_match(&zone(None, None, 0), 100));
        assert!(!t.all_match(&zone(None, None, 0)));
    }

    #[test]
    fn in_lists_strings_and_decimals() {
        let s = schema();
        let t = test_of(in_list(col("i", &s).unwrap(), vec![lit(3), lit(30)], &false, &s).unwrap());
        assert!(!t.may_match(&ints(10, 20), 10));
        assert!(t.may_match(&ints(25, 40), 10));
        assert!(t.all_match(&ints(30, 30)));
        let t = test_of(binary(col("s", &s).unwrap(), Operator::Eq, lit("m"), &s).unwrap());
        let strings = zone(
            Some(ZoneValue::S("a".into())),
            Some(ZoneValue::S("k".into())),
            0,
        );
        assert!(!t.may_match(&strings, 10));
        let d = lit(ScalarValue::Decimal128(Some(1050), 10, 2));
        let t = test_of(binary(col("d", &s).unwrap(), Operator::GtEq, d, &s).unwrap());
        let decimals = zone(
            Some(ZoneValue::D("100".into())),
            Some(ZoneValue::D("1000".into())),
            0,
        );
        assert!(!t.may_match(&decimals, 10));
    }

    #[test]
    fn other_shapes_are_left_to_datafusion() {
        let s = schema();
        // A float column, a literal of another type, a column on both sides.
        let f = binary(col("f", &s).unwrap(), Operator::Gt, lit(1.5), &s).unwrap();
        assert!(ZoneTest::of(&f, &s).is_none());
        let wide: Arc<dyn PhysicalExpr> = Arc::new(BinaryExpr::new(
            col("i", &s).unwrap(),
            Operator::Eq,
            lit(5i64),
        ));
        assert!(ZoneTest::of(&wide, &s).is_none());
        let cols = binary(
            col("i", &s).unwrap(),
            Operator::Lt,
            col("i", &s).unwrap(),
            &s,
        )
        .unwrap();
        assert!(ZoneTest::of(&cols, &s).is_none());
        // A pruning of both kinds: the float conjunct through DataFusion.
        let i = binary(col("i", &s).unwrap(), Operator::Gt, lit(100), &s).unwrap();
        let both = binary(i, Operator::And, f, &s).unwrap();
        let p = Pruning::new(&both, &s).unwrap();
        assert_eq!(p.tests.len(), 1);
        assert!(p.rest.is_some());
        let floats = |max: f64| zone(Some(ZoneValue::F(0.0)), Some(ZoneValue::F(max)), 0);
        let unknown = zone(None, None, 0);
        let pages = [
            (ints(0, 200), floats(9.0)),
            (ints(0, 50), floats(9.0)),
            (ints(0, 200), floats(1.0)),
        ];
        let zones: Vec<Vec<&ZoneMap>> = pages
            .iter()
            .map(|(i, f)| vec![i, &unknown, &unknown, f])
            .collect();
        let stats = ZoneStats {
            schema: &s,
            zones,
            rows: vec![10; 3],
        };
        assert_eq!(p.prune(&stats).unwrap(), vec![true, false, false]);
    }
}

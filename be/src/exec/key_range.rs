//! Key bounds for the short-key index, from the scan predicate: conjuncts
//! `key = v`, `key < v` (`<=`, `>`, `>=`) and `key IN (...)` on a leftmost
//! part of the table's key become the smallest and largest prefix encodings
//! a matching row can have. Equalities extend the prefix column by column;
//! the first key column with only a range (or nothing) ends it.

use std::cmp::Ordering;
use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, InListExpr, Literal};
use datafusion::physical_expr::{PhysicalExpr, split_conjunction};
use tethys_common::schema::TableSchema;

use crate::storage::read::{PrefixField, encode_bound, prefix_fields};

/// Encoded bounds on the key prefix of rows that can match.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyBounds {
    pub lower: Option<Vec<u8>>,
    pub upper: Option<Vec<u8>>,
}

/// What the conjuncts say about one key column.
#[derive(Default)]
struct Constraint {
    eq: Option<ScalarValue>,
    lo: Option<ScalarValue>,
    hi: Option<ScalarValue>,
}

impl Constraint {
    fn raise_lo(&mut self, v: ScalarValue) {
        if self
            .lo
            .as_ref()
            .is_none_or(|lo| v.partial_cmp(lo) == Some(Ordering::Greater))
        {
            self.lo = Some(v);
        }
    }
    fn lower_hi(&mut self, v: ScalarValue) {
        if self
            .hi
            .as_ref()
            .is_none_or(|hi| v.partial_cmp(hi) == Some(Ordering::Less))
        {
            self.hi = Some(v);
        }
    }
}

/// The key bounds `predicate` (over the scan output, whose column `i` is
/// table column `projection[i]`) implies; `None` when it bounds no leftmost
/// key column.
pub fn key_bounds(
    predicate: &Arc<dyn PhysicalExpr>,
    projection: &[usize],
    table: &TableSchema,
) -> Option<KeyBounds> {
    let types: Vec<DataType> = table.columns[..table.num_key_columns.min(table.columns.len())]
        .iter()
        .map(|c| c.column_type.arrow_type())
        .collect();
    let fields = prefix_fields(&types);
    if fields.is_empty() {
        return None;
    }
    let mut cons: Vec<Constraint> = (0..fields.len()).map(|_| Constraint::default()).collect();
    let key_of = |c: &Column| {
        projection
            .get(c.index())
            .copied()
            .filter(|k| *k < fields.len())
    };
    for conj in split_conjunction(predicate) {
        if let Some(b) = conj.downcast_ref::<BinaryExpr>() {
            let (col, op, v) = match (
                b.left().downcast_ref::<Column>(),
                b.right().downcast_ref::<Literal>(),
                b.left().downcast_ref::<Literal>(),
                b.right().downcast_ref::<Column>(),
            ) {
                (Some(c), Some(l), _, _) => (c, *b.op(), l.value()),
                (_, _, Some(l), Some(c)) => match b.op().swap() {
                    Some(op) => (c, op, l.value()),
                    None => continue,
                },
                _ => continue,
            };
            let Some(k) = key_of(col) else { continue };
            if v.is_null() {
                continue;
            }
            let c = &mut cons[k];
            match op {
                Operator::Eq => c.eq = Some(v.clone()),
                Operator::Gt | Operator::GtEq => c.raise_lo(v.clone()),
                Operator::Lt | Operator::LtEq => c.lower_hi(v.clone()),
                _ => {}
            }
        } else if let Some(l) = conj.downcast_ref::<InListExpr>() {
            if l.negated() {
                continue;
            }
            let Some(k) = l.expr().downcast_ref::<Column>().and_then(key_of) else {
                continue;
            };
            let values: Option<Vec<ScalarValue>> = l
                .list()
                .iter()
                .map(|e| e.downcast_ref::<Literal>().map(|l| l.value().clone()))
                .collect();
            let Some(values) =
                values.filter(|v| !v.is_empty() && !v.iter().any(ScalarValue::is_null))
            else {
                continue;
            };
            // Values that do not compare (mixed types) bound nothing.
            let Some((min, max)) =
                values[1..]
                    .iter()
                    .try_fold((&values[0], &values[0]), |(lo, hi), v| {
                        let lo = if v.partial_cmp(lo)? == Ordering::Less {
                            v
                        } else {
                            lo
                        };
                        let hi = if v.partial_cmp(hi)? == Ordering::Greater {
                            v
                        } else {
                            hi
                        };
                        Some((lo, hi))
                    })
            else {
                continue;
            };
            let (min, max) = (min.clone(), max.clone());
            cons[k].raise_lo(min);
            cons[k].lower_hi(max);
        }
    }
    build(&cons, &fields, &types)
}

/// Encodes the constraints as prefix bounds.
fn build(cons: &[Constraint], fields: &[PrefixField], types: &[DataType]) -> Option<KeyBounds> {
    let mut lower = Vec::new();
    let mut upper = Vec::new();
    let (mut has_lo, mut has_hi) = (false, false);
    for ((c, f), dt) in cons.iter().zip(fields).zip(types) {
        if let Some(v) = &c.eq {
            let at = (lower.len(), upper.len());
            if encode_bound(v, dt, f, &mut lower) && encode_bound(v, dt, f, &mut upper) {
                has_lo = true;
                has_hi = true;
                continue;
            }
            lower.truncate(at.0);
            upper.truncate(at.1);
            break;
        }
        if let Some(v) = &c.lo {
            let at = lower.len();
            if encode_bound(v, dt, f, &mut lower) {
                has_lo = true;
            } else {
                lower.truncate(at);
            }
        }
        if let Some(v) = &c.hi {
            let at = upper.len();
            if encode_bound(v, dt, f, &mut upper) {
                has_hi = true;
            } else {
                upper.truncate(at);
            }
        }
        break;
    }
    (has_lo || has_hi).then(|| KeyBounds {
        lower: has_lo.then_some(lower),
        upper: has_hi.then_some(upper),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{Field, Schema};
    use datafusion::physical_expr::expressions::{binary, col, in_list, lit};
    use tethys_common::schema::Column as TableColumn;
    use tethys_common::types::ColumnType;

    fn table() -> TableSchema {
        let c = |n: &str, t: &str, key: bool| {
            TableColumn::new(n, ColumnType::parse(t).unwrap(), true, key)
        };
        TableSchema {
            columns: vec![
                c("k", "bigint", true),
                c("d", "date", true),
                c("v", "int", false),
            ],
            num_key_columns: 2,
            compression: "lz4".into(),
            bloom_filter_columns: vec![],
            ..Default::default()
        }
    }

    #[test]
    fn bounds_from_leftmost_keys_only() {
        let t = table();
        let schema = Schema::new(vec![
            Field::new("v", DataType::Int32, true),
            Field::new("k", DataType::Int64, true),
        ]);
        let projection = [2, 0];
        let e = |op, v: i64| binary(col("k", &schema).unwrap(), op, lit(v), &schema).unwrap();
        // k = 5: both bounds.
        let b = key_bounds(&e(Operator::Eq, 5), &projection, &t).unwrap();
        assert!(b.lower.is_some() && b.lower == b.upper);
        // k > 5 AND k <= 9.
        let both = binary(
            e(Operator::Gt, 5),
            Operator::And,
            e(Operator::LtEq, 9),
            &schema,
        )
        .unwrap();
        let b = key_bounds(&both, &projection, &t).unwrap();
        assert!(b.lower.unwrap() < b.upper.unwrap());
        // IN list: min and max.
        let inl = in_list(
            col("k", &schema).unwrap(),
            vec![lit(9i64), lit(3i64)],
            &false,
            &schema,
        )
        .unwrap();
        let b = key_bounds(&inl, &projection, &t).unwrap();
        assert!(b.lower.is_some() && b.upper.is_some());
        // A value column alone bounds nothing.
        let v = binary(col("v", &schema).unwrap(), Operator::Eq, lit(1i32), &schema).unwrap();
        assert_eq!(key_bounds(&v, &projection, &t), None);
        // Not-equal bounds nothing.
        assert_eq!(key_bounds(&e(Operator::NotEq, 1), &projection, &t), None);
    }
}

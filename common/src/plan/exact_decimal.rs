//! DECIMAL `+`, `-` and `*` without per-row overflow checks where no
//! overflow can occur.
//!
//! Arrow checks every DECIMAL128 addition, subtraction and multiplication
//! for overflow (a checked 128-bit multiply per row: about a third of
//! TPC-H q01's backend CPU). When the operands' precisions bound the exact
//! result to 38 digits, as for `l_extendedprice * (1 - l_discount)` of two
//! DECIMAL(15,2), no value can overflow and the unchecked operation gives
//! the same answer; operands of up to 18 digits are multiplied as 64-bit
//! integers into a 128-bit product. [`exact_decimal_arithmetic`] puts an
//! [`ExactDecimalExpr`] in place of each such `BinaryExpr` in a plan's
//! projections and aggregate arguments; the backend applies it to the
//! fragments it runs, the FE to the operators it runs.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use arrow::compute::kernels::arity::binary;
use arrow::datatypes::{DataType, Decimal128Type, Schema};
use arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, Operator};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::BinaryExpr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};

/// Most digits an `i128` always holds (its maximum is about 1.7e38).
const MAX_DIGITS: i16 = 38;
/// Most digits an `i64` always holds.
const I64_DIGITS: u8 = 18;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    /// `l * lm + r * rm`: both sides brought to the result's scale.
    Add {
        lm: i128,
        rm: i128,
    },
    Sub {
        lm: i128,
        rm: i128,
    },
    /// Both sides within 18 digits: a 64 x 64 -> 128-bit multiply.
    MulNarrow,
    Mul,
}

/// `left op right` over DECIMAL128 values that cannot overflow.
#[derive(Debug)]
pub struct ExactDecimalExpr {
    op: Op,
    left: Arc<dyn PhysicalExpr>,
    right: Arc<dyn PhysicalExpr>,
    /// The `BinaryExpr`'s operator, for display.
    operator: Operator,
    precision: u8,
    scale: i8,
}

impl ExactDecimalExpr {
    /// The unchecked form of `b` (over input `schema`), when it is a
    /// DECIMAL128 `+`, `-` or `*` whose exact result always fits 38 digits
    /// and Arrow's result type is that exact result's.
    pub fn try_new(b: &BinaryExpr, schema: &Schema) -> Result<Option<Self>> {
        let (DataType::Decimal128(p1, s1), DataType::Decimal128(p2, s2)) =
            (b.left().data_type(schema)?, b.right().data_type(schema)?)
        else {
            return Ok(None);
        };
        let DataType::Decimal128(precision, scale) = b.data_type(schema)? else {
            return Ok(None);
        };
        if s1 < 0 || s2 < 0 {
            return Ok(None);
        }
        let op = match b.op() {
            Operator::Multiply => {
                if i16::from(p1) + i16::from(p2) > MAX_DIGITS || scale != s1 + s2 {
                    return Ok(None);
                }
                if p1 <= I64_DIGITS && p2 <= I64_DIGITS {
                    Op::MulNarrow
                } else {
                    Op::Mul
                }
            }
            Operator::Plus | Operator::Minus => {
                let s = s1.max(s2);
                let int_digits = (i16::from(p1) - i16::from(s1)).max(i16::from(p2) - i16::from(s2));
                if scale != s || i16::from(s) + int_digits + 1 > MAX_DIGITS {
                    return Ok(None);
                }
                let lm = 10i128.pow((s - s1) as u32);
                let rm = 10i128.pow((s - s2) as u32);
                if *b.op() == Operator::Plus {
                    Op::Add { lm, rm }
                } else {
                    Op::Sub { lm, rm }
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(ExactDecimalExpr {
            op,
            left: b.left().clone(),
            right: b.right().clone(),
            operator: *b.op(),
            precision,
            scale,
        }))
    }

    fn apply(&self, l: ColumnarValue, r: ColumnarValue, rows: usize) -> Result<ColumnarValue> {
        let out = match self.op {
            Op::Add { lm: 1, rm: 1 } => combine(l, r, rows, |a, b| a.wrapping_add(b))?,
            Op::Add { lm, rm } => combine(l, r, rows, move |a, b| {
                a.wrapping_mul(lm).wrapping_add(b.wrapping_mul(rm))
            })?,
            Op::Sub { lm: 1, rm: 1 } => combine(l, r, rows, |a, b| a.wrapping_sub(b))?,
            Op::Sub { lm, rm } => combine(l, r, rows, move |a, b| {
                a.wrapping_mul(lm).wrapping_sub(b.wrapping_mul(rm))
            })?,
            // Within 18 digits both values fit 64 bits exactly.
            Op::MulNarrow => combine(l, r, rows, |a, b| {
                i128::from(a as i64) * i128::from(b as i64)
            })?,
            Op::Mul => combine(l, r, rows, |a, b| a.wrapping_mul(b))?,
        };
        Ok(match out {
            Combined::Array(a) => ColumnarValue::Array(Arc::new(
                a.with_precision_and_scale(self.precision, self.scale)?,
            )),
            Combined::Scalar(v) => {
                ColumnarValue::Scalar(ScalarValue::Decimal128(v, self.precision, self.scale))
            }
        })
    }
}

enum Combined {
    Array(PrimitiveArray<Decimal128Type>),
    Scalar(Option<i128>),
}

/// `f` over the values of two DECIMAL128 operands, arrays or scalars; a
/// null on either side gives null.
fn combine(
    l: ColumnarValue,
    r: ColumnarValue,
    rows: usize,
    f: impl Fn(i128, i128) -> i128,
) -> Result<Combined> {
    let scalar = |s: &ScalarValue| -> Result<Option<i128>> {
        match s {
            ScalarValue::Decimal128(v, _, _) => Ok(*v),
            other => datafusion::common::internal_err!("decimal operand {other:?}"),
        }
    };
    let array = |a: &ArrayRef| -> Result<PrimitiveArray<Decimal128Type>> {
        a.as_primitive_opt::<Decimal128Type>()
            .cloned()
            .ok_or_else(|| {
                datafusion::error::DataFusionError::Internal(format!(
                    "decimal operand of type {}",
                    a.data_type()
                ))
            })
    };
    Ok(match (l, r) {
        (ColumnarValue::Array(a), ColumnarValue::Array(b)) => {
            Combined::Array(binary(&array(&a)?, &array(&b)?, f)?)
        }
        (ColumnarValue::Scalar(a), ColumnarValue::Array(b)) => match scalar(&a)? {
            Some(a) => Combined::Array(array(&b)?.unary(|b| f(a, b))),
            None => Combined::Array(PrimitiveArray::new_null(rows)),
        },
        (ColumnarValue::Array(a), ColumnarValue::Scalar(b)) => match scalar(&b)? {
            Some(b) => Combined::Array(array(&a)?.unary(|a| f(a, b))),
            None => Combined::Array(PrimitiveArray::new_null(rows)),
        },
        (ColumnarValue::Scalar(a), ColumnarValue::Scalar(b)) => {
            Combined::Scalar(scalar(&a)?.zip(scalar(&b)?).map(|(a, b)| f(a, b)))
        }
    })
}

/// Always parenthesized: a `BinaryExpr` around it does not know its
/// precedence.
impl fmt::Display for ExactDecimalExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({} {} {})", self.left, self.operator, self.right)
    }
}

impl PartialEq for ExactDecimalExpr {
    fn eq(&self, other: &Self) -> bool {
        self.op == other.op
            && self.left.eq(&other.left)
            && self.right.eq(&other.right)
            && self.precision == other.precision
            && self.scale == other.scale
    }
}

impl Eq for ExactDecimalExpr {}

impl Hash for ExactDecimalExpr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.op.hash(state);
        self.left.hash(state);
        self.right.hash(state);
        self.precision.hash(state);
        self.scale.hash(state);
    }
}

impl PhysicalExpr for ExactDecimalExpr {
    fn data_type(&self, _input_schema: &Schema) -> Result<DataType> {
        Ok(DataType::Decimal128(self.precision, self.scale))
    }

    fn nullable(&self, input_schema: &Schema) -> Result<bool> {
        Ok(self.left.nullable(input_schema)? || self.right.nullable(input_schema)?)
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<ColumnarValue> {
        let l = self.left.evaluate(batch)?;
        let r = self.right.evaluate(batch)?;
        self.apply(l, r, batch.num_rows())
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        vec![&self.left, &self.right]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        let [left, right]: [Arc<dyn PhysicalExpr>; 2] = children.try_into().map_err(|_| {
            datafusion::error::DataFusionError::Internal(
                "decimal operator needs two operands".into(),
            )
        })?;
        Ok(Arc::new(ExactDecimalExpr {
            op: self.op,
            left,
            right,
            operator: self.operator,
            precision: self.precision,
            scale: self.scale,
        }))
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// `e` (over input `schema`) with every DECIMAL `BinaryExpr` that cannot
/// overflow made an [`ExactDecimalExpr`].
pub fn exact_decimal_expr(
    e: &Arc<dyn PhysicalExpr>,
    schema: &Schema,
) -> Result<Arc<dyn PhysicalExpr>> {
    Ok(e.clone()
        .transform_up(|e| {
            let Some(b) = e.downcast_ref::<BinaryExpr>() else {
                return Ok(Transformed::no(e));
            };
            Ok(match ExactDecimalExpr::try_new(b, schema)? {
                Some(x) => Transformed::yes(Arc::new(x) as Arc<dyn PhysicalExpr>),
                None => Transformed::no(e),
            })
        })?
        .data)
}

/// `plan` with the DECIMAL arithmetic of its projections and aggregate
/// arguments unchecked where no overflow can occur ([`ExactDecimalExpr`]).
pub fn exact_decimal_arithmetic(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    Ok(plan
        .transform_up(|p| {
            if let Some(proj) = p.downcast_ref::<ProjectionExec>() {
                let schema = proj.input().schema();
                let mut changed = false;
                let exprs = proj
                    .expr()
                    .iter()
                    .map(|pe| {
                        let expr = exact_decimal_expr(&pe.expr, &schema)?;
                        changed |= !Arc::ptr_eq(&expr, &pe.expr);
                        Ok(ProjectionExpr {
                            expr,
                            alias: pe.alias.clone(),
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                if changed {
                    let new = ProjectionExec::try_new(exprs, proj.input().clone())?;
                    return Ok(Transformed::yes(Arc::new(new) as Arc<dyn ExecutionPlan>));
                }
            }
            if let Some(agg) = p.downcast_ref::<AggregateExec>() {
                let schema = agg.input_schema();
                let mut changed = false;
                let mut aggrs = Vec::with_capacity(agg.aggr_expr().len());
                for a in agg.aggr_expr() {
                    let args = a
                        .expressions()
                        .iter()
                        .map(|e| exact_decimal_expr(e, &schema))
                        .collect::<Result<Vec<_>>>()?;
                    let same = args
                        .iter()
                        .zip(a.expressions())
                        .all(|(n, o)| Arc::ptr_eq(n, &o));
                    let order = a.order_bys().iter().map(|s| s.expr.clone()).collect();
                    match (same, a.with_new_expressions(args, order)) {
                        (false, Some(n)) => {
                            changed = true;
                            aggrs.push(Arc::new(n));
                        }
                        _ => aggrs.push(a.clone()),
                    }
                }
                if changed {
                    let new = agg.with_new_aggr_exprs(aggrs);
                    return Ok(Transformed::yes(Arc::new(new) as Arc<dyn ExecutionPlan>));
                }
            }
            Ok(Transformed::no(p))
        })?
        .data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Decimal128Array;
    use arrow::datatypes::Field;
    use datafusion::physical_expr::expressions::{col, lit};

    fn decimals(values: &[Option<i128>], p: u8, s: i8) -> ArrayRef {
        Arc::new(
            Decimal128Array::from(values.to_vec())
                .with_precision_and_scale(p, s)
                .unwrap(),
        )
    }

    /// Checks that `a op b` gives Arrow's checked answer, through the
    /// unchecked form when `exact` says one applies.
    fn same_as_checked(
        schema: &Arc<Schema>,
        batch: &RecordBatch,
        l: Arc<dyn PhysicalExpr>,
        op: Operator,
        r: Arc<dyn PhysicalExpr>,
        exact: bool,
    ) {
        let b = BinaryExpr::new(l, op, r);
        let fast = ExactDecimalExpr::try_new(&b, schema).unwrap();
        assert_eq!(fast.is_some(), exact, "{b}");
        let Some(fast) = fast else {
            return;
        };
        let want = b
            .evaluate(batch)
            .unwrap()
            .into_array(batch.num_rows())
            .unwrap();
        let got = fast
            .evaluate(batch)
            .unwrap()
            .into_array(batch.num_rows())
            .unwrap();
        assert_eq!(got.data_type(), want.data_type(), "{b}");
        assert_eq!(&got, &want, "{b}");
        assert_eq!(
            fast.data_type(schema).unwrap(),
            b.data_type(schema).unwrap()
        );
    }

    #[test]
    fn unchecked_arithmetic_matches_checked_where_it_applies() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("price", DataType::Decimal128(15, 2), true),
            Field::new("disc", DataType::Decimal128(15, 2), true),
            Field::new("rate", DataType::Decimal128(10, 4), true),
            Field::new("big", DataType::Decimal128(30, 0), true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                decimals(&[Some(9_999_999_999_999), Some(-250), None, Some(0)], 15, 2),
                decimals(&[Some(5), Some(-9_999_999_999_999), Some(7), None], 15, 2),
                decimals(&[Some(12_345), Some(-1), Some(99_999_999), Some(3)], 10, 4),
                decimals(&[Some(10i128.pow(29)), Some(-7), Some(1), Some(2)], 30, 0),
            ],
        )
        .unwrap();
        let c = |n: &str| col(n, &schema).unwrap();
        let one = lit(ScalarValue::Decimal128(Some(1), 20, 0));
        let null = lit(ScalarValue::Decimal128(None, 15, 2));
        for op in [Operator::Plus, Operator::Minus, Operator::Multiply] {
            same_as_checked(&schema, &batch, c("price"), op, c("disc"), true);
            // Different scales: both sides rescaled.
            same_as_checked(&schema, &batch, c("price"), op, c("rate"), true);
            same_as_checked(&schema, &batch, one.clone(), op, c("disc"), true);
            same_as_checked(&schema, &batch, c("rate"), op, one.clone(), true);
            same_as_checked(&schema, &batch, c("price"), op, null.clone(), true);
            // 20 + 20 digits may not fit a product.
            let fits = op != Operator::Multiply;
            same_as_checked(&schema, &batch, one.clone(), op, one.clone(), fits);
        }
        // 30 + 15 digits may not fit: left to Arrow's checked multiply.
        same_as_checked(
            &schema,
            &batch,
            c("big"),
            Operator::Multiply,
            c("price"),
            false,
        );
        same_as_checked(&schema, &batch, c("big"), Operator::Plus, c("price"), true);
        // Nested: `price * (1 - disc)` both unchecked, shown with parentheses.
        let inner = Arc::new(BinaryExpr::new(one, Operator::Minus, c("disc")));
        let e: Arc<dyn PhysicalExpr> =
            Arc::new(BinaryExpr::new(c("price"), Operator::Multiply, inner));
        let fast = exact_decimal_expr(&e, &schema).unwrap();
        let shown = fast.to_string();
        assert!(shown.starts_with("(price@0 * ("), "{shown}");
        assert!(shown.ends_with(" - disc@1))"), "{shown}");
        let want = e.evaluate(&batch).unwrap().into_array(4).unwrap();
        let got = fast.evaluate(&batch).unwrap().into_array(4).unwrap();
        assert_eq!(&got, &want);
    }
}

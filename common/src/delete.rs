//! Delete predicates: what `DELETE FROM t WHERE ...` leaves in a tablet.
//!
//! As in Doris, a DELETE on a DUPLICATE or AGGREGATE table (and, for key
//! columns, a UNIQUE one) is a new version holding only a predicate: a
//! conjunction of simple conditions (`col op value`, `IN`, `NOT IN`,
//! `IS [NOT] NULL`). Reads hide the rows of older versions it holds for;
//! base and full compaction apply it to the rows they rewrite and drop it.
//! Values are kept as SQL literal text and cast to the column's type when a
//! backend builds the predicate, so the stored form does not depend on
//! DataFusion's.

use std::sync::Arc;

use arrow::array::{Array, BooleanArray, RecordBatch};
use arrow::compute::kernels::boolean::not;
use arrow::compute::prep_null_mask_filter;
use arrow::datatypes::{Schema, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{Literal, binary, col, in_list, is_not_null, is_null};
use datafusion::physical_expr::utils::conjunction;
use serde::{Deserialize, Serialize};
use tethys_proto::DeleteConditionPb;

use crate::error::{Result, TethysError};
use crate::schema::TableSchema;

/// One condition of a delete predicate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteCondition {
    /// Column name (lower case, as in the Arrow schema).
    pub column: String,
    /// `=`, `!=`, `<`, `<=`, `>`, `>=`, `IN`, `NOT IN`, `IS NULL`, `IS NOT NULL`.
    pub op: String,
    /// Literal values as text (none for `IS [NOT] NULL`).
    pub values: Vec<String>,
}

impl DeleteCondition {
    pub fn to_pb(&self) -> DeleteConditionPb {
        DeleteConditionPb {
            column: self.column.clone(),
            op: self.op.clone(),
            values: self.values.clone(),
        }
    }

    pub fn from_pb(pb: &DeleteConditionPb) -> DeleteCondition {
        DeleteCondition {
            column: pb.column.clone(),
            op: pb.op.clone(),
            values: pb.values.clone(),
        }
    }

    /// Doris' text of the condition, e.g. `k1 = '3'`.
    pub fn sql(&self) -> String {
        let quoted: Vec<String> = self
            .values
            .iter()
            .map(|v| format!("'{}'", v.replace('\'', "''")))
            .collect();
        match self.op.as_str() {
            "IS NULL" | "IS NOT NULL" => format!("{} {}", self.column, self.op),
            "IN" | "NOT IN" => format!("{} {} ({})", self.column, self.op, quoted.join(", ")),
            _ => format!("{} {} {}", self.column, self.op, quoted.join("")),
        }
    }
}

/// A delete predicate ready to filter batches: the predicate over just the
/// columns it reads.
#[derive(Debug)]
pub struct DeleteFilter {
    /// Table column indices the predicate reads, in `schema` order.
    pub columns: Vec<usize>,
    /// The schema of those columns.
    pub schema: SchemaRef,
    /// Rows it holds for are deleted (a NULL result keeps the row).
    pub predicate: Arc<dyn PhysicalExpr>,
}

impl DeleteFilter {
    /// The filter of the union of `predicates` (each a conjunction) against
    /// a table; `None` when there are none.
    pub fn new(
        predicates: &[&[DeleteCondition]],
        table: &TableSchema,
    ) -> Result<Option<DeleteFilter>> {
        if predicates.is_empty() {
            return Ok(None);
        }
        let full = table.arrow_schema();
        let mut columns: Vec<usize> = vec![];
        for c in predicates.iter().flat_map(|p| p.iter()) {
            let i = full.index_of(&c.column).map_err(|_| {
                TethysError::Corruption(format!("delete predicate on unknown column {}", c.column))
            })?;
            if !columns.contains(&i) {
                columns.push(i);
            }
        }
        columns.sort_unstable();
        let schema = Arc::new(full.project(&columns)?);
        let mut any: Option<Arc<dyn PhysicalExpr>> = None;
        for p in predicates {
            let e = conjunction_of(p, &schema)?;
            any = Some(match any {
                None => e,
                Some(a) => binary(a, Operator::Or, e, &schema)?,
            });
        }
        let Some(predicate) = any else {
            return Ok(None);
        };
        Ok(Some(DeleteFilter {
            columns,
            schema,
            predicate,
        }))
    }

    /// Which rows of `batch` (the predicate's columns, in `schema` order)
    /// survive: those the predicate does not hold for.
    pub fn keep(&self, batch: &RecordBatch) -> Result<BooleanArray> {
        let v = self
            .predicate
            .evaluate(batch)?
            .into_array(batch.num_rows())?;
        let b = v
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(|| TethysError::Internal("delete predicate is not boolean".into()))?;
        // NULL (unknown) keeps the row. (`prep_null_mask_filter` needs nulls.)
        Ok(match b.nulls() {
            Some(_) => not(&prep_null_mask_filter(b))?,
            None => not(b)?,
        })
    }
}

fn conjunction_of(conds: &[DeleteCondition], schema: &Schema) -> Result<Arc<dyn PhysicalExpr>> {
    let mut parts = Vec::with_capacity(conds.len());
    for c in conds {
        let column = col(&c.column, schema)?;
        let dt = schema.field_with_name(&c.column)?.data_type().clone();
        let value = |v: &String| -> Result<Arc<dyn PhysicalExpr>> {
            let s = ScalarValue::Utf8(Some(v.clone()))
                .cast_to(&dt)
                .map_err(|_| {
                    TethysError::Analysis(format!(
                        "delete condition value '{v}' is not a valid {dt} for column {}",
                        c.column
                    ))
                })?;
            Ok(Arc::new(Literal::new(s)))
        };
        let first = || {
            c.values.first().ok_or_else(|| {
                TethysError::Corruption(format!("condition {} has no value", c.sql()))
            })
        };
        let e = match c.op.as_str() {
            "IS NULL" => is_null(column)?,
            "IS NOT NULL" => is_not_null(column)?,
            "IN" | "NOT IN" => {
                let list = c.values.iter().map(value).collect::<Result<Vec<_>>>()?;
                in_list(column, list, &(c.op == "NOT IN"), schema)?
            }
            op => {
                let op = match op {
                    "=" => Operator::Eq,
                    "!=" => Operator::NotEq,
                    "<" => Operator::Lt,
                    "<=" => Operator::LtEq,
                    ">" => Operator::Gt,
                    ">=" => Operator::GtEq,
                    other => {
                        return Err(TethysError::Corruption(format!(
                            "unknown delete condition operator {other}"
                        )));
                    }
                };
                binary(column, op, value(first()?)?, schema)?
            }
        };
        parts.push(e);
    }
    Ok(conjunction(parts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Column;
    use crate::types::ColumnType;
    use arrow::array::{Int32Array, StringArray};

    #[test]
    fn conditions_filter_rows_and_nulls_survive() {
        let column = |n: &str, t: ColumnType| Column::new(n, t, true, false);
        let table = TableSchema {
            columns: vec![
                column("k", ColumnType::Int),
                column("s", ColumnType::Varchar(4)),
                column("d", ColumnType::Date),
            ],
            ..Default::default()
        };
        let cond = |c: &str, op: &str, v: &[&str]| DeleteCondition {
            column: c.into(),
            op: op.into(),
            values: v.iter().map(|s| s.to_string()).collect(),
        };
        // (k >= 2 AND s IN ('a', 'b')) OR k IS NULL
        let p1 = [cond("k", ">=", &["2"]), cond("s", "IN", &["a", "b"])];
        let p2 = [cond("k", "IS NULL", &[])];
        let f = DeleteFilter::new(&[&p1, &p2], &table).unwrap().unwrap();
        assert_eq!(f.columns, vec![0, 1]);
        let b = RecordBatch::try_new(
            f.schema.clone(),
            vec![
                Arc::new(Int32Array::from(vec![
                    Some(1),
                    Some(2),
                    Some(3),
                    None,
                    Some(5),
                ])),
                Arc::new(StringArray::from(vec![
                    Some("a"),
                    Some("a"),
                    Some("c"),
                    Some("a"),
                    None,
                ])),
            ],
        )
        .unwrap();
        let keep: Vec<bool> = f
            .keep(&b)
            .unwrap()
            .iter()
            .map(|v| v.unwrap_or(false))
            .collect();
        // Row 5: s is NULL, so `s IN (...)` is NULL: kept.
        assert_eq!(keep, vec![true, false, true, false, true]);
        // Without NULLs in the result.
        let no_nulls = RecordBatch::try_new(
            f.schema.clone(),
            vec![
                Arc::new(Int32Array::from(vec![1, 2])),
                Arc::new(StringArray::from(vec!["a", "b"])),
            ],
        )
        .unwrap();
        let keep: Vec<bool> = f
            .keep(&no_nulls)
            .unwrap()
            .iter()
            .map(|v| v.unwrap_or(false))
            .collect();
        assert_eq!(keep, vec![true, false]);
        assert_eq!(p1[1].sql(), "s IN ('a', 'b')");
        let bad = [cond("d", "=", &["not a date"])];
        let e = DeleteFilter::new(&[&bad], &table).unwrap_err().to_string();
        assert!(e.contains("not a valid"), "{e}");
    }
}

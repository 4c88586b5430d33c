//! The Doris aggregates over BITMAP and HLL values: `bitmap_union`,
//! `bitmap_union_count`, `bitmap_agg` (integers into a bitmap), `hll_union`
//! (alias `hll_raw_agg`) and `hll_union_agg`. Their partial state is the
//! encoded object itself, so a fragment's partial aggregate travels between
//! backends like any `Binary` column.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Field, FieldRef, Int64Type, UInt64Type};
use datafusion::common::{ScalarValue, exec_err};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};
use roaring::RoaringTreemap;

use super::hll::Hll;
use super::object::{ObjectKind, check_arg_fields, integer_arg, object_arg};
use super::{bitmap, hll};

/// What the aggregate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Input {
    /// Encoded objects of the aggregate's kind.
    Objects,
    /// Integers, each added as a value (`bitmap_agg`).
    Integers,
}

/// What the aggregate returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Output {
    /// The union, encoded.
    Object,
    /// The number of distinct values in the union (estimated for HLL).
    Count,
}

/// One object aggregate.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ObjectAgg {
    name: &'static str,
    aliases: Vec<String>,
    kind: ObjectKind,
    input: Input,
    output: Output,
    signature: Signature,
}

/// The aggregates of this module.
pub(super) fn udafs() -> Vec<Arc<AggregateUDF>> {
    use ObjectKind::*;
    [
        (
            "bitmap_union",
            &[][..],
            Bitmap,
            Input::Objects,
            Output::Object,
        ),
        (
            "bitmap_union_count",
            &[],
            Bitmap,
            Input::Objects,
            Output::Count,
        ),
        ("bitmap_agg", &[], Bitmap, Input::Integers, Output::Object),
        (
            "hll_union",
            &["hll_raw_agg"],
            Hll,
            Input::Objects,
            Output::Object,
        ),
        ("hll_union_agg", &[], Hll, Input::Objects, Output::Count),
    ]
    .into_iter()
    .map(|(name, aliases, kind, input, output)| {
        Arc::new(AggregateUDF::from(ObjectAgg {
            name,
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
            kind,
            input,
            output,
            signature: Signature::user_defined(Volatility::Immutable),
        }))
    })
    .collect()
}

impl AggregateUDFImpl for ObjectAgg {
    named_by_fields!(with aliases);
    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        let name = self.name;
        let [t] = args else {
            return exec_err!("{name}() takes one argument, given {}", args.len());
        };
        Ok(vec![match self.input {
            Input::Objects => object_arg(name, self.kind, t)?,
            Input::Integers => integer_arg(name, t)?,
        }])
    }
    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(match self.output {
            Output::Object => DataType::Binary,
            Output::Count => DataType::Int64,
        })
    }
    fn return_field(&self, args: &[FieldRef]) -> Result<FieldRef> {
        if self.input == Input::Objects {
            check_arg_fields(self.name, self.kind, args)?;
        }
        Ok(Arc::new(match self.output {
            Output::Object => self.kind.field(self.name, true),
            Output::Count => Field::new(self.name, DataType::Int64, false),
        }))
    }
    fn is_nullable(&self) -> bool {
        self.output == Output::Object
    }
    fn default_value(&self, _t: &DataType) -> Result<ScalarValue> {
        Ok(match self.output {
            Output::Object => ScalarValue::Binary(None),
            Output::Count => ScalarValue::Int64(Some(0)),
        })
    }
    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format!("{}[union]", args.name),
            DataType::Binary,
            true,
        ))])
    }
    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(ObjectAccumulator {
            name: self.name,
            input: self.input,
            output: self.output,
            state: match self.kind {
                ObjectKind::Bitmap => State::Bitmap(RoaringTreemap::new()),
                ObjectKind::Hll => State::Hll(Hll::default()),
            },
            seen: false,
        }))
    }
}

#[derive(Debug)]
enum State {
    Bitmap(RoaringTreemap),
    Hll(Hll),
}

#[derive(Debug)]
struct ObjectAccumulator {
    name: &'static str,
    input: Input,
    output: Output,
    state: State,
    /// Whether any non-NULL input arrived (an object union of none is NULL).
    seen: bool,
}

impl ObjectAccumulator {
    fn bad(&self, e: String) -> DataFusionError {
        DataFusionError::Execution(format!("{}(): {e}", self.name))
    }

    fn add_objects(&mut self, arr: &ArrayRef) -> Result<()> {
        let arr = arr.as_binary_opt::<i32>().ok_or_else(|| {
            DataFusionError::Internal(format!("{}() given {}", self.name, arr.data_type()))
        })?;
        for v in arr.iter().flatten() {
            self.seen = true;
            let r = match &mut self.state {
                State::Bitmap(acc) => bitmap::union_into(acc, v),
                State::Hll(acc) => acc.merge_encoded(v),
            };
            r.map_err(|e| self.bad(e))?;
        }
        Ok(())
    }

    fn encoded(&self) -> Vec<u8> {
        match &self.state {
            State::Bitmap(s) => bitmap::encode(s),
            State::Hll(h) => h.encode(),
        }
    }
}

impl Accumulator for ObjectAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let Some(arr) = values.first() else {
            return Ok(());
        };
        match self.input {
            Input::Objects => {
                if arr.data_type() == &DataType::Null {
                    return Ok(());
                }
                self.add_objects(arr)
            }
            Input::Integers => {
                let State::Bitmap(acc) = &mut self.state else {
                    return Ok(());
                };
                let mut add = |v: Option<u64>| {
                    if let Some(v) = v {
                        acc.insert(v);
                    }
                };
                match arr.data_type() {
                    DataType::UInt64 => arr.as_primitive::<UInt64Type>().iter().for_each(add),
                    DataType::Int64 => arr
                        .as_primitive::<Int64Type>()
                        .iter()
                        .for_each(|v| add(v.and_then(|v| u64::try_from(v).ok()))),
                    _ => {}
                }
                self.seen |= !acc.is_empty();
                Ok(())
            }
        }
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        match states.first() {
            Some(arr) => self.add_objects(arr),
            None => Ok(()),
        }
    }
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Binary(self.seen.then(|| self.encoded()))])
    }
    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(match self.output {
            Output::Object => ScalarValue::Binary(self.seen.then(|| self.encoded())),
            Output::Count => ScalarValue::Int64(Some(match &self.state {
                State::Bitmap(s) => i64::try_from(s.len()).unwrap_or(i64::MAX),
                State::Hll(h) => h.estimate(),
            })),
        })
    }
    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + match &self.state {
                State::Bitmap(s) => s.serialized_size(),
                State::Hll(hll::Hll::Registers(r)) => r.len(),
                State::Hll(hll::Hll::Explicit(v)) => 8 * v.capacity(),
                State::Hll(hll::Hll::Empty) => 0,
            }
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::Int64Type;
    use datafusion::prelude::SessionContext;

    #[tokio::test]
    async fn unions_and_counts_through_sql() {
        let mut ctx = SessionContext::new();
        crate::functions::register_all(&mut ctx).unwrap();
        let q = "select k, bitmap_union_count(b), bitmap_count(bitmap_union(b)), \
                 hll_union_agg(h), hll_cardinality(hll_raw_agg(h)), \
                 bitmap_to_string(bitmap_agg(v)) \
                 from (select k, to_bitmap(v) as b, hll_hash(v) as h, v from \
                 (values (1, 10), (1, 11), (1, 10), (2, 7), (2, null)) as t(k, v)) \
                 group by k order by k";
        let batches = ctx.sql(q).await.unwrap().collect().await.unwrap();
        let b = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
        let col = |i: usize| -> Int64Array { b.column(i).as_primitive::<Int64Type>().clone() };
        assert_eq!(col(1).values().to_vec(), vec![2, 1]);
        assert_eq!(col(2).values().to_vec(), vec![2, 1]);
        assert_eq!(col(3).values().to_vec(), vec![2, 1]);
        assert_eq!(col(4).values().to_vec(), vec![2, 1]);
        let s = b.column(5).as_string::<i32>();
        assert_eq!(s.value(0), "10,11");
        assert_eq!(s.value(1), "7");
    }
}

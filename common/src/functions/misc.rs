//! Miscellaneous MySQL functions: `if`, MySQL spellings (`ucase`, `lcase`),
//! and per-session constants such as `database()` and `connection_id()`.

use std::sync::Arc;

use arrow::array::{AsArray, BooleanArray};
use arrow::compute::kernels::cast::cast;
use arrow::compute::kernels::zip::zip;
use arrow::datatypes::DataType;
use datafusion::common::{ScalarValue, exec_err};
use datafusion::error::Result;
use datafusion::logical_expr::type_coercion::binary::comparison_coercion;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

pub(super) fn udfs() -> Vec<Arc<ScalarUDF>> {
    let upper = datafusion::functions::string::upper();
    let lower = datafusion::functions::string::lower();
    vec![
        Arc::new(ScalarUDF::from(IfFn::new())),
        Arc::new(upper.as_ref().clone().with_aliases(["ucase"])),
        Arc::new(lower.as_ref().clone().with_aliases(["lcase"])),
    ]
}

/// `if(cond, a, b)`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct IfFn {
    signature: Signature,
}

impl IfFn {
    fn new() -> Self {
        IfFn {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for IfFn {
    fn name(&self) -> &str {
        "if"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        if arg_types.len() != 3 {
            return exec_err!(
                "if() takes three arguments: if(condition, value_if_true, value_if_false)"
            );
        }
        let common = if arg_types[1] == DataType::Null {
            arg_types[2].clone()
        } else if arg_types[2] == DataType::Null {
            arg_types[1].clone()
        } else {
            comparison_coercion(&arg_types[1], &arg_types[2]).unwrap_or(DataType::Utf8)
        };
        Ok(vec![DataType::Boolean, common.clone(), common])
    }
    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types.get(1).cloned().unwrap_or(DataType::Null))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let cond = cast(&args.args[0].to_array(n)?, &DataType::Boolean)?;
        let cond = cond.as_boolean();
        // NULL conditions choose the false branch, as in MySQL.
        let mask: BooleanArray = cond.iter().map(|v| Some(v.unwrap_or(false))).collect();
        let a = args.args[1].to_array(n)?;
        let b = args.args[2].to_array(n)?;
        Ok(ColumnarValue::Array(zip(&mask, &a.as_ref(), &b.as_ref())?))
    }
}

/// A per-session constant function such as `database()`, `user()` or
/// `connection_id()`; the FE registers one per session and folds it at plan time.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ConstFn {
    name: String,
    value: ScalarValue,
    signature: Signature,
}

impl ConstFn {
    /// A function `name()` that returns `value`.
    pub fn udf(name: &str, value: ScalarValue) -> ScalarUDF {
        ScalarUDF::from(ConstFn {
            name: name.to_string(),
            value,
            signature: Signature::nullary(Volatility::Immutable),
        })
    }
}

impl ScalarUDFImpl for ConstFn {
    fn name(&self) -> &str {
        &self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(self.value.data_type())
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let _ = args.number_rows;
        Ok(ColumnarValue::Scalar(self.value.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    #[tokio::test]
    async fn if_and_aliases() {
        let mut ctx = SessionContext::new();
        crate::functions::register_all(&mut ctx).unwrap();
        let batches = ctx
            .sql("select if(1 > 2, 'a', 'b') as x, ucase('q') as y, date_format('2026-08-01 10:00:00', '%Y%m') as z")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let b = &batches[0];
        let s = |i: usize| {
            let c = cast(b.column(i), &DataType::Utf8).unwrap();
            c.as_string::<i32>().value(0).to_string()
        };
        assert_eq!(s(0), "b");
        assert_eq!(s(1), "Q");
        assert_eq!(s(2), "202608");
        let _ = b.num_rows();
        let _ = b.column(0).len();
    }
}

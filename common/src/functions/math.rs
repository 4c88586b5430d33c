//! MySQL's and Doris' answers where DataFusion's math functions give
//! another type:
//!
//! ```sql
//! SELECT ceil(1.2), floor(-1.5), ceil(price) FROM items;  -- 2, -2 (DataFusion: 2.0, -2.0)
//! ```
//!
//! `ceil` / `floor` (and `ceiling`, `dceil`, `dfloor`) of a floating-point
//! or integer value are BIGINT, of a DECIMAL(p, s) a DECIMAL(p, 0).

use std::sync::Arc;

use arrow::compute::kernels::cast::cast;
use arrow::datatypes::DataType;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};

pub(super) fn udfs() -> Vec<Arc<ScalarUDF>> {
    let integral = |inner: Arc<ScalarUDF>, name, aliases: &[&str]| {
        Arc::new(ScalarUDF::from(Integral {
            signature: inner.signature().clone(),
            inner,
            name,
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
        }))
    };
    vec![
        integral(
            datafusion::functions::math::ceil(),
            "ceil",
            &["ceiling", "dceil"],
        ),
        integral(datafusion::functions::math::floor(), "floor", &["dfloor"]),
    ]
}

/// DataFusion's `ceil` / `floor`, answering in an integral type.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Integral {
    inner: Arc<ScalarUDF>,
    name: &'static str,
    aliases: Vec<String>,
    signature: Signature,
}

impl ScalarUDFImpl for Integral {
    named_by_fields!(with aliases);
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }
    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(match self.inner.return_type(arg_types)? {
            DataType::Decimal128(p, _) => DataType::Decimal128(p, 0),
            DataType::Decimal256(p, _) => DataType::Decimal256(p, 0),
            DataType::Null => DataType::Null,
            _ => DataType::Int64,
        })
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let to = args.return_field.data_type().clone();
        let arg_fields = args.arg_fields.clone();
        let inner_type = self.inner.return_type(
            &arg_fields
                .iter()
                .map(|f| f.data_type().clone())
                .collect::<Vec<_>>(),
        )?;
        let inner_args = ScalarFunctionArgs {
            return_field: Arc::new(arrow::datatypes::Field::new(self.name, inner_type, true)),
            ..args
        };
        Ok(match self.inner.invoke_with_args(inner_args)? {
            ColumnarValue::Array(a) => ColumnarValue::Array(cast(&a, &to)?),
            ColumnarValue::Scalar(s) => ColumnarValue::Scalar(s.cast_to(&to)?),
        })
    }
}

//! Miscellaneous MySQL functions: `if`, MySQL spellings (`ucase`, `lcase`),
//! and per-session constants such as `database()` and `connection_id()`.

use super::fixed::Fixed;
use std::sync::Arc;

use arrow::array::{Array, AsArray, BooleanArray};
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
        Arc::new(ScalarUDF::from(Coalesce {
            signature: datafusion::functions::core::coalesce().signature().clone(),
            inner: datafusion::functions::core::coalesce(),
            aliases: vec!["ifnull".into(), "nvl".into()],
        })),
        Fixed::udf(
            "locate",
            Signature::one_of(
                vec![
                    datafusion::logical_expr::TypeSignature::Exact(vec![
                        DataType::Utf8,
                        DataType::Utf8,
                    ]),
                    datafusion::logical_expr::TypeSignature::Exact(vec![
                        DataType::Utf8,
                        DataType::Utf8,
                        DataType::Int64,
                    ]),
                ],
                Volatility::Immutable,
            ),
            DataType::Int64,
            locate_udf,
        ),
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
    named_by_fields!("if");
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        if arg_types.len() != 3 {
            return exec_err!(
                "if() takes three arguments: if(condition, value_if_true, value_if_false)"
            );
        }
        let common = common_type(&arg_types[1..]);
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

/// The one type MySQL gives `if`, `ifnull` and `coalesce` over values of
/// these types: numbers widen, dates widen to datetimes, and a mix of
/// strings, numbers and dates is a string (`ifnull(int_col,
/// to_date('9999-01-01'))` gave a column of integers and dates).
pub fn common_type(types: &[DataType]) -> DataType {
    let kind = |t: &DataType| {
        if t.is_numeric() {
            1
        } else if t.is_temporal() {
            2
        } else {
            3
        }
    };
    let mut common = DataType::Null;
    for t in types.iter().filter(|t| !t.is_null()) {
        common = if common.is_null() || &common == t {
            t.clone()
        } else if kind(&common) == kind(t) && kind(t) != 3 {
            comparison_coercion(&common, t).unwrap_or(DataType::Utf8)
        } else if matches!(
            (&common, t),
            (DataType::LargeUtf8, DataType::Utf8) | (DataType::Utf8, DataType::LargeUtf8)
        ) {
            DataType::LargeUtf8
        } else {
            DataType::Utf8
        };
    }
    common
}

/// MySQL's `coalesce` / `ifnull` / `nvl`: DataFusion's, with
/// [`common_type`]'s coercion.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Coalesce {
    inner: Arc<ScalarUDF>,
    aliases: Vec<String>,
    signature: Signature,
}

impl ScalarUDFImpl for Coalesce {
    named_by_fields!("coalesce", with aliases);
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        if arg_types.is_empty() {
            return exec_err!("coalesce takes at least one argument");
        }
        let common = common_type(arg_types);
        Ok(vec![common; arg_types.len()])
    }
    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(common_type(arg_types))
    }
    fn return_field_from_args(
        &self,
        args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> Result<arrow::datatypes::FieldRef> {
        self.inner.return_field_from_args(args)
    }
    fn simplify(
        &self,
        args: Vec<datafusion::logical_expr::Expr>,
        info: &datafusion::logical_expr::simplify::SimplifyContext,
    ) -> Result<datafusion::logical_expr::simplify::ExprSimplifyResult> {
        self.inner.inner().simplify(args, info)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        self.inner.invoke_with_args(args)
    }
    fn conditional_arguments<'a>(
        &self,
        args: &'a [datafusion::logical_expr::Expr],
    ) -> Option<(
        Vec<&'a datafusion::logical_expr::Expr>,
        Vec<&'a datafusion::logical_expr::Expr>,
    )> {
        self.inner.inner().conditional_arguments(args)
    }
    fn short_circuits(&self) -> bool {
        true
    }
}

/// `locate(substr, str[, pos])`: the 1-based character position of the
/// first `substr` in `str` at or after `pos`, 0 when there is none (MySQL's
/// and Doris'; MariaDB Connector/J's `getColumns` calls it).
fn locate_udf(_: &str, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
    let n = args.number_rows;
    let arrays = super::arrays(&args)?;
    let (needle, hay) = (arrays[0].as_string::<i32>(), arrays[1].as_string::<i32>());
    let pos = arrays
        .get(2)
        .map(|p| p.as_primitive::<arrow::datatypes::Int64Type>());
    let out: arrow::array::Int64Array = (0..n)
        .map(|i| {
            if needle.is_null(i) || hay.is_null(i) || pos.is_some_and(|p| p.is_null(i)) {
                return None;
            }
            let p = pos.map_or(1, |p| p.value(i));
            Some(locate(needle.value(i), hay.value(i), p))
        })
        .collect();
    Ok(ColumnarValue::Array(Arc::new(out)))
}

/// [`LocateFn`] on one row.
fn locate(needle: &str, hay: &str, pos: i64) -> i64 {
    if pos < 1 {
        return 0;
    }
    let start = match hay.char_indices().nth(pos as usize - 1) {
        Some((b, _)) => b,
        None if needle.is_empty() && hay.chars().count() + 1 == pos as usize => hay.len(),
        None => return 0,
    };
    match hay[start..].find(needle) {
        Some(b) => pos + hay[start..start + b].chars().count() as i64,
        None => 0,
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
    named_by_fields!();
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

    #[test]
    fn locate_counts_characters_from_one() {
        assert_eq!(locate("bar", "foobarbar", 1), 4);
        assert_eq!(locate("bar", "foobarbar", 5), 7);
        assert_eq!(locate("xbar", "foobar", 1), 0);
        assert_eq!(locate("é", "aéé", 3), 3);
        assert_eq!(locate("", "abc", 1), 1);
        assert_eq!(locate("a", "abc", 0), 0);
        assert_eq!(locate("a", "abc", 9), 0);
    }
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

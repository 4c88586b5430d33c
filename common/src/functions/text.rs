//! The shape most Doris string functions share: text arguments in, text
//! out, NULL when any argument is NULL. One [`TextFn`] runs a row function
//! over the argument arrays (each cast to text once, datetimes as MySQL
//! prints them), or once when every argument is a constant.
//!
//! ```sql
//! SELECT regexp_extract(url, '//([^/]+)/', 1), mask(phone), money_format(amount) FROM visits
//! ```

use super::fixed::Fixed;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use arrow::compute::kernels::cast::{CastOptions, cast_with_options};
use arrow::datatypes::DataType;
use datafusion::common::{ScalarValue, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// One row: the arguments' texts (none NULL) to the result (None is NULL).
pub(super) type RowFn = fn(&[&str]) -> Result<Option<String>>;

/// An array cast to text as MySQL prints it (a space, not ISO's `T`, in a
/// datetime).
pub(super) fn mysql_text(a: &ArrayRef) -> Result<ArrayRef> {
    let options = CastOptions {
        safe: true,
        format_options: arrow::util::display::FormatOptions::default()
            .with_timestamp_format(Some("%Y-%m-%d %H:%M:%S%.f")),
    };
    Ok(cast_with_options(a, &DataType::Utf8, &options)?)
}

/// A string function of `min..=max` text arguments (one per name: equal
/// names are the same function).
#[derive(Debug)]
pub(super) struct TextFn {
    name: &'static str,
    aliases: Vec<String>,
    min: usize,
    max: usize,
    row: RowFn,
    signature: Signature,
}

impl TextFn {
    pub(super) fn udf(name: &'static str, min: usize, max: usize, row: RowFn) -> Arc<ScalarUDF> {
        Self::aliased(name, &[], min, max, row)
    }

    pub(super) fn aliased(
        name: &'static str,
        aliases: &[&str],
        min: usize,
        max: usize,
        row: RowFn,
    ) -> Arc<ScalarUDF> {
        Arc::new(ScalarUDF::from(TextFn {
            name,
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
            min,
            max,
            row,
            signature: Signature::variadic_any(Volatility::Immutable),
        }))
    }
}

impl PartialEq for TextFn {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for TextFn {}

impl std::hash::Hash for TextFn {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ScalarUDFImpl for TextFn {
    named_by_fields!(with aliases);
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        if args.len() < self.min || args.len() > self.max {
            let want = if self.min == self.max {
                self.min.to_string()
            } else {
                format!("{} to {}", self.min, self.max)
            };
            return plan_err!("{} takes {want} arguments, not {}", self.name, args.len());
        }
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (constant, arrays) = super::constant_or_arrays(&args)?;
        let n = arrays.first().map_or(args.number_rows, |a| a.len());
        let texts = arrays.iter().map(mysql_text).collect::<Result<Vec<_>>>()?;
        let cols: Vec<_> = texts.iter().map(|a| a.as_string::<i32>()).collect();
        let mut b = StringBuilder::with_capacity(n, n * 8);
        let mut row: Vec<&str> = Vec::with_capacity(cols.len());
        for i in 0..n {
            row.clear();
            if cols.iter().any(|c| c.is_null(i)) {
                b.append_null();
                continue;
            }
            row.extend(cols.iter().map(|c| c.value(i)));
            b.append_option((self.row)(&row)?);
        }
        super::constant_or_array(constant, Arc::new(b.finish()))
    }
}

/// The function the FE plans `CAST(x AS STRING)` (and VARCHAR, CHAR, TEXT)
/// with: [`mysql_text`], so a datetime reads `2024-01-01 10:00:00` as in
/// MySQL and Doris, not ISO's `2024-01-01T10:00:00`.
pub const CAST_TO_TEXT: &str = "tethys_text";

pub(super) fn cast_to_text_udf() -> Arc<ScalarUDF> {
    Fixed::udf(
        CAST_TO_TEXT,
        Signature::any(1, Volatility::Immutable),
        DataType::Utf8,
        tethys_text,
    )
}

fn tethys_text(_: &str, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
    Ok(match &args.args[0] {
        ColumnarValue::Scalar(v) => ColumnarValue::Scalar(ScalarValue::try_from_array(
            &mysql_text(&v.to_array_of_size(1)?)?,
            0,
        )?),
        ColumnarValue::Array(a) => ColumnarValue::Array(mysql_text(a)?),
    })
}

/// An integer argument; a text that is not one is an error naming the function.
pub(super) fn int_arg(name: &str, s: &str) -> Result<i64> {
    let t = s.trim();
    t.parse::<i64>()
        .or_else(|_| t.parse::<f64>().map(|f| f.trunc() as i64))
        .map_err(|_| {
            datafusion::error::DataFusionError::Execution(format!(
                "{name}: '{s}' is not an integer"
            ))
        })
}

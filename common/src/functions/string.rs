//! MySQL's string functions where DataFusion's answer differently.
//!
//! ```sql
//! SUBSTRING(COLUMN_TYPE, 1, LOCATE('(', COLUMN_TYPE) - 1)
//! ```
//!
//! (MariaDB Connector/J's `getColumns`, for a type without parentheses)
//! is `''` in MySQL and Doris; DataFusion's `substr` fails on the negative
//! length. A negative position counts from the end, as in MySQL.

use std::sync::Arc;

use arrow::array::{Array, AsArray, StringArray};
use arrow::datatypes::{DataType, Int64Type};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};

pub(super) fn udfs() -> Vec<Arc<ScalarUDF>> {
    // `length` counts bytes in MySQL and Doris (`char_length` counts characters).
    let octets = datafusion::functions::string::octet_length();
    vec![
        Arc::new(octets.as_ref().clone().with_aliases(["length"])),
        Arc::new(ScalarUDF::from(Concat {
            signature: Signature::variadic_any(Volatility::Immutable),
        })),
        Arc::new(ScalarUDF::from(SplitPart {
            signature: Signature::exact(
                vec![DataType::Utf8, DataType::Utf8, DataType::Int64],
                Volatility::Immutable,
            ),
        })),
        substring_udf(),
        Arc::new(ScalarUDF::from(CharFn {
            signature: Signature::variadic(vec![DataType::Int64], Volatility::Immutable),
        })),
    ]
}

/// MySQL's `concat(a, ...)`: NULL when any argument is NULL (DataFusion's
/// skips NULLs: `concat('a', NULL, 'c')` was `'ac'`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct Concat {
    signature: Signature,
}

impl ScalarUDFImpl for Concat {
    fn name(&self) -> &str {
        "concat"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        // Datetimes as MySQL shows them (a space, not ISO's `T`).
        let options = arrow::compute::kernels::cast::CastOptions {
            safe: true,
            format_options: arrow::util::display::FormatOptions::default()
                .with_timestamp_format(Some("%Y-%m-%d %H:%M:%S%.f")),
        };
        let texts = super::arrays(&args)?
            .iter()
            .map(|a| arrow::compute::kernels::cast::cast_with_options(a, &DataType::Utf8, &options))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let parts: Vec<_> = texts.iter().map(|a| a.as_string::<i32>()).collect();
        let mut b = arrow::array::StringBuilder::with_capacity(n, n * 8 * parts.len().max(1));
        let mut row = String::new();
        for i in 0..n {
            if parts.iter().any(|p| p.is_null(i)) {
                b.append_null();
                continue;
            }
            row.clear();
            for p in &parts {
                row.push_str(p.value(i));
            }
            b.append_value(&row);
        }
        Ok(ColumnarValue::Array(Arc::new(b.finish())))
    }
}

/// Doris' `split_part(s, delimiter, field)`: the field-th piece, counted
/// from the end when negative; NULL when there is no such piece (or the
/// delimiter is empty), where DataFusion's returned `''`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct SplitPart {
    signature: Signature,
}

/// [`SplitPart`] on one row.
pub fn split_part<'a>(s: &'a str, delim: &str, field: i64) -> Option<&'a str> {
    if delim.is_empty() || field == 0 {
        return None;
    }
    if field > 0 {
        s.split(delim).nth(field as usize - 1)
    } else {
        s.rsplit(delim).nth((-field) as usize - 1)
    }
}

impl ScalarUDFImpl for SplitPart {
    fn name(&self) -> &str {
        "split_part"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let arrays = super::arrays(&args)?;
        let (s, d) = (arrays[0].as_string::<i32>(), arrays[1].as_string::<i32>());
        let f = arrays[2].as_primitive::<Int64Type>();
        let out: StringArray = (0..n)
            .map(|i| {
                if s.is_null(i) || d.is_null(i) || f.is_null(i) {
                    return None;
                }
                split_part(s.value(i), d.value(i), f.value(i))
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// MySQL's `char(n, ...)`: the string of the bytes of each integer
/// (`CHAR(39)` is `'`; MariaDB Connector/ODBC's `SQLColumns` quotes
/// defaults with it); NULL arguments are skipped.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CharFn {
    signature: Signature,
}

/// The bytes of `n`, most significant first, without leading zeros.
fn char_bytes(n: i64, out: &mut Vec<u8>) {
    let b = (n as u32).to_be_bytes();
    let first = b.iter().position(|x| *x != 0).unwrap_or(3);
    out.extend_from_slice(&b[first..]);
}

impl ScalarUDFImpl for CharFn {
    fn name(&self) -> &str {
        "char"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let arrays = super::arrays(&args)?;
        let ints: Vec<_> = arrays
            .iter()
            .map(|a| a.as_primitive::<Int64Type>())
            .collect();
        let out: StringArray = (0..n)
            .map(|i| {
                let mut bytes = Vec::new();
                for a in &ints {
                    if !a.is_null(i) {
                        char_bytes(a.value(i), &mut bytes);
                    }
                }
                Some(String::from_utf8_lossy(&bytes).into_owned())
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// MySQL's `substring`; the FE plans `SUBSTRING(s FROM p FOR n)` with it.
pub fn substring_udf() -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::from(Substring {
        signature: Signature::one_of(
            vec![
                TypeSignature::Exact(vec![DataType::Utf8, DataType::Int64]),
                TypeSignature::Exact(vec![DataType::Utf8, DataType::Int64, DataType::Int64]),
            ],
            Volatility::Immutable,
        ),
        aliases: vec!["substring".into(), "mid".into()],
    }))
}

/// MySQL's `substring(str, pos[, len])` (also `substr`, `mid`).
pub fn substring(s: &str, pos: i64, len: Option<i64>) -> &str {
    let n = s.chars().count() as i64;
    let start = match pos {
        0 => return "",
        p if p > 0 => p - 1,
        p => n + p,
    };
    if start < 0 || start >= n {
        return "";
    }
    let take = match len {
        Some(l) if l <= 0 => return "",
        Some(l) => l.min(n - start),
        None => n - start,
    };
    let mut idx = s.char_indices().map(|(b, _)| b).chain([s.len()]);
    let b0 = idx.nth(start as usize).unwrap_or(s.len());
    let b1 = idx.nth(take as usize - 1).unwrap_or(s.len());
    &s[b0..b1]
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Substring {
    signature: Signature,
    aliases: Vec<String>,
}

impl ScalarUDFImpl for Substring {
    fn name(&self) -> &str {
        "substr"
    }
    fn aliases(&self) -> &[String] {
        &self.aliases
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let arrays = super::arrays(&args)?;
        let (s, pos) = (
            arrays[0].as_string::<i32>(),
            arrays[1].as_primitive::<Int64Type>(),
        );
        let len = arrays.get(2).map(|l| l.as_primitive::<Int64Type>());
        let out: StringArray = (0..n)
            .map(|i| {
                if s.is_null(i) || pos.is_null(i) || len.is_some_and(|l| l.is_null(i)) {
                    return None;
                }
                Some(substring(s.value(i), pos.value(i), len.map(|l| l.value(i))))
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

#[cfg(test)]
mod tests {
    use super::substring;

    #[test]
    fn doris_split_part() {
        use super::split_part;
        assert_eq!(split_part("hello world", " ", 2), Some("world"));
        assert_eq!(split_part("hello world", " ", -1), Some("world"));
        assert_eq!(split_part("hello world", " ", -3), None);
        assert_eq!(split_part("abc##123###xyz", "##", 5), None);
        assert_eq!(split_part("abc##123###xyz", "##", 3), Some("#xyz"));
        assert_eq!(split_part("a", "", 1), None);
    }

    #[test]
    fn char_of_codes() {
        let mut b = vec![];
        for n in [39, 0x4d, 0x7979] {
            super::char_bytes(n, &mut b);
        }
        assert_eq!(b, b"'Myy");
    }

    #[test]
    fn mysql_substring() {
        assert_eq!(substring("varchar(10)", 1, Some(7)), "varchar");
        assert_eq!(substring("largeint", 1, Some(-1)), "");
        assert_eq!(substring("hello", -3, None), "llo");
        assert_eq!(substring("hello", -3, Some(2)), "ll");
        assert_eq!(substring("hello", 0, None), "");
        assert_eq!(substring("hello", 9, None), "");
        assert_eq!(substring("hello", -9, None), "");
        assert_eq!(substring("héllo", 2, Some(3)), "éll");
        assert_eq!(substring("hello", 4, Some(100)), "lo");
    }
}

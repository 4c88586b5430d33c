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

use super::fixed::Fixed;
use super::text::{TextFn, int_arg, mysql_text};

pub(super) fn udfs() -> Vec<Arc<ScalarUDF>> {
    // `length` counts bytes in MySQL and Doris (`char_length` counts characters).
    let octets = datafusion::functions::string::octet_length();
    vec![
        Arc::new(octets.as_ref().clone().with_aliases(["length"])),
        Fixed::udf(
            "concat",
            Signature::variadic_any(Volatility::Immutable),
            DataType::Utf8,
            concat,
        ),
        Fixed::udf(
            "split_part",
            Signature::exact(
                vec![DataType::Utf8, DataType::Utf8, DataType::Int64],
                Volatility::Immutable,
            ),
            DataType::Utf8,
            split_part_udf,
        ),
        substring_udf(),
        Fixed::udf(
            "char",
            Signature::variadic(vec![DataType::Int64], Volatility::Immutable),
            DataType::Utf8,
            char_fn,
        ),
        TextFn::udf("mask", 1, 4, |a| {
            let pick = |i: usize, d: u8| a.get(i).map_or(d, |s| s.bytes().next().unwrap_or(d));
            let (upper, lower, digit) = (pick(1, b'X'), pick(2, b'x'), pick(3, b'n'));
            Ok(Some(mask(a[0], 0..usize::MAX, [upper, lower, digit])))
        }),
        TextFn::udf("mask_first_n", 1, 2, |a| {
            let n = a
                .get(1)
                .map_or(Ok(i64::MAX), |n| int_arg("mask_first_n", n))?;
            Ok(Some(mask(a[0], 0..n.max(0) as usize, MASKS)))
        }),
        TextFn::udf("mask_last_n", 1, 2, |a| {
            let n = a
                .get(1)
                .map_or(Ok(i64::MAX), |n| int_arg("mask_last_n", n))?;
            let from = a[0].len().saturating_sub(n.max(0) as usize);
            Ok(Some(mask(a[0], from..usize::MAX, MASKS)))
        }),
        TextFn::udf("money_format", 1, 1, |a| Ok(money_format(a[0]))),
        TextFn::aliased("left", &["strleft"], 2, 2, |a| {
            let n = int_arg("left", a[1])?;
            Ok(Some(left_right(a[0], n, true).to_string()))
        }),
        TextFn::aliased("right", &["strright"], 2, 2, |a| {
            let n = int_arg("right", a[1])?;
            Ok(Some(left_right(a[0], n, false).to_string()))
        }),
        TextFn::udf("append_trailing_char_if_absent", 2, 2, |a| {
            Ok(append_trailing_char_if_absent(a[0], a[1]))
        }),
        Arc::new(ScalarUDF::from(ConcatWs {
            inner: datafusion::functions::string::concat_ws(),
            join: datafusion::functions_nested::string::array_to_string_udf(),
        })),
        Fixed::udf(
            "split_by_string",
            Signature::exact(vec![DataType::Utf8, DataType::Utf8], Volatility::Immutable),
            DataType::new_list(DataType::Utf8, true),
            split_by_string,
        ),
    ]
}

/// Doris' `left(s, n)` / `right(s, n)`: the first / last n characters,
/// `''` when n is not positive (DataFusion's dropped the last / first -n).
pub fn left_right(s: &str, n: i64, left: bool) -> &str {
    if n <= 0 {
        return "";
    }
    let count = s.chars().count();
    let n = (n as usize).min(count);
    let cut = if left { n } else { count - n };
    let at = s.char_indices().nth(cut).map_or(s.len(), |(b, _)| b);
    if left { &s[..at] } else { &s[at..] }
}

/// Doris' default masks for upper-case letters, lower-case letters and digits.
const MASKS: [u8; 3] = [b'X', b'x', b'n'];

/// `s` with the ASCII letters and digits among bytes `range` replaced
/// (Doris' `mask` family works on bytes, leaving other characters alone).
fn mask(s: &str, range: std::ops::Range<usize>, [upper, lower, digit]: [u8; 3]) -> String {
    let bytes: Vec<u8> = s
        .bytes()
        .enumerate()
        .map(|(i, b)| match b {
            _ if !range.contains(&i) => b,
            b'A'..=b'Z' => upper,
            b'a'..=b'z' => lower,
            b'0'..=b'9' => digit,
            _ => b,
        })
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Doris' `money_format(x)`: rounded half away from zero to two decimals,
/// thousands separated by commas (`17014116` is `17,014,116.00`).
pub fn money_format(x: &str) -> Option<String> {
    let t = x.trim();
    let plain;
    let t = if t.contains(['e', 'E']) {
        plain = format!("{:.10}", t.parse::<f64>().ok()?);
        plain.as_str()
    } else {
        t
    };
    let (neg, t) = t.strip_prefix('-').map_or((false, t), |r| (true, r));
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    if int.is_empty() && frac.is_empty()
        || !(int.bytes().chain(frac.bytes())).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    // Cents as digits, then rounded by the third decimal.
    let mut digits: Vec<u8> = int
        .bytes()
        .chain(format!("{frac:0<2}").bytes().take(2))
        .map(|b| b - b'0')
        .collect();
    if frac.as_bytes().get(2).is_some_and(|b| *b >= b'5') {
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, 1);
                break;
            }
            i -= 1;
            if digits[i] == 9 {
                digits[i] = 0;
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
    let (whole, cents) = digits.split_at(digits.len() - 2);
    let whole: String = whole.iter().map(|d| char::from(b'0' + d)).collect();
    let whole = whole.trim_start_matches('0');
    let whole = if whole.is_empty() { "0" } else { whole };
    let mut out = String::new();
    if neg && (whole != "0" || cents.iter().any(|d| *d != 0)) {
        out.push('-');
    }
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out.push('.');
    out.extend(cents.iter().map(|d| char::from(b'0' + d)));
    Some(out)
}

/// Doris' `append_trailing_char_if_absent(s, c)`: `s` ending in `c`
/// (unchanged when empty); NULL when `c` is not one character.
pub fn append_trailing_char_if_absent(s: &str, c: &str) -> Option<String> {
    if c.chars().count() != 1 {
        return None;
    }
    if s.is_empty() || s.ends_with(c) {
        return Some(s.to_string());
    }
    Some(format!("{s}{c}"))
}

/// `concat_ws(sep, s1, s2, ...)`, and Doris' `concat_ws(sep, array)`:
/// the array's strings joined, NULLs skipped (DataFusion's wrote the array's
/// text, `[d, is]`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ConcatWs {
    inner: Arc<ScalarUDF>,
    join: Arc<ScalarUDF>,
}

fn joins_an_array(types: &[DataType]) -> bool {
    matches!(
        types,
        [
            _,
            DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(_, _)
        ]
    )
}

impl ScalarUDFImpl for ConcatWs {
    fn name(&self) -> &str {
        "concat_ws"
    }
    fn signature(&self) -> &Signature {
        self.inner.signature()
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        if joins_an_array(arg_types) {
            return Ok(vec![DataType::Utf8, arg_types[1].clone()]);
        }
        self.inner.coerce_types(arg_types)
    }
    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        if !joins_an_array(&types) {
            return self.inner.invoke_with_args(args);
        }
        let ScalarFunctionArgs {
            args: values,
            arg_fields,
            number_rows,
            return_field,
            config_options,
        } = args;
        let [sep, list] = <[ColumnarValue; 2]>::try_from(values).map_err(|_| {
            datafusion::error::DataFusionError::Execution("concat_ws: two arguments".into())
        })?;
        let fields = vec![arg_fields[1].clone(), arg_fields[0].clone()];
        self.join.invoke_with_args(ScalarFunctionArgs {
            args: vec![list, sep],
            arg_fields: fields,
            number_rows,
            return_field,
            config_options,
        })
    }
}

/// Doris' `split_by_string(s, separator)`: the pieces as an ARRAY (an
/// empty separator splits into characters; an empty string is `[]`).
fn split_by_string(_: &str, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
    let n = args.number_rows;
    let arrays = super::arrays(&args)?;
    let (s, sep) = (arrays[0].as_string::<i32>(), arrays[1].as_string::<i32>());
    let mut b = arrow::array::ListBuilder::new(arrow::array::StringBuilder::new());
    for i in 0..n {
        if s.is_null(i) || sep.is_null(i) {
            b.append_null();
            continue;
        }
        let (text, by) = (s.value(i), sep.value(i));
        if text.is_empty() {
        } else if by.is_empty() {
            let mut buf = [0u8; 4];
            for c in text.chars() {
                b.values().append_value(c.encode_utf8(&mut buf));
            }
        } else {
            for piece in text.split(by) {
                b.values().append_value(piece);
            }
        }
        b.append(true);
    }
    Ok(ColumnarValue::Array(Arc::new(b.finish())))
}

/// MySQL's `concat(a, ...)`: NULL when any argument is NULL (DataFusion's
/// skips NULLs: `concat('a', NULL, 'c')` was `'ac'`).
fn concat(_: &str, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
    let n = args.number_rows;
    // Datetimes as MySQL shows them (a space, not ISO's `T`).
    let texts = super::arrays(&args)?
        .iter()
        .map(mysql_text)
        .collect::<Result<Vec<_>>>()?;
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

/// Doris' `split_part(s, delimiter, field)`: the field-th piece, counted
/// from the end when negative; NULL when there is no such piece (or the
/// delimiter is empty), where DataFusion's returned `''`.
fn split_part_udf(_: &str, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
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

/// MySQL's `char(n, ...)`: the string of the bytes of each integer
/// (`CHAR(39)` is `'`; MariaDB Connector/ODBC's `SQLColumns` quotes
/// defaults with it); NULL arguments are skipped.
fn char_fn(_: &str, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
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

/// The bytes of `n`, most significant first, without leading zeros.
fn char_bytes(n: i64, out: &mut Vec<u8>) {
    let b = (n as u32).to_be_bytes();
    let first = b.iter().position(|x| *x != 0).unwrap_or(3);
    out.extend_from_slice(&b[first..]);
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
    named_by_fields!("substr", with aliases);
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
    fn doris_money_format_and_masks() {
        use super::{MASKS, append_trailing_char_if_absent, mask, money_format};
        assert_eq!(money_format("17014116").as_deref(), Some("17,014,116.00"));
        assert_eq!(money_format("1123.456").as_deref(), Some("1,123.46"));
        assert_eq!(money_format("1123.4").as_deref(), Some("1,123.40"));
        assert_eq!(money_format("1.12499999").as_deref(), Some("1.12"));
        assert_eq!(money_format("999.995").as_deref(), Some("1,000.00"));
        assert_eq!(money_format("-1234.5").as_deref(), Some("-1,234.50"));
        assert_eq!(money_format("-0.001").as_deref(), Some("0.00"));
        assert_eq!(money_format("1e3").as_deref(), Some("1,000.00"));
        assert_eq!(money_format("abc"), None);
        assert_eq!(mask("abc123EFG", 0..usize::MAX, MASKS), "xxxnnnXXX");
        assert_eq!(mask("1234-5678", 0..4, MASKS), "nnnn-5678");
        assert_eq!(mask("中a", 0..usize::MAX, MASKS), "中x");
        assert_eq!(
            append_trailing_char_if_absent("a", "c").as_deref(),
            Some("ac")
        );
        assert_eq!(
            append_trailing_char_if_absent("ac", "c").as_deref(),
            Some("ac")
        );
        assert_eq!(append_trailing_char_if_absent("", "c").as_deref(), Some(""));
        assert_eq!(append_trailing_char_if_absent("a", "cd"), None);
    }

    #[test]
    fn doris_left_right() {
        use super::left_right;
        assert_eq!(left_right("good morning", -5, true), "");
        assert_eq!(left_right("good morning", 120, true), "good morning");
        assert_eq!(left_right("Hello doris", 5, false), "doris");
        assert_eq!(left_right("Hello doris", -6, false), "");
        assert_eq!(left_right("中文测试", 2, false), "测试");
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

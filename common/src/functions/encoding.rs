//! MySQL's and Doris' byte encodings of values:
//!
//! ```sql
//! SELECT hex(255), hex('@'), unhex('4142'), to_base64('doris'), from_base64('ZG9yaXM=');
//! -- 'FF', '40', 'AB', 'ZG9yaXM=', 'doris'
//! ```
//!
//! `hex` of an integer is the upper-case hex of its 64-bit two's
//! complement (`hex(-1)` is `FFFFFFFFFFFFFFFF`), of anything else the hex of
//! its text's bytes. `unhex` of text that is not hex is `''`;
//! `from_base64` of text that is not base64 is NULL.

use std::sync::Arc;

use arrow::array::{Array, AsArray, StringBuilder};
use arrow::compute::kernels::cast::cast;
use arrow::datatypes::{DataType, Int64Type};
use base64::Engine;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, Signature, Volatility,
};

use super::fixed::Fixed;
use super::text::{TextFn, mysql_text};

pub(super) fn udfs() -> Vec<Arc<ScalarUDF>> {
    vec![
        Fixed::udf(
            "hex",
            Signature::any(1, Volatility::Immutable),
            DataType::Utf8,
            hex,
        ),
        TextFn::udf("unhex", 1, 1, |a| Ok(Some(unhex(a[0])))),
        TextFn::udf("to_base64", 1, 1, |a| {
            Ok(Some(base64::engine::general_purpose::STANDARD.encode(a[0])))
        }),
        TextFn::udf("from_base64", 1, 1, |a| {
            Ok(base64::engine::general_purpose::STANDARD
                .decode(a[0].trim())
                .ok()
                .map(|b| String::from_utf8_lossy(&b).into_owned()))
        }),
    ]
}

/// The bytes `s` spells in hex, as text; `''` when `s` is not hex.
pub fn unhex(s: &str) -> String {
    if !s.len().is_multiple_of(2) {
        return String::new();
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect();
    bytes
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

fn hex(_: &str, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
    let (constant, arrays) = super::constant_or_arrays(&args)?;
    let a = &arrays[0];
    let mut out = StringBuilder::new();
    if a.data_type().is_integer() {
        let ints = cast(a, &DataType::Int64)?;
        for v in ints.as_primitive::<Int64Type>().iter() {
            out.append_option(v.map(|v| format!("{:X}", v as u64)));
        }
    } else {
        let texts = mysql_text(a)?;
        for v in texts.as_string::<i32>().iter() {
            out.append_option(v.map(|v| v.bytes().map(|b| format!("{b:02X}")).collect::<String>()));
        }
    }
    super::constant_or_array(constant, Arc::new(out.finish()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn doris_unhex() {
        assert_eq!(super::unhex("68656C6C6F2C646F726973"), "hello,doris");
        assert_eq!(super::unhex("4142"), "AB");
        assert_eq!(super::unhex("@"), "");
        assert_eq!(super::unhex(""), "");
    }
}

//! BITMAP values: exact sets of unsigned 64-bit integers, the value type of
//! BITMAP columns (`BITMAP_UNION` in AGGREGATE tables), and the Doris scalar
//! functions over them (`to_bitmap`, `bitmap_count`, `bitmap_to_string`, ...).
//!
//! A value travels and is stored as Arrow `Binary` in a compact form of our
//! own: one tag byte, then
//! - `0`: the empty set;
//! - `1`: a single value, u64 little-endian (what `to_bitmap` makes for each
//!   loaded row, so 9 bytes instead of a roaring header);
//! - `2`: a `RoaringTreemap` in the portable roaring serialization.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray, BooleanArray, Int64Array, StringArray};
use arrow::datatypes::{DataType, Int64Type, UInt64Type};
use datafusion::common::exec_err;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use roaring::RoaringTreemap;

use super::object::{self, ObjectKind, bad_value, integer_arg};

const EMPTY: u8 = 0;
const SINGLE: u8 = 1;
const ROARING: u8 = 2;

/// The encoded form of `set`.
pub fn encode(set: &RoaringTreemap) -> Vec<u8> {
    match set.len() {
        0 => vec![EMPTY],
        1 => {
            let mut out = vec![SINGLE];
            out.extend_from_slice(&set.min().unwrap_or_default().to_le_bytes());
            out
        }
        _ => {
            let mut out = Vec::with_capacity(1 + set.serialized_size());
            out.push(ROARING);
            // Writing to a Vec cannot fail.
            let _ = set.serialize_into(&mut out);
            out
        }
    }
}

/// The encoded form of `{v}`.
pub fn encode_single(v: u64) -> Vec<u8> {
    let mut out = vec![SINGLE];
    out.extend_from_slice(&v.to_le_bytes());
    out
}

/// Decodes a value; a malformed one is an error, never a wrong set.
pub fn decode(bytes: &[u8]) -> std::result::Result<RoaringTreemap, String> {
    match bytes.split_first() {
        Some((&EMPTY, [])) => Ok(RoaringTreemap::new()),
        Some((&SINGLE, rest)) => {
            let v: [u8; 8] = rest
                .try_into()
                .map_err(|_| format!("single-value bitmap of {} bytes", rest.len()))?;
            let mut s = RoaringTreemap::new();
            s.insert(u64::from_le_bytes(v));
            Ok(s)
        }
        Some((&ROARING, mut rest)) => {
            let s = RoaringTreemap::deserialize_from(&mut rest).map_err(|e| e.to_string())?;
            if !rest.is_empty() {
                return Err(format!("{} bytes after the bitmap", rest.len()));
            }
            Ok(s)
        }
        Some((tag, _)) => Err(format!("unknown bitmap tag {tag}")),
        None => Err("empty bitmap value".into()),
    }
}

/// Adds the set `bytes` encodes to `acc`.
pub fn union_into(acc: &mut RoaringTreemap, bytes: &[u8]) -> std::result::Result<(), String> {
    match bytes.split_first() {
        Some((&EMPTY, [])) => Ok(()),
        Some((&SINGLE, rest)) if rest.len() == 8 => {
            let mut v = [0u8; 8];
            v.copy_from_slice(rest);
            acc.insert(u64::from_le_bytes(v));
            Ok(())
        }
        _ => {
            *acc |= decode(bytes)?;
            Ok(())
        }
    }
}

/// Parses `"1, 2,3"`; `None` when an item is not an unsigned 64-bit integer.
fn parse_list(text: &str) -> Option<RoaringTreemap> {
    let mut set = RoaringTreemap::new();
    for item in text.split(',') {
        let item = item.trim();
        if item.is_empty() {
            if text.trim().is_empty() {
                break;
            }
            return None;
        }
        set.insert(item.parse::<u64>().ok()?);
    }
    Some(set)
}

/// The scalar functions of this module.
pub(super) fn udfs() -> Vec<Arc<ScalarUDF>> {
    [
        ("to_bitmap", Op::ToBitmap),
        ("bitmap_from_string", Op::FromString),
        ("bitmap_to_string", Op::ToString),
        ("bitmap_count", Op::Count),
        ("bitmap_empty", Op::Empty),
        ("bitmap_contains", Op::Contains),
        ("bitmap_or", Op::Or),
        ("bitmap_and", Op::And),
        ("bitmap_xor", Op::Xor),
        ("bitmap_and_not", Op::AndNot),
        ("bitmap_min", Op::Min),
        ("bitmap_max", Op::Max),
    ]
    .into_iter()
    .map(|(name, op)| {
        Arc::new(ScalarUDF::from(BitmapFn {
            name,
            op,
            signature: Signature::user_defined(Volatility::Immutable),
        }))
    })
    .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    /// `to_bitmap(int | string)`: `{v}`; NULL for NULL, negative or not a number.
    ToBitmap,
    /// `bitmap_from_string('1,2,3')`; NULL when an item is not a u64.
    FromString,
    /// `bitmap_to_string(b)`: the values ascending, comma separated.
    ToString,
    /// `bitmap_count(b)`: the number of values (0 for NULL).
    Count,
    /// `bitmap_empty()`.
    Empty,
    /// `bitmap_contains(b, v)`.
    Contains,
    /// `bitmap_or(a, b, ...)` and the other set operations.
    Or,
    And,
    Xor,
    AndNot,
    /// `bitmap_min(b)` / `bitmap_max(b)`: NULL for an empty set.
    Min,
    Max,
}

/// One Doris bitmap scalar function.
#[derive(Debug, PartialEq, Eq, Hash)]
struct BitmapFn {
    name: &'static str,
    op: Op,
    signature: Signature,
}

/// Each element of an integer argument as u64 (`None`: NULL or negative).
fn u64_values(arr: &ArrayRef) -> Vec<Option<u64>> {
    match arr.data_type() {
        DataType::UInt64 => arr.as_primitive::<UInt64Type>().iter().collect(),
        _ => arr
            .as_primitive::<Int64Type>()
            .iter()
            .map(|v| v.and_then(|v| u64::try_from(v).ok()))
            .collect(),
    }
}

impl ScalarUDFImpl for BitmapFn {
    named_by_fields!();
    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        let name = self.name;
        let arity = |want: &str, ok: bool| -> Result<()> {
            if ok {
                Ok(())
            } else {
                exec_err!("{name}() takes {want}, given {} arguments", args.len())
            }
        };
        match self.op {
            Op::ToBitmap => {
                arity("one argument", args.len() == 1)?;
                Ok(vec![match &args[0] {
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8,
                    t => integer_arg(name, t)?,
                }])
            }
            Op::FromString => {
                arity("one argument", args.len() == 1)?;
                Ok(vec![DataType::Utf8])
            }
            Op::Empty => {
                arity("no arguments", args.is_empty())?;
                Ok(vec![])
            }
            Op::Contains => {
                arity("two arguments", args.len() == 2)?;
                Ok(vec![
                    object::object_arg(name, ObjectKind::Bitmap, &args[0])?,
                    integer_arg(name, &args[1])?,
                ])
            }
            Op::Or | Op::And | Op::Xor | Op::AndNot => {
                arity("at least two arguments", args.len() >= 2)?;
                args.iter()
                    .map(|t| object::object_arg(name, ObjectKind::Bitmap, t))
                    .collect()
            }
            Op::ToString | Op::Count | Op::Min | Op::Max => {
                arity("one argument", args.len() == 1)?;
                Ok(vec![object::object_arg(
                    name,
                    ObjectKind::Bitmap,
                    &args[0],
                )?])
            }
        }
    }
    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(match self.op {
            Op::ToString => DataType::Utf8,
            Op::Count | Op::Min | Op::Max => DataType::Int64,
            Op::Contains => DataType::Boolean,
            _ => DataType::Binary,
        })
    }
    fn return_field_from_args(
        &self,
        args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> Result<arrow::datatypes::FieldRef> {
        if !matches!(self.op, Op::ToBitmap | Op::FromString | Op::Empty) {
            object::check_arg_fields(self.name, ObjectKind::Bitmap, args.arg_fields)?;
        }
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let t = self.return_type(&types)?;
        Ok(Arc::new(match t {
            DataType::Binary => ObjectKind::Bitmap.field(self.name, true),
            t => arrow::datatypes::Field::new(self.name, t, self.op != Op::Count),
        }))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        object::invoke(&args, |arrays, n| self.run(arrays, n))
    }
}

impl BitmapFn {
    /// The function over `n` rows of argument arrays.
    fn run(&self, arrays: &[ArrayRef], n: usize) -> Result<ArrayRef> {
        let name = self.name;
        let sets = |i: usize| object::decode_each(name, &arrays[i], decode);
        let out: ArrayRef =
            match self.op {
                Op::ToBitmap => {
                    let a = &arrays[0];
                    let vals: Vec<Option<u64>> = match a.data_type() {
                        DataType::Utf8 => a
                            .as_string::<i32>()
                            .iter()
                            .map(|s| s.and_then(|s| s.trim().parse::<u64>().ok()))
                            .collect(),
                        _ => u64_values(a),
                    };
                    Arc::new(
                        vals.into_iter()
                            .map(|v| v.map(encode_single))
                            .collect::<BinaryArray>(),
                    )
                }
                Op::FromString => Arc::new(
                    arrays[0]
                        .as_string::<i32>()
                        .iter()
                        .map(|s| s.and_then(parse_list).map(|b| encode(&b)))
                        .collect::<BinaryArray>(),
                ),
                Op::Empty => Arc::new(BinaryArray::from_iter_values(std::iter::repeat_n(
                    [EMPTY],
                    n,
                ))),
                Op::ToString => Arc::new(
                    sets(0)?
                        .into_iter()
                        .map(|s| {
                            s.map(|s| {
                                s.iter()
                                    .map(|v| v.to_string())
                                    .collect::<Vec<_>>()
                                    .join(",")
                            })
                        })
                        .collect::<StringArray>(),
                ),
                Op::Count => Arc::new(
                    sets(0)?
                        .into_iter()
                        .map(|s| Some(s.map_or(0, |s| s.len() as i64)))
                        .collect::<Int64Array>(),
                ),
                Op::Min | Op::Max => {
                    let mut out = Vec::with_capacity(n);
                    for s in sets(0)? {
                        let v = s.and_then(|s| if self.op == Op::Min { s.min() } else { s.max() });
                        out.push(match v {
                            Some(v) => Some(i64::try_from(v).map_err(|_| {
                                bad_value(name, &format!("{v} does not fit a BIGINT"))
                            })?),
                            None => None,
                        });
                    }
                    Arc::new(Int64Array::from(out))
                }
                Op::Contains => {
                    let vals = u64_values(&arrays[1]);
                    Arc::new(
                        sets(0)?
                            .into_iter()
                            .zip(vals)
                            .map(|(s, v)| Some(s?.contains(v?)))
                            .collect::<BooleanArray>(),
                    )
                }
                Op::Or | Op::And | Op::Xor | Op::AndNot => {
                    let mut acc = sets(0)?;
                    for i in 1..arrays.len() {
                        for (a, b) in acc.iter_mut().zip(sets(i)?) {
                            *a = match (a.take(), b) {
                                (Some(x), Some(y)) => Some(match self.op {
                                    Op::Or => x | y,
                                    Op::And => x & y,
                                    Op::Xor => x ^ y,
                                    _ => x - y,
                                }),
                                _ => None,
                            };
                        }
                    }
                    Arc::new(
                        acc.iter()
                            .map(|s| s.as_ref().map(encode))
                            .collect::<BinaryArray>(),
                    )
                }
            };
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codec_roundtrip_and_corruption() {
        for values in [vec![], vec![7u64], vec![1, 2, 3, u64::MAX, 1 << 40]] {
            let set: RoaringTreemap = values.iter().copied().collect();
            let bytes = encode(&set);
            assert_eq!(decode(&bytes).unwrap(), set);
            let mut acc = RoaringTreemap::new();
            union_into(&mut acc, &bytes).unwrap();
            assert_eq!(acc, set);
        }
        assert_eq!(encode_single(5), encode(&[5u64].into_iter().collect()));
        assert!(decode(b"").is_err());
        assert!(decode(b"\x09").is_err());
        assert!(decode(b"\x01\x00").is_err());
        let mut big = encode(&(0..100u64).collect());
        big.truncate(big.len() - 3);
        assert!(decode(&big).is_err());
        big.extend_from_slice(b"abcdef");
        assert!(decode(&big).is_err());
    }

    #[test]
    fn parses_lists() {
        assert_eq!(
            parse_list("1, 2,3").unwrap(),
            [1u64, 2, 3].into_iter().collect()
        );
        assert!(parse_list("").unwrap().is_empty());
        assert!(parse_list("-1,2").is_none());
        assert!(parse_list("1,,2").is_none());
        assert!(parse_list("x").is_none());
    }
}

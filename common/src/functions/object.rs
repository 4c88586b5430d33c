//! What BITMAP and HLL values share: both are opaque objects carried as Arrow
//! `Binary`, checked when a load brings them, merged (not compared) when
//! rows of one key meet, and shown as NULL by the MySQL layer, as Doris
//! shows them.

use std::collections::HashMap;

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray, BinaryBuilder};
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{ScalarValue, exec_err};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs};
use roaring::RoaringTreemap;

use super::{bitmap, hll};
use crate::schema::COLUMN_TYPE_METADATA_KEY;
use crate::types::ColumnType;

/// The encoding of the empty BITMAP and of the empty HLL (both tag 0).
pub const EMPTY_OBJECT: &[u8] = &[0];

/// Which object type a `Binary` value holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    Bitmap,
    Hll,
}

impl ObjectKind {
    /// The object type a column holds, if it holds one.
    pub fn of(t: &ColumnType) -> Option<ObjectKind> {
        match t {
            ColumnType::Bitmap => Some(ObjectKind::Bitmap),
            ColumnType::Hll => Some(ObjectKind::Hll),
            _ => None,
        }
    }

    /// The column type of this kind.
    pub fn column_type(&self) -> ColumnType {
        match self {
            ObjectKind::Bitmap => ColumnType::Bitmap,
            ObjectKind::Hll => ColumnType::Hll,
        }
    }

    /// A `Binary` field tagged with the object type, so that the MySQL layer
    /// knows to show it as NULL and a sink can tell what it holds.
    pub fn field(&self, name: &str, nullable: bool) -> Field {
        Field::new(name, DataType::Binary, nullable).with_metadata(HashMap::from([(
            COLUMN_TYPE_METADATA_KEY.to_string(),
            self.column_type().sql(),
        )]))
    }

    /// Why `bytes` is not a value of this kind, if it is not.
    pub fn check(&self, bytes: &[u8]) -> std::result::Result<(), String> {
        match self {
            ObjectKind::Bitmap => bitmap::decode(bytes).map(|_| ()),
            ObjectKind::Hll => hll::Hll::decode(bytes).map(|_| ()),
        }
    }

    /// The functions that make values of this kind, for error messages.
    pub fn makers(&self) -> &'static str {
        match self {
            ObjectKind::Bitmap => "to_bitmap(), bitmap_from_string(), bitmap_empty()",
            ObjectKind::Hll => "hll_hash(), hll_empty()",
        }
    }
}

/// A function argument error naming the function.
pub(super) fn bad_value(name: &str, why: &str) -> DataFusionError {
    DataFusionError::Execution(format!("{name}(): {why}"))
}

/// The type an object argument is read as (`Binary`; NULL literals too).
pub(super) fn object_arg(name: &str, kind: ObjectKind, t: &DataType) -> Result<DataType> {
    match t {
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::Null => {
            Ok(DataType::Binary)
        }
        other => exec_err!(
            "{name}() takes a {} value (made by {}), not {other}",
            kind.column_type().desc(),
            kind.makers()
        ),
    }
}

/// Runs a scalar function over its arguments as arrays: one row when every
/// argument is a constant (the result is then a constant too), else the
/// batch's rows.
pub(super) fn invoke(
    args: &ScalarFunctionArgs,
    f: impl FnOnce(&[ArrayRef], usize) -> Result<ArrayRef>,
) -> Result<ColumnarValue> {
    let constant = args
        .args
        .iter()
        .all(|a| matches!(a, ColumnarValue::Scalar(_)));
    let rows = if constant { 1 } else { args.number_rows };
    let arrays = args
        .args
        .iter()
        .map(|a| a.to_array(rows))
        .collect::<Result<Vec<_>>>()?;
    let out = f(&arrays, rows)?;
    Ok(if constant {
        ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
    } else {
        ColumnarValue::Array(out)
    })
}

/// The type an integer argument is read as: u64 where the source is
/// unsigned, i64 otherwise (negatives are out of range).
pub(super) fn integer_arg(name: &str, t: &DataType) -> Result<DataType> {
    Ok(match t {
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
            DataType::UInt64
        }
        DataType::Null
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::Decimal128(_, 0) => DataType::Int64,
        other => return exec_err!("{name}() takes an integer, not {other}"),
    })
}

/// Refuses an argument that is known (by its field) to hold the other
/// object kind: both are `Binary`, so only the field tells them apart.
pub(super) fn check_arg_fields(name: &str, kind: ObjectKind, fields: &[FieldRef]) -> Result<()> {
    for f in fields {
        let other = f
            .metadata()
            .get(COLUMN_TYPE_METADATA_KEY)
            .and_then(|t| ColumnType::parse(t).ok())
            .and_then(|t| ObjectKind::of(&t));
        if let Some(other) = other
            && other != kind
        {
            return exec_err!(
                "{name}() takes a {} value (made by {}), not {}",
                kind.column_type().desc(),
                kind.makers(),
                other.column_type().desc()
            );
        }
    }
    Ok(())
}

/// Decodes each element of a `Binary` argument (`None` for NULL).
pub(super) fn decode_each<T>(
    name: &str,
    arr: &ArrayRef,
    decode: impl Fn(&[u8]) -> std::result::Result<T, String>,
) -> Result<Vec<Option<T>>> {
    let arr = binary(arr)?;
    arr.iter()
        .map(|v| v.map(&decode).transpose().map_err(|e| bad_value(name, &e)))
        .collect()
}

/// `arr` as a `BinaryArray` (NULL literals become all-null arrays).
fn binary(arr: &ArrayRef) -> Result<std::borrow::Cow<'_, BinaryArray>> {
    match arr.data_type() {
        DataType::Binary => Ok(std::borrow::Cow::Borrowed(arr.as_binary::<i32>())),
        _ => {
            let c = arrow::compute::cast(arr, &DataType::Binary)?;
            Ok(std::borrow::Cow::Owned(c.as_binary::<i32>().clone()))
        }
    }
}

/// The union of each group of consecutive values `[ends[i-1], ends[i])` of
/// an object column: how BITMAP_UNION and HLL_UNION columns combine rows of
/// one key. NULLs are skipped; a group of only NULLs stays NULL.
pub fn union_groups(kind: ObjectKind, col: &ArrayRef, ends: &[usize]) -> Result<ArrayRef> {
    let arr = binary(col)?;
    let mut out = BinaryBuilder::with_capacity(ends.len(), 0);
    let mut start = 0;
    for &end in ends {
        let mut present = (start..end).filter(|&i| arr.is_valid(i));
        match (present.next(), present.next()) {
            (None, _) => out.append_null(),
            (Some(i), None) => out.append_value(arr.value(i)),
            (Some(_), Some(_)) => {
                let values = (start..end)
                    .filter(|&i| arr.is_valid(i))
                    .map(|i| arr.value(i));
                out.append_value(union_values(kind, values)?);
            }
        }
        start = end;
    }
    Ok(std::sync::Arc::new(out.finish()))
}

/// The encoded union of encoded values of one kind.
pub fn union_values<'a>(
    kind: ObjectKind,
    values: impl Iterator<Item = &'a [u8]>,
) -> Result<Vec<u8>> {
    let err = |e: String| {
        DataFusionError::Execution(format!("invalid {} value: {e}", kind.column_type().desc()))
    };
    Ok(match kind {
        ObjectKind::Bitmap => {
            let mut acc = RoaringTreemap::new();
            for v in values {
                bitmap::union_into(&mut acc, v).map_err(err)?;
            }
            bitmap::encode(&acc)
        }
        ObjectKind::Hll => {
            let mut acc = hll::Hll::default();
            for v in values {
                acc.merge_encoded(v).map_err(err)?;
            }
            acc.encode()
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn unions_groups_and_keeps_all_null_groups_null() {
        let col: ArrayRef = Arc::new(BinaryArray::from(vec![
            Some(bitmap::encode_single(1).as_slice()),
            Some(bitmap::encode_single(2).as_slice()),
            None,
            None,
            Some(bitmap::encode_single(3).as_slice()),
            Some(bitmap::encode_single(3).as_slice()),
        ]));
        let out = union_groups(ObjectKind::Bitmap, &col, &[2, 3, 6]).unwrap();
        let out = out.as_binary::<i32>();
        assert_eq!(bitmap::decode(out.value(0)).unwrap().len(), 2);
        assert!(out.is_null(1));
        assert_eq!(bitmap::decode(out.value(2)).unwrap().len(), 1);
        let bad: ArrayRef = Arc::new(BinaryArray::from(vec![Some(&b"\x07"[..]), Some(b"x")]));
        assert!(union_groups(ObjectKind::Bitmap, &bad, &[2]).is_err());
    }
}

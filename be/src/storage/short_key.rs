//! The short-key (prefix) index of a segment, Doris' sparse index over the
//! sort key: one entry per block of [`ROWS_PER_BLOCK`] rows, holding the
//! memcomparable encoding of the block's first row's key prefix. A scan with
//! predicates on a leftmost part of the key binary-searches it for the rows
//! that can match and never decodes the others (`RowsKeyRangeFiltered`).
//!
//! The prefix follows Doris' rule: key columns in declaration order, at most
//! [`MAX_PREFIX_COLUMNS`] of them and [`MAX_PREFIX_BYTES`] bytes of values;
//! it stops before a FLOAT/DOUBLE or a column that would pass the byte
//! limit, and a string column contributes at most [`MAX_STRING_PREFIX`]
//! bytes and ends it.
//!
//! Each field is a marker byte (`0x01` null, `0x02` value; nulls sort first,
//! as segments are sorted) then the value: integers, dates, datetimes and
//! decimals big-endian with the sign bit flipped, booleans as one byte,
//! strings as their (truncated) bytes. Byte order of encodings is then the
//! order of the keys, and truncation never reverses it.
//!
//! Stored block: `u32 entries`, `u32 offsets[entries + 1]`, the entries'
//! bytes; its checksum is in the segment footer.

use std::cmp::Ordering;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Int8Type, Int16Type, Int32Type, Int64Type, TimeUnit,
    TimestampMicrosecondType,
};
use datafusion::common::ScalarValue;
use tethys_common::{Result, TethysError};

/// Rows per index entry (Doris' `num_rows_per_block`).
pub const ROWS_PER_BLOCK: usize = 1024;
/// Most key columns in a prefix.
pub const MAX_PREFIX_COLUMNS: usize = 3;
/// Most value bytes in a prefix.
pub const MAX_PREFIX_BYTES: usize = 36;
/// Most bytes a string key contributes.
pub const MAX_STRING_PREFIX: usize = 20;

const NULL_MARKER: u8 = 0x01;
const VALUE_MARKER: u8 = 0x02;

/// One field of the prefix: a key column and how many bytes of it count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrefixField {
    /// Bytes of the value (a string's maximum).
    pub width: usize,
    /// A string, which ends the prefix.
    pub string: bool,
}

/// The prefix fields for key columns of types `keys`, in order.
pub fn prefix_fields(keys: &[DataType]) -> Vec<PrefixField> {
    let mut out = Vec::new();
    let mut bytes = 0;
    for dt in keys.iter().take(MAX_PREFIX_COLUMNS) {
        let width = match dt {
            DataType::Boolean | DataType::Int8 => 1,
            DataType::Int16 => 2,
            DataType::Int32 | DataType::Date32 => 4,
            DataType::Int64 | DataType::Timestamp(TimeUnit::Microsecond, _) => 8,
            DataType::Decimal128(_, _) => 16,
            DataType::Utf8 => {
                let width = MAX_STRING_PREFIX.min(MAX_PREFIX_BYTES - bytes);
                if width > 0 {
                    out.push(PrefixField {
                        width,
                        string: true,
                    });
                }
                break;
            }
            _ => break,
        };
        if bytes + width > MAX_PREFIX_BYTES {
            break;
        }
        bytes += width;
        out.push(PrefixField {
            width,
            string: false,
        });
    }
    out
}

fn flip_be<const N: usize>(mut be: [u8; N]) -> [u8; N] {
    be[0] ^= 0x80;
    be
}

/// Appends the encoding of a non-null value held in `arr` at `row`.
fn encode_value(arr: &dyn Array, row: usize, f: &PrefixField, out: &mut Vec<u8>) {
    match arr.data_type() {
        DataType::Boolean => out.push(u8::from(arr.as_boolean().value(row))),
        DataType::Int8 => out.extend(flip_be(
            arr.as_primitive::<Int8Type>().value(row).to_be_bytes(),
        )),
        DataType::Int16 => out.extend(flip_be(
            arr.as_primitive::<Int16Type>().value(row).to_be_bytes(),
        )),
        DataType::Int32 => out.extend(flip_be(
            arr.as_primitive::<Int32Type>().value(row).to_be_bytes(),
        )),
        DataType::Date32 => out.extend(flip_be(
            arr.as_primitive::<Date32Type>().value(row).to_be_bytes(),
        )),
        DataType::Int64 => out.extend(flip_be(
            arr.as_primitive::<Int64Type>().value(row).to_be_bytes(),
        )),
        DataType::Timestamp(_, _) => out.extend(flip_be(
            arr.as_primitive::<TimestampMicrosecondType>()
                .value(row)
                .to_be_bytes(),
        )),
        DataType::Decimal128(_, _) => out.extend(flip_be(
            arr.as_primitive::<Decimal128Type>()
                .value(row)
                .to_be_bytes(),
        )),
        DataType::Utf8 => {
            let s = arr.as_string::<i32>().value(row).as_bytes();
            out.extend_from_slice(&s[..s.len().min(f.width)]);
        }
        _ => {}
    }
}

/// The prefix encoding of row `row` of the key columns `keys`.
pub fn encode_row(keys: &[ArrayRef], fields: &[PrefixField], row: usize, out: &mut Vec<u8>) {
    for (arr, f) in keys.iter().zip(fields) {
        if arr.is_null(row) {
            out.push(NULL_MARKER);
        } else {
            out.push(VALUE_MARKER);
            encode_value(arr.as_ref(), row, f, out);
        }
    }
}

/// Appends the encoding of a bound value for field `f` of type `dt`; false
/// when `v` is not exactly representable in that type (the bound is then
/// unusable).
pub fn encode_bound(v: &ScalarValue, dt: &DataType, f: &PrefixField, out: &mut Vec<u8>) -> bool {
    if v.is_null() {
        return false;
    }
    let Ok(cast) = v.cast_to(dt) else {
        return false;
    };
    // The cast must be exact: `int_key < 1.5` must not become `< 1`.
    match cast.cast_to(&v.data_type()) {
        Ok(back) if back == *v => {}
        _ => return false,
    }
    let Ok(arr) = cast.to_array() else {
        return false;
    };
    out.push(VALUE_MARKER);
    encode_value(arr.as_ref(), 0, f, out);
    true
}

/// A segment's short-key index.
#[derive(Debug, Clone, PartialEq)]
pub struct ShortKeyIndex {
    entries: Vec<Vec<u8>>,
    num_rows: usize,
}

impl ShortKeyIndex {
    /// Builds the index of `num_rows` rows sorted by `keys`.
    pub fn build(keys: &[ArrayRef], fields: &[PrefixField], num_rows: usize) -> ShortKeyIndex {
        let entries = (0..num_rows)
            .step_by(ROWS_PER_BLOCK)
            .map(|row| {
                let mut e = Vec::with_capacity(MAX_PREFIX_BYTES + fields.len());
                encode_row(keys, fields, row, &mut e);
                e
            })
            .collect();
        ShortKeyIndex { entries, num_rows }
    }

    /// The stored form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        let mut off = 0u32;
        out.extend_from_slice(&off.to_le_bytes());
        for e in &self.entries {
            off += e.len() as u32;
            out.extend_from_slice(&off.to_le_bytes());
        }
        for e in &self.entries {
            out.extend_from_slice(e);
        }
        out
    }

    /// Parses a stored index of a segment of `num_rows` rows.
    pub fn from_bytes(b: &[u8], num_rows: usize) -> Result<ShortKeyIndex> {
        let bad = |why: &str| TethysError::Corruption(format!("short-key index: {why}"));
        let word = |i: usize| -> Result<usize> {
            let s = b.get(i * 4..i * 4 + 4).ok_or_else(|| bad("truncated"))?;
            Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize)
        };
        let count = word(0)?;
        if count != num_rows.div_ceil(ROWS_PER_BLOCK) {
            return Err(bad(&format!("{count} entries for {num_rows} rows")));
        }
        let data = 4 + 4 * (count + 1);
        let mut entries = Vec::with_capacity(count);
        let mut prev = word(1)?;
        for i in 0..count {
            let next = word(i + 2)?;
            let e = b
                .get(data + prev..data + next)
                .ok_or_else(|| bad("entry out of range"))?;
            entries.push(e.to_vec());
            prev = next;
        }
        if data + prev != b.len() {
            return Err(bad("trailing bytes"));
        }
        Ok(ShortKeyIndex { entries, num_rows })
    }

    /// The rows `[start, end)` that can hold keys with prefix encoding at
    /// least `lower` and, compared on `upper`'s length, at most `upper`;
    /// everything outside is proven not to.
    pub fn row_range(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> (usize, usize) {
        let n = self.entries.len();
        // Block j ends before entry j + 1: skip it while that entry < lower.
        let start = match lower {
            Some(lo) => self.entries.partition_point(|e| e.as_slice() < lo).max(1) - 1,
            None => 0,
        };
        // Blocks from the first entry above `upper` on hold only larger keys.
        let end = match upper {
            Some(hi) => self
                .entries
                .partition_point(|e| e[..e.len().min(hi.len())].cmp(hi) != Ordering::Greater),
            None => n,
        };
        let start_row = start * ROWS_PER_BLOCK;
        let end_row = (end * ROWS_PER_BLOCK).min(self.num_rows);
        (start_row.min(end_row), end_row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use std::sync::Arc;

    #[test]
    fn doris_prefix_rule() {
        let f = prefix_fields(&[DataType::Int64, DataType::Int32, DataType::Utf8]);
        assert_eq!(
            f.iter().map(|f| f.width).collect::<Vec<_>>(),
            vec![8, 4, 20]
        );
        // A float ends the prefix; so does the byte limit.
        assert_eq!(
            prefix_fields(&[DataType::Float64, DataType::Int32]).len(),
            0
        );
        let wide = [
            DataType::Decimal128(38, 0),
            DataType::Decimal128(38, 0),
            DataType::Int64,
        ];
        assert_eq!(prefix_fields(&wide).len(), 2);
        // A string after 32 bytes gets what is left.
        let f = prefix_fields(&[
            DataType::Decimal128(38, 0),
            DataType::Decimal128(38, 0),
            DataType::Utf8,
        ]);
        assert_eq!((f.len(), f[2].width), (3, 4));
        let f = prefix_fields(&[DataType::Decimal128(38, 0), DataType::Int64, DataType::Utf8]);
        assert_eq!(f[2].width, 12);
        assert_eq!(prefix_fields(&vec![DataType::Int8; 5]).len(), 3);
    }

    #[test]
    fn ranges_cover_every_matching_row() {
        // 10,000 rows sorted by (k BIGINT, s VARCHAR): k = row / 7, s = name.
        let n = 10_000usize;
        let k: ArrayRef = Arc::new(Int64Array::from_iter_values(
            (0..n as i64).map(|i| i / 7 - 300),
        ));
        let s: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..n).map(|i| format!("name-{:05}", i % 7)),
        ));
        let fields = prefix_fields(&[DataType::Int64, DataType::Utf8]);
        let idx = ShortKeyIndex::build(&[k.clone(), s.clone()], &fields, n);
        let idx = ShortKeyIndex::from_bytes(&idx.to_bytes(), n).unwrap();
        let bound = |v: i64| {
            let mut out = Vec::new();
            assert!(encode_bound(
                &ScalarValue::Int64(Some(v)),
                &DataType::Int64,
                &fields[0],
                &mut out
            ));
            out
        };
        let keys = k.as_primitive::<Int64Type>();
        for (lo, hi) in [
            (-300, -300),
            (0, 5),
            (700, 700),
            (1000, 2000),
            (-1000, -400),
        ] {
            let (a, b) = idx.row_range(Some(&bound(lo)), Some(&bound(hi)));
            let matching: Vec<usize> = (0..n)
                .filter(|&i| (lo..=hi).contains(&keys.value(i)))
                .collect();
            if let (Some(first), Some(last)) = (matching.first(), matching.last()) {
                assert!(a <= *first && *last < b, "{lo}..{hi}: {a}..{b}");
            }
            // Point lookups read about one block.
            if lo == hi && !matching.is_empty() {
                assert!(b - a <= 2 * ROWS_PER_BLOCK, "{a}..{b}");
            }
        }
        // A bound on both fields narrows to the key's rows.
        let mut lo = bound(500);
        let mut f1 = Vec::new();
        assert!(encode_bound(
            &ScalarValue::Utf8(Some("name-00003".into())),
            &DataType::Utf8,
            &fields[1],
            &mut f1
        ));
        lo.extend_from_slice(&f1);
        let (a, b) = idx.row_range(Some(&lo), Some(&lo));
        let row = (800 * 7) + 3;
        assert!(a <= row && row < b);
        // An inexact bound is refused.
        let mut out = Vec::new();
        let f32 = prefix_fields(&[DataType::Int32]);
        assert!(!encode_bound(
            &ScalarValue::Float64(Some(1.5)),
            &DataType::Int32,
            &f32[0],
            &mut out
        ));
    }

    #[test]
    fn corrupt_index_is_an_error() {
        let k: ArrayRef = Arc::new(Int64Array::from_iter_values(0..3000));
        let fields = prefix_fields(&[DataType::Int64]);
        let bytes = ShortKeyIndex::build(&[k], &fields, 3000).to_bytes();
        assert!(ShortKeyIndex::from_bytes(&bytes, 5000).is_err());
        assert!(ShortKeyIndex::from_bytes(&bytes[..bytes.len() - 1], 3000).is_err());
        let mut bad = bytes.clone();
        bad[8] = 0xFF;
        assert!(ShortKeyIndex::from_bytes(&bad, 3000).is_err());
    }
}

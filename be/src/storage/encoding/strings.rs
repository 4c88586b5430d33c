//! Encodings of strings.
//!
//! Bodies (after the page header):
//! - PLAIN: `u8 bits`, the `n` lengths bit-packed, then the bytes of all
//!   values back to back (null slots are empty).
//! - DICT: `u32 entries`, the dictionary as a PLAIN block of that many
//!   strings (in order of first appearance), `u8 bits`, then each row's
//!   dictionary code bit-packed (null slots hold 0). Chosen when a page has
//!   at most half as many distinct values as rows; it decodes to an Arrow
//!   dictionary array, so the scan can evaluate predicates once per
//!   distinct value.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayData, ArrayRef, BinaryArray, DictionaryArray, Int32Array, StringArray, make_array,
};
use arrow::buffer::{Buffer, NullBuffer, ScalarBuffer};
use arrow::datatypes::{DataType, Int32Type};
use tethys_common::{Result, TethysError};

use super::bitpack::{bits_for, pack, packed_len, unpack_into};
use super::{Encoding, Reader};

/// Appends a PLAIN block of `values`.
fn write_plain<'a>(values: impl Iterator<Item = &'a [u8]> + Clone, out: &mut Vec<u8>) {
    let max = values.clone().map(<[u8]>::len).max().unwrap_or(0);
    let bits = bits_for(max as u64);
    out.push(bits);
    pack(out, values.clone().map(|v| v.len() as u64), bits);
    values.for_each(|v| out.extend_from_slice(v));
}

/// Reads a PLAIN block of `n` strings; `nulls` marks the null slots.
fn read_plain(r: &mut Reader<'_>, n: usize, nulls: Option<NullBuffer>) -> Result<StringArray> {
    Ok(StringArray::from(read_plain_as(
        r,
        n,
        nulls,
        DataType::Utf8,
    )?))
}

/// Reads a PLAIN block of `n` values of `dt` (`Utf8` or `Binary`).
fn read_plain_as(
    r: &mut Reader<'_>,
    n: usize,
    nulls: Option<NullBuffer>,
    dt: DataType,
) -> Result<ArrayData> {
    let bits = r.u8()?;
    let packed = r.take(packed_len(n, bits))?;
    let mut offsets = Vec::with_capacity(n + 1);
    offsets.push(0i32);
    let mut end = 0u64;
    unpack_into(packed, bits, n, &mut offsets, |len| {
        end = end.saturating_add(len);
        end.min(i32::MAX as u64) as i32
    })?;
    if end > i32::MAX as u64 {
        return Err(TethysError::Corruption(format!(
            "values of {end} bytes in one page"
        )));
    }
    let bytes = r.take(end as usize)?;
    ArrayData::builder(dt)
        .len(n)
        .nulls(nulls)
        .add_buffer(Buffer::from_vec(offsets))
        .add_buffer(Buffer::from(bytes))
        .build()
        .map_err(|e| TethysError::Corruption(format!("invalid string page: {e}")))
}

/// Encodes a page of binary values (BITMAP and HLL objects): always PLAIN.
pub fn encode_binary(arr: &BinaryArray, out: &mut Vec<u8>) -> Encoding {
    let nulls = arr.logical_nulls();
    write_plain(
        (0..arr.len()).map(|i| {
            if nulls.as_ref().is_some_and(|nb| nb.is_null(i)) {
                b""
            } else {
                arr.value(i)
            }
        }),
        out,
    );
    Encoding::Plain
}

/// Encodes a page of strings; returns the encoding used.
pub fn encode(arr: &StringArray, prefer: Option<Encoding>, out: &mut Vec<u8>) -> Encoding {
    let n = arr.len();
    let nulls = arr.logical_nulls();
    let value = |i: usize| -> &[u8] {
        if nulls.as_ref().is_some_and(|nb| nb.is_null(i)) {
            b""
        } else {
            arr.value(i).as_bytes()
        }
    };
    let dict = match prefer {
        Some(Encoding::Dict) => dictionary(n, value, usize::MAX),
        None => dictionary(n, value, n / 2),
        Some(_) => None,
    };
    match dict {
        Some((entries, codes)) => {
            out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
            write_plain(entries.iter().copied(), out);
            let bits = bits_for(entries.len().saturating_sub(1) as u64);
            out.push(bits);
            pack(out, codes.iter().map(|&c| u64::from(c)), bits);
            Encoding::Dict
        }
        None => {
            write_plain((0..n).map(value), out);
            Encoding::Plain
        }
    }
}

/// The page's distinct values in order of appearance and each row's code,
/// or `None` once there are more than `limit` distinct values.
fn dictionary<'a>(
    n: usize,
    value: impl Fn(usize) -> &'a [u8],
    limit: usize,
) -> Option<(Vec<&'a [u8]>, Vec<u32>)> {
    let mut ids: datafusion::common::HashMap<&[u8], u32> =
        datafusion::common::HashMap::with_capacity(64);
    let mut entries = Vec::new();
    let mut codes = Vec::with_capacity(n);
    for i in 0..n {
        let v = value(i);
        let next = entries.len() as u32;
        let code = *ids.entry(v).or_insert(next);
        if code == next {
            if entries.len() >= limit {
                return None;
            }
            entries.push(v);
        }
        codes.push(code);
    }
    Some((entries, codes))
}

/// Decodes a page of `n` strings: a `StringArray` for PLAIN, a dictionary
/// array (Int32 keys) for DICT; or of `n` binary values (`dt` Binary),
/// always PLAIN.
pub fn decode(
    dt: &DataType,
    enc: Encoding,
    r: &mut Reader<'_>,
    n: usize,
    nulls: Option<NullBuffer>,
) -> Result<ArrayRef> {
    let binary = *dt == DataType::Binary;
    match enc {
        Encoding::Plain if binary => Ok(make_array(read_plain_as(r, n, nulls, DataType::Binary)?)),
        Encoding::Plain => Ok(Arc::new(read_plain(r, n, nulls)?)),
        Encoding::Dict if !binary => {
            let entries = r.u32()? as usize;
            if entries > n.max(1) {
                return Err(TethysError::Corruption(format!(
                    "dictionary of {entries} values for {n} rows"
                )));
            }
            let values = read_plain(r, entries, None)?;
            let bits = r.u8()?;
            // Codes index at most `n` entries, so they fit in 31 bits.
            if bits > 31 {
                return Err(TethysError::Corruption(format!(
                    "dictionary codes of {bits} bits"
                )));
            }
            let packed = r.take(packed_len(n, bits))?;
            let mut codes = Vec::with_capacity(n);
            unpack_into(packed, bits, n, &mut codes, |c| c as i32)?;
            if codes.iter().any(|&c| c as usize >= entries) {
                return Err(TethysError::Corruption(
                    "dictionary code out of range".into(),
                ));
            }
            let keys = Int32Array::new(ScalarBuffer::from(codes), nulls);
            let dict = DictionaryArray::<Int32Type>::try_new(keys, Arc::new(values))
                .map_err(|e| TethysError::Corruption(format!("invalid dictionary page: {e}")))?;
            Ok(Arc::new(dict))
        }
        other => Err(TethysError::Corruption(format!(
            "{} encoding on a {dt} column",
            other.name()
        ))),
    }
}

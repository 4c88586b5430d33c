//! Column pages: one column's values for a run of rows, encoded, compressed
//! and checksummed.
//!
//! Encoding (format v1): `u32 num_rows`, `u8 has_nulls`, the validity bitmap
//! when present, then the values: fixed-width types as little-endian values,
//! booleans as a bitmap, strings as `num_rows + 1` i32 offsets plus bytes.
//! The encoded page is compressed with LZ4 or ZSTD unless that saves less than
//! 10%; the stored form is `u8 codec` + payload. Richer encodings (dictionary,
//! bit-shuffle, RLE, FOR) replace this in segment format v2.

use arrow::array::{Array, ArrayData, ArrayRef, AsArray, make_array};
use arrow::buffer::Buffer;
use arrow::datatypes::DataType;
use arrow::util::bit_util;
use tethys_common::{Result, TethysError};

/// Page codec byte: stored uncompressed.
pub const CODEC_NONE: u8 = 0;
/// Page codec byte: LZ4 block with prepended size.
pub const CODEC_LZ4: u8 = 1;
/// Page codec byte: ZSTD.
pub const CODEC_ZSTD: u8 = 2;

/// Upper bound on a decoded page, guarding against corrupt size fields.
const MAX_PAGE_BYTES: usize = 1 << 30;

fn byte_width(dt: &DataType) -> Option<usize> {
    match dt {
        DataType::Int8 => Some(1),
        DataType::Int16 => Some(2),
        DataType::Int32 | DataType::Date32 | DataType::Float32 => Some(4),
        DataType::Int64 | DataType::Float64 | DataType::Timestamp(_, _) => Some(8),
        DataType::Decimal128(_, _) => Some(16),
        _ => None,
    }
}

/// Encodes an array into the uncompressed page form.
pub fn encode_array(arr: &dyn Array) -> Result<Vec<u8>> {
    let n = arr.len();
    let mut out = Vec::with_capacity(16 + n * 8);
    out.extend_from_slice(&(n as u32).to_le_bytes());
    match arr.logical_nulls() {
        Some(nulls) if nulls.null_count() > 0 => {
            out.push(1);
            out.extend_from_slice(nulls.inner().sliced().as_slice());
        }
        _ => out.push(0),
    }
    let dt = arr.data_type();
    if let Some(w) = byte_width(dt) {
        let data = arr.to_data();
        let buf = &data.buffers()[0];
        let start = data.offset() * w;
        out.extend_from_slice(&buf.as_slice()[start..start + n * w]);
        return Ok(out);
    }
    match dt {
        DataType::Boolean => {
            out.extend_from_slice(arr.as_boolean().values().sliced().as_slice());
        }
        DataType::Utf8 => {
            let s = arr.as_string::<i32>();
            let offsets = s.value_offsets();
            let base = offsets[0];
            for o in offsets {
                out.extend_from_slice(&(o - base).to_le_bytes());
            }
            let (lo, hi) = (base as usize, offsets[n] as usize);
            out.extend_from_slice(&s.values().as_slice()[lo..hi]);
        }
        other => {
            return Err(TethysError::Internal(format!(
                "cannot store Arrow type {other} in a page"
            )));
        }
    }
    Ok(out)
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or_else(|| TethysError::Corruption("page is truncated".into()))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// Decodes an uncompressed page into an array of type `dt`, validating it.
pub fn decode_array(bytes: &[u8], dt: &DataType) -> Result<ArrayRef> {
    let mut c = Cursor { buf: bytes, pos: 0 };
    let n = c.u32()? as usize;
    if n > MAX_PAGE_BYTES {
        return Err(TethysError::Corruption(format!("page claims {n} rows")));
    }
    let has_nulls = c.take(1)?[0];
    let bitmap_len = bit_util::ceil(n, 8);
    let nulls = match has_nulls {
        0 => None,
        1 => Some(Buffer::from(c.take(bitmap_len)?)),
        x => return Err(TethysError::Corruption(format!("bad null flag {x}"))),
    };
    let builder = ArrayData::builder(dt.clone()).len(n).null_bit_buffer(nulls);
    let builder = if let Some(w) = byte_width(dt) {
        builder.add_buffer(Buffer::from(c.take(n * w)?))
    } else {
        match dt {
            DataType::Boolean => builder.add_buffer(Buffer::from(c.take(bitmap_len)?)),
            DataType::Utf8 => {
                let off = c.take((n + 1) * 4)?;
                let last = i32::from_le_bytes([
                    off[n * 4],
                    off[n * 4 + 1],
                    off[n * 4 + 2],
                    off[n * 4 + 3],
                ]);
                if last < 0 {
                    return Err(TethysError::Corruption("negative string offset".into()));
                }
                let data = c.take(last as usize)?;
                builder
                    .add_buffer(Buffer::from(off))
                    .add_buffer(Buffer::from(data))
            }
            other => {
                return Err(TethysError::Corruption(format!(
                    "page of unsupported type {other}"
                )));
            }
        }
    };
    if c.pos != bytes.len() {
        return Err(TethysError::Corruption(
            "trailing bytes after page values".into(),
        ));
    }
    let data = builder
        .build()
        .map_err(|e| TethysError::Corruption(format!("invalid page: {e}")))?;
    Ok(make_array(data))
}

/// Compresses an encoded page; keeps it uncompressed when compression saves
/// less than 10%.
pub fn compress(raw: &[u8], codec: &str) -> Result<Vec<u8>> {
    let (tag, body) = match codec {
        "zstd" => (
            CODEC_ZSTD,
            zstd::bulk::compress(raw, 3)
                .map_err(|e| TethysError::io("compressing a page with zstd", e))?,
        ),
        _ => (CODEC_LZ4, lz4_flex::block::compress_prepend_size(raw)),
    };
    let mut out = Vec::with_capacity(body.len().min(raw.len()) + 1);
    if body.len() * 10 <= raw.len() * 9 {
        out.push(tag);
        out.extend_from_slice(&body);
    } else {
        out.push(CODEC_NONE);
        out.extend_from_slice(raw);
    }
    Ok(out)
}

/// Reverses [`compress`].
pub fn decompress(stored: &[u8], expected_len: usize) -> Result<Vec<u8>> {
    let (tag, body) = stored
        .split_first()
        .ok_or_else(|| TethysError::Corruption("empty page".into()))?;
    if expected_len > MAX_PAGE_BYTES {
        return Err(TethysError::Corruption(format!(
            "page claims {expected_len} bytes"
        )));
    }
    let out = match *tag {
        CODEC_NONE => body.to_vec(),
        CODEC_LZ4 => lz4_flex::block::decompress_size_prepended(body)
            .map_err(|e| TethysError::Corruption(format!("lz4 page: {e}")))?,
        CODEC_ZSTD => zstd::bulk::decompress(body, expected_len)
            .map_err(|e| TethysError::Corruption(format!("zstd page: {e}")))?,
        x => return Err(TethysError::Corruption(format!("unknown page codec {x}"))),
    };
    if out.len() != expected_len {
        return Err(TethysError::Corruption(format!(
            "page decompressed to {} bytes, expected {expected_len}",
            out.len()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{BooleanArray, Decimal128Array, Int32Array, StringArray};
    use std::sync::Arc;

    fn roundtrip(a: ArrayRef) {
        for codec in ["lz4", "zstd"] {
            let raw = encode_array(a.as_ref()).unwrap();
            let stored = compress(&raw, codec).unwrap();
            let back =
                decode_array(&decompress(&stored, raw.len()).unwrap(), a.data_type()).unwrap();
            assert_eq!(&back, &a);
        }
    }

    #[test]
    fn roundtrips() {
        roundtrip(Arc::new(Int32Array::from(vec![Some(1), None, Some(3)])));
        roundtrip(Arc::new(StringArray::from(vec![
            Some("a"),
            None,
            Some("hello"),
        ])));
        roundtrip(Arc::new(BooleanArray::from(vec![true, false, true])));
        roundtrip(Arc::new(
            Decimal128Array::from(vec![12345, -1])
                .with_precision_and_scale(10, 2)
                .unwrap(),
        ));
        let big: ArrayRef = Arc::new(Int32Array::from((0..10000).collect::<Vec<_>>()));
        roundtrip(big.slice(100, 5000));
        let s: ArrayRef = Arc::new(StringArray::from(vec!["x"; 100]));
        roundtrip(s.slice(3, 50));
    }

    #[test]
    fn corrupt_pages_are_errors() {
        let a = Int32Array::from(vec![1, 2, 3]);
        let raw = encode_array(&a).unwrap();
        assert!(decode_array(&raw[..raw.len() - 1], &DataType::Int32).is_err());
        let s = StringArray::from(vec!["ab", "c"]);
        let mut raw = encode_array(&s).unwrap();
        // Point an offset past the data.
        raw[9] = 200;
        assert!(decode_array(&raw, &DataType::Utf8).is_err());
        assert!(decompress(&[9, 1, 2], 2).is_err());
    }
}

//! Column pages: one column's values for a run of rows, encoded, compressed
//! and checksummed.
//!
//! Raw page (format v2): `u32 num_rows`, `u8 encoding`, `u8 has_nulls`, the
//! validity bitmap when present, then the body of the encoding (see
//! [`super::encoding`]). The raw page is compressed with LZ4 or ZSTD unless
//! that saves less than 10%; the stored form is `u8 codec` + payload.
//!
//! Format v1 pages (segments written before v2) have no encoding byte and
//! store values plain; [`decode_v1`] still reads them.

use arrow::array::{Array, ArrayData, ArrayRef, make_array};
use arrow::buffer::{BooleanBuffer, Buffer, NullBuffer};
use arrow::datatypes::DataType;
use arrow::util::bit_util;
use tethys_common::{Result, TethysError};

use super::encoding::{self, Encoding, Reader};

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

/// Decodes an uncompressed format v1 page into an array of type `dt`,
/// validating it.
pub fn decode_v1(bytes: &[u8], dt: &DataType) -> Result<ArrayRef> {
    let mut c = Reader::new(bytes);
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
    if !c.at_end() {
        return Err(TethysError::Corruption(
            "trailing bytes after page values".into(),
        ));
    }
    let data = builder
        .build()
        .map_err(|e| TethysError::Corruption(format!("invalid page: {e}")))?;
    Ok(make_array(data))
}

/// Encodes an array into the raw (uncompressed) v2 page form, in the
/// encoding chosen for its type and data, or `prefer` where that can
/// represent it. Returns the encoding used and the raw page.
pub fn encode_page(arr: &dyn Array, prefer: Option<Encoding>) -> Result<(Encoding, Vec<u8>)> {
    let n = arr.len();
    let mut out = Vec::with_capacity(16 + n * 4);
    out.extend_from_slice(&(n as u32).to_le_bytes());
    out.push(0);
    match arr.logical_nulls() {
        Some(nulls) if nulls.null_count() > 0 => {
            out.push(1);
            out.extend_from_slice(nulls.inner().sliced().as_slice());
        }
        _ => out.push(0),
    }
    let enc = encoding::encode(arr, prefer, &mut out)?;
    out[4] = enc as u8;
    Ok((enc, out))
}

/// Decodes a raw v2 page into an array of type `dt` (a dictionary array for
/// DICT-encoded strings), validating it.
pub fn decode_page(bytes: &[u8], dt: &DataType) -> Result<ArrayRef> {
    let (mut r, n, enc, nulls) = page_header(bytes)?;
    let arr = encoding::decode(enc, &mut r, n, nulls, dt)?;
    if !r.at_end() {
        return Err(TethysError::Corruption(
            "trailing bytes after page values".into(),
        ));
    }
    Ok(arr)
}

/// The rows at `positions` of a raw v2 page, decoded without the others
/// where its encoding allows (`encoding::decode_at`); `None` where the page
/// must be decoded whole. The page must hold `rows` rows.
pub fn decode_page_at(
    bytes: &[u8],
    dt: &DataType,
    rows: usize,
    positions: &[u32],
) -> Result<Option<ArrayRef>> {
    let (mut r, n, enc, nulls) = page_header(bytes)?;
    if n != rows {
        return Err(TethysError::Corruption(format!(
            "{n} rows, footer says {rows}"
        )));
    }
    let arr = encoding::decode_at(enc, &mut r, n, nulls, dt, positions)?;
    if arr.is_some() && !r.at_end() {
        return Err(TethysError::Corruption(
            "trailing bytes after page values".into(),
        ));
    }
    Ok(arr)
}

/// The sum (wrapping at 128 bits) of the non-NULL values of a raw v2 page
/// of integers or decimals and how many there are, taken from the encoded
/// values without decoding them (`encoding::sum`); `None` where the page
/// must be decoded. The page must hold `rows` rows.
pub fn sum_page(bytes: &[u8], dt: &DataType, rows: usize) -> Result<Option<(i128, u64)>> {
    let (mut r, n, enc, nulls) = page_header(bytes)?;
    if n != rows {
        return Err(TethysError::Corruption(format!(
            "{n} rows, footer says {rows}"
        )));
    }
    let valid = (n - nulls.as_ref().map_or(0, |nb| nb.null_count())) as u64;
    let sum = encoding::sum(enc, &mut r, n, nulls.as_ref(), dt)?;
    if sum.is_some() && !r.at_end() {
        return Err(TethysError::Corruption(
            "trailing bytes after page values".into(),
        ));
    }
    Ok(sum.map(|s| (s, valid)))
}

/// A v2 page's header: a reader at its values, its row count, encoding and
/// validity bitmap.
fn page_header(bytes: &[u8]) -> Result<(Reader<'_>, usize, Encoding, Option<NullBuffer>)> {
    let mut r = Reader::new(bytes);
    let n = r.u32()? as usize;
    if n > MAX_PAGE_BYTES {
        return Err(TethysError::Corruption(format!("page claims {n} rows")));
    }
    let enc = Encoding::from_byte(r.u8()?)?;
    let nulls = match r.u8()? {
        0 => None,
        1 => Some(NullBuffer::new(BooleanBuffer::new(
            Buffer::from(r.take(bit_util::ceil(n, 8))?),
            0,
            n,
        ))),
        x => return Err(TethysError::Corruption(format!("bad null flag {x}"))),
    };
    Ok((r, n, enc, nulls))
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
    use arrow::array::{
        BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array, Int8Array,
        Int16Array, Int32Array, Int64Array, StringArray, TimestampMicrosecondArray, UInt32Array,
    };
    use proptest::prelude::*;
    use std::sync::Arc;

    /// `a` as its column type (dictionary pages unpacked).
    fn plain(a: &ArrayRef, dt: &DataType) -> ArrayRef {
        arrow::compute::cast(a, dt).unwrap()
    }

    /// Encodes, compresses, decompresses and decodes `a`; checks the result
    /// and returns the encoding used.
    fn roundtrip(a: &ArrayRef, prefer: Option<Encoding>, codec: &str) -> Encoding {
        let (enc, raw) = encode_page(a.as_ref(), prefer).unwrap();
        let stored = compress(&raw, codec).unwrap();
        let page = decompress(&stored, raw.len()).unwrap();
        let back = decode_page(&page, a.data_type()).unwrap();
        assert_eq!(back.len(), a.len());
        assert_eq!(&plain(&back, a.data_type()), a, "{enc:?}");
        // Some rows alone, where the encoding reads them in place.
        let positions: Vec<u32> = (0..a.len() as u32).filter(|i| i % 3 == 2).collect();
        let at = decode_page_at(&page, a.data_type(), a.len(), &positions).unwrap();
        let in_place = matches!(enc, Encoding::Plain | Encoding::For)
            && !matches!(a.data_type(), DataType::Boolean | DataType::Utf8);
        assert_eq!(at.is_some(), in_place, "{enc:?} {}", a.data_type());
        if let Some(at) = at {
            let want =
                arrow::compute::take(a.as_ref(), &UInt32Array::from(positions), None).unwrap();
            assert_eq!(&at, &want, "{enc:?}");
        }
        if let Some(p) = prefer {
            assert!(enc == p || enc == Encoding::Plain, "{p:?} gave {enc:?}");
        }
        // The in-place sum of integer and decimal pages is the decoded sum.
        if let Some(want) = reference_sum(a) {
            match sum_page(&page, a.data_type(), a.len()).unwrap() {
                Some(got) => assert_eq!(got, want, "{enc:?} {}", a.data_type()),
                None => assert!(
                    enc == Encoding::BitShuffle
                        || (matches!(enc, Encoding::Rle | Encoding::Delta) && a.null_count() > 0),
                    "{enc:?} {} not summed in place",
                    a.data_type()
                ),
            }
        }
        enc
    }

    /// The wrapping sum and count of the non-NULL values of an integer or
    /// decimal array; `None` for other types.
    fn reference_sum(a: &ArrayRef) -> Option<(i128, u64)> {
        use arrow::array::AsArray;
        use arrow::datatypes::{Decimal128Type, Int64Type};
        let values: Vec<Option<i128>> = match a.data_type() {
            DataType::Decimal128(_, _) => a.as_primitive::<Decimal128Type>().iter().collect(),
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
                let wide = arrow::compute::cast(a, &DataType::Int64).unwrap();
                let wide = wide.as_primitive::<Int64Type>();
                wide.iter().map(|v| v.map(i128::from)).collect()
            }
            _ => return None,
        };
        let valid = values.iter().flatten();
        Some((
            valid.clone().fold(0i128, |s, v| s.wrapping_add(*v)),
            valid.count() as u64,
        ))
    }

    /// An array of type `kind` from `raw` values (`None`: null), `spread`
    /// choosing narrow (runs), medium or full-width values.
    fn build(kind: u8, raw: &[Option<u64>], spread: u8) -> ArrayRef {
        let v = |r: u64| match spread {
            0 => r % 3,
            1 => 1_000_000 + r % 5000,
            _ => r,
        };
        let it = || raw.iter().map(|o| o.map(v));
        match kind {
            0 => Arc::new(Int8Array::from_iter(it().map(|o| o.map(|x| x as i8)))),
            1 => Arc::new(Int16Array::from_iter(it().map(|o| o.map(|x| x as i16)))),
            2 => Arc::new(Int32Array::from_iter(it().map(|o| o.map(|x| x as i32)))),
            3 => Arc::new(Int64Array::from_iter(it().map(|o| o.map(|x| x as i64)))),
            4 => Arc::new(Date32Array::from_iter(it().map(|o| o.map(|x| x as i32)))),
            5 => Arc::new(TimestampMicrosecondArray::from_iter(
                it().map(|o| o.map(|x| x as i64)),
            )),
            6 => Arc::new(
                Decimal128Array::from_iter(it().map(|o| {
                    o.map(|x| {
                        if spread > 1 {
                            (x as i128) << 62
                        } else {
                            x as i128
                        }
                    })
                }))
                .with_precision_and_scale(38, 2)
                .unwrap(),
            ),
            7 => Arc::new(Float32Array::from_iter(
                it().map(|o| o.map(|x| x as i32 as f32 / 8.0)),
            )),
            8 => Arc::new(Float64Array::from_iter(
                it().map(|o| o.map(|x| x as i64 as f64 / 3.0)),
            )),
            9 => Arc::new(BooleanArray::from_iter(it().map(|o| o.map(|x| x % 2 == 1)))),
            _ => Arc::new(StringArray::from_iter(it().map(|o| {
                o.map(|x| format!("{}{}", "s".repeat((x % 40) as usize), x % 97))
            }))),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Every type x encoding x nullability x compression round-trips,
        /// including empty and all-null pages.
        #[test]
        fn pages_round_trip(
            kind in 0u8..11,
            spread in 0u8..3,
            raw in prop::collection::vec(prop::option::weighted(0.8, any::<u64>()), 0..700),
            all_null in prop::bool::weighted(0.1),
            prefer in prop::option::of(prop::sample::select(Encoding::ALL.to_vec())),
            zstd in any::<bool>(),
        ) {
            let raw: Vec<Option<u64>> =
                if all_null { vec![None; raw.len()] } else { raw };
            let a = build(kind, &raw, spread);
            roundtrip(&a, prefer, if zstd { "zstd" } else { "lz4" });
            // A slice (non-zero offset) encodes the same values.
            if a.len() > 10 {
                roundtrip(&a.slice(3, a.len() - 7), prefer, "lz4");
            }
        }

        /// Damaged raw pages decode to an error or some array, never a panic.
        #[test]
        fn damaged_pages_never_panic(
            kind in 0u8..11,
            spread in 0u8..3,
            raw in prop::collection::vec(prop::option::weighted(0.9, any::<u64>()), 1..300),
            prefer in prop::option::of(prop::sample::select(Encoding::ALL.to_vec())),
            at in any::<prop::sample::Index>(),
            flip in 1u8..=255,
            cut in any::<bool>(),
        ) {
            let a = build(kind, &raw, spread);
            let (_, mut bytes) = encode_page(a.as_ref(), prefer).unwrap();
            let i = at.index(bytes.len());
            if cut {
                bytes.truncate(i);
            } else {
                bytes[i] ^= flip;
            }
            let _ = decode_page(&bytes, a.data_type());
            let positions: Vec<u32> = (0..a.len() as u32).step_by(2).collect();
            let _ = decode_page_at(&bytes, a.data_type(), a.len(), &positions);
        }
    }

    /// Runs of every length from 1 to 17 (short runs are written as one
    /// eight-value store, longer ones filled) decode exactly, as steps and
    /// as runs.
    #[test]
    fn runs_of_every_length_round_trip() {
        let values: Vec<i64> = (1..=17i64)
            .cycle()
            .take(60)
            .enumerate()
            .flat_map(|(i, len)| std::iter::repeat_n(i as i64 * 3, len as usize))
            .collect();
        let a: ArrayRef = Arc::new(Int64Array::from(values));
        assert_eq!(roundtrip(&a, Some(Encoding::Delta), "lz4"), Encoding::Delta);
        assert_eq!(roundtrip(&a, Some(Encoding::Rle), "lz4"), Encoding::Rle);
    }

    #[test]
    fn encodings_follow_the_data() {
        let auto = |a: ArrayRef| roundtrip(&a, None, "lz4");
        // Sorted keys, unique or in short runs (TPC-H orderkeys: 1-7 rows
        // each, 8 of every 32 numbers): steps.
        assert_eq!(
            auto(Arc::new(Int64Array::from_iter_values(1_000_000..1_004_064))),
            Encoding::Delta
        );
        let orderkeys = (0..4064i64).map(|i| {
            let order = i / 4;
            (order / 8) * 32 + order % 8 + 1
        });
        assert_eq!(
            auto(Arc::new(Int64Array::from_iter_values(orderkeys))),
            Encoding::Delta
        );
        // Unsorted values in a small range (dates): a small frame.
        assert_eq!(
            auto(Arc::new(Int32Array::from_iter_values(
                (0..4064).map(|i| 9000 + (i * 7919) % 2500)
            ))),
            Encoding::For
        );
        // Long runs: runs, their integer values as steps.
        assert_eq!(
            auto(Arc::new(Int32Array::from_iter_values(
                (0..4064).map(|i| (i / 500) * 1_000_003)
            ))),
            Encoding::Delta
        );
        assert_eq!(
            auto(Arc::new(Float64Array::from_iter_values(
                (0..4064).map(|i| (i / 500) as f64 * 1.5)
            ))),
            Encoding::Rle
        );
        assert_eq!(
            auto(Arc::new(BooleanArray::from(vec![true; 4064]))),
            Encoding::Rle
        );
        // Floats are bit-shuffled; full-width integers too.
        assert_eq!(
            auto(Arc::new(Float64Array::from_iter_values(
                (0..4064).map(|i| i as f64 * 1.37)
            ))),
            Encoding::BitShuffle
        );
        assert_eq!(
            auto(Arc::new(Int64Array::from_iter_values(
                (0..4064i64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15u64 as i64))
            ))),
            Encoding::BitShuffle
        );
        // Few distinct strings: a dictionary; unique ones: plain.
        let modes = ["AIR", "MAIL", "SHIP", "TRUCK", "RAIL", "FOB", "REG AIR"];
        assert_eq!(
            auto(Arc::new(StringArray::from_iter_values(
                (0..4064).map(|i| modes[i % 7])
            ))),
            Encoding::Dict
        );
        assert_eq!(
            auto(Arc::new(StringArray::from_iter_values(
                (0..4064).map(|i| format!("comment {i}"))
            ))),
            Encoding::Plain
        );
        // Decimals whose range needs more than 64 bits cannot use FOR.
        let wide: ArrayRef = Arc::new(
            Decimal128Array::from(vec![i128::MIN / 2, i128::MAX / 2])
                .with_precision_and_scale(38, 0)
                .unwrap(),
        );
        assert_ne!(roundtrip(&wide, Some(Encoding::For), "lz4"), Encoding::For);
    }

    #[test]
    fn empty_pages_decode_aligned() {
        // Found by `pages_round_trip`: an empty bit-shuffled page decoded to
        // an unallocated byte vector, misaligned for 2-byte values.
        for enc in Encoding::ALL {
            let a: ArrayRef = Arc::new(Int16Array::from(Vec::<i16>::new()));
            roundtrip(&a, Some(enc), "lz4");
        }
    }

    #[test]
    fn dictionary_pages_decode_to_dictionary_arrays() {
        let a: ArrayRef = Arc::new(StringArray::from(vec![
            Some("x"),
            None,
            Some("y"),
            Some("x"),
        ]));
        let (enc, raw) = encode_page(a.as_ref(), Some(Encoding::Dict)).unwrap();
        assert_eq!(enc, Encoding::Dict);
        let back = decode_page(&raw, &DataType::Utf8).unwrap();
        assert!(matches!(back.data_type(), DataType::Dictionary(_, _)));
        assert_eq!(back.null_count(), 1);
    }

    #[test]
    fn very_long_strings_round_trip() {
        let long = "abcdefghij".repeat(100_000);
        let a: ArrayRef = Arc::new(StringArray::from(vec![
            Some(long.as_str()),
            None,
            Some(""),
            Some(&long[..77_777]),
        ]));
        for prefer in [None, Some(Encoding::Plain), Some(Encoding::Dict)] {
            for codec in ["lz4", "zstd"] {
                roundtrip(&a, prefer, codec);
            }
        }
    }

    #[test]
    fn corrupt_pages_are_errors() {
        let a = Int32Array::from(vec![1, 2, 3]);
        let (_, raw) = encode_page(&a, Some(Encoding::Plain)).unwrap();
        assert!(decode_page(&raw[..raw.len() - 1], &DataType::Int32).is_err());
        let mut bad = raw.clone();
        bad[4] = 9;
        let err = decode_page(&bad, &DataType::Int32).unwrap_err().to_string();
        assert!(err.contains("unknown page encoding"), "{err}");
        // Dictionary codes past the dictionary.
        let s = StringArray::from(vec!["ab", "ab", "c", "c", "d", "d"]);
        let (_, mut raw) = encode_page(&s, Some(Encoding::Dict)).unwrap();
        let codes_at = raw.len() - bitpack_tail(6, 2);
        raw[codes_at] = 0xFF;
        assert!(decode_page(&raw, &DataType::Utf8).is_err());
        assert!(decompress(&[9, 1, 2], 2).is_err());
    }

    /// Bytes of a packed block of `n` values of `bits` bits.
    fn bitpack_tail(n: usize, bits: u8) -> usize {
        super::encoding::bitpack::packed_len(n, bits)
    }

    #[test]
    fn format_v1_pages_still_decode() {
        // u32 rows, no-nulls flag, three little-endian i32 values.
        let mut v1 = 3u32.to_le_bytes().to_vec();
        v1.push(0);
        for x in [1i32, 2, 3] {
            v1.extend_from_slice(&x.to_le_bytes());
        }
        let a = decode_v1(&v1, &DataType::Int32).unwrap();
        assert_eq!(a.as_ref(), &Int32Array::from(vec![1, 2, 3]) as &dyn Array);
        assert!(decode_v1(&v1[..v1.len() - 1], &DataType::Int32).is_err());
    }
}

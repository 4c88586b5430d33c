//! Page value encodings of segment format v2 (Doris' PLAIN, DICT, RLE,
//! BIT_SHUFFLE and FOR, and DELTA for sorted runs), chosen per page from the column's type and data:
//!
//! | type | choice |
//! |---|---|
//! | TINYINT..BIGINT, LARGEINT, DECIMAL, DATE, DATETIME | DELTA (runs, each value a step from the previous run's) when that takes a quarter less than FOR, RLE for long runs whose steps do not fit 64 bits, else FOR when the page's range needs fewer bits than the type, else BIT_SHUFFLE |
//! | FLOAT, DOUBLE | RLE for long runs, else BIT_SHUFFLE |
//! | BOOLEAN | RLE for long runs, else PLAIN (a bitmap) |
//! | CHAR, VARCHAR, STRING | DICT while a page has at most half as many distinct values as rows, else PLAIN |
//!
//! Nullable columns carry a validity bitmap in the page header, whatever the
//! encoding. Tests and benchmarks can force an encoding ([`encode`]'s
//! `prefer`); a page it cannot represent falls back to PLAIN.

pub mod bitpack;
pub mod bitshuffle;
mod fixed;
mod strings;

use arrow::array::{Array, ArrayData, ArrayRef, AsArray, make_array};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, TimeUnit};
use serde::{Deserialize, Serialize};
use tethys_common::{Result, TethysError};

/// How a page's values are laid out (stored as one byte in the page).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Encoding {
    Plain = 0,
    Dict = 1,
    Rle = 2,
    BitShuffle = 3,
    For = 4,
    Delta = 5,
}

impl Encoding {
    /// Every encoding.
    pub const ALL: [Encoding; 6] = [
        Encoding::Plain,
        Encoding::Dict,
        Encoding::Rle,
        Encoding::BitShuffle,
        Encoding::For,
        Encoding::Delta,
    ];

    /// The encoding stored as byte `b`.
    pub fn from_byte(b: u8) -> Result<Encoding> {
        Encoding::ALL
            .get(b as usize)
            .copied()
            .ok_or_else(|| TethysError::Corruption(format!("unknown page encoding {b}")))
    }

    /// Doris' name for it.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Plain => "PLAIN",
            Encoding::Dict => "DICT",
            Encoding::Rle => "RLE",
            Encoding::BitShuffle => "BIT_SHUFFLE",
            Encoding::For => "FOR",
            Encoding::Delta => "DELTA",
        }
    }
}

/// Reads a page body front to back, every read bounds-checked.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or_else(|| TethysError::Corruption("page is truncated".into()))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub fn u32(&mut self) -> Result<u32> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }

    pub fn i128(&mut self) -> Result<i128> {
        let mut b = [0u8; 16];
        b.copy_from_slice(self.take(16)?);
        Ok(i128::from_le_bytes(b))
    }

    /// Whether every byte was read.
    pub fn at_end(&self) -> bool {
        self.pos == self.buf.len()
    }
}

/// How a fixed-width Arrow type is stored: the integer type of its bits and
/// whether it is an integer (FOR applies) rather than a float.
enum Fixed {
    I8,
    I16,
    I32(bool),
    I64(bool),
    I128,
}

fn fixed_of(dt: &DataType) -> Option<Fixed> {
    Some(match dt {
        DataType::Int8 => Fixed::I8,
        DataType::Int16 => Fixed::I16,
        DataType::Int32 | DataType::Date32 => Fixed::I32(true),
        DataType::Float32 => Fixed::I32(false),
        DataType::Int64 | DataType::Timestamp(TimeUnit::Microsecond, _) => Fixed::I64(true),
        DataType::Float64 => Fixed::I64(false),
        DataType::Decimal128(_, _) => Fixed::I128,
        _ => return None,
    })
}

/// The values of a fixed-width array as `T`.
fn values_as<T: fixed::Int>(arr: &dyn Array) -> arrow::buffer::ScalarBuffer<T> {
    let data = arr.to_data();
    arrow::buffer::ScalarBuffer::new(data.buffers()[0].clone(), data.offset(), data.len())
}

/// Appends the body of `arr` in the encoding chosen for it (or `prefer`
/// where that can represent it); returns the encoding.
pub fn encode(arr: &dyn Array, prefer: Option<Encoding>, out: &mut Vec<u8>) -> Result<Encoding> {
    let nulls = arr.logical_nulls().filter(|n| n.null_count() > 0);
    let nulls = nulls.as_ref();
    let dt = arr.data_type();
    if let Some(f) = fixed_of(dt) {
        return Ok(match f {
            Fixed::I8 => fixed::encode(&values_as::<i8>(arr), nulls, true, prefer, out),
            Fixed::I16 => fixed::encode(&values_as::<i16>(arr), nulls, true, prefer, out),
            Fixed::I32(int) => fixed::encode(&values_as::<i32>(arr), nulls, int, prefer, out),
            Fixed::I64(int) => fixed::encode(&values_as::<i64>(arr), nulls, int, prefer, out),
            Fixed::I128 => fixed::encode(&values_as::<i128>(arr), nulls, true, prefer, out),
        });
    }
    match dt {
        DataType::Boolean => Ok(fixed::encode_bools(
            arr.as_boolean().values(),
            nulls,
            prefer,
            out,
        )),
        DataType::Utf8 => Ok(strings::encode(arr.as_string::<i32>(), prefer, out)),
        DataType::Binary => Ok(strings::encode_binary(arr.as_binary::<i32>(), out)),
        other => Err(TethysError::Internal(format!(
            "cannot store Arrow type {other} in a page"
        ))),
    }
}

/// Decodes a body of `n` values of type `dt` encoded as `enc`. String pages
/// in DICT come back as a dictionary array (Int32 keys, Utf8 values).
pub fn decode(
    enc: Encoding,
    r: &mut Reader<'_>,
    n: usize,
    nulls: Option<NullBuffer>,
    dt: &DataType,
) -> Result<ArrayRef> {
    let values = match fixed_of(dt) {
        Some(Fixed::I8) => fixed::decode::<i8>(enc, r, n)?,
        Some(Fixed::I16) => fixed::decode::<i16>(enc, r, n)?,
        Some(Fixed::I32(_)) => fixed::decode::<i32>(enc, r, n)?,
        Some(Fixed::I64(_)) => fixed::decode::<i64>(enc, r, n)?,
        Some(Fixed::I128) => fixed::decode::<i128>(enc, r, n)?,
        None => match dt {
            DataType::Boolean => fixed::decode_bools(enc, r, n)?,
            DataType::Utf8 | DataType::Binary => return strings::decode(dt, enc, r, n, nulls),
            other => {
                return Err(TethysError::Corruption(format!(
                    "page of unsupported type {other}"
                )));
            }
        },
    };
    let data = ArrayData::builder(dt.clone())
        .len(n)
        .nulls(nulls)
        .add_buffer(values)
        .build()
        .map_err(|e| TethysError::Corruption(format!("invalid page: {e}")))?;
    Ok(make_array(data))
}

/// The sum (wrapping at 128 bits) of the valid values of a body of `n`
/// integers or decimals of type `dt`, taken from the encoded form
/// ([`fixed::sum`]); `nulls` is the page's validity. `None` for other types
/// and where the page must be decoded to be summed.
pub fn sum(
    enc: Encoding,
    r: &mut Reader<'_>,
    n: usize,
    nulls: Option<&NullBuffer>,
    dt: &DataType,
) -> Result<Option<i128>> {
    match fixed_of(dt) {
        Some(Fixed::I8) => fixed::sum::<i8>(enc, r, n, nulls),
        Some(Fixed::I16) => fixed::sum::<i16>(enc, r, n, nulls),
        Some(Fixed::I32(true)) => fixed::sum::<i32>(enc, r, n, nulls),
        Some(Fixed::I64(true)) => fixed::sum::<i64>(enc, r, n, nulls),
        Some(Fixed::I128) => fixed::sum::<i128>(enc, r, n, nulls),
        _ => Ok(None),
    }
}

/// The values at `positions` of a body of `n` values of type `dt`, decoded
/// without the rest ([`fixed::decode_at`]); `nulls` are the whole page's.
/// `None` where the type or encoding must be decoded whole.
pub fn decode_at(
    enc: Encoding,
    r: &mut Reader<'_>,
    n: usize,
    nulls: Option<NullBuffer>,
    dt: &DataType,
    positions: &[u32],
) -> Result<Option<ArrayRef>> {
    let values = match fixed_of(dt) {
        Some(Fixed::I8) => fixed::decode_at::<i8>(enc, r, n, positions)?,
        Some(Fixed::I16) => fixed::decode_at::<i16>(enc, r, n, positions)?,
        Some(Fixed::I32(_)) => fixed::decode_at::<i32>(enc, r, n, positions)?,
        Some(Fixed::I64(_)) => fixed::decode_at::<i64>(enc, r, n, positions)?,
        Some(Fixed::I128) => fixed::decode_at::<i128>(enc, r, n, positions)?,
        None => None,
    };
    let Some(values) = values else {
        return Ok(None);
    };
    let nulls = nulls.map(|nb| {
        NullBuffer::new(arrow::buffer::BooleanBuffer::from_iter(
            positions.iter().map(|&i| nb.is_valid(i as usize)),
        ))
    });
    let data = ArrayData::builder(dt.clone())
        .len(positions.len())
        .nulls(nulls)
        .add_buffer(values)
        .build()
        .map_err(|e| TethysError::Corruption(format!("invalid page: {e}")))?;
    Ok(Some(make_array(data)))
}

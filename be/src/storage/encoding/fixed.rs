//! Encodings of fixed-width values (integers, dates, datetimes, decimals,
//! floats) and of booleans.
//!
//! Bodies (after the page header):
//! - PLAIN: the values, little-endian.
//! - BIT_SHUFFLE: the values' bit planes (see [`super::bitshuffle`]).
//! - FOR: `i128 reference` (the smallest value), `u8 bits`, then every value
//!   minus the reference, bit-packed; null slots hold the reference.
//! - RLE: `u32 runs`, the runs' values (PLAIN; one byte for booleans),
//!   `u8 bits`, the run lengths bit-packed. Null slots extend the run
//!   around them.
//! - DELTA: runs as RLE has them, each run's value stored as its difference
//!   from the previous run's: `u32 runs`, `i128 first` (the first run's
//!   value), `i128 min_delta`, `u8 bits`, the `runs - 1` differences minus
//!   `min_delta` bit-packed, `u8 bits`, each run's length minus one
//!   bit-packed. Sorted keys and timestamps (a page of TPC-H `l_orderkey`:
//!   about 1000 runs of 1-7 rows, 5-bit steps) take a fraction of FOR's
//!   bytes: this is Doris' FOR in its ordered mode, with runs.

use arrow::buffer::{BooleanBuffer, Buffer, NullBuffer};
use arrow::datatypes::ArrowNativeType;
use tethys_common::{Result, TethysError};

use super::bitpack::{bits_for, pack, unpack, unpack_at, unpack_into};
use super::bitshuffle::{shuffle, unshuffle};
use super::{Encoding, Reader};

/// A fixed-width value: its bits as an integer (floats are viewed through
/// their bit pattern, which only PLAIN, RLE and BIT_SHUFFLE use).
pub trait Int: ArrowNativeType + Copy + PartialEq {
    /// Byte width.
    const W: usize;
    fn to_i128(self) -> i128;
    /// Truncating conversion (corrupt input wraps rather than panics).
    fn from_i128(v: i128) -> Self;
    /// Truncating conversion of a bit-packed delta.
    fn from_u64(v: u64) -> Self;
    /// Two's complement addition: the truncation of the `i128` sum, done
    /// at the value's own width.
    fn add_wrap(self, other: Self) -> Self;
    fn write_le(self, out: &mut Vec<u8>);
}

macro_rules! int_impl {
    ($($t:ty),*) => {$(
        impl Int for $t {
            const W: usize = std::mem::size_of::<$t>();
            fn to_i128(self) -> i128 {
                self as i128
            }
            fn from_i128(v: i128) -> Self {
                v as $t
            }
            fn from_u64(v: u64) -> Self {
                v as $t
            }
            fn add_wrap(self, other: Self) -> Self {
                self.wrapping_add(other)
            }
            fn write_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
int_impl!(i8, i16, i32, i64, i128);

/// Runs of equal values, null slots joining the run around them: the first
/// valid value and length of each run.
fn runs<T: Int>(vals: &[T], nulls: Option<&NullBuffer>) -> Vec<(T, u32)> {
    let mut out: Vec<(T, u32)> = Vec::new();
    let mut leading = 0u32;
    for (i, v) in vals.iter().enumerate() {
        if nulls.is_some_and(|nb| nb.is_null(i)) {
            match out.last_mut() {
                Some(r) => r.1 += 1,
                None => leading += 1,
            }
            continue;
        }
        match out.last_mut() {
            Some(r) if r.0 == *v => r.1 += 1,
            _ => out.push((*v, 1)),
        }
    }
    match out.first_mut() {
        Some(r) => r.1 += leading,
        None if leading > 0 => out.push((T::default(), leading)),
        None => {}
    }
    out
}

/// Smallest and largest valid value.
fn min_max<T: Int>(vals: &[T], nulls: Option<&NullBuffer>) -> Option<(i128, i128)> {
    let mut mm: Option<(i128, i128)> = None;
    for (i, v) in vals.iter().enumerate() {
        if nulls.is_some_and(|nb| nb.is_null(i)) {
            continue;
        }
        let v = v.to_i128();
        mm = Some(match mm {
            None => (v, v),
            Some((lo, hi)) => (lo.min(v), hi.max(v)),
        });
    }
    mm
}

/// FOR parameters (reference, bits) when the value range fits 64 bits.
fn frame<T: Int>(vals: &[T], nulls: Option<&NullBuffer>) -> Option<(i128, u8)> {
    let (lo, hi) = min_max(vals, nulls).unwrap_or((0, 0));
    let range = hi.checked_sub(lo)?;
    u64::try_from(range).ok().map(|r| (lo, bits_for(r)))
}

/// DELTA parameters of runs: the first value, the smallest step between
/// consecutive run values, the bits of a step above it and of a run length
/// minus one; `None` when a step does not fit 64 bits.
#[derive(Debug, Clone, Copy, Default)]
struct DeltaFrame {
    first: i128,
    min_step: i128,
    step_bits: u8,
    len_bits: u8,
}

impl DeltaFrame {
    fn of<T: Int>(runs: &[(T, u32)]) -> Option<DeltaFrame> {
        let mut lo = 0i128;
        let mut hi = 0i128;
        for (i, w) in runs.windows(2).enumerate() {
            let step = w[1].0.to_i128().checked_sub(w[0].0.to_i128())?;
            if i == 0 {
                (lo, hi) = (step, step);
            } else {
                lo = lo.min(step);
                hi = hi.max(step);
            }
        }
        let range = u64::try_from(hi.checked_sub(lo)?).ok()?;
        let longest = runs.iter().map(|r| r.1).max().unwrap_or(1);
        Some(DeltaFrame {
            first: runs.first().map_or(0, |r| r.0.to_i128()),
            min_step: lo,
            step_bits: bits_for(range),
            len_bits: bits_for(u64::from(longest.saturating_sub(1))),
        })
    }

    /// Body bytes for `runs` runs (padding aside).
    fn bytes(&self, runs: usize) -> usize {
        37 + (runs.saturating_sub(1) * self.step_bits as usize).div_ceil(8)
            + (runs * self.len_bits as usize).div_ceil(8)
    }
}

/// Encodes `vals` (with page nulls `nulls`) into `out`; `integer` allows
/// FOR and DELTA. `prefer` forces an encoding where it can represent the page.
/// Returns the encoding used.
pub fn encode<T: Int>(
    vals: &[T],
    nulls: Option<&NullBuffer>,
    integer: bool,
    prefer: Option<Encoding>,
    out: &mut Vec<u8>,
) -> Encoding {
    let n = vals.len();
    let frame = if integer { frame(vals, nulls) } else { None };
    // The runs, once counted, serve both the choice and the encoding.
    let mut counted: Option<Vec<(T, u32)>> = None;
    let mut delta: Option<DeltaFrame> = None;
    let chosen = match prefer {
        Some(Encoding::For) if frame.is_some() => Encoding::For,
        Some(Encoding::Delta) if integer => {
            delta = DeltaFrame::of(counted.insert(runs(vals, nulls)));
            if delta.is_some() {
                Encoding::Delta
            } else {
                Encoding::Plain
            }
        }
        Some(e @ (Encoding::Plain | Encoding::BitShuffle | Encoding::Rle)) => e,
        Some(_) => Encoding::Plain,
        None => {
            let plain = n * T::W;
            let for_bytes = frame.map_or(usize::MAX, |(_, bits)| (n * bits as usize).div_ceil(8));
            // Counting runs costs a pass; only worth it where FOR leaves
            // more than a bit or two per value.
            let (rle_bytes, delta_bytes) = if for_bytes > n / 4 {
                let r = counted.insert(runs(vals, nulls));
                if integer {
                    delta = DeltaFrame::of(r);
                }
                (
                    r.len() * (T::W + 2),
                    delta.map_or(usize::MAX, |d| d.bytes(r.len())),
                )
            } else {
                (usize::MAX, usize::MAX)
            };
            // DELTA decodes a little slower than FOR: worth it when it
            // saves a quarter.
            if rle_bytes.saturating_mul(2) <= for_bytes.min(plain).min(delta_bytes) {
                Encoding::Rle
            } else if delta_bytes.saturating_mul(4) <= for_bytes.min(plain).saturating_mul(3) {
                Encoding::Delta
            } else if for_bytes < plain {
                Encoding::For
            } else {
                Encoding::BitShuffle
            }
        }
    };
    match chosen {
        Encoding::Rle => {
            write_runs(&counted.unwrap_or_else(|| runs(vals, nulls)), out);
        }
        Encoding::Delta => {
            let runs = counted.unwrap_or_else(|| runs(vals, nulls));
            let d = delta.unwrap_or_default();
            out.extend_from_slice(&(runs.len() as u32).to_le_bytes());
            out.extend_from_slice(&d.first.to_le_bytes());
            out.extend_from_slice(&d.min_step.to_le_bytes());
            out.push(d.step_bits);
            pack(
                out,
                runs.windows(2)
                    .map(|w| (w[1].0.to_i128() - w[0].0.to_i128() - d.min_step) as u64),
                d.step_bits,
            );
            out.push(d.len_bits);
            pack(out, runs.iter().map(|r| u64::from(r.1 - 1)), d.len_bits);
        }
        Encoding::For => {
            let (reference, bits) = frame.unwrap_or((0, 0));
            out.extend_from_slice(&reference.to_le_bytes());
            out.push(bits);
            let delta = |(i, v): (usize, &T)| {
                if nulls.is_some_and(|nb| nb.is_null(i)) {
                    0
                } else {
                    (v.to_i128() - reference) as u64
                }
            };
            pack(out, vals.iter().enumerate().map(delta), bits);
        }
        Encoding::BitShuffle => {
            let mut raw = Vec::with_capacity(n * T::W);
            vals.iter().for_each(|v| v.write_le(&mut raw));
            shuffle(&raw, T::W, out);
        }
        _ => vals.iter().for_each(|v| v.write_le(out)),
    }
    chosen
}

/// The values at `positions` (ascending or not, each below `n`) of a body
/// of `n` values, decoded without the others: FOR reads each packed delta
/// where it lies, PLAIN each value. `None` for encodings that must be
/// decoded whole (BIT_SHUFFLE, RLE, DELTA).
pub fn decode_at<T: Int>(
    enc: Encoding,
    r: &mut Reader<'_>,
    n: usize,
    positions: &[u32],
) -> Result<Option<Buffer>> {
    let mut out: Vec<T> = Vec::with_capacity(positions.len());
    match enc {
        Encoding::Plain => {
            let values = r.take(n * T::W)?;
            for &i in positions {
                let at = i as usize * T::W;
                let v = values.get(at..at + T::W).ok_or_else(|| {
                    TethysError::Internal(format!("row {i} of a page of {n} rows"))
                })?;
                let mut b = [0u8; 16];
                b[..T::W].copy_from_slice(v);
                // Truncating to the value's width restores it, sign included.
                out.push(T::from_i128(i128::from_le_bytes(b)));
            }
        }
        Encoding::For => {
            let reference = r.i128()?;
            let bits = r.u8()?;
            let packed = r.take(super::bitpack::packed_len(n, bits))?;
            let base = T::from_i128(reference);
            unpack_at(packed, bits, n, positions, &mut out, |d| {
                base.add_wrap(T::from_u64(d))
            })?;
        }
        _ => return Ok(None),
    }
    Ok(Some(Buffer::from_vec(out)))
}

/// The two's complement sum (wrapping at 128 bits) of the valid values of a
/// body of `n` integers of `T` encoded as `enc`, computed from the encoded
/// form without building the values: FOR is `valid * reference` plus the
/// sum of the packed deltas (null slots hold delta 0), RLE and DELTA add
/// each run's value times its length, PLAIN adds the valid values. `valid`
/// is the page's validity, if it has nulls. `None` where the page must be
/// decoded (BIT_SHUFFLE; RLE and DELTA pages with nulls, whose null slots
/// belong to runs).
pub fn sum<T: Int>(
    enc: Encoding,
    r: &mut Reader<'_>,
    n: usize,
    valid: Option<&NullBuffer>,
) -> Result<Option<i128>> {
    let value = |chunk: &[u8]| {
        let mut v = [0u8; 16];
        v[..T::W].copy_from_slice(chunk);
        // Truncating to the value's width restores it, sign included.
        T::from_i128(i128::from_le_bytes(v)).to_i128()
    };
    match (enc, valid) {
        (Encoding::Plain, _) => {
            let values = r.take(n * T::W)?;
            let mut total = 0i128;
            for (i, chunk) in values.chunks_exact(T::W).enumerate() {
                if valid.is_none_or(|nb| nb.is_valid(i)) {
                    total = total.wrapping_add(value(chunk));
                }
            }
            Ok(Some(total))
        }
        (Encoding::For, _) => {
            let reference = T::from_i128(r.i128()?).to_i128();
            let bits = r.u8()?;
            let packed = r.take(super::bitpack::packed_len(n, bits))?;
            let deltas = super::bitpack::sum(packed, bits, n)?;
            let count = (n - valid.map_or(0, |nb| nb.null_count())) as i128;
            Ok(Some(
                count.wrapping_mul(reference).wrapping_add(deltas as i128),
            ))
        }
        (Encoding::Rle, None) => {
            let (values, lengths) = read_runs(r, n, T::W)?;
            let total = values
                .chunks_exact(T::W)
                .zip(lengths)
                .fold(0i128, |acc, (chunk, len)| {
                    acc.wrapping_add(value(chunk).wrapping_mul(i128::from(len)))
                });
            Ok(Some(total))
        }
        (Encoding::Delta, None) => {
            let mut total = 0i128;
            read_delta_runs(r, n)?.for_each_run(|v: T, len| {
                total = total.wrapping_add(v.to_i128().wrapping_mul(i128::from(len)));
            })?;
            Ok(Some(total))
        }
        _ => Ok(None),
    }
}

/// Appends an RLE body: the run count, the values, the packed lengths.
fn write_runs<T: Int>(runs: &[(T, u32)], out: &mut Vec<u8>) {
    out.extend_from_slice(&(runs.len() as u32).to_le_bytes());
    for (v, _) in runs {
        v.write_le(out);
    }
    let max_len = runs.iter().map(|r| r.1).max().unwrap_or(0);
    let bits = bits_for(u64::from(max_len));
    out.push(bits);
    pack(out, runs.iter().map(|r| u64::from(r.1)), bits);
}

/// Decodes `n` values of `T` encoded as `enc`, as a little-endian buffer.
pub fn decode<T: Int>(enc: Encoding, r: &mut Reader<'_>, n: usize) -> Result<Buffer> {
    match enc {
        Encoding::Plain => Ok(Buffer::from(r.take(n * T::W)?)),
        Encoding::BitShuffle => {
            let planes = r.take(super::bitshuffle::shuffled_len(n, T::W))?;
            // Copied into an aligned buffer: a `Vec<u8>` is only byte-aligned
            // (an empty one not even allocated).
            Ok(Buffer::from(unshuffle(planes, T::W, n)?.as_slice()))
        }
        Encoding::For => {
            let reference = r.i128()?;
            let bits = r.u8()?;
            let packed = r.take(super::bitpack::packed_len(n, bits))?;
            // Truncation commutes with addition, so the deltas are added
            // at the value's width; `unpack_into` yields exactly `n` values in
            // order, so the vector is filled without zeroing it first.
            let base = T::from_i128(reference);
            let mut out: Vec<T> = Vec::with_capacity(n);
            unpack_into(packed, bits, n, &mut out, |d| base.add_wrap(T::from_u64(d)))?;
            Ok(Buffer::from_vec(out))
        }
        Encoding::Rle => {
            let (values, lengths) = read_runs(r, n, T::W)?;
            let mut out = RunFill::new(n);
            for (chunk, len) in values.chunks_exact(T::W).zip(lengths) {
                let mut v = [0u8; 16];
                v[..T::W].copy_from_slice(chunk);
                // Truncating to the value's width restores it, sign included.
                out.push(T::from_i128(i128::from_le_bytes(v)), len as usize);
            }
            Ok(Buffer::from_vec(out.finish()))
        }
        Encoding::Delta => {
            let mut out = RunFill::new(n);
            read_delta_runs(r, n)?.for_each_run(|v: T, len| out.push(v, len as usize))?;
            Ok(Buffer::from_vec(out.finish()))
        }
        Encoding::Dict => Err(TethysError::Corruption(
            "dictionary encoding on a fixed-width column".into(),
        )),
    }
}

/// Runs no longer than this are written as one fixed-size store.
const SHORT_RUN: usize = 8;

/// Expands runs into exactly `n` values. Sorted keys (`l_orderkey`) come as
/// runs of 1 to 7 rows; a loop per run mispredicts its exit on almost every
/// run, so a short run is written as [`SHORT_RUN`] copies at once (the next
/// run overwrites the surplus) into a vector with that much slack.
struct RunFill<T> {
    out: Vec<T>,
    pos: usize,
}

impl<T: Int> RunFill<T> {
    fn new(n: usize) -> Self {
        RunFill {
            out: vec![T::default(); n + SHORT_RUN],
            pos: 0,
        }
    }

    /// Appends `len` copies of `v`. The caller has checked that the runs
    /// add up to `n`; a run past the end is dropped rather than written.
    #[inline]
    fn push(&mut self, v: T, len: usize) {
        let end = self.pos.saturating_add(len);
        if len <= SHORT_RUN {
            if let Some(dst) = self.out.get_mut(self.pos..self.pos + SHORT_RUN) {
                dst.copy_from_slice(&[v; SHORT_RUN]);
            }
        } else if let Some(dst) = self.out.get_mut(self.pos..end) {
            dst.fill(v);
        }
        self.pos = end;
    }

    fn finish(mut self) -> Vec<T> {
        let n = self.out.len() - SHORT_RUN;
        self.out.truncate(n);
        self.out
    }
}

/// A DELTA body read up to its run values: the first run's value, the
/// smallest step, the packed steps above it and their width, and each
/// run's length.
struct DeltaRuns<'a> {
    first: i128,
    min_step: i128,
    steps: &'a [u8],
    step_bits: u8,
    lengths: Vec<u32>,
}

impl DeltaRuns<'_> {
    /// Calls `f` with each run's value (the first, then each plus
    /// `min_step` plus its packed step, wrapping at `T`'s width) and length.
    fn for_each_run<T: Int>(&self, mut f: impl FnMut(T, u32)) -> Result<()> {
        let (mut acc, step) = (T::from_i128(self.first), T::from_i128(self.min_step));
        if let Some(&len) = self.lengths.first() {
            f(acc, len);
        }
        unpack(
            self.steps,
            self.step_bits,
            self.lengths.len().saturating_sub(1),
            |i, s| {
                acc = acc.add_wrap(step).add_wrap(T::from_u64(s));
                f(acc, self.lengths[i + 1]);
            },
        )
    }
}

/// Reads a DELTA body's header and run lengths, checking that the runs
/// cover exactly `n` rows.
fn read_delta_runs<'a>(r: &mut Reader<'a>, n: usize) -> Result<DeltaRuns<'a>> {
    let count = r.u32()? as usize;
    if count > n || (count == 0 && n > 0) {
        return Err(TethysError::Corruption(format!(
            "{count} runs in a page of {n} rows"
        )));
    }
    let first = r.i128()?;
    let min_step = r.i128()?;
    let step_bits = r.u8()?;
    let steps = r.take(super::bitpack::packed_len(
        count.saturating_sub(1),
        step_bits,
    ))?;
    let len_bits = r.u8()?;
    if len_bits > 32 {
        return Err(TethysError::Corruption(format!(
            "{len_bits}-bit run lengths"
        )));
    }
    let lens = r.take(super::bitpack::packed_len(count, len_bits))?;
    let mut lengths: Vec<u32> = Vec::with_capacity(count);
    let mut total = 0u64;
    unpack_into(lens, len_bits, count, &mut lengths, |l| {
        total += l + 1;
        l as u32 + 1
    })?;
    if total != n as u64 {
        return Err(TethysError::Corruption(format!(
            "runs cover {total} rows of a page of {n}"
        )));
    }
    Ok(DeltaRuns {
        first,
        min_step,
        steps,
        step_bits,
        lengths,
    })
}

/// Reads an RLE body's run values (`w` bytes each) and run lengths, checking
/// that the runs cover exactly `n` rows.
fn read_runs<'a>(r: &mut Reader<'a>, n: usize, w: usize) -> Result<(&'a [u8], Vec<u32>)> {
    let count = r.u32()? as usize;
    if count > n {
        return Err(TethysError::Corruption(format!(
            "{count} runs in a page of {n} rows"
        )));
    }
    let values = r.take(count * w)?;
    let bits = r.u8()?;
    if bits > 32 {
        return Err(TethysError::Corruption(format!("{bits}-bit run lengths")));
    }
    let packed = r.take(super::bitpack::packed_len(count, bits))?;
    let mut lengths = Vec::with_capacity(count);
    let mut total = 0u64;
    unpack_into(packed, bits, count, &mut lengths, |l| {
        total += l;
        l as u32
    })?;
    if total != n as u64 {
        return Err(TethysError::Corruption(format!(
            "runs cover {total} rows of a page of {n}"
        )));
    }
    Ok((values, lengths))
}

/// Encodes booleans (PLAIN bitmap or RLE); returns the encoding used.
pub fn encode_bools(
    vals: &BooleanBuffer,
    nulls: Option<&NullBuffer>,
    prefer: Option<Encoding>,
    out: &mut Vec<u8>,
) -> Encoding {
    let as_ints: Vec<i8> = vals.iter().map(i8::from).collect();
    let runs = match prefer {
        Some(Encoding::Rle) | None => Some(runs(&as_ints, nulls)),
        Some(_) => None,
    };
    // Runs cost about 3 bytes each against a bit a row for the bitmap.
    let rle =
        runs.filter(|r| prefer == Some(Encoding::Rle) || r.len() * 3 * 2 <= vals.len().div_ceil(8));
    match rle {
        Some(r) => {
            write_runs(&r, out);
            Encoding::Rle
        }
        None => {
            out.extend_from_slice(vals.sliced().as_slice());
            Encoding::Plain
        }
    }
}

/// Decodes `n` booleans as a bitmap.
pub fn decode_bools(enc: Encoding, r: &mut Reader<'_>, n: usize) -> Result<Buffer> {
    match enc {
        Encoding::Plain => Ok(Buffer::from(r.take(n.div_ceil(8))?)),
        Encoding::Rle => {
            let (values, lengths) = read_runs(r, n, 1)?;
            let mut b = arrow::array::BooleanBufferBuilder::new(n);
            for (v, len) in values.iter().zip(lengths) {
                b.append_n(len as usize, *v != 0);
            }
            Ok(b.finish().into_inner())
        }
        other => Err(TethysError::Corruption(format!(
            "{} encoding on a boolean column",
            other.name()
        ))),
    }
}

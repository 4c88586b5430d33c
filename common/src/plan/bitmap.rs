//! `BitmapFilterExpr`: exact membership of an integer key in a set, as one
//! bit per value of the set's range. When a join's build keys are integers
//! in a range of up to [`MAX_BITMAP_RANGE`] values (surrogate keys, dates as
//! yyyymmdd), this is both smaller on the wire than an IN list and the
//! cheapest test per probe row: a subtraction, a compare and a bit load,
//! with no false positives (Doris' `bitmap` runtime filter plays this role).

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::buffer::BooleanBuffer;
use arrow::datatypes::*;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_expr::PhysicalExpr;

/// Widest range of values a bitmap covers (8 MiB of bits): enough for the
/// order keys of TPC-H SF10, whose probe side (lineitem, sorted by them)
/// then tests its keys against neighbouring bits.
pub const MAX_BITMAP_RANGE: u64 = 1 << 26;

/// Whether `key IN set` for an integer key, with the set as a bitmap.
#[derive(Debug, Clone)]
pub struct BitmapFilterExpr {
    expr: Arc<dyn PhysicalExpr>,
    /// Value of bit 0.
    min: i64,
    /// Bit `v - min` is set when `v` is in the set.
    bits: Arc<Vec<u64>>,
    /// Values in the set (for display).
    keys: u64,
}

/// `$body` with `$v` the values of integer array `$a` (`$p` the typed
/// array) for the types a bitmap takes, integers of at most 32 bits, 64-bit
/// signed ones and dates; `None` for another type.
macro_rules! with_ints {
    ($a:expr, |$p:ident, $v:ident| $body:expr) => {{
        macro_rules! typed {
            ($t:ty) => {{
                let $p = $a.as_primitive::<$t>();
                let $v = $p.values();
                $body
            }};
        }
        Some(match $a.data_type() {
            DataType::Int8 => typed!(Int8Type),
            DataType::Int16 => typed!(Int16Type),
            DataType::Int32 => typed!(Int32Type),
            DataType::Int64 => typed!(Int64Type),
            DataType::UInt8 => typed!(UInt8Type),
            DataType::UInt16 => typed!(UInt16Type),
            DataType::UInt32 => typed!(UInt32Type),
            DataType::Date32 => typed!(Date32Type),
            _ => return None,
        })
    }};
}

/// Calls `f(value)` for every non-null value of an integer array; `None`
/// for a type a bitmap does not take. The null buffer is read once, not
/// asked row by row through the array (which was most of building a
/// 100,000-key bitmap: SSB q4.2's part keys).
fn valid_ints(a: &ArrayRef, mut f: impl FnMut(i64)) -> Option<()> {
    with_ints!(a, |p, v| match p.nulls().filter(|n| n.null_count() > 0) {
        None => v.iter().for_each(|x| f(*x as i64)),
        Some(n) => n.valid_indices().for_each(|i| f(v[i] as i64)),
    })
}

/// Words of a bitmap from `min` to `max`; `None` past [`MAX_BITMAP_RANGE`].
fn bitmap_words(min: i64, max: i64) -> Option<usize> {
    let range = max as i128 - min as i128 + 1;
    (1..=MAX_BITMAP_RANGE as i128)
        .contains(&range)
        .then(|| (range as usize).div_ceil(64))
}

/// Sets the bit of `v` in a bitmap whose bit 0 is `min`.
fn set_bit(bits: &mut [u64], min: i64, v: i64) {
    let o = (v - min) as usize;
    bits[o / 64] |= 1 << (o % 64);
}

/// Bytes of the wire form of a bitmap of `words` words.
fn wire_len(words: usize) -> usize {
    16 + words * 8
}

/// Integer keys collected exactly as they arrive, as a roaring bitmap: how a
/// join build side too large to keep as arrays keeps its integer keys. At
/// the end it knows its exact key count and range, so the runtime filter
/// can be a flat bitmap when the range is narrow enough and a bloom filter
/// sized for the true number of keys otherwise.
#[derive(Debug, Default)]
pub struct IntKeys {
    /// Keys mapped to `u64` order-preservingly (sign bit flipped).
    set: roaring::RoaringTreemap,
    /// A value of a type this cannot hold came.
    unusable: bool,
}

impl IntKeys {
    /// Whether keys of type `t` can be collected here.
    pub fn accepts(t: &DataType) -> bool {
        use DataType::*;
        matches!(
            t,
            Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | Date32
        )
    }

    /// Adds every non-null value of `values`.
    pub fn insert(&mut self, values: &ArrayRef) {
        let mut batch = Vec::with_capacity(values.len());
        if valid_ints(values, |v| batch.push((v as u64) ^ (1 << 63))).is_none() {
            self.unusable = true;
            return;
        }
        // One batch's keys as a bitmap of their own, merged container by
        // container: inserting them one by one looks each one's container
        // up (a tenth of a large build side's time).
        batch.sort_unstable();
        batch.dedup();
        match roaring::RoaringTreemap::from_sorted_iter(batch) {
            Ok(keys) => self.set |= keys,
            Err(_) => self.unusable = true,
        }
    }

    /// Distinct keys collected.
    pub fn len(&self) -> u64 {
        self.set.len()
    }

    /// Whether no key was collected.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Whether a value of a type this cannot hold came: its set is not
    /// every key.
    pub fn unusable(&self) -> bool {
        self.unusable
    }

    /// The keys in ascending order.
    pub fn values(&self) -> impl Iterator<Item = i64> + '_ {
        self.set.iter().map(|u| (u ^ (1 << 63)) as i64)
    }

    /// A flat bitmap of the keys, when they span at most
    /// [`MAX_BITMAP_RANGE`] values and it takes at most `max_bytes`.
    pub fn bitmap(
        &self,
        expr: Arc<dyn PhysicalExpr>,
        max_bytes: usize,
    ) -> Option<BitmapFilterExpr> {
        if self.unusable {
            return None;
        }
        let min = (self.set.min()? ^ (1 << 63)) as i64;
        let max = (self.set.max()? ^ (1 << 63)) as i64;
        let words = bitmap_words(min, max).filter(|w| wire_len(*w) <= max_bytes)?;
        let mut bits = vec![0u64; words];
        self.values().for_each(|v| set_bit(&mut bits, min, v));
        Some(BitmapFilterExpr {
            expr,
            min,
            bits: Arc::new(bits),
            keys: self.len(),
        })
    }
}

impl BitmapFilterExpr {
    /// A bitmap of the non-null `values`; `None` when they are not integers
    /// or span more than [`MAX_BITMAP_RANGE`] values.
    pub fn build(expr: Arc<dyn PhysicalExpr>, values: &ArrayRef) -> Option<Self> {
        let (mut min, mut max, mut keys) = (i64::MAX, i64::MIN, 0u64);
        valid_ints(values, |v| {
            (min, max, keys) = (min.min(v), max.max(v), keys + 1)
        })?;
        if keys == 0 {
            return None;
        }
        let mut bits = vec![0u64; bitmap_words(min, max)?];
        valid_ints(values, |v| set_bit(&mut bits, min, v))?;
        Some(BitmapFilterExpr {
            expr,
            min,
            bits: Arc::new(bits),
            keys,
        })
    }

    /// Bytes of the wire form ([`Self::to_bytes`]), without building it.
    pub fn wire_len(&self) -> usize {
        wire_len(self.bits.len())
    }

    /// Wire form: min, key count, then the bitmap words (little endian).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.wire_len());
        out.extend(self.min.to_le_bytes());
        out.extend(self.keys.to_le_bytes());
        for w in self.bits.iter() {
            out.extend(w.to_le_bytes());
        }
        out
    }

    /// Reverses [`Self::to_bytes`].
    pub fn from_bytes(expr: Arc<dyn PhysicalExpr>, bytes: &[u8]) -> Result<Self> {
        let bad = || DataFusionError::Internal("malformed bitmap filter".into());
        let (min, rest) = bytes.split_first_chunk::<8>().ok_or_else(bad)?;
        let (keys, words) = rest.split_first_chunk::<8>().ok_or_else(bad)?;
        if words.len() % 8 != 0 || (words.len() / 8) as u64 > MAX_BITMAP_RANGE / 64 + 1 {
            return Err(bad());
        }
        let bits = words
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]))
            .collect();
        Ok(BitmapFilterExpr {
            expr,
            min: i64::from_le_bytes(*min),
            bits: Arc::new(bits),
            keys: u64::from_le_bytes(*keys),
        })
    }
}

/// Whether each of `values` is in a bitmap whose bit 0 is `min`, 64 values
/// to a word. Values of at most 32 bits against a `min` within 2^62 of 0
/// cannot overflow their offset: one unsigned compare (a negative offset is
/// a huge one) picks the word; other values take [`in_bitmap`]'s checks.
fn test_values<T: Copy + Into<i64>>(values: &[T], bits: &[u64], min: i64) -> BooleanBuffer {
    let narrow = size_of::<T>() <= 4 && min.unsigned_abs() < 1 << 62;
    let mut words = arrow::buffer::MutableBuffer::new(values.len().div_ceil(64) * 8);
    for chunk in values.chunks(64) {
        let mut word = 0u64;
        if narrow {
            for (j, v) in chunk.iter().enumerate() {
                let o = Into::<i64>::into(*v).wrapping_sub(min) as u64;
                let hit = bits
                    .get((o >> 6) as usize)
                    .map_or(0, |w| (w >> (o & 63)) & 1);
                word |= hit << j;
            }
        } else {
            for (j, v) in chunk.iter().enumerate() {
                word |= (in_bitmap(bits, min, (*v).into()) as u64) << j;
            }
        }
        words.push(word);
    }
    BooleanBuffer::new(words.into(), 0, values.len())
}

/// Whether `v` is in a bitmap whose bit 0 is `min`: its offset from `min`
/// (none when the subtraction overflows or is negative) picks a word, a
/// word past the end holds no bit.
#[inline(always)]
fn in_bitmap(bits: &[u64], min: i64, v: i64) -> bool {
    match v.checked_sub(min) {
        Some(o) if o >= 0 => bits
            .get((o as u64 >> 6) as usize)
            .is_some_and(|w| (w >> (o as u64 & 63)) & 1 != 0),
        _ => false,
    }
}

impl fmt::Display for BitmapFilterExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bitmap_filter({}, {} keys)", self.expr, self.keys)
    }
}

impl PartialEq for BitmapFilterExpr {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.bits, &other.bits) && self.min == other.min && self.expr.eq(&other.expr)
    }
}

impl Eq for BitmapFilterExpr {}

impl Hash for BitmapFilterExpr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.bits).hash(state);
        self.min.hash(state);
        self.expr.hash(state);
    }
}

impl PhysicalExpr for BitmapFilterExpr {
    crate::boolean_test_of_operand!("bitmap filter");
}

impl BitmapFilterExpr {
    /// Whether each key is in the set.
    fn test(&self, keys: &ArrayRef) -> Result<BooleanBuffer> {
        let (bits, min) = (self.bits.as_slice(), self.min);
        let test = || with_ints!(keys, |_p, v| test_values(v, bits, min));
        test().ok_or_else(|| {
            DataFusionError::Internal(format!("bitmap filter over a {} key", keys.data_type()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, Int64Array, RecordBatch};
    use datafusion::physical_expr::expressions::col;

    #[test]
    fn exact_membership_across_the_wire() {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int32, true)]));
        let key = col("k", &schema).unwrap();
        let build: ArrayRef = Arc::new(Int32Array::from(vec![Some(-5), Some(0), None, Some(130)]));
        let f = BitmapFilterExpr::build(key.clone(), &build).unwrap();
        let f = BitmapFilterExpr::from_bytes(key, &f.to_bytes()).unwrap();
        let probe = Int32Array::from(vec![
            Some(-6),
            Some(-5),
            Some(0),
            Some(1),
            Some(130),
            Some(131),
            None,
            Some(i32::MIN),
            Some(i32::MAX),
        ]);
        let batch = RecordBatch::try_new(schema, vec![Arc::new(probe)]).unwrap();
        let out = f.evaluate(&batch).unwrap().into_array(9).unwrap();
        let out = out.as_boolean();
        let got: Vec<Option<bool>> = out.iter().collect();
        assert_eq!(
            got,
            vec![
                Some(false),
                Some(true),
                Some(true),
                Some(false),
                Some(true),
                Some(false),
                None,
                Some(false),
                Some(false)
            ]
        );
    }

    /// Whether each of `probe` passes a bitmap of `build` (one type).
    fn passes(build: ArrayRef, probe: ArrayRef) -> Vec<bool> {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "k",
            probe.data_type().clone(),
            false,
        )]));
        let key = col("k", &schema).unwrap();
        let f = BitmapFilterExpr::build(key, &build).unwrap();
        let n = probe.len();
        let batch = RecordBatch::try_new(schema, vec![probe]).unwrap();
        let out = f.evaluate(&batch).unwrap().into_array(n).unwrap();
        out.as_boolean().values().iter().collect()
    }

    /// Keys whose distance from the bitmap's first value overflows an i64
    /// are not in it (no wrapped offset lands on a set bit).
    #[test]
    fn keys_at_the_ends_of_the_range() {
        for build in [vec![i64::MAX - 2, i64::MAX], vec![i64::MIN, i64::MIN + 1]] {
            let probe: Vec<i64> = (0..130)
                .map(|i| i64::MIN.wrapping_add(i))
                .chain((0..130).map(|i| i64::MAX.wrapping_sub(i)))
                .chain([0, -1, 1])
                .collect();
            let got = passes(
                Arc::new(Int64Array::from(build.clone())),
                Arc::new(Int64Array::from(probe.clone())),
            );
            let want: Vec<bool> = probe.iter().map(|v| build.contains(v)).collect();
            assert_eq!(got, want, "build {build:?}");
        }
    }

    /// The same at the ends of a 32-bit key's range, whose offsets take
    /// the unchecked path.
    #[test]
    fn narrow_keys_at_the_ends_of_their_range() {
        for build in [vec![i32::MAX - 70, i32::MAX], vec![i32::MIN, i32::MIN + 65]] {
            let probe: Vec<i32> = (0..130)
                .map(|i| i32::MIN.wrapping_add(i))
                .chain((0..130).map(|i| i32::MAX.wrapping_sub(i)))
                .chain([0, -1, 1])
                .collect();
            let got = passes(
                Arc::new(Int32Array::from(build.clone())),
                Arc::new(Int32Array::from(probe.clone())),
            );
            let want: Vec<bool> = probe.iter().map(|v| build.contains(v)).collect();
            assert_eq!(got, want, "build {build:?}");
        }
    }

    #[test]
    fn wide_ranges_and_bad_bytes_are_refused() {
        let schema = Schema::new(vec![Field::new("k", DataType::Int64, false)]);
        let key = col("k", &schema).unwrap();
        let wide: ArrayRef = Arc::new(Int64Array::from(vec![0, 1 << 40]));
        assert!(BitmapFilterExpr::build(key.clone(), &wide).is_none());
        assert!(BitmapFilterExpr::from_bytes(key.clone(), &[0; 7]).is_err());
        assert!(BitmapFilterExpr::from_bytes(key, &[0; 16 + 5]).is_err());
    }
}

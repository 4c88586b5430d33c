//! `BloomFilterExpr`: "the key is probably one of these values", a split-block
//! bloom filter (parquet's `Sbbf`) over a join's build-side keys. It is the
//! `bloom` half of Doris' `in_or_bloom` runtime filter: when a join's build
//! side has too many distinct keys for an IN list, the FE ships this compact
//! filter to the probe side's scans instead. False positives only let extra
//! rows through to the join, which drops them; a key that is present always
//! passes.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::buffer::BooleanBuffer;
use arrow::datatypes::{DataType, *};
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_expr::PhysicalExpr;
use parquet::bloom_filter::Sbbf;

/// False-positive rate the FE sizes filters for.
pub const BLOOM_FPP: f64 = 0.02;

/// A bloom filter membership test of one key expression.
#[derive(Debug, Clone)]
pub struct BloomFilterExpr {
    expr: Arc<dyn PhysicalExpr>,
    filter: Arc<Sbbf>,
    /// Distinct keys inserted (for display and sizing).
    keys: u64,
}

impl BloomFilterExpr {
    /// A filter holding every non-null value of `values`; `None` when the
    /// type has no stable byte form here (floats, nested types).
    pub fn build(expr: Arc<dyn PhysicalExpr>, values: &ArrayRef) -> Option<Self> {
        let mut filter = Sbbf::new_with_ndv_fpp(values.len().max(1) as u64, BLOOM_FPP).ok()?;
        // The null buffer read directly, not through the array per row.
        let nulls = values.nulls();
        map_keys(values, |i, k| {
            if nulls.is_none_or(|n| n.is_valid(i)) {
                filter.insert(k);
            }
            true
        })?;
        Some(BloomFilterExpr {
            expr,
            filter: Arc::new(filter),
            keys: values.len() as u64,
        })
    }

    /// Rebuilds a filter from its wire form ([`Self::to_bytes`]).
    pub fn from_bytes(expr: Arc<dyn PhysicalExpr>, bytes: &[u8]) -> Result<Self> {
        let (keys, bitset) = bytes
            .split_first_chunk::<8>()
            .ok_or_else(|| DataFusionError::Internal("truncated bloom filter".into()))?;
        if bitset.is_empty() || bitset.len() % 32 != 0 {
            return Err(DataFusionError::Internal(format!(
                "bloom filter bitset of {} bytes is not a whole number of blocks",
                bitset.len()
            )));
        }
        Ok(BloomFilterExpr {
            expr,
            filter: Arc::new(Sbbf::new(bitset)),
            keys: u64::from_le_bytes(*keys),
        })
    }

    /// Wire form: key count, then the bitset.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = self.keys.to_le_bytes().to_vec();
        self.filter
            .write_bitset(&mut out)
            .map_err(|e| DataFusionError::Internal(format!("bloom filter: {e}")))?;
        Ok(out)
    }

    /// The key expression.
    pub fn expr(&self) -> &Arc<dyn PhysicalExpr> {
        &self.expr
    }
}

/// Bytes a runtime bloom filter may take while a large build side fills it
/// (Doris' `runtime_bloom_filter_max_size`); folded down once it is full.
pub const BLOOM_MAX_BYTES: usize = 16 << 20;

/// Estimated false-positive rate above which a bloom filter is not worth
/// shipping: most probe rows would pass it anyway.
const BLOOM_USELESS_FPP: f64 = 0.5;

/// A bloom filter filled batch by batch, for join build sides too large to
/// keep their keys until the end: it starts at [`BLOOM_MAX_BYTES`] (memory
/// stays bounded whatever the build side's size) and, once the build side
/// is complete, is folded to the smallest size that keeps [`BLOOM_FPP`],
/// so that what travels to the backends fits the keys it holds.
#[derive(Debug)]
pub struct BloomKeys {
    filling: Option<Sbbf>,
    ready: Option<Arc<Sbbf>>,
    /// Non-null values inserted (duplicates counted: an upper bound on the
    /// distinct keys).
    keys: u64,
    /// A value of a type without a byte form came: no filter.
    unusable: bool,
}

impl Default for BloomKeys {
    /// A filter of [`BLOOM_MAX_BYTES`], for an unknown number of keys.
    fn default() -> Self {
        BloomKeys::of(Sbbf::new_with_num_of_bytes(BLOOM_MAX_BYTES))
    }
}

impl BloomKeys {
    /// A filter sized for `ndv` distinct keys at [`BLOOM_FPP`], for when
    /// the number of keys is known.
    pub fn with_ndv(ndv: u64) -> Self {
        match Sbbf::new_with_ndv_fpp(ndv.max(1), BLOOM_FPP) {
            Ok(f) => BloomKeys::of(f),
            // Only an fpp outside 0..1 is refused.
            Err(_) => BloomKeys::default(),
        }
    }

    fn of(filter: Sbbf) -> Self {
        BloomKeys {
            filling: Some(filter),
            ready: None,
            keys: 0,
            unusable: false,
        }
    }

    /// Adds integer keys: they hash as integer columns of any width do.
    pub fn insert_ints(&mut self, values: impl Iterator<Item = i64>) {
        let Some(filter) = self.filling.as_mut() else {
            self.unusable = true;
            return;
        };
        for v in values {
            filter.insert(&v.to_le_bytes()[..]);
            self.keys += 1;
        }
    }

    /// Adds every non-null value of `values`.
    pub fn insert(&mut self, values: &ArrayRef) {
        let Some(filter) = self.filling.as_mut() else {
            // Already folded: a late insert would be lost, so give up.
            self.unusable = true;
            return;
        };
        let mut keys = 0;
        let nulls = values.nulls();
        let hashed = map_keys(values, |i, k| {
            if nulls.is_none_or(|n| n.is_valid(i)) {
                filter.insert(k);
                keys += 1;
            }
            true
        });
        self.keys += keys;
        self.unusable |= hashed.is_none();
    }

    /// The membership test of `expr` in the keys inserted so far, which must
    /// be all of them: the first call folds the filter and later inserts
    /// are refused. `None` when the type cannot be hashed or the filter is
    /// so full that it would let most rows through.
    pub fn expr(&mut self, expr: Arc<dyn PhysicalExpr>) -> Option<BloomFilterExpr> {
        if let Some(mut f) = self.filling.take() {
            f.fold_to_target_fpp(BLOOM_FPP);
            self.ready = Some(Arc::new(f));
        }
        let filter = self.ready.clone()?;
        if self.unusable || self.keys == 0 {
            return None;
        }
        // (1 - e^(-k n / m))^k with k = 8 bits set per key in m bits.
        let bits = (filter.num_blocks() * 256) as f64;
        let fpp = (1.0 - (-8.0 * self.keys as f64 / bits).exp()).powi(8);
        if fpp > BLOOM_USELESS_FPP {
            return None;
        }
        Some(BloomFilterExpr {
            expr,
            filter,
            keys: self.keys,
        })
    }
}

/// Calls `f(row, key bytes)` for every row of `a` and collects its answers;
/// `None` for a type without a byte form here. Integers are widened to 8
/// little-endian bytes so that the same number hashes the same whichever
/// integer width carries it. Null rows are visited too (with whatever their
/// slot holds): callers look at validity themselves. Storage's page bloom
/// filters hash values the same way, so a join's keys probe them as is.
pub fn map_keys(a: &ArrayRef, mut f: impl FnMut(usize, &[u8]) -> bool) -> Option<BooleanBuffer> {
    let n = a.len();
    macro_rules! ints {
        ($t:ty, $w:ty) => {{
            let v = a.as_primitive::<$t>().values();
            BooleanBuffer::collect_bool(n, |i| f(i, &(v[i] as $w).to_le_bytes()[..]))
        }};
    }
    Some(match a.data_type() {
        DataType::Int8 => ints!(Int8Type, i64),
        DataType::Int16 => ints!(Int16Type, i64),
        DataType::Int32 => ints!(Int32Type, i64),
        DataType::Int64 => ints!(Int64Type, i64),
        DataType::UInt8 => ints!(UInt8Type, i64),
        DataType::UInt16 => ints!(UInt16Type, i64),
        DataType::UInt32 => ints!(UInt32Type, i64),
        DataType::UInt64 => ints!(UInt64Type, u64),
        DataType::Date32 => ints!(Date32Type, i64),
        DataType::Date64 => ints!(Date64Type, i64),
        DataType::Timestamp(TimeUnit::Second, _) => ints!(TimestampSecondType, i64),
        DataType::Timestamp(TimeUnit::Millisecond, _) => ints!(TimestampMillisecondType, i64),
        DataType::Timestamp(TimeUnit::Microsecond, _) => ints!(TimestampMicrosecondType, i64),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => ints!(TimestampNanosecondType, i64),
        DataType::Decimal128(_, _) => ints!(Decimal128Type, i128),
        DataType::Utf8 => {
            let s = a.as_string::<i32>();
            BooleanBuffer::collect_bool(n, |i| f(i, s.value(i).as_bytes()))
        }
        DataType::LargeUtf8 => {
            let s = a.as_string::<i64>();
            BooleanBuffer::collect_bool(n, |i| f(i, s.value(i).as_bytes()))
        }
        DataType::Utf8View => {
            let s = a.as_string_view();
            BooleanBuffer::collect_bool(n, |i| f(i, s.value(i).as_bytes()))
        }
        _ => return None,
    })
}

impl fmt::Display for BloomFilterExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bloom_filter({}, {} keys)", self.expr, self.keys)
    }
}

impl PartialEq for BloomFilterExpr {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.filter, &other.filter) && self.expr.eq(&other.expr)
    }
}

impl Eq for BloomFilterExpr {}

impl Hash for BloomFilterExpr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.filter).hash(state);
        self.expr.hash(state);
    }
}

impl PhysicalExpr for BloomFilterExpr {
    crate::boolean_test_of_operand!("bloom filter");
}

impl BloomFilterExpr {
    /// Whether each key may be in the set.
    fn test(&self, keys: &ArrayRef) -> Result<BooleanBuffer> {
        // A type the filter cannot hash: every row passes.
        Ok(map_keys(keys, |_, k| self.filter.check(k))
            .unwrap_or_else(|| BooleanBuffer::new_set(keys.len())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, Int64Array, RecordBatch, StringArray};
    use datafusion::physical_expr::expressions::col;

    #[test]
    fn keys_pass_and_most_others_do_not_across_the_wire() {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
        let key = col("k", &schema).unwrap();
        // Built from Int32 values, probed with Int64: the widened byte form matches.
        let build: ArrayRef = Arc::new(Int32Array::from_iter_values((0..5000).map(|i| i * 7)));
        let bf = BloomFilterExpr::build(key.clone(), &build).unwrap();
        let bf = BloomFilterExpr::from_bytes(key, &bf.to_bytes().unwrap()).unwrap();
        let probe = Int64Array::from_iter((0..35_000i64).map(Some).chain([None]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(probe)]).unwrap();
        let out = bf
            .evaluate(&batch)
            .unwrap()
            .into_array(batch.num_rows())
            .unwrap();
        let out = out.as_boolean();
        let mut false_pos = 0;
        for i in 0..35_000 {
            if i % 7 == 0 {
                assert!(out.value(i), "key {i} must pass");
            } else if out.value(i) {
                false_pos += 1;
            }
        }
        assert!(out.is_null(35_000), "a null key matches nothing");
        assert!(false_pos < 30_000 / 20, "{false_pos} false positives");
    }

    #[test]
    fn a_filled_filter_folds_to_its_keys_and_keeps_every_one() {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
        let key = col("k", &schema).unwrap();
        let mut keys = BloomKeys::default();
        for chunk in 0..10 {
            let build: ArrayRef = Arc::new(Int64Array::from_iter(
                (0..10_000i64)
                    .map(|i| Some((chunk * 10_000 + i) * 13))
                    .chain([None]),
            ));
            keys.insert(&build);
        }
        let bf = keys.expr(key.clone()).unwrap();
        assert_eq!(bf.keys, 100_000);
        let wire = bf.to_bytes().unwrap().len();
        assert!(wire < BLOOM_MAX_BYTES / 16, "folded to {wire} bytes");
        let probe = Int64Array::from_iter_values(0..1_300_000i64);
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(probe)]).unwrap();
        let out = bf.evaluate(&batch).unwrap().into_array(1_300_000).unwrap();
        let out = out.as_boolean();
        let mut false_pos = 0;
        for i in 0..1_300_000 {
            if i % 13 == 0 {
                assert!(out.value(i), "key {i} must pass");
            } else if out.value(i) {
                false_pos += 1;
            }
        }
        assert!(false_pos < 1_200_000 / 20, "{false_pos} false positives");
        // Inserts after the filter was handed out cannot be honoured.
        keys.insert(&(Arc::new(Int64Array::from(vec![1])) as ArrayRef));
        assert!(keys.expr(key.clone()).is_none());
        // Too many keys for the largest filter: useless, so none.
        let mut full = BloomKeys {
            keys: 200_000_000,
            ..Default::default()
        };
        assert!(full.expr(key.clone()).is_none());
        // Floats have no byte form here.
        let mut floats = BloomKeys::default();
        floats.insert(&(Arc::new(arrow::array::Float64Array::from(vec![1.5])) as ArrayRef));
        assert!(floats.expr(key).is_none());
    }

    #[test]
    fn strings_and_bad_bytes() {
        let schema = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, false)]));
        let key = col("s", &schema).unwrap();
        let build: ArrayRef = Arc::new(StringArray::from(vec!["a", "bb"]));
        let bf = BloomFilterExpr::build(key.clone(), &build).unwrap();
        let batch = RecordBatch::try_new(
            schema,
            vec![Arc::new(StringArray::from(vec![
                "bb",
                "a",
                "zzz-not-there",
            ]))],
        )
        .unwrap();
        let out = bf.evaluate(&batch).unwrap().into_array(3).unwrap();
        assert!(out.as_boolean().value(0) && out.as_boolean().value(1));
        assert!(BloomFilterExpr::from_bytes(key.clone(), &[1, 2, 3]).is_err());
        assert!(BloomFilterExpr::from_bytes(key, &[0u8; 8 + 33]).is_err());
    }
}

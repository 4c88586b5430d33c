//! HLL values: HyperLogLog sketches for approximate distinct counts, the
//! value type of HLL columns (`HLL_UNION` in AGGREGATE tables), and the
//! Doris scalar functions over them (`hll_hash`, `hll_empty`,
//! `hll_cardinality`).
//!
//! As in Doris, a value hashes with 64-bit MurmurHash2 (seed 0xadc83b19) and
//! the sketch has 2^14 registers (about 0.8% standard error); up to 160
//! distinct hashes are kept exactly, so small counts are exact. Encoded as
//! one tag byte, then
//! - `0`: empty;
//! - `1`: explicit, `u8` count then that many u64 hashes (ascending, LE);
//! - `2`: sparse registers, `u16` count then (`u16` index, `u8` value) pairs;
//! - `3`: all 16384 registers, one byte each.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, BinaryArray, Int64Array};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use datafusion::common::exec_err;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use super::object::{self, ObjectKind};

const PRECISION: u32 = 14;
const REGISTERS: usize = 1 << PRECISION;
/// Largest register value: 64 - 14 hash bits give ranks 1..=51.
const MAX_RANK: u8 = (64 - PRECISION + 1) as u8;
/// Distinct hashes kept exactly before switching to registers.
const EXPLICIT_MAX: usize = 160;
/// Non-zero registers up to which the sparse encoding is smaller.
const SPARSE_MAX: usize = REGISTERS / 3 - 1;

const EMPTY: u8 = 0;
const EXPLICIT: u8 = 1;
const SPARSE: u8 = 2;
const FULL: u8 = 3;

/// Seed of Doris' `HashUtil::MURMUR_SEED`.
const SEED: u64 = 0xadc8_3b19;

/// 64-bit MurmurHash2 (MurmurHash64A).
pub fn murmur64(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let mut k = u64::from_le_bytes(w).wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, b) in tail.iter().enumerate() {
            h ^= u64::from(*b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// A HyperLogLog sketch.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Hll {
    #[default]
    Empty,
    /// Distinct hashes, ascending, at most [`EXPLICIT_MAX`].
    Explicit(Vec<u64>),
    Registers(Box<[u8]>),
}

impl Hll {
    /// Adds one hashed value.
    pub fn insert_hash(&mut self, hash: u64) {
        match self {
            Hll::Empty => *self = Hll::Explicit(vec![hash]),
            Hll::Explicit(v) => {
                if let Err(at) = v.binary_search(&hash) {
                    v.insert(at, hash);
                    if v.len() > EXPLICIT_MAX {
                        let mut regs = vec![0u8; REGISTERS].into_boxed_slice();
                        for &h in v.iter() {
                            set_register(&mut regs, h);
                        }
                        *self = Hll::Registers(regs);
                    }
                }
            }
            Hll::Registers(regs) => set_register(regs, hash),
        }
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Hll) {
        match other {
            Hll::Empty => {}
            Hll::Explicit(v) => v.iter().for_each(|&h| self.insert_hash(h)),
            Hll::Registers(theirs) => {
                if let Hll::Registers(mine) = self {
                    for (a, b) in mine.iter_mut().zip(theirs.iter()) {
                        *a = (*a).max(*b);
                    }
                } else {
                    let mut merged = Hll::Registers(theirs.clone());
                    if let Hll::Explicit(v) = self {
                        v.iter().for_each(|&h| merged.insert_hash(h));
                    }
                    *self = merged;
                }
            }
        }
    }

    /// Adds every value of an encoded sketch.
    pub fn merge_encoded(&mut self, bytes: &[u8]) -> std::result::Result<(), String> {
        let other = Hll::decode(bytes)?;
        self.merge(&other);
        Ok(())
    }

    /// The estimated number of distinct values (exact up to 160).
    pub fn estimate(&self) -> i64 {
        match self {
            Hll::Empty => 0,
            Hll::Explicit(v) => v.len() as i64,
            Hll::Registers(regs) => {
                let m = REGISTERS as f64;
                let alpha = 0.7213 / (1.0 + 1.079 / m);
                let mut sum = 0.0;
                let mut zeros = 0usize;
                for &r in regs.iter() {
                    sum += f64::powi(2.0, -i32::from(r));
                    zeros += usize::from(r == 0);
                }
                let raw = alpha * m * m / sum;
                let est = if raw <= 2.5 * m && zeros > 0 {
                    // Linear counting is the better estimate at small counts.
                    m * (m / zeros as f64).ln()
                } else {
                    raw
                };
                est.round() as i64
            }
        }
    }

    /// The encoded form.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Hll::Empty => vec![EMPTY],
            Hll::Explicit(v) => {
                let mut out = Vec::with_capacity(2 + 8 * v.len());
                out.push(EXPLICIT);
                out.push(v.len() as u8);
                v.iter()
                    .for_each(|h| out.extend_from_slice(&h.to_le_bytes()));
                out
            }
            Hll::Registers(regs) => {
                let set = regs.iter().filter(|&&r| r != 0).count();
                if set <= SPARSE_MAX {
                    let mut out = Vec::with_capacity(3 + 3 * set);
                    out.push(SPARSE);
                    out.extend_from_slice(&(set as u16).to_le_bytes());
                    for (i, &r) in regs.iter().enumerate().filter(|(_, r)| **r != 0) {
                        out.extend_from_slice(&(i as u16).to_le_bytes());
                        out.push(r);
                    }
                    out
                } else {
                    let mut out = Vec::with_capacity(1 + REGISTERS);
                    out.push(FULL);
                    out.extend_from_slice(regs);
                    out
                }
            }
        }
    }

    /// Decodes a sketch; a malformed one is an error, never a wrong count.
    pub fn decode(bytes: &[u8]) -> std::result::Result<Hll, String> {
        let (&tag, rest) = bytes.split_first().ok_or("empty HLL value")?;
        let bad_len = || format!("HLL value (tag {tag}) of {} bytes", bytes.len());
        match tag {
            EMPTY if rest.is_empty() => Ok(Hll::Empty),
            EXPLICIT => {
                let (&n, hashes) = rest.split_first().ok_or_else(bad_len)?;
                let n = usize::from(n);
                if hashes.len() != 8 * n || n > EXPLICIT_MAX {
                    return Err(bad_len());
                }
                let mut v = Vec::with_capacity(n);
                for c in hashes.chunks_exact(8) {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(c);
                    v.push(u64::from_le_bytes(w));
                }
                if v.windows(2).any(|w| w[0] >= w[1]) {
                    return Err("HLL hashes out of order".into());
                }
                Ok(if v.is_empty() {
                    Hll::Empty
                } else {
                    Hll::Explicit(v)
                })
            }
            SPARSE => {
                if rest.len() < 2 {
                    return Err(bad_len());
                }
                let n = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
                let pairs = &rest[2..];
                if pairs.len() != 3 * n {
                    return Err(bad_len());
                }
                let mut regs = vec![0u8; REGISTERS].into_boxed_slice();
                for p in pairs.chunks_exact(3) {
                    let i = usize::from(u16::from_le_bytes([p[0], p[1]]));
                    if i >= REGISTERS || p[2] > MAX_RANK {
                        return Err(format!("HLL register {i} = {}", p[2]));
                    }
                    regs[i] = p[2];
                }
                Ok(Hll::Registers(regs))
            }
            FULL => {
                if rest.len() != REGISTERS {
                    return Err(bad_len());
                }
                if let Some(r) = rest.iter().find(|&&r| r > MAX_RANK) {
                    return Err(format!("HLL register value {r}"));
                }
                Ok(Hll::Registers(rest.into()))
            }
            EMPTY => Err(bad_len()),
            other => Err(format!("unknown HLL tag {other}")),
        }
    }
}

/// Register of a hash: the low 14 bits choose it, the rank of the first set
/// bit of the rest is its value.
fn set_register(regs: &mut [u8], hash: u64) {
    let idx = (hash as usize) & (REGISTERS - 1);
    let rest = (hash >> PRECISION) | (1 << (64 - PRECISION));
    let rank = (rest.trailing_zeros() + 1) as u8;
    if regs[idx] < rank {
        regs[idx] = rank;
    }
}

/// The hash `hll_hash` gives a value's text.
pub fn hash_text(text: &[u8]) -> u64 {
    murmur64(text, SEED)
}

/// The scalar functions of this module.
pub(super) fn udfs() -> Vec<Arc<ScalarUDF>> {
    [
        ("hll_hash", Op::Hash),
        ("hll_empty", Op::Empty),
        ("hll_cardinality", Op::Cardinality),
    ]
    .into_iter()
    .map(|(name, op)| {
        Arc::new(ScalarUDF::from(HllFn {
            name,
            op,
            signature: Signature::user_defined(Volatility::Immutable),
        }))
    })
    .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    /// `hll_hash(v)`: the sketch of one value (of its text); empty for NULL.
    Hash,
    /// `hll_empty()`.
    Empty,
    /// `hll_cardinality(h)`: the estimate (0 for NULL).
    Cardinality,
}

/// One Doris HLL scalar function.
#[derive(Debug, PartialEq, Eq, Hash)]
struct HllFn {
    name: &'static str,
    op: Op,
    signature: Signature,
}

impl ScalarUDFImpl for HllFn {
    named_by_fields!();
    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        let name = self.name;
        match (self.op, args) {
            (Op::Hash, [_]) => Ok(vec![DataType::Utf8]),
            (Op::Empty, []) => Ok(vec![]),
            (Op::Cardinality, [t]) => Ok(vec![object::object_arg(name, ObjectKind::Hll, t)?]),
            (Op::Empty, _) => exec_err!("{name}() takes no arguments"),
            _ => exec_err!("{name}() takes one argument, given {}", args.len()),
        }
    }
    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(match self.op {
            Op::Cardinality => DataType::Int64,
            _ => DataType::Binary,
        })
    }
    fn return_field_from_args(
        &self,
        args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> Result<arrow::datatypes::FieldRef> {
        if self.op == Op::Cardinality {
            object::check_arg_fields(self.name, ObjectKind::Hll, args.arg_fields)?;
        }
        Ok(Arc::new(match self.op {
            Op::Cardinality => arrow::datatypes::Field::new(self.name, DataType::Int64, false),
            _ => ObjectKind::Hll.field(self.name, false),
        }))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        object::invoke(&args, |arrays, rows| self.run(arrays, rows))
    }
}

impl HllFn {
    /// The function over `rows` rows of argument arrays.
    fn run(&self, arrays: &[ArrayRef], rows: usize) -> Result<ArrayRef> {
        let out: ArrayRef = match self.op {
            Op::Empty => Arc::new(BinaryArray::from_iter_values(std::iter::repeat_n(
                [EMPTY],
                rows,
            ))),
            Op::Hash => {
                let a = cast(&arrays[0], &DataType::Utf8)?;
                Arc::new(BinaryArray::from_iter_values(
                    a.as_string::<i32>().iter().map(|v| {
                        let mut h = Hll::default();
                        if let Some(v) = v {
                            h.insert_hash(hash_text(v.as_bytes()));
                        }
                        h.encode()
                    }),
                ))
            }
            Op::Cardinality => {
                let sketches = object::decode_each(self.name, &arrays[0], Hll::decode)?;
                Arc::new(
                    sketches
                        .into_iter()
                        .map(|h| Some(h.map_or(0, |h| h.estimate())))
                        .collect::<Int64Array>(),
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
    fn murmur_matches_reference_vectors() {
        // MurmurHash64A reference values for seed 0.
        assert_eq!(murmur64(b"", 0), 0);
        assert_ne!(murmur64(b"a", SEED), murmur64(b"b", SEED));
        assert_eq!(murmur64(b"abc", SEED), murmur64(b"abc", SEED));
    }

    #[test]
    fn exact_when_small_close_when_large() {
        let mut h = Hll::default();
        for i in 0..150u64 {
            h.insert_hash(hash_text(i.to_string().as_bytes()));
            h.insert_hash(hash_text(i.to_string().as_bytes()));
        }
        assert_eq!(h.estimate(), 150);
        for n in [1_000u64, 20_000, 300_000] {
            let mut h = Hll::default();
            for i in 0..n {
                h.insert_hash(hash_text(i.to_string().as_bytes()));
            }
            let err = (h.estimate() - n as i64).abs() as f64 / n as f64;
            assert!(err < 0.03, "{n}: estimate {} ({err})", h.estimate());
            assert_eq!(Hll::decode(&h.encode()).unwrap(), h);
        }
    }

    #[test]
    fn merge_is_union() {
        let mut a = Hll::default();
        let mut b = Hll::default();
        for i in 0..5_000u64 {
            a.insert_hash(hash_text(&i.to_le_bytes()));
            b.insert_hash(hash_text(&(i + 2_500).to_le_bytes()));
        }
        let mut small = Hll::default();
        small.insert_hash(hash_text(b"x"));
        let mut u = a.clone();
        u.merge(&b);
        u.merge_encoded(&small.encode()).unwrap();
        let err = (u.estimate() - 7_501).abs() as f64 / 7_501.0;
        assert!(err < 0.03, "{}", u.estimate());
        // Explicit into registers and registers into explicit agree.
        let mut s2 = small.clone();
        s2.merge(&a);
        let mut a2 = a.clone();
        a2.merge(&small);
        assert_eq!(s2, a2);
    }

    #[test]
    fn corrupt_values_are_errors() {
        for bad in [
            &b""[..],
            b"\x00\x00",
            b"\x01\x02\x00",
            b"\x02\x01\x00\x00\x00\x60",
            b"\x03\x00",
            b"\x09",
        ] {
            assert!(Hll::decode(bad).is_err(), "{bad:?}");
        }
    }
}

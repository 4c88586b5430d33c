//! Page bloom filters: per page of a column with `bloom_filter_columns`,
//! a split-block bloom filter (parquet's `Sbbf`) of the page's values, stored
//! beside the page in the segment and checked by scans with `col = v` or
//! `col IN (...)` conjuncts before the page is read. Values hash as a join's
//! runtime bloom filter hashes them ([`bloom_key_bytes`]), so the same keys
//! probe both.

use arrow::array::{Array, ArrayRef};
use parquet::bloom_filter::Sbbf;
use tethys_common::plan::bloom_key_bytes;

/// False-positive rate of page bloom filters (Doris' `bloom_filter_fpp`
/// default).
pub const PAGE_BLOOM_FPP: f64 = 0.05;

/// The bloom filter of a page's non-null values, as its bitset bytes;
/// `None` for a type without a byte form here or a page of only nulls.
/// Values hash as a join's runtime bloom filter hashes them.
pub fn page_bloom(values: &ArrayRef) -> Option<Vec<u8>> {
    let valid = values.len() - values.null_count();
    if valid == 0 {
        return None;
    }
    let mut filter = Sbbf::new_with_ndv_fpp(valid as u64, PAGE_BLOOM_FPP).ok()?;
    bloom_key_bytes(values, |i, k| {
        if values.is_valid(i) {
            filter.insert(k);
        }
        true
    })?;
    let mut out = vec![];
    filter.write_bitset(&mut out).ok()?;
    Some(out)
}

/// Byte forms of the non-null values of `values`, for probing page bloom
/// filters; `None` for a type without a byte form here.
pub fn bloom_keys(values: &ArrayRef) -> Option<Vec<Vec<u8>>> {
    let mut keys = vec![];
    bloom_key_bytes(values, |i, k| {
        if values.is_valid(i) {
            keys.push(k.to_vec());
        }
        true
    })?;
    Some(keys)
}

/// Whether a page bloom filter (`page_bloom`'s bytes) may hold one of
/// `keys`; an unreadable bitset may hold anything.
pub fn page_bloom_may_contain(bitset: &[u8], keys: &[Vec<u8>]) -> bool {
    if bitset.is_empty() || !bitset.len().is_multiple_of(32) {
        return true;
    }
    let filter = Sbbf::new(bitset);
    keys.iter().any(|k| filter.check(&k[..]))
}

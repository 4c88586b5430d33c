//! The storage page cache (Doris' `StoragePageCache`): column pages kept in
//! memory, so a page read again skips the disk read, the checksum and
//! decompression. While the cache is at most half full every page is kept
//! decoded, so a read skips decoding too. Beyond that, a page whose decoded
//! form is about as small as its raw form (plain strings, bit-shuffled
//! doubles) is kept decoded and a page in a compact encoding (FOR decimals
//! and dates, dictionary strings) is kept raw and decoded on each use, which
//! holds several times more rows in the same memory and makes a scan read
//! that much less of it. Segment files never
//! change once written, so an entry never goes stale; the cache is bounded
//! by bytes and evicts with the CLOCK (second chance) policy
//! ([`ClockCache`]). A capacity of 0 turns it off.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef};
use arrow::datatypes::DataType;

use super::clock_cache::{ClockCache, Weigh};

/// One page of one column of one open segment (see `FooterCache` ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PageKey {
    pub segment: u64,
    pub column: u32,
    pub page: u32,
}

/// A page as the cache holds it.
#[derive(Debug, Clone)]
pub enum CachedPage {
    /// The decoded array, and for compact integer and decimal pages the
    /// raw page too (see [`keeps_raw_beside`]).
    Decoded {
        array: ArrayRef,
        raw: Option<Arc<[u8]>>,
    },
    /// The raw (decompressed, still encoded) page, or a bloom filter bitset.
    Raw(Arc<[u8]>),
}

/// Whether a compact page of type `dt` keeps its raw form beside its
/// decoded array while the cache has room: integers and decimals, whose
/// raw FOR or DELTA form a pushed-down `sum` reads in place (2-4 bytes a
/// row of TPC-H's prices, against 16 decoded; summing the decoded values
/// is bound by memory bandwidth).
pub fn keeps_raw_beside(dt: &DataType) -> bool {
    dt.is_signed_integer() || matches!(dt, DataType::Decimal128(_, _))
}

impl CachedPage {
    /// The memory it takes.
    pub fn bytes(&self) -> usize {
        match self {
            CachedPage::Decoded { array, raw } => {
                array.get_array_memory_size() + raw.as_ref().map_or(0, |r| r.len())
            }
            CachedPage::Raw(r) => r.len(),
        }
    }

    /// How to cache a page read as `raw` and decoded to `decoded` in
    /// `cache`: decoded while that leaves the cache at most half full
    /// (memory to spare buys skipping the decode on every later read: a FOR
    /// decimal page is four times smaller raw, but unpacking it again was a
    /// fifth of a TPC-H scan's time) or when decoded takes at most a quarter
    /// more memory than raw; otherwise raw, which holds several times more
    /// rows in the same memory once memory is short. A compact integer or
    /// decimal page kept decoded keeps its raw form too
    /// ([`keeps_raw_beside`]).
    pub fn choose(raw: Vec<u8>, decoded: &ArrayRef, cache: &PageCache) -> CachedPage {
        if decoded.get_array_memory_size() <= raw.len() + raw.len() / 4 {
            return CachedPage::Decoded {
                array: decoded.clone(),
                raw: None,
            };
        }
        let raw: Arc<[u8]> = raw.into();
        Self::upgrade(&raw, decoded, cache).unwrap_or(CachedPage::Raw(raw))
    }

    /// Whether a page cached raw and now decoded whole should replace its
    /// entry with the decoded array (and the raw page, for integers and
    /// decimals): the cache-room rule of [`Self::choose`], for pages cached
    /// raw while the cache was fuller.
    pub fn upgrade(raw: &Arc<[u8]>, decoded: &ArrayRef, cache: &PageCache) -> Option<CachedPage> {
        let beside = keeps_raw_beside(decoded.data_type()).then(|| raw.clone());
        let bytes = decoded.get_array_memory_size() + beside.as_ref().map_or(0, |r| r.len());
        cache.half_empty_after(bytes).then(|| CachedPage::Decoded {
            array: decoded.clone(),
            raw: beside,
        })
    }
}

impl Weigh for CachedPage {
    fn bytes(&self) -> usize {
        CachedPage::bytes(self)
    }
}

/// Pages by segment, column and page number, bounded by bytes.
pub type PageCache = ClockCache<PageKey, CachedPage>;

/// Default capacity: 20% of the machine's memory, as Doris'
/// `storage_page_cache_limit`.
pub fn default_capacity() -> usize {
    let total_kb = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<usize>().ok())
        })
        .unwrap_or(4 << 20);
    total_kb * 1024 / 5
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Decimal128Array;

    /// A decoded decimal page (16 bytes a row) and a raw form of 4 a row.
    fn page(rows: usize) -> (Vec<u8>, ArrayRef) {
        let a: ArrayRef = Arc::new(Decimal128Array::from_iter_values(
            (0..rows as i128).map(|i| i * 7),
        ));
        (vec![0u8; rows * 4], a)
    }

    #[test]
    fn decoded_while_the_cache_is_half_empty_then_raw() {
        let (raw, decoded) = page(1000);
        let size = decoded.get_array_memory_size();
        let cache = PageCache::new(size * 16);
        let key = |page| PageKey {
            segment: 1,
            column: 0,
            page,
        };
        // Decoded, with the raw decimal page beside it, while at most half
        // full: six pages of about 1.25 sixteenths each.
        for p in 0..6 {
            let chosen = CachedPage::choose(raw.clone(), &decoded, &cache);
            assert!(
                matches!(&chosen, CachedPage::Decoded { raw: Some(r), .. } if r.len() == raw.len()),
                "page {p}"
            );
            assert_eq!(chosen.bytes(), size + raw.len());
            cache.insert(key(p), chosen);
        }
        // Half full: compact pages stay raw, and a raw page read whole is
        // not upgraded.
        let chosen = CachedPage::choose(raw.clone(), &decoded, &cache);
        assert!(matches!(chosen, CachedPage::Raw(_)));
        let raw_arc: Arc<[u8]> = raw.clone().into();
        assert!(CachedPage::upgrade(&raw_arc, &decoded, &cache).is_none());
        // A page as small decoded as raw is kept decoded regardless, alone.
        let (_, small) = page(10);
        let chosen = CachedPage::choose(vec![0u8; small.get_array_memory_size()], &small, &cache);
        assert!(matches!(chosen, CachedPage::Decoded { raw: None, .. }));
        // Memory freed: a raw page read whole becomes decoded.
        for p in 0..6 {
            cache.remove(&key(p));
        }
        let up = CachedPage::upgrade(&raw_arc, &decoded, &cache);
        assert!(matches!(up, Some(CachedPage::Decoded { raw: Some(_), .. })));
        // Strings never keep the raw page beside.
        let s: ArrayRef = Arc::new(arrow::array::StringArray::from_iter_values(
            (0..1000).map(|i| format!("v{}", i % 3)),
        ));
        let up = CachedPage::upgrade(&Arc::from(vec![0u8; 100]), &s, &cache);
        assert!(matches!(up, Some(CachedPage::Decoded { raw: None, .. })));
    }
}

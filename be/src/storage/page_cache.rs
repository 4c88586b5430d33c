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
    /// The decoded array.
    Decoded(ArrayRef),
    /// The raw (decompressed, still encoded) page, or a bloom filter bitset.
    Raw(Arc<[u8]>),
}

impl CachedPage {
    /// The memory it takes.
    pub fn bytes(&self) -> usize {
        match self {
            CachedPage::Decoded(a) => a.get_array_memory_size(),
            CachedPage::Raw(r) => r.len(),
        }
    }

    /// How to cache a page read as `raw` and decoded to `decoded` in
    /// `cache`: decoded while that leaves the cache at most half full
    /// (memory to spare buys skipping the decode on every later read: a FOR
    /// decimal page is four times smaller raw, but unpacking it again was a
    /// fifth of a TPC-H scan's time) or when decoded takes at most a quarter
    /// more memory than raw; otherwise raw, which holds several times more
    /// rows in the same memory once memory is short.
    pub fn choose(raw: Vec<u8>, decoded: &ArrayRef, cache: &PageCache) -> CachedPage {
        if decoded.get_array_memory_size() <= raw.len() + raw.len() / 4 {
            return CachedPage::Decoded(decoded.clone());
        }
        Self::upgrade(decoded, cache).unwrap_or_else(|| CachedPage::Raw(raw.into()))
    }

    /// Whether a page cached raw and now decoded whole should replace its
    /// entry with the decoded array: the cache-room rule of
    /// [`Self::choose`], for pages cached raw while the cache was fuller.
    pub fn upgrade(decoded: &ArrayRef, cache: &PageCache) -> Option<CachedPage> {
        cache
            .half_empty_after(decoded.get_array_memory_size())
            .then(|| CachedPage::Decoded(decoded.clone()))
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
        for p in 0..8 {
            let chosen = CachedPage::choose(raw.clone(), &decoded, &cache);
            assert!(matches!(chosen, CachedPage::Decoded(_)), "page {p}");
            cache.insert(key(p), chosen);
        }
        // Half full: compact pages stay raw, and a raw page read whole is
        // not upgraded.
        let chosen = CachedPage::choose(raw.clone(), &decoded, &cache);
        assert!(matches!(chosen, CachedPage::Raw(_)));
        assert!(CachedPage::upgrade(&decoded, &cache).is_none());
        // A page as small decoded as raw is kept decoded regardless.
        let (_, small) = page(10);
        let chosen = CachedPage::choose(vec![0u8; small.get_array_memory_size()], &small, &cache);
        assert!(matches!(chosen, CachedPage::Decoded(_)));
        // Memory freed: a raw page read whole becomes decoded.
        for p in 0..8 {
            cache.remove(&key(p));
        }
        assert!(CachedPage::upgrade(&decoded, &cache).is_some());
    }
}

//! The storage page cache (Doris' `StoragePageCache`): column pages kept in
//! memory, so a page read again skips the disk read, the checksum and
//! decompression. A page whose decoded form is about as small as its raw
//! form (plain strings, bit-shuffled doubles) is kept decoded; a page in a
//! compact encoding (FOR decimals and dates, dictionary strings) is kept raw
//! and decoded on each use, which holds several times more rows in the same
//! memory and makes a scan read that much less of it. Segment files never
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

    /// How to cache a page read as `raw` and decoded to `decoded`: decoded
    /// unless that takes more than a quarter more memory than the raw page.
    pub fn choose(raw: Vec<u8>, decoded: &ArrayRef) -> CachedPage {
        if decoded.get_array_memory_size() <= raw.len() + raw.len() / 4 {
            CachedPage::Decoded(decoded.clone())
        } else {
            CachedPage::Raw(raw.into())
        }
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

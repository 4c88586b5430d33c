//! The storage page cache (Doris' `StoragePageCache`): column pages kept in
//! memory, so a page read again skips the disk read, the checksum and
//! decompression. A page whose decoded form is about as small as its raw
//! form (plain strings, bit-shuffled doubles) is kept decoded; a page in a
//! compact encoding (FOR decimals and dates, dictionary strings) is kept raw
//! and decoded on each use, which holds several times more rows in the same
//! memory and makes a scan read that much less of it. Segment files never
//! change once written, so an entry never goes stale; the cache is bounded
//! by bytes and evicts with the CLOCK (second chance) policy. A capacity of 0
//! turns it off.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use arrow::array::{Array, ArrayRef};

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

#[derive(Debug)]
struct Entry {
    page: CachedPage,
    bytes: usize,
    referenced: bool,
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<PageKey, Entry>,
    clock: VecDeque<PageKey>,
    bytes: usize,
}

/// Decoded pages, bounded by `capacity` bytes.
#[derive(Debug, Default)]
pub struct PageCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

impl PageCache {
    /// A cache holding up to `capacity` bytes of decoded pages.
    pub fn new(capacity: usize) -> PageCache {
        PageCache {
            capacity,
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cached page, marked as recently used.
    pub fn get(&self, key: &PageKey) -> Option<CachedPage> {
        if self.capacity == 0 {
            return None;
        }
        let mut g = self.lock();
        let e = g.map.get_mut(key)?;
        e.referenced = true;
        Some(e.page.clone())
    }

    /// Caches a page, evicting pages not used since the clock hand last
    /// passed them. Pages larger than an eighth of the cache are not kept.
    pub fn insert(&self, key: PageKey, page: CachedPage) {
        let bytes = page.bytes();
        if self.capacity == 0 || bytes > self.capacity / 8 {
            return;
        }
        let mut g = self.lock();
        if g.map.contains_key(&key) {
            return;
        }
        while g.bytes + bytes > self.capacity {
            let Some(k) = g.clock.pop_front() else {
                break;
            };
            let second_chance = match g.map.get_mut(&k) {
                Some(e) if e.referenced => {
                    e.referenced = false;
                    true
                }
                _ => false,
            };
            if second_chance {
                g.clock.push_back(k);
            } else if let Some(e) = g.map.remove(&k) {
                g.bytes -= e.bytes;
            }
        }
        g.bytes += bytes;
        g.clock.push_back(key);
        g.map.insert(
            key,
            Entry {
                page,
                bytes,
                referenced: false,
            },
        );
    }

    /// Bytes of pages held.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

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
    use arrow::array::Int64Array;

    fn page(n: usize) -> CachedPage {
        CachedPage::Decoded(Arc::new(Int64Array::from(vec![7i64; n])))
    }

    fn key(page: u32) -> PageKey {
        PageKey {
            segment: 1,
            column: 0,
            page,
        }
    }

    #[test]
    fn bounded_and_keeps_what_is_used() {
        let one = page(1000).bytes();
        let cache = PageCache::new(one * 8);
        for p in 0..8 {
            cache.insert(key(p), page(1000));
        }
        assert!(cache.get(&key(0)).is_some());
        // Page 0 was used: the clock spares it and evicts page 1.
        cache.insert(key(8), page(1000));
        assert!(cache.bytes() <= one * 8);
        assert!(cache.get(&key(0)).is_some());
        assert!(cache.get(&key(1)).is_none());
        assert!(cache.get(&key(8)).is_some());
        // A page bigger than an eighth of the cache is not kept.
        cache.insert(key(9), page(2000));
        assert!(cache.get(&key(9)).is_none());
        // Disabled cache keeps nothing.
        let off = PageCache::new(0);
        off.insert(key(0), page(10));
        assert!(off.get(&key(0)).is_none());
    }
}

//! A cache bounded by bytes with the CLOCK (second chance) eviction policy:
//! what the page cache and the merge-on-write key index cache share. An
//! entry used since the clock hand last passed it survives one more pass;
//! others are evicted until the new entry fits. Entries larger than an eighth
//! of the capacity are not kept (one big entry would flush everything). A
//! capacity of 0 turns the cache off.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What a cached value costs in memory.
pub trait Weigh {
    fn bytes(&self) -> usize;
}

#[derive(Debug)]
struct Entry<V> {
    value: V,
    bytes: usize,
    referenced: bool,
}

#[derive(Debug)]
struct Inner<K, V> {
    map: HashMap<K, Entry<V>>,
    clock: VecDeque<K>,
    bytes: usize,
}

impl<K: Hash + Eq, V> Inner<K, V> {
    /// Evicts values not used since the clock hand last passed them until
    /// at most `limit` bytes are held.
    fn evict_until(&mut self, limit: usize) {
        while self.bytes > limit {
            let Some(k) = self.clock.pop_front() else {
                break;
            };
            let second_chance = match self.map.get_mut(&k) {
                Some(e) if e.referenced => {
                    e.referenced = false;
                    true
                }
                _ => false,
            };
            if second_chance {
                self.clock.push_back(k);
            } else if let Some(e) = self.map.remove(&k) {
                self.bytes -= e.bytes;
            }
        }
    }
}

impl<K, V> Default for Inner<K, V> {
    fn default() -> Self {
        Inner {
            map: HashMap::new(),
            clock: VecDeque::new(),
            bytes: 0,
        }
    }
}

/// Values by key, bounded by `capacity` bytes.
#[derive(Debug)]
pub struct ClockCache<K, V> {
    capacity: AtomicUsize,
    /// `Inner::bytes` as of the last change, readable without the lock.
    held: AtomicUsize,
    inner: Mutex<Inner<K, V>>,
}

impl<K, V> Default for ClockCache<K, V> {
    fn default() -> Self {
        ClockCache {
            capacity: AtomicUsize::new(0),
            held: AtomicUsize::new(0),
            inner: Mutex::default(),
        }
    }
}

impl<K: Hash + Eq + Clone, V: Clone + Weigh> ClockCache<K, V> {
    /// A cache holding up to `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        ClockCache {
            capacity: AtomicUsize::new(capacity),
            held: AtomicUsize::new(0),
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<K, V>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn capacity(&self) -> usize {
        self.capacity.load(Ordering::Relaxed)
    }

    /// Changes the bound; entries over it go at the next insert.
    pub fn set_capacity(&self, capacity: usize) {
        self.capacity.store(capacity, Ordering::Relaxed);
        if capacity == 0 {
            let mut g = self.lock();
            *g = Inner::default();
            self.held.store(0, Ordering::Relaxed);
        }
    }

    /// The cached value, marked as recently used.
    pub fn get(&self, key: &K) -> Option<V> {
        if self.capacity() == 0 {
            return None;
        }
        let mut g = self.lock();
        let e = g.map.get_mut(key)?;
        e.referenced = true;
        Some(e.value.clone())
    }

    /// The cached values of `keys` (`None` where absent), each marked as
    /// recently used, under one acquisition of the lock: a scan of a
    /// segment's pages takes them in one step instead of contending for the
    /// lock page by page with the other scans.
    pub fn get_many(&self, keys: impl IntoIterator<Item = K>) -> Vec<Option<V>> {
        let keys = keys.into_iter();
        if self.capacity() == 0 {
            return keys.map(|_| None).collect();
        }
        let mut g = self.lock();
        keys.map(|k| {
            g.map.get_mut(&k).map(|e| {
                e.referenced = true;
                e.value.clone()
            })
        })
        .collect()
    }

    /// Caches a value (replacing one under the same key in place), evicting
    /// values not used since the clock hand last passed them.
    pub fn insert(&self, key: K, value: V) {
        let capacity = self.capacity();
        let bytes = value.bytes();
        if capacity == 0 || bytes > capacity / 8 {
            return;
        }
        let mut g = self.lock();
        if let Some(e) = g.map.get_mut(&key) {
            let old = std::mem::replace(&mut e.bytes, bytes);
            e.value = value;
            g.bytes = g.bytes - old + bytes;
            g.evict_until(capacity);
        } else {
            g.evict_until(capacity.saturating_sub(bytes));
            g.bytes += bytes;
            g.clock.push_back(key.clone());
            g.map.insert(
                key,
                Entry {
                    value,
                    bytes,
                    referenced: false,
                },
            );
        }
        self.held.store(g.bytes, Ordering::Relaxed);
    }

    /// Whether `bytes` more would still leave the cache at most half full:
    /// the room a caller may spend on a roomier form of a value.
    pub fn half_empty_after(&self, bytes: usize) -> bool {
        self.held.load(Ordering::Relaxed) + bytes <= self.capacity() / 2
    }

    /// Drops the value under `key` (its source is gone).
    pub fn remove(&self, key: &K) {
        let mut g = self.lock();
        if let Some(e) = g.map.remove(key) {
            g.bytes -= e.bytes;
            g.clock.retain(|k| k != key);
        }
        self.held.store(g.bytes, Ordering::Relaxed);
    }

    /// Bytes of values held.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone)]
    struct Blob(usize);

    impl Weigh for Blob {
        fn bytes(&self) -> usize {
            self.0
        }
    }

    #[test]
    fn bounded_second_chance_and_removal() {
        let cache: ClockCache<u32, Blob> = ClockCache::new(800);
        for k in 0..8 {
            cache.insert(k, Blob(100));
        }
        assert!(cache.get(&0).is_some());
        // 0 was used: the clock spares it and evicts 1.
        cache.insert(8, Blob(100));
        assert_eq!(cache.bytes(), 800);
        assert!(cache.get(&0).is_some());
        assert!(cache.get(&1).is_none());
        // Too big to keep.
        cache.insert(9, Blob(101));
        assert!(cache.get(&9).is_none());
        // Replacing and removing keep the byte count right.
        cache.insert(8, Blob(50));
        assert_eq!(cache.bytes(), 750);
        cache.remove(&8);
        assert_eq!(cache.bytes(), 700);
        assert!(cache.get(&8).is_none());
        cache.set_capacity(0);
        assert_eq!(cache.bytes(), 0);
        cache.insert(1, Blob(1));
        assert!(cache.get(&1).is_none());
    }

    #[test]
    fn get_many_marks_what_it_finds_as_used() {
        let cache: ClockCache<u32, Blob> = ClockCache::new(800);
        for k in 0..8 {
            cache.insert(k, Blob(100));
        }
        let got = cache.get_many([2, 9, 0]);
        assert_eq!(
            got.iter()
                .map(|v| v.as_ref().map(|b| b.0))
                .collect::<Vec<_>>(),
            vec![Some(100), None, Some(100)]
        );
        // 0 and 2 were used: the clock spares them and evicts 1.
        cache.insert(8, Blob(100));
        assert!(cache.get(&1).is_none());
        assert!(cache.get(&0).is_some() && cache.get(&2).is_some());
        cache.set_capacity(0);
        assert_eq!(cache.get_many([0, 2]).len(), 2);
    }

    #[test]
    fn growing_a_value_in_place_evicts_others_and_reports_room() {
        let cache: ClockCache<u32, Blob> = ClockCache::new(800);
        for k in 0..4 {
            cache.insert(k, Blob(100));
        }
        assert!(cache.half_empty_after(0));
        assert!(!cache.half_empty_after(1));
        // 3 grows (a raw page replaced by its decoded form): the byte count
        // follows, and the others go once the total passes the capacity.
        cache.insert(3, Blob(100));
        cache.insert(3, Blob(100));
        assert_eq!(cache.bytes(), 400);
        for k in 4..8 {
            cache.insert(k, Blob(100));
        }
        assert!(cache.get(&3).is_some());
        cache.insert(3, Blob(100));
        assert_eq!(cache.bytes(), 800);
        cache.insert(2, Blob(100));
        assert!(cache.bytes() <= 800);
        assert!(cache.get(&3).is_some(), "used since the hand passed");
        assert!(!cache.half_empty_after(0));
    }
}

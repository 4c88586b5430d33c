//! The storage read API: all that execution sees of storage.
//!
//! ```sql
//! SELECT sum(price) FROM orders WHERE id BETWEEN 10 AND 20 AND city = 'Oslo'
//! ```
//!
//! 1. **Snapshot** a tablet at a version ([`StorageEngine::snapshot`]): the
//!    segments of its visible rowsets, kept on disk until the snapshot
//!    drops, with the DELETE predicates published after each rowset and the
//!    rows later loads superseded ([`TabletSnapshot`]); open its segments
//!    through the footer cache ([`StorageEngine::open_segment`]); for a
//!    merge-on-read table, how its rowsets merge ([`merge_spec_of`],
//!    [`KeyMerger`]).
//! 2. **Prune** with each segment's metadata: the short-key index narrows a
//!    key range to rows ([`encode_bound`]), zone maps rule out pages
//!    ([`ZoneMap`], [`ZoneStats`]) and page bloom filters rule out pages for
//!    `col = v` ([`PageReader::bloom`]).
//! 3. **Read** the pages left, decoded, through the engine's page cache
//!    ([`PageReader::read`]), or summed in place ([`PageReader::sums`]).
//!
//! The modules behind this API (segment layout, encodings, the cache, the
//! tablet's metadata) are private to `storage/`.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, UInt32Array};
use arrow::datatypes::DataType;
use tethys_common::Result;
use tethys_common::schema::TableSchema;

pub use super::bloom::{bloom_keys, page_bloom_may_contain};
pub use super::merge::{BatchSource, KeyMerger};
pub use super::segment::Segment;
pub use super::short_key::{PrefixField, encode_bound, prefix_fields};
pub use super::tablet::{DeletePredicate, SegmentRead, merge_spec_of};

use super::tablet::ReadLease;
pub use super::zone_map::{ZoneMap, ZoneStats, ZoneValue, pick_bound, to_scalar};

use super::StorageEngine;
use super::page_cache::{CachedPage, PageCache, PageKey};

/// A tablet read at one version: its visible rowsets, oldest first, each
/// as its segments (with the rows later loads superseded) and the DELETE
/// predicates published after it. The tablet's files stay on disk, whatever
/// compaction does meanwhile, until the snapshot drops.
pub struct TabletSnapshot {
    pub rowsets: Vec<(Vec<SegmentRead>, Vec<DeletePredicate>)>,
    _lease: ReadLease,
}

impl StorageEngine {
    /// Snapshots tablet `tablet_id` at `version` for reading.
    pub fn snapshot(&self, tablet_id: i64, version: i64) -> Result<TabletSnapshot> {
        let tablet = self.tablet(tablet_id)?;
        // The lease first: files listed after it are kept from the sweep.
        let lease = tablet.lease();
        Ok(TabletSnapshot {
            rowsets: tablet.read_plan(version)?,
            _lease: lease,
        })
    }

    /// Opens a segment file of a snapshot, its footer through the footer
    /// cache.
    pub fn open_segment(&self, path: &Path, schema: &TableSchema) -> Result<Segment> {
        Segment::open_cached(path, schema, &self.footers)
    }
}

/// What reading pages cost, for a scan's counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PageIo {
    /// Pages found in the page cache.
    pub cached_pages: usize,
    /// Bytes read from disk (compressed).
    pub bytes: usize,
    /// Bytes of those pages once decompressed.
    pub raw_bytes: usize,
}

/// A page's values as read.
#[derive(Debug)]
pub enum PageValues {
    /// Every row of the page.
    Whole(ArrayRef),
    /// Only the rows asked for: the page was cached encoded and its
    /// encoding reads single rows.
    Picked(ArrayRef),
}

/// The sum of a page's non-NULL values.
#[derive(Debug)]
pub enum PageSum {
    /// Summed in place: (wrapping sum, non-NULL count).
    Summed(i128, u64),
    /// The encoding cannot be summed in place: the decoded page.
    Decoded(ArrayRef),
}

/// Reads the pages of one segment through the engine's page cache.
pub struct PageReader<'a> {
    pages: &'a PageCache,
    seg: &'a Segment,
}

/// Bloom filters are cached under their column's id with the top bit set.
const BLOOM_COLUMN: u32 = 1 << 31;

impl<'a> PageReader<'a> {
    pub fn new(engine: &'a StorageEngine, seg: &'a Segment) -> Self {
        PageReader {
            pages: &engine.pages,
            seg,
        }
    }

    /// The cache key of a page; `None` for a segment the cache does not
    /// track (id 0).
    fn key(&self, column: u32, page: usize) -> Option<PageKey> {
        let segment = self.seg.cache_id();
        (segment != 0).then_some(PageKey {
            segment,
            column,
            page: page as u32,
        })
    }

    fn cached(&self, key: Option<PageKey>) -> Option<CachedPage> {
        key.and_then(|k| self.pages.get(&k))
    }

    fn read_raw(&self, col: usize, page: usize, io: &mut PageIo) -> Result<Vec<u8>> {
        let (raw, bytes) = self.seg.read_raw_page(col, page)?;
        io.bytes += bytes as usize;
        io.raw_bytes += raw.len();
        Ok(raw)
    }

    /// Page `page` of column `col`, decoded as `dt`. With `picked` (rows
    /// ascending, each `offset` past the page's first row), only those rows
    /// when the page is cached encoded and its encoding reads single rows;
    /// else the whole page.
    pub fn read(
        &self,
        col: usize,
        page: usize,
        dt: &DataType,
        picked: Option<(&UInt32Array, u32)>,
    ) -> Result<(PageValues, PageIo)> {
        let mut io = PageIo::default();
        let key = self.key(col as u32, page);
        if let Some(cached) = self.cached(key) {
            io.cached_pages += 1;
            let raw = match cached {
                CachedPage::Decoded { array, .. } => return Ok((PageValues::Whole(array), io)),
                CachedPage::Raw(raw) => raw,
            };
            // The positions are worked out only where single rows can be read.
            let positions = picked.map(|(rows, offset)| -> Vec<u32> {
                rows.values().iter().map(|&r| r + offset).collect()
            });
            if let Some(at) = &positions
                && let Some(a) = self.seg.decode_page_at(col, page, &raw, dt, at)?
            {
                return Ok((PageValues::Picked(a), io));
            }
            let a = self.seg.decode_page(col, page, &raw, dt)?;
            if let (Some(k), Some(upgraded)) = (key, CachedPage::upgrade(&raw, &a, self.pages)) {
                self.pages.insert(k, upgraded);
            }
            return Ok((PageValues::Whole(a), io));
        }
        let raw = self.read_raw(col, page, &mut io)?;
        let a = self.seg.decode_page(col, page, &raw, dt)?;
        if let Some(k) = key {
            self.pages
                .insert(k, CachedPage::choose(raw, &a, self.pages));
        }
        Ok((PageValues::Whole(a), io))
    }

    /// The sums of every page of integer or decimal column `col`: from the
    /// raw form where it is cached or read from disk, summed in place; the
    /// decoded page where only that is cached or the encoding must be
    /// decoded.
    pub fn sums(&self, col: usize, dt: &DataType) -> Result<(Vec<PageSum>, PageIo)> {
        let mut io = PageIo::default();
        let n = self.seg.num_pages();
        let cached = match self.key(col as u32, 0) {
            None => vec![None; n],
            Some(_) => self
                .pages
                .get_many((0..n).filter_map(|pi| self.key(col as u32, pi))),
        };
        let mut out = Vec::with_capacity(n);
        for (pi, cached) in cached.into_iter().enumerate() {
            let key = self.key(col as u32, pi);
            if cached.is_some() {
                io.cached_pages += 1;
            }
            let raw: Arc<[u8]> = match cached {
                Some(CachedPage::Decoded { array, raw: None }) => {
                    out.push(PageSum::Decoded(array));
                    continue;
                }
                Some(CachedPage::Decoded { raw: Some(raw), .. } | CachedPage::Raw(raw)) => raw,
                None => {
                    let raw: Arc<[u8]> = self.read_raw(col, pi, &mut io)?.into();
                    if let Some(k) = key {
                        self.pages.insert(k, CachedPage::Raw(raw.clone()));
                    }
                    raw
                }
            };
            if let Some((sum, count)) = self.seg.sum_page(col, pi, &raw, dt)? {
                out.push(PageSum::Summed(sum, count));
                continue;
            }
            let array = self.seg.decode_page(col, pi, &raw, dt)?;
            if let (Some(k), Some(page)) = (key, CachedPage::upgrade(&raw, &array, self.pages)) {
                self.pages.insert(k, page);
            }
            out.push(PageSum::Decoded(array));
        }
        Ok((out, io))
    }

    /// The bloom filter bitset of page `page` of column `col`, when the
    /// column has page bloom filters.
    pub fn bloom(&self, col: usize, page: usize) -> Result<Option<Arc<[u8]>>> {
        let has = self
            .seg
            .footer()
            .columns
            .get(col)
            .and_then(|cm| cm.pages.get(page))
            .is_some_and(|pm| pm.bloom.is_some());
        if !has {
            return Ok(None);
        }
        let key = self.key(col as u32 | BLOOM_COLUMN, page);
        if let Some(CachedPage::Raw(bits)) = self.cached(key) {
            return Ok(Some(bits));
        }
        let Some(bits) = self.seg.read_bloom(col, page)? else {
            return Ok(None);
        };
        let bits: Arc<[u8]> = bits.into();
        if let Some(k) = key {
            self.pages.insert(k, CachedPage::Raw(bits.clone()));
        }
        Ok(Some(bits))
    }
}

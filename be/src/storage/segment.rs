//! Segment files: the columnar unit of a rowset.
//!
//! Layout (format v1):
//! ```text
//! "TSG1"                      magic
//! page [bloom] | page | ...   every column's pages, column after column; a
//!                             page of a `bloom_filter_columns` column is
//!                             followed by its bloom filter bitset
//! footer (JSON)               columns -> pages (offset, length, rows, crc32c,
//!                             zone map, bloom block)
//! u32 footer length | u32 footer crc32c | "TSG1"
//! ```
//! All columns are paged on the same row boundaries (`ROWS_PER_PAGE`), so a
//! page index selects the same rows in every column. Rows are sorted by the
//! tablet's key columns. Every page and the footer carry a CRC32C checksum; a
//! mismatch is reported as corruption naming the segment and column. The
//! whole format is described in `docs/storage-format.md`.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::DataType;
use serde::{Deserialize, Serialize};
use tethys_common::config::ROWS_PER_PAGE;
use tethys_common::schema::TableSchema;
use tethys_common::{Result, TethysError};

use super::encoding::Encoding;
use super::page;
use super::short_key::{self, ShortKeyIndex};
use super::zone_map::ZoneMap;

/// Segment file magic.
pub const SEGMENT_MAGIC: &[u8; 4] = b"TSG1";
/// Segment format version written by this build (1 is still read).
pub const SEGMENT_FORMAT_VERSION: u32 = 2;
const TAIL_LEN: u64 = 12;
/// Upper bound on a footer, guarding against corrupt length fields.
const MAX_FOOTER: u64 = 256 << 20;
/// Upper bound on a page's bloom filter, guarding against corrupt lengths.
const MAX_BLOOM_BYTES: usize = 16 << 20;

/// One page of one column.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PageMeta {
    /// Ordinal index: the segment row the page starts at.
    #[serde(default)]
    pub first_row: u64,
    /// How the page's values are encoded (format v2; v1 pages are plain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<Encoding>,
    pub offset: u64,
    pub stored_len: u32,
    pub raw_len: u32,
    pub num_rows: u32,
    pub crc: u32,
    pub zone: ZoneMap,
    /// The page's bloom filter, for columns in `bloom_filter_columns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bloom: Option<BlockRef>,
}

/// A checksummed block of a segment file (a page's bloom filter bitset).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BlockRef {
    pub offset: u64,
    pub len: u32,
    pub crc: u32,
}

/// One column of a segment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ColumnMeta {
    pub name: String,
    pub column_type: String,
    pub zone: ZoneMap,
    pub pages: Vec<PageMeta>,
}

/// The footer of a segment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SegmentFooter {
    pub format_version: u32,
    pub num_rows: u64,
    pub columns: Vec<ColumnMeta>,
    /// The short-key index block (format v2, tables with a key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_key: Option<BlockRef>,
}

/// What a writer reports about a segment it wrote.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SegmentInfo {
    pub file: String,
    pub num_rows: u64,
    pub size: u64,
    /// Its rows delete their keys (DELETE on a merge-on-write table, Stream
    /// Load `merge_type: DELETE`): publishing supersedes the older rows of
    /// those keys and the segment's own rows, so none of them is visible.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deletes: bool,
    /// Rows of a partial column update, filled from the tablet as it was
    /// at a version; publishing re-fills them if later loads wrote their keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<PartialWrite>,
}

/// How a partial column update's segment was filled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartialWrite {
    /// The table columns the load gave.
    pub given: Vec<usize>,
    /// The tablet version the other columns were read at.
    pub read_version: i64,
}

/// Writes `batch` (already sorted by key) as a segment at `path`, crash-safely.
pub fn write_segment(
    path: &Path,
    schema: &TableSchema,
    batch: &RecordBatch,
) -> Result<SegmentInfo> {
    if batch.num_columns() != schema.columns.len() {
        return Err(TethysError::Internal(format!(
            "segment write with {} columns for a schema of {}",
            batch.num_columns(),
            schema.columns.len()
        )));
    }
    let tmp = path.with_extension("dat.tmp");
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| TethysError::io(format!("creating segment {}", tmp.display()), e))?;
    let wctx = || format!("writing segment {}", tmp.display());
    let mut buf = std::io::BufWriter::with_capacity(1 << 20, &mut f);
    buf.write_all(SEGMENT_MAGIC)
        .map_err(|e| TethysError::io(wctx(), e))?;
    let mut offset = SEGMENT_MAGIC.len() as u64;
    let n = batch.num_rows();
    let mut columns = Vec::with_capacity(batch.num_columns());
    for (ci, col) in schema.columns.iter().enumerate() {
        let arr = batch.column(ci);
        let with_bloom = schema.has_bloom(ci);
        let mut zone = ZoneMap::default();
        // A page without bounds leaves the segment without bounds.
        let mut bounded = true;
        let mut pages = Vec::new();
        let mut start = 0;
        while start < n {
            let len = ROWS_PER_PAGE.min(n - start);
            let slice = arr.slice(start, len);
            let (encoding, raw) = page::encode_page(slice.as_ref(), None)?;
            let stored = page::compress(&raw, &schema.compression)?;
            let pz = ZoneMap::of(slice.as_ref());
            bounded &= !pz.bounds_unknown(len as u64);
            zone.merge(&pz);
            buf.write_all(&stored)
                .map_err(|e| TethysError::io(wctx(), e))?;
            let page_offset = offset;
            offset += stored.len() as u64;
            let bloom = match with_bloom.then(|| super::bloom::page_bloom(&slice)) {
                Some(Some(bits)) => Some(
                    write_block(&mut buf, &mut offset, &bits)
                        .map_err(|e| TethysError::io(wctx(), e))?,
                ),
                _ => None,
            };
            pages.push(PageMeta {
                first_row: start as u64,
                encoding: Some(encoding),
                offset: page_offset,
                stored_len: stored.len() as u32,
                raw_len: raw.len() as u32,
                num_rows: len as u32,
                crc: crc32c::crc32c(&stored),
                zone: pz,
                bloom,
            });
            start += len;
        }
        if !bounded {
            zone.forget_bounds();
        }
        columns.push(ColumnMeta {
            name: col.name.clone(),
            column_type: col.column_type.sql(),
            zone,
            pages,
        });
    }
    let key_types: Vec<DataType> = (0..schema.num_key_columns.min(batch.num_columns()))
        .map(|i| batch.column(i).data_type().clone())
        .collect();
    let fields = short_key::prefix_fields(&key_types);
    let short_key = if fields.is_empty() || n == 0 {
        None
    } else {
        let bytes = ShortKeyIndex::build(&batch.columns()[..fields.len()], &fields, n).to_bytes();
        Some(write_block(&mut buf, &mut offset, &bytes).map_err(|e| TethysError::io(wctx(), e))?)
    };
    let footer = SegmentFooter {
        format_version: SEGMENT_FORMAT_VERSION,
        num_rows: n as u64,
        columns,
        short_key,
    };
    let fbytes = serde_json::to_vec(&footer).map_err(|e| TethysError::Internal(e.to_string()))?;
    buf.write_all(&fbytes)
        .map_err(|e| TethysError::io(wctx(), e))?;
    buf.write_all(&(fbytes.len() as u32).to_le_bytes())
        .map_err(|e| TethysError::io(wctx(), e))?;
    buf.write_all(&crc32c::crc32c(&fbytes).to_le_bytes())
        .map_err(|e| TethysError::io(wctx(), e))?;
    buf.write_all(SEGMENT_MAGIC)
        .map_err(|e| TethysError::io(wctx(), e))?;
    buf.flush().map_err(|e| TethysError::io(wctx(), e))?;
    drop(buf);
    f.sync_all().map_err(|e| TethysError::io(wctx(), e))?;
    let size = offset + fbytes.len() as u64 + TAIL_LEN;
    std::fs::rename(&tmp, path)
        .map_err(|e| TethysError::io(format!("renaming segment {}", path.display()), e))?;
    Ok(SegmentInfo {
        deletes: false,
        partial: None,
        file: path
            .file_name()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string(),
        num_rows: n as u64,
        size,
    })
}

/// Appends a checksummed block at `offset` (advanced past it).
fn write_block(out: &mut impl Write, offset: &mut u64, bytes: &[u8]) -> std::io::Result<BlockRef> {
    out.write_all(bytes)?;
    let block = BlockRef {
        offset: *offset,
        len: bytes.len() as u32,
        crc: crc32c::crc32c(bytes),
    };
    *offset += bytes.len() as u64;
    Ok(block)
}

/// An open segment.
#[derive(Debug)]
pub struct Segment {
    path: PathBuf,
    /// Opened on the first read: a scan whose pages are all in the page
    /// cache opens no file (the scan's `ReadLease` keeps the file on disk
    /// until it is done).
    file: OnceLock<File>,
    footer: Arc<SegmentFooter>,
    /// The parsed short-key index, read on first use and shared by every
    /// open of the segment through the footer cache.
    short_key: Arc<OnceLock<Arc<ShortKeyIndex>>>,
    /// Id given by the footer cache (page cache key); 0 when uncached.
    id: u64,
}

/// Parsed and validated footers by segment path. Segment files never change
/// once renamed into place, so a scan reuses the footer instead of reading
/// and parsing it again; the cache forgets everything when it outgrows its
/// byte budget.
#[derive(Debug, Default)]
pub struct FooterCache {
    inner: Mutex<CachedFooters>,
    next_id: std::sync::atomic::AtomicU64,
}

/// What the cache keeps of one segment.
#[derive(Debug, Clone)]
struct Cached {
    footer: Arc<SegmentFooter>,
    /// The segment's page cache id.
    id: u64,
    short_key: Arc<OnceLock<Arc<ShortKeyIndex>>>,
}

/// Footers (with their segment ids) by path, and the bytes they came from.
#[derive(Debug, Default)]
struct CachedFooters {
    map: HashMap<PathBuf, Cached>,
    bytes: usize,
}

/// Footer bytes the cache holds before it starts over.
const FOOTER_CACHE_BYTES: usize = 64 << 20;

impl FooterCache {
    fn get(&self, path: &Path) -> Option<Cached> {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.map.get(path).cloned()
    }

    /// Caches a segment's footer (and its short-key slot); returns the id
    /// the segment is known by from now on.
    fn put(&self, path: &Path, seg: &Segment, bytes: usize) -> u64 {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if g.bytes + bytes > FOOTER_CACHE_BYTES {
            g.map.clear();
            g.bytes = 0;
        }
        g.map.insert(
            path.to_path_buf(),
            Cached {
                footer: seg.footer.clone(),
                id,
                short_key: seg.short_key.clone(),
            },
        );
        g.bytes += bytes;
        id
    }

    /// Forgets the footers of segments under `dir` (a dropped tablet).
    pub fn forget_dir(&self, dir: &Path) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.map.retain(|p, _| !p.starts_with(dir));
    }
}

impl Segment {
    /// Opens a segment, taking its footer from `cache` when an earlier open
    /// validated it.
    pub fn open_cached(path: &Path, schema: &TableSchema, cache: &FooterCache) -> Result<Segment> {
        match cache.get(path) {
            Some(c) if c.footer.columns.len() == schema.columns.len() => Ok(Segment {
                path: path.to_path_buf(),
                file: OnceLock::new(),
                footer: c.footer,
                short_key: c.short_key,
                id: c.id,
            }),
            _ => {
                let (mut seg, bytes) = Self::open_sized(path, schema)?;
                seg.id = cache.put(path, &seg, bytes);
                Ok(seg)
            }
        }
    }

    /// Opens a segment and validates its tail and footer.
    pub fn open(path: &Path, schema: &TableSchema) -> Result<Segment> {
        Ok(Self::open_sized(path, schema)?.0)
    }

    /// Opens a segment; also returns its footer's size.
    fn open_sized(path: &Path, schema: &TableSchema) -> Result<(Segment, usize)> {
        let corrupt =
            |why: String| TethysError::Corruption(format!("segment {}: {why}", path.display()));
        let file = File::open(path)
            .map_err(|e| TethysError::io(format!("opening segment {}", path.display()), e))?;
        let len = file
            .metadata()
            .map_err(|e| TethysError::io(format!("stat segment {}", path.display()), e))?
            .len();
        if len < TAIL_LEN + SEGMENT_MAGIC.len() as u64 {
            return Err(corrupt(format!("file is {len} bytes, too short")));
        }
        let mut tail = [0u8; TAIL_LEN as usize];
        file.read_exact_at(&mut tail, len - TAIL_LEN)
            .map_err(|e| TethysError::io(format!("reading segment {}", path.display()), e))?;
        if &tail[8..12] != SEGMENT_MAGIC {
            return Err(corrupt("bad magic".into()));
        }
        // The leading magic too: no byte of the file goes unchecked (pages
        // and footer have their checksums).
        let mut head = [0u8; 4];
        file.read_exact_at(&mut head, 0)
            .map_err(|e| TethysError::io(format!("reading segment {}", path.display()), e))?;
        if &head != SEGMENT_MAGIC {
            return Err(corrupt("bad leading magic".into()));
        }
        let flen = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) as u64;
        let fcrc = u32::from_le_bytes([tail[4], tail[5], tail[6], tail[7]]);
        if flen > MAX_FOOTER || flen + TAIL_LEN + 4 > len {
            return Err(corrupt(format!("footer length {flen} out of range")));
        }
        let mut fbytes = vec![0u8; flen as usize];
        file.read_exact_at(&mut fbytes, len - TAIL_LEN - flen)
            .map_err(|e| TethysError::io(format!("reading segment {}", path.display()), e))?;
        if crc32c::crc32c(&fbytes) != fcrc {
            return Err(corrupt("footer checksum mismatch".into()));
        }
        let mut footer: SegmentFooter = serde_json::from_slice(&fbytes)
            .map_err(|e| corrupt(format!("footer does not parse: {e}")))?;
        // Segments written before the writer knew better kept bounds of a
        // column whose pages had none for some rows (long strings): those
        // bounds do not hold, so they are dropped.
        for c in &mut footer.columns {
            if c.pages
                .iter()
                .any(|p| p.zone.bounds_unknown(u64::from(p.num_rows)))
            {
                c.zone.forget_bounds();
            }
        }
        if !(1..=SEGMENT_FORMAT_VERSION).contains(&footer.format_version) {
            return Err(corrupt(format!(
                "unsupported format version {}",
                footer.format_version
            )));
        }
        if footer.columns.len() != schema.columns.len() {
            return Err(corrupt(format!(
                "{} columns, schema has {}",
                footer.columns.len(),
                schema.columns.len()
            )));
        }
        let pages = footer.columns.first().map(|c| c.pages.len()).unwrap_or(0);
        for c in &footer.columns {
            if c.pages.len() != pages {
                return Err(corrupt(format!(
                    "column {} has {} pages, expected {pages}",
                    c.name,
                    c.pages.len()
                )));
            }
            let mut next_row = 0u64;
            for p in &c.pages {
                if footer.format_version >= 2 && p.first_row != next_row {
                    return Err(corrupt(format!(
                        "column {} page starts at row {}, expected {next_row}",
                        c.name, p.first_row
                    )));
                }
                next_row += u64::from(p.num_rows);
                if p.offset + p.stored_len as u64 > len - TAIL_LEN - flen {
                    return Err(corrupt(format!(
                        "page of column {} lies outside the data area",
                        c.name
                    )));
                }
            }
            if footer.format_version >= 2 && next_row != footer.num_rows {
                return Err(corrupt(format!(
                    "column {} pages hold {next_row} rows, segment has {}",
                    c.name, footer.num_rows
                )));
            }
        }
        Ok((
            Segment {
                path: path.to_path_buf(),
                file: OnceLock::from(file),
                footer: Arc::new(footer),
                short_key: Arc::default(),
                id: 0,
            },
            flen as usize,
        ))
    }

    /// The open file, opened now if this is the first read.
    fn file(&self) -> Result<&File> {
        if let Some(f) = self.file.get() {
            return Ok(f);
        }
        let f = File::open(&self.path)
            .map_err(|e| TethysError::io(format!("opening segment {}", self.path.display()), e))?;
        Ok(self.file.get_or_init(|| f))
    }

    /// The id of this segment in the page cache (0: not cacheable).
    pub fn cache_id(&self) -> u64 {
        self.id
    }

    /// The footer.
    pub fn footer(&self) -> &SegmentFooter {
        &self.footer
    }

    /// Number of pages (per column).
    pub fn num_pages(&self) -> usize {
        self.footer
            .columns
            .first()
            .map(|c| c.pages.len())
            .unwrap_or(0)
    }

    /// The short-key index, read and verified on first use; `None` for
    /// segments without one (no key, or format v1).
    pub fn short_key_index(&self) -> Result<Option<Arc<ShortKeyIndex>>> {
        if let Some(idx) = self.short_key.get() {
            return Ok(Some(idx.clone()));
        }
        let Some(b) = &self.footer.short_key else {
            return Ok(None);
        };
        let corrupt = |why: String| {
            TethysError::Corruption(format!(
                "segment {} short-key index: {why}",
                self.path.display()
            ))
        };
        if b.len as usize > MAX_FOOTER as usize {
            return Err(corrupt(format!("{} bytes", b.len)));
        }
        let mut bytes = vec![0u8; b.len as usize];
        self.file()?
            .read_exact_at(&mut bytes, b.offset)
            .map_err(|e| TethysError::io(format!("reading segment {}", self.path.display()), e))?;
        if crc32c::crc32c(&bytes) != b.crc {
            return Err(corrupt("checksum mismatch".into()));
        }
        let idx = ShortKeyIndex::from_bytes(&bytes, self.footer.num_rows as usize)
            .map_err(|e| corrupt(e.to_string()))?;
        Ok(Some(self.short_key.get_or_init(|| Arc::new(idx)).clone()))
    }

    /// The bloom filter bitset of page `page_idx` of column `col`, verified;
    /// `None` when the page has none.
    pub fn read_bloom(&self, col: usize, page_idx: usize) -> Result<Option<Vec<u8>>> {
        let Some(cm) = self.footer.columns.get(col) else {
            return Ok(None);
        };
        let Some(b) = cm.pages.get(page_idx).and_then(|p| p.bloom.as_ref()) else {
            return Ok(None);
        };
        if b.len as usize > MAX_BLOOM_BYTES {
            return Err(TethysError::Corruption(format!(
                "segment {} column {} page {page_idx}: bloom filter of {} bytes",
                self.path.display(),
                cm.name,
                b.len
            )));
        }
        let mut bits = vec![0u8; b.len as usize];
        self.file()?
            .read_exact_at(&mut bits, b.offset)
            .map_err(|e| TethysError::io(format!("reading segment {}", self.path.display()), e))?;
        if crc32c::crc32c(&bits) != b.crc {
            return Err(TethysError::Corruption(format!(
                "segment {} column {} page {page_idx}: bloom filter checksum mismatch",
                self.path.display(),
                cm.name
            )));
        }
        Ok(Some(bits))
    }

    /// Reads, verifies and decodes page `page` of column `col`; also returns
    /// its stored (compressed) size.
    pub fn read_page(&self, col: usize, page_idx: usize, dt: &DataType) -> Result<(ArrayRef, u64)> {
        let (raw, stored) = self.read_raw_page(col, page_idx)?;
        Ok((self.decode_page(col, page_idx, &raw, dt)?, stored))
    }

    /// Page `page_idx` of columns `0..types.len()` as plain arrays of
    /// `types` (dictionary pages decode to dictionary arrays; this casts
    /// them): what compaction and key lookups read.
    pub fn read_plain_pages(&self, types: &[DataType], page_idx: usize) -> Result<Vec<ArrayRef>> {
        types
            .iter()
            .enumerate()
            .map(|(c, dt)| self.read_plain_page(c, page_idx, dt))
            .collect()
    }

    /// Page `page_idx` of column `col` as a plain array of `dt`.
    pub fn read_plain_page(&self, col: usize, page_idx: usize, dt: &DataType) -> Result<ArrayRef> {
        let (a, _) = self.read_page(col, page_idx, dt)?;
        Ok(if a.data_type() == dt {
            a
        } else {
            arrow::compute::cast(&a, dt)?
        })
    }

    /// The footer entry of page `page_idx` of column `col`.
    fn page_meta(&self, col: usize, page_idx: usize) -> Result<(&ColumnMeta, &PageMeta)> {
        let cm = self
            .footer
            .columns
            .get(col)
            .ok_or_else(|| TethysError::Internal(format!("segment has no column {col}")))?;
        let pm = cm.pages.get(page_idx).ok_or_else(|| {
            TethysError::Internal(format!("column {} has no page {page_idx}", cm.name))
        })?;
        Ok((cm, pm))
    }

    fn corrupt_page(&self, cm: &ColumnMeta, page_idx: usize, why: String) -> TethysError {
        TethysError::Corruption(format!(
            "segment {} column {} page {page_idx}: {why}",
            self.path.display(),
            cm.name
        ))
    }

    /// Reads and verifies page `page_idx` of column `col` and decompresses
    /// it: the raw, still encoded page, and its stored (compressed) size.
    pub fn read_raw_page(&self, col: usize, page_idx: usize) -> Result<(Vec<u8>, u64)> {
        let (cm, pm) = self.page_meta(col, page_idx)?;
        let mut stored = vec![0u8; pm.stored_len as usize];
        self.file()?
            .read_exact_at(&mut stored, pm.offset)
            .map_err(|e| TethysError::io(format!("reading segment {}", self.path.display()), e))?;
        if crc32c::crc32c(&stored) != pm.crc {
            return Err(self.corrupt_page(cm, page_idx, "checksum mismatch".into()));
        }
        let raw = page::decompress(&stored, pm.raw_len as usize)
            .map_err(|e| self.corrupt_page(cm, page_idx, e.to_string()))?;
        Ok((raw, pm.stored_len as u64))
    }

    /// The rows at `positions` of page `page_idx` of column `col` (raw as
    /// [`Self::read_raw_page`] returns it), decoded without the others where
    /// the page's encoding allows; `None` where it must be decoded whole.
    pub fn decode_page_at(
        &self,
        col: usize,
        page_idx: usize,
        raw: &[u8],
        dt: &DataType,
        positions: &[u32],
    ) -> Result<Option<ArrayRef>> {
        if self.footer.format_version == 1 {
            return Ok(None);
        }
        let (cm, pm) = self.page_meta(col, page_idx)?;
        page::decode_page_at(raw, dt, pm.num_rows as usize, positions)
            .map_err(|e| self.corrupt_page(cm, page_idx, e.to_string()))
    }

    /// The sum of the non-NULL values of page `page_idx` of integer or
    /// decimal column `col` (raw as [`Self::read_raw_page`] returns it) and
    /// their count, taken from the encoded values (`page::sum_page`);
    /// `None` where the page must be decoded to be summed.
    pub fn sum_page(
        &self,
        col: usize,
        page_idx: usize,
        raw: &[u8],
        dt: &DataType,
    ) -> Result<Option<(i128, u64)>> {
        if self.footer.format_version == 1 {
            return Ok(None);
        }
        let (cm, pm) = self.page_meta(col, page_idx)?;
        page::sum_page(raw, dt, pm.num_rows as usize)
            .map_err(|e| self.corrupt_page(cm, page_idx, e.to_string()))
    }

    /// Decodes a raw page read by [`Segment::read_raw_page`] into an array
    /// of type `dt` (a dictionary array for DICT-encoded strings).
    pub fn decode_page(
        &self,
        col: usize,
        page_idx: usize,
        raw: &[u8],
        dt: &DataType,
    ) -> Result<ArrayRef> {
        let (cm, pm) = self.page_meta(col, page_idx)?;
        let arr = if self.footer.format_version == 1 {
            page::decode_v1(raw, dt)
        } else {
            page::decode_page(raw, dt)
        }
        .map_err(|e| self.corrupt_page(cm, page_idx, e.to_string()))?;
        if arr.len() != pm.num_rows as usize {
            return Err(self.corrupt_page(
                cm,
                page_idx,
                format!("{} rows, footer says {}", arr.len(), pm.num_rows),
            ));
        }
        Ok(arr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use std::sync::Arc;
    use tethys_common::schema::Column;
    use tethys_common::types::ColumnType;

    fn schema() -> TableSchema {
        let col = |n: &str, t: &str| Column::new(n, ColumnType::parse(t).unwrap(), true, false);
        TableSchema {
            columns: vec![col("k", "bigint"), col("v", "varchar(10)")],
            num_key_columns: 1,
            compression: "lz4".into(),
            bloom_filter_columns: vec![],
            ..Default::default()
        }
    }

    /// `n` rows: k = 0..n and v = "v<k>".
    fn keys_and_names(s: &TableSchema, n: i64) -> RecordBatch {
        RecordBatch::try_new(
            s.arrow_schema(),
            vec![
                Arc::new(Int64Array::from((0..n).collect::<Vec<i64>>())),
                Arc::new(StringArray::from(
                    (0..n).map(|i| format!("v{i}")).collect::<Vec<_>>(),
                )),
            ],
        )
        .unwrap()
    }

    #[test]
    fn write_read_and_detect_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let s = schema();
        let n = 10_000;
        let batch = keys_and_names(&s, n);
        let path = dir.path().join("r_0.dat");
        let info = write_segment(&path, &s, &batch).unwrap();
        assert_eq!(info.num_rows, n as u64);
        let seg = Segment::open(&path, &s).unwrap();
        assert_eq!(seg.num_pages(), 3);
        let (a, _) = seg.read_page(0, 2, &DataType::Int64).unwrap();
        assert_eq!(a.len(), n as usize - 2 * ROWS_PER_PAGE);
        assert_eq!(
            seg.footer().columns[0].pages[1].zone.min,
            Some(super::super::zone_map::ZoneValue::I(4064))
        );

        // Flip a byte inside the first page: reading it must fail, naming the column.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[10] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let seg = Segment::open(&path, &s).unwrap();
        let err = seg
            .read_page(0, 0, &DataType::Int64)
            .unwrap_err()
            .to_string();
        assert!(err.contains("column k"), "{err}");
        // Truncation is caught at open.
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        assert!(Segment::open(&path, &s).is_err());
        // So is the leading magic (benches/damage found it unread).
        bytes[10] ^= 0xff;
        bytes[0] ^= 0x6e;
        std::fs::write(&path, &bytes).unwrap();
        let err = Segment::open(&path, &s).err().unwrap().to_string();
        assert!(err.contains("leading magic"), "{err}");
    }

    #[test]
    fn ordinal_and_short_key_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let s = schema();
        let n = 10_000;
        let path = dir.path().join("r_0.dat");
        write_segment(&path, &s, &keys_and_names(&s, n)).unwrap();
        let seg = Segment::open(&path, &s).unwrap();
        let firsts: Vec<u64> = seg.footer().columns[1]
            .pages
            .iter()
            .map(|p| p.first_row)
            .collect();
        assert_eq!(firsts, vec![0, 4064, 8128]);
        // k = 5000 lies in block 4 (rows 4096..5119).
        let idx = seg.short_key_index().unwrap().unwrap();
        let f = short_key::prefix_fields(&[DataType::Int64]);
        let mut b = Vec::new();
        assert!(short_key::encode_bound(
            &datafusion::common::ScalarValue::Int64(Some(5000)),
            &DataType::Int64,
            &f[0],
            &mut b
        ));
        assert_eq!(idx.row_range(Some(&b), Some(&b)), (4096, 5120));
        // A flipped byte in the index block is corruption.
        let block = seg.footer().short_key.clone().unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[block.offset as usize + 9] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let err = Segment::open(&path, &s)
            .unwrap()
            .short_key_index()
            .unwrap_err()
            .to_string();
        assert!(err.contains("short-key index: checksum mismatch"), "{err}");
    }

    #[test]
    fn page_bloom_filters_round_trip_and_are_checksummed() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = schema();
        s.bloom_filter_columns = vec!["V".into()];
        let n = 10_000;
        let batch = keys_and_names(&s, n);
        let path = dir.path().join("r_0.dat");
        write_segment(&path, &s, &batch).unwrap();
        let seg = Segment::open(&path, &s).unwrap();
        // Only the named column has blooms.
        assert!(seg.read_bloom(0, 0).unwrap().is_none());
        let key = |v: &str| vec![v.as_bytes().to_vec()];
        let bits = seg.read_bloom(1, 1).unwrap().unwrap();
        assert!(crate::storage::bloom::page_bloom_may_contain(
            &bits,
            &key("v5000")
        ));
        // Values of other pages: a 5% filter lets few through.
        let passed = (0..4000)
            .filter(|i| {
                crate::storage::bloom::page_bloom_may_contain(&bits, &key(&format!("v{i}")))
            })
            .count();
        assert!(passed < 400, "{passed} of 4000 absent values passed");
        // A flipped byte in the bloom block is corruption, not a skipped page.
        let b = seg.footer().columns[1].pages[1].bloom.clone().unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[b.offset as usize + 3] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let seg = Segment::open(&path, &s).unwrap();
        let err = seg.read_bloom(1, 1).unwrap_err().to_string();
        assert!(err.contains("bloom filter checksum"), "{err}");
    }
}

#[cfg(test)]
#[path = "segment_fuzz.rs"]
mod fuzz;

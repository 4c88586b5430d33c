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
use std::sync::{Arc, Mutex};

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::DataType;
use serde::{Deserialize, Serialize};
use tethys_common::config::ROWS_PER_PAGE;
use tethys_common::schema::TableSchema;
use tethys_common::{Result, TethysError};

use super::page;
use super::zone_map::ZoneMap;

/// Segment file magic.
pub const SEGMENT_MAGIC: &[u8; 4] = b"TSG1";
/// Segment format version written by this build.
pub const SEGMENT_FORMAT_VERSION: u32 = 1;
const TAIL_LEN: u64 = 12;
/// Upper bound on a footer, guarding against corrupt length fields.
const MAX_FOOTER: u64 = 256 << 20;
/// Upper bound on a page's bloom filter, guarding against corrupt lengths.
const MAX_BLOOM_BYTES: usize = 16 << 20;

/// One page of one column.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PageMeta {
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
}

/// What a writer reports about a segment it wrote.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SegmentInfo {
    pub file: String,
    pub num_rows: u64,
    pub size: u64,
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
        let mut pages = Vec::new();
        let mut start = 0;
        while start < n {
            let len = ROWS_PER_PAGE.min(n - start);
            let slice = arr.slice(start, len);
            let raw = page::encode_array(slice.as_ref())?;
            let stored = page::compress(&raw, &schema.compression)?;
            let pz = ZoneMap::of(slice.as_ref());
            zone.merge(&pz);
            buf.write_all(&stored)
                .map_err(|e| TethysError::io(wctx(), e))?;
            let page_offset = offset;
            offset += stored.len() as u64;
            let bloom = match with_bloom.then(|| tethys_common::plan::page_bloom(&slice)) {
                Some(Some(bits)) => {
                    buf.write_all(&bits)
                        .map_err(|e| TethysError::io(wctx(), e))?;
                    let block = BlockRef {
                        offset,
                        len: bits.len() as u32,
                        crc: crc32c::crc32c(&bits),
                    };
                    offset += bits.len() as u64;
                    Some(block)
                }
                _ => None,
            };
            pages.push(PageMeta {
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
        columns.push(ColumnMeta {
            name: col.name.clone(),
            column_type: col.column_type.sql(),
            zone,
            pages,
        });
    }
    let footer = SegmentFooter {
        format_version: SEGMENT_FORMAT_VERSION,
        num_rows: n as u64,
        columns,
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
        file: path
            .file_name()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string(),
        num_rows: n as u64,
        size,
    })
}

/// An open segment.
#[derive(Debug)]
pub struct Segment {
    path: PathBuf,
    file: File,
    footer: Arc<SegmentFooter>,
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

/// Footers (with their segment ids) by path, and the bytes they came from.
#[derive(Debug, Default)]
struct CachedFooters {
    map: HashMap<PathBuf, (Arc<SegmentFooter>, u64)>,
    bytes: usize,
}

/// Footer bytes the cache holds before it starts over.
const FOOTER_CACHE_BYTES: usize = 64 << 20;

impl FooterCache {
    fn get(&self, path: &Path) -> Option<(Arc<SegmentFooter>, u64)> {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.map.get(path).cloned()
    }

    /// Caches a footer; returns the id the segment is known by from now on.
    fn put(&self, path: &Path, footer: Arc<SegmentFooter>, bytes: usize) -> u64 {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if g.bytes + bytes > FOOTER_CACHE_BYTES {
            g.map.clear();
            g.bytes = 0;
        }
        g.map.insert(path.to_path_buf(), (footer, id));
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
            Some((footer, id)) if footer.columns.len() == schema.columns.len() => {
                let file = File::open(path).map_err(|e| {
                    TethysError::io(format!("opening segment {}", path.display()), e)
                })?;
                Ok(Segment {
                    path: path.to_path_buf(),
                    file,
                    footer,
                    id,
                })
            }
            _ => {
                let (mut seg, bytes) = Self::open_sized(path, schema)?;
                seg.id = cache.put(path, seg.footer.clone(), bytes);
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
        let footer: SegmentFooter = serde_json::from_slice(&fbytes)
            .map_err(|e| corrupt(format!("footer does not parse: {e}")))?;
        if footer.format_version != SEGMENT_FORMAT_VERSION {
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
            for p in &c.pages {
                if p.offset + p.stored_len as u64 > len - TAIL_LEN - flen {
                    return Err(corrupt(format!(
                        "page of column {} lies outside the data area",
                        c.name
                    )));
                }
            }
        }
        Ok((
            Segment {
                path: path.to_path_buf(),
                file,
                footer: Arc::new(footer),
                id: 0,
            },
            flen as usize,
        ))
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
        self.file
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
        let cm = self
            .footer
            .columns
            .get(col)
            .ok_or_else(|| TethysError::Internal(format!("segment has no column {col}")))?;
        let pm = cm.pages.get(page_idx).ok_or_else(|| {
            TethysError::Internal(format!("column {} has no page {page_idx}", cm.name))
        })?;
        let corrupt = |why: String| {
            TethysError::Corruption(format!(
                "segment {} column {} page {page_idx}: {why}",
                self.path.display(),
                cm.name
            ))
        };
        let mut stored = vec![0u8; pm.stored_len as usize];
        self.file
            .read_exact_at(&mut stored, pm.offset)
            .map_err(|e| TethysError::io(format!("reading segment {}", self.path.display()), e))?;
        if crc32c::crc32c(&stored) != pm.crc {
            return Err(corrupt("checksum mismatch".into()));
        }
        let raw =
            page::decompress(&stored, pm.raw_len as usize).map_err(|e| corrupt(e.to_string()))?;
        let arr = page::decode_array(&raw, dt).map_err(|e| corrupt(e.to_string()))?;
        if arr.len() != pm.num_rows as usize {
            return Err(corrupt(format!(
                "{} rows, footer says {}",
                arr.len(),
                pm.num_rows
            )));
        }
        Ok((arr, pm.stored_len as u64))
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
        let col = |n: &str, t: &str| Column {
            name: n.into(),
            column_type: ColumnType::parse(t).unwrap(),
            nullable: true,
            is_key: false,
            default: None,
            comment: String::new(),
            aggregation: None,
        };
        TableSchema {
            columns: vec![col("k", "bigint"), col("v", "varchar(10)")],
            num_key_columns: 1,
            compression: "lz4".into(),
            bloom_filter_columns: vec![],
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
        assert!(tethys_common::plan::page_bloom_may_contain(
            &bits,
            &key("v5000")
        ));
        // Values of other pages: a 5% filter lets few through.
        let passed = (0..4000)
            .filter(|i| tethys_common::plan::page_bloom_may_contain(&bits, &key(&format!("v{i}"))))
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

//! Merge-on-write UNIQUE tables: delete bitmaps and the key lookups that
//! fill them.
//!
//! When a load of a merge-on-write table is published at version `v`, every
//! key it writes is looked up in the tablet's older segments (and in its own
//! earlier segments); the rows found are superseded and go into a roaring
//! bitmap of their segment, tagged with `v`. A read at version `V` drops the
//! rows in the union of a segment's bitmaps tagged `<= V`, so reads never
//! merge by key and every predicate can be pushed into the segment scans.
//!
//! Lookups use a [`KeyIndex`] per segment: its key columns in the
//! row format, in row order. A segment is sorted by key and (after the
//! load-time combine) holds each key once, so a row's ordinal is its
//! position in the index and a key is found by binary search.
//!
//! On disk a tablet's bitmaps are files `<id>.dbm` (magic, CRC32C, entries)
//! listed in its meta; a publish adds one, a compaction rewrites them into
//! one. Both become part of the tablet only with the meta rewrite, so a
//! crash leaves an unreferenced file that opening the tablet removes.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::row::{RowConverter, Rows, SortField};
use roaring::RoaringBitmap;
use tethys_common::fsutil::write_atomic;
use tethys_common::schema::TableSchema;
use tethys_common::{Result, TethysError};

use super::clock_cache::{ClockCache, Weigh};
use super::segment::Segment;

const MAGIC: &[u8; 4] = b"TDB1";

/// A segment of a rowset: (rowset id, segment number).
pub type SegmentRef = (String, u32);

/// Rows deleted by later loads, per segment and per version.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct DeleteBitmap {
    entries: BTreeMap<SegmentRef, BTreeMap<i64, RoaringBitmap>>,
}

impl DeleteBitmap {
    /// Marks `rows` of segment `segment` of `rowset` deleted from `version` on.
    pub fn add(&mut self, rowset: &str, segment: u32, version: i64, rows: &RoaringBitmap) {
        if rows.is_empty() {
            return;
        }
        *self
            .entries
            .entry((rowset.to_string(), segment))
            .or_default()
            .entry(version)
            .or_default() |= rows;
    }

    /// Marks one row deleted from `version` on.
    pub fn insert(&mut self, rowset: &str, segment: u32, version: i64, row: u32) {
        self.entries
            .entry((rowset.to_string(), segment))
            .or_default()
            .entry(version)
            .or_default()
            .insert(row);
    }

    /// Adds every entry of `other`.
    pub fn merge(&mut self, other: &DeleteBitmap) {
        for ((r, s), versions) in &other.entries {
            for (v, rows) in versions {
                self.add(r, *s, *v, rows);
            }
        }
    }

    /// The rows of a segment deleted as of `version`; `None` if none are.
    pub fn at(&self, rowset: &str, segment: u32, version: i64) -> Option<RoaringBitmap> {
        let versions = self.entries.get(&(rowset.to_string(), segment))?;
        let mut out = RoaringBitmap::new();
        for (_, rows) in versions.range(..=version) {
            out |= rows;
        }
        (!out.is_empty()).then_some(out)
    }

    /// The entries of a segment tagged after `version`.
    pub fn after(&self, rowset: &str, segment: u32, version: i64) -> Vec<(i64, &RoaringBitmap)> {
        self.entries
            .get(&(rowset.to_string(), segment))
            .map(|vs| {
                vs.range(version + 1..)
                    .map(|(v, rows)| (*v, rows))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Drops the entries of rowsets `keep` refuses.
    pub fn retain_rowsets(&mut self, keep: impl Fn(&str) -> bool) {
        self.entries.retain(|(r, _), _| keep(r));
    }

    /// Whether no row is deleted.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Deleted rows of `rowset` as of the newest version.
    pub fn cardinality_of(&self, rowset: &str) -> u64 {
        self.entries
            .iter()
            .filter(|((r, _), _)| r == rowset)
            .map(|((r, s), _)| self.at(r, *s, i64::MAX).map_or(0, |b| b.len()))
            .sum()
    }

    /// The file form: magic, CRC32C of the body, then per entry the rowset
    /// id, segment, version and the portable roaring serialization.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut body = Vec::new();
        let n: usize = self.entries.values().map(|v| v.len()).sum();
        body.extend_from_slice(&(n as u32).to_le_bytes());
        for ((r, s), versions) in &self.entries {
            for (v, rows) in versions {
                body.extend_from_slice(&(r.len() as u16).to_le_bytes());
                body.extend_from_slice(r.as_bytes());
                body.extend_from_slice(&s.to_le_bytes());
                body.extend_from_slice(&v.to_le_bytes());
                body.extend_from_slice(&(rows.serialized_size() as u32).to_le_bytes());
                rows.serialize_into(&mut body)
                    .map_err(|e| TethysError::Internal(format!("encoding a delete bitmap: {e}")))?;
            }
        }
        let mut out = Vec::with_capacity(body.len() + 8);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// Parses [`DeleteBitmap::encode`]'s output; `what` names the file in errors.
    pub fn decode(bytes: &[u8], what: &Path) -> Result<DeleteBitmap> {
        let corrupt =
            |why: &str| TethysError::Corruption(format!("delete bitmap {}: {why}", what.display()));
        if bytes.len() < 12 || &bytes[..4] != MAGIC {
            return Err(corrupt("bad magic"));
        }
        let body = &bytes[8..];
        if crc32c::crc32c(body).to_le_bytes() != bytes[4..8] {
            return Err(corrupt("checksum mismatch"));
        }
        let mut at = 0usize;
        let mut take = |len: usize| -> Result<&[u8]> {
            let s = body
                .get(at..at + len)
                .ok_or_else(|| corrupt("truncated entry"))?;
            at += len;
            Ok(s)
        };
        let u32_of = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let n = u32_of(take(4)?);
        let mut out = DeleteBitmap::default();
        for _ in 0..n {
            let id_len = take(2)?;
            let id_len = u16::from_le_bytes([id_len[0], id_len[1]]) as usize;
            let rowset = std::str::from_utf8(take(id_len)?)
                .map_err(|_| corrupt("rowset id is not UTF-8"))?
                .to_string();
            let segment = u32_of(take(4)?);
            let mut v = [0u8; 8];
            v.copy_from_slice(take(8)?);
            let version = i64::from_le_bytes(v);
            let len = u32_of(take(4)?) as usize;
            let rows = RoaringBitmap::deserialize_from(take(len)?)
                .map_err(|e| corrupt(&format!("bad bitmap: {e}")))?;
            out.add(&rowset, segment, version, &rows);
        }
        Ok(out)
    }

    /// The encoded bitmap as base64 text, for keeping it in the JSON meta.
    pub fn to_text(&self) -> Result<String> {
        use base64::Engine;
        Ok(base64::engine::general_purpose::STANDARD.encode(self.encode()?))
    }

    /// Parses [`DeleteBitmap::to_text`]'s output; `what` names it in errors.
    pub fn from_text(text: &str, what: &Path) -> Result<DeleteBitmap> {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| {
                TethysError::Corruption(format!("delete bitmap {}: {e}", what.display()))
            })?;
        DeleteBitmap::decode(&bytes, what)
    }

    /// Writes the bitmap to `path` (temporary file, fsync, rename).
    pub fn write(&self, path: &Path) -> Result<()> {
        write_atomic(path, &self.encode()?)
    }

    /// Reads a bitmap file.
    pub fn read(path: &Path) -> Result<DeleteBitmap> {
        let bytes = fs::read(path)
            .map_err(|e| TethysError::io(format!("reading {}", path.display()), e))?;
        DeleteBitmap::decode(&bytes, path)
    }
}

/// Converts key columns to the row format all of a tablet's key indexes share.
#[derive(Debug)]
pub struct KeyCodec {
    converter: RowConverter,
    types: Vec<arrow::datatypes::DataType>,
}

impl KeyCodec {
    /// The codec of `schema`'s key columns.
    pub fn new(schema: &TableSchema) -> Result<KeyCodec> {
        let arrow = schema.arrow_schema();
        let types: Vec<_> = (0..schema.num_key_columns)
            .map(|k| arrow.field(k).data_type().clone())
            .collect();
        let converter =
            RowConverter::new(types.iter().map(|t| SortField::new(t.clone())).collect())?;
        Ok(KeyCodec { converter, types })
    }

    /// The key index of rows about to be written as a segment (sorted by
    /// key, full table columns).
    pub fn index_of_batch(&self, batch: &arrow::array::RecordBatch) -> Result<KeyIndex> {
        let columns: Vec<ArrayRef> = (0..self.types.len())
            .map(|k| batch.column(k).clone())
            .collect();
        Ok(self.converter.convert_columns(&columns)?.into())
    }

    /// The key index of the segment at `path`: its key columns read page by page.
    pub fn index(&self, path: &Path, schema: &TableSchema) -> Result<KeyIndex> {
        let seg = Segment::open(path, schema)?;
        let mut rows = self.converter.empty_rows(seg.footer().num_rows as usize, 0);
        for page in 0..seg.num_pages() {
            let columns = seg.read_plain_pages(&self.types, page)?;
            self.converter.append(&mut rows, &columns)?;
        }
        Ok(rows.into())
    }
}

/// A segment's keys in row order (which is key order), with each key's
/// first 16 bytes as a number so most comparisons are one integer compare.
#[derive(Debug)]
pub struct KeyIndex {
    rows: Rows,
    prefixes: Vec<u128>,
}

impl Weigh for Arc<KeyIndex> {
    fn bytes(&self) -> usize {
        self.rows.size() + self.prefixes.capacity() * std::mem::size_of::<u128>()
    }
}

/// Key indexes of merge-on-write segments by segment path, bounded by bytes
/// across all tablets of a backend (`--pk-index-cache-mb`).
pub type KeyIndexCache = ClockCache<PathBuf, Arc<KeyIndex>>;

/// Default bound of the key index cache: 10% of the machine's memory.
pub fn default_key_index_cache_bytes() -> usize {
    super::page_cache::default_capacity() / 2
}

impl KeyIndex {
    /// Rows in the segment.
    pub fn len(&self) -> usize {
        self.rows.num_rows()
    }

    /// Whether the segment is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `i` here against row `j` of `other` (the same codec): the
    /// 16-byte prefixes decide all but ties, which compare whole rows.
    fn cmp_with(&self, i: usize, other: &KeyIndex, j: usize) -> Ordering {
        match self.prefixes[i].cmp(&other.prefixes[j]) {
            Ordering::Equal => self.rows.row(i).cmp(&other.rows.row(j)),
            o => o,
        }
    }

    /// The first row at or after `from` whose key is not below row `j` of `other`.
    fn lower_bound(&self, other: &KeyIndex, j: usize, from: usize) -> usize {
        let (mut lo, mut hi) = (from, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.cmp_with(mid, other, j) == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The row holding the key of row `j` of `other`, if any.
    pub fn find(&self, other: &KeyIndex, j: usize) -> Option<u32> {
        if j >= other.len() {
            return None;
        }
        let i = self.lower_bound(other, j, 0);
        (i < self.len() && self.cmp_with(i, other, j) == Ordering::Equal).then_some(i as u32)
    }

    /// The rows of this segment whose keys `newer` also holds.
    pub fn superseded_by(&self, newer: &KeyIndex) -> RoaringBitmap {
        let mut out = RoaringBitmap::new();
        if self.is_empty() || newer.is_empty() {
            return out;
        }
        // Disjoint key ranges: nothing to look up.
        if newer.cmp_with(newer.len() - 1, self, 0) == Ordering::Less
            || self.cmp_with(self.len() - 1, newer, 0) == Ordering::Less
        {
            return out;
        }
        // Both sides are sorted: each lookup starts where the last ended.
        let mut from = 0;
        for j in 0..newer.len() {
            from = self.lower_bound(newer, j, from);
            if from >= self.len() {
                break;
            }
            if self.cmp_with(from, newer, j) == Ordering::Equal {
                out.insert(from as u32);
            }
        }
        out
    }
}

/// The first 16 bytes of a row-format key as a big-endian number (shorter
/// keys padded with zeros): ordered as the bytes are.
fn prefix(bytes: &[u8]) -> u128 {
    let mut buf = [0u8; 16];
    let n = bytes.len().min(16);
    buf[..n].copy_from_slice(&bytes[..n]);
    u128::from_be_bytes(buf)
}

impl From<Rows> for KeyIndex {
    fn from(rows: Rows) -> KeyIndex {
        let prefixes = (0..rows.num_rows())
            .map(|i| prefix(rows.row(i).as_ref()))
            .collect();
        KeyIndex { rows, prefixes }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use std::sync::Arc;

    fn index(keys: &[i64]) -> KeyIndex {
        let conv =
            RowConverter::new(vec![SortField::new(arrow::datatypes::DataType::Int64)]).unwrap();
        let rows = conv
            .convert_columns(&[Arc::new(Int64Array::from(keys.to_vec())) as ArrayRef])
            .unwrap();
        rows.into()
    }

    #[test]
    fn lookups_find_shared_keys() {
        let old = index(&[1, 3, 5, 7, 9, 11]);
        let new = index(&[0, 3, 4, 9, 12]);
        assert_eq!(
            old.superseded_by(&new).iter().collect::<Vec<_>>(),
            vec![1, 4]
        );
        assert_eq!(old.find(&new, 1), Some(1));
        assert_eq!(old.find(&new, 2), None);
        assert_eq!(old.find(&new, 9), None);
        // Keys longer than the 16-byte prefix compare in full.
        let conv =
            RowConverter::new(vec![SortField::new(arrow::datatypes::DataType::Utf8)]).unwrap();
        let strings = |v: &[&str]| -> KeyIndex {
            conv.convert_columns(&[
                Arc::new(arrow::array::StringArray::from(v.to_vec())) as ArrayRef
            ])
            .unwrap()
            .into()
        };
        let long = "a".repeat(40);
        let old = strings(&["", "a", &format!("{long}1"), &format!("{long}2"), "b"]);
        let new = strings(&["a", &format!("{long}2"), &format!("{long}3")]);
        assert_eq!(
            old.superseded_by(&new).iter().collect::<Vec<_>>(),
            vec![1, 3]
        );
        assert!(old.superseded_by(&index(&[20, 30])).is_empty());
        assert!(old.superseded_by(&index(&[])).is_empty());
    }

    #[test]
    fn versions_union_and_file_round_trip() {
        let mut b = DeleteBitmap::default();
        b.add("r1", 0, 3, &RoaringBitmap::from_iter([1u32, 2]));
        b.add("r1", 0, 5, &RoaringBitmap::from_iter([7u32]));
        b.add("r2", 1, 5, &RoaringBitmap::from_iter([0u32]));
        assert_eq!(b.at("r1", 0, 2), None);
        assert_eq!(b.at("r1", 0, 4).unwrap().len(), 2);
        assert_eq!(b.at("r1", 0, 5).unwrap().len(), 3);
        assert_eq!(b.after("r1", 0, 3).len(), 1);
        assert_eq!(b.cardinality_of("r1"), 3);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.dbm");
        b.write(&p).unwrap();
        assert_eq!(DeleteBitmap::read(&p).unwrap(), b);
        assert_eq!(
            DeleteBitmap::from_text(&b.to_text().unwrap(), &p).unwrap(),
            b
        );
        assert!(DeleteBitmap::from_text("not base64!", &p).is_err());
        // Every flipped byte is caught.
        let bytes = fs::read(&p).unwrap();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(DeleteBitmap::decode(&bad, &p).is_err(), "byte {i}");
        }
        b.retain_rowsets(|r| r == "r2");
        assert_eq!(b.at("r1", 0, 9), None);
        assert!(b.at("r2", 1, 9).is_some());
    }
}

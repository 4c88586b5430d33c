//! The tablet's metadata on disk: `meta.json` (magic + crc32c + JSON) with
//! the published rowsets and the version, and the pending record of a
//! transaction's rowset.

use super::*;

pub(super) const META_MAGIC: &[u8; 4] = b"TMT1";
pub(super) const META_FILE: &str = "meta.json";
/// The name of a tablet directory's meta file.
pub(crate) const META_FILE_NAME: &str = META_FILE;
pub(super) const META_FORMAT_VERSION: u32 = 1;

/// Versions (rowsets) a tablet may hold before new loads are refused, as
/// Doris' `max_tablet_version_num`; compaction keeps tablets below it.
pub const MAX_TABLET_VERSION_NUM: usize = 2000;

/// A published rowset: the output of one load, visible from `start_version`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RowsetMeta {
    pub rowset_id: String,
    pub start_version: i64,
    pub end_version: i64,
    pub txn_id: i64,
    pub num_rows: u64,
    pub data_size: u64,
    pub segments: Vec<SegmentInfo>,
    /// Written by compaction: its segments are one sorted run, so a read
    /// merges them as one source (a load's segments may overlap).
    #[serde(default)]
    pub sorted_run: bool,
    /// A DELETE's version: no rows, a predicate hiding rows of older rowsets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_predicate: Option<DeletePredicate>,
    /// Merge-on-write tables: the rows this rowset's publish superseded
    /// (`DeleteBitmap::to_text`), kept in the meta so a publish writes one
    /// file; a compaction moves them into the tablet's bitmap file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_bitmap: Option<String>,
}

/// A DELETE's conjunction of conditions.
pub type DeletePredicate = Vec<DeleteCondition>;

/// The predicates of the DELETEs among `rowsets` published after `r`.
pub fn deletes_after(rowsets: &[RowsetMeta], r: &RowsetMeta) -> Vec<DeletePredicate> {
    rowsets
        .iter()
        .filter(|d| d.start_version > r.end_version)
        .filter_map(|d| d.delete_predicate.clone())
        .collect()
}

impl RowsetMeta {
    /// What this rowset adds to the tablet's compaction score: the sorted
    /// runs a read of it must merge.
    pub fn runs(&self) -> usize {
        if self.sorted_run {
            1
        } else {
            self.segments.len().max(1)
        }
    }
}

/// A rowset compaction replaced, kept for reads of older snapshot versions
/// until no reader can need it. Only in memory: after a restart no query
/// can need one, and opening the tablet removes their files.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StaleRowset {
    pub rowset: RowsetMeta,
    /// When it was replaced (ms since the epoch).
    pub stale_since_ms: u64,
}

/// The durable state of a tablet.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TabletMeta {
    pub format_version: u32,
    pub tablet_id: i64,
    pub table_id: i64,
    pub partition_id: i64,
    pub schema: TableSchema,
    /// Highest published version.
    pub version: i64,
    pub rowsets: Vec<RowsetMeta>,
    /// Rowsets starting at or above this version are cumulative (small,
    /// recent); those below it make up the base.
    #[serde(default)]
    pub cumulative_point: i64,
    /// Merge-on-write tables: the delete-bitmap files (`*.dbm`) holding
    /// which rows of the rowsets later loads superseded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delete_bitmap_files: Vec<String>,
    /// Merge-on-write tables: whether the delete bitmaps cover every rowset
    /// (false for a tablet written before they existed: opening builds them).
    #[serde(default)]
    pub delete_bitmaps_built: bool,
}

/// Segments a transaction has written but not yet published.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PendingRowset {
    pub txn_id: i64,
    pub rowset_id: String,
    pub segments: Vec<SegmentInfo>,
    /// Set for a DELETE's transaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_predicate: Option<DeletePredicate>,
}

/// Summary numbers of a tablet.
#[derive(Debug, Clone, Copy, Default)]
pub struct TabletStats {
    pub version: i64,
    pub row_count: u64,
    pub data_size: u64,
    pub rowset_count: usize,
    pub segment_count: usize,
    /// Sorted runs a full read merges (Doris' compaction score).
    pub compaction_score: usize,
    pub cumulative_point: i64,
}

pub(super) fn encode_envelope(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() + 8);
    out.extend_from_slice(META_MAGIC);
    out.extend_from_slice(&crc32c::crc32c(json).to_le_bytes());
    out.extend_from_slice(json);
    out
}

pub(super) fn decode_envelope<'a>(bytes: &'a [u8], what: &Path) -> Result<&'a [u8]> {
    if bytes.len() < 8 || &bytes[..4] != META_MAGIC {
        return Err(TethysError::Corruption(format!(
            "{}: bad magic",
            what.display()
        )));
    }
    let crc = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    if crc32c::crc32c(&bytes[8..]) != crc {
        return Err(TethysError::Corruption(format!(
            "{}: checksum mismatch",
            what.display()
        )));
    }
    Ok(&bytes[8..])
}

pub(crate) fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let bytes =
        fs::read(path).map_err(|e| TethysError::io(format!("reading {}", path.display()), e))?;
    let json = decode_envelope(&bytes, path)?;
    serde_json::from_slice(json)
        .map_err(|e| TethysError::Corruption(format!("{}: {e}", path.display())))
}

pub(crate) fn write_json<T: Serialize>(path: &Path, v: &T) -> Result<()> {
    let json = serde_json::to_vec(v).map_err(|e| TethysError::Internal(e.to_string()))?;
    write_atomic(path, &encode_envelope(&json))
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A tablet meta (or pending rowset record) with any byte flipped,
        /// or cut anywhere, is refused naming the file, never read as
        /// another meta.
        #[test]
        fn fuzz_damaged_envelopes_are_refused(
            json in "[ -~]{0,200}",
            at in proptest::prelude::any::<proptest::sample::Index>(),
            flip in 1u8..=255,
            cut in proptest::prelude::any::<bool>(),
        ) {
            let what = Path::new("/data/7/meta.json");
            let mut bytes = encode_envelope(json.as_bytes());
            proptest::prop_assert_eq!(decode_envelope(&bytes, what).ok(), Some(json.as_bytes()));
            let i = at.index(bytes.len());
            if cut {
                bytes.truncate(i);
            } else {
                bytes[i] ^= flip;
            }
            let err = decode_envelope(&bytes, what).err().map(|e| e.to_string());
            proptest::prop_assert!(
                err.as_deref().is_some_and(|e| e.contains("/data/7/meta.json")),
                "{:?}",
                err
            );
        }
    }
}

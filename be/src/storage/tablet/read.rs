//! Reading a tablet at a version: its rowsets and segments, the DELETEs
//! and delete bitmaps that hide rows of each, and the lease that keeps the
//! files on disk while a scan reads them.

use super::*;

/// One segment file a read scans, with the rows of it later loads of a
/// merge-on-write table deleted (as of the read's version).
#[derive(Debug, Clone)]
pub struct SegmentRead {
    pub path: PathBuf,
    pub deleted_rows: Option<Arc<RoaringBitmap>>,
}

/// Keeps a tablet's stale rowsets on disk while a scan reads the tablet.
#[derive(Debug)]
pub struct ReadLease(Arc<AtomicUsize>);

impl Drop for ReadLease {
    fn drop(&mut self) {
        self.0.fetch_sub(1, AtomicOrdering::Release);
    }
}

/// How full rows of a table with `schema` merge by key.
pub fn merge_spec(schema: &TableSchema) -> MergeSpec {
    let all: Vec<usize> = (0..schema.columns.len()).collect();
    merge_spec_of(schema, &all)
}

/// How batches of the table columns `columns` (every key column first, in
/// key order) merge by key.
pub fn merge_spec_of(schema: &TableSchema, columns: &[usize]) -> MergeSpec {
    MergeSpec {
        keys: (0..schema.num_key_columns).collect(),
        rules: columns.iter().map(|&c| schema.merge_rule(c)).collect(),
        combine: schema.keys_type != KeysType::Duplicate,
    }
}

impl Tablet {
    /// The rows of segment `segment` of `rowset` that later loads of a
    /// merge-on-write table deleted as of `version`.
    pub fn deleted_rows(
        &self,
        rowset: &str,
        segment: usize,
        version: i64,
    ) -> Option<RoaringBitmap> {
        let m = self.mow.as_ref()?;
        lock_r(&m.bitmaps).at(rowset, segment as u32, version)
    }

    /// Rows of `rowset` deleted by later loads as of the newest version.
    pub fn deleted_row_count(&self, rowset: &str) -> u64 {
        self.mow
            .as_ref()
            .map_or(0, |m| lock_r(&m.bitmaps).cardinality_of(rowset))
    }

    /// The rowsets visible at `version`, oldest first.
    pub fn rowsets_at(&self, version: i64) -> Result<Vec<RowsetMeta>> {
        // The rowsets only, not the whole meta (its schema's names): every
        // scan of every tablet starts here.
        let (tablet_id, rowsets) = {
            let meta = self.meta.read().unwrap_or_else(|p| p.into_inner());
            if meta.version < version {
                return Err(TethysError::Internal(format!(
                    "tablet {} is at version {}, query asked for {version}",
                    meta.tablet_id, meta.version
                )));
            }
            (meta.tablet_id, meta.rowsets.clone())
        };
        let mut rs: Vec<&RowsetMeta> = rowsets
            .iter()
            .filter(|r| r.end_version <= version)
            .collect();
        // A compacted rowset that ends after `version` replaced rowsets a
        // reader at `version` still needs: the largest stale rowsets inside
        // its range, up to `version` (merges nest, so they do not overlap).
        let straddling: Vec<&RowsetMeta> = rowsets
            .iter()
            .filter(|r| r.start_version <= version && version < r.end_version)
            .collect();
        // Most reads are at the newest version: no stale rowset is needed.
        let stale = if straddling.is_empty() {
            vec![]
        } else {
            lock(&self.stale).clone()
        };
        for r in straddling {
            let inside: Vec<&RowsetMeta> = stale
                .iter()
                .map(|s| &s.rowset)
                .filter(|s| s.start_version >= r.start_version && s.end_version <= version)
                .collect();
            let span = |x: &RowsetMeta| (x.start_version, x.end_version);
            let mut covered: Vec<&RowsetMeta> = Vec::new();
            for a in &inside {
                let contained = inside.iter().any(|b| {
                    b.start_version <= a.start_version
                        && a.end_version <= b.end_version
                        && span(b) != span(a)
                });
                // Equal ranges hold the same rows: one of them.
                if !contained && !covered.iter().any(|c| span(c) == span(a)) {
                    covered.push(a);
                }
            }
            let reaches = covered.iter().map(|c| c.start_version).min();
            if reaches != Some(r.start_version) {
                return Err(TethysError::Backend(format!(
                    "[E-230]versions already merged: tablet {} cannot be read at version {version} any more, \
                     compaction merged versions {}-{}; retry the query",
                    tablet_id, r.start_version, r.end_version
                )));
            }
            rs.append(&mut covered);
        }
        rs.sort_by_key(|r| r.start_version);
        Ok(rs.into_iter().cloned().collect())
    }

    /// Segment files visible at `version`, oldest first.
    pub fn segments_at(&self, version: i64) -> Result<Vec<PathBuf>> {
        Ok(self
            .read_plan(version)?
            .into_iter()
            .flat_map(|(segments, _)| segments.into_iter().map(|s| s.path))
            .collect())
    }

    /// What a read at `version` scans: each data rowset's segment files,
    /// oldest first, with the rows later loads of a merge-on-write table
    /// deleted and the predicates of the DELETEs published after the rowset
    /// (its rows they hold for are deleted).
    pub fn read_plan(&self, version: i64) -> Result<Vec<(Vec<SegmentRead>, Vec<DeletePredicate>)>> {
        let rowsets = self.rowsets_at(version)?;
        let bitmaps = self.mow.as_ref().map(|m| lock_r(&m.bitmaps));
        Ok(rowsets
            .iter()
            .filter(|r| !r.segments.is_empty())
            .map(|r| {
                let deletes = deletes_after(&rowsets, r);
                let files = r
                    .segments
                    .iter()
                    .enumerate()
                    .map(|(i, s)| SegmentRead {
                        path: self.dir.join(&s.file),
                        deleted_rows: bitmaps
                            .as_ref()
                            .and_then(|b| b.at(&r.rowset_id, i as u32, version))
                            .map(Arc::new),
                    })
                    .collect();
                (files, deletes)
            })
            .collect())
    }

    /// Marks a scan reading this tablet's files until the lease drops.
    pub fn lease(&self) -> ReadLease {
        self.readers.fetch_add(1, AtomicOrdering::Acquire);
        ReadLease(self.readers.clone())
    }
}

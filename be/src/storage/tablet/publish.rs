//! Publishing a transaction: its pending rowset moves into the meta at its
//! version in one atomic rewrite; for merge-on-write UNIQUE tables the rows
//! it supersedes are marked in delete bitmaps first.

use super::*;

/// The in-memory state of a merge-on-write tablet.
#[derive(Debug)]
pub(super) struct MergeOnWrite {
    pub(super) codec: KeyCodec,
    pub(super) bitmaps: RwLock<DeleteBitmap>,
    /// Key indexes of segments by path, built on first lookup; shared by
    /// the engine's tablets and bounded by bytes (an evicted index is read
    /// back from its segment when needed).
    pub(super) keys: Arc<KeyIndexCache>,
}

impl MergeOnWrite {
    /// The state of a merge-on-write table's tablet; `None` for others.
    pub(super) fn of(
        schema: &TableSchema,
        keys: &Arc<KeyIndexCache>,
    ) -> Result<Option<MergeOnWrite>> {
        if schema.keys_type != KeysType::Unique || !schema.merge_on_write {
            return Ok(None);
        }
        Ok(Some(MergeOnWrite {
            codec: KeyCodec::new(schema)?,
            bitmaps: RwLock::new(DeleteBitmap::default()),
            keys: keys.clone(),
        }))
    }
}

impl Tablet {
    /// Makes transaction `txn_id` visible at `version`. Idempotent. For a
    /// merge-on-write table the rows its keys supersede are found and
    /// recorded in a delete bitmap first, in the same meta rewrite.
    pub fn publish(&self, txn_id: i64, version: i64) -> Result<()> {
        let _g = lock(&self.write_lock);
        self.check_live()?;
        let mut meta = self.meta();
        if meta.rowsets.iter().any(|r| r.txn_id == txn_id) {
            return Ok(());
        }
        let pending = lock(&self.pending).get(&txn_id).cloned();
        if pending.is_none() && version <= meta.version {
            return Ok(());
        }
        let mut superseded = None;
        let mut refilled = vec![];
        if let Some(p) = &pending {
            let mut rowset = RowsetMeta {
                rowset_id: p.rowset_id.clone(),
                start_version: version,
                end_version: version,
                txn_id,
                num_rows: p.segments.iter().map(|s| s.num_rows).sum(),
                data_size: p.segments.iter().map(|s| s.size).sum(),
                segments: p.segments.clone(),
                sorted_run: p.segments.len() <= 1,
                delete_predicate: p.delete_predicate.clone(),
                delete_bitmap: None,
            };
            if let Some(m) = &self.mow
                && !rowset.segments.is_empty()
            {
                // Keys are looked up in exactly the versions below this one.
                if version != meta.version + 1 {
                    return Err(TethysError::Backend(format!(
                        "tablet {} of a merge-on-write table is at version {}: version {version} \
                         is published after version {}; retried when that one is",
                        meta.tablet_id,
                        meta.version,
                        meta.version + 1
                    )));
                }
                refilled = self.refill_partial(m, &meta, &mut rowset, version)?;
                let found = {
                    let known = lock_r(&m.bitmaps);
                    self.superseded(m, &meta.schema, &meta.rowsets, &rowset, version, &known)?
                };
                if !found.is_empty() {
                    rowset.delete_bitmap = Some(found.to_text()?);
                    superseded = Some(found);
                }
            }
            meta.rowsets.push(rowset);
        }
        meta.version = meta.version.max(version);
        write_json(&self.dir.join(META_FILE), &meta)?;
        // The bitmap goes in before the meta: entries of a version no reader
        // can ask for yet.
        if let (Some(m), Some(found)) = (&self.mow, &superseded) {
            lock_w(&m.bitmaps).merge(found);
        }
        *self.meta.write().unwrap_or_else(|p| p.into_inner()) = meta;
        if pending.is_some() {
            lock(&self.pending).remove(&txn_id);
            let _ = fs::remove_file(self.dir.join(format!("txn_{txn_id}.json")));
        }
        // Segments a re-fill replaced (the pending record named them).
        for f in refilled {
            if let Some(m) = &self.mow {
                m.keys.remove(&self.dir.join(&f));
            }
            let _ = fs::remove_file(self.dir.join(f));
        }
        Ok(())
    }

    /// Caches the key index of a segment being written from its rows (so
    /// publishing need not read the keys back). No-op unless merge-on-write.
    pub(crate) fn remember_keys(&self, file: &str, batch: &RecordBatch) -> Result<()> {
        if let Some(m) = &self.mow {
            let index = m.codec.index_of_batch(batch)?;
            m.keys.insert(self.dir.join(file), Arc::new(index));
        }
        Ok(())
    }

    /// The key index of segment file `file`, built on first use.
    pub(super) fn key_index(
        &self,
        m: &MergeOnWrite,
        schema: &TableSchema,
        file: &str,
    ) -> Result<Arc<KeyIndex>> {
        let path = self.dir.join(file);
        if let Some(k) = m.keys.get(&path) {
            return Ok(k);
        }
        let k = Arc::new(m.codec.index(&path, schema)?);
        m.keys.insert(path, k.clone());
        Ok(k)
    }

    /// The rows of the `older` rowsets, and of `new`'s own earlier segments,
    /// holding keys `new` writes again, tagged `version`; rows `known`
    /// already deletes are left out.
    pub(super) fn superseded(
        &self,
        m: &MergeOnWrite,
        schema: &TableSchema,
        older: &[RowsetMeta],
        new: &RowsetMeta,
        version: i64,
        known: &DeleteBitmap,
    ) -> Result<DeleteBitmap> {
        let mut out = DeleteBitmap::default();
        for (j, seg) in new.segments.iter().enumerate() {
            if seg.deletes {
                let all = RoaringBitmap::from_iter(0..seg.num_rows as u32);
                out.add(&new.rowset_id, j as u32, version, &all);
            }
            let newer = self.key_index(m, schema, &seg.file)?;
            let targets = older
                .iter()
                .flat_map(|r| {
                    r.segments
                        .iter()
                        .enumerate()
                        .map(move |(i, s)| (r.rowset_id.as_str(), i, s))
                })
                .chain(
                    new.segments
                        .iter()
                        .take(j)
                        .enumerate()
                        .map(|(i, s)| (new.rowset_id.as_str(), i, s)),
                );
            for (rowset, i, s) in targets {
                let mut rows = self.key_index(m, schema, &s.file)?.superseded_by(&newer);
                if rows.is_empty() {
                    continue;
                }
                if let Some(done) = known.at(rowset, i as u32, i64::MAX) {
                    rows -= done;
                }
                out.add(rowset, i as u32, version, &rows);
            }
        }
        Ok(out)
    }

    /// Builds the delete bitmaps of a merge-on-write tablet written before
    /// they existed: each rowset's keys supersede the older rowsets' rows.
    pub(super) fn build_delete_bitmaps(&self) -> Result<()> {
        let Some(m) = &self.mow else {
            return Ok(());
        };
        let _g = lock(&self.write_lock);
        let mut meta = self.meta();
        let mut all = DeleteBitmap::default();
        for (n, r) in meta.rowsets.iter().enumerate() {
            let older = meta.rowsets.get(..n).unwrap_or_default();
            let found = self.superseded(m, &meta.schema, older, r, r.start_version, &all)?;
            all.merge(&found);
        }
        let old_files = std::mem::take(&mut meta.delete_bitmap_files);
        if !all.is_empty() {
            let file = format!("rebuilt_{}.dbm", meta.version);
            all.write(&self.dir.join(&file))?;
            meta.delete_bitmap_files.push(file);
        }
        for r in &mut meta.rowsets {
            r.delete_bitmap = None;
        }
        meta.delete_bitmaps_built = true;
        write_json(&self.dir.join(META_FILE), &meta)?;
        for f in old_files {
            if !meta.delete_bitmap_files.contains(&f) {
                let _ = fs::remove_file(self.dir.join(f));
            }
        }
        *lock_w(&m.bitmaps) = all;
        *self.meta.write().unwrap_or_else(|p| p.into_inner()) = meta;
        Ok(())
    }
}

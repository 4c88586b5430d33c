//! Compaction's side of a tablet: its score, swapping input rowsets for
//! their compacted output, and sweeping stale rowsets once no reader holds
//! them.

use super::*;

impl Tablet {
    /// Sorted runs a full read of the tablet merges (Doris' compaction score).
    pub fn compaction_score(&self) -> usize {
        let m = self.meta.read().unwrap_or_else(|p| p.into_inner());
        m.rowsets.iter().map(|r| r.runs()).sum()
    }

    /// Whether the table asked for no background compaction.
    pub fn auto_compaction_disabled(&self) -> bool {
        let m = self.meta.read().unwrap_or_else(|p| p.into_inner());
        m.schema.disable_auto_compaction
    }

    /// Swaps `inputs` (consecutive rowsets, still live) for their compacted
    /// `output` in one meta rewrite, keeping the inputs as stale rowsets;
    /// `promote` moves the cumulative point past the output. False (and
    /// nothing changed) if the inputs are no longer all live.
    pub fn replace_rowsets(
        &self,
        inputs: &[RowsetMeta],
        output: Option<RowsetMeta>,
        promote: bool,
    ) -> Result<bool> {
        let _g = lock(&self.write_lock);
        self.check_live()?;
        let mut meta = self.meta();
        let ids: std::collections::HashSet<&str> =
            inputs.iter().map(|r| r.rowset_id.as_str()).collect();
        let live = meta
            .rowsets
            .iter()
            .filter(|r| ids.contains(r.rowset_id.as_str()))
            .count();
        if live != inputs.len() || inputs.is_empty() {
            return Ok(false);
        }
        let now = now_ms();
        let end = inputs.iter().map(|r| r.end_version).max().unwrap_or(0);
        let carried = match &self.mow {
            Some(m) => Some(self.carry_deletes(m, &meta.schema, inputs, output.as_ref(), end)?),
            None => None,
        };
        meta.rowsets.retain(|r| !ids.contains(r.rowset_id.as_str()));
        let output_id = output.as_ref().map(|o| o.rowset_id.clone());
        if let Some(o) = output {
            meta.rowsets.push(o);
        }
        meta.rowsets.sort_by_key(|r| r.start_version);
        if promote {
            meta.cumulative_point = meta.cumulative_point.max(end + 1);
        }
        // Merge-on-write: one bitmap file of the live rowsets' entries
        // replaces the tablet's others and the bitmaps kept in rowsets.
        let mut old_files = vec![];
        if let (Some(m), Some(carried)) = (&self.mow, &carried) {
            let mut keep = lock_r(&m.bitmaps).clone();
            keep.merge(carried);
            let live_ids: std::collections::HashSet<&str> =
                meta.rowsets.iter().map(|r| r.rowset_id.as_str()).collect();
            keep.retain_rowsets(|r| live_ids.contains(r));
            old_files = std::mem::take(&mut meta.delete_bitmap_files);
            if !keep.is_empty() {
                let name = match &output_id {
                    Some(id) => format!("{id}.dbm"),
                    None => format!("{}_merged.dbm", inputs[0].rowset_id),
                };
                keep.write(&self.dir.join(&name))?;
                meta.delete_bitmap_files.push(name);
            }
            // The file holds what the rowsets' own bitmaps held.
            for r in &mut meta.rowsets {
                r.delete_bitmap = None;
            }
        }
        write_json(&self.dir.join(META_FILE), &meta)?;
        for f in old_files {
            if !meta.delete_bitmap_files.contains(&f) {
                let _ = fs::remove_file(self.dir.join(f));
            }
        }
        if let (Some(m), Some(carried)) = (&self.mow, &carried) {
            lock_w(&m.bitmaps).merge(carried);
            // Lookups no longer go to the replaced segments.
            for s in inputs.iter().flat_map(|r| r.segments.iter()) {
                m.keys.remove(&self.dir.join(&s.file));
            }
        }
        lock(&self.stale).extend(inputs.iter().cloned().map(|rowset| StaleRowset {
            rowset,
            stale_since_ms: now,
        }));
        *self.meta.write().unwrap_or_else(|p| p.into_inner()) = meta;
        Ok(true)
    }

    /// The rows of a compaction's output that loads after its last version
    /// `end` superseded: each input row deleted by a version above `end` is
    /// found in the output by its key and deleted there at that version.
    pub(super) fn carry_deletes(
        &self,
        m: &MergeOnWrite,
        schema: &TableSchema,
        inputs: &[RowsetMeta],
        output: Option<&RowsetMeta>,
        end: i64,
    ) -> Result<DeleteBitmap> {
        let mut out = DeleteBitmap::default();
        let Some(o) = output else {
            return Ok(out);
        };
        let bitmaps = lock_r(&m.bitmaps);
        let mut targets: Option<Vec<Arc<KeyIndex>>> = None;
        for r in inputs {
            for (i, s) in r.segments.iter().enumerate() {
                let later = bitmaps.after(&r.rowset_id, i as u32, end);
                if later.is_empty() {
                    continue;
                }
                let keys = self.key_index(m, schema, &s.file)?;
                let targets = match &mut targets {
                    Some(t) => &*t,
                    None => targets.insert(
                        o.segments
                            .iter()
                            .map(|s| self.key_index(m, schema, &s.file))
                            .collect::<Result<Vec<_>>>()?,
                    ),
                };
                for (v, rows) in later {
                    for x in rows {
                        if x as usize >= keys.len() {
                            return Err(TethysError::Corruption(format!(
                                "tablet {}: delete bitmap of rowset {} segment {i} names row {x} of {}",
                                self.id(),
                                r.rowset_id,
                                keys.len()
                            )));
                        }
                        for (oi, t) in targets.iter().enumerate() {
                            if let Some(row) = t.find(&keys, x as usize) {
                                out.insert(&o.rowset_id, oi as u32, v, row);
                                break;
                            }
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// Deletes stale rowsets older than `min_age_ms` when no scan reads the
    /// tablet. Returns the files removed.
    pub fn sweep_stale(&self, min_age_ms: u64) -> Result<Vec<PathBuf>> {
        if self.readers.load(AtomicOrdering::Acquire) > 0 {
            return Ok(vec![]);
        }
        let now = now_ms();
        let old: Vec<StaleRowset> = {
            let mut stale = lock(&self.stale);
            let (old, keep) = stale
                .drain(..)
                .partition(|s| now.saturating_sub(s.stale_since_ms) >= min_age_ms);
            *stale = keep;
            old
        };
        if let Some(m) = &self.mow
            && !old.is_empty()
        {
            let gone: std::collections::HashSet<&str> =
                old.iter().map(|s| s.rowset.rowset_id.as_str()).collect();
            lock_w(&m.bitmaps).retain_rowsets(|r| !gone.contains(r));
        }
        let mut removed = vec![];
        for s in old {
            for seg in s.rowset.segments {
                let p = self.dir.join(&seg.file);
                let _ = fs::remove_file(&p);
                removed.push(p);
            }
        }
        Ok(removed)
    }

    /// Rowsets compaction replaced that are still on disk.
    pub fn stale_rowsets(&self) -> Vec<StaleRowset> {
        lock(&self.stale).clone()
    }

    /// A file path in this tablet's directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Summary numbers.
    pub fn stats(&self) -> TabletStats {
        let m = self.meta();
        TabletStats {
            version: m.version,
            row_count: m.rowsets.iter().map(|r| r.num_rows).sum(),
            data_size: m.rowsets.iter().map(|r| r.data_size).sum(),
            rowset_count: m.rowsets.len(),
            segment_count: m.rowsets.iter().map(|r| r.segments.len()).sum(),
            compaction_score: m.rowsets.iter().map(|r| r.runs()).sum(),
            cumulative_point: m.cumulative_point,
        }
    }
}

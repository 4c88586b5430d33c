//! Partial-column updates of merge-on-write UNIQUE tables: the columns a
//! load leaves out are filled from each key's current row when it is
//! published.

use super::*;

impl Tablet {
    /// Fills the columns a partial update does not give from each key's
    /// current row (the live row of the newest version: merge-on-write keeps
    /// one per key); rows of new keys keep their placeholders, which must
    /// not be NULL for a NOT NULL column. Runs under the write lock.
    pub(super) fn fill_unmentioned(
        &self,
        meta: &TabletMeta,
        batch: RecordBatch,
        keys: &KeyIndex,
        given: &[usize],
        strict: bool,
    ) -> Result<RecordBatch> {
        let Some(m) = &self.mow else {
            return Ok(batch);
        };
        let schema = &meta.schema;
        let missing: Vec<usize> = (0..schema.columns.len())
            .filter(|c| !given.contains(c))
            .collect();
        let n = batch.num_rows();
        if missing.is_empty() || n == 0 {
            return Ok(RecordBatch::try_new(
                schema.arrow_schema(),
                batch.columns().to_vec(),
            )?);
        }
        let types: Vec<arrow::datatypes::DataType> = schema
            .arrow_schema()
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        // Per missing column: the chunks to pick from (chunk 0: the
        // placeholders) and per row which chunk and position.
        let mut chunks: Vec<Vec<arrow::array::ArrayRef>> = missing
            .iter()
            .map(|&c| vec![batch.column(c).clone()])
            .collect();
        let mut pick: Vec<(usize, usize)> = (0..n).map(|i| (0, i)).collect();
        let mut found = vec![false; n];
        let bitmaps = lock_r(&m.bitmaps);
        'sources: for r in meta.rowsets.iter().rev() {
            for (si, s) in r.segments.iter().enumerate().rev() {
                if found.iter().all(|f| *f) {
                    break 'sources;
                }
                if s.deletes {
                    continue;
                }
                let index = self.key_index(m, schema, &s.file)?;
                let gone = bitmaps.at(&r.rowset_id, si as u32, i64::MAX);
                let mut hits: Vec<(usize, u32)> = vec![];
                for (i, f) in found.iter_mut().enumerate() {
                    if *f {
                        continue;
                    }
                    if let Some(x) = index.find(keys, i)
                        && !gone.as_ref().is_some_and(|g| g.contains(x))
                    {
                        *f = true;
                        hits.push((i, x));
                    }
                }
                if hits.is_empty() {
                    continue;
                }
                // Read the pages holding the hits, once each.
                let seg = Segment::open(&self.dir.join(&s.file), schema)?;
                let spans: Vec<(u64, u64)> = seg
                    .footer()
                    .columns
                    .first()
                    .map(|c| {
                        c.pages
                            .iter()
                            .map(|p| (p.first_row, u64::from(p.num_rows)))
                            .collect()
                    })
                    .unwrap_or_default();
                hits.sort_by_key(|h| h.1);
                let mut h = 0;
                for (pi, (first, len)) in spans.iter().enumerate() {
                    let end = first + len;
                    let from = h;
                    while h < hits.len() && u64::from(hits[h].1) < end {
                        h += 1;
                    }
                    if from == h {
                        continue;
                    }
                    let rows: UInt32Array =
                        hits[from..h].iter().map(|x| x.1 - *first as u32).collect();
                    for (mi, &c) in missing.iter().enumerate() {
                        let page = seg.read_plain_page(c, pi, &types[c])?;
                        chunks[mi].push(arrow::compute::take(page.as_ref(), &rows, None)?);
                    }
                    let chunk = chunks[0].len() - 1;
                    for (j, hit) in hits[from..h].iter().enumerate() {
                        pick[hit.0] = (chunk, j);
                    }
                }
            }
        }
        drop(bitmaps);
        if strict && let Some(i) = found.iter().position(|f| !f) {
            let key: Vec<String> = (0..schema.num_key_columns)
                .map(|k| {
                    arrow::util::display::array_value_to_string(batch.column(k), i)
                        .unwrap_or_default()
                })
                .collect();
            return Err(TethysError::DataQuality(format!(
                "Insert has filtered data in strict mode: a partial column update cannot insert the new key ({}); \
                 SET enable_insert_strict = false (Stream Load: strict_mode false) inserts new keys with the columns' defaults",
                key.join(", ")
            )));
        }
        let mut columns = batch.columns().to_vec();
        for (mi, &c) in missing.iter().enumerate() {
            let refs: Vec<&dyn arrow::array::Array> =
                chunks[mi].iter().map(|a| a.as_ref()).collect();
            let filled = arrow::compute::interleave(&refs, &pick)?;
            let col = &schema.columns[c];
            if !col.nullable && filled.null_count() > 0 {
                return Err(TethysError::DataQuality(format!(
                    "the unmentioned column `{}` should have a default value or be nullable \
                     for new keys of a partial column update",
                    col.name
                )));
            }
            columns[c] = filled;
        }
        Ok(RecordBatch::try_new(schema.arrow_schema(), columns)?)
    }

    /// Re-fills the partial-update segments of `rowset` (about to be
    /// published at `version`) whose keys a load published after they were
    /// filled also wrote: their unmentioned columns must come from that
    /// newer row. Returns the replaced segment files (removed once the meta
    /// no longer needs them).
    pub(super) fn refill_partial(
        &self,
        m: &MergeOnWrite,
        meta: &TabletMeta,
        rowset: &mut RowsetMeta,
        version: i64,
    ) -> Result<Vec<String>> {
        let mut replaced = vec![];
        for j in 0..rowset.segments.len() {
            let Some(p) = rowset.segments[j].partial.clone() else {
                continue;
            };
            if p.read_version >= meta.version {
                continue;
            }
            let mine = self.key_index(m, &meta.schema, &rowset.segments[j].file)?;
            let mut conflict = false;
            'newer: for r in meta
                .rowsets
                .iter()
                .filter(|r| r.end_version > p.read_version)
            {
                for s in &r.segments {
                    if !self
                        .key_index(m, &meta.schema, &s.file)?
                        .superseded_by(&mine)
                        .is_empty()
                    {
                        conflict = true;
                        break 'newer;
                    }
                }
            }
            if !conflict {
                continue;
            }
            let old = rowset.segments[j].file.clone();
            let seg = Segment::open(&self.dir.join(&old), &meta.schema)?;
            let arrow = meta.schema.arrow_schema();
            let types: Vec<_> = arrow
                .fields()
                .iter()
                .map(|f| f.data_type().clone())
                .collect();
            let pages = (0..seg.num_pages())
                .map(|pi| {
                    Ok(RecordBatch::try_new(
                        arrow.clone(),
                        seg.read_plain_pages(&types, pi)?,
                    )?)
                })
                .collect::<Result<Vec<_>>>()?;
            // Keys the first fill found stay found; new ones were allowed then.
            let batch = concat_batches(&arrow, &pages)?;
            let batch = self.fill_unmentioned(meta, batch, &mine, &p.given, false)?;
            let file = format!("{}_{j}_v{version}.dat", rowset.rowset_id);
            let mut info = write_segment(&self.dir.join(&file), &meta.schema, &batch)?;
            // Same keys, same order: the old segment's index serves.
            m.keys.insert(self.dir.join(&info.file), mine);
            info.partial = Some(PartialWrite {
                given: p.given,
                read_version: meta.version,
            });
            rowset.segments[j] = info;
            replaced.push(old);
        }
        if !replaced.is_empty() {
            rowset.num_rows = rowset.segments.iter().map(|s| s.num_rows).sum();
            rowset.data_size = rowset.segments.iter().map(|s| s.size).sum();
        }
        Ok(replaced)
    }
}

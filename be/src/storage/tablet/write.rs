//! Writing a load's rows into a pending rowset of a transaction: sorted
//! by key, combined for AGGREGATE / UNIQUE tables, written as segments and
//! recorded in `txn_<id>.json`; aborting a transaction drops them.

use super::*;

/// What the rows of a write are.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteKind {
    /// Full rows.
    Rows,
    /// Rows deleting their keys (merge-on-write tables only).
    Deletes,
    /// A partial column update giving these table columns; each row's
    /// other columns are taken from the key's current row, or for a new key
    /// are the placeholders sent (the column's default, or NULL); strict: a
    /// new key fails the write. Merge-on-write tables only; every key
    /// column must be given.
    Partial(Vec<usize>, bool),
}

/// Sorts a batch of full rows by the table's key; for AGGREGATE and UNIQUE
/// tables rows with equal keys keep their arrival order and are combined
/// into one (the load-time step of the model).
pub fn sort_by_key(batch: &RecordBatch, schema: &TableSchema) -> Result<RecordBatch> {
    let keys = schema.num_key_columns.min(batch.num_columns());
    if keys == 0 || batch.num_rows() < 2 {
        return Ok(batch.clone());
    }
    let mut cols: Vec<SortColumn> = (0..keys)
        .map(|i| SortColumn {
            values: batch.column(i).clone(),
            options: None,
        })
        .collect();
    let spec = merge_spec(schema);
    if spec.combine {
        // The sort is not stable; arrival order breaks ties.
        cols.push(SortColumn {
            values: Arc::new(UInt32Array::from_iter_values(0..batch.num_rows() as u32)),
            options: None,
        });
    }
    let idx = lexsort_to_indices(&cols, None)?;
    let sorted = take_record_batch(batch, &idx)?;
    combine_sorted(&sorted, &spec)
}

impl Tablet {
    /// Refuses a write of `kind` this tablet cannot take: key deletes and
    /// partial updates resolve keys at load time, which needs merge-on-write;
    /// a partial update gives every key column.
    fn check_kind(&self, kind: &WriteKind) -> Result<()> {
        let needs_mow = match kind {
            WriteKind::Rows => None,
            WriteKind::Deletes => Some(
                "deleting rows by key (DELETE with conditions on value columns, merge_type DELETE)",
            ),
            WriteKind::Partial(..) => Some("partial column update"),
        };
        if let Some(what) = needs_mow
            && self.mow.is_none()
        {
            return Err(TethysError::NotSupported(format!(
                "{what} needs a UNIQUE KEY table with enable_unique_key_merge_on_write = true"
            )));
        }
        if let WriteKind::Partial(given, _) = kind {
            let meta = self.meta();
            if let Some(k) = (0..meta.schema.num_key_columns).find(|k| !given.contains(k)) {
                return Err(TethysError::Analysis(format!(
                    "a partial column update must give every key column; {} is missing",
                    meta.schema.columns[k].name
                )));
            }
        }
        Ok(())
    }

    /// Writes rows of transaction `txn_id` as a new segment of its pending
    /// rowset (full rows, rows deleting their keys, or a partial column
    /// update: see [`WriteKind`]).
    pub fn write(
        &self,
        txn_id: i64,
        batches: &[RecordBatch],
        kind: WriteKind,
        max_versions: usize,
        rowset_id: impl FnOnce() -> String,
    ) -> Result<u64> {
        self.check_kind(&kind)?;
        self.check_versions(max_versions)?;
        let meta = self.meta();
        let schema = match &kind {
            // Columns a partial update does not give may hold NULL
            // placeholders until they are filled.
            WriteKind::Partial(given, _) => Arc::new(arrow::datatypes::Schema::new(
                meta.schema
                    .arrow_schema()
                    .fields()
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        let f = f.as_ref().clone();
                        if given.contains(&i) {
                            f
                        } else {
                            f.with_nullable(true)
                        }
                    })
                    .collect::<Vec<_>>(),
            )),
            _ => meta.schema.arrow_schema(),
        };
        for b in batches {
            if b.schema().fields().len() != schema.fields().len()
                || b.schema()
                    .fields()
                    .iter()
                    .zip(schema.fields())
                    .any(|(a, e)| a.data_type() != e.data_type())
            {
                return Err(TethysError::Internal(format!(
                    "rows sent to tablet {} do not match its schema",
                    meta.tablet_id
                )));
            }
        }
        let batch = concat_batches(&schema, batches)?;
        if batch.num_rows() == 0 {
            return Ok(0);
        }
        let batch = sort_by_key(&batch, &meta.schema)?;
        let _g = lock(&self.write_lock);
        self.check_live()?;
        // Merge-on-write: the key index of these rows, for a partial
        // update's lookups and for the publish's.
        let keys = match &self.mow {
            Some(m) => Some(Arc::new(m.codec.index_of_batch(&batch)?)),
            None => None,
        };
        let mut partial = None;
        let batch = match (&kind, &keys) {
            (WriteKind::Partial(given, strict), Some(keys)) => {
                // Read under the write lock: no publish moves it meanwhile.
                let current = self.meta();
                partial = Some(PartialWrite {
                    given: given.clone(),
                    read_version: current.version,
                });
                self.fill_unmentioned(&current, batch, keys, given, *strict)?
            }
            _ => batch,
        };
        let mut pending = lock(&self.pending)
            .get(&txn_id)
            .cloned()
            .unwrap_or_else(|| PendingRowset {
                txn_id,
                rowset_id: rowset_id(),
                segments: vec![],
                delete_predicate: None,
            });
        let seg_path = self.dir.join(format!(
            "{}_{}.dat",
            pending.rowset_id,
            pending.segments.len()
        ));
        let mut info = write_segment(&seg_path, &meta.schema, &batch)?;
        info.deletes = kind == WriteKind::Deletes;
        info.partial = partial;
        if let (Some(m), Some(keys)) = (&self.mow, keys) {
            m.keys.insert(self.dir.join(&info.file), keys);
        }
        let size = info.size;
        pending.segments.push(info);
        write_json(&self.dir.join(format!("txn_{txn_id}.json")), &pending)?;
        lock(&self.pending).insert(txn_id, pending);
        Ok(size)
    }

    /// Refuses a new version when the tablet already holds `max_versions`.
    pub(super) fn check_versions(&self, max_versions: usize) -> Result<()> {
        let m = self.meta.read().unwrap_or_else(|p| p.into_inner());
        if m.rowsets.len() >= max_versions {
            return Err(TethysError::TooManyVersions(format!(
                "[E-235]failed to init rowset builder. version count: {}, exceed limit: {max_versions}, tablet: {}. \
                 Please reduce the frequency of loading data or adjust the max_tablet_version_num in be.conf to a larger value.",
                m.rowsets.len(),
                m.tablet_id
            )));
        }
        Ok(())
    }

    /// Discards what transaction `txn_id` wrote here. Idempotent.
    pub fn abort(&self, txn_id: i64) -> Result<()> {
        let _g = lock(&self.write_lock);
        self.check_live()?;
        if let Some(p) = lock(&self.pending).remove(&txn_id) {
            let _ = fs::remove_file(self.dir.join(format!("txn_{txn_id}.json")));
            // Never a file a visible rowset reads.
            let live: std::collections::HashSet<String> = self
                .meta()
                .rowsets
                .iter()
                .flat_map(|r| r.segments.iter().map(|s| s.file.clone()))
                .collect();
            for s in p.segments.iter().filter(|s| !live.contains(&s.file)) {
                if let Some(m) = &self.mow {
                    m.keys.remove(&self.dir.join(&s.file));
                }
                let _ = fs::remove_file(self.dir.join(&s.file));
            }
        }
        Ok(())
    }

    /// Transactions with unpublished rowsets here.
    pub fn pending_txns(&self) -> Vec<i64> {
        lock(&self.pending).keys().copied().collect()
    }

    /// Records a DELETE's predicate as transaction `txn_id`'s pending rowset.
    pub fn write_delete(
        &self,
        txn_id: i64,
        predicate: DeletePredicate,
        max_versions: usize,
        rowset_id: impl FnOnce() -> String,
    ) -> Result<()> {
        self.check_versions(max_versions)?;
        let _g = lock(&self.write_lock);
        self.check_live()?;
        let pending = PendingRowset {
            txn_id,
            rowset_id: rowset_id(),
            segments: vec![],
            delete_predicate: Some(predicate),
        };
        write_json(&self.dir.join(format!("txn_{txn_id}.json")), &pending)?;
        lock(&self.pending).insert(txn_id, pending);
        Ok(())
    }
}

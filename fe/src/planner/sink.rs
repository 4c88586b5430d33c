//! `OlapSink`: INSERT into a Tethys table as one load transaction.
//!
//! Rows are checked against the schema (NOT NULL, string length, BITMAP / HLL
//! values that decode, a partition for the value) and handed to the one
//! write path, [`tethys_common::ship::RowShipper`], which routes them to
//! tablets and ships them to their backends; then the transaction is
//! committed and published. Any failure aborts it: nothing becomes visible
//! and the backends discard what they wrote. Under `SET group_commit` the
//! checked rows go to a backend's group commit of the table instead.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use async_trait::async_trait;
use datafusion::datasource::sink::DataSink;
use datafusion::error::Result as DfResult;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType};
use futures::StreamExt;
use tethys_common::functions::object::ObjectKind;
use tethys_common::routing::Router;
use tethys_common::ship::{RowShipper, refuse_unroutable};
use tethys_common::{Result, TethysError};

use super::{InsertOutcome, StatementCtx};
use crate::catalog::Table;
use crate::frontend::Frontend;

#[derive(Debug)]
pub struct OlapSink {
    fe: Arc<Frontend>,
    db: String,
    table: Table,
    schema: SchemaRef,
    stmt: Arc<StatementCtx>,
}

impl OlapSink {
    pub fn new(
        fe: Arc<Frontend>,
        db: String,
        table: Table,
        schema: SchemaRef,
        stmt: Arc<StatementCtx>,
    ) -> Self {
        // A partial update's unmentioned columns are NULL placeholders the
        // backend replaces by the keys' current values.
        let schema = if stmt.partial_columns.is_empty() {
            schema
        } else {
            Arc::new(arrow::datatypes::Schema::new(
                schema
                    .fields()
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        let given = stmt.partial_columns.contains(&(i as u32));
                        f.as_ref().clone().with_nullable(f.is_nullable() || !given)
                    })
                    .collect::<Vec<_>>(),
            ))
        };
        OlapSink {
            fe,
            db,
            table,
            schema,
            stmt,
        }
    }
}

impl DisplayAs for OlapSink {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "OlapTableSink: {}.{}", self.db, self.table.name)
    }
}

impl OlapSink {
    /// The batch in the table's schema, checked.
    fn checked(&self, batch: RecordBatch) -> Result<RecordBatch> {
        let batch = RecordBatch::try_new(self.schema.clone(), batch.columns().to_vec())
            .map_err(|e| TethysError::Analysis(format!("rows do not fit the table: {e}")))?;
        let batch = self.table.schema.round_datetimes(batch)?;
        self.validate(&batch)?;
        Ok(batch)
    }

    /// Checks a batch against the schema; returns a data-quality error naming
    /// the first offending column.
    fn validate(&self, batch: &RecordBatch) -> Result<()> {
        let partial = &self.stmt.partial_columns;
        for (i, col) in self.table.schema.columns.iter().enumerate() {
            let arr = batch.column(i);
            let placeholder = !partial.is_empty() && !partial.contains(&(i as u32));
            if !col.nullable && arr.null_count() > 0 && !placeholder {
                return Err(TethysError::DataQuality(format!(
                    "Insert has filtered data in strict mode: column '{}' is NOT NULL but a row has NULL",
                    col.name
                )));
            }
            if let Some(kind) = ObjectKind::of(&col.column_type)
                && let Some(a) = arr.as_binary_opt::<i32>()
                && let Some(why) = a.iter().flatten().find_map(|v| kind.check(v).err())
                && !placeholder
            {
                return Err(TethysError::DataQuality(format!(
                    "Insert has filtered data in strict mode: column '{}' is {}: its values must come from {} ({why})",
                    col.name,
                    col.column_type.desc(),
                    kind.makers()
                )));
            }
            if let Some(max) = col.column_type.max_len()
                && arr.data_type() == &DataType::Utf8
            {
                let s = arr.as_string::<i32>();
                if let Some(v) = s.iter().flatten().find(|v| v.len() > max) {
                    return Err(TethysError::DataQuality(format!(
                        "Insert has filtered data in strict mode: value of {} bytes is too long for column '{}' {} ('{}')",
                        v.len(),
                        col.name,
                        col.column_type.desc(),
                        v.chars().take(32).collect::<String>()
                    )));
                }
            }
        }
        Ok(())
    }

    /// The table's load plan, on the backends the catalog knows.
    fn load_plan(&self) -> Result<(tethys_proto::LoadPlanPb, Vec<crate::catalog::BackendInfo>)> {
        let backends = self.fe.backends.registered();
        if backends.is_empty() {
            return Err(TethysError::Backend("no backend is registered".into()));
        }
        let alive = self.fe.backends.alive_ids().into_iter().collect();
        let plan = crate::load_plan::load_plan(&self.db, &self.table, &backends, &alive);
        Ok((plan, backends))
    }

    /// Checks the rows and ships them to tablets in transaction `txn_id`;
    /// returns the rows and the partitions they went to.
    async fn load(
        &self,
        txn_id: i64,
        mut data: SendableRecordBatchStream,
    ) -> Result<(u64, BTreeSet<(i64, i64)>, Vec<(i64, i64)>)> {
        let (plan, _) = self.load_plan()?;
        let rows = tethys_proto::WriteRequest {
            delete_rows: self.stmt.delete_rows,
            partial_columns: self.stmt.partial_columns.clone(),
            partial_strict: self.stmt.partial_strict,
            ..Default::default()
        };
        let router = Router::of_plan(&plan, None)?;
        let mut shipper = RowShipper::new(self.fe.backends.pool(), txn_id, &plan, router, rows);
        let shipped = async {
            while let Some(batch) = data.next().await {
                let batch = batch?;
                if batch.num_rows() > 0 {
                    refuse_unroutable(&shipper.add(&self.checked(batch)?).await?)?;
                }
            }
            shipper.finish().await
        }
        .await;
        if let Err(e) = shipped {
            // Let the writes in flight end before the caller aborts, so none
            // lands after the abort.
            shipper.drain().await;
            return Err(e);
        }
        let touched = shipper
            .touched
            .iter()
            .map(|p| (self.table.id, *p))
            .collect();
        Ok((shipper.loaded, touched, shipper.writes.written()))
    }
}

impl OlapSink {
    /// INSERT under `SET group_commit`: the checked rows go to one backend's
    /// group commit of the table (the same backend for every INSERT into it,
    /// so they merge).
    async fn group_commit(
        &self,
        mode: tethys_proto::GroupCommitMode,
        mut data: SendableRecordBatchStream,
    ) -> Result<(u64, InsertOutcome)> {
        let mut batches = vec![];
        let mut rows = 0u64;
        let (plan, backends) = self.load_plan()?;
        let router = Router::of_plan(&plan, None)?;
        while let Some(batch) = data.next().await {
            let batch = batch?;
            if batch.num_rows() == 0 {
                continue;
            }
            let batch = self.checked(batch)?;
            refuse_unroutable(&router.unroutable(&batch))?;
            rows += batch.num_rows() as u64;
            batches.push(batch);
        }
        let be = &backends[(self.table.id as usize) % backends.len()];
        let r = self
            .fe
            .backends
            .client(be)?
            .group_commit_write(
                tethys_proto::GroupCommitWriteRequest {
                    db: self.db.clone(),
                    table: self.table.name.clone(),
                    mode: mode.into(),
                    timeout_secs: self.stmt.insert_timeout_secs as i64,
                    plan: Some(plan),
                },
                batches,
            )
            .await?;
        Ok((
            rows,
            InsertOutcome {
                status: r.status(),
                label: r.label,
                txn_id: r.txn_id,
            },
        ))
    }
}

#[async_trait]
impl DataSink for OlapSink {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    async fn write_all(
        &self,
        data: SendableRecordBatchStream,
        _context: &Arc<TaskContext>,
    ) -> DfResult<u64> {
        if let Some(mode) = self.stmt.group_commit {
            let (rows, outcome) = self.group_commit(mode, data).await?;
            *self.stmt.outcome.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
            return Ok(rows);
        }
        let txn = self.fe.txn.begin(
            &self.db,
            self.stmt.label.clone(),
            if self.stmt.delete_rows {
                "FRONTEND"
            } else {
                "INSERT_STREAMING"
            },
        )?;
        let result = self.load(txn.id, data).await;
        let stats = crate::catalog::LoadStats {
            table: self.table.name.clone(),
            total_rows: result.as_ref().map(|r| r.0 as i64).unwrap_or(0),
            loaded_rows: result.as_ref().map(|r| r.0 as i64).unwrap_or(0),
            message: match &result {
                Ok(_) => "OK".into(),
                Err(e) => e.to_string(),
            },
            ..Default::default()
        };
        let _ = self.fe.txn.record_stats(txn.id, stats);
        let result = match result {
            Ok((rows, touched, written)) => {
                if rows == 0 {
                    Ok(0)
                } else {
                    self.fe
                        .txn
                        .commit_and_publish(txn.id, &touched, &written)
                        .await
                        .map(|_| rows)
                }
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(rows) => {
                if rows == 0 {
                    let _ = self.fe.txn.abort(txn.id, "no rows to insert").await;
                }
                *self.stmt.outcome.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(InsertOutcome {
                        label: txn.label.clone(),
                        txn_id: txn.id,
                        status: if rows == 0 {
                            tethys_proto::TxnStatus::Aborted
                        } else {
                            tethys_proto::TxnStatus::Visible
                        },
                    });
                Ok(rows)
            }
            Err(e) => {
                let committed = matches!(
                    self.fe.catalog.read().txns.get(&txn.id).map(|t| t.state),
                    Some(crate::catalog::TxnState::Committed)
                );
                if !committed {
                    let _ = self.fe.txn.abort(txn.id, &e.to_string()).await;
                }
                Err(e.into())
            }
        }
    }
}

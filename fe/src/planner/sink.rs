//! `OlapSink`: INSERT into a Tethys table as one load transaction.
//!
//! Rows are checked against the schema (NOT NULL, string length, BITMAP / HLL
//! values that decode, a partition
//! for the value), routed to tablets (partition by range, bucket by hash),
//! buffered per tablet and sent to the tablet's backend; then the transaction
//! is committed and published. Any failure aborts it: nothing becomes
//! visible and the backends discard what they wrote.

use std::collections::{BTreeSet, HashMap};
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
use tethys_common::config::SEGMENT_FLUSH_ROWS;
use tethys_common::functions::object::ObjectKind;
use tethys_common::{Result, TethysError};

use super::{InsertOutcome, StatementCtx};
use crate::catalog::Table;
use crate::frontend::Frontend;

/// Rows buffered across all tablets before the largest buffers are sent.
const MAX_BUFFERED_ROWS: usize = 1 << 20;

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

struct Buffers {
    by_tablet: HashMap<i64, (Vec<RecordBatch>, usize)>,
    total: usize,
}

/// Rows that fit no partition fail an INSERT (strict mode).
fn strict(rejected: &[(usize, String)]) -> Result<()> {
    match rejected.first() {
        Some((_, reason)) => Err(TethysError::DataQuality(format!(
            "Insert has filtered data in strict mode: {reason}"
        ))),
        None => Ok(()),
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

    async fn send(
        &self,
        txn_id: i64,
        tablet_id: i64,
        backend_id: i64,
        batches: Vec<RecordBatch>,
    ) -> Result<()> {
        let be = self
            .fe
            .catalog
            .read()
            .backends
            .get(&backend_id)
            .cloned()
            .ok_or_else(|| {
                TethysError::Internal(format!("backend {backend_id} is not registered"))
            })?;
        self.fe
            .pool
            .get(&be)?
            .write(
                txn_id,
                tablet_id,
                batches,
                &tethys_proto::WriteRequest {
                    delete_rows: self.stmt.delete_rows,
                    partial_columns: self.stmt.partial_columns.clone(),
                    partial_strict: self.stmt.partial_strict,
                    ..Default::default()
                },
            )
            .await?;
        Ok(())
    }

    async fn load(
        &self,
        txn_id: i64,
        mut data: SendableRecordBatchStream,
    ) -> Result<(u64, BTreeSet<(i64, i64)>)> {
        let mut buf = Buffers {
            by_tablet: HashMap::new(),
            total: 0,
        };
        let mut backend_of: HashMap<i64, i64> = HashMap::new();
        let mut touched = BTreeSet::new();
        let mut rows = 0u64;
        let mut router = self.table.router();
        while let Some(batch) = data.next().await {
            let batch = batch?;
            if batch.num_rows() == 0 {
                continue;
            }
            let batch = self.checked(batch)?;
            rows += batch.num_rows() as u64;
            let (routed, rejected) = router.route(&batch)?;
            strict(&rejected)?;
            for t in routed {
                let b = t.batch;
                touched.insert((self.table.id, t.partition_id));
                backend_of.insert(t.tablet_id, t.backend_id);
                let e = buf.by_tablet.entry(t.tablet_id).or_default();
                e.1 += b.num_rows();
                buf.total += b.num_rows();
                e.0.push(b);
                if e.1 >= SEGMENT_FLUSH_ROWS {
                    let (batches, n) = std::mem::take(e);
                    buf.total -= n;
                    self.send(txn_id, t.tablet_id, t.backend_id, batches)
                        .await?;
                }
            }
            while buf.total > MAX_BUFFERED_ROWS {
                let Some((&tid, _)) = buf.by_tablet.iter().max_by_key(|(_, v)| v.1) else {
                    break;
                };
                if let Some((batches, n)) = buf.by_tablet.remove(&tid) {
                    buf.total -= n;
                    self.send(txn_id, tid, backend_of[&tid], batches).await?;
                }
            }
        }
        for (tid, (batches, _)) in buf.by_tablet {
            if !batches.is_empty() {
                self.send(txn_id, tid, backend_of[&tid], batches).await?;
            }
        }
        Ok((rows, touched))
    }
}

impl OlapSink {
    /// INSERT under `SET group_commit`: the checked rows go to one backend's
    /// group commit of the table (the same backend for every INSERT into it,
    /// so they merge).
    async fn group_commit(
        &self,
        mode: &str,
        mut data: SendableRecordBatchStream,
    ) -> Result<(u64, InsertOutcome)> {
        let mut batches = vec![];
        let mut rows = 0u64;
        let router = self.table.router();
        while let Some(batch) = data.next().await {
            let batch = batch?;
            if batch.num_rows() == 0 {
                continue;
            }
            let batch = self.checked(batch)?;
            strict(&router.unroutable(&batch))?;
            rows += batch.num_rows() as u64;
            batches.push(batch);
        }
        let (be, plan) = {
            let state = self.fe.catalog.read();
            let mut backends: Vec<_> = state.backends.values().cloned().collect();
            backends.sort_by_key(|b| b.id);
            if backends.is_empty() {
                return Err(TethysError::Backend("no backend is registered".into()));
            }
            let be = backends[(self.table.id as usize) % backends.len()].clone();
            let plan = crate::rpc::load_plan(&self.db, &self.table, &backends);
            (be, plan)
        };
        let r = self
            .fe
            .pool
            .get(&be)?
            .group_commit_write(
                tethys_proto::GroupCommitWriteRequest {
                    db: self.db.clone(),
                    table: self.table.name.clone(),
                    mode: mode.to_string(),
                    timeout_secs: self.stmt.insert_timeout_secs as i64,
                    plan: Some(plan),
                },
                batches,
            )
            .await?;
        Ok((
            rows,
            InsertOutcome {
                label: r.label,
                txn_id: r.txn_id,
                status: r.status,
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
        if let Some(mode) = &self.stmt.group_commit {
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
            Ok((rows, touched)) => {
                if rows == 0 {
                    Ok(0)
                } else {
                    self.fe
                        .txn
                        .commit_and_publish(txn.id, &touched)
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
                            "ABORTED".into()
                        } else {
                            "VISIBLE".into()
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

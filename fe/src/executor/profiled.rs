//! A profiled query's result stream (`SET enable_profile = true`): when it
//! ends, the plan with its counters is kept in the FE's profile store for
//! `SHOW QUERY PROFILE`.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::error::Result as DfResult;
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream};
use datafusion::physical_plan::ExecutionPlan;
use futures::Stream;

use crate::planner::explain;
use crate::profile::{ProfileStore, QueryProfile};

/// What a profiled query records when its stream ends.
pub struct Pending {
    pub store: Arc<ProfileStore>,
    pub plan: Arc<dyn ExecutionPlan>,
    pub names: Vec<String>,
    pub id: String,
    pub start: chrono::DateTime<chrono::Local>,
    pub user: String,
    pub db: String,
    pub sql: String,
}

impl Pending {
    fn record(self, state: &str) {
        let state = state.to_string();
        let end = chrono::Local::now();
        if !self.plan.is::<datafusion_distributed::DistributedExec>() {
            let plan = explain::analyze_lines(&self.plan, &self.names);
            return self.store_as(plan, state, end);
        }
        // A distributed plan's tasks report their counters once the query's
        // stream is dropped: kept when they are in.
        tokio::spawn(async move {
            let plan = explain::analyze_lines_after_run(&self.plan, &self.names).await;
            self.store_as(plan, state, end);
        });
    }

    fn store_as(self, plan: Vec<String>, state: String, end: chrono::DateTime<chrono::Local>) {
        self.store.add(QueryProfile {
            id: self.id,
            start: self.start,
            end,
            state,
            user: self.user,
            db: self.db,
            sql: self.sql,
            plan,
        });
    }
}

/// A query's result stream that stores its profile when it ends: `FINISHED`
/// at its end, `ERROR` on an error, `CANCELLED` when dropped before either.
pub struct ProfiledStream {
    inner: SendableRecordBatchStream,
    pending: Option<Pending>,
}

impl ProfiledStream {
    pub fn new(inner: SendableRecordBatchStream, pending: Pending) -> Self {
        ProfiledStream {
            inner,
            pending: Some(pending),
        }
    }

    fn finish(&mut self, state: &str) {
        if let Some(p) = self.pending.take() {
            p.record(state);
        }
    }
}

impl Stream for ProfiledStream {
    type Item = DfResult<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let r = self.inner.as_mut().poll_next(cx);
        match &r {
            Poll::Ready(None) => self.finish("FINISHED"),
            Poll::Ready(Some(Err(_))) => self.finish("ERROR"),
            _ => {}
        }
        r
    }
}

impl RecordBatchStream for ProfiledStream {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }
}

impl Drop for ProfiledStream {
    fn drop(&mut self) {
        self.finish("CANCELLED");
    }
}

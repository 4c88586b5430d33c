//! Stopping a query's stages on this backend when the FE says so:
//!
//! ```sql
//! KILL QUERY 42;   -- or query_timeout, or the client going away
//! ```
//!
//! A stage of a distributed plan runs here as long as something pulls it;
//! an operator that computes for long between batches (a join's probe side
//! already buffered here, an aggregate over it) does not notice that its
//! consumer has gone. When a query ends the FE tells every backend
//! (`CancelQuery`); the query's flag is set ([`QueryCancels`]) and every
//! leaf of its stages ([`CancelCheckExec`], over scans and exchange readers
//! alike) answers its next poll with Doris' "Query was cancelled", which
//! ends the stage. A query cancelled before one of its tasks starts here
//! (recently, [`REMEMBERED`]) starts cancelled.
//!
//! The check also keeps `WaitTime`: how long its leaf kept each partition
//! of the stage waiting (from a poll it answered "not ready" to the one
//! with data), and `WaitTimeMax`, the longest of them: the partitions wait
//! at the same time, so their sum can exceed the query's wall time, and
//! EXPLAIN ANALYZE prints the longest as the time a stage's instances
//! waited on an exchange.
//!
//! The stages run on the runtime that serves the backend's calls, and an
//! operator fed by inputs that are always ready never yields its thread: a
//! join counting billions of rows kept both threads of a 2-core backend
//! for minutes, so that neither the cancel nor a heartbeat got through. The
//! same check yields every [`SLICE`].
//!
//! And a leaf below a join's probe side starts when the stage first asks
//! it for a batch, not when the stage is set up: an exchange reader set up
//! asks its producers' backends to run their stage at once, and a join
//! reads its probe side only once its build side is in. Started with the
//! query, a scan under a join's probe side (TPC-H q18: orders, then
//! lineitem, below a semi join with lineitem's heavy orders) began its
//! `runtime_filter_wait_time_ms` with the query, read without the filter
//! when the build side took longer (4 s at SF10) and shuffled every row;
//! started when read, as in one process, the filter is there. Other
//! leaves start with the stage: their producers' start-up overlaps the
//! stage's own (every leaf started when read took SSB SF1's q1.x, a
//! broadcast join with a small build side, from 12-18 to 19-23 ms on
//! three BEs).

use std::collections::{HashMap, HashSet, VecDeque};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::CollectingRootExec;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::joins::{CrossJoinExec, HashJoinExec, NestedLoopJoinExec};
use datafusion::physical_plan::metrics::{
    ExecutionPlanMetricsSet, Gauge, MetricBuilder, MetricsSet, Time,
};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan};
use futures::{Stream, StreamExt};
use tethys_common::TethysError;

/// How long a cancelled query's id is remembered for tasks still to come.
pub const REMEMBERED: Duration = Duration::from_secs(600);

/// The longest a stage runs on a thread before it yields it (at the next
/// batch a leaf is asked for).
const SLICE: Duration = Duration::from_millis(10);

/// Cancelled query ids remembered at most.
const MAX_REMEMBERED: usize = 4096;

/// A session extension: whether the task's query has been cancelled.
#[derive(Debug, Default)]
pub struct Cancelled(AtomicBool);

impl Cancelled {
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// The cancellation flags of the queries with tasks here.
#[derive(Default)]
pub struct QueryCancels {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    running: HashMap<String, Weak<Cancelled>>,
    /// Cancelled ids, oldest first, each once; `recent_ids` the same ids
    /// for the lookup every task start makes (the FE cancels every
    /// distributed query when it ends: thousands are remembered).
    recent: VecDeque<(String, Instant)>,
    recent_ids: HashSet<String>,
}

impl QueryCancels {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The flag of `query`'s tasks (set already if it was cancelled).
    pub fn of(&self, query: &str) -> Arc<Cancelled> {
        let mut s = self.lock();
        if let Some(f) = s.running.get(query).and_then(Weak::upgrade) {
            return f;
        }
        s.running.retain(|_, f| f.strong_count() > 0);
        let flag = Arc::new(Cancelled::default());
        if s.recent_ids.contains(query) {
            flag.0.store(true, Ordering::Release);
        }
        s.running.insert(query.to_string(), Arc::downgrade(&flag));
        flag
    }

    /// Cancels `query`'s tasks here, and those that start later.
    pub fn cancel(&self, query: &str) {
        let mut s = self.lock();
        if let Some(f) = s.running.get(query).and_then(Weak::upgrade) {
            f.0.store(true, Ordering::Release);
        }
        if s.recent_ids.contains(query) {
            return;
        }
        while s
            .recent
            .front()
            .is_some_and(|(_, at)| at.elapsed() > REMEMBERED)
            || s.recent.len() >= MAX_REMEMBERED
        {
            if let Some((q, _)) = s.recent.pop_front() {
                s.recent_ids.remove(&q);
            }
        }
        s.recent.push_back((query.to_string(), Instant::now()));
        s.recent_ids.insert(query.to_string());
    }
}

/// `plan` with a [`CancelCheckExec`] over each of its leaves, those below
/// a join's probe side started when first read. Last of the worker's
/// rewrites: the checks would stop filter pushdown to the scans.
pub fn with_cancel_checks(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    checked(plan, false)
}

fn checked(plan: Arc<dyn ExecutionPlan>, probe_side: bool) -> Result<Arc<dyn ExecutionPlan>> {
    let children: Vec<Arc<dyn ExecutionPlan>> = plan.children().into_iter().cloned().collect();
    if children.is_empty() {
        return Ok(Arc::new(CancelCheckExec::new(plan, probe_side)));
    }
    // A join reads its build side (the first input) to the end before
    // the others.
    let node = match plan.downcast_ref::<CollectingRootExec>() {
        Some(c) => c.root(),
        None => &plan,
    };
    let join =
        node.is::<HashJoinExec>() || node.is::<NestedLoopJoinExec>() || node.is::<CrossJoinExec>();
    let children = children
        .into_iter()
        .enumerate()
        .map(|(i, c)| checked(c, probe_side || (join && i > 0)))
        .collect::<Result<Vec<_>>>()?;
    #[allow(deprecated)]
    plan.with_new_children(children)
}

/// Passes its input through until the query is cancelled, then fails;
/// `when_read`: starts it when first polled.
#[derive(Debug)]
pub struct CancelCheckExec {
    input: Arc<dyn ExecutionPlan>,
    when_read: bool,
    metrics: ExecutionPlanMetricsSet,
    /// `WaitTimeMax`, shared by the partitions' streams.
    longest: Gauge,
}

impl CancelCheckExec {
    pub fn new(input: Arc<dyn ExecutionPlan>, when_read: bool) -> Self {
        let metrics = ExecutionPlanMetricsSet::new();
        let longest = MetricBuilder::new(&metrics).global_gauge("WaitTimeMax");
        CancelCheckExec {
            input,
            when_read,
            metrics,
            longest,
        }
    }

    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }
}

impl DisplayAs for CancelCheckExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "CancelCheckExec")
    }
}

impl ExecutionPlan for CancelCheckExec {
    tethys_common::pass_through_exec_plan!("CancelCheckExec");

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let Some(input) = children.pop() else {
            return datafusion::common::internal_err!("CancelCheckExec needs its input");
        };
        Ok(Arc::new(CancelCheckExec::new(input, self.when_read)))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let input = match self.when_read {
            true => Input::NotStarted(self.input.clone(), partition, context.clone()),
            false => Input::Started(self.input.execute(partition, context.clone())?),
        };
        Ok(Box::pin(CheckedStream {
            flag: context.session_config().get_extension::<Cancelled>(),
            schema: self.input.schema(),
            input,
            failed: false,
            ran_since: Instant::now(),
            waiting_since: None,
            wait: MetricBuilder::new(&self.metrics).subset_time("WaitTime", partition),
            longest: self.longest.clone(),
        }))
    }
}

/// The leaf, executed at the first poll.
enum Input {
    NotStarted(Arc<dyn ExecutionPlan>, usize, Arc<TaskContext>),
    Started(SendableRecordBatchStream),
}

struct CheckedStream {
    input: Input,
    schema: SchemaRef,
    /// The query's flag (none outside a worker's task).
    flag: Option<Arc<Cancelled>>,
    failed: bool,
    /// When the stage last gave its thread back.
    ran_since: Instant,
    /// Since when the input has not been ready.
    waiting_since: Option<Instant>,
    /// This partition's wait so far (nanoseconds), and the longest of the
    /// partitions' (one gauge for the node).
    wait: Time,
    longest: Gauge,
}

impl Stream for CheckedStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.failed {
            return Poll::Ready(None);
        }
        if self.flag.as_ref().is_some_and(|f| f.is_set()) {
            self.failed = true;
            let e = DataFusionError::External(Box::new(TethysError::Cancelled));
            return Poll::Ready(Some(Err(e)));
        }
        // Operators whose inputs are always ready (a join's probe side
        // already here) never yield by themselves: the stage gives its
        // thread back every slice, or the backend's own calls (this
        // cancel, heartbeats) wait for the whole query.
        if self.ran_since.elapsed() > SLICE {
            self.ran_since = Instant::now();
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if let Input::NotStarted(plan, partition, context) = &self.input {
            match plan.execute(*partition, context.clone()) {
                Ok(stream) => self.input = Input::Started(stream),
                Err(e) => {
                    self.failed = true;
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
        let Input::Started(input) = &mut self.input else {
            return Poll::Ready(None);
        };
        let polled = input.poll_next_unpin(cx);
        match (&polled, self.waiting_since) {
            (Poll::Pending, None) => self.waiting_since = Some(Instant::now()),
            (Poll::Ready(_), Some(since)) => {
                self.wait.add_duration(since.elapsed());
                self.longest.set_max(self.wait.value());
                self.waiting_since = None;
            }
            _ => {}
        }
        polled
    }
}

impl RecordBatchStream for CheckedStream {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_reaches_running_tasks_and_those_still_to_come() {
        let q = QueryCancels::default();
        let running = q.of("a");
        let other = q.of("b");
        assert!(!running.is_set());
        q.cancel("a");
        assert!(running.is_set());
        assert!(!other.is_set(), "another query goes on");
        assert!(
            q.of("a").is_set(),
            "a task of a cancelled query starts cancelled"
        );
        assert!(!q.of("c").is_set());
    }

    /// The newest MAX_REMEMBERED cancelled ids are remembered, each once
    /// however often it was cancelled; older ones are forgotten.
    #[test]
    fn cancelled_ids_are_remembered_up_to_a_bound() {
        let q = QueryCancels::default();
        q.cancel("first");
        q.cancel("first");
        for i in 1..MAX_REMEMBERED {
            q.cancel(&format!("q{i}"));
        }
        assert!(q.of("first").is_set());
        assert_eq!(q.lock().recent.len(), MAX_REMEMBERED);
        q.cancel("one more");
        assert!(!q.of("first").is_set(), "the oldest is forgotten");
        assert!(q.of("q1").is_set() && q.of("one more").is_set());
        let s = q.lock();
        assert_eq!(s.recent.len(), s.recent_ids.len());
    }

    /// A leaf whose `execute` counts its calls.
    #[derive(Debug)]
    struct Counted(SchemaRef, Arc<std::sync::atomic::AtomicUsize>);

    impl datafusion::physical_plan::streaming::PartitionStream for Counted {
        fn schema(&self) -> &SchemaRef {
            &self.0
        }

        fn execute(&self, _: Arc<TaskContext>) -> SendableRecordBatchStream {
            self.1.fetch_add(1, Ordering::SeqCst);
            let batch = RecordBatch::new_empty(self.0.clone());
            Box::pin(
                datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(
                    self.0.clone(),
                    futures::stream::iter([Ok(batch)]),
                ),
            )
        }
    }

    /// A leaf below a join's probe side starts when the stage first reads
    /// it (after the join's build side), not when the stage is set up: an
    /// exchange reader started asks its producers to run at once.
    #[tokio::test]
    async fn a_leaf_starts_when_first_read() {
        let schema = Arc::new(arrow::datatypes::Schema::empty());
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let leaf = datafusion::physical_plan::streaming::StreamingTableExec::try_new(
            schema.clone(),
            vec![Arc::new(Counted(schema, calls.clone()))],
            None,
            [],
            false,
            None,
        )
        .unwrap();
        let leaf: Arc<dyn ExecutionPlan> = Arc::new(leaf);
        CancelCheckExec::new(leaf.clone(), false)
            .execute(0, Arc::new(TaskContext::default()))
            .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1, "started with the stage");
        calls.store(0, Ordering::SeqCst);
        let checked = CancelCheckExec::new(leaf, true);
        let mut stream = checked
            .execute(0, Arc::new(TaskContext::default()))
            .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 0, "set up, not started");
        assert!(stream.next().await.unwrap().is_ok());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(stream.next().await.is_none());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    /// A leaf whose one batch comes after a delay.
    #[derive(Debug)]
    struct Slow(SchemaRef, Duration);

    impl datafusion::physical_plan::streaming::PartitionStream for Slow {
        fn schema(&self) -> &SchemaRef {
            &self.0
        }

        fn execute(&self, _: Arc<TaskContext>) -> SendableRecordBatchStream {
            let (batch, delay) = (RecordBatch::new_empty(self.0.clone()), self.1);
            let late = futures::stream::once(async move {
                tokio::time::sleep(delay).await;
                Ok(batch)
            });
            Box::pin(
                datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(
                    self.0.clone(),
                    late,
                ),
            )
        }
    }

    /// Each partition's wait is kept, and the longest of them: the
    /// partitions wait at the same time, so EXPLAIN ANALYZE prints the
    /// longest (their sum exceeded the query's wall time).
    #[tokio::test]
    async fn the_longest_wait_of_the_partitions_is_kept() {
        use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
        let schema = Arc::new(arrow::datatypes::Schema::empty());
        let parts = [10, 40].map(|ms| {
            Arc::new(Slow(schema.clone(), Duration::from_millis(ms))) as Arc<dyn PartitionStream>
        });
        let leaf = StreamingTableExec::try_new(schema, parts.to_vec(), None, [], false, None);
        let check = CancelCheckExec::new(Arc::new(leaf.unwrap()), false);
        let context = Arc::new(TaskContext::default());
        let streams = (0..2).map(|p| check.execute(p, context.clone()).unwrap());
        futures::future::join_all(streams.map(|s| s.collect::<Vec<_>>())).await;
        let metrics = check.metrics().unwrap();
        let each: Vec<usize> = metrics
            .iter()
            .filter(|m| m.value().name() == "WaitTime")
            .map(|m| m.value().as_usize())
            .collect();
        let longest = metrics.sum_by_name("WaitTimeMax").map(|v| v.as_usize());
        assert_eq!(each.len(), 2, "{each:?}");
        assert!(each.iter().all(|ns| *ns >= 10_000_000), "{each:?}");
        assert_eq!(longest, each.iter().max().copied(), "{each:?}");
        assert!(longest < Some(each.iter().sum()), "{each:?}");
    }

    /// In `scan JOIN (scan JOIN scan)` only the build side of the outer
    /// join starts with the stage.
    #[test]
    fn leaves_below_a_joins_probe_side_start_when_read() {
        use arrow::datatypes::{DataType, Field, Schema};
        use datafusion::common::tree_node::TreeNode;
        use datafusion::common::{JoinType, NullEquality};
        use datafusion::physical_expr::expressions::col;
        use datafusion::physical_plan::joins::PartitionMode;
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
        let leaf = || -> Arc<dyn ExecutionPlan> {
            let s = Counted(schema.clone(), Default::default());
            Arc::new(
                datafusion::physical_plan::streaming::StreamingTableExec::try_new(
                    schema.clone(),
                    vec![Arc::new(s)],
                    None,
                    [],
                    false,
                    None,
                )
                .unwrap(),
            )
        };
        let join = |build, probe| -> Arc<dyn ExecutionPlan> {
            let k = col("k", &schema).unwrap();
            let j = HashJoinExec::try_new(
                build,
                probe,
                vec![(k.clone(), k)],
                None,
                &JoinType::LeftSemi,
                None,
                PartitionMode::CollectLeft,
                NullEquality::NullEqualsNothing,
                false,
            );
            Arc::new(j.unwrap())
        };
        let plan = with_cancel_checks(join(leaf(), join(leaf(), leaf()))).unwrap();
        let mut when_read = vec![];
        plan.apply(|p| {
            if let Some(c) = p.downcast_ref::<CancelCheckExec>() {
                when_read.push(c.when_read);
            }
            Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
        })
        .unwrap();
        assert_eq!(when_read, [false, true, true]);
    }
}

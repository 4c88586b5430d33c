//! The execution profile of a fragment: the counters its operators kept on
//! the backend (the scan's `RawRowsRead`, `RowsStatsFiltered`, ...), sent to
//! the FE as the last message of the fragment's Flight stream, for
//! `EXPLAIN ANALYZE` and `SHOW QUERY PROFILE`.
//!
//! A stage of a distributed plan reports its task's counters another way:
//! datafusion-distributed sends each task's node metrics back in the
//! order of the stage's nodes, which must then be the coordinator's. The
//! coordinator holds one node (`DistributedLeafExec`) where a task runs a
//! backend's whole fragment, bound to storage, and the worker puts a cancel
//! check over each leaf; so a profiled query's fragments arrive marked
//! ([`FragmentRootExec`]) and the worker turns each marked fragment, and
//! each checked exchange reader, into one [`CountedLeafExec`]: one node
//! whose metrics are its subtree's counters, named `Operator.Counter`.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterDescription, FilterPushdownPhase, FilterPushdownPropagation,
};
use datafusion::physical_plan::metrics::{Count, Metric, MetricValue, MetricsSet};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use serde::{Deserialize, Serialize};

/// Marks a Flight message that carries a profile (in `app_metadata`, with no
/// Arrow data), so it can be told apart from batches.
pub const PROFILE_MAGIC: &[u8; 8] = b"TPROFIL1";

/// Counters per operator, summed over the operator's partitions (and, once
/// merged on the FE, over every backend and partition of the fragment);
/// a counter named `...Max` (the cancel check's `WaitTimeMax`) is a
/// maximum, and merges as one ([`combine`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FragmentProfile {
    /// Operator name (`TabletScanExec`, `AggregateExec`, ...) -> counter
    /// name -> value. Operator `output_rows` is kept as `RowsProduced`.
    pub operators: BTreeMap<String, BTreeMap<String, u64>>,
}

impl FragmentProfile {
    /// The counters of every operator of an executed plan.
    pub fn of_plan(plan: &Arc<dyn ExecutionPlan>) -> FragmentProfile {
        let mut out = FragmentProfile::default();
        collect(plan, &mut out);
        out
    }

    /// Adds `other`'s counters to this profile's.
    pub fn merge(&mut self, other: &FragmentProfile) {
        for (op, counters) in &other.operators {
            let mine = self.operators.entry(op.clone()).or_default();
            for (name, v) in counters {
                combine(mine.entry(name.clone()).or_default(), name, *v);
            }
        }
    }

    /// The profile as a Flight `app_metadata` payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = PROFILE_MAGIC.to_vec();
        // A map of strings to integers always serializes.
        out.extend(serde_json::to_vec(self).unwrap_or_default());
        out
    }

    /// The profile in a Flight `app_metadata` payload; `None` if it is not one.
    pub fn decode(bytes: &[u8]) -> Option<FragmentProfile> {
        let body = bytes.strip_prefix(PROFILE_MAGIC.as_slice())?;
        serde_json::from_slice(body).ok()
    }
}

fn collect(plan: &Arc<dyn ExecutionPlan>, out: &mut FragmentProfile) {
    if let Some(metrics) = plan.metrics() {
        let metrics = metrics.aggregate_by_name();
        let entry = out.operators.entry(plan.name().to_string()).or_default();
        for m in metrics.iter() {
            if let Some((name, v)) = counter(m.value()) {
                combine(entry.entry(name.to_string()).or_default(), name, v as u64);
            }
        }
    }
    for c in plan.children() {
        collect(c, out);
    }
}

/// Adds `v` to counter `name`'s value `to`, or keeps the larger of them
/// for a maximum (a counter named `...Max`).
fn combine(to: &mut u64, name: &str, v: u64) {
    match name.ends_with("Max") {
        true => *to = (*to).max(v),
        false => *to += v,
    }
}

/// A metric as a counter: rows, counts, bytes and times (nanoseconds),
/// which sum across partitions and tasks, and gauges named `...Max`, which
/// do not; other gauges are left out.
fn counter(v: &MetricValue) -> Option<(&str, usize)> {
    Some(match v {
        MetricValue::Gauge { name, gauge } if name.ends_with("Max") => {
            (name.as_ref(), gauge.value())
        }
        MetricValue::OutputRows(c) => ("RowsProduced", c.value()),
        MetricValue::OutputBytes(c) => ("BytesProduced", c.value()),
        MetricValue::Count { name, count } => (name.as_ref(), count.value()),
        MetricValue::Time { name, time } => (name.as_ref(), time.value()),
        MetricValue::ElapsedCompute(t) => ("ElapsedComputeNs", t.value()),
        MetricValue::Custom { name, value } => (name.as_ref(), value.as_usize()),
        _ => return None,
    })
}

impl FragmentProfile {
    /// This profile as metrics `Operator.Counter` (what a
    /// [`CountedLeafExec`] reports).
    pub fn to_metrics(&self) -> MetricsSet {
        let mut out = MetricsSet::new();
        for (op, counters) in &self.operators {
            for (name, v) in counters {
                let count = Count::new();
                count.add(*v as usize);
                out.push(Arc::new(Metric::new(
                    MetricValue::Count {
                        name: format!("{op}.{name}").into(),
                        count,
                    },
                    None,
                )));
            }
        }
        out
    }

    /// The counters among `metrics` of operator `op`: those named
    /// `Operator.Counter` (a [`CountedLeafExec`]'s) under that operator,
    /// the others under `op`.
    pub fn from_metrics<'a>(
        op: &str,
        metrics: impl IntoIterator<Item = &'a Metric>,
    ) -> FragmentProfile {
        let mut out = FragmentProfile::default();
        for m in metrics {
            out.add_metric(op, m);
        }
        out
    }

    /// Adds metric `m` of operator `op` (see [`Self::from_metrics`]).
    pub fn add_metric(&mut self, op: &str, m: &Metric) {
        let Some((name, v)) = counter(m.value()) else {
            return;
        };
        let (op, name) = match m.value() {
            MetricValue::Count { .. } => name.split_once('.').unwrap_or((op, name)),
            _ => (op, name),
        };
        let counters = self.operators.entry(op.to_string()).or_default();
        combine(
            counters.entry(name.to_string()).or_default(),
            name,
            v as u64,
        );
    }

    /// A counter, if some operator named `op` kept it.
    pub fn get(&self, op: &str, counter: &str) -> Option<u64> {
        self.operators.get(op)?.get(counter).copied()
    }
}

/// Marks a backend's fragment inside a stage of a profiled query (the
/// variant of a `DistributedLeafExec` for one task): it passes rows and
/// filters through; the worker makes it a [`CountedLeafExec`].
#[derive(Debug)]
pub struct FragmentRootExec {
    input: Arc<dyn ExecutionPlan>,
}

impl FragmentRootExec {
    pub fn new(input: Arc<dyn ExecutionPlan>) -> Self {
        FragmentRootExec { input }
    }

    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }
}

impl DisplayAs for FragmentRootExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "FragmentRootExec")
    }
}

impl ExecutionPlan for FragmentRootExec {
    crate::pass_through_exec_plan!("FragmentRootExec");

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let Some(input) = children.pop() else {
            return datafusion::common::internal_err!("FragmentRootExec needs its input");
        };
        Ok(Arc::new(FragmentRootExec { input }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        self.input.execute(partition, context)
    }

    // A join above hands its runtime filter to the scan below.
    fn gather_filters_for_pushdown(
        &self,
        _phase: FilterPushdownPhase,
        parent_filters: Vec<Arc<dyn PhysicalExpr>>,
        _config: &ConfigOptions,
    ) -> Result<FilterDescription> {
        FilterDescription::from_children(parent_filters, &self.children())
    }

    fn handle_child_pushdown_result(
        &self,
        _phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        _config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        Ok(FilterPushdownPropagation::if_all(child_pushdown_result))
    }
}

/// A part of a task's plan shown to datafusion-distributed as one leaf:
/// it runs its input and reports the counters of every operator in it.
#[derive(Debug)]
pub struct CountedLeafExec {
    input: Arc<dyn ExecutionPlan>,
}

impl CountedLeafExec {
    pub fn new(input: Arc<dyn ExecutionPlan>) -> Self {
        CountedLeafExec { input }
    }
}

impl DisplayAs for CountedLeafExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "CountedLeafExec")
    }
}

impl ExecutionPlan for CountedLeafExec {
    fn name(&self) -> &str {
        "CountedLeafExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    // Those of every operator it hides: a join above looks for the scan
    // that tests its runtime filter, or computes none.
    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        self.input.apply(|node| node.apply_expressions(f))
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        self.input.execute(partition, context)
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(FragmentProfile::of_plan(&self.input).to_metrics())
    }
}

/// `plan` (a task's, bound) with each marked fragment and each cancel check
/// over an exchange reader (`checked_exchange`) made one
/// [`CountedLeafExec`], so that its nodes are the coordinator's.
pub fn counted_leaves(
    plan: Arc<dyn ExecutionPlan>,
    checked_exchange: impl Fn(&Arc<dyn ExecutionPlan>) -> bool,
) -> Result<Arc<dyn ExecutionPlan>> {
    use datafusion::common::tree_node::Transformed;
    Ok(plan
        .transform_down(|p| {
            let leaf = match p.downcast_ref::<FragmentRootExec>() {
                Some(root) => root.input.clone(),
                None if checked_exchange(&p) => p.clone(),
                None => return Ok(Transformed::no(p)),
            };
            let counted: Arc<dyn ExecutionPlan> = Arc::new(CountedLeafExec::new(leaf));
            Ok(Transformed::new(counted, true, TreeNodeRecursion::Jump))
        })?
        .data)
}

/// `plan` without [`FragmentRootExec`] markers (a task of a query that
/// collects no counters).
pub fn without_fragment_roots(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    use datafusion::common::tree_node::Transformed;
    Ok(plan
        .transform_up(|p| match p.downcast_ref::<FragmentRootExec>() {
            Some(root) => Ok(Transformed::yes(root.input.clone())),
            None => Ok(Transformed::no(p)),
        })?
        .data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(p: &mut FragmentProfile, op: &str, counter: &str, v: u64) {
        p.operators
            .entry(op.into())
            .or_default()
            .insert(counter.into(), v);
    }

    #[test]
    fn round_trip_and_merge() {
        let mut a = FragmentProfile::default();
        set(&mut a, "TabletScanExec", "RawRowsRead", 10);
        let bytes = a.encode();
        let b = FragmentProfile::decode(&bytes).unwrap();
        assert_eq!(a, b);
        let mut c = b.clone();
        c.merge(&a);
        assert_eq!(c.operators["TabletScanExec"]["RawRowsRead"], 20);
        assert!(FragmentProfile::decode(b"not a profile").is_none());
    }

    /// Partitions, fragments and tasks wait at the same time: the longest
    /// wait merges as a maximum, the summed wait as a sum.
    #[test]
    fn a_maximum_merges_as_one() {
        let mut a = FragmentProfile::default();
        set(&mut a, "CancelCheckExec", "WaitTime", 7);
        set(&mut a, "CancelCheckExec", "WaitTimeMax", 7);
        let mut b = FragmentProfile::default();
        set(&mut b, "CancelCheckExec", "WaitTime", 5);
        set(&mut b, "CancelCheckExec", "WaitTimeMax", 5);
        a.merge(&b);
        assert_eq!(a.get("CancelCheckExec", "WaitTime"), Some(12));
        assert_eq!(a.get("CancelCheckExec", "WaitTimeMax"), Some(7));
        let mut c = FragmentProfile::default();
        for m in b.to_metrics().iter().chain(a.to_metrics().iter()) {
            c.add_metric("CountedLeafExec", m);
        }
        assert_eq!(c.get("CancelCheckExec", "WaitTimeMax"), Some(7));
        assert_eq!(c.get("CancelCheckExec", "WaitTime"), Some(17));
    }

    #[test]
    fn counters_travel_as_metrics_named_operator_dot_counter() {
        let mut a = FragmentProfile::default();
        set(&mut a, "TabletScanExec", "RawRowsRead", 10);
        set(&mut a, "CancelCheckExec", "WaitTime", 7);
        let m = a.to_metrics();
        let back = FragmentProfile::from_metrics("CountedLeafExec", m.iter().map(|m| m.as_ref()));
        assert_eq!(a, back);
        assert_eq!(back.get("TabletScanExec", "RawRowsRead"), Some(10));
        assert_eq!(back.get("TabletScanExec", "PagesRead"), None);
    }
}

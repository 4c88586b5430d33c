//! EXPLAIN ANALYZE's counters, per task of a stage:
//!
//! ```sql
//! EXPLAIN ANALYZE SELECT ... FROM f JOIN [shuffle] d ON f.k = d.k ...
//! --   RawRowsRead: 20000 [6739, 6659, 6602]
//! --   RowsFilteredByRF(k): 6044 [2016, 2013, 2015]
//! --   RowsReceived: 5000 [1691, 1668, 1641]
//! ```
//!
//! A distributed plan that ran is rewritten by datafusion-distributed with
//! each task's metrics on each node (labelled with the task); a task's
//! fragment reports its operators' counters as one leaf's
//! (`tethys_common::plan::CountedLeafExec`). Here they become a profile per
//! task, printed as the total and each task's share.

use std::sync::Arc;

use datafusion::physical_plan::ExecutionPlan;
use tethys_common::plan::FragmentProfile;

/// The scan counters EXPLAIN ANALYZE prints, in Doris' profile names.
pub(super) const SCAN_COUNTERS: &[&str] = &[
    "RawRowsRead",
    "RowsKeyRangeFiltered",
    "RowsStatsFiltered",
    "RowsBloomFilterFiltered",
    "RowsVectorPredFiltered",
    "PagesRead",
    "PagesSkipped",
    "CompressedBytesRead",
    "UncompressedBytesRead",
    "CachedPagesNum",
    "RowsProduced",
];

/// `analyze_lines` of a plan that has run and whose stream is dropped:
/// a distributed plan with its tasks' counters once they reported (a last
/// line says why not, if they did not).
pub async fn analyze_lines_after_run(
    plan: &Arc<dyn ExecutionPlan>,
    output_names: &[String],
) -> Vec<String> {
    match super::super::distribute::with_task_counters(plan.clone()).await {
        Ok(counted) => super::analyze_lines(&counted, output_names),
        Err(why) => {
            let mut lines = super::analyze_lines(plan, output_names);
            lines.push(format!("backends' counters missing: {why}"));
            lines
        }
    }
}

/// A node's counters per task of its stage (one entry for a node the FE
/// ran): a task's counted leaf reports `Operator.Counter` counts, other
/// nodes their own metrics, labelled with the task by datafusion-distributed.
pub(super) fn task_profiles(plan: &Arc<dyn ExecutionPlan>) -> Vec<FragmentProfile> {
    let Some(metrics) = plan.metrics() else {
        return vec![];
    };
    let mut by_task: std::collections::BTreeMap<u64, FragmentProfile> = Default::default();
    for m in metrics.iter() {
        let task = m
            .labels()
            .iter()
            .find(|l| l.name() == datafusion_distributed::DISTRIBUTED_DATAFUSION_TASK_ID_LABEL)
            .and_then(|l| l.value().parse().ok())
            .unwrap_or(0);
        by_task.entry(task).or_default().add_metric(plan.name(), m);
    }
    by_task.into_values().collect()
}

/// `op.counter` summed over `tasks`, and with several tasks each task's in
/// task order: `6001215 [2000405, 2000410, 2000400]`; `scale` divides them.
pub(super) fn counted(tasks: &[FragmentProfile], op: &str, counter: &str, scale: u64) -> String {
    per_task(tasks, op, counter, scale, |each| each.iter().sum())
}

/// As [`counted`], headed by the largest task's value instead of the sum:
/// `12 [12, 8, 10]`.
fn largest(tasks: &[FragmentProfile], op: &str, counter: &str, scale: u64) -> String {
    per_task(tasks, op, counter, scale, |each| {
        each.iter().max().copied().unwrap_or(0)
    })
}

fn per_task(
    tasks: &[FragmentProfile],
    op: &str,
    counter: &str,
    scale: u64,
    head: impl Fn(&[u64]) -> u64,
) -> String {
    let each: Vec<u64> = tasks
        .iter()
        .map(|t| t.get(op, counter).unwrap_or(0) / scale)
        .collect();
    let head = head(&each);
    if each.len() < 2 {
        return head.to_string();
    }
    let each: Vec<String> = each.iter().map(u64::to_string).collect();
    format!("{head} [{}]", each.join(", "))
}

/// What an exchange of a stage that ran received, per task: rows, bytes
/// (as encoded on the wire), messages and the longest time its reader kept
/// one of the task's instances (partitions) waiting.
pub(super) fn exchange_counters(plan: &Arc<dyn ExecutionPlan>) -> Vec<String> {
    let tasks = task_profiles(plan);
    if tasks.is_empty() {
        return vec![];
    }
    let op = plan.name();
    let mut out = vec![
        format!("RowsReceived: {}", counted(&tasks, op, "RowsProduced", 1)),
        format!(
            "BytesReceived: {}",
            counted(&tasks, op, "bytes_transferred", 1)
        ),
        // Messages over the wire: with the bytes, what one message carries.
        format!("MessagesReceived: {}", counted(&tasks, op, "msg_count", 1)),
        // Producer tasks read in process (on the reader's own backend):
        // their rows are in RowsReceived, not in the bytes or messages.
        format!(
            "LocalReads: {}",
            counted(&tasks, op, "local_connections_used", 1)
        ),
    ];
    // The worker's check over the reader keeps nanoseconds. A task's
    // instances wait at the same time: the longest, not their sum (which
    // exceeded the query's wall time), and the longest of the tasks'.
    if tasks
        .iter()
        .any(|t| t.get("CancelCheckExec", "WaitTimeMax").is_some())
    {
        let ms = largest(&tasks, "CancelCheckExec", "WaitTimeMax", 1_000_000);
        out.push(format!("MaxWaitTimeMs: {ms}"));
    }
    out
}

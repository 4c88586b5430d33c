//! The execution profile of a fragment: the counters its operators kept on
//! the backend (the scan's `RawRowsRead`, `RowsStatsFiltered`, ...), sent to
//! the FE as the last message of the fragment's Flight stream, for
//! `EXPLAIN ANALYZE` and `SHOW QUERY PROFILE`.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::physical_plan::ExecutionPlan;
use serde::{Deserialize, Serialize};

/// Marks a Flight message that carries a profile (in `app_metadata`, with no
/// Arrow data), so it can be told apart from batches.
pub const PROFILE_MAGIC: &[u8; 8] = b"TPROFIL1";

/// Counters per operator, summed over the operator's partitions (and, once
/// merged on the FE, over every backend and partition of the fragment).
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
                *mine.entry(name.clone()).or_default() += v;
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
            use datafusion::physical_plan::metrics::MetricValue;
            // Times and gauges are left out: counters sum across partitions.
            let (name, v) = match m.value() {
                MetricValue::OutputRows(c) => ("RowsProduced", c.value()),
                MetricValue::Count { name, count } => (name.as_ref(), count.value()),
                _ => continue,
            };
            *entry.entry(name.to_string()).or_default() += v as u64;
        }
    }
    for c in plan.children() {
        collect(c, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_merge() {
        let mut a = FragmentProfile::default();
        a.operators
            .entry("TabletScanExec".into())
            .or_default()
            .insert("RawRowsRead".into(), 10);
        let bytes = a.encode();
        let b = FragmentProfile::decode(&bytes).unwrap();
        assert_eq!(a, b);
        let mut c = b.clone();
        c.merge(&a);
        assert_eq!(c.operators["TabletScanExec"]["RawRowsRead"], 20);
        assert!(FragmentProfile::decode(b"not a profile").is_none());
    }
}

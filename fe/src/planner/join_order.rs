//! Build-side choice for hash joins: the input expected to be smaller is put
//! on the build (left) side, before DataFusion's `JoinSelection` decides
//! between broadcast (collect) and partitioned joins.
//!
//! Without column statistics DataFusion estimates an inner join to return
//! as many rows as its smaller input, so after `lineorder ⋈ dates` it would
//! build the next hash table on the fact side. Analytical joins are mostly
//! fact-to-dimension (foreign key to primary key), whose output is about as
//! large as the bigger input; this rule estimates with that assumption, so
//! dimensions end up on the build side and their runtime filters on the
//! fact table's scan. A fact table's side stays the probe side even when
//! its joins so far made it a little smaller than the next dimension, so
//! that dimension's runtime filter still reaches the fact table's scan.

use std::sync::Arc;

use datafusion::common::JoinType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};

use super::remote::BeFragmentExec;

/// Rows assumed for an input nothing is known about.
pub(crate) const UNKNOWN_ROWS: f64 = 1e6;
/// Share of rows a filter keeps (DataFusion's default selectivity).
pub(crate) const FILTER_SELECTIVITY: f64 = 0.2;
/// Share of input rows a grouped aggregation returns, by the number of
/// grouping columns: one column (a foreign key, a date) repeats a lot; a
/// combination of two or more (TPC-H q20's per part and supplier sum keeps
/// 60% of its rows) much less.
fn groups_per_row(columns: usize) -> f64 {
    match columns {
        0 | 1 => 0.1,
        2 => 0.3,
        _ => 0.5,
    }
}

/// Swaps hash join inputs so the smaller estimated side is built.
/// `distributed`: the plan runs over several backends, where building a
/// side that reads a big table costs a stage ([`stays_in_stage`]).
#[derive(Debug, Default)]
pub struct BuildSmallerSide {
    pub distributed: bool,
}

impl PhysicalOptimizerRule for BuildSmallerSide {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        // Broadcast only up to `broadcast_row_count_limit` rows.
        let cheap = CHEAP_BROADCAST_ROWS
            .min(config.optimizer.hash_join_single_partition_threshold_rows as f64);
        rewrite_hash_joins(plan, |j| {
            if !j.join_type().supports_swap() || j.null_aware {
                return Ok(None);
            }
            let (l, r) = (j.left(), j.right());
            let (lr, rr) = (estimate_rows(l), estimate_rows(r));
            let probe = |small, s, other, o| {
                keeps_scan_filtered(small, s, other, o)
                    || (self.distributed && o <= cheap && stays_in_stage(small, other))
            };
            let build_right = if lr <= rr {
                probe(l, lr, r, rr)
            } else {
                !probe(r, rr, l, lr)
            };
            if !build_right {
                return Ok(None);
            }
            Ok(Some(j.swap_inputs(*j.partition_mode())?))
        })
    }

    fn name(&self) -> &str {
        "tethys_build_smaller_side"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// A probe side may be up to this many times smaller than the build side
/// when probing it lets the join's runtime filter reach a big scan.
/// Re-measured with 2.0 and 8.0 on TPC-H and SSB at SF1 and SF10 in
/// `benches/results/tuning-2026-12-04-notes.md`: 8.0 slows TPC-H q21 at
/// both scales; 2.0 was as fast at SF1 and faster at SF10 on q10 and q15
/// over three runs of each binary: the better value, not yet adopted.
const FILTERED_PROBE_RATIO: f64 = 4.0;
/// What counts as a big scan: this many times the build side's rows.
const BIG_SCAN_RATIO: f64 = 10.0;

/// Whether `small`, the input with fewer estimated rows (`s`, against the
/// `other` input's `o`), should rather be probed: it reads a table much
/// bigger than the other input (whose runtime filter it would then
/// receive), the other input is not much bigger than it, and its keys may
/// filter. SSB q4.3's lineorder, after the part and supplier joins, is
/// estimated at a third of the customers in AMERICA; building it would
/// keep the customer and date filters from lineorder's scan, whose date
/// filter alone skips three quarters of its pages (27 ms against 55 ms).
/// A whole table's keys filter nothing (a foreign key finds its row):
/// TPC-H q10's orders of one quarter probed every customer, which three
/// backends then each received whole.
fn keeps_scan_filtered(
    small: &Arc<dyn ExecutionPlan>,
    s: f64,
    other: &Arc<dyn ExecutionPlan>,
    o: f64,
) -> bool {
    o <= s * FILTERED_PROBE_RATIO
        && probe_scan_rows(small) >= o * BIG_SCAN_RATIO
        && !super::runtime_filter::reads_whole_tables(other)
}

/// Rows up to which a build side is cheap to send to every backend.
const CHEAP_BROADCAST_ROWS: f64 = 100_000.0;

/// Whether `small`, the input with fewer estimated rows, reads a big table
/// and `other` (`o` rows, cheap to broadcast) reads only small ones:
/// probing `small` keeps it in its scan's stage, `other` broadcast to it.
/// Building it would end that stage at the join and start another for the
/// join's probe side. SSB q3.3's lineorder, after its supplier and
/// customer joins, is estimated at 378 rows against 2,190 dates; built, it
/// was sent to a stage of its own reading `dates` (one tablet, so on one
/// backend). TPC-H q02's cheapest supplies per part (an aggregation over
/// partsupp, as big a table as the other side's) stay built.
fn stays_in_stage(small: &Arc<dyn ExecutionPlan>, other: &Arc<dyn ExecutionPlan>) -> bool {
    scan_rows(other) * BIG_SCAN_RATIO <= probe_scan_rows(small)
}

/// Rows (before filters) of all the scans in `plan`.
fn scan_rows(plan: &Arc<dyn ExecutionPlan>) -> f64 {
    if let Some(be) = plan.downcast_ref::<BeFragmentExec>() {
        return be.info.rows.map_or(UNKNOWN_ROWS, |r| r as f64);
    }
    plan.children().iter().map(|c| scan_rows(c)).sum()
}

/// Rows (before filters) of the scan a runtime filter applied at `plan`'s
/// top would reach: down single-input operators and hash joins' probe
/// sides.
fn probe_scan_rows(plan: &Arc<dyn ExecutionPlan>) -> f64 {
    if let Some(be) = plan.downcast_ref::<BeFragmentExec>() {
        return be.info.rows.map_or(0.0, |r| r as f64);
    }
    if let Some(j) = plan.downcast_ref::<HashJoinExec>() {
        return probe_scan_rows(j.right());
    }
    match plan.children().as_slice() {
        [child] => probe_scan_rows(child),
        _ => 0.0,
    }
}

/// Partitions the broadcast joins whose build side is estimated at more
/// rows than `broadcast_row_count_limit` (DataFusion's
/// `hash_join_single_partition_threshold_rows`, which `JoinSelection`
/// ignores when it knows the build side's byte size). Runs after
/// `JoinSelection` and before `EnsureRequirements`, which then hashes both
/// inputs on the join keys.
#[derive(Debug, Default)]
pub struct BroadcastRowLimit;

impl PhysicalOptimizerRule for BroadcastRowLimit {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let limit = config.optimizer.hash_join_single_partition_threshold_rows as f64;
        rewrite_hash_joins(plan, |j| {
            if *j.partition_mode() != PartitionMode::CollectLeft
                || j.null_aware
                || estimate_rows(j.left()) <= limit
            {
                return Ok(None);
            }
            Ok(Some(
                j.builder()
                    .with_partition_mode(PartitionMode::Partitioned)
                    .build_exec()?,
            ))
        })
    }

    fn name(&self) -> &str {
        "tethys_broadcast_row_limit"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Replaces, bottom up, each hash join of `plan` for which `f` returns a
/// new plan (the shared walk of the join rules).
pub fn rewrite_hash_joins(
    plan: Arc<dyn ExecutionPlan>,
    f: impl Fn(&HashJoinExec) -> Result<Option<Arc<dyn ExecutionPlan>>>,
) -> Result<Arc<dyn ExecutionPlan>> {
    Ok(plan
        .transform_up(|p| {
            let Some(j) = p.downcast_ref::<HashJoinExec>() else {
                return Ok(Transformed::no(p));
            };
            Ok(match f(j)? {
                Some(new) => Transformed::yes(new),
                None => Transformed::no(p),
            })
        })?
        .data)
}

/// Estimated output rows of `plan`.
pub fn estimate_rows(plan: &Arc<dyn ExecutionPlan>) -> f64 {
    estimate(plan).rows
}

/// An estimate: rows, and the share of its base tables' rows they are
/// (what filters, and joins with filtered inputs, kept).
#[derive(Debug, Clone, Copy)]
struct Estimate {
    rows: f64,
    kept: f64,
}

fn estimate(plan: &Arc<dyn ExecutionPlan>) -> Estimate {
    let rows_only = |rows: f64| Estimate { rows, kept: 1.0 };
    if let Some(be) = plan.downcast_ref::<BeFragmentExec>() {
        let rows = be
            .estimate(None)
            .num_rows
            .get_value()
            .map_or(UNKNOWN_ROWS, |n| *n as f64);
        return Estimate {
            rows,
            kept: be.selectivity(),
        };
    }
    let children = plan.children();
    let child_est = |i: usize| {
        children
            .get(i)
            .map_or(rows_only(UNKNOWN_ROWS), |c| estimate(c))
    };
    if let Some(j) = plan.downcast_ref::<HashJoinExec>() {
        return join_estimate(j);
    }
    let child = |i: usize| child_est(i).rows;
    if plan.downcast_ref::<FilterExec>().is_some() {
        let c = child_est(0);
        return Estimate {
            rows: c.rows * FILTER_SELECTIVITY,
            kept: c.kept * FILTER_SELECTIVITY,
        };
    }
    if let Some(a) = plan.downcast_ref::<AggregateExec>() {
        return rows_only(if a.group_expr().expr().is_empty() {
            1.0
        } else if matches!(
            a.mode(),
            AggregateMode::Partial | AggregateMode::Single | AggregateMode::SinglePartitioned
        ) {
            child(0) * groups_per_row(a.group_expr().expr().len())
        } else {
            // Merging partial states: as many groups as the partial phase.
            child(0)
        });
    }
    if plan.name() == "UnionExec" {
        return rows_only(children.iter().map(|c| estimate(c).rows).sum());
    }
    if plan.name().contains("NestedLoopJoin") || plan.name() == "CrossJoinExec" {
        return rows_only(child(0) * child(1));
    }
    if children.is_empty() {
        return rows_only(match plan.name() {
            "PlaceholderRowExec" | "EmptyExec" => 1.0,
            _ => UNKNOWN_ROWS,
        });
    }
    // Projections, repartitions, sorts, limits, ...: as many as the input.
    child_est(0)
}

/// Bytes a row of `schema` takes in Arrow batches: each fixed-width
/// column's width, and a string or binary value taken to be 16 bytes
/// (an SSB or TPC-H name or code) plus its offset or view.
pub fn row_width(schema: &arrow::datatypes::Schema) -> f64 {
    use arrow::datatypes::DataType;
    schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Boolean => 0.125,
            DataType::Utf8 | DataType::Binary => 20.0,
            DataType::LargeUtf8 | DataType::LargeBinary => 24.0,
            DataType::Utf8View | DataType::BinaryView => 32.0,
            t => t.primitive_width().unwrap_or(16) as f64,
        })
        .sum::<f64>()
        .max(1.0)
}

/// Estimated output rows of hash join `j`.
pub fn estimate_join_rows(j: &HashJoinExec) -> f64 {
    join_estimate(j).rows
}

fn join_estimate(j: &HashJoinExec) -> Estimate {
    let rows_only = |rows: f64| Estimate { rows, kept: 1.0 };
    let (l, r) = (estimate(j.left()), estimate(j.right()));
    match j.join_type() {
        // A semi join keeps the rows whose key the other side has:
        // shrunk, like an inner join, by what the other side's filters
        // kept (TPC-H q20's partsupp rows of the 'forest%' parts).
        JoinType::LeftSemi => Estimate {
            rows: l.rows * r.kept,
            kept: l.kept * r.kept,
        },
        JoinType::RightSemi => Estimate {
            rows: r.rows * l.kept,
            kept: r.kept * l.kept,
        },
        JoinType::LeftAnti | JoinType::LeftMark => l,
        JoinType::RightAnti | JoinType::RightMark => r,
        JoinType::Full => rows_only(l.rows + r.rows),
        JoinType::Left | JoinType::Right => rows_only(l.rows.max(r.rows)),
        JoinType::Inner => {
            // Foreign key to primary key: every row of the side over
            // the bigger tables finds its match, unless a filter
            // dropped it from the other side, so it shrinks by what the
            // other side kept. Bigger by rows before filters: after the
            // part and supplier joins SSB q4.3's lineorder side has
            // fewer rows than the customers in AMERICA, yet it is
            // still the foreign key side of the customer join.
            let base = |e: &Estimate| e.rows / e.kept.max(1e-12);
            let (big, small) = if base(&l) >= base(&r) { (l, r) } else { (r, l) };
            Estimate {
                rows: big.rows * small.kept,
                kept: big.kept * small.kept,
            }
        }
    }
}

//! Binding a decoded fragment to this backend: every `OlapScanExec` leaf is
//! replaced by a `TabletScanExec` over local tablets. A `FilterExec` directly
//! above it (or the `ScanFilterExec` the FE sends in its place) is folded
//! into the scan, which prunes with its predicate and
//! evaluates it page by page. An ungrouped aggregate the FE pushed onto its
//! scan is answered by the storage layer (`agg_scan.rs`).

use std::sync::Arc;

use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::filter::FilterExec;
use tethys_common::Result;
use tethys_common::plan::{OlapScanExec, ScanFilterExec};

use super::agg_scan::TabletAggScanExec;
use super::scan::TabletScanExec;
use crate::storage::StorageEngine;

/// Replaces scan descriptions with storage scans, recursively; a partial
/// aggregate over a scan the FE marked `push_agg` becomes one
/// [`TabletAggScanExec`] when it still has the shape that allows it.
pub fn bind_scans(
    plan: Arc<dyn ExecutionPlan>,
    engine: &Arc<StorageEngine>,
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(agg) = plan.downcast_ref::<AggregateExec>()
        && let Some((aggs, scan)) = tethys_common::plan::pushable_agg(agg)
        && scan.push_agg().is_some()
    {
        return Ok(Arc::new(TabletAggScanExec::new(
            scan.clone(),
            aggs,
            agg.schema(),
            engine.clone(),
        )));
    }
    if let Some(scan) = plan.downcast_ref::<OlapScanExec>() {
        return Ok(Arc::new(TabletScanExec::new(
            scan.clone(),
            None,
            false,
            engine.clone(),
        )));
    }
    // The FE sends a filter over a scan as a `ScanFilterExec`.
    if let Some(filter) = plan.downcast_ref::<ScanFilterExec>()
        && let Some(scan) = filter.input().downcast_ref::<OlapScanExec>()
    {
        return Ok(Arc::new(TabletScanExec::new(
            scan.clone(),
            Some(filter.predicate().clone()),
            true,
            engine.clone(),
        )));
    }
    if let Some(filter) = plan.downcast_ref::<FilterExec>()
        && let Some(scan) = filter.input().downcast_ref::<OlapScanExec>()
    {
        // A filter that also projects stays, above a scan that only prunes.
        let evaluates = filter.projection().is_none();
        let bound: Arc<dyn ExecutionPlan> = Arc::new(TabletScanExec::new(
            scan.clone(),
            Some(filter.predicate().clone()),
            evaluates,
            engine.clone(),
        ));
        if evaluates {
            return Ok(bound);
        }
        #[allow(deprecated)]
        return Ok(plan.clone().with_new_children(vec![bound])?);
    }
    let children: Vec<Arc<dyn ExecutionPlan>> = plan.children().into_iter().cloned().collect();
    if children.is_empty() {
        return Ok(plan);
    }
    let bound = children
        .into_iter()
        .map(|c| bind_scans(c, engine))
        .collect::<Result<Vec<_>>>()?;
    #[allow(deprecated)]
    Ok(plan.with_new_children(bound)?)
}

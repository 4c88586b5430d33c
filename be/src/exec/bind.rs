//! Binding a decoded fragment to this backend: every `OlapScanExec` leaf is
//! replaced by a `TabletScanExec` over local tablets, taking along the
//! predicate of a `FilterExec` directly above it for zone-map pruning.

use std::sync::Arc;

use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExec;
use tethys_common::Result;
use tethys_common::plan::OlapScanExec;

use super::scan::TabletScanExec;
use crate::storage::StorageEngine;

/// Replaces scan descriptions with storage scans, recursively.
pub fn bind_scans(
    plan: Arc<dyn ExecutionPlan>,
    engine: &Arc<StorageEngine>,
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(scan) = plan.downcast_ref::<OlapScanExec>() {
        return Ok(Arc::new(TabletScanExec::new(
            scan.clone(),
            None,
            engine.clone(),
        )));
    }
    if let Some(filter) = plan.downcast_ref::<FilterExec>()
        && let Some(scan) = filter.input().downcast_ref::<OlapScanExec>()
    {
        let bound: Arc<dyn ExecutionPlan> = Arc::new(TabletScanExec::new(
            scan.clone(),
            Some(filter.predicate().clone()),
            engine.clone(),
        ));
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

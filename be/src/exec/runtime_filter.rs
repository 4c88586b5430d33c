//! Runtime filters inside a stage of a distributed plan:
//!
//! ```sql
//! SELECT sum(lo_revenue) FROM lineorder JOIN dates ON lo_orderdate = d_datekey
//!     WHERE d_year = 1993;
//! ```
//!
//! The `dates` side is broadcast to every backend; each backend's join
//! publishes the keys it built as a dynamic filter, which its lineorder scan
//! takes (`TabletScanExec`'s filter pushdown) and applies once the build side
//! is complete: the bounds prune pages by their zone maps, the hash-table
//! lookup drops rows before they reach the join. The worker re-plans filter
//! pushdown on each stage it receives (`service/worker.rs`), since a plan
//! arrives without its joins' filters.

use std::sync::Arc;
use std::time::Duration;

use datafusion::error::Result;
use datafusion::physical_expr::expressions::Literal;
use datafusion::physical_expr::{PhysicalExpr, conjunction, split_conjunction};
use datafusion::physical_expr_common::physical_expr::snapshot_physical_expr;
use datafusion::scalar::ScalarValue;

/// How long a scan waits for its joins' build sides before reading without
/// their filters (`runtime_filter_wait_time_ms`), a session extension.
#[derive(Debug, Clone, Copy)]
pub struct RuntimeFilterWait(pub Duration);

/// `predicate` AND the filters as they now stand; `None` when nothing
/// filters (a filter still `true`: its build side is not done).
pub fn with_filters(
    predicate: Option<&Arc<dyn PhysicalExpr>>,
    filters: &[Arc<dyn PhysicalExpr>],
) -> Result<Option<Arc<dyn PhysicalExpr>>> {
    let mut parts: Vec<Arc<dyn PhysicalExpr>> = predicate.into_iter().cloned().collect();
    for f in filters {
        let now = snapshot_physical_expr(f.clone())?;
        for c in split_conjunction(&now) {
            let trivially_true = c
                .downcast_ref::<Literal>()
                .is_some_and(|l| l.value() == &ScalarValue::Boolean(Some(true)));
            if !trivially_true {
                parts.push(c.clone());
            }
        }
    }
    Ok((!parts.is_empty()).then(|| conjunction(parts)))
}

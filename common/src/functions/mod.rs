//! MySQL / Doris compatible scalar functions that DataFusion lacks.
//!
//! Both the FE (planning, constant folding) and every BE (fragment execution)
//! register exactly this set, so a fragment that names one of them decodes on
//! any backend.

mod datetime;
mod misc;
pub mod timezone;

use std::sync::Arc;

use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::ScalarUDF;

pub use misc::ConstFn;

/// All Tethys scalar functions.
pub fn all_udfs() -> Vec<Arc<ScalarUDF>> {
    let mut v = datetime::udfs();
    v.extend(misc::udfs());
    v
}

/// Registers the Tethys functions (and MySQL spellings of DataFusion ones).
pub fn register_all(registry: &mut dyn FunctionRegistry) -> datafusion::error::Result<()> {
    for udf in all_udfs() {
        registry.register_udf(udf)?;
    }
    Ok(())
}

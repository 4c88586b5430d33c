//! MySQL / Doris compatible scalar and aggregate functions that DataFusion
//! lacks.
//!
//! Both the FE (planning, constant folding) and every BE (fragment execution)
//! register exactly this set, so a fragment that names one of them decodes on
//! any backend.

pub mod bitmap;
mod calendar;
mod date_arith;
mod datetime;
pub mod hll;
mod misc;
pub mod object;
mod object_agg;
mod string;
mod time;
pub mod timezone;
pub mod week;

use std::sync::Arc;

use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::{AggregateUDF, ScalarUDF};

pub use calendar::ROUND_DATETIME;
pub use misc::ConstFn;
pub use string::substring_udf;

/// A function call's arguments as arrays of its row count.
pub(super) fn arrays(
    args: &datafusion::logical_expr::ScalarFunctionArgs,
) -> datafusion::error::Result<Vec<arrow::array::ArrayRef>> {
    let n = args.number_rows;
    args.args.iter().map(|a| a.to_array(n)).collect()
}

/// All Tethys scalar functions.
pub fn all_udfs() -> Vec<Arc<ScalarUDF>> {
    let mut v = datetime::udfs();
    v.extend(date_arith::udfs());
    v.extend(calendar::udfs());
    v.extend(misc::udfs());
    v.extend(string::udfs());
    v.extend(time::udfs());
    v.extend(week::udfs());
    v.extend(bitmap::udfs());
    v.extend(hll::udfs());
    v
}

/// All Tethys aggregate functions (over BITMAP and HLL values).
pub fn all_udafs() -> Vec<Arc<AggregateUDF>> {
    object_agg::udafs()
}

/// Registers the Tethys functions (and MySQL spellings of DataFusion ones).
pub fn register_all(registry: &mut dyn FunctionRegistry) -> datafusion::error::Result<()> {
    for udf in all_udfs() {
        registry.register_udf(udf)?;
    }
    for udaf in all_udafs() {
        registry.register_udaf(udaf)?;
    }
    Ok(())
}

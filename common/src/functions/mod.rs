//! MySQL / Doris compatible scalar and aggregate functions that DataFusion
//! lacks.
//!
//! Both the FE (planning, constant folding) and every BE (fragment execution)
//! register exactly this set, so a fragment that names one of them decodes on
//! any backend.

/// Inside a `ScalarUDFImpl` or `AggregateUDFImpl`: `name` and `signature`
/// from the struct's fields of those names (or with the name given, when the
/// struct serves one function), and `aliases` from its field too when asked
/// `with aliases`.
macro_rules! named_by_fields {
    (@signature) => {
        fn signature(&self) -> &datafusion::logical_expr::Signature {
            &self.signature
        }
    };
    (with aliases) => {
        named_by_fields!();
        named_by_fields!(@aliases);
    };
    ($name:literal, with aliases) => {
        named_by_fields!($name);
        named_by_fields!(@aliases);
    };
    (@aliases) => {
        fn aliases(&self) -> &[String] {
            &self.aliases
        }
    };
    () => {
        fn name(&self) -> &str {
            &self.name
        }
        named_by_fields!(@signature);
    };
    ($name:literal) => {
        fn name(&self) -> &str {
            $name
        }
        named_by_fields!(@signature);
    };
}

pub mod bitmap;
mod calendar;
mod collected;
mod date_arith;
mod datetime;
mod encoding;
mod fixed;
pub mod hll;
mod math;
mod misc;
pub mod object;
mod object_agg;
mod regexp;
mod string;
mod text;
mod time;
mod time_round;
pub mod timezone;
mod url;
pub mod week;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use datafusion::execution::{FunctionRegistry, SessionStateBuilder};
use datafusion::logical_expr::{AggregateUDF, ScalarUDF, WindowUDF};

pub use calendar::ROUND_DATETIME;
pub use misc::ConstFn;
pub use string::substring_udf;
pub use text::CAST_TO_TEXT;

/// A function call's arguments as arrays of its row count.
pub(super) fn arrays(
    args: &datafusion::logical_expr::ScalarFunctionArgs,
) -> datafusion::error::Result<Vec<arrow::array::ArrayRef>> {
    let n = args.number_rows;
    args.args.iter().map(|a| a.to_array(n)).collect()
}

/// A call's arguments as arrays: of one row when every argument is a
/// constant (the call is then worked out once), else of the call's rows.
pub(super) fn constant_or_arrays(
    args: &datafusion::logical_expr::ScalarFunctionArgs,
) -> datafusion::error::Result<(bool, Vec<arrow::array::ArrayRef>)> {
    use datafusion::logical_expr::ColumnarValue;
    let constant = args
        .args
        .iter()
        .all(|a| matches!(a, ColumnarValue::Scalar(_)));
    let n = if constant { 1 } else { args.number_rows };
    let arrays = args
        .args
        .iter()
        .map(|a| a.to_array(n))
        .collect::<datafusion::error::Result<_>>()?;
    Ok((constant, arrays))
}

/// The result of a call whose arguments came from [`constant_or_arrays`].
pub(super) fn constant_or_array(
    constant: bool,
    out: arrow::array::ArrayRef,
) -> datafusion::error::Result<datafusion::logical_expr::ColumnarValue> {
    use datafusion::logical_expr::ColumnarValue;
    if constant {
        return Ok(ColumnarValue::Scalar(
            datafusion::common::ScalarValue::try_from_array(&out, 0)?,
        ));
    }
    Ok(ColumnarValue::Array(out))
}

/// All Tethys scalar functions, made once per process (they hold no state;
/// a backend's every task registers them).
pub fn all_udfs() -> Vec<Arc<ScalarUDF>> {
    static UDFS: LazyLock<Vec<Arc<ScalarUDF>>> = LazyLock::new(make_udfs);
    UDFS.clone()
}

fn make_udfs() -> Vec<Arc<ScalarUDF>> {
    let mut v = datetime::udfs();
    v.extend(date_arith::udfs());
    v.extend(calendar::udfs());
    v.extend(misc::udfs());
    v.extend(math::udfs());
    v.extend(string::udfs());
    v.extend(time::udfs());
    v.extend(week::udfs());
    v.extend(regexp::udfs());
    v.extend(url::udfs());
    v.extend(time_round::udfs());
    v.extend(collected::udfs());
    v.extend(encoding::udfs());
    v.push(text::cast_to_text_udf());
    v.extend(bitmap::udfs());
    v.extend(hll::udfs());
    v.push(crate::plan::bucket_route_udf());
    v
}

/// All Tethys aggregate functions (over BITMAP and HLL values).
pub fn all_udafs() -> Vec<Arc<AggregateUDF>> {
    static UDAFS: LazyLock<Vec<Arc<AggregateUDF>>> = LazyLock::new(object_agg::udafs);
    UDAFS.clone()
}

/// `builder` with the Tethys functions added to those it will register
/// when built (after DataFusion's defaults, so ours win, as with
/// [`register_all`]): no session to register them into afterwards.
pub fn add_all(builder: &mut SessionStateBuilder) {
    builder
        .scalar_functions()
        .get_or_insert_default()
        .extend(all_udfs());
    builder
        .aggregate_functions()
        .get_or_insert_default()
        .extend(all_udafs());
}

/// Every function a session registers (DataFusion's and Tethys', ours
/// winning as with [`add_all`]), by each name and alias it answers to.
struct Registry {
    scalar: HashMap<String, Arc<ScalarUDF>>,
    aggregate: HashMap<String, Arc<AggregateUDF>>,
    window: HashMap<String, Arc<WindowUDF>>,
}

static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
    let mut builder = SessionStateBuilder::new().with_default_features();
    add_all(&mut builder);
    let state = builder.build();
    Registry {
        scalar: state.scalar_functions().clone(),
        aggregate: state.aggregate_functions().clone(),
        window: state.window_functions().clone(),
    }
});

/// `builder` registering, of DataFusion's and Tethys' functions, only those
/// named in `names` (scalar, aggregate or window; names it does not know
/// are left out, so a plan calling them fails to decode naming them):
/// what a backend's task needs to decode its plan, when the FE has named
/// the functions the plan calls (a session registering all ~430 names
/// cost a task about as much as decoding its plan). The other function kinds (higher
/// order functions) stay as `builder` has them.
pub fn add_named<'a>(builder: &mut SessionStateBuilder, names: impl IntoIterator<Item = &'a str>) {
    let (mut scalar, mut aggregate, mut window) = (vec![], vec![], vec![]);
    for name in names {
        scalar.extend(REGISTRY.scalar.get(name).cloned());
        aggregate.extend(REGISTRY.aggregate.get(name).cloned());
        window.extend(REGISTRY.window.get(name).cloned());
    }
    *builder.scalar_functions() = Some(scalar);
    *builder.aggregate_functions() = Some(aggregate);
    *builder.window_functions() = Some(window);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A session given names registers those functions alone, of each kind,
    /// Tethys' among DataFusion's; a name it does not know is left out.
    #[test]
    fn a_session_given_names_registers_those_alone() {
        let mut builder = SessionStateBuilder::new().with_default_features();
        add_named(
            &mut builder,
            ["upper", "sum", "row_number", "bitmap_count", "no_such_fn"],
        );
        let state = builder.build();
        let mut scalar: Vec<_> = state.scalar_functions().keys().cloned().collect();
        scalar.sort();
        // `upper` under its MySQL alias too.
        assert_eq!(scalar, ["bitmap_count", "ucase", "upper"]);
        assert_eq!(
            state.aggregate_functions().keys().collect::<Vec<_>>(),
            ["sum"]
        );
        assert_eq!(
            state.window_functions().keys().collect::<Vec<_>>(),
            ["row_number"]
        );
        // Picked from every function, DataFusion's and Tethys'.
        assert!(REGISTRY.scalar.contains_key("lower") && REGISTRY.scalar.contains_key("to_bitmap"));
    }
}

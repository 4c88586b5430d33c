//! The functions a distributed query's tasks register: those its plan calls.
//!
//! ```sql
//! -- SSB q4.3 on three BEs: 13 tasks, one function (sum)
//! SELECT d_year, s_city, p_brand, sum(lo_revenue - lo_supplycost) AS profit
//! FROM dates, customer, supplier, part, lineorder WHERE ... GROUP BY ...
//! ```
//!
//! A task's session on a backend is a clone of its query's, and its task
//! context another copy: each copied the tables of all ~430 function names
//! (DataFusion's and Tethys'), and each query's first task on a backend
//! registered them all (perf of this query in a loop: 4% of all CPU, the
//! FE's and three BEs', about what the backends spent decoding the plans,
//! 3.8%).
//! A task needs a function only to decode a plan calling it (by name, from
//! its context). So the FE names the functions the plan calls in the
//! header [`task_headers::FUNCTIONS`] of every task (one list for the
//! query), and a backend's tasks register those alone
//! (`be/src/service/worker.rs`). The list is what the statement calls (its
//! optimized logical plan, subqueries included) and what physical planning
//! added (a bucket shuffle's route), with the fragments' plans below the
//! FE's scan leaves. The header goes on the FE's calls through
//! [`NamingChannels`], whose names [`PlaceOrFallBack`] sets once the plan is
//! placed: datafusion-distributed takes a task's headers from the
//! statement's session, fixed before the plan exists.
//!
//! [`PlaceOrFallBack`]: super::distribute

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::physical_expr::window::SlidingAggregateWindowExpr;
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::windows::{
    BoundedWindowAggExec, PlainAggregateWindowExpr, StandardWindowExpr, WindowAggExec, WindowExpr,
    WindowUDFExpr,
};
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, Partitioning};
use datafusion_distributed::grpc::{BoxCloneSyncChannel, create_worker_client};
use datafusion_distributed::{ChannelResolver, WorkerChannel};
use tethys_common::task_headers;
use tethys_common::worker_channels::WorkerChannels;
use tonic::codegen::http::{HeaderName, HeaderValue};
use tower::ServiceExt;
use url::Url;

use super::remote::BeFragmentExec;

/// The names of the functions `logical`, planned as `physical`, calls.
pub fn called_functions(
    logical: &LogicalPlan,
    physical: &Arc<dyn ExecutionPlan>,
) -> DfResult<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    logical.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            e.apply(|e| {
                match e {
                    Expr::ScalarFunction(f) => names.insert(f.func.name().to_string()),
                    Expr::AggregateFunction(f) => names.insert(f.func.name().to_string()),
                    Expr::WindowFunction(f) => names.insert(f.fun.name().to_string()),
                    _ => false,
                };
                Ok(TreeNodeRecursion::Continue)
            })
        })
    })?;
    physical_functions(physical, &mut names)?;
    Ok(names)
}

/// Adds to `names` the scalar functions `plan`'s nodes and output
/// partitionings call and its aggregations' and windows' functions,
/// through the plans of the FE's scan leaves' fragments.
fn physical_functions(plan: &Arc<dyn ExecutionPlan>, names: &mut BTreeSet<String>) -> DfResult<()> {
    let mut fragments = vec![];
    plan.apply(|node| {
        node.apply_expressions(&mut |e| scalar_functions(e, names))?;
        if let Partitioning::Hash(exprs, _) = node.output_partitioning() {
            for e in exprs {
                scalar_functions(e, names)?;
            }
        }
        if let Some(agg) = node.downcast_ref::<AggregateExec>() {
            names.extend(agg.aggr_expr().iter().map(|f| f.fun().name().to_string()));
        }
        // Windows' and aggregations' functions as the physical plan holds
        // them: an ordering rule may have swapped one for its reverse
        // (DataFusion's `reverse_expr`, `first_value` for `last_value`).
        let windows = match node.downcast_ref::<BoundedWindowAggExec>() {
            Some(w) => w.window_expr(),
            None => node
                .downcast_ref::<WindowAggExec>()
                .map_or(&[][..], |w| w.window_expr()),
        };
        names.extend(windows.iter().filter_map(window_function));
        if let Some(leaf) = node.downcast_ref::<BeFragmentExec>() {
            fragments.extend(leaf.fragments().iter().map(|(_, p)| p.clone()));
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    fragments
        .iter()
        .try_for_each(|p| physical_functions(p, names))
}

/// The name of the function a window expression calls, as datafusion-proto
/// encodes it (an aggregate's or a window function's).
fn window_function(expr: &Arc<dyn WindowExpr>) -> Option<String> {
    let any = expr.as_any();
    if let Some(w) = any.downcast_ref::<PlainAggregateWindowExpr>() {
        return Some(w.get_aggregate_expr().fun().name().to_string());
    }
    if let Some(w) = any.downcast_ref::<SlidingAggregateWindowExpr>() {
        return Some(w.get_aggregate_expr().fun().name().to_string());
    }
    any.downcast_ref::<StandardWindowExpr>()?
        .get_standard_func_expr()
        .as_any()
        .downcast_ref::<WindowUDFExpr>()
        .map(|f| f.fun().name().to_string())
}

/// Adds to `names` the scalar functions `expr` calls.
fn scalar_functions(
    expr: &Arc<dyn PhysicalExpr>,
    names: &mut BTreeSet<String>,
) -> DfResult<TreeNodeRecursion> {
    expr.apply(|e| {
        if let Some(f) = e.downcast_ref::<ScalarFunctionExpr>() {
            names.insert(f.name().to_string());
        }
        Ok(TreeNodeRecursion::Continue)
    })
}

/// The header value naming `names`; `None` when one cannot be told apart
/// in it (empty, or other than printable ASCII without commas: the worker
/// reads the header as ASCII): then the tasks register every function.
pub fn header_value(names: &BTreeSet<String>) -> Option<HeaderValue> {
    let plain = |n: &String| !n.is_empty() && n.bytes().all(|b| b.is_ascii_graphic() && b != b',');
    if !names.iter().all(plain) {
        return None;
    }
    let list = names
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(",");
    HeaderValue::from_str(&list).ok()
}

/// The functions header of one statement's task calls, set once its plan is
/// placed (shared by the statement's planner and its channels).
#[derive(Clone, Debug, Default)]
pub struct PlanFunctions(Arc<Mutex<Option<HeaderValue>>>);

impl PlanFunctions {
    /// The plan's functions are `names` (`None`: not known, all).
    pub fn set(&self, names: Option<HeaderValue>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = names;
    }

    fn get(&self) -> Option<HeaderValue> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The FE's channels to the workers for one statement: the process' shared
/// channels, each call carrying the statement's [`PlanFunctions`].
#[derive(Clone, Debug)]
pub struct NamingChannels {
    pub channels: WorkerChannels,
    pub functions: PlanFunctions,
}

#[async_trait]
impl ChannelResolver for NamingChannels {
    async fn get_worker_client_for_url(
        &self,
        url: &Url,
    ) -> Result<Box<dyn WorkerChannel>, DataFusionError> {
        let channel = self.channels.channel(url)?;
        let functions = self.functions.clone();
        let channel = channel.map_request(move |mut req: tonic::codegen::http::Request<_>| {
            if let Some(names) = functions.get() {
                req.headers_mut()
                    .insert(HeaderName::from_static(task_headers::FUNCTIONS), names);
            }
            req
        });
        Ok(create_worker_client(BoxCloneSyncChannel::new(channel)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::Schema;
    use datafusion::common::config::ConfigOptions;
    use datafusion::physical_expr::expressions::col;
    use datafusion::physical_plan::empty::EmptyExec;
    use datafusion::physical_plan::repartition::RepartitionExec;
    use datafusion::prelude::SessionContext;

    fn names(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// The statement's scalar, aggregate and window functions, those of its
    /// subqueries too.
    #[tokio::test]
    async fn names_what_the_statement_calls() {
        let ctx = SessionContext::new();
        let a: ArrayRef = Arc::new(Int64Array::from(vec![1, -2]));
        let s: ArrayRef = Arc::new(StringArray::from(vec!["x", "y"]));
        ctx.register_batch(
            "t",
            RecordBatch::try_from_iter([("a", a), ("s", s)]).unwrap(),
        )
        .unwrap();
        let df = ctx
            .sql(
                "SELECT upper(s), sum(a), row_number() OVER (ORDER BY s) FROM t \
                 WHERE a IN (SELECT abs(a) FROM t) GROUP BY s",
            )
            .await
            .unwrap();
        let logical = df.clone().into_optimized_plan().unwrap();
        let physical = df.create_physical_plan().await.unwrap();
        let called = called_functions(&logical, &physical).unwrap();
        assert!(
            called.is_superset(&names(&["abs", "row_number", "sum", "upper"])),
            "{called:?}"
        );
        assert!(!called.contains("lower"));
    }

    /// The physical plan's window functions are named from its nodes.
    #[tokio::test]
    async fn names_the_physical_plans_windows() {
        let ctx = SessionContext::new();
        let a: ArrayRef = Arc::new(Int64Array::from(vec![1, -2]));
        ctx.register_batch("t", RecordBatch::try_from_iter([("a", a)]).unwrap())
            .unwrap();
        let df = ctx
            .sql("SELECT row_number() OVER (ORDER BY a), sum(a) OVER (ORDER BY a) FROM t")
            .await
            .unwrap();
        let physical = df.create_physical_plan().await.unwrap();
        let mut called = BTreeSet::new();
        physical_functions(&physical, &mut called).unwrap();
        assert!(
            called.is_superset(&names(&["row_number", "sum"])),
            "{called:?}"
        );
    }

    /// A function only the physical plan calls (as a bucket shuffle's
    /// route hashes rows) is named too.
    #[test]
    fn names_what_the_physical_plan_adds() {
        let schema = Arc::new(Schema::new(vec![arrow::datatypes::Field::new(
            "s",
            arrow::datatypes::DataType::Utf8,
            true,
        )]));
        let upper = ScalarFunctionExpr::try_new(
            datafusion::functions::string::upper(),
            vec![col("s", &schema).unwrap()],
            &schema,
            Arc::new(ConfigOptions::default()),
        )
        .unwrap();
        let plan: Arc<dyn ExecutionPlan> = Arc::new(
            RepartitionExec::try_new(
                Arc::new(EmptyExec::new(schema)),
                Partitioning::Hash(vec![Arc::new(upper)], 2),
            )
            .unwrap(),
        );
        let mut called = BTreeSet::new();
        physical_functions(&plan, &mut called).unwrap();
        assert_eq!(called, names(&["upper"]));
    }

    /// Names a header cannot tell apart leave the tasks every function.
    #[test]
    fn a_list_it_cannot_carry_is_none() {
        assert_eq!(
            header_value(&names(&["sum", "upper"])).unwrap(),
            "sum,upper"
        );
        assert!(header_value(&names(&["a,b"])).is_none());
        assert!(header_value(&names(&["caf\u{e9}"])).is_none());
        assert_eq!(header_value(&BTreeSet::new()).unwrap(), "");
    }
}

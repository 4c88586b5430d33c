//! The parts of DataFusion's node traits that Tethys' own nodes write alike,
//! written once: a scan leaf (`OlapScanExec` on the FE's side,
//! `TabletScanExec` and `TabletAggScanExec` on a BE, `BeFragmentExec` that
//! fetches a fragment's result) has no children and keeps its cached
//! properties; a runtime filter or a LIKE test is a boolean of one operand.
//! Each macro goes inside the trait's `impl` block, beside the methods that
//! make the node what it is.

/// Inside `impl ExecutionPlan for T` of a leaf with a field `properties`:
/// its name, its properties, no children (`with_new_children` keeps the
/// node) and `apply_expressions` visiting the expressions `exprs` (an
/// iterator of `&Arc<dyn PhysicalExpr>` computed from `node`, the plan;
/// none when only the name is given); `with metrics` adds `metrics` from
/// the node's `ExecutionPlanMetricsSet` field `metrics`.
#[macro_export]
macro_rules! leaf_exec_plan {
    ($name:literal, $(|$node:ident| $exprs:expr,)? with metrics) => {
        $crate::leaf_exec_plan!($name $(, |$node| $exprs)?);

        fn metrics(&self) -> Option<::datafusion::physical_plan::metrics::MetricsSet> {
            Some(self.metrics.clone_inner())
        }
    };
    ($name:literal) => {
        $crate::leaf_exec_plan!($name, |_node| ::std::iter::empty());
    };
    ($name:literal, |$node:ident| $exprs:expr) => {
        fn name(&self) -> &str {
            $name
        }

        fn properties(&self) -> &::std::sync::Arc<::datafusion::physical_plan::PlanProperties> {
            &self.properties
        }

        fn children(
            &self,
        ) -> ::std::vec::Vec<&::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>> {
            ::std::vec::Vec::new()
        }

        fn apply_expressions(
            &self,
            f: &mut dyn FnMut(
                &::std::sync::Arc<dyn ::datafusion::physical_expr::PhysicalExpr>,
            ) -> ::datafusion::error::Result<
                ::datafusion::common::tree_node::TreeNodeRecursion,
            >,
        ) -> ::datafusion::error::Result<::datafusion::common::tree_node::TreeNodeRecursion> {
            use ::datafusion::common::tree_node::TreeNodeRecursion;
            let $node = self;
            for e in $exprs {
                if f(e)? == TreeNodeRecursion::Stop {
                    return Ok(TreeNodeRecursion::Stop);
                }
            }
            Ok(TreeNodeRecursion::Continue)
        }

        fn with_new_children(
            self: ::std::sync::Arc<Self>,
            _children: ::std::vec::Vec<
                ::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>,
            >,
        ) -> ::datafusion::error::Result<
            ::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>,
        > {
            Ok(self)
        }
    };
}

/// The whole `impl PhysicalExpr for T` of a `Clone` boolean test of one
/// operand in the field `expr`, given `T::test(&self, &ArrayRef) ->
/// Result<BooleanBuffer>` (`what` names the test in the error of a rebuild
/// without its operand): a row whose operand is NULL answers NULL; the type,
/// nullability and children follow, a rebuild takes a new operand, and
/// `fmt_sql` is the node's `Display`.
#[macro_export]
macro_rules! boolean_test_of_operand {
    ($what:literal) => {
        fn data_type(
            &self,
            _input_schema: &::arrow::datatypes::Schema,
        ) -> ::datafusion::error::Result<::arrow::datatypes::DataType> {
            Ok(::arrow::datatypes::DataType::Boolean)
        }

        fn nullable(
            &self,
            input_schema: &::arrow::datatypes::Schema,
        ) -> ::datafusion::error::Result<bool> {
            self.expr.nullable(input_schema)
        }

        fn evaluate(
            &self,
            batch: &::arrow::array::RecordBatch,
        ) -> ::datafusion::error::Result<::datafusion::logical_expr::ColumnarValue> {
            let operand = self.expr.evaluate(batch)?.into_array(batch.num_rows())?;
            let hit = self.test(&operand)?;
            let out = ::arrow::array::BooleanArray::new(hit, operand.logical_nulls());
            Ok(::datafusion::logical_expr::ColumnarValue::Array(
                ::std::sync::Arc::new(out),
            ))
        }

        fn children(&self) -> Vec<&::datafusion::physical_expr::PhysicalExprRef> {
            vec![&self.expr]
        }

        fn with_new_children(
            self: ::std::sync::Arc<Self>,
            children: Vec<::datafusion::physical_expr::PhysicalExprRef>,
        ) -> ::datafusion::error::Result<::datafusion::physical_expr::PhysicalExprRef> {
            let mut node = (*self).clone();
            node.expr = children.into_iter().next().ok_or_else(|| {
                ::datafusion::error::DataFusionError::Internal(
                    concat!($what, " without its operand").into(),
                )
            })?;
            Ok(::std::sync::Arc::new(node))
        }

        fn fmt_sql(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
            ::std::fmt::Display::fmt(self, f)
        }
    };
}

/// Inside `impl ExecutionPlan for T` of a node that passes its one input
/// (field `input`) through unchanged, in order and partitioning, with no
/// expressions of its own (it may read its input's columns): its name, its
/// input's properties and the child. `with_new_children` and `execute`
/// stay the node's own.
#[macro_export]
macro_rules! pass_through_exec_plan {
    ($name:literal) => {
        fn name(&self) -> &str {
            $name
        }

        fn properties(&self) -> &::std::sync::Arc<::datafusion::physical_plan::PlanProperties> {
            self.input.properties()
        }

        fn apply_expressions(
            &self,
            _f: &mut dyn FnMut(
                &::std::sync::Arc<dyn ::datafusion::physical_expr::PhysicalExpr>,
            ) -> ::datafusion::error::Result<
                ::datafusion::common::tree_node::TreeNodeRecursion,
            >,
        ) -> ::datafusion::error::Result<::datafusion::common::tree_node::TreeNodeRecursion> {
            Ok(::datafusion::common::tree_node::TreeNodeRecursion::Continue)
        }

        fn children(
            &self,
        ) -> ::std::vec::Vec<&::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>> {
            vec![&self.input]
        }

        fn maintains_input_order(&self) -> ::std::vec::Vec<bool> {
            vec![true]
        }

        fn benefits_from_input_partitioning(&self) -> ::std::vec::Vec<bool> {
            vec![false]
        }
    };
}

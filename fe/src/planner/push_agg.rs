//! Aggregation on the backends: the partial phase of an aggregation moved
//! into the backend fragments under it, and an aggregation whose groups
//! live in one tablet each finished there.
//!
//! ```sql
//! -- TPC-H q18: 57 groups reach the FE instead of 1.5 M partial states
//! SELECT l_orderkey FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 300;
//! ```

use std::sync::Arc;

use datafusion::error::Result as DfResult;

use super::remote;

/// Finishes on the backends an aggregation whose groups cannot span
/// fragment partitions: it groups by every distribution column of the table
/// (and its partition column when several partitions are read), so each
/// group lives in one tablet, which one partition reads whole (Doris'
/// colocated aggregation). TPC-H q18's `GROUP BY l_orderkey HAVING ...`
/// then sends its 57 surviving groups to the FE instead of 1.5 M partial
/// states. Runs first, so the distribution rules after it place what the
/// operators above need.
#[derive(Debug)]
pub struct FinishColocatedAggOnBackend;

impl datafusion::physical_optimizer::PhysicalOptimizerRule for FinishColocatedAggOnBackend {
    fn optimize(
        &self,
        plan: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
        _config: &datafusion::config::ConfigOptions,
    ) -> DfResult<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        use datafusion::common::tree_node::{Transformed, TreeNode};
        use datafusion::physical_expr::expressions::Column;
        use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
        use datafusion::physical_plan::projection::ProjectionExec;
        plan.transform_up(|node| {
            // The HAVING filter of a finished aggregation goes along.
            if let Some(f) = node.downcast_ref::<datafusion::physical_plan::filter::FilterExec>()
                && f.projection().is_none()
                && let Some(be) = f.input().downcast_ref::<remote::BeFragmentExec>()
                && be
                    .fragments()
                    .first()
                    .is_some_and(|(_, p)| p.downcast_ref::<AggregateExec>().is_some())
            {
                let filter = node.clone();
                return Ok(push_onto_fragments(node.clone(), be, &[], |frag| {
                    #[allow(deprecated)]
                    filter.clone().with_new_children(vec![frag])
                }));
            }
            let Some(fin) = node.downcast_ref::<AggregateExec>() else {
                return Ok(Transformed::no(node));
            };
            if !matches!(
                fin.mode(),
                AggregateMode::Final | AggregateMode::FinalPartitioned
            ) {
                return Ok(Transformed::no(node));
            }
            let Some(partial) = fin.input().downcast_ref::<AggregateExec>() else {
                return Ok(Transformed::no(node));
            };
            if *partial.mode() != AggregateMode::Partial
                || partial.group_expr().expr().is_empty()
                || !partial.group_expr().is_single()
            {
                return Ok(Transformed::no(node));
            }
            let mut input = partial.input().clone();
            let mut projections = Vec::new();
            while input.downcast_ref::<ProjectionExec>().is_some() {
                projections.push(input.clone());
                input = input.children()[0].clone();
            }
            let Some(be) = input.downcast_ref::<remote::BeFragmentExec>() else {
                return Ok(Transformed::no(node));
            };
            let Some(colocated) = &be.info.colocated else {
                return Ok(Transformed::no(node));
            };
            // The group keys, as fragment output columns (through projections
            // that pass them on unchanged).
            let mut keys: Vec<String> = Vec::new();
            for (e, _) in partial.group_expr().expr() {
                let mut e = e.clone();
                for p in &projections {
                    let Some(c) = e.downcast_ref::<Column>() else {
                        break;
                    };
                    let Some(pe) = p
                        .downcast_ref::<ProjectionExec>()
                        .and_then(|p| p.expr().get(c.index()))
                    else {
                        break;
                    };
                    e = pe.expr.clone();
                }
                if let Some(c) = e.downcast_ref::<Column>() {
                    keys.push(c.name().to_string());
                }
            }
            if !colocated
                .iter()
                .all(|c| keys.iter().any(|k| k.eq_ignore_ascii_case(c)))
            {
                return Ok(Transformed::no(node));
            }
            let (group_by, aggr, filters) = (
                partial.group_expr().clone(),
                partial.aggr_expr().to_vec(),
                partial.filter_expr().to_vec(),
            );
            let input_schema = partial.input_schema();
            let schema = node.schema();
            Ok(push_onto_fragments(
                node.clone(),
                be,
                &projections,
                |plan| {
                    let agg: Arc<dyn datafusion::physical_plan::ExecutionPlan> =
                        Arc::new(AggregateExec::try_new(
                            AggregateMode::SinglePartitioned,
                            group_by.clone(),
                            aggr.clone(),
                            filters.clone(),
                            plan,
                            input_schema.clone(),
                        )?);
                    if agg.schema().fields() != schema.fields() {
                        return Err(datafusion::error::DataFusionError::Plan(
                            "colocated aggregate changes the output schema".into(),
                        ));
                    }
                    Ok(agg)
                },
            ))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "finish_colocated_agg_on_backend"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Moves the first (partial) phase of an aggregation into the backend
/// fragments under it, so backends aggregate their tablets and send partial
/// states instead of rows (Doris' `update serialize` / `merge finalize`).
/// With `scan_agg` (`enable_pushdown_agg_to_scan`), an ungrouped one
/// directly over the scan is marked for the storage layer to answer
/// (`tethys_common::plan::pushable_agg`; EXPLAIN's `pushAggOp`).
#[derive(Debug)]
pub struct PushPartialAggToBackend {
    pub scan_agg: bool,
}

impl datafusion::physical_optimizer::PhysicalOptimizerRule for PushPartialAggToBackend {
    fn optimize(
        &self,
        plan: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
        _config: &datafusion::config::ConfigOptions,
    ) -> DfResult<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        use datafusion::common::tree_node::{Transformed, TreeNode};
        use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
        use datafusion::physical_plan::projection::ProjectionExec;
        use datafusion::physical_plan::repartition::RepartitionExec;
        plan.transform_up(|node| {
            let Some(agg) = node.downcast_ref::<AggregateExec>() else {
                return Ok(Transformed::no(node));
            };
            if *agg.mode() != AggregateMode::Partial {
                return Ok(Transformed::no(node));
            }
            // Projections between the aggregate and the fragment (the
            // arithmetic the aggregate reads, e.g. TPC-H q1's
            // `l_extendedprice * (1 - l_discount)`) go to the backend too.
            let mut input = agg.input().clone();
            let mut projections = Vec::new();
            loop {
                if let Some(r) = input.downcast_ref::<RepartitionExec>()
                    && matches!(
                        r.partitioning(),
                        datafusion::physical_plan::Partitioning::RoundRobinBatch(_)
                    )
                {
                    input = r.input().clone();
                } else if input.downcast_ref::<ProjectionExec>().is_some() {
                    projections.push(input.clone());
                    input = input.children()[0].clone();
                } else {
                    break;
                }
            }
            let Some(be) = input.downcast_ref::<remote::BeFragmentExec>() else {
                return Ok(Transformed::no(node));
            };
            let agg_node = node.clone();
            let pushed = push_onto_fragments(node.clone(), be, &projections, |plan| {
                #[allow(deprecated)]
                agg_node.clone().with_new_children(vec![plan])
            });
            if !self.scan_agg || !pushed.transformed {
                return Ok(pushed);
            }
            let Some(be) = pushed.data.downcast_ref::<remote::BeFragmentExec>() else {
                return Ok(pushed);
            };
            Ok(Transformed::yes(Arc::new(
                be.map_fragments(pushed.data.schema(), mark_scan_agg)?,
            )))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "push_partial_agg_to_backend"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// A fragment whose root is an aggregate its scan can answer, with the
/// scan marked to (`OlapScanExec::with_push_agg`); others unchanged.
fn mark_scan_agg(
    frag: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
) -> DfResult<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    use datafusion::physical_plan::aggregates::AggregateExec;
    let Some(op) = frag
        .downcast_ref::<AggregateExec>()
        .and_then(tethys_common::plan::pushable_agg)
        .map(|(aggs, _)| tethys_common::plan::push_agg_op_name(&aggs))
    else {
        return Ok(frag);
    };
    frag.transform_down(
        |n| match n.downcast_ref::<tethys_common::plan::OlapScanExec>() {
            Some(scan) => Ok(Transformed::yes(Arc::new(scan.with_push_agg(op)) as _)),
            None => Ok(Transformed::no(n)),
        },
    )
    .map(|t| t.data)
}

/// `node` replaced by `be` with `top` applied to each fragment after the
/// `projections` (innermost last) are moved onto it; `node` unchanged when
/// that fails or the backend could not decode the result.
fn push_onto_fragments(
    node: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    be: &remote::BeFragmentExec,
    projections: &[Arc<dyn datafusion::physical_plan::ExecutionPlan>],
    top: impl Fn(
        Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    ) -> DfResult<Arc<dyn datafusion::physical_plan::ExecutionPlan>>,
) -> datafusion::common::tree_node::Transformed<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
    use datafusion::common::tree_node::Transformed;
    let pushed = be.map_fragments(node.schema(), |frag| {
        let mut plan = frag;
        for p in projections.iter().rev() {
            #[allow(deprecated)]
            let moved = p.clone().with_new_children(vec![plan])?;
            plan = moved;
        }
        let plan = top(plan)?;
        // Anything the backend cannot decode stays on the FE.
        datafusion_proto::bytes::physical_plan_to_bytes_with_extension_codec(
            plan.clone(),
            &tethys_common::plan::TethysCodec,
        )?;
        Ok(plan)
    });
    match pushed {
        Ok(pushed) => Transformed::yes(Arc::new(pushed)),
        Err(_) => Transformed::no(node),
    }
}

//! A join that must be partitioned keeps the hashing its probe side has.
//!
//! ```sql
//! -- TPC-H q02: the correlated min(ps_supplycost) becomes an aggregation
//! -- hashed on ps_partkey, probing a semi join whose build side is the
//! -- query's part, supplier and nation rows
//! ... WHERE ps_supplycost = (SELECT min(ps_supplycost) FROM partsupp, ...
//!                            WHERE p_partkey = ps_partkey ...)
//! ```
//!
//! DataFusion plans such a join with its build side collected (CollectLeft).
//! A join type that emits build rows (left, left semi / anti / mark, full)
//! cannot be broadcast over tasks, so datafusion-distributed partitions it
//! and hashes both inputs on the keys (`normalize_collect_joins`), although
//! the probe side, an aggregation on those keys, already is hashed on them:
//! its output was hashed once more and sent to another stage (q02: 11
//! stages). Here, before the distributed planner, such a join becomes
//! partitioned with only its build side hashed, on the keys matching the
//! probe side's hash expressions and with its partition count; the join
//! runs in the aggregation's stage. The hash is DataFusion's for both
//! (`RepartitionExec`), so keys of one type meet in one partition; a probe
//! side hashed otherwise (a scan dealt by bucket declares its keys' hash,
//! its rows placed by Tethys' bucket hash) is left to the distributed
//! planner.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::common::JoinType;
use datafusion::error::Result;
use datafusion::execution::context::QueryPlanner;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, Partitioning};
use datafusion::physical_planner::{DefaultPhysicalPlanner, PhysicalPlanner};

use super::join_order::rewrite_hash_joins;

/// The physical plan the distributed planner cuts into stages: `inner`'s
/// (DataFusion's when `None`), its joins that must be partitioned keeping
/// their probe side's hashing.
#[derive(Debug)]
pub struct KeepProbeHashing(pub Option<Arc<dyn QueryPlanner + Send + Sync>>);

#[async_trait]
impl QueryPlanner for KeepProbeHashing {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session_state: &dyn datafusion::catalog::Session,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let plan = match &self.0 {
            Some(inner) => {
                inner
                    .create_physical_plan(logical_plan, session_state)
                    .await?
            }
            None => {
                DefaultPhysicalPlanner::default()
                    .create_physical_plan(logical_plan, session_state)
                    .await?
            }
        };
        keep_probe_hashing(plan)
    }
}

/// `plan` with each collect-left join that emits build rows and whose probe
/// side is hashed on its keys partitioned, its build side hashed alike.
pub fn keep_probe_hashing(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    rewrite_hash_joins(plan, partitioned_on_probe)
}

/// Whether `plan`'s hash partitioning is DataFusion's: made by a hash
/// repartition under nodes of one input each. A scan dealt by bucket (a
/// colocate or bucket shuffle join's side) declares its keys' hash too, but
/// its rows are placed by Tethys' bucket hash: rows hashed by DataFusion's
/// would not meet them.
fn hashed_by_datafusion(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let mut p = Arc::clone(plan);
    loop {
        if let Some(r) = p.downcast_ref::<RepartitionExec>() {
            return matches!(r.partitioning(), Partitioning::Hash(..));
        }
        let next = match p.children().as_slice() {
            [only] => Arc::clone(*only),
            _ => return false,
        };
        p = next;
    }
}

/// Join types whose build side's rows are emitted: not broadcast over tasks.
fn emits_build_rows(t: &JoinType) -> bool {
    use JoinType::*;
    matches!(t, Left | LeftSemi | LeftAnti | LeftMark | Full)
}

/// `j` partitioned with its build side hashed as its probe side is, when
/// it qualifies.
fn partitioned_on_probe(j: &HashJoinExec) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if *j.partition_mode() != PartitionMode::CollectLeft
        || !emits_build_rows(j.join_type())
        || j.null_aware
    {
        return Ok(None);
    }
    let Partitioning::Hash(exprs, n) = j.right().output_partitioning() else {
        return Ok(None);
    };
    if *n < 2 || exprs.len() != j.on().len() || !hashed_by_datafusion(j.right()) {
        return Ok(None);
    }
    let (left_schema, right_schema) = (j.left().schema(), j.right().schema());
    let mut left_keys = Vec::with_capacity(exprs.len());
    for e in exprs {
        let Some((l, r)) = j.on().iter().find(|(_, r)| r.as_ref() == e.as_ref()) else {
            return Ok(None);
        };
        if l.data_type(&left_schema)? != r.data_type(&right_schema)? {
            return Ok(None);
        }
        left_keys.push(Arc::clone(l));
    }
    // CollectLeft's single partition, not needed once hashed.
    let build = match j.left().downcast_ref::<CoalescePartitionsExec>() {
        Some(c) if c.fetch().is_none() => Arc::clone(c.input()),
        _ => Arc::clone(j.left()),
    };
    let left = Arc::new(RepartitionExec::try_new(
        build,
        Partitioning::Hash(left_keys, *n),
    )?);
    let join = j
        .builder()
        .with_partition_mode(PartitionMode::Partitioned)
        .with_new_children(vec![left, Arc::clone(j.right())])?
        .build()?;
    Ok(Some(Arc::new(join)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::common::NullEquality;
    use datafusion::physical_expr::EquivalenceProperties;
    use datafusion::physical_expr::expressions::col;
    use datafusion::physical_plan::empty::EmptyExec;
    use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
    use datafusion::physical_plan::joins::utils::JoinOn;
    use datafusion::physical_plan::{DisplayAs, DisplayFormatType, PlanProperties};

    fn side(name: &str, t: DataType, hashed: Option<usize>) -> Arc<dyn ExecutionPlan> {
        let schema = Arc::new(Schema::new(vec![Field::new(name, t, false)]));
        let leaf: Arc<dyn ExecutionPlan> =
            Arc::new(EmptyExec::new(schema.clone()).with_partitions(4));
        match hashed {
            Some(n) => Arc::new(
                RepartitionExec::try_new(
                    leaf,
                    Partitioning::Hash(vec![col(name, &schema).unwrap()], n),
                )
                .unwrap(),
            ),
            None => leaf,
        }
    }

    fn join(
        left: Arc<dyn ExecutionPlan>,
        right: Arc<dyn ExecutionPlan>,
        t: JoinType,
    ) -> HashJoinExec {
        let on: JoinOn = vec![(
            col(&left.schema().field(0).name().clone(), &left.schema()).unwrap(),
            col(&right.schema().field(0).name().clone(), &right.schema()).unwrap(),
        )];
        let left = Arc::new(CoalescePartitionsExec::new(left));
        HashJoinExec::try_new(
            left,
            right,
            on,
            None,
            &t,
            None,
            PartitionMode::CollectLeft,
            NullEquality::NullEqualsNothing,
            false,
        )
        .unwrap()
    }

    /// A semi join probed by rows hashed on its key: partitioned, its build
    /// side hashed into as many partitions, its probe side untouched.
    #[test]
    fn a_hashed_probe_side_stays_as_it_is() {
        let right = side("b", DataType::Int32, Some(6));
        let j = join(
            side("a", DataType::Int32, None),
            right.clone(),
            JoinType::LeftSemi,
        );
        let new = partitioned_on_probe(&j).unwrap().expect("rewritten");
        let new = new.downcast_ref::<HashJoinExec>().unwrap();
        assert_eq!(*new.partition_mode(), PartitionMode::Partitioned);
        assert!(Arc::ptr_eq(new.right(), &right));
        let left = new
            .left()
            .downcast_ref::<RepartitionExec>()
            .expect("hashed");
        assert!(matches!(left.partitioning(), Partitioning::Hash(k, 6) if k.len() == 1));
        assert!(
            left.input().is::<EmptyExec>(),
            "the collecting node is gone"
        );
    }

    /// A leaf that declares its rows hashed on its column (as a scan dealt
    /// by bucket does).
    #[derive(Debug)]
    struct DeclaredHash {
        properties: Arc<PlanProperties>,
    }

    impl DisplayAs for DeclaredHash {
        fn fmt_as(&self, _: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "DeclaredHash")
        }
    }

    impl ExecutionPlan for DeclaredHash {
        tethys_common::leaf_exec_plan!("DeclaredHash");

        fn execute(
            &self,
            _: usize,
            _: Arc<datafusion::execution::TaskContext>,
        ) -> Result<datafusion::execution::SendableRecordBatchStream> {
            datafusion::common::not_impl_err!("a test leaf")
        }
    }

    fn declared_hash(n: usize) -> Arc<dyn ExecutionPlan> {
        let schema = Arc::new(Schema::new(vec![Field::new("b", DataType::Int32, false)]));
        let key = col("b", &schema).unwrap();
        Arc::new(DeclaredHash {
            properties: Arc::new(PlanProperties::new(
                EquivalenceProperties::new(schema),
                Partitioning::Hash(vec![key], n),
                EmissionType::Incremental,
                Boundedness::Bounded,
            )),
        })
    }

    /// Left alone: an inner join (broadcast instead), a probe side not
    /// hashed, keys of different types (their hashes differ), a probe side
    /// whose hash a leaf declares (Tethys' bucket hash, not DataFusion's).
    #[test]
    fn others_are_left_alone() {
        let int = |h| side("b", DataType::Int32, h);
        for j in [
            join(
                side("a", DataType::Int32, None),
                int(Some(6)),
                JoinType::Inner,
            ),
            join(
                side("a", DataType::Int32, None),
                int(None),
                JoinType::LeftSemi,
            ),
            join(
                side("a", DataType::Int64, None),
                int(Some(6)),
                JoinType::LeftSemi,
            ),
            join(
                side("a", DataType::Int32, None),
                declared_hash(6),
                JoinType::LeftSemi,
            ),
        ] {
            assert!(partitioned_on_probe(&j).unwrap().is_none(), "{j:?}");
        }
    }
}

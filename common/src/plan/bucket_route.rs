//! `tethys_bucket_route(...)`: the exchange key of a bucket shuffle join's
//! moving side.
//!
//! ```sql
//! -- lineitem: DISTRIBUTED BY HASH(l_orderkey) BUCKETS 32, not moved
//! SELECT count(*) FROM orders JOIN lineitem ON o_orderkey = l_orderkey;
//! --   join op: INNER JOIN(BUCKET_SHUFFLE)[]
//! --   STREAM DATA SINK ... BUCKET_SHFFULE_HASH_PARTITIONED: o_orderkey
//! ```
//!
//! The join runs where lineitem's buckets are read, each task partition
//! holding the buckets dealt to it (`OlapScanNodePb::by_bucket`); an orders
//! row must reach the task and partition reading the bucket its key hashes
//! to by the table's own bucket hash (`routing::bucket_hashes`, as loads
//! place rows). datafusion-distributed shuffles with DataFusion's hash
//! repartitioning only: a row goes to exchange partition `hash(key) %
//! partitions`, where partition `t * n + p` is partition `p` of consumer task
//! `t`. So the moving side is hashed on this expression instead of its key:
//! per row, a value whose DataFusion hash lands on the partition its bucket
//! is read in (found once per partition count by trying values). The
//! hashing stays DataFusion's own, and an exchange needs no code of ours.
//!
//! The route is a function call whose first three arguments are literals
//! (partitions, each bucket's partition, each task's backend) and whose
//! others are the keys: datafusion-distributed encodes an exchange's
//! partitioning without our codec, and a registered function travels by
//! name with its literals, as any call does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use arrow::array::{ArrayRef, UInt64Array};
use arrow::datatypes::{DataType, Schema};
use datafusion::common::ScalarValue;
use datafusion::common::hash_utils::create_hashes;
use datafusion::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::ScalarFunctionExpr;
use datafusion::physical_expr::expressions::{Literal, lit};
use datafusion::physical_plan::repartition::REPARTITION_RANDOM_STATE;

use crate::routing::bucket_hashes;

/// The route function's name: internal, refused in a user's SQL.
pub const BUCKET_ROUTE: &str = "tethys_bucket_route";

/// Exchange partitions a route may address (tasks x partitions per task).
const MAX_PARTITIONS: u32 = 1 << 16;

/// Where the moving side of a bucket shuffle join sends its rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketRoute {
    /// The exchange partition reading each bucket (`task * n + partition`);
    /// a bucket no task reads (pruned) goes to partition 0.
    pub targets: Vec<u32>,
    /// Exchange partitions in all: consumer tasks x partitions per task.
    pub partitions: u32,
    /// The backend of each consumer task, in task order: the plan is placed
    /// only where its tasks run there (`fe/src/planner/distribute.rs`).
    pub backends: Vec<i64>,
}

impl BucketRoute {
    pub fn try_new(targets: Vec<u32>, partitions: u32, backends: Vec<i64>) -> Result<Self> {
        if targets.is_empty()
            || partitions == 0
            || partitions > MAX_PARTITIONS
            || targets.iter().any(|t| *t >= partitions)
        {
            return Err(DataFusionError::Internal(format!(
                "a bucket route to {partitions} partitions cannot address {targets:?}"
            )));
        }
        Ok(BucketRoute {
            targets,
            partitions,
            backends,
        })
    }

    /// The call routing rows by `keys` (over `schema`).
    pub fn call(
        &self,
        keys: Vec<Arc<dyn PhysicalExpr>>,
        schema: &Schema,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        if keys.is_empty() {
            return Err(DataFusionError::Internal(
                "a bucket route needs keys".into(),
            ));
        }
        let list = |v: Vec<String>| lit(v.join(","));
        let mut args = vec![
            lit(self.partitions as i64),
            list(self.targets.iter().map(u32::to_string).collect()),
            list(self.backends.iter().map(i64::to_string).collect()),
        ];
        args.extend(keys);
        Ok(Arc::new(ScalarFunctionExpr::try_new(
            bucket_route_udf(),
            args,
            schema,
            Arc::new(ConfigOptions::default()),
        )?))
    }

    /// The route and keys of a call [`Self::call`] made.
    pub fn of_call(
        expr: &Arc<dyn PhysicalExpr>,
    ) -> Option<(BucketRoute, &[Arc<dyn PhysicalExpr>])> {
        let f = expr.downcast_ref::<ScalarFunctionExpr>()?;
        if f.name() != BUCKET_ROUTE {
            return None;
        }
        let value = |i: usize| {
            f.args()
                .get(i)?
                .downcast_ref::<Literal>()
                .map(|l| l.value().clone())
        };
        let route = of_literals(&value(0)?, &value(1)?, &value(2)?).ok()?;
        Some((route, f.args().get(3..)?))
    }
}

/// A route from the call's three literal arguments.
fn of_literals(
    partitions: &ScalarValue,
    targets: &ScalarValue,
    backends: &ScalarValue,
) -> Result<BucketRoute> {
    let bad = || DataFusionError::Internal("malformed bucket route".into());
    let text = |v: &ScalarValue| match v {
        ScalarValue::Utf8(Some(s)) => Ok(s.clone()),
        _ => Err(bad()),
    };
    let ScalarValue::Int64(Some(partitions)) = partitions else {
        return Err(bad());
    };
    let numbers = |s: String| -> Result<Vec<i64>> {
        s.split(',')
            .filter(|p| !p.is_empty())
            .map(|p| p.parse().map_err(|_| bad()))
            .collect()
    };
    let targets = numbers(text(targets)?)?
        .into_iter()
        .map(|t| u32::try_from(t).map_err(|_| bad()))
        .collect::<Result<Vec<_>>>()?;
    let partitions = u32::try_from(*partitions).map_err(|_| bad())?;
    BucketRoute::try_new(targets, partitions, numbers(text(backends)?)?)
}

/// The route function, as both sides register it.
pub fn bucket_route_udf() -> Arc<ScalarUDF> {
    static UDF: OnceLock<Arc<ScalarUDF>> = OnceLock::new();
    UDF.get_or_init(|| {
        Arc::new(ScalarUDF::new_from_impl(BucketRouteFn {
            signature: Signature::variadic_any(Volatility::Immutable),
        }))
    })
    .clone()
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct BucketRouteFn {
    signature: Signature,
}

impl ScalarUDFImpl for BucketRouteFn {
    fn name(&self) -> &str {
        BUCKET_ROUTE
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::UInt64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let scalar = |i: usize| match args.args.get(i) {
            Some(ColumnarValue::Scalar(v)) => Ok(v.clone()),
            _ => Err(DataFusionError::Internal(
                "bucket route without its literals".into(),
            )),
        };
        let route = of_literals(&scalar(0)?, &scalar(1)?, &scalar(2)?)?;
        let rows = args.number_rows;
        let keys = args.args[3..]
            .iter()
            .map(|k| k.to_array(rows))
            .collect::<Result<Vec<ArrayRef>>>()?;
        if keys.is_empty() {
            return Err(DataFusionError::Internal(
                "bucket route without keys".into(),
            ));
        }
        let refs: Vec<&ArrayRef> = keys.iter().collect();
        let magic = magic_values(route.partitions)?;
        let buckets = route.targets.len() as u32;
        let out = UInt64Array::from_iter_values(
            bucket_hashes(&refs, rows)
                .into_iter()
                .map(|h| magic[route.targets[(h % buckets) as usize] as usize]),
        );
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// For each partition of `partitions`, a value whose DataFusion
/// repartition hash (`hash % partitions`) is that partition; kept per
/// partition count.
fn magic_values(partitions: u32) -> Result<Arc<Vec<u64>>> {
    static FOUND: OnceLock<Mutex<HashMap<u32, Arc<Vec<u64>>>>> = OnceLock::new();
    let found = FOUND.get_or_init(Default::default);
    if let Some(m) = found.lock().ok().and_then(|f| f.get(&partitions).cloned()) {
        return Ok(m);
    }
    let n = partitions as usize;
    let mut magic: Vec<Option<u64>> = vec![None; n];
    let mut missing = n;
    let mut hashes = vec![0u64; 4096];
    let mut start = 0u64;
    // About n * ln(n) tries; 64 rounds of 4096 is far more than any count
    // up to MAX_PARTITIONS needs.
    for _ in 0..64 {
        let values: ArrayRef = Arc::new(UInt64Array::from_iter_values(start..start + 4096));
        hashes.iter_mut().for_each(|h| *h = 0);
        create_hashes(
            [&values],
            REPARTITION_RANDOM_STATE.random_state(),
            &mut hashes,
        )?;
        for (i, h) in hashes.iter().enumerate() {
            let slot = &mut magic[(h % partitions as u64) as usize];
            if slot.is_none() {
                *slot = Some(start + i as u64);
                missing -= 1;
            }
        }
        if missing == 0 {
            let m = Arc::new(
                magic
                    .into_iter()
                    .map(|m| m.unwrap_or(0))
                    .collect::<Vec<_>>(),
            );
            if let Ok(mut f) = found.lock() {
                f.insert(partitions, m.clone());
            }
            return Ok(m);
        }
        start += 4096;
    }
    Err(DataFusionError::Internal(format!(
        "no routing values found for {partitions} partitions"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::Field;
    use datafusion::physical_expr::expressions::col;
    use datafusion::physical_plan::repartition::RepartitionExec;
    use datafusion::physical_plan::test::TestMemoryExec;
    use datafusion::physical_plan::{ExecutionPlan, Partitioning};
    use datafusion::prelude::SessionContext;
    use futures::StreamExt;

    /// DataFusion's own repartitioning, hashing on the route, puts every
    /// row in the partition reading its bucket: what a bucket shuffle
    /// join relies on.
    #[tokio::test]
    async fn datafusion_repartitioning_sends_rows_where_their_bucket_is() {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
        let keys: ArrayRef = Arc::new(Int64Array::from_iter(
            (0..20_000i64).map(Some).chain([None, Some(-7)]),
        ));
        let batch = RecordBatch::try_new(schema.clone(), vec![keys]).unwrap();
        // 3 tasks x 4 partitions; 10 buckets dealt as the FE deals them.
        let targets: Vec<u32> = (0..10).map(|b| (b * 7) % 12).collect();
        let route = BucketRoute::try_new(targets.clone(), 12, vec![1, 2, 3]).unwrap();
        let call = route
            .call(vec![col("k", &schema).unwrap()], &schema)
            .unwrap();
        let (back, keys) = BucketRoute::of_call(&call).unwrap();
        assert_eq!((back, keys.len()), (route, 1));
        let input = TestMemoryExec::try_new_exec(&[vec![batch]], schema, None).unwrap();
        let exec = RepartitionExec::try_new(input, Partitioning::Hash(vec![call], 12)).unwrap();
        let ctx = SessionContext::new().task_ctx();
        let mut seen = 0;
        for p in 0..12 {
            let mut s = exec.execute(p, ctx.clone()).unwrap();
            while let Some(b) = s.next().await {
                let b = b.unwrap();
                for (i, h) in bucket_hashes(&[b.column(0)], b.num_rows())
                    .iter()
                    .enumerate()
                {
                    assert_eq!(targets[(h % 10) as usize], p as u32, "row {i} of {b:?}");
                }
                seen += b.num_rows();
            }
        }
        assert_eq!(seen, 20_002);
    }

    #[test]
    fn a_damaged_route_is_an_error() {
        let n = |v: i64| ScalarValue::Int64(Some(v));
        let t = |v: &str| ScalarValue::Utf8(Some(v.into()));
        assert!(of_literals(&n(2), &t("0,1"), &t("7")).is_ok());
        assert!(of_literals(&n(2), &t("0,2"), &t("7")).is_err());
        assert!(of_literals(&n(2), &t("0,x"), &t("7")).is_err());
        assert!(of_literals(&n(-1), &t("0"), &t("7")).is_err());
        assert!(of_literals(&t("2"), &t("0"), &t("7")).is_err());
    }
}

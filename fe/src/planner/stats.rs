//! Table statistics for the optimizer: rows (and stored bytes) per
//! partition, asked of the backends and cached by the partition's visible
//! version, so a table is asked again only after a load made a new version.
//!
//! DataFusion uses them to put the smaller input of a join on the build
//! side and to broadcast (collect) small build sides, which in turn is what
//! lets a join's runtime filter reach the probe scan as one simple predicate.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use datafusion::physical_expr::PhysicalExpr;

use tethys_common::Result;
use tethys_common::backend_client::BackendClient;
use tethys_proto::{TabletStat, TabletStatsRequest};

use crate::catalog::{Table, TabletRef};
use crate::frontend::Frontend;

/// Rows of one partition at one visible version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionStats {
    pub version: i64,
    pub rows: u64,
}

/// Per-partition statistics, shared by every statement of the FE.
#[derive(Debug, Default)]
pub struct StatsCache {
    partitions: Mutex<HashMap<i64, PartitionStats>>,
}

impl StatsCache {
    fn get(&self, partition_id: i64, version: i64) -> Option<PartitionStats> {
        let m = self.partitions.lock().unwrap_or_else(|p| p.into_inner());
        m.get(&partition_id)
            .copied()
            .filter(|s| s.version == version)
    }

    fn put(&self, partition_id: i64, s: PartitionStats) {
        let mut m = self.partitions.lock().unwrap_or_else(|p| p.into_inner());
        m.insert(partition_id, s);
    }
}

/// Rows per partition id of `table` at the partitions' visible versions.
/// Partitions whose backends cannot be asked are left out (unknown), so a
/// down backend costs the optimizer an estimate, never the query.
pub async fn table_rows(fe: &Arc<Frontend>, table: &Table) -> HashMap<i64, u64> {
    let mut out = HashMap::new();
    let mut missing = vec![];
    for p in &table.partitions {
        match fe.stats.get(p.id, p.visible_version) {
            Some(s) => {
                out.insert(p.id, s.rows);
            }
            None => missing.push(p),
        }
    }
    if missing.is_empty() {
        return out;
    }
    let tablets: Vec<TabletRef> = missing
        .iter()
        .flat_map(|p| p.tablets.iter().cloned())
        .collect();
    let Ok(stats) = tablet_stats(fe, &tablets).await else {
        return out;
    };
    for p in missing {
        let rows: Option<u64> = p
            .tablets
            .iter()
            .map(|t| {
                stats
                    .get(&t.id)
                    .filter(|s| s.found)
                    .map(|s| s.row_count.max(0) as u64)
            })
            .sum();
        if let Some(rows) = rows {
            fe.stats.put(
                p.id,
                PartitionStats {
                    version: p.visible_version,
                    rows,
                },
            );
            out.insert(p.id, rows);
        }
    }
    out
}

/// Calls `call` once per backend holding some of `tablets`, with a client
/// of it and the ids of its tablets; the answers in backend order.
pub(crate) async fn per_backend<T, F, Fut>(
    fe: &Arc<Frontend>,
    tablets: &[TabletRef],
    mut call: F,
) -> Result<Vec<T>>
where
    F: FnMut(Arc<BackendClient>, Vec<i64>) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let backends = fe.catalog.read().backends.clone();
    let mut per_be: BTreeMap<i64, Vec<i64>> = Default::default();
    for tb in tablets {
        per_be.entry(tb.backend_id).or_default().push(tb.id);
    }
    let mut out = Vec::with_capacity(per_be.len());
    for (be, ids) in per_be {
        let Some(info) = backends.get(&be) else {
            continue;
        };
        out.push(call(fe.pool.get(info)?, ids).await?);
    }
    Ok(out)
}

/// Asks each backend for the stats of its tablets among `tablets`.
pub async fn tablet_stats(
    fe: &Arc<Frontend>,
    tablets: &[TabletRef],
) -> Result<HashMap<i64, TabletStat>> {
    let answers = per_backend(fe, tablets, |c, ids| async move {
        let r = c
            .rpc()
            .tablet_stats(TabletStatsRequest { tablet_ids: ids })
            .await
            .map_err(|s| c.err(s))?;
        Ok(r.into_inner().tablets)
    })
    .await?;
    Ok(answers
        .into_iter()
        .flatten()
        .map(|s| (s.tablet_id, s))
        .collect())
}

/// Compacts `tablets` on their backends (`kind`: cumulative, base or full)
/// and adds up what the backends did.
pub async fn compact_tablets(
    fe: &Arc<Frontend>,
    tablets: &[TabletRef],
    kind: &str,
) -> Result<tethys_proto::CompactResponse> {
    let answers = per_backend(fe, tablets, |c, ids| async move {
        let req = tethys_proto::CompactRequest {
            tablet_ids: ids,
            kind: kind.to_string(),
        };
        let r = c.rpc().compact(req).await.map_err(|s| c.err(s))?;
        Ok(r.into_inner())
    })
    .await?;
    let mut total = tethys_proto::CompactResponse::default();
    for r in answers {
        total.compactions += r.compactions;
        total.input_rowsets += r.input_rowsets;
        total.input_rows += r.input_rows;
        total.output_rows += r.output_rows;
    }
    Ok(total)
}

/// Share of rows a predicate is expected to keep, from its shape alone (no
/// column statistics): `=` keeps a tenth, a range bound 40%, `IN` a tenth per
/// value, `OR` the sum of its sides, conjunctions the product. Two equalities
/// (TPC-H q17's `p_brand = .. AND p_container = ..`) thus estimate 1%, not
/// DataFusion's flat 20%, which decides which join side is built.
pub fn selectivity(expr: &Arc<dyn PhysicalExpr>) -> f64 {
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{BinaryExpr, InListExpr, LikeExpr, NotExpr};
    let s = if let Some(b) = expr.downcast_ref::<BinaryExpr>() {
        match b.op() {
            Operator::And => selectivity(b.left()) * selectivity(b.right()),
            Operator::Or => selectivity(b.left()) + selectivity(b.right()),
            Operator::Eq | Operator::IsNotDistinctFrom => 0.1,
            Operator::NotEq | Operator::IsDistinctFrom => 0.9,
            Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq => 0.4,
            _ => 0.5,
        }
    } else if let Some(i) = expr.downcast_ref::<InListExpr>() {
        let s = 0.1 * i.list().len() as f64;
        if i.negated() { 1.0 - s.min(0.9) } else { s }
    } else if let Some(n) = expr.downcast_ref::<NotExpr>() {
        1.0 - selectivity(n.arg())
    } else if expr.downcast_ref::<LikeExpr>().is_some() {
        0.2
    } else {
        0.5
    };
    s.clamp(0.0005, 1.0)
}

#[cfg(test)]
mod selectivity_tests {
    use super::selectivity;
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{binary, col, in_list, lit};

    #[test]
    fn shapes_estimate_their_share() {
        let s = Schema::new(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("b", DataType::Utf8, false),
        ]);
        let a = col("a", &s).unwrap();
        let b = col("b", &s).unwrap();
        let eq_a = binary(a.clone(), Operator::Eq, lit(1i64), &s).unwrap();
        let eq_b = binary(b.clone(), Operator::Eq, lit("x"), &s).unwrap();
        let both = binary(eq_a.clone(), Operator::And, eq_b.clone(), &s).unwrap();
        assert!((selectivity(&both) - 0.01).abs() < 1e-9);
        let either = binary(eq_a.clone(), Operator::Or, eq_b, &s).unwrap();
        assert!((selectivity(&either) - 0.2).abs() < 1e-9);
        let list = in_list(a.clone(), vec![lit(1i64), lit(2i64), lit(3i64)], &false, &s).unwrap();
        assert!((selectivity(&list) - 0.3).abs() < 1e-9);
        let lo = binary(a.clone(), Operator::GtEq, lit(1i64), &s).unwrap();
        let hi = binary(a, Operator::Lt, lit(9i64), &s).unwrap();
        let range = binary(lo, Operator::And, hi, &s).unwrap();
        assert!((selectivity(&range) - 0.16).abs() < 1e-9);
    }
}

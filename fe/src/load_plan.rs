//! The load plan of a table ([`load_plan`]): what a coordinator needs to
//! route rows to tablets, used by INSERT, Stream Load and group commit.
//!
//! Compiling Stream Load's `columns` and `where` headers. A backend never sees
//! SQL: the FE parses `c1, tmp, amount = tmp * 100` and `where` into DataFusion
//! physical expressions over the file's source columns and ships them in the
//! load plan, serialized with datafusion-proto.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::DFSchema;
use datafusion::logical_expr::{Expr, cast};
use datafusion::prelude::SessionContext;
use datafusion_proto::physical_plan::to_proto::serialize_physical_expr;
use prost::Message;
use tethys_common::plan::TethysCodec;
use tethys_common::types::ColumnType;
use tethys_common::{Result, TethysError};
use tethys_proto::LoadPlanPb;

use crate::catalog::{BackendInfo, Bound, Distribution, Table, TabletRef};
use tethys_proto::{BackendAddrPb, PartitionRoutePb, TabletRoutePb};

/// The replicas of a tablet a load writes: those holding the partition's
/// visible version on alive backends, and if they are fewer than a majority,
/// the ones on backends not heard from (liveness may lag; a dead one fails
/// its write and the load learns it then).
fn write_replicas(t: &TabletRef, visible: i64, alive: &BTreeSet<i64>) -> TabletRoutePb {
    let mut backend_ids: Vec<i64> = t
        .current(visible, |b| alive.contains(&b))
        .map(|r| r.backend_id)
        .collect();
    if backend_ids.len() < tethys_common::replicas::quorum(t.replicas.len()) {
        backend_ids = t.current(visible, |_| true).map(|r| r.backend_id).collect();
    }
    TabletRoutePb {
        tablet_id: t.id,
        backend_ids,
        replica_num: t.replicas.len() as u32,
    }
}

/// The load plan of a table: schema, partitions, buckets and tablet
/// locations; `alive`: the backends heartbeats find alive.
pub fn load_plan(
    db: &str,
    t: &Table,
    backends: &[BackendInfo],
    alive: &BTreeSet<i64>,
) -> LoadPlanPb {
    let bound = |b: Bound| match b {
        Bound::Value(v) => Some(tethys_common::routing::int128_pb(v)),
        _ => None,
    };
    LoadPlanPb {
        table_id: t.id,
        schema: Some(t.schema.to_pb()),
        partition_column: t
            .partition_column
            .as_ref()
            .and_then(|c| t.schema.index_of(c))
            .map(|i| i as i32)
            .unwrap_or(-1),
        partitions: t
            .partitions
            .iter()
            .map(|p| PartitionRoutePb {
                partition_id: p.id,
                lower: p.range.and_then(|r| bound(r.0)),
                upper: p.range.and_then(|r| bound(r.1)),
                tablets: p
                    .tablets
                    .iter()
                    .map(|x| write_replicas(x, p.visible_version, alive))
                    .collect(),
                name: p.name.clone(),
            })
            .collect(),
        hash_columns: match &t.distribution {
            Distribution::Hash { columns, .. } => columns
                .iter()
                .filter_map(|c| t.schema.index_of(c))
                .map(|i| i as u32)
                .collect(),
            Distribution::Random { .. } => vec![],
        },
        random_buckets: matches!(t.distribution, Distribution::Random { .. }),
        backends: backends
            .iter()
            .map(|b| BackendAddrPb {
                id: b.id,
                host: b.host.clone(),
                rpc_port: b.rpc_port as u32,
                http_port: b.http_port as u32,
            })
            .collect(),
        defaults: t
            .schema
            .columns
            .iter()
            .map(|c| c.default.clone().unwrap_or_default())
            .collect(),
        has_default: t
            .schema
            .columns
            .iter()
            .map(|c| c.default.is_some())
            .collect(),
        group_commit_interval_ms: table_property(t, "group_commit_interval_ms")
            .unwrap_or(tethys_common::config::GROUP_COMMIT_INTERVAL_MS),
        group_commit_data_bytes: table_property(t, "group_commit_data_bytes")
            .unwrap_or(tethys_common::config::GROUP_COMMIT_DATA_BYTES),
        db: db.to_string(),
        table: t.name.clone(),
        ..Default::default()
    }
}

fn table_property(t: &Table, key: &str) -> Option<i64> {
    t.properties.get(key).and_then(|v| v.parse().ok())
}

/// Splits a header on top-level commas (outside parentheses and quotes).
fn split_top(text: &str) -> Vec<String> {
    let mut out = vec![];
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut cur = String::new();
    for c in text.chars() {
        match quote {
            Some(q) => {
                cur.push(c);
                if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' | '`' => {
                    quote = Some(c);
                    cur.push(c);
                }
                '(' => {
                    depth += 1;
                    cur.push(c);
                }
                ')' => {
                    depth -= 1;
                    cur.push(c);
                }
                ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
                _ => cur.push(c),
            },
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Top-level `=` of a `name = expr` item (not `<=`, `>=`, `!=`).
fn assignment(item: &str) -> Option<(String, String)> {
    let b = item.as_bytes();
    let mut depth = 0i32;
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'(' => depth += 1,
            b')' => depth -= 1,
            b'=' if depth == 0 => {
                let prev = if i > 0 { b[i - 1] } else { b' ' };
                let next = b.get(i + 1).copied().unwrap_or(b' ');
                if prev != b'<' && prev != b'>' && prev != b'!' && next != b'=' {
                    let name = item[..i].trim().trim_matches('`').to_string();
                    return Some((name, item[i + 1..].trim().to_string()));
                }
            }
            _ => {}
        }
    }
    None
}

fn encode(e: &Arc<dyn datafusion::physical_expr::PhysicalExpr>) -> Result<Vec<u8>> {
    let node = serialize_physical_expr(e, &TethysCodec)?;
    Ok(node.encode_to_vec())
}

/// Fills the expression part of `plan` from the `columns` / `where` headers.
pub fn compile(
    plan: &mut LoadPlanPb,
    table: &Table,
    columns: &str,
    where_expr: &str,
) -> Result<()> {
    if columns.trim().is_empty() && where_expr.trim().is_empty() {
        return Ok(());
    }
    let items = if columns.trim().is_empty() {
        table
            .schema
            .columns
            .iter()
            .map(|c| c.name.clone())
            .collect()
    } else {
        split_top(columns)
    };
    let mut sources: Vec<String> = vec![];
    let mut derived: Vec<(String, String)> = vec![];
    for it in items {
        match assignment(&it) {
            Some((name, expr)) => {
                if table.schema.index_of(&name).is_none() {
                    return Err(TethysError::Analysis(format!(
                        "Unknown column '{name}' on the left of '=' in the columns header"
                    )));
                }
                derived.push((name, expr));
            }
            None => sources.push(it.trim_matches('`').to_string()),
        }
    }
    let mut ctx = SessionContext::new();
    tethys_common::functions::register_all(&mut ctx)?;
    // Source columns named like a table column are read as that column's type;
    // others as text, switched to DOUBLE when an expression needs a number.
    let mut types: Vec<Option<ColumnType>> = sources
        .iter()
        .map(|s| {
            table
                .schema
                .index_of(s)
                .map(|i| table.schema.columns[i].column_type)
                // An object column's source is what `to_bitmap(uv)` reads.
                .filter(|t| !t.is_object())
        })
        .collect();
    // Each header expression with the function checks and Doris rewrites
    // of a query's, once (the loop below may plan them several times).
    let mut texts: Vec<(Option<usize>, String)> = derived
        .iter()
        .map(|(name, text)| {
            let text = crate::sql::rewrite::expr_for_datafusion(text)?;
            Ok((table.schema.index_of(name), text))
        })
        .collect::<Result<_>>()?;
    if !where_expr.trim().is_empty() {
        texts.push((None, crate::sql::rewrite::expr_for_datafusion(where_expr)?));
    }
    for _ in 0..=sources.len() {
        let schema = Schema::new(
            sources
                .iter()
                .zip(&types)
                .map(|(n, t)| {
                    Field::new(
                        n.to_lowercase(),
                        t.map(|t| t.arrow_type()).unwrap_or(DataType::Utf8),
                        true,
                    )
                })
                .collect::<Vec<_>>(),
        );
        let df = DFSchema::try_from(schema)?;
        let mut exprs = vec![Vec::new(); table.schema.columns.len()];
        let mut where_bytes = vec![];
        let mut retry = false;
        for (target, text) in &texts {
            let e: Expr = ctx.parse_sql_expr(text, &df).map_err(|e| {
                TethysError::Analysis(format!("cannot use the columns / where headers: {e}"))
            })?;
            let typed = match target {
                Some(ci) => cast(
                    e.clone(),
                    table.schema.columns[*ci].column_type.arrow_type(),
                ),
                None => e.clone(),
            };
            match ctx.create_physical_expr(typed, &df) {
                Ok(pe) => match target {
                    Some(ci) => exprs[*ci] = encode(&pe)?,
                    None => where_bytes = encode(&pe)?,
                },
                Err(err) => {
                    // Read the text columns this expression uses as numbers, and try again.
                    let mut changed = false;
                    for c in e.column_refs() {
                        if let Some(si) = sources
                            .iter()
                            .position(|s| s.eq_ignore_ascii_case(c.name()))
                            && types[si].is_none()
                        {
                            types[si] = Some(ColumnType::Double);
                            changed = true;
                        }
                    }
                    if !changed {
                        return Err(TethysError::Analysis(format!(
                            "cannot use the columns / where headers: {err}"
                        )));
                    }
                    retry = true;
                    break;
                }
            }
        }
        if !retry {
            plan.source_columns = sources.clone();
            plan.source_types = types
                .iter()
                .map(|t| t.map(|t| t.sql()).unwrap_or_default())
                .collect();
            plan.column_exprs = exprs;
            plan.where_expr = where_bytes;
            return Ok(());
        }
    }
    Err(TethysError::Analysis(
        "cannot use the columns / where headers: their types do not fit together".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_assign() {
        assert_eq!(
            split_top("c1, tmp, amount = tmp * 100, x = concat(a, ',', b)"),
            vec!["c1", "tmp", "amount = tmp * 100", "x = concat(a, ',', b)"]
        );
        assert_eq!(
            assignment("amount = tmp * 100"),
            Some(("amount".into(), "tmp * 100".into()))
        );
        assert_eq!(assignment("c1"), None);
        assert_eq!(assignment("f(a >= 1)"), None);
    }
}

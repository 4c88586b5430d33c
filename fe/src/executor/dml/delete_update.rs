//! DELETE and UPDATE.
//!
//! On a merge-on-write UNIQUE table `DELETE FROM t WHERE ...` loads the rows
//! it matches back as deletes of their keys (delete bitmaps on the
//! backends), so any condition works; a PARTITION clause adds the
//! partitions' ranges. Elsewhere it is Doris' delete predicate: a
//! transaction that publishes a new version on every tablet of the chosen
//! partitions holding
//! only the condition (a conjunction of simple comparisons); backends hide
//! the older rows it holds for and compaction later removes them. On
//! AGGREGATE and UNIQUE tables the conditions may name key columns only, as
//! in Doris' merge-on-read tables: a value condition would hide one version
//! of a key and let an older one show through.
//!
//! `UPDATE t SET ... WHERE ...` (UNIQUE tables only) reads the rows it
//! matches and writes them back with the new values in one INSERT: the
//! newest row of a key wins, so the load is the update.

use std::collections::BTreeSet;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, BinaryOperator, Expr, Statement as SqlStatement, TableFactor, UnaryOperator,
    Value,
};
use datafusion::sql::sqlparser::dialect::MySqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use tethys_common::delete::{DeleteCondition, DeleteFilter};
use tethys_common::schema::{KeysType, TableSchema};
use tethys_common::{Result, TethysError};

use crate::catalog::Table;
use crate::frontend::Frontend;

/// What a DELETE did: its transaction's label and id.
pub struct Deleted {
    pub label: String,
    pub txn_id: i64,
}

fn condition_error(e: &Expr) -> TethysError {
    TethysError::Analysis(format!(
        "DELETE conditions must be simple comparisons of a column with values \
         (=, !=, <, <=, >, >=, IN, NOT IN, IS [NOT] NULL) joined by AND; got: {e}"
    ))
}

fn column_of(e: &Expr) -> Option<String> {
    match e {
        Expr::Identifier(i) => Some(i.value.to_lowercase()),
        Expr::CompoundIdentifier(parts) => parts.last().map(|i| i.value.to_lowercase()),
        Expr::Nested(inner) => column_of(inner),
        _ => None,
    }
}

fn literal_of(e: &Expr) -> Option<String> {
    match e {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => Some(n.clone()),
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Some(s.clone()),
            Value::Boolean(b) => Some(b.to_string()),
            _ => None,
        },
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => literal_of(expr).map(|v| format!("-{v}")),
        Expr::Nested(inner) => literal_of(inner),
        _ => None,
    }
}

fn collect(e: &Expr, out: &mut Vec<DeleteCondition>) -> Result<()> {
    let cond = |column: String, op: &str, values: Vec<String>| DeleteCondition {
        column,
        op: op.into(),
        values,
    };
    match e {
        Expr::Nested(inner) => collect(inner, out),
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            collect(left, out)?;
            collect(right, out)
        }
        Expr::BinaryOp { left, op, right } => {
            let (sym, flipped) = match op {
                BinaryOperator::Eq => ("=", "="),
                BinaryOperator::NotEq => ("!=", "!="),
                BinaryOperator::Lt => ("<", ">"),
                BinaryOperator::LtEq => ("<=", ">="),
                BinaryOperator::Gt => (">", "<"),
                BinaryOperator::GtEq => (">=", "<="),
                _ => return Err(condition_error(e)),
            };
            match (
                column_of(left),
                literal_of(right),
                column_of(right),
                literal_of(left),
            ) {
                (Some(c), Some(v), _, _) => out.push(cond(c, sym, vec![v])),
                (_, _, Some(c), Some(v)) => out.push(cond(c, flipped, vec![v])),
                _ => return Err(condition_error(e)),
            }
            Ok(())
        }
        Expr::InList {
            expr,
            list,
            negated,
        } => {
            let c = column_of(expr).ok_or_else(|| condition_error(e))?;
            let values = list
                .iter()
                .map(|v| literal_of(v).ok_or_else(|| condition_error(e)))
                .collect::<Result<Vec<_>>>()?;
            out.push(cond(c, if *negated { "NOT IN" } else { "IN" }, values));
            Ok(())
        }
        Expr::IsNull(inner) => {
            out.push(cond(
                column_of(inner).ok_or_else(|| condition_error(e))?,
                "IS NULL",
                vec![],
            ));
            Ok(())
        }
        Expr::IsNotNull(inner) => {
            out.push(cond(
                column_of(inner).ok_or_else(|| condition_error(e))?,
                "IS NOT NULL",
                vec![],
            ));
            Ok(())
        }
        _ => Err(condition_error(e)),
    }
}

/// The conditions of a DELETE's WHERE text, checked against the table.
pub fn delete_conditions(text: &str, schema: &TableSchema) -> Result<Vec<DeleteCondition>> {
    let expr = Parser::new(&MySqlDialect {})
        .try_with_sql(text)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| TethysError::Syntax(format!("DELETE condition: {e}")))?;
    let mut conds = vec![];
    collect(&expr, &mut conds)?;
    for c in &conds {
        let i = schema.index_of(&c.column).ok_or_else(|| {
            TethysError::UnknownColumn(format!("Unknown column '{}' in 'table list'", c.column))
        })?;
        if schema.keys_type != KeysType::Duplicate && !schema.columns[i].is_key {
            return Err(TethysError::Analysis(format!(
                "DELETE on {} tables can only use key columns in its conditions; {} is a value column",
                schema.keys_type.sql(),
                schema.columns[i].name
            )));
        }
    }
    // Every value must be one of its column's type.
    DeleteFilter::new(&[&conds], schema)?;
    Ok(conds)
}

/// `DELETE FROM t [PARTITION ...] WHERE ...` as a versioned delete predicate.
pub async fn delete(
    fe: &Arc<Frontend>,
    db: &str,
    table: &Table,
    partitions: &[String],
    condition: &str,
) -> Result<Deleted> {
    let conds = delete_conditions(condition, &table.schema)?;
    for p in partitions {
        table.existing_partition(p)?;
    }
    let chosen: Vec<_> = table
        .partitions
        .iter()
        .filter(|p| {
            partitions.is_empty() || partitions.iter().any(|n| n.eq_ignore_ascii_case(&p.name))
        })
        .collect();
    let txn = fe.txn.begin(db, None, "FRONTEND")?;
    let pb: Vec<_> = conds.iter().map(|c| c.to_pb()).collect();
    let written = write_delete_predicates(fe, &chosen, txn.id, &pb).await;
    let touched: BTreeSet<(i64, i64)> = chosen.iter().map(|p| (table.id, p.id)).collect();
    let result = match written {
        Ok(written) => fe.txn.commit_and_publish(txn.id, &touched, &written).await,
        Err(e) => Err(e),
    };
    if let Err(e) = result {
        // A transaction that got committed is left to publish (abort
        // refuses it).
        let _ = fe.txn.abort(txn.id, &e.to_string()).await;
        return Err(e);
    }
    Ok(Deleted {
        label: txn.label,
        txn_id: txn.id,
    })
}

/// Writes a delete predicate to every replica of the partitions' tablets
/// (those holding the visible version on alive backends); returns the
/// replicas written, or an error when a tablet cannot reach a majority of
/// its replicas.
async fn write_delete_predicates(
    fe: &Arc<Frontend>,
    partitions: &[&crate::catalog::Partition],
    txn_id: i64,
    conditions: &[tethys_proto::DeleteConditionPb],
) -> Result<Vec<(i64, i64)>> {
    let alive: BTreeSet<i64> = fe.backends.alive_ids().into_iter().collect();
    let mut per_be: std::collections::BTreeMap<i64, Vec<i64>> = Default::default();
    let mut routes = vec![];
    for p in partitions {
        for t in &p.tablets {
            let to: Vec<i64> = t
                .current(p.visible_version, |b| alive.contains(&b))
                .map(|r| r.backend_id)
                .collect();
            for b in &to {
                per_be.entry(*b).or_default().push(t.id);
            }
            routes.push((t.id, to, t.replicas.len()));
        }
    }
    let registered = fe.catalog.read().backends.clone();
    let calls = per_be.into_iter().map(|(be, ids)| {
        let req = tethys_proto::WriteDeleteRequest {
            txn_id,
            tablet_ids: ids.clone(),
            conditions: conditions.to_vec(),
        };
        let client = registered
            .get(&be)
            .ok_or_else(|| TethysError::Internal(format!("backend {be} is not registered")))
            .and_then(|info| fe.backends.client(info));
        async move {
            let r = match client {
                Ok(c) => c.write_delete(req).await.map(|_| ()),
                Err(e) => Err(e),
            };
            (be, ids, r)
        }
    });
    let mut writes = tethys_common::replicas::ReplicaWrites::default();
    for (be, ids, r) in futures::future::join_all(calls).await {
        for id in ids {
            match &r {
                Ok(()) => writes.succeed(id, be),
                Err(e) => writes.fail(id, be, e.to_string()),
            }
        }
    }
    for (id, to, n) in &routes {
        writes.check(*id, to, *n)?;
    }
    Ok(writes.written())
}

/// A DELETE on a merge-on-write UNIQUE table, as the INSERT ... SELECT that
/// loads the matching rows back as deletes of their keys (the INSERT runs
/// with `StatementCtx::delete_rows`). Any condition a SELECT takes works,
/// value columns included; a PARTITION clause becomes the partitions'
/// ranges on the partition column. `None` for other tables.
pub fn delete_as_insert(
    db: &str,
    table: &Table,
    partitions: &[String],
    condition: &str,
) -> Result<Option<String>> {
    let s = &table.schema;
    if s.keys_type != KeysType::Unique || !s.merge_on_write {
        return Ok(None);
    }
    let mut select = format!(
        "INSERT INTO `{db}`.`{t}` SELECT * FROM `{db}`.`{t}` WHERE ({condition})",
        t = table.name
    );
    if !partitions.is_empty() {
        let mut ranges = vec![];
        for name in partitions {
            ranges.push(partition_filter(table, table.existing_partition(name)?));
        }
        select.push_str(&format!(" AND ({})", ranges.join(" OR ")));
    }
    Ok(Some(select))
}

/// The rows of partition `p` as a SQL condition on the partition column.
fn partition_filter(table: &Table, p: &crate::catalog::Partition) -> String {
    use crate::catalog::Bound;
    let (Some(col), Some((lo, hi))) = (&table.partition_column, &p.range) else {
        return "TRUE".into();
    };
    let Some(ty) = table
        .schema
        .index_of(col)
        .map(|i| table.schema.columns[i].column_type)
    else {
        return "TRUE".into();
    };
    let literal = |b: &Bound| match (b, &ty) {
        (Bound::Value(v), tethys_common::types::ColumnType::DateTime { .. }) => {
            chrono::DateTime::<chrono::Utc>::from_timestamp_micros(*v as i64)
                .map(|d| format!("'{}'", d.naive_utc().format("%Y-%m-%d %H:%M:%S%.6f")))
                .unwrap_or_default()
        }
        (b, tethys_common::types::ColumnType::Date) => format!("'{}'", b.display(&ty)),
        (b, _) => b.display(&ty),
    };
    let mut conds = vec![];
    if !matches!(lo, Bound::Min) {
        conds.push(format!("`{col}` >= {}", literal(lo)));
    }
    if !matches!(hi, Bound::Max) {
        conds.push(format!("`{col}` < {}", literal(hi)));
    }
    if conds.is_empty() {
        "TRUE".into()
    } else {
        conds.join(" AND ")
    }
}

/// `UPDATE t SET c = expr, ... [WHERE cond]` on a UNIQUE table, as the
/// INSERT ... SELECT that writes the matched rows back with the new values.
pub fn update_as_insert(sql: &str, session_db: &Option<String>, fe: &Frontend) -> Result<String> {
    let parsed = Parser::parse_sql(&MySqlDialect {}, sql)
        .map_err(|e| TethysError::Syntax(format!("UPDATE: {e}")))?;
    let Some(SqlStatement::Update(u)) = parsed.into_iter().next() else {
        return Err(TethysError::Syntax("not an UPDATE statement".into()));
    };
    if u.from.is_some() || !u.table.joins.is_empty() {
        return Err(TethysError::NotSupported(
            "UPDATE ... FROM / JOIN is not supported yet".into(),
        ));
    }
    if u.limit.is_some() || !u.order_by.is_empty() {
        return Err(TethysError::NotSupported(
            "UPDATE with ORDER BY / LIMIT is not supported".into(),
        ));
    }
    let TableFactor::Table { name, alias, .. } = &u.table.relation else {
        return Err(TethysError::Syntax("UPDATE needs a table name".into()));
    };
    let (db, tname) = crate::session::table_name_of(name, session_db)?;
    let table = {
        let state = fe.catalog.read();
        state
            .database(&db)
            .and_then(|d| {
                d.tables
                    .values()
                    .find(|t| t.name.eq_ignore_ascii_case(&tname))
            })
            .cloned()
            .ok_or_else(|| TethysError::UnknownTable {
                database: db.clone(),
                table: tname.clone(),
            })?
    };
    if table.schema.keys_type != KeysType::Unique {
        return Err(TethysError::Analysis(
            "Only unique olap table could be updated.".into(),
        ));
    }
    let mut set: Vec<Option<String>> = vec![None; table.schema.columns.len()];
    for a in &u.assignments {
        let AssignmentTarget::ColumnName(c) = &a.target else {
            return Err(TethysError::NotSupported(
                "UPDATE of a tuple of columns is not supported".into(),
            ));
        };
        let cname =
            c.0.last()
                .and_then(|p| p.as_ident())
                .map(|i| i.value.clone())
                .unwrap_or_default();
        let i = table.schema.index_of(&cname).ok_or_else(|| {
            TethysError::UnknownColumn(format!("Unknown column '{cname}' in 'table list'"))
        })?;
        if table.schema.columns[i].is_key {
            return Err(TethysError::Analysis(
                "Only value columns of unique table could be updated".into(),
            ));
        }
        set[i] = Some(a.value.to_string());
    }
    let columns: Vec<String> = table
        .schema
        .columns
        .iter()
        .map(|c| format!("`{}`", c.name))
        .collect();
    let select: Vec<String> = table
        .schema
        .columns
        .iter()
        .zip(&set)
        .map(|(c, s)| s.clone().unwrap_or_else(|| format!("`{}`", c.name)))
        .collect();
    let mut insert = format!(
        "INSERT INTO `{db}`.`{}` ({}) SELECT {} FROM `{db}`.`{}`",
        table.name,
        columns.join(", "),
        select.join(", "),
        table.name
    );
    if let Some(a) = alias {
        insert.push_str(&format!(" AS {a}"));
    }
    if let Some(w) = &u.selection {
        insert.push_str(&format!(" WHERE {w}"));
    }
    Ok(insert)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tethys_common::schema::Column;
    use tethys_common::types::ColumnType;

    fn schema(keys_type: KeysType) -> TableSchema {
        let c = |n: &str, t: ColumnType, key: bool| Column::new(n, t, true, key);
        TableSchema {
            columns: vec![
                c("k", ColumnType::Int, true),
                c("d", ColumnType::Date, true),
                c("v", ColumnType::Varchar(8), false),
            ],
            num_key_columns: 2,
            keys_type,
            ..Default::default()
        }
    }

    #[test]
    fn delete_conditions_are_simple_and_typed() {
        let s = schema(KeysType::Duplicate);
        let c = delete_conditions(
            "k >= -3 AND (5 > k) AND d IN ('2026-01-01', '2026-01-02') AND v IS NOT NULL",
            &s,
        )
        .unwrap();
        let text: Vec<String> = c.iter().map(|c| c.sql()).collect();
        assert_eq!(
            text,
            vec![
                "k >= '-3'",
                "k < '5'",
                "d IN ('2026-01-01', '2026-01-02')",
                "v IS NOT NULL"
            ]
        );
        for bad in ["k = 1 OR k = 2", "k + 1 = 2", "k = v", "lower(v) = 'a'"] {
            let e = delete_conditions(bad, &s).unwrap_err().to_string();
            assert!(e.contains("simple comparisons"), "{bad}: {e}");
        }
        let e = delete_conditions("d = 'soon'", &s).unwrap_err().to_string();
        assert!(e.contains("not a valid"), "{e}");
        let e = delete_conditions("v = 'x'", &schema(KeysType::Aggregate))
            .unwrap_err()
            .to_string();
        assert!(e.contains("can only use key columns"), "{e}");
        let e = delete_conditions("nope = 1", &s).unwrap_err().to_string();
        assert!(e.contains("Unknown column 'nope'"), "{e}");
    }
}

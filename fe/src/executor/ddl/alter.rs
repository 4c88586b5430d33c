//! Changes to an existing table: DROP TABLE, TRUNCATE TABLE, ALTER TABLE
//! ... SET (properties), ADD PARTITION and DROP PARTITION.

use std::sync::Arc;

use tethys_common::{Result, TethysError};

use super::create_table::check_overlap;
use super::create_table::parse_range;
use super::tablets::create_tablets;
use super::tablets::drop_tablets;
use super::tablets::{Placement, new_partition};
use crate::catalog::*;
use crate::frontend::Frontend;
use crate::session::resolve_db;
use crate::sql::statement::{PartitionDef, PartitionValues};

/// DROP TABLE.
pub async fn drop_table(
    fe: &Arc<Frontend>,
    session_db: &Option<String>,
    db: &Option<String>,
    name: &str,
    if_exists: bool,
) -> Result<()> {
    let db = resolve_db(session_db, db)?;
    let parts = fe.catalog.mutate(|state, _| {
        let d = state
            .database(&db)
            .ok_or_else(|| TethysError::UnknownDatabase(db.clone()))?;
        let Some(t) = d.table(name) else {
            if if_exists {
                return Ok((EditOp::RemoveTxns { ids: vec![] }, vec![]));
            }
            return Err(TethysError::DropMissingTable(name.into()));
        };
        Ok((
            EditOp::DropTable {
                db: d.name.clone(),
                table: t.name.clone(),
            },
            t.partitions.clone(),
        ))
    })?;
    drop_tablets(fe, &parts).await;
    Ok(())
}

/// TRUNCATE TABLE: the chosen partitions get new, empty tablets.
pub async fn truncate_table(
    fe: &Arc<Frontend>,
    session_db: &Option<String>,
    db: &Option<String>,
    name: &str,
    only: &[String],
) -> Result<()> {
    let db = resolve_db(session_db, db)?;
    let alive = fe.backends.alive_ids();
    let (table, old, new) = fe.catalog.mutate(|state, ids| {
        let (d, t) = state.find_table(&db, name)?;
        let mut place = Placement::for_table(state, &alive, d, t);
        for p in only {
            t.existing_partition(p)?;
        }
        let mut parts = vec![];
        let mut old = vec![];
        let mut new = vec![];
        for p in &t.partitions {
            if only.is_empty() || only.iter().any(|o| o.eq_ignore_ascii_case(&p.name)) {
                let np = new_partition(
                    &mut place,
                    ids,
                    &p.name,
                    p.range,
                    p.buckets,
                    t.replication_num(),
                )?;
                old.push(p.clone());
                new.push(np.clone());
                parts.push(np);
            } else {
                parts.push(p.clone());
            }
        }
        let mut nt = t.clone();
        nt.partitions = parts.clone();
        Ok((
            EditOp::ReplacePartitions {
                db: d.name.clone(),
                table: t.name.clone(),
                partitions: parts,
            },
            (nt, old, new),
        ))
    })?;
    create_tablets(fe, &table, &new).await?;
    drop_tablets(fe, &old).await;
    Ok(())
}

/// A `true` / `false` table property.
pub(super) fn bool_property(key: &str, value: &str) -> Result<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(TethysError::Analysis(format!(
            "Invalid {key}: '{value}', it must be true or false"
        ))),
    }
}

/// Checks a `group_commit_*` table property: a positive integer.
pub(super) fn check_group_commit_property(key: &str, value: &str) -> Result<String> {
    match value.trim().parse::<i64>() {
        Ok(n) if n > 0 => Ok(n.to_string()),
        _ => Err(TethysError::Analysis(format!(
            "Invalid {key}: '{value}', it must be a positive integer"
        ))),
    }
}

/// ALTER TABLE t SET ("k" = "v"): the properties that can change after
/// creation (the group commit thresholds).
pub fn set_table_properties(
    fe: &Arc<Frontend>,
    session_db: &Option<String>,
    db: &Option<String>,
    table: &str,
    properties: &[(String, String)],
) -> Result<()> {
    let db = resolve_db(session_db, db)?;
    let mut checked = vec![];
    for (k, v) in properties {
        let lk = k.to_ascii_lowercase();
        match lk.as_str() {
            "enable_unique_key_merge_on_write" => {
                return Err(TethysError::Analysis(
                    "enable_unique_key_merge_on_write is fixed when the table is created and cannot be changed"
                        .into(),
                ));
            }
            "group_commit_interval_ms" | "group_commit_data_bytes" => {
                let v = check_group_commit_property(&lk, v)?;
                checked.push((lk, v));
            }
            _ => {
                return Err(TethysError::NotSupported(format!(
                    "ALTER TABLE ... SET of property '{k}' is not supported yet \
                     (group_commit_interval_ms and group_commit_data_bytes are)"
                )));
            }
        }
    }
    fe.catalog.mutate(|state, _| {
        let (d, t) = state.find_table(&db, table)?;
        Ok((
            EditOp::SetTableProperties {
                db: d.name.clone(),
                table: t.name.clone(),
                properties: checked,
            },
            (),
        ))
    })
}

/// ALTER TABLE ... ADD PARTITION.
pub async fn add_partition(
    fe: &Arc<Frontend>,
    session_db: &Option<String>,
    db: &Option<String>,
    table: &str,
    def: &PartitionDef,
) -> Result<()> {
    let db = resolve_db(session_db, db)?;
    let alive = fe.backends.alive_ids();
    let added = fe.catalog.mutate(|state, ids| {
        let (d, t) = state.find_table(&db, table)?;
        let ty = t.partition_column_type().ok_or_else(|| {
            TethysError::Analysis(format!(
                "Table {} is not partitioned; it cannot get partitions",
                t.name
            ))
        })?;
        if t.partition(&def.name).is_some() && def.if_not_exists {
            return Ok((EditOp::RemoveTxns { ids: vec![] }, None));
        }
        let upper_target = match &def.values {
            PartitionValues::LessThan(Some(v)) => Bound::parse(v, &ty)?,
            PartitionValues::LessThan(None) => Bound::Max,
            PartitionValues::Fixed(_, b) => Bound::parse(b, &ty)?,
        };
        let prev = t
            .partitions
            .iter()
            .filter_map(|p| p.range.map(|r| r.1))
            .filter(|u| *u <= upper_target)
            .max()
            .unwrap_or(Bound::Min);
        let range = parse_range(def, &ty, prev)?;
        check_overlap(&t.partitions, &def.name, range, &ty)?;
        let buckets = def.buckets.unwrap_or(t.distribution.buckets());
        if let Some(g) = state.group_of(d, t)
            && buckets != g.buckets()
        {
            return Err(TethysError::Analysis(format!(
                "Colocate tables must have same bucket num: {buckets} should be {}",
                g.buckets()
            )));
        }
        let p = new_partition(
            &mut Placement::for_table(state, &alive, d, t),
            ids,
            &def.name,
            Some(range),
            buckets,
            t.replication_num(),
        )?;
        Ok((
            EditOp::AddPartition {
                db: d.name.clone(),
                table: t.name.clone(),
                partition: p.clone(),
            },
            Some((t.clone(), p)),
        ))
    })?;
    if let Some((t, p)) = added {
        create_tablets(fe, &t, std::slice::from_ref(&p)).await?;
    }
    Ok(())
}

/// ALTER TABLE ... DROP PARTITION.
pub async fn drop_partition(
    fe: &Arc<Frontend>,
    session_db: &Option<String>,
    db: &Option<String>,
    table: &str,
    name: &str,
    if_exists: bool,
) -> Result<()> {
    let db = resolve_db(session_db, db)?;
    let dropped = fe.catalog.mutate(|state, _| {
        let (d, t) = state.find_table(&db, table)?;
        if t.partition_column.is_none() {
            return Err(TethysError::Analysis(format!(
                "Table {} is not partitioned",
                t.name
            )));
        }
        let Some(p) = t.partition(name) else {
            if if_exists {
                return Ok((EditOp::RemoveTxns { ids: vec![] }, None));
            }
            return Err(TethysError::Analysis(format!(
                "Error in list of partitions to {name}"
            )));
        };
        Ok((
            EditOp::DropPartition {
                db: d.name.clone(),
                table: t.name.clone(),
                partition: p.name.clone(),
            },
            Some(p.clone()),
        ))
    })?;
    if let Some(p) = dropped {
        drop_tablets(fe, &[p]).await;
    }
    Ok(())
}

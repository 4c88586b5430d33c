//! CREATE TABLE, clause by clause: keys, columns and their aggregations,
//! defaults, PROPERTIES, DISTRIBUTED BY and PARTITION BY each checked as
//! Doris checks them and turned into the catalog's [`Table`].

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use tethys_common::schema::{AggregationType, Column, TableSchema};
use tethys_common::types::ColumnType;
use tethys_common::{Result, TethysError};

use super::alter::bool_property;
use super::alter::check_group_commit_property;
use super::tablets::DEFAULT_BUCKETS;
use super::tablets::create_tablets;
use super::tablets::drop_tablets;
use super::tablets::now_ms;
use super::tablets::{Placement, new_partition, not_enough_backends};
use crate::catalog::*;
use crate::frontend::Frontend;
use crate::session::resolve_db;
use crate::sql::statement::{CreateTable, PartitionDef, PartitionValues};

pub(super) fn parse_range(
    def: &PartitionDef,
    ty: &tethys_common::types::ColumnType,
    prev_upper: Bound,
) -> Result<(Bound, Bound)> {
    let (lo, hi) = match &def.values {
        PartitionValues::LessThan(v) => (
            prev_upper,
            match v {
                Some(v) => Bound::parse(v, ty)?,
                None => Bound::Max,
            },
        ),
        PartitionValues::Fixed(a, b) => (Bound::parse(a, ty)?, Bound::parse(b, ty)?),
    };
    if lo >= hi {
        return Err(TethysError::Analysis(format!(
            "The lower values must smaller than upper values in partition {}: [{}, {})",
            def.name,
            lo.display(ty),
            hi.display(ty)
        )));
    }
    Ok((lo, hi))
}

pub(super) fn check_overlap(
    parts: &[Partition],
    name: &str,
    range: (Bound, Bound),
    ty: &tethys_common::types::ColumnType,
) -> Result<()> {
    for p in parts {
        if p.name.eq_ignore_ascii_case(name) {
            return Err(TethysError::Analysis(format!(
                "Duplicate partition name {name}"
            )));
        }
        if let Some((lo, hi)) = p.range
            && range.0 < hi
            && lo < range.1
        {
            return Err(TethysError::Analysis(format!(
                "Range [{}, {}) of partition {name} is intersected with range [{}, {}) of partition {}",
                range.0.display(ty),
                range.1.display(ty),
                lo.display(ty),
                hi.display(ty),
                p.name
            )));
        }
    }
    Ok(())
}

/// The aggregation type of each column: checked against the key model
/// and the column's type, `REPLACE` for the value columns of a UNIQUE table
/// read by merging.
fn check_aggregations(
    ct: &CreateTable,
    keys_type: KeysType,
    num_keys: usize,
) -> Result<Vec<Option<AggregationType>>> {
    let mut out = Vec::with_capacity(ct.columns.len());
    for (i, c) in ct.columns.iter().enumerate() {
        let agg = match &c.aggregation {
            Some(a) => Some(AggregationType::parse(a).ok_or_else(|| {
                TethysError::Analysis(format!("Unknown aggregation type {a} of column {}", c.name))
            })?),
            None => None,
        };
        if i < num_keys {
            if agg.is_some() {
                return Err(TethysError::Analysis(format!(
                    "Key column {} can not set aggregation type",
                    c.name
                )));
            }
            out.push(None);
            continue;
        }
        let agg = match (keys_type, agg) {
            (KeysType::Aggregate, None) => {
                return Err(TethysError::Analysis(format!(
                    "The value column {} of an AGGREGATE KEY table must declare its aggregation type (SUM, MAX, MIN, REPLACE, REPLACE_IF_NOT_NULL, HLL_UNION, BITMAP_UNION)",
                    c.name
                )));
            }
            (KeysType::Aggregate, Some(a)) => a,
            (_, Some(a)) => {
                return Err(TethysError::Analysis(format!(
                    "The column {} declares aggregation type {}, which only AGGREGATE KEY tables allow",
                    c.name,
                    a.sql()
                )));
            }
            (_, None) => {
                out.push(None);
                continue;
            }
        };
        let wants = match agg {
            AggregationType::BitmapUnion => Some(ColumnType::Bitmap),
            AggregationType::HllUnion => Some(ColumnType::Hll),
            _ => None,
        };
        match agg {
            _ if wants.is_some_and(|t| t != c.column_type)
                || (wants.is_none() && c.column_type.is_object()) =>
            {
                return Err(TethysError::Analysis(format!(
                    "Aggregate type {} is not compatible with primitive type {} of column {}{}",
                    agg.sql(),
                    c.column_type.desc(),
                    c.name,
                    match c.column_type {
                        ColumnType::Bitmap => ": a BITMAP column aggregates by BITMAP_UNION",
                        ColumnType::Hll => ": an HLL column aggregates by HLL_UNION",
                        _ => "",
                    }
                )));
            }
            AggregationType::Sum if !c.column_type.is_numeric() => {
                return Err(TethysError::Analysis(format!(
                    "Aggregate type SUM is not compatible with primitive type {} of column {}",
                    c.column_type.desc(),
                    c.name
                )));
            }
            _ => {}
        }
        out.push(Some(agg));
    }
    Ok(out)
}

/// Whether rows of a table with this schema must be routed by key: a
/// random bucket would keep two versions of a key apart.
fn random_forbidden(schema: &TableSchema) -> bool {
    match schema.keys_type {
        KeysType::Duplicate => false,
        KeysType::Unique => true,
        KeysType::Aggregate => schema.columns.iter().any(|c| {
            matches!(
                c.aggregation,
                Some(AggregationType::Replace | AggregationType::ReplaceIfNotNull)
            )
        }),
    }
}

/// Validates CREATE TABLE and builds the catalog table (without ids).
fn build_table(
    ct: &CreateTable,
    (state, db): (&CatalogState, &Database),
    place: Placement,
    ids: &mut IdGen,
    default_replicas: usize,
) -> Result<Table> {
    let (keys_type, key_columns) = keys_of(ct)?;
    check_defaults(ct)?;
    let columns = columns_of(ct, keys_type, key_columns.len())?;
    let options = options_of(ct, place.backends(), default_replicas, keys_type, &columns)?;
    let schema = TableSchema {
        columns,
        num_key_columns: key_columns.len(),
        compression: options.compression,
        bloom_filter_columns: options.bloom_filter_columns,
        keys_type,
        merge_on_write: options.merge_on_write,
        disable_auto_compaction: options.disable_auto_compaction,
    };
    let (distribution, auto_buckets) = distribution_of(ct, &schema)?;
    // A table joining a colocation group takes its bucketing's backends.
    let sequence = match options.properties.get(colocation::COLOCATE_WITH) {
        Some(group) => state.join_group(db, group, &schema, &distribution, options.replicas)?,
        None => None,
    };
    let mut place = place.following(sequence);
    let table_id = ids.alloc();
    let (partition_column, partitions) = partitions_of(
        ct,
        &mut place,
        ids,
        &schema,
        &distribution,
        options.replicas,
    )?;
    Ok(Table {
        id: table_id,
        name: ct.name.clone(),
        schema,
        partition_column,
        partitions,
        distribution,
        auto_buckets,
        properties: options.properties,
        comment: ct.comment.clone().unwrap_or_default(),
        create_time: now_ms(),
        column_stats: Default::default(),
    })
}

/// The key model (Doris' default when the statement gives none) and the key
/// columns: explicit, or the leading ones Doris picks.
fn keys_of(ct: &CreateTable) -> Result<(KeysType, Vec<String>)> {
    let mut seen = HashSet::new();
    for c in &ct.columns {
        if !seen.insert(c.name.to_lowercase()) {
            return Err(TethysError::DuplicateColumn(c.name.clone()));
        }
    }
    let keys_type = match ct.keys_type.as_deref() {
        None if ct.columns.iter().any(|c| c.aggregation.is_some()) => KeysType::Aggregate,
        None | Some("DUPLICATE") => KeysType::Duplicate,
        Some("AGGREGATE") => KeysType::Aggregate,
        Some(_) => KeysType::Unique,
    };
    // Key columns: explicit, or Doris' default (leading columns, up to 3 and 36 bytes,
    // stopping before FLOAT/DOUBLE/STRING and right after the first VARCHAR).
    let key_columns: Vec<String> = if ct.key_columns.is_empty() && keys_type != KeysType::Duplicate
    {
        // Doris: the columns before the first one with an aggregation type.
        let keys: Vec<String> = ct
            .columns
            .iter()
            .take_while(|c| c.aggregation.is_none())
            .map(|c| c.name.clone())
            .collect();
        if keys.is_empty() || keys.len() == ct.columns.len() {
            return Err(TethysError::Analysis(format!(
                "{} table needs key columns followed by value columns",
                keys_type.sql()
            )));
        }
        keys
    } else if ct.key_columns.is_empty() {
        let mut keys = vec![];
        let mut bytes = 0;
        for c in &ct.columns {
            let Some(w) = c.column_type.fixed_width() else {
                break;
            };
            if keys.len() == 3 || bytes + w > 36 {
                break;
            }
            bytes += w;
            keys.push(c.name.clone());
            if c.column_type.is_string() {
                break;
            }
        }
        if keys.is_empty() {
            return Err(TethysError::Analysis(
                "The olap table first column could not be float, double, string or array, struct, map, please use decimal or varchar instead."
                    .into(),
            ));
        }
        keys
    } else {
        ct.key_columns.clone()
    };
    for (i, k) in key_columns.iter().enumerate() {
        let c = ct.columns.get(i).filter(|c| c.name.eq_ignore_ascii_case(k)).ok_or_else(|| {
            TethysError::Analysis(format!(
                "Key columns should be a ordered prefix of the schema. KeyColumns[{i}] (starts from zero) is {k}, but corresponding column is {} in the previous columns declaration.",
                ct.columns.get(i).map(|c| c.name.as_str()).unwrap_or("missing")
            ))
        })?;
        if !c.column_type.can_be_key() {
            return Err(TethysError::Analysis(format!(
                "{} type should not be used in key column[{}].",
                c.column_type.desc(),
                c.name
            )));
        }
    }
    Ok((keys_type, key_columns))
}

/// BITMAP_EMPTY only for BITMAP columns, and no default for HLL ones.
fn check_defaults(ct: &CreateTable) -> Result<()> {
    for c in &ct.columns {
        let empty = c.default.as_deref() == Some("BITMAP_EMPTY");
        if c.default.is_some() && (c.column_type == ColumnType::Bitmap) != empty {
            return Err(TethysError::Analysis(format!(
                "Invalid default value for '{}': {}",
                c.name,
                if empty {
                    "only a BITMAP column can default to BITMAP_EMPTY"
                } else {
                    "a BITMAP column can only default to BITMAP_EMPTY"
                }
            )));
        }
        if c.default.is_some() && c.column_type == ColumnType::Hll {
            return Err(TethysError::Analysis(format!(
                "Invalid default value for '{}': an HLL column has no default",
                c.name
            )));
        }
    }
    Ok(())
}

/// The columns, each with its aggregation (none for keys).
fn columns_of(ct: &CreateTable, keys_type: KeysType, num_keys: usize) -> Result<Vec<Column>> {
    let aggregations = check_aggregations(ct, keys_type, num_keys)?;
    Ok(ct
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| Column {
            name: c.name.clone(),
            column_type: c.column_type,
            nullable: c.nullable.unwrap_or(true),
            is_key: i < num_keys,
            default: c.default.clone(),
            comment: c.comment.clone(),
            aggregation: if i < num_keys { None } else { aggregations[i] },
        })
        .collect())
}

/// What PROPERTIES set: compression, bloom filter columns, merge-on-write,
/// auto compaction, and the properties SHOW CREATE TABLE prints.
struct TableOptions {
    /// Replicas of each tablet.
    replicas: usize,
    compression: String,
    bloom_filter_columns: Vec<String>,
    merge_on_write: bool,
    disable_auto_compaction: bool,
    properties: BTreeMap<String, String>,
}

fn options_of(
    ct: &CreateTable,
    alive_backends: usize,
    default_replicas: usize,
    keys_type: KeysType,
    columns: &[Column],
) -> Result<TableOptions> {
    let mut compression = "lz4".to_string();
    let mut bloom_filter_columns = vec![];
    // Doris 2.1: UNIQUE tables merge on write unless told otherwise.
    let mut merge_on_write = keys_type == KeysType::Unique;
    let mut disable_auto_compaction = false;
    let mut properties = BTreeMap::new();
    let mut replicas = default_replicas;
    for (k, v) in &ct.properties {
        let lk = k.to_ascii_lowercase();
        match lk.as_str() {
            "replication_num" | "replication_allocation" => {
                replicas = replicas_of(&lk, v)?;
            }
            "compression" => {
                compression = match v.to_ascii_lowercase().as_str() {
                    "zstd" => "zstd".into(),
                    "lz4" | "lz4f" | "default_compression" => "lz4".into(),
                    other => {
                        return Err(TethysError::Analysis(format!(
                            "unknown compression type: {other}"
                        )));
                    }
                };
                properties.insert(lk, v.to_ascii_uppercase());
            }
            "bloom_filter_columns" => {
                bloom_filter_columns = bloom_columns(columns, v)?;
                properties.insert(lk, v.clone());
            }
            "enable_unique_key_merge_on_write" => {
                if keys_type != KeysType::Unique {
                    return Err(TethysError::Analysis(
                        "enable_unique_key_merge_on_write property only support unique key table"
                            .into(),
                    ));
                }
                merge_on_write = bool_property(&lk, v)?;
            }
            "disable_auto_compaction" => {
                disable_auto_compaction = bool_property(&lk, v)?;
                properties.insert(lk, disable_auto_compaction.to_string());
            }
            colocation::COLOCATE_WITH => {
                let group = v.trim();
                if group.is_empty() {
                    return Err(TethysError::Analysis(
                        "colocate_with must not be empty".into(),
                    ));
                }
                properties.insert(lk, group.to_string());
            }
            "group_commit_interval_ms" | "group_commit_data_bytes" => {
                properties.insert(lk.clone(), check_group_commit_property(&lk, v)?);
            }
            _ => {
                check_other_property(&lk, v)?;
                properties.insert(lk, v.clone());
            }
        }
    }
    if replicas == 0 || replicas > alive_backends {
        return Err(not_enough_backends(replicas, alive_backends));
    }
    properties.insert(
        "replication_allocation".into(),
        format!("tag.location.default: {replicas}"),
    );
    if keys_type == KeysType::Unique {
        properties.insert(
            "enable_unique_key_merge_on_write".into(),
            merge_on_write.to_string(),
        );
    }
    Ok(TableOptions {
        replicas,
        compression,
        bloom_filter_columns,
        merge_on_write,
        disable_auto_compaction,
        properties,
    })
}

/// The replicas `replication_num = N` or `replication_allocation =
/// "tag.location.default: N"` ask for (one tag: Tethys has no resource tags).
pub(crate) fn replicas_of(name: &str, v: &str) -> Result<usize> {
    let n = match name {
        "replication_allocation" => v
            .trim()
            .strip_prefix("tag.location.default")
            .and_then(|r| r.trim_start().strip_prefix(':'))
            .ok_or_else(|| {
                TethysError::NotSupported(format!(
                    "replication_allocation \"{v}\": only tag.location.default is supported"
                ))
            })?,
        _ => v,
    };
    n.trim()
        .parse()
        .map_err(|_| TethysError::Analysis(format!("Invalid {name}: {v}")))
}

/// Doris table properties whose Doris default is what Tethys does (one
/// storage medium, its own segment format, schema changes without
/// rewriting, size-based compaction, no row store): taken with that value
/// (as SHOW CREATE TABLE output pasted back has them), refused with another.
const AT_DEFAULT_ONLY: &[(&str, &str)] = &[
    ("min_load_replica_num", "-1"),
    ("storage_medium", "hdd"),
    ("storage_format", "v2"),
    ("inverted_index_storage_format", "v1"),
    ("light_schema_change", "true"),
    ("store_row_column", "false"),
    ("bloom_filter_fpp", "0.05"),
    ("enable_single_replica_compaction", "false"),
    ("compaction_policy", "size_based"),
    ("is_being_synced", "false"),
    ("skip_write_index_on_load", "false"),
    ("in_memory", "false"),
];

/// Doris table properties Tethys does not implement yet.
const NOT_YET: &[&str] = &[
    "function_column.sequence_col",
    "function_column.sequence_type",
    "storage_cooldown_time",
    "storage_policy",
    "estimate_partition_size",
    "enable_duplicate_without_keys_by_default",
    "row_store_columns",
    "time_series_compaction_goal_size_mbytes",
    "time_series_compaction_file_count_threshold",
    "time_series_compaction_time_threshold_seconds",
];

/// A property with no case of its own in [`options_of`]: taken at its
/// Doris default, refused otherwise (never kept and ignored).
fn check_other_property(name: &str, v: &str) -> Result<()> {
    if let Some((_, default)) = AT_DEFAULT_ONLY.iter().find(|(n, _)| *n == name) {
        return if v.trim().eq_ignore_ascii_case(default) {
            Ok(())
        } else {
            Err(TethysError::NotSupported(format!(
                "table property \"{name}\" = \"{v}\" is not supported yet (only \"{default}\" is)"
            )))
        };
    }
    if NOT_YET.contains(&name) || name.starts_with("dynamic_partition.") {
        return Err(TethysError::NotSupported(format!(
            "table property \"{name}\" is not supported yet"
        )));
    }
    Err(TethysError::Analysis(format!(
        "Unknown properties: {{{name}={v}}}"
    )))
}

/// DISTRIBUTED BY: hash columns (keys, where the model needs it) or random,
/// and whether the bucket count was left to Tethys.
fn distribution_of(ct: &CreateTable, schema: &TableSchema) -> Result<(Distribution, bool)> {
    let keys_type = schema.keys_type;
    Ok(match &ct.distribution {
        Some(d) if d.hash_columns.is_empty() && random_forbidden(schema) => {
            return Err(TethysError::Analysis(format!(
                "Should not be distributed by random when keys type is {}",
                if keys_type == KeysType::Unique {
                    "unique"
                } else {
                    "aggregate with REPLACE value columns"
                }
            )));
        }
        Some(d) if d.hash_columns.is_empty() => (
            Distribution::Random {
                buckets: d.buckets.unwrap_or(DEFAULT_BUCKETS),
            },
            d.buckets.is_none(),
        ),
        Some(d) => {
            for c in &d.hash_columns {
                let i = schema.index_of(c).ok_or_else(|| {
                    TethysError::Analysis(format!("Distribution column[{c}] is not found"))
                })?;
                if keys_type != KeysType::Duplicate && !schema.columns[i].is_key {
                    return Err(TethysError::Analysis(format!(
                        "Distribution column[{c}] is not key column"
                    )));
                }
                if !schema.columns[i].column_type.can_be_key() {
                    return Err(TethysError::Analysis(format!(
                        "Distribution column[{c}] is not allowed: {} can not be a distribution column",
                        schema.columns[i].column_type.desc()
                    )));
                }
            }
            (
                Distribution::Hash {
                    columns: d
                        .hash_columns
                        .iter()
                        .map(|c| schema.columns[schema.index_of(c).unwrap_or(0)].name.clone())
                        .collect(),
                    buckets: d.buckets.unwrap_or(DEFAULT_BUCKETS),
                },
                d.buckets.is_none(),
            )
        }
        None if random_forbidden(schema) => {
            return Err(TethysError::Analysis(format!(
                "Create {} table should contain distribution desc",
                keys_type.sql().replace(" KEY", "").to_lowercase()
            )));
        }
        None => (
            Distribution::Random {
                buckets: DEFAULT_BUCKETS,
            },
            true,
        ),
    })
}

/// PARTITION BY RANGE: the partition column and the partitions (one
/// unnamed partition for an unpartitioned table).
fn partitions_of(
    ct: &CreateTable,
    place: &mut Placement,
    ids: &mut IdGen,
    schema: &TableSchema,
    distribution: &Distribution,
    replicas: usize,
) -> Result<(Option<String>, Vec<Partition>)> {
    let mut partitions = vec![];
    let partition_column = match &ct.partition_column {
        Some(cols) => {
            let col = &cols[0];
            if cols.len() > 1 {
                return Err(TethysError::NotSupported(
                    "multi-column range partitions are not supported yet".into(),
                ));
            }
            let i = schema.index_of(col).ok_or_else(|| {
                TethysError::Analysis(format!(
                    "Partition column[{col}] does not exist in column list."
                ))
            })?;
            if !schema.columns[i].is_key {
                return Err(TethysError::Analysis(format!(
                    "The partition column could not be aggregated column, and must be a key column: {col}"
                )));
            }
            let ty = schema.columns[i].column_type;
            if ct.partitions.is_empty() {
                return Err(TethysError::Analysis(
                    "a RANGE partitioned table needs at least one partition".into(),
                ));
            }
            let mut prev = Bound::Min;
            for def in &ct.partitions {
                let range = parse_range(def, &ty, prev)?;
                check_overlap(&partitions, &def.name, range, &ty)?;
                prev = range.1;
                partitions.push(new_partition(
                    place,
                    ids,
                    &def.name,
                    Some(range),
                    distribution.buckets(),
                    replicas,
                )?);
            }
            partitions.sort_by_key(|p| p.range.map(|r| r.0));
            Some(schema.columns[i].name.clone())
        }
        None => {
            partitions.push(new_partition(
                place,
                ids,
                &ct.name,
                None,
                distribution.buckets(),
                replicas,
            )?);
            None
        }
    };
    Ok((partition_column, partitions))
}

/// CREATE TABLE.
pub async fn create_table(
    fe: &Arc<Frontend>,
    session_db: &Option<String>,
    ct: &CreateTable,
) -> Result<()> {
    let db = resolve_db(session_db, &ct.db)?;
    let alive = fe.backends.alive_ids();
    let default_replicas = fe
        .default_replication_num
        .load(std::sync::atomic::Ordering::Relaxed);
    let created = fe.catalog.mutate(|state, ids| {
        let d = state
            .database(&db)
            .ok_or_else(|| TethysError::UnknownDatabase(db.clone()))?;
        if d.table(&ct.name).is_some() {
            if ct.if_not_exists {
                return Ok((EditOp::RemoveTxns { ids: vec![] }, None));
            }
            return Err(TethysError::TableExists(ct.name.clone()));
        }
        let t = build_table(
            ct,
            (state, d),
            Placement::new(state, &alive),
            ids,
            default_replicas,
        )?;
        Ok((
            EditOp::CreateTable {
                db: d.name.clone(),
                table: t.clone(),
            },
            Some((d.name.clone(), t)),
        ))
    })?;
    if let Some((db, t)) = created
        && let Err(e) = create_tablets(fe, &t, &t.partitions).await
    {
        let _ = fe.catalog.mutate(|_, _| {
            Ok((
                EditOp::DropTable {
                    db: db.clone(),
                    table: t.name.clone(),
                },
                (),
            ))
        });
        drop_tablets(fe, &t.partitions).await;
        return Err(e);
    }
    Ok(())
}

/// The columns named by the `bloom_filter_columns` property (comma
/// separated), checked as Doris checks them: each must exist, at most once,
/// and not be TINYINT, FLOAT, DOUBLE, BOOLEAN or an object type.
fn bloom_columns(columns: &[Column], value: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = vec![];
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let c = columns
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                TethysError::Analysis(format!(
                    "Bloom filter column does not exist in table. invalid column: {name}"
                ))
            })?;
        let t = c.column_type.sql().to_ascii_uppercase();
        if ["TINYINT", "FLOAT", "DOUBLE", "BOOLEAN", "BITMAP", "HLL"]
            .iter()
            .any(|b| t.starts_with(b))
        {
            return Err(TethysError::Analysis(format!(
                "{t} is not supported in bloom filter index. invalid column: {}",
                c.name
            )));
        }
        if out.iter().any(|o| o.eq_ignore_ascii_case(&c.name)) {
            return Err(TethysError::Analysis(format!(
                "Duplicate bloom filter column: {}",
                c.name
            )));
        }
        out.push(c.name.clone());
    }
    Ok(out)
}

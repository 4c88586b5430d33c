//! DDL: databases, tables and partitions. The catalog change is logged first;
//! tablets are then created on (or dropped from) backends. Tablet creation is
//! idempotent and is redone at FE start for every tablet the catalog lists,
//! so a crash between the two steps heals itself.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use tethys_common::schema::{AggregationType, Column, TableSchema};
use tethys_common::types::ColumnType;
use tethys_common::{Result, TethysError};
use tethys_proto::{CreateTabletsRequest, DropTabletsRequest, TabletSpec};

use crate::catalog::*;
use crate::frontend::Frontend;
use crate::sql::statement::{CreateTable, PartitionDef, PartitionValues};

/// Buckets used for `BUCKETS AUTO` or no DISTRIBUTED clause (Doris' default seed).
pub const DEFAULT_BUCKETS: u32 = 10;

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Picks the backend for a new tablet (round-robin over registered backends).
fn pick_backend(state: &CatalogState, seq: i64) -> Result<i64> {
    let ids: Vec<i64> = state.backends.keys().copied().collect();
    if ids.is_empty() {
        return Err(TethysError::Analysis("no backend is registered".into()));
    }
    Ok(ids[(seq as usize) % ids.len()])
}

fn new_partition(
    state: &CatalogState,
    ids: &mut IdGen,
    name: &str,
    range: Option<(Bound, Bound)>,
    buckets: u32,
) -> Result<Partition> {
    let id = ids.alloc();
    let mut tablets = vec![];
    for _ in 0..buckets {
        let tid = ids.alloc();
        tablets.push(TabletRef {
            id: tid,
            backend_id: pick_backend(state, tid)?,
        });
    }
    Ok(Partition {
        id,
        name: name.to_string(),
        range,
        buckets,
        tablets,
        visible_version: tethys_common::config::INITIAL_VERSION,
        visible_version_time: now_ms(),
        committed_version: tethys_common::config::INITIAL_VERSION,
    })
}

/// Creates the tablets of `partitions` on their backends.
pub async fn create_tablets(
    fe: &Arc<Frontend>,
    table: &Table,
    partitions: &[Partition],
) -> Result<()> {
    let backends = fe.catalog.read().backends.clone();
    let mut per_be: BTreeMap<i64, Vec<TabletSpec>> = BTreeMap::new();
    for p in partitions {
        for t in &p.tablets {
            per_be.entry(t.backend_id).or_default().push(TabletSpec {
                tablet_id: t.id,
                table_id: table.id,
                partition_id: p.id,
                schema: Some(table.schema.to_pb()),
                initial_version: tethys_common::config::INITIAL_VERSION,
            });
        }
    }
    for (be, tablets) in per_be {
        let info = backends
            .get(&be)
            .ok_or_else(|| TethysError::Internal(format!("backend {be} is not registered")))?;
        let c = fe.pool.get(info)?;
        c.create_tablets(CreateTabletsRequest { tablets }).await?;
    }
    Ok(())
}

/// Drops tablets from their backends (best effort: a backend that misses it
/// keeps an orphan tablet no query reads).
pub async fn drop_tablets(fe: &Arc<Frontend>, partitions: &[Partition]) {
    let backends = fe.catalog.read().backends.clone();
    let mut per_be: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for p in partitions {
        for t in &p.tablets {
            per_be.entry(t.backend_id).or_default().push(t.id);
        }
    }
    for (be, ids) in per_be {
        if let Some(info) = backends.get(&be)
            && let Ok(c) = fe.pool.get(info)
        {
            let _ = c.drop_tablets(DropTabletsRequest { tablet_ids: ids }).await;
        }
    }
}

/// Re-creates every tablet the catalog lists (idempotent on backends).
pub async fn ensure_all_tablets(fe: &Arc<Frontend>) -> Result<()> {
    let tables: Vec<Table> = fe
        .catalog
        .read()
        .databases
        .values()
        .flat_map(|d| d.tables.values().cloned())
        .collect();
    for t in tables {
        create_tablets(fe, &t, &t.partitions).await?;
    }
    Ok(())
}

pub fn resolve_db(session_db: &Option<String>, db: &Option<String>) -> Result<String> {
    db.clone()
        .or_else(|| session_db.clone())
        .ok_or(TethysError::NoDatabaseSelected)
}

/// The database and table a statement names (`t` or `db.t`).
pub fn table_name_of(
    name: &datafusion::sql::sqlparser::ast::ObjectName,
    session_db: &Option<String>,
) -> Result<(String, String)> {
    let parts: Vec<String> = name
        .0
        .iter()
        .filter_map(|p| p.as_ident().map(|i| i.value.clone()))
        .collect();
    match parts.as_slice() {
        [t] => Ok((resolve_db(session_db, &None)?, t.clone())),
        [d, t] => Ok((d.clone(), t.clone())),
        _ => Err(TethysError::Syntax(format!("bad table name {name}"))),
    }
}

/// CREATE DATABASE.
pub fn create_database(fe: &Arc<Frontend>, name: &str, if_not_exists: bool) -> Result<()> {
    if name.eq_ignore_ascii_case("information_schema") {
        return Err(TethysError::DatabaseExists(name.into()));
    }
    fe.catalog.mutate(|state, ids| {
        if state.database(name).is_some() {
            if if_not_exists {
                return Ok((EditOp::RemoveTxns { ids: vec![] }, ()));
            }
            return Err(TethysError::DatabaseExists(name.into()));
        }
        Ok((
            EditOp::CreateDatabase {
                db: Database {
                    id: ids.alloc(),
                    name: name.to_string(),
                    tables: BTreeMap::new(),
                    create_time: now_ms(),
                },
            },
            (),
        ))
    })
}

/// DROP DATABASE.
pub async fn drop_database(fe: &Arc<Frontend>, name: &str, if_exists: bool) -> Result<()> {
    let parts = fe.catalog.mutate(|state, _| {
        let Some(db) = state.database(name) else {
            if if_exists {
                return Ok((EditOp::RemoveTxns { ids: vec![] }, vec![]));
            }
            return Err(TethysError::DatabaseNotExists(name.into()));
        };
        let parts: Vec<Partition> = db
            .tables
            .values()
            .flat_map(|t| t.partitions.clone())
            .collect();
        Ok((
            EditOp::DropDatabase {
                name: db.name.clone(),
            },
            parts,
        ))
    })?;
    drop_tablets(fe, &parts).await;
    Ok(())
}

fn parse_range(
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

fn check_overlap(
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
fn build_table(ct: &CreateTable, state: &CatalogState, ids: &mut IdGen) -> Result<Table> {
    let (keys_type, key_columns) = keys_of(ct)?;
    check_defaults(ct)?;
    let columns = columns_of(ct, keys_type, key_columns.len())?;
    let options = options_of(ct, state, keys_type, &columns)?;
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
    let table_id = ids.alloc();
    let (partition_column, partitions) = partitions_of(ct, state, ids, &schema, &distribution)?;
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
    compression: String,
    bloom_filter_columns: Vec<String>,
    merge_on_write: bool,
    disable_auto_compaction: bool,
    properties: BTreeMap<String, String>,
}

fn options_of(
    ct: &CreateTable,
    state: &CatalogState,
    keys_type: KeysType,
    columns: &[Column],
) -> Result<TableOptions> {
    let mut compression = "lz4".to_string();
    let mut bloom_filter_columns = vec![];
    // Doris 2.1: UNIQUE tables merge on write unless told otherwise.
    let mut merge_on_write = keys_type == KeysType::Unique;
    let mut disable_auto_compaction = false;
    let mut properties = BTreeMap::new();
    for (k, v) in &ct.properties {
        let lk = k.to_ascii_lowercase();
        match lk.as_str() {
            "replication_num" => {
                let n: usize = v
                    .parse()
                    .map_err(|_| TethysError::Analysis(format!("Invalid replication_num: {v}")))?;
                if n == 0 || n > state.backends.len() {
                    return Err(TethysError::Analysis(format!(
                        "Failed to find enough backend, please check the replication num,replication tag and storage medium. \
                         Create {n} replicas, but only {} backend(s) are available",
                        state.backends.len()
                    )));
                }
                properties.insert(
                    "replication_allocation".into(),
                    format!("tag.location.default: {n}"),
                );
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
            "group_commit_interval_ms" | "group_commit_data_bytes" => {
                properties.insert(lk.clone(), check_group_commit_property(&lk, v)?);
            }
            _ => {
                properties.insert(lk, v.clone());
            }
        }
    }
    properties
        .entry("replication_allocation".into())
        .or_insert_with(|| "tag.location.default: 1".into());
    if keys_type == KeysType::Unique {
        properties.insert(
            "enable_unique_key_merge_on_write".into(),
            merge_on_write.to_string(),
        );
    }
    Ok(TableOptions {
        compression,
        bloom_filter_columns,
        merge_on_write,
        disable_auto_compaction,
        properties,
    })
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
    state: &CatalogState,
    ids: &mut IdGen,
    schema: &TableSchema,
    distribution: &Distribution,
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
                    state,
                    ids,
                    &def.name,
                    Some(range),
                    distribution.buckets(),
                )?);
            }
            partitions.sort_by_key(|p| p.range.map(|r| r.0));
            Some(schema.columns[i].name.clone())
        }
        None => {
            partitions.push(new_partition(
                state,
                ids,
                &ct.name,
                None,
                distribution.buckets(),
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
        let t = build_table(ct, state, ids)?;
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
    let (table, old, new) = fe.catalog.mutate(|state, ids| {
        let (d, t) = state.find_table(&db, name)?;
        for p in only {
            t.existing_partition(p)?;
        }
        let mut parts = vec![];
        let mut old = vec![];
        let mut new = vec![];
        for p in &t.partitions {
            if only.is_empty() || only.iter().any(|o| o.eq_ignore_ascii_case(&p.name)) {
                let np = new_partition(state, ids, &p.name, p.range, p.buckets)?;
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
fn bool_property(key: &str, value: &str) -> Result<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(TethysError::Analysis(format!(
            "Invalid {key}: '{value}', it must be true or false"
        ))),
    }
}

/// Checks a `group_commit_*` table property: a positive integer.
fn check_group_commit_property(key: &str, value: &str) -> Result<String> {
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
        let p = new_partition(
            state,
            ids,
            &def.name,
            Some(range),
            def.buckets.unwrap_or(t.distribution.buckets()),
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

/// SHOW CREATE TABLE text, in a form that re-parses to the same table.
pub fn show_create_table(t: &Table) -> String {
    let mut s = format!("CREATE TABLE `{}` (\n", t.name);
    let cols: Vec<String> = t
        .schema
        .columns
        .iter()
        .map(|c| {
            let mut l = format!("  `{}` {}", c.name, c.column_type.sql());
            if t.schema.keys_type == KeysType::Aggregate
                && let Some(a) = c.aggregation
            {
                l.push(' ');
                l.push_str(a.sql());
            }
            l.push_str(if c.nullable { " NULL" } else { " NOT NULL" });
            if let Some(d) = &c.default {
                if d == "CURRENT_TIMESTAMP" || d == "CURRENT_DATE" || d == "BITMAP_EMPTY" {
                    l.push_str(&format!(" DEFAULT {d}"));
                } else {
                    l.push_str(&format!(" DEFAULT \"{}\"", d.replace('"', "\\\"")));
                }
            }
            if !c.comment.is_empty() {
                l.push_str(&format!(" COMMENT '{}'", c.comment.replace('\'', "\\'")));
            }
            l
        })
        .collect();
    s.push_str(&cols.join(",\n"));
    s.push_str("\n) ENGINE=OLAP\n");
    let keys: Vec<String> = t.schema.columns[..t.schema.num_key_columns]
        .iter()
        .map(|c| format!("`{}`", c.name))
        .collect();
    s.push_str(&format!(
        "{}({})\n",
        t.schema.keys_type.sql(),
        keys.join(", ")
    ));
    s.push_str(&format!(
        "COMMENT '{}'\n",
        if t.comment.is_empty() {
            "OLAP".into()
        } else {
            t.comment.replace('\'', "\\'")
        }
    ));
    if let (Some(col), Some(ty)) = (&t.partition_column, t.partition_column_type()) {
        s.push_str(&format!("PARTITION BY RANGE(`{col}`)\n("));
        let parts: Vec<String> = t
            .partitions
            .iter()
            .map(|p| match p.range {
                Some((Bound::Min, hi)) => match hi {
                    Bound::Max => format!("PARTITION {} VALUES LESS THAN (MAXVALUE)", p.name),
                    _ => format!(
                        "PARTITION {} VALUES LESS THAN (\"{}\")",
                        p.name,
                        hi.display(&ty)
                    ),
                },
                Some((lo, Bound::Max)) => format!(
                    "PARTITION {} VALUES [(\"{}\"), (MAXVALUE))",
                    p.name,
                    lo.display(&ty)
                ),
                Some((lo, hi)) => format!(
                    "PARTITION {} VALUES [(\"{}\"), (\"{}\"))",
                    p.name,
                    lo.display(&ty),
                    hi.display(&ty)
                ),
                None => String::new(),
            })
            .collect();
        s.push_str(&parts.join(",\n"));
        s.push_str(")\n");
    }
    let buckets = if t.auto_buckets {
        "AUTO".to_string()
    } else {
        t.distribution.buckets().to_string()
    };
    match &t.distribution {
        Distribution::Hash { columns, .. } => {
            let c: Vec<String> = columns.iter().map(|c| format!("`{c}`")).collect();
            s.push_str(&format!(
                "DISTRIBUTED BY HASH({}) BUCKETS {buckets}\n",
                c.join(", ")
            ));
        }
        Distribution::Random { .. } => {
            s.push_str(&format!("DISTRIBUTED BY RANDOM BUCKETS {buckets}\n"))
        }
    }
    s.push_str("PROPERTIES (\n");
    // Doris always shows the group commit thresholds, last.
    let gc = |k: &str, d: i64| {
        (
            k.to_string(),
            t.properties
                .get(k)
                .cloned()
                .unwrap_or_else(|| d.to_string()),
        )
    };
    let props: Vec<String> = t
        .properties
        .iter()
        .filter(|(k, _)| !k.starts_with("group_commit_"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .chain([
            gc(
                "group_commit_interval_ms",
                tethys_common::config::GROUP_COMMIT_INTERVAL_MS,
            ),
            gc(
                "group_commit_data_bytes",
                tethys_common::config::GROUP_COMMIT_DATA_BYTES,
            ),
        ])
        .map(|(k, v)| format!("\"{k}\" = \"{v}\""))
        .collect();
    s.push_str(&props.join(",\n"));
    s.push_str("\n);");
    s
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

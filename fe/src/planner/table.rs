//! `OlapTable`: a Tethys table as a DataFusion `TableProvider`.
//!
//! `scan` prunes partitions (range of the partition column against the
//! filters) and buckets (equality on every hash column), then builds the
//! backend fragment `Projection(Filter(OlapScan))` for the surviving tablets
//! at their partitions' visible versions. `insert_into` returns a sink that
//! loads rows in one transaction.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, UInt64Array};
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, DFSchema, ScalarValue};
use datafusion::datasource::TableType;
use datafusion::datasource::sink::DataSinkExec;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{BinaryExpr, Expr, Operator, TableProviderFilterPushDown};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use tethys_common::TethysError;
use tethys_common::plan::OlapScanExec;
use tethys_common::types::ColumnType;
use tethys_proto::{OlapScanNodePb, TabletVersion};

use super::StatementCtx;
use super::remote::{BeFragmentExec, FragmentInfo};
use super::sink::OlapSink;
use crate::catalog::{Bound, Distribution, Partition, Table};
use crate::frontend::Frontend;
use tethys_common::routing::bucket_hashes;

/// A table snapshot as DataFusion sees it.
#[derive(Debug)]
pub struct OlapTable {
    fe: Arc<Frontend>,
    db: String,
    table: Table,
    schema: SchemaRef,
    defaults: HashMap<String, Expr>,
    /// Rows per partition id, where the backends told (optimizer estimates).
    rows: HashMap<i64, u64>,
    stmt: Arc<StatementCtx>,
}

impl OlapTable {
    pub fn new(
        fe: Arc<Frontend>,
        db: String,
        table: Table,
        rows: HashMap<i64, u64>,
        stmt: Arc<StatementCtx>,
    ) -> DfResult<Self> {
        let schema = table.schema.arrow_schema();
        let mut defaults = HashMap::new();
        for c in &table.schema.columns {
            if let Some(d) = &c.default {
                let e = match d.as_str() {
                    "CURRENT_TIMESTAMP" => datafusion::functions::expr_fn::now(),
                    "CURRENT_DATE" => datafusion::functions::expr_fn::current_date(),
                    "BITMAP_EMPTY" => Expr::Literal(
                        ScalarValue::Binary(Some(
                            tethys_common::functions::object::EMPTY_OBJECT.to_vec(),
                        )),
                        None,
                    ),
                    v => Expr::Literal(ScalarValue::Utf8(Some(v.to_string())), None),
                };
                defaults.insert(
                    c.name.to_lowercase(),
                    datafusion::logical_expr::cast(e, c.column_type.arrow_type()),
                );
            }
        }
        Ok(OlapTable {
            fe,
            db,
            table,
            schema,
            defaults,
            rows,
            stmt,
        })
    }

    /// What EXPLAIN and the optimizer learn of a scan: the table, the
    /// partitions and tablets it reads of how many, its estimated rows, its
    /// predicates as SQL, and how the table is distributed.
    fn fragment_info(
        &self,
        parts: &[&crate::catalog::Partition],
        selected_tablets: usize,
        rows: Option<u64>,
        filters: &[Expr],
    ) -> FragmentInfo {
        FragmentInfo {
            table: format!("{}.{}", self.db, self.table.name),
            table_name: self.table.name.clone(),
            partitions: parts.iter().map(|p| p.name.clone()).collect(),
            total_partitions: self.table.partitions.len(),
            tablets: selected_tablets,
            total_tablets: parts.iter().map(|p| p.tablets.len()).sum(),
            rows,
            predicates: filters
                .iter()
                .map(|f| {
                    datafusion::sql::unparser::Unparser::new(
                        &datafusion::sql::unparser::dialect::MySqlDialect {},
                    )
                    .expr_to_sql(f)
                    .map(|e| e.to_string())
                    .unwrap_or_else(|_| f.to_string())
                })
                .collect(),
            distribution: match &self.table.distribution {
                Distribution::Hash { columns, .. } => {
                    format!("HASH_PARTITIONED: {}", columns.join(", "))
                }
                Distribution::Random { .. } => "RANDOM".into(),
            },
            column_stats: Arc::new(self.table.column_stats.clone()),
            bucket_columns: match &self.table.distribution {
                Distribution::Hash { columns, .. } => columns.clone(),
                Distribution::Random { .. } => vec![],
            },
            colocate_group: None,
            bucket_num: match (&self.table.distribution, parts.first()) {
                (Distribution::Hash { .. }, Some(first))
                    if parts.iter().all(|p| p.tablets.len() == first.tablets.len()) =>
                {
                    Some(first.tablets.len() as u32)
                }
                _ => None,
            },
            colocated: match &self.table.distribution {
                Distribution::Hash { columns, .. } => {
                    let mut cols = columns.clone();
                    if parts.len() > 1
                        && let Some(c) = &self.table.partition_column
                    {
                        cols.push(c.clone());
                    }
                    Some(cols)
                }
                Distribution::Random { .. } => None,
            },
        }
    }
}

/// Range-partition bounds as zone maps, for `PruningPredicate`.
struct PartitionStats<'a> {
    column: String,
    ty: ColumnType,
    arrow_type: arrow::datatypes::DataType,
    parts: &'a [Partition],
}

impl PartitionStats<'_> {
    fn bound(&self, b: Bound, is_max: bool) -> ScalarValue {
        let v = match b {
            Bound::Value(v) if is_max => Some(v - 1),
            Bound::Value(v) => Some(v),
            _ => None,
        };
        let null = ScalarValue::try_from(&self.arrow_type).unwrap_or(ScalarValue::Null);
        let Some(v) = v else { return null };
        match self.ty {
            ColumnType::TinyInt => ScalarValue::Int8(Some(v as i8)),
            ColumnType::SmallInt => ScalarValue::Int16(Some(v as i16)),
            ColumnType::Int => ScalarValue::Int32(Some(v as i32)),
            ColumnType::BigInt => ScalarValue::Int64(Some(v as i64)),
            ColumnType::LargeInt => ScalarValue::Decimal128(Some(v), 38, 0),
            ColumnType::Date => ScalarValue::Date32(Some(v as i32)),
            ColumnType::DateTime { .. } => ScalarValue::TimestampMicrosecond(Some(v as i64), None),
            _ => null,
        }
    }

    fn bounds(&self, column: &Column, max: bool) -> Option<ArrayRef> {
        if !column.name().eq_ignore_ascii_case(&self.column) {
            return None;
        }
        let vals = self.parts.iter().map(|p| match p.range {
            Some((lo, hi)) => self.bound(if max { hi } else { lo }, max),
            None => self.bound(Bound::Min, max),
        });
        ScalarValue::iter_to_array(vals).ok()
    }
}

impl PruningStatistics for PartitionStats<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bounds(column, false)
    }
    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bounds(column, true)
    }
    fn num_containers(&self) -> usize {
        self.parts.len()
    }
    fn null_counts(&self, _column: &Column) -> Option<ArrayRef> {
        None
    }
    fn row_counts(&self) -> Option<ArrayRef> {
        None::<UInt64Array>.map(|a| Arc::new(a) as ArrayRef)
    }
    fn contained(&self, _column: &Column, _values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}

/// Partitions of `table` that can hold rows matching `predicate` (built
/// against the table's Arrow `schema`).
pub fn prune_partitions<'a>(
    table: &'a Table,
    schema: &SchemaRef,
    predicate: Option<&Arc<dyn PhysicalExpr>>,
) -> DfResult<Vec<&'a Partition>> {
    let parts = &table.partitions;
    let (Some(col), Some(ty), Some(pred)) = (
        &table.partition_column,
        table.partition_column_type(),
        predicate,
    ) else {
        return Ok(parts.iter().collect());
    };
    let Some(pp) = PruningPredicateBuilder::new()
        .with_file_schema(schema.clone())
        .build(pred.clone())
    else {
        return Ok(parts.iter().collect());
    };
    let stats = PartitionStats {
        column: col.to_lowercase(),
        ty,
        arrow_type: ty.arrow_type(),
        parts,
    };
    let keep = pp.prune(&stats)?;
    Ok(parts
        .iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(p, _)| p)
        .collect())
}

/// `col = literal` conjuncts, by lower-cased column name.
fn equalities(filters: &[Expr]) -> HashMap<String, ScalarValue> {
    let mut out = HashMap::new();
    for f in filters {
        for e in split_conjunction(f) {
            if let Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::Eq,
                right,
            }) = e
            {
                let pair = match (left.as_ref(), right.as_ref()) {
                    (Expr::Column(c), Expr::Literal(v, _))
                    | (Expr::Literal(v, _), Expr::Column(c)) => {
                        Some((c.name.to_lowercase(), v.clone()))
                    }
                    (Expr::Column(c), Expr::Cast(cast)) | (Expr::Cast(cast), Expr::Column(c)) => {
                        match cast.expr.as_ref() {
                            Expr::Literal(v, _) => v
                                .cast_to(cast.field.data_type())
                                .ok()
                                .map(|v| (c.name.to_lowercase(), v)),
                            _ => None,
                        }
                    }
                    _ => None,
                };
                if let Some((c, v)) = pair
                    && !v.is_null()
                {
                    out.insert(c, v);
                }
            }
        }
    }
    out
}

impl OlapTable {
    fn prune_partitions(
        &self,
        predicate: Option<&Arc<dyn PhysicalExpr>>,
    ) -> DfResult<Vec<&Partition>> {
        prune_partitions(&self.table, &self.schema, predicate)
    }

    /// The single bucket every matching row hashes to, if the filters pin
    /// every hash column to a value.
    fn prune_bucket(&self, filters: &[Expr]) -> Option<usize> {
        let Distribution::Hash { columns, buckets } = &self.table.distribution else {
            return None;
        };
        let eq = equalities(filters);
        let mut arrays = vec![];
        for c in columns {
            let v = eq.get(&c.to_lowercase())?;
            let idx = self.table.schema.index_of(c)?;
            let ty = self.table.schema.columns[idx].column_type.arrow_type();
            let v = v.cast_to(&ty).ok()?;
            arrays.push(v.to_array().ok()?);
        }
        let refs: Vec<&ArrayRef> = arrays.iter().collect();
        let h = bucket_hashes(&refs, 1)[0];
        Some((h % buckets) as usize)
    }
}

/// What join ordering needs to know of one scan of a table.
#[derive(Debug, Clone)]
pub struct ScanEstimate {
    /// Rows the scan is expected to return after its filters.
    pub rows: f64,
    /// Rows of the whole table.
    pub table_rows: f64,
    /// Distinct values per column, where `ANALYZE` collected them.
    pub ndv: HashMap<String, f64>,
}

impl OlapTable {
    /// The expected output of a scan with `filters` (the table's rows times
    /// the filters' `selectivity`), `None` while no backend has reported the
    /// table's rows.
    pub fn estimate_scan(&self, filters: &[Expr]) -> Option<ScanEstimate> {
        if self.rows.is_empty() {
            return None;
        }
        let table_rows = self.rows.values().sum::<u64>() as f64;
        let kept = conjunction(datafusion::logical_expr::expr_rewriter::unnormalize_cols(
            filters.iter().cloned(),
        ))
        .and_then(|e| {
            let schema = DFSchema::try_from(self.schema.as_ref().clone()).ok()?;
            datafusion::physical_expr::create_physical_expr(
                &e,
                &schema,
                &datafusion::execution::context::ExecutionProps::new(),
                &Default::default(),
            )
            .ok()
        })
        .map_or(1.0, |p| {
            super::selectivity::selectivity(&p, &self.table.column_stats)
        });
        Some(ScanEstimate {
            rows: table_rows * kept,
            table_rows,
            ndv: self
                .table
                .column_stats
                .iter()
                .map(|(c, s)| (c.to_lowercase(), s.ndv as f64))
                .collect(),
        })
    }
}

#[async_trait]
impl TableProvider for OlapTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn get_column_default(&self, column: &str) -> Option<&Expr> {
        self.defaults.get(&column.to_lowercase())
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| {
                if f.is_volatile() {
                    TableProviderFilterPushDown::Unsupported
                } else {
                    TableProviderFilterPushDown::Exact
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let full = self.schema.clone();
        let df_schema = DFSchema::try_from(full.as_ref().clone())?;
        let wanted: Vec<usize> = projection
            .cloned()
            .unwrap_or_else(|| (0..full.fields().len()).collect());
        // Columns to read: the projection plus what the filters reference.
        let mut read: Vec<usize> = wanted.clone();
        for f in filters {
            for c in f.column_refs() {
                if let Ok(i) = full.index_of(&c.name)
                    && !read.contains(&i)
                {
                    read.push(i);
                }
            }
        }
        let full_pred = match conjunction(filters.to_vec()) {
            Some(e) => Some(state.create_physical_expr(e, &df_schema)?),
            None => None,
        };
        let parts = self.prune_partitions(full_pred.as_ref())?;
        let bucket = self.prune_bucket(filters);
        let alive: std::collections::BTreeSet<i64> =
            self.fe.backends.alive_ids().into_iter().collect();
        let state_cat = self.fe.catalog.read();
        // A table of a stable colocation group reads each bucket on one
        // backend, the same for every table of the group.
        let group = state_cat
            .database(&self.db)
            .and_then(|d| state_cat.group_of(d, &self.table))
            .filter(|g| g.is_stable())
            .map(|g| g.name);
        let mut by_backend: std::collections::BTreeMap<i64, Vec<TabletVersion>> =
            Default::default();
        for p in &parts {
            for (bi, t) in p.tablets.iter().enumerate() {
                if bucket.is_some_and(|b| b != bi) {
                    continue;
                }
                let backend = match group {
                    Some(_) => t.read_replica_by(p.visible_version, &alive, bi as u64)?,
                    None => t.read_replica(p.visible_version, &alive)?,
                };
                by_backend.entry(backend).or_default().push(TabletVersion {
                    tablet_id: t.id,
                    version: p.visible_version,
                    bucket: bi as u32,
                });
            }
        }
        let selected_tablets: usize = by_backend.values().map(|v| v.len()).sum();
        // Rows the fragments read before their filters: the selected
        // partitions' rows, a bucket's share when one bucket is selected.
        let rows: Option<u64> = parts
            .iter()
            .map(|p| {
                self.rows.get(&p.id).map(|r| match bucket {
                    Some(_) => r / p.tablets.len().max(1) as u64,
                    None => *r,
                })
            })
            .sum();
        let read_schema = Arc::new(full.project(&read)?);
        let read_df = DFSchema::try_from(read_schema.as_ref().clone())?;
        let read_pred = match conjunction(filters.to_vec()) {
            Some(e) => Some(state.create_physical_expr(e, &read_df)?),
            None => None,
        };
        let target = state.config().target_partitions().max(1);
        let mut fragments = vec![];
        for (backend_id, tablets) in by_backend {
            let be = state_cat
                .backends
                .get(&backend_id)
                .cloned()
                .ok_or_else(|| {
                    TethysError::Internal(format!("backend {backend_id} is not registered"))
                })?;
            let node = OlapScanNodePb {
                database: self.db.clone(),
                table: self.table.name.clone(),
                schema: Some(self.table.schema.to_pb()),
                projection: read.iter().map(|i| *i as u32).collect(),
                partitions: tablets.len().clamp(1, target) as u32,
                tablets,
                partition_names: parts.iter().map(|p| p.name.clone()).collect(),
                total_partitions: self.table.partitions.len() as u32,
                total_tablets: self.table.tablet_count() as u32,
                limit: limit.map(|l| l as u64),
                push_agg: String::new(),
                backend_id,
                remote_filters: vec![],
                by_bucket: false,
            };
            let mut plan: Arc<dyn ExecutionPlan> = Arc::new(OlapScanExec::try_new(node)?);
            if let Some(p) = &read_pred {
                plan = Arc::new(FilterExec::try_new(p.clone(), plan)?);
            }
            if read.len() != wanted.len() {
                let exprs: Vec<(Arc<dyn PhysicalExpr>, String)> = wanted
                    .iter()
                    .enumerate()
                    .map(|(i, _)| {
                        let name = full.field(wanted[i]).name().clone();
                        let e: Arc<dyn PhysicalExpr> = Arc::new(
                            datafusion::physical_expr::expressions::Column::new(&name, i),
                        );
                        (e, name)
                    })
                    .collect();
                plan = Arc::new(ProjectionExec::try_new(exprs, plan)?);
            }
            fragments.push((be, plan));
        }
        drop(state_cat);
        let out_schema = Arc::new(full.project(&wanted)?);
        let rows = rows.map(|r| limit.map_or(r, |l| r.min(l as u64)));
        let mut info = self.fragment_info(&parts, selected_tablets, rows, filters);
        info.colocate_group = group;
        Ok(Arc::new(BeFragmentExec::new(
            self.fe.backends.clone(),
            out_schema,
            fragments,
            info,
            self.stmt.clone(),
        )))
    }

    async fn insert_into(
        &self,
        _state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        if insert_op != InsertOp::Append {
            return Err(
                TethysError::NotSupported("INSERT OVERWRITE is not supported yet".into()).into(),
            );
        }
        let sink = OlapSink::new(
            self.fe.clone(),
            self.db.clone(),
            self.table.clone(),
            self.schema.clone(),
            self.stmt.clone(),
        );
        Ok(Arc::new(DataSinkExec::new(input, Arc::new(sink), None)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::{col, lit};
    use datafusion::prelude::SessionContext;
    use tethys_common::schema::{Column as TColumn, TableSchema};

    fn table(bounds: &[(&str, &str)]) -> Table {
        let ty = ColumnType::Date;
        let partitions = bounds
            .iter()
            .enumerate()
            .map(|(i, (lo, hi))| Partition {
                id: i as i64,
                name: format!("p{i}"),
                range: Some((
                    if lo.is_empty() {
                        Bound::Min
                    } else {
                        Bound::parse(lo, &ty).unwrap()
                    },
                    if hi.is_empty() {
                        Bound::Max
                    } else {
                        Bound::parse(hi, &ty).unwrap()
                    },
                )),
                buckets: 1,
                tablets: vec![],
                visible_version: 1,
                visible_version_time: 0,
                committed_version: 1,
            })
            .collect();
        Table {
            id: 1,
            name: "t".into(),
            schema: TableSchema {
                columns: vec![TColumn::new("day", ty, false, true)],
                num_key_columns: 1,
                compression: "lz4".into(),
                bloom_filter_columns: vec![],
                ..Default::default()
            },
            partition_column: Some("day".into()),
            partitions,
            distribution: Distribution::Random { buckets: 1 },
            auto_buckets: false,
            properties: Default::default(),
            comment: String::new(),
            create_time: 0,
            column_stats: Default::default(),
        }
    }

    fn names(t: &Table, filter: Expr) -> Vec<String> {
        let schema = t.schema.arrow_schema();
        let df = DFSchema::try_from(schema.as_ref().clone()).unwrap();
        let state = SessionContext::new().state();
        let pred = state.create_physical_expr(filter, &df).unwrap();
        prune_partitions(t, &schema, Some(&pred))
            .unwrap()
            .iter()
            .map(|p| p.name.clone())
            .collect()
    }

    fn day(s: &str) -> Expr {
        lit(ScalarValue::Date32(Some(
            (chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
                - chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap())
            .num_days() as i32,
        )))
    }

    #[test]
    fn ranges_are_left_closed_right_open() {
        let t = table(&[
            ("", "2026-08-01"),
            ("2026-08-01", "2026-09-01"),
            ("2026-09-01", ""),
        ]);
        assert_eq!(
            names(
                &t,
                col("day")
                    .gt_eq(day("2026-08-01"))
                    .and(col("day").lt(day("2026-09-01")))
            ),
            vec!["p1"]
        );
        assert_eq!(names(&t, col("day").eq(day("2026-08-31"))), vec!["p1"]);
        assert_eq!(names(&t, col("day").eq(day("2026-09-01"))), vec!["p2"]);
        assert_eq!(names(&t, col("day").lt(day("2026-08-01"))), vec!["p0"]);
        assert_eq!(names(&t, col("day").gt(day("2030-01-01"))), vec!["p2"]);
        // Predicates on other things keep everything.
        assert_eq!(names(&t, lit(true)).len(), 3);
    }
}

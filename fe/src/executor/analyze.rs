//! Column statistics for the optimizer: Doris' `ANALYZE TABLE`,
//! `SHOW COLUMN STATS` and `DROP STATS`.
//!
//! `ANALYZE` runs one aggregate query over the table through the normal
//! query path (the backends scan, the FE merges) that gives per column the
//! non-null count, a HyperLogLog distinct count, min, max and bytes. The
//! results are written to the catalog through the edit log, so they survive
//! a restart, and `planner::selectivity` reads them when it estimates how
//! many rows a scan predicate keeps.

use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, UInt64Type};
use datafusion::common::ScalarValue;
use tethys_common::schema::Column;
use tethys_common::types::ColumnType;
use tethys_common::{Result, TethysError};

use crate::catalog::{ColumnStats, EditOp, Table};
use crate::frontend::Frontend;
use crate::mysql::value::RowEncoder;
use crate::planner::selectivity::axis_value;
use crate::session::Session;

/// What one `ANALYZE TABLE` did.
#[derive(Debug, Clone, Copy)]
pub struct Analyzed {
    pub columns: usize,
    pub rows: u64,
}

/// The columns of `t` to analyze: `names`, or every column whose values
/// can be compared (BITMAP and HLL columns hold sketches, not values).
fn analyzable<'a>(t: &'a Table, names: &[String]) -> Result<Vec<&'a Column>> {
    if names.is_empty() {
        return Ok(t
            .schema
            .columns
            .iter()
            .filter(|c| !c.column_type.is_object())
            .collect());
    }
    names
        .iter()
        .map(|n| {
            let c = t
                .schema
                .columns
                .iter()
                .find(|c| c.name.eq_ignore_ascii_case(n))
                .ok_or_else(|| {
                    TethysError::Analysis(format!("Unknown column '{n}' in table '{}'", t.name))
                })?;
            if c.column_type.is_object() {
                return Err(TethysError::NotSupported(format!(
                    "statistics of {} column '{}'",
                    c.column_type.desc(),
                    c.name
                )));
            }
            Ok(c)
        })
        .collect()
}

fn quote(ident: &str) -> String {
    format!("`{}`", ident.replace('`', "``"))
}

/// The aggregate query that measures `cols` of `db.table`: `count(*)`,
/// then per column `count`, `approx_distinct`, `min`, `max` and, for
/// strings, the bytes of its values.
fn stats_query(db: &str, table: &str, cols: &[&Column]) -> String {
    let mut select = vec!["count(*)".to_string()];
    for c in cols {
        let q = quote(&c.name);
        // DataFusion's HyperLogLog takes no floats; their text is as distinct.
        let ndv_arg = match c.column_type {
            ColumnType::Float | ColumnType::Double => format!("CAST({q} AS VARCHAR)"),
            _ => q.clone(),
        };
        select.push(format!("count({q})"));
        select.push(format!("approx_distinct({ndv_arg})"));
        select.push(format!("min({q})"));
        select.push(format!("max({q})"));
        if c.column_type.is_string() {
            select.push(format!("sum(octet_length({q}))"));
        }
    }
    format!(
        "SELECT {} FROM {}.{}",
        select.join(", "),
        quote(db),
        quote(table)
    )
}

/// A DATETIME(p) value's text with exactly `p` fractional digits, as the
/// column shows it (the aggregate's result carries no precision).
fn datetime_text(text: String, precision: u8) -> String {
    let (secs, frac) = text.split_once('.').unwrap_or((text.as_str(), ""));
    if precision == 0 {
        return secs.to_string();
    }
    let digits: String = frac
        .chars()
        .chain(std::iter::repeat('0'))
        .take(usize::from(precision))
        .collect();
    format!("{secs}.{digits}")
}

/// Bytes one value of a fixed-width type takes (BOOLEAN one, as in Doris).
fn value_width(t: &ColumnType) -> u64 {
    match t {
        ColumnType::Float => 4,
        ColumnType::Double => 8,
        t => t.fixed_width().unwrap_or(8) as u64,
    }
}

/// Reads the one row of `stats_query`'s answer into statistics per column.
fn read_stats(
    batch: &RecordBatch,
    cols: &[&Column],
    now: i64,
) -> Result<Vec<(String, ColumnStats)>> {
    let bad = || TethysError::Internal("ANALYZE's aggregate returned an unexpected shape".into());
    if batch.num_rows() != 1 {
        return Err(bad());
    }
    let int = |i: usize| -> Result<u64> {
        let a = batch.column(i);
        if a.is_null(0) {
            return Ok(0);
        }
        if let Some(v) = a.as_primitive_opt::<Int64Type>() {
            return Ok(v.value(0).max(0) as u64);
        }
        a.as_primitive_opt::<UInt64Type>()
            .map(|v| v.value(0))
            .ok_or_else(bad)
    };
    let text = RowEncoder::new(batch);
    let axis = |i: usize| {
        ScalarValue::try_from_array(batch.column(i), 0)
            .ok()
            .and_then(|v| axis_value(&v))
    };
    let rows = int(0)?;
    let mut out = Vec::with_capacity(cols.len());
    let mut i = 1;
    for c in cols {
        let width = if c.column_type.is_string() { 5 } else { 4 };
        if i + width > batch.num_columns() {
            return Err(bad());
        }
        let non_null = int(i)?;
        let shown = |j: usize| {
            let t = text.text_value(j, 0)?;
            Some(match c.column_type {
                ColumnType::DateTime { precision } => datetime_text(t, precision),
                _ => t,
            })
        };
        let data_size = if c.column_type.is_string() {
            int(i + 4)?
        } else {
            non_null * value_width(&c.column_type)
        };
        out.push((
            c.name.clone(),
            ColumnStats {
                count: rows,
                // The sketch may overshoot a little; there are never more
                // distinct values than values.
                ndv: int(i + 1)?.min(non_null),
                num_null: rows.saturating_sub(non_null),
                data_size,
                min: shown(i + 2),
                max: shown(i + 3),
                min_num: axis(i + 2),
                max_num: axis(i + 3),
                updated_time: now,
            },
        ));
        i += width;
    }
    Ok(out)
}

/// `ANALYZE TABLE db.table [(columns)]`: measures the columns and stores
/// their statistics, replacing earlier ones.
pub async fn analyze_table(
    fe: &Arc<Frontend>,
    session: &Session,
    db: &str,
    table: &str,
    columns: &[String],
) -> Result<Analyzed> {
    let t = fe.catalog.read().find_table(db, table)?.1.clone();
    let cols = analyzable(&t, columns)?;
    if cols.is_empty() {
        return Ok(Analyzed {
            columns: 0,
            rows: 0,
        });
    }
    let sql = stats_query(db, &t.name, &cols);
    let batches = crate::planner::run::collect_query(fe, session, &sql).await?;
    let batch = batches
        .iter()
        .find(|b| b.num_rows() > 0)
        .ok_or_else(|| TethysError::Internal("ANALYZE's aggregate returned no row".into()))?;
    let stats = read_stats(batch, &cols, chrono::Utc::now().timestamp_millis())?;
    let analyzed = Analyzed {
        columns: stats.len(),
        rows: stats.first().map_or(0, |(_, s)| s.count),
    };
    let (db, table) = (db.to_string(), t.name.clone());
    fe.catalog.mutate(|state, _| {
        // Dropped (or dropped and re-created) while it was measured: the
        // numbers describe a table that is gone.
        let now = state.database(&db).and_then(|d| d.table(&table));
        if now.is_none_or(|n| n.id != t.id) {
            return Err(TethysError::UnknownTable {
                database: db.clone(),
                table: table.clone(),
            });
        }
        Ok((EditOp::SetColumnStats { db, table, stats }, ()))
    })?;
    Ok(analyzed)
}

/// Share of a table's rows that may change before automatic collection
/// analyzes it again (Doris' `table_stats_health_threshold` of 90%).
const STALE_SHARE: f64 = 0.1;

/// Whether `t`, holding `rows_now` rows, should be analyzed by automatic
/// collection: it has rows and no statistics, or its row count moved by
/// more than [`STALE_SHARE`] since it was analyzed.
fn needs_analyze(t: &Table, rows_now: u64) -> bool {
    if rows_now == 0 {
        return false;
    }
    match t.column_stats.values().map(|s| s.count).max() {
        None => true,
        Some(analyzed) => {
            (rows_now as f64 - analyzed as f64).abs() > STALE_SHARE * analyzed.max(1) as f64
        }
    }
}

/// One round of automatic collection (Doris 2.1's auto analyze, on by
/// default): analyzes every table that [`needs_analyze`], one at a time.
/// Returns how many tables it analyzed; a table it cannot analyze is
/// logged and left for the next round.
pub async fn auto_analyze(fe: &Arc<Frontend>) -> usize {
    let tables: Vec<(String, Table)> = {
        let state = fe.catalog.read();
        state
            .databases
            .values()
            .flat_map(|d| d.tables.values().map(|t| (d.name.clone(), t.clone())))
            .collect()
    };
    let session = Session::new(0, "root".into(), "auto-analyze".into());
    let mut analyzed = 0;
    for (db, t) in tables {
        let rows: u64 = fe.backends.table_rows(&t).await.values().sum();
        if !needs_analyze(&t, rows) {
            continue;
        }
        match analyze_table(fe, &session, &db, &t.name, &[]).await {
            Ok(a) => {
                tracing::info!(table = %format!("{db}.{}", t.name), rows = a.rows, "auto analyze");
                analyzed += 1;
            }
            Err(e) => {
                tracing::warn!(table = %format!("{db}.{}", t.name), error = %e, "auto analyze failed")
            }
        }
    }
    analyzed
}

/// `DROP STATS db.table [(columns)]`.
pub fn drop_stats(fe: &Frontend, db: &str, table: &str, columns: &[String]) -> Result<()> {
    let t = fe.catalog.read().find_table(db, table)?.1.clone();
    let (db, table, columns) = (db.to_string(), t.name, columns.to_vec());
    fe.catalog
        .mutate(|_, _| Ok((EditOp::DropColumnStats { db, table, columns }, ())))
}

/// Doris' `SHOW COLUMN STATS` columns.
pub const SHOW_COLUMNS: &[&str] = &[
    "column_name",
    "index_name",
    "count",
    "ndv",
    "num_null",
    "data_size",
    "avg_size_byte",
    "min",
    "max",
    "method",
    "type",
    "trigger",
    "query_times",
    "updated_time",
];

/// `SHOW COLUMN STATS` rows: the analyzed columns among `columns` (all
/// when empty), in the table's column order.
pub fn show_rows(t: &Table, columns: &[String]) -> Vec<Vec<String>> {
    t.schema
        .columns
        .iter()
        .filter(|c| columns.is_empty() || columns.iter().any(|n| n.eq_ignore_ascii_case(&c.name)))
        .filter_map(|c| {
            let s = t.column_stats.get(&c.name)?;
            let non_null = s.count.saturating_sub(s.num_null);
            let avg = if non_null == 0 {
                0.0
            } else {
                s.data_size as f64 / non_null as f64
            };
            Some(vec![
                c.name.clone(),
                t.name.clone(),
                s.count.to_string(),
                s.ndv.to_string(),
                s.num_null.to_string(),
                s.data_size.to_string(),
                format!("{avg:.1}"),
                s.min.clone().unwrap_or_else(|| "N/A".into()),
                s.max.clone().unwrap_or_else(|| "N/A".into()),
                "FULL".into(),
                "FUNDAMENTALS".into(),
                "MANUAL".into(),
                "0".into(),
                crate::metadata::fmt_time(s.updated_time),
            ])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Date32Array, Int64Array, StringArray, UInt64Array};
    use arrow::datatypes::{DataType, Field, Schema};

    fn col(name: &str, t: ColumnType) -> Column {
        Column::new(name, t, true, false)
    }

    #[test]
    fn tables_are_analyzed_again_when_a_tenth_of_their_rows_changed() {
        let mut t = Table {
            id: 1,
            name: "t".into(),
            schema: Default::default(),
            partition_column: None,
            partitions: vec![],
            distribution: crate::catalog::Distribution::Random { buckets: 1 },
            auto_buckets: false,
            properties: Default::default(),
            comment: String::new(),
            create_time: 0,
            column_stats: Default::default(),
        };
        assert!(
            !needs_analyze(&t, 0),
            "an empty table has nothing to measure"
        );
        assert!(needs_analyze(&t, 5), "never analyzed");
        let st = |count| ColumnStats {
            count,
            ndv: 1,
            num_null: 0,
            data_size: 0,
            min: None,
            max: None,
            min_num: None,
            max_num: None,
            updated_time: 0,
        };
        t.column_stats.insert("a".into(), st(1000));
        assert!(!needs_analyze(&t, 1000));
        assert!(!needs_analyze(&t, 1100));
        assert!(needs_analyze(&t, 1101));
        assert!(needs_analyze(&t, 899));
    }

    #[test]
    fn query_and_answer_line_up_per_column() {
        let d = col("d", ColumnType::Date);
        let s = col("s`x", ColumnType::Varchar(10));
        let f = col("f", ColumnType::Double);
        let cols = vec![&d, &s, &f];
        let sql = stats_query("db", "t", &cols);
        assert!(
            sql.contains("approx_distinct(CAST(`f` AS VARCHAR))"),
            "{sql}"
        );
        assert!(sql.contains("sum(octet_length(`s``x`))"), "{sql}");
        assert!(sql.ends_with("FROM `db`.`t`"), "{sql}");

        let i64s = |v: i64| Arc::new(Int64Array::from(vec![v])) as ArrayRef;
        let u64s = |v: u64| Arc::new(UInt64Array::from(vec![v])) as ArrayRef;
        let strs = |v: &str| Arc::new(StringArray::from(vec![v])) as ArrayRef;
        let arrays: Vec<ArrayRef> = vec![
            i64s(10),
            // d: 8 values, 9 distinct by the sketch, 1992-01-01..1998-08-02
            i64s(8),
            u64s(9),
            Arc::new(Date32Array::from(vec![8035])),
            Arc::new(Date32Array::from(vec![10440])),
            // s: 10 values, 3 distinct, 25 bytes
            i64s(10),
            u64s(3),
            strs("AIR"),
            strs("TRUCK"),
            i64s(25),
            // f: all null
            i64s(0),
            u64s(0),
            Arc::new(arrow::array::Float64Array::from(vec![None::<f64>])),
            Arc::new(arrow::array::Float64Array::from(vec![None::<f64>])),
        ];
        let fields: Vec<Field> = arrays
            .iter()
            .enumerate()
            .map(|(i, a)| Field::new(format!("c{i}"), a.data_type().clone(), true))
            .collect();
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).unwrap();
        let stats = read_stats(&batch, &cols, 1).unwrap();
        let (name, d) = &stats[0];
        assert_eq!(name, "d");
        assert_eq!((d.count, d.ndv, d.num_null, d.data_size), (10, 8, 2, 32));
        assert_eq!(d.min.as_deref(), Some("1992-01-01"));
        assert_eq!((d.min_num, d.max_num), (Some(8035.0), Some(10440.0)));
        let s = &stats[1].1;
        assert_eq!((s.ndv, s.num_null, s.data_size), (3, 0, 25));
        assert_eq!(s.max.as_deref(), Some("TRUCK"));
        assert_eq!((s.min_num, s.max_num), (None, None));
        let f = &stats[2].1;
        assert_eq!((f.ndv, f.num_null, f.min.clone()), (0, 10, None));
        assert_eq!(value_width(&ColumnType::Boolean), 1);
        assert_eq!(
            datetime_text("2026-01-02 03:04:05.678000".into(), 3),
            "2026-01-02 03:04:05.678"
        );
        assert_eq!(
            datetime_text("1999-12-31 23:59:59".into(), 2),
            "1999-12-31 23:59:59.00"
        );
        assert_eq!(
            datetime_text("1999-12-31 23:59:59.5".into(), 0),
            "1999-12-31 23:59:59"
        );
        assert_eq!(value_width(&ColumnType::Double), 8);
        assert_eq!(DataType::Float64, batch.column(12).data_type().clone());
        // A short answer is an error, not a panic.
        let short = batch.project(&[0, 1, 2]).unwrap();
        assert!(read_stats(&short, &cols, 1).is_err());
    }
}

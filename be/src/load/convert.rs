//! Turning source rows (text fields) into typed Arrow batches of the table,
//! filtering rows that do not fit with a reason for the error log: wrong
//! column count, a value that does not convert (in strict mode), NULL in a
//! NOT NULL column, a string longer than its column, bytes that are not a
//! BITMAP / HLL value.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BooleanArray, RecordBatch, StringBuilder,
};
use arrow::compute::{CastOptions, cast_with_options, filter};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::physical_expr::PhysicalExpr;
use tethys_common::functions::object::{EMPTY_OBJECT, ObjectKind};
use tethys_common::schema::TableSchema;
use tethys_common::types::ColumnType;
use tethys_common::{Result, TethysError};

use super::parse::RowBlock;

/// How one table column gets its value.
enum Target {
    /// The same-named source column.
    Source(usize),
    /// An expression over the source columns (already cast to the column type).
    Expr(Arc<dyn PhysicalExpr>),
    /// The column's default, or NULL.
    Default(Option<String>),
}

/// A text every value of `t` casts from (the stand-in for columns a key
/// delete does not give).
fn filler_text(t: &ColumnType) -> &'static str {
    match t {
        ColumnType::Boolean => "false",
        ColumnType::Date => "1970-01-01",
        ColumnType::DateTime { .. } => "1970-01-01 00:00:00",
        ColumnType::Char(_) | ColumnType::Varchar(_) | ColumnType::String => "",
        // Stands for the empty object (see `Converter::convert`).
        ColumnType::Bitmap | ColumnType::Hll => "BITMAP_EMPTY",
        _ => "0",
    }
}

/// Converts source rows of one load.
pub struct Converter {
    schema: TableSchema,
    arrow_schema: SchemaRef,
    /// The file's columns: name and the Arrow type it is read as.
    source_schema: SchemaRef,
    targets: Vec<Target>,
    where_expr: Option<Arc<dyn PhysicalExpr>>,
    strict: bool,
    /// A partial column update: columns the load does not give are NULL
    /// placeholders (or defaults) the backend replaces by the keys' values.
    partial: bool,
}

/// A converted chunk.
pub struct Converted {
    /// The rows that fit, typed.
    pub batch: RecordBatch,
    /// Rows filtered out: (reason, source text).
    pub errors: Vec<(String, String)>,
    /// Rows the `where` header dropped.
    pub unselected: usize,
}

/// What the load plan says about source columns and expressions.
pub struct SourceSpec {
    pub names: Vec<String>,
    /// Doris type text per source column ("" = text).
    pub types: Vec<String>,
    pub column_exprs: Vec<Vec<u8>>,
    pub where_expr: Vec<u8>,
}

fn decode_expr(
    bytes: &[u8],
    schema: &arrow::datatypes::Schema,
    task: &datafusion::execution::TaskContext,
) -> Result<Arc<dyn PhysicalExpr>> {
    use datafusion_proto::physical_plan::from_proto::parse_physical_expr;
    use prost::Message;
    let node = datafusion_proto::protobuf::PhysicalExprNode::decode(bytes)
        .map_err(|e| TethysError::Internal(format!("bad load expression: {e}")))?;
    Ok(parse_physical_expr(
        &node,
        task,
        schema,
        &tethys_common::plan::TethysCodec,
    )?)
}

impl Converter {
    /// A converter for `schema` reading `spec`'s source columns.
    pub fn new(
        schema: TableSchema,
        spec: &SourceSpec,
        defaults: Vec<Option<String>>,
        strict: bool,
        partial: bool,
        deletes: bool,
    ) -> Result<Self> {
        let mut fields = vec![];
        for (i, name) in spec.names.iter().enumerate() {
            let ty = match spec.types.get(i).map(|t| t.as_str()).unwrap_or("") {
                "" => match schema.index_of(name) {
                    Some(ci) if spec.types.is_empty() => {
                        schema.columns[ci].column_type.arrow_type()
                    }
                    Some(_) | None => DataType::Utf8,
                },
                t => ColumnType::parse(t)?.arrow_type(),
            };
            fields.push(arrow::datatypes::Field::new(name.to_lowercase(), ty, true));
        }
        let source_schema = Arc::new(arrow::datatypes::Schema::new(fields));
        // One function registry for every expression of this load.
        let mut ctx = datafusion::prelude::SessionContext::new();
        tethys_common::functions::register_all(&mut ctx)?;
        let task = ctx.task_ctx();
        let mut targets = Vec::with_capacity(schema.columns.len());
        for (ci, c) in schema.columns.iter().enumerate() {
            let expr = spec.column_exprs.get(ci).filter(|b| !b.is_empty());
            let src = spec
                .names
                .iter()
                .position(|n| n.eq_ignore_ascii_case(&c.name));
            let t = match (expr, src) {
                (Some(bytes), _) => Target::Expr(decode_expr(bytes, &source_schema, &task)?),
                (None, Some(si)) => Target::Source(si),
                (None, None) => {
                    let mut d = defaults.get(ci).cloned().flatten();
                    // Rows that delete their keys need only the keys: any
                    // value of the type stands in for the rest.
                    if deletes && d.is_none() && !c.nullable {
                        d = Some(filler_text(&c.column_type).to_string());
                    }
                    if d.is_none() && !c.nullable && !partial {
                        return Err(TethysError::Analysis(format!(
                            "Column '{}' is NOT NULL without a default and is missing from the load",
                            c.name
                        )));
                    }
                    Target::Default(d)
                }
            };
            targets.push(t);
        }
        let where_expr = if spec.where_expr.is_empty() {
            None
        } else {
            Some(decode_expr(&spec.where_expr, &source_schema, &task)?)
        };
        let mut arrow_schema = schema.arrow_schema();
        if partial {
            // Placeholders of unmentioned NOT NULL columns are NULL.
            arrow_schema = Arc::new(arrow::datatypes::Schema::new(
                arrow_schema
                    .fields()
                    .iter()
                    .zip(&targets)
                    .map(|(f, t)| match t {
                        Target::Default(_) => f.as_ref().clone().with_nullable(true),
                        _ => f.as_ref().clone(),
                    })
                    .collect::<Vec<_>>(),
            ));
        }
        Ok(Converter {
            schema,
            arrow_schema,
            source_schema,
            targets,
            where_expr,
            strict,
            partial,
        })
    }

    /// The table columns the load gives (from the file or an expression).
    pub fn partial_columns(&self) -> Vec<u32> {
        self.targets
            .iter()
            .enumerate()
            .filter(|(_, t)| !matches!(t, Target::Default(_)))
            .map(|(i, _)| i as u32)
            .collect()
    }

    /// Converts a block of rows.
    pub fn convert(&self, rows: &RowBlock) -> Result<Converted> {
        let (ok_rows, mut errors) = self.rows_with_all_fields(rows);
        let n = ok_rows.len();
        let mut verdicts = Verdicts {
            keep: vec![true; n],
            reasons: vec![None; n],
        };
        // 1. Source columns, typed.
        let (sources, texts) = self.source_columns(rows, &ok_rows, &mut verdicts)?;
        let source_batch = RecordBatch::try_new_with_options(
            self.source_schema.clone(),
            sources.clone(),
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(n)),
        )?;
        // 2. The where header: rows it rejects are unselected, not errors.
        let mut unselected = 0;
        if let Some(w) = &self.where_expr {
            let v = w.evaluate(&source_batch)?.into_array(n)?;
            let v = v.as_boolean_opt().ok_or_else(|| {
                TethysError::Analysis("the where header must be a boolean condition".into())
            })?;
            for (i, k) in verdicts.keep.iter_mut().enumerate() {
                if *k && !(v.is_valid(i) && v.value(i)) {
                    *k = false;
                    unselected += 1;
                }
            }
        }
        // 3. Table columns, each checked.
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.columns.len());
        for ci in 0..self.schema.columns.len() {
            let (arr, text) = self.table_column(ci, &sources, &texts, &source_batch, n)?;
            self.check_column(ci, &arr, text.as_ref(), &mut verdicts);
            columns.push(arr);
        }
        let Verdicts { keep, reasons } = verdicts;
        let reasons_count = reasons.iter().filter(|r| r.is_some()).count();
        for (i, r) in reasons.into_iter().enumerate() {
            if let Some(reason) = r {
                errors.push((reason, rows.raw_text(ok_rows[i])));
            }
        }
        // Drop filtered rows before assembling the batch: they may hold NULLs
        // that the NOT NULL columns of the schema do not allow.
        let kept = n - reasons_count - unselected;
        let columns = if keep.iter().all(|k| *k) {
            columns
        } else {
            let mask = BooleanArray::from(keep);
            columns
                .iter()
                .map(|c| filter(c.as_ref(), &mask))
                .collect::<std::result::Result<Vec<_>, _>>()?
        };
        let batch = RecordBatch::try_new_with_options(
            self.arrow_schema.clone(),
            columns,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(kept)),
        )?;
        let batch = self.schema.round_datetimes(batch)?;
        Ok(Converted {
            batch,
            errors,
            unselected,
        })
    }

    /// The rows with as many fields as the source has columns, and an error
    /// for each other row.
    fn rows_with_all_fields(&self, rows: &RowBlock) -> (Vec<usize>, Vec<(String, String)>) {
        let n_source = self.source_schema.fields().len();
        let mut errors = vec![];
        let mut ok_rows: Vec<usize> = Vec::with_capacity(rows.len());
        for r in 0..rows.len() {
            let n = rows.n_fields(r);
            if n == n_source {
                ok_rows.push(r);
            } else {
                let cmp = if n < n_source { "less" } else { "more" };
                errors.push((
                    format!(
                        "actual column number in csv file is {cmp} than schema column number. actual number: {n}, schema column number: {n_source}"
                    ),
                    rows.raw_text(r),
                ));
            }
        }
        (ok_rows, errors)
    }

    /// The source columns of `ok_rows`, typed, and as text; in strict mode
    /// a value that does not convert rejects its row.
    fn source_columns(
        &self,
        rows: &RowBlock,
        ok_rows: &[usize],
        verdicts: &mut Verdicts,
    ) -> Result<(Vec<ArrayRef>, Vec<ArrayRef>)> {
        let n = ok_rows.len();
        let n_source = self.source_schema.fields().len();
        let mut sources: Vec<ArrayRef> = Vec::with_capacity(n_source);
        let mut texts: Vec<ArrayRef> = Vec::with_capacity(n_source);
        for (si, f) in self.source_schema.fields().iter().enumerate() {
            let mut b = StringBuilder::with_capacity(n, n * 8);
            for &r in ok_rows {
                match rows.field(r, si) {
                    None => b.append_null(),
                    Some(bytes) => match std::str::from_utf8(bytes) {
                        Ok(v) => b.append_value(v),
                        Err(_) => b.append_value(String::from_utf8_lossy(bytes)),
                    },
                }
            }
            let text: ArrayRef = Arc::new(b.finish());
            let typed = if f.data_type() == &DataType::Utf8 {
                text.clone()
            } else if let Some(d) = fast_decimal(&text, f.data_type()) {
                d
            } else {
                cast_with_options(&text, f.data_type(), &CAST)?
            };
            if self.strict {
                let t = text.as_string::<i32>();
                for i in 0..n {
                    if verdicts.keep[i] && t.is_valid(i) && typed.is_null(i) {
                        verdicts.reject(
                            i,
                            format!(
                                "column_name[{}], the value [{}] cannot be converted to {} in strict mode",
                                f.name(),
                                t.value(i),
                                f.data_type()
                            ),
                        );
                    }
                }
            }
            sources.push(typed);
            texts.push(text);
        }
        Ok((sources, texts))
    }

    /// Table column `ci` of `n` rows: a source column cast, an expression of
    /// the `columns` header, or the column's default; with its source text
    /// when it has one (for error messages).
    fn table_column(
        &self,
        ci: usize,
        sources: &[ArrayRef],
        texts: &[ArrayRef],
        source_batch: &RecordBatch,
        n: usize,
    ) -> Result<(ArrayRef, Option<ArrayRef>)> {
        let col = &self.schema.columns[ci];
        let target = self.arrow_schema.field(ci).data_type();
        Ok(match &self.targets[ci] {
            Target::Source(si) => {
                let a = if sources[*si].data_type() == target {
                    sources[*si].clone()
                } else {
                    cast_with_options(&sources[*si], target, &CAST)?
                };
                (a, Some(texts[*si].clone()))
            }
            Target::Expr(e) => (e.evaluate(source_batch)?.into_array(n)?, None),
            Target::Default(d) => match (ObjectKind::of(&col.column_type), d) {
                // An object column's only default (BITMAP_EMPTY, or the
                // stand-in of a key delete) is the empty object.
                (Some(_), Some(_)) => (
                    Arc::new(BinaryArray::from_iter_values(std::iter::repeat_n(
                        EMPTY_OBJECT,
                        n,
                    ))) as ArrayRef,
                    None,
                ),
                _ => {
                    let text: ArrayRef =
                        Arc::new(arrow::array::StringArray::from(vec![d.clone(); n]));
                    (cast_with_options(&text, target, &CAST)?, None)
                }
            },
        })
    }

    /// Rejects the rows whose value of table column `ci` the column does not
    /// take: NULL in a NOT NULL column, a string past its length, a BITMAP or
    /// HLL value that does not decode.
    fn check_column(
        &self,
        ci: usize,
        arr: &ArrayRef,
        text: Option<&ArrayRef>,
        verdicts: &mut Verdicts,
    ) {
        let col = &self.schema.columns[ci];
        // Most columns need no per-row check: nullable or without NULLs,
        // and not a string with a length limit.
        let placeholder = self.partial && matches!(self.targets[ci], Target::Default(_));
        let check_nulls = !col.nullable && arr.null_count() > 0 && !placeholder;
        let max_len = col.column_type.max_len();
        let strings = max_len.and(arr.as_string_opt::<i32>());
        let objects = ObjectKind::of(&col.column_type).zip(arr.as_binary_opt::<i32>());
        if !check_nulls && strings.is_none() && objects.is_none() {
            return;
        }
        for i in 0..arr.len() {
            if !verdicts.keep[i] {
                continue;
            }
            let bad_object = objects
                .filter(|(_, a)| a.is_valid(i))
                .and_then(|(kind, a)| kind.check(a.value(i)).err().map(|e| (kind, e)));
            if let Some((kind, why)) = bad_object {
                verdicts.reject(
                    i,
                    format!(
                        "column_name[{}] is {}: its value must be made in the columns header by {} ({why})",
                        col.name,
                        col.column_type.desc(),
                        kind.makers()
                    ),
                );
            } else if check_nulls && arr.is_null(i) {
                let shown = text
                    .filter(|t| t.is_valid(i))
                    .map(|t| arrow::util::display::array_value_to_string(t, i).unwrap_or_default());
                verdicts.reject(
                    i,
                    match shown {
                        Some(v) => format!(
                            "column_name[{}], the value [{v}] cannot be converted to {}, and the column is NOT NULL",
                            col.name,
                            col.column_type.desc()
                        ),
                        None => format!("null value for not null column, column={}", col.name),
                    },
                );
            } else if let (Some(s), Some(max)) = (strings, max_len)
                && s.is_valid(i)
                && s.value_length(i) as usize > max
            {
                verdicts.reject(
                    i,
                    format!(
                        "the length of input is too long than schema. column_name: {}; input_str: [{}] schema length: {max}; actual length: {};",
                        col.name,
                        s.value(i).chars().take(64).collect::<String>(),
                        s.value(i).len()
                    ),
                );
            }
        }
    }
}

/// Per row of a block being converted: kept, or rejected with a reason.
struct Verdicts {
    keep: Vec<bool>,
    reasons: Vec<Option<String>>,
}

impl Verdicts {
    fn reject(&mut self, row: usize, reason: String) {
        self.keep[row] = false;
        self.reasons[row] = Some(reason);
    }
}

/// Casts that turn a value that does not convert into NULL.
const CAST: CastOptions<'static> = CastOptions {
    safe: true,
    format_options: arrow::util::display::FormatOptions::new(),
};

/// Plain decimal text (`-12.5`, `3`, `0.25`) as `Decimal128(p, s)` without
/// arrow's general parser; `None` (use the general cast) when the array is
/// not a decimal target or any value is anything else (exponents, blanks,
/// more fraction digits than the scale, too many digits).
fn fast_decimal(text: &ArrayRef, target: &DataType) -> Option<ArrayRef> {
    let DataType::Decimal128(p, s) = *target else {
        return None;
    };
    let s = u32::try_from(s).ok()?;
    let limit = 10i128.checked_pow(u32::from(p))?;
    let strings = text.as_string_opt::<i32>()?;
    let mut out = arrow::array::Decimal128Builder::with_capacity(strings.len());
    for v in strings.iter() {
        let Some(v) = v else {
            out.append_null();
            continue;
        };
        out.append_value(parse_plain_decimal(v.as_bytes(), s, limit)?);
    }
    Some(Arc::new(
        out.finish().with_precision_and_scale(p, s as i8).ok()?,
    ))
}

/// `[-+]digits[.digits]` with at most `scale` fraction digits, scaled, below
/// `limit` in magnitude.
fn parse_plain_decimal(b: &[u8], scale: u32, limit: i128) -> Option<i128> {
    let (neg, digits) = match b.first()? {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    let mut v: i128 = 0;
    let mut frac: Option<u32> = None;
    let mut any = false;
    for &c in digits {
        match c {
            b'0'..=b'9' => {
                if let Some(f) = frac.as_mut() {
                    if *f == scale {
                        return None;
                    }
                    *f += 1;
                }
                v = v.checked_mul(10)?.checked_add(i128::from(c - b'0'))?;
                any = true;
            }
            b'.' if frac.is_none() => frac = Some(0),
            _ => return None,
        }
    }
    if !any {
        return None;
    }
    v = v.checked_mul(10i128.checked_pow(scale - frac.unwrap_or(0))?)?;
    if v >= limit {
        return None;
    }
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tethys_common::schema::Column;
    use tethys_common::types::ColumnType;

    fn schema() -> TableSchema {
        let c = |n: &str, t: &str, nullable: bool| {
            Column::new(n, ColumnType::parse(t).unwrap(), nullable, false)
        };
        TableSchema {
            columns: vec![
                c("id", "int", false),
                c("name", "varchar(3)", true),
                c("d", "date", true),
            ],
            num_key_columns: 1,
            compression: "lz4".into(),
            bloom_filter_columns: vec![],
            ..Default::default()
        }
    }

    fn rows(rows: &[&[Option<&str>]]) -> RowBlock {
        RowBlock::from_fields(rows)
    }

    #[test]
    fn plain_decimals_parse_like_the_general_cast() {
        let text: ArrayRef = Arc::new(arrow::array::StringArray::from(vec![
            Some("21168.23"),
            Some("-0.5"),
            Some("7"),
            None,
            Some("+3.10"),
        ]));
        let ty = DataType::Decimal128(15, 2);
        let fast = fast_decimal(&text, &ty).unwrap();
        let general = cast_with_options(&text, &ty, &CastOptions::default()).unwrap();
        assert_eq!(fast.as_ref(), general.as_ref());
        // Anything else goes to the general cast.
        for odd in ["1e3", "1.234", "", " 1", "1.2.3", "-", "99999999999999.99"] {
            let a: ArrayRef = Arc::new(arrow::array::StringArray::from(vec![odd]));
            assert!(fast_decimal(&a, &ty).is_none(), "{odd}");
        }
    }

    #[test]
    fn filters_with_reasons() {
        let names: Vec<String> = ["id", "name", "d"].iter().map(|s| s.to_string()).collect();
        let spec = SourceSpec {
            names: names.clone(),
            types: vec![],
            column_exprs: vec![],
            where_expr: vec![],
        };
        let conv =
            Converter::new(schema(), &spec, vec![None, None, None], false, false, false).unwrap();
        let out = conv
            .convert(&rows(&[
                &[Some("1"), Some("ab"), Some("2026-08-01")],
                &[Some("2"), Some("abcd"), None],
                &[Some("x"), Some("a"), None],
                &[Some("4"), Some("a")],
                &[Some("5"), Some("a"), Some("not a date")],
            ]))
            .unwrap();
        assert_eq!(
            out.batch.num_rows(),
            2,
            "row 1 and row 5 (bad date becomes NULL when not strict)"
        );
        assert_eq!(out.errors.len(), 3);
        assert!(out.errors.iter().any(|e| {
            e.0.contains("less than schema column number. actual number: 2")
        }));
        assert!(out.errors.iter().any(|e| e.0.contains("too long")));
        assert!(out.errors.iter().any(|e| e.0.contains("NOT NULL")));
        let strict =
            Converter::new(schema(), &spec, vec![None, None, None], true, false, false).unwrap();
        let out = strict
            .convert(&rows(&[&[Some("5"), Some("a"), Some("not a date")]]))
            .unwrap();
        assert_eq!(out.batch.num_rows(), 0);
        assert!(out.errors[0].0.contains("strict mode"));
        let missing_id = SourceSpec {
            names: vec!["name".to_string()],
            types: vec![],
            column_exprs: vec![],
            where_expr: vec![],
        };
        assert!(Converter::new(schema(), &missing_id, vec![], false, false, false).is_err());
    }
}

//! Turning source rows (text fields) into typed Arrow batches of the table,
//! filtering rows that do not fit with a reason for the error log: wrong
//! column count, a value that does not convert (in strict mode), NULL in a
//! NOT NULL column, a string longer than its column.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch, StringBuilder};
use arrow::compute::{CastOptions, cast_with_options, filter};
use arrow::datatypes::{DataType, SchemaRef};
use tethys_common::schema::TableSchema;
use tethys_common::{Result, TethysError};

use super::parse::SourceRow;

/// Converts source rows of one load.
pub struct Converter {
    schema: TableSchema,
    arrow_schema: SchemaRef,
    /// Per table column: which source field feeds it.
    source_of: Vec<Option<usize>>,
    defaults: Vec<Option<String>>,
    n_source: usize,
    strict: bool,
}

/// A converted chunk.
pub struct Converted {
    /// The rows that fit, typed.
    pub batch: RecordBatch,
    /// Rows filtered out: (reason, source text).
    pub errors: Vec<(String, String)>,
}

impl Converter {
    /// `source_names`: the source columns in order (the `columns` header, or
    /// the table's columns).
    pub fn new(
        schema: TableSchema,
        source_names: &[String],
        defaults: Vec<Option<String>>,
        strict: bool,
    ) -> Result<Self> {
        let mut source_of = vec![None; schema.columns.len()];
        for (si, name) in source_names.iter().enumerate() {
            let ci = schema.index_of(name).ok_or_else(|| {
                TethysError::Analysis(format!("Unknown column '{name}' in the columns header"))
            })?;
            if source_of[ci].is_some() {
                return Err(TethysError::Analysis(format!(
                    "Duplicate column '{name}' in the columns header"
                )));
            }
            source_of[ci] = Some(si);
        }
        for (ci, c) in schema.columns.iter().enumerate() {
            if source_of[ci].is_none()
                && !c.nullable
                && defaults.get(ci).is_none_or(|d| d.is_none())
            {
                return Err(TethysError::Analysis(format!(
                    "Column '{}' is NOT NULL without a default and is missing from the load",
                    c.name
                )));
            }
        }
        let arrow_schema = schema.arrow_schema();
        Ok(Converter {
            schema,
            arrow_schema,
            source_of,
            defaults,
            n_source: source_names.len(),
            strict,
        })
    }

    /// Converts a chunk of rows.
    pub fn convert(&self, rows: &[SourceRow]) -> Result<Converted> {
        let mut errors = vec![];
        let mut ok_rows: Vec<&SourceRow> = Vec::with_capacity(rows.len());
        for r in rows {
            let n = r.fields.len();
            if n == self.n_source {
                ok_rows.push(r);
            } else {
                let cmp = if n < self.n_source { "less" } else { "more" };
                errors.push((
                    format!(
                        "actual column number in csv file is {cmp} than schema column number. actual number: {n}, schema column number: {}",
                        self.n_source
                    ),
                    r.raw.clone(),
                ));
            }
        }
        let n = ok_rows.len();
        let mut keep = vec![true; n];
        let mut reasons: Vec<Option<String>> = vec![None; n];
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.columns.len());
        let opts = CastOptions {
            safe: true,
            ..Default::default()
        };
        for (ci, col) in self.schema.columns.iter().enumerate() {
            let mut b = StringBuilder::with_capacity(n, n * 8);
            for r in &ok_rows {
                let v = match self.source_of[ci] {
                    Some(si) => r.fields[si].as_deref(),
                    None => self.defaults.get(ci).and_then(|d| d.as_deref()),
                };
                b.append_option(v);
            }
            let text: ArrayRef = Arc::new(b.finish());
            let target = self.arrow_schema.field(ci).data_type();
            let typed = if target == &DataType::Utf8 {
                text.clone()
            } else {
                cast_with_options(&text, target, &opts)?
            };
            let text_s = text.as_string::<i32>();
            for i in 0..n {
                if !keep[i] {
                    continue;
                }
                if text_s.is_valid(i) && typed.is_null(i) && self.strict {
                    keep[i] = false;
                    reasons[i] = Some(format!(
                        "column_name[{}], the value [{}] cannot be converted to {} in strict mode",
                        col.name,
                        text_s.value(i),
                        col.column_type.desc()
                    ));
                } else if typed.is_null(i) && !col.nullable {
                    keep[i] = false;
                    reasons[i] = Some(if text_s.is_valid(i) {
                        format!(
                            "column_name[{}], the value [{}] cannot be converted to {}, and the column is NOT NULL",
                            col.name,
                            text_s.value(i),
                            col.column_type.desc()
                        )
                    } else {
                        format!("null value for not null column, column={}", col.name)
                    });
                } else if let Some(max) = col.column_type.max_len()
                    && text_s.is_valid(i)
                    && text_s.value(i).len() > max
                {
                    keep[i] = false;
                    reasons[i] = Some(format!(
                        "the length of input is too long than schema. column_name: {}; input_str: [{}] schema length: {max}; actual length: {};",
                        col.name,
                        text_s.value(i).chars().take(64).collect::<String>(),
                        text_s.value(i).len()
                    ));
                }
            }
            columns.push(typed);
        }
        let reasons_count = reasons.iter().filter(|r| r.is_some()).count();
        for (i, r) in reasons.into_iter().enumerate() {
            if let Some(reason) = r {
                errors.push((reason, ok_rows[i].raw.clone()));
            }
        }
        // Drop filtered rows before assembling the batch: they may hold NULLs
        // that the NOT NULL columns of the schema do not allow.
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
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(n - reasons_count)),
        )?;
        Ok(Converted { batch, errors })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tethys_common::schema::Column;
    use tethys_common::types::ColumnType;

    fn schema() -> TableSchema {
        let c = |n: &str, t: &str, nullable: bool| Column {
            name: n.into(),
            column_type: ColumnType::parse(t).unwrap(),
            nullable,
            is_key: false,
            default: None,
            comment: String::new(),
            aggregation: None,
        };
        TableSchema {
            columns: vec![
                c("id", "int", false),
                c("name", "varchar(3)", true),
                c("d", "date", true),
            ],
            num_key_columns: 1,
            compression: "lz4".into(),
        }
    }

    fn row(f: &[Option<&str>]) -> SourceRow {
        SourceRow {
            fields: f.iter().map(|x| x.map(String::from)).collect(),
            raw: format!("{f:?}"),
        }
    }

    #[test]
    fn filters_with_reasons() {
        let names: Vec<String> = ["id", "name", "d"].iter().map(|s| s.to_string()).collect();
        let conv = Converter::new(schema(), &names, vec![None, None, None], false).unwrap();
        let out = conv
            .convert(&[
                row(&[Some("1"), Some("ab"), Some("2026-08-01")]),
                row(&[Some("2"), Some("abcd"), None]),
                row(&[Some("x"), Some("a"), None]),
                row(&[Some("4"), Some("a")]),
                row(&[Some("5"), Some("a"), Some("not a date")]),
            ])
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
        let strict = Converter::new(schema(), &names, vec![None, None, None], true).unwrap();
        let out = strict
            .convert(&[row(&[Some("5"), Some("a"), Some("not a date")])])
            .unwrap();
        assert_eq!(out.batch.num_rows(), 0);
        assert!(out.errors[0].0.contains("strict mode"));
        assert!(Converter::new(schema(), &["nope".to_string()], vec![], false).is_err());
    }
}

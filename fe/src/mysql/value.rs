//! Arrow values on the MySQL wire: column types and flags for a schema, and
//! row encodings in the text and binary protocols.

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{
    DataType, Date32Type, Date64Type, Field, Float16Type, Float32Type, Float64Type, Int8Type,
    Int16Type, Int32Type, Int64Type, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use chrono::{DateTime, Datelike, NaiveDateTime, Timelike};
use tethys_common::schema::COLUMN_TYPE_METADATA_KEY;
use tethys_common::types::ColumnType;

use super::proto::{CHARSET_BINARY, CHARSET_UTF8, ColumnDef, put_lenenc_str};

pub const T_DECIMAL: u8 = 0x00;
pub const T_TINY: u8 = 0x01;
pub const T_SHORT: u8 = 0x02;
pub const T_LONG: u8 = 0x03;
pub const T_FLOAT: u8 = 0x04;
pub const T_DOUBLE: u8 = 0x05;
pub const T_NULL: u8 = 0x06;
pub const T_TIMESTAMP: u8 = 0x07;
pub const T_LONGLONG: u8 = 0x08;
pub const T_INT24: u8 = 0x09;
pub const T_DATE: u8 = 0x0a;
pub const T_TIME: u8 = 0x0b;
pub const T_DATETIME: u8 = 0x0c;
pub const T_YEAR: u8 = 0x0d;
pub const T_VARCHAR: u8 = 0x0f;
pub const T_NEWDECIMAL: u8 = 0xf6;
pub const T_BLOB: u8 = 0xfc;
pub const T_VAR_STRING: u8 = 0xfd;
pub const T_STRING: u8 = 0xfe;

const NOT_NULL_FLAG: u16 = 1;
const UNSIGNED_FLAG: u16 = 32;
const BINARY_FLAG: u16 = 128;

/// The protocol description of one result column.
pub fn column_def(field: &Field) -> ColumnDef {
    let declared = field
        .metadata()
        .get(COLUMN_TYPE_METADATA_KEY)
        .and_then(|t| ColumnType::parse(t).ok());
    let mut flags = if field.is_nullable() {
        0
    } else {
        NOT_NULL_FLAG
    };
    let (ty, len, decimals, charset) = match field.data_type() {
        DataType::Null => (T_NULL, 0, 0, CHARSET_BINARY),
        DataType::Boolean | DataType::Int8 => (T_TINY, 4, 0, CHARSET_BINARY),
        DataType::Int16 => (T_SHORT, 6, 0, CHARSET_BINARY),
        DataType::Int32 => (T_LONG, 11, 0, CHARSET_BINARY),
        DataType::Int64 => (T_LONGLONG, 20, 0, CHARSET_BINARY),
        DataType::UInt8 => {
            flags |= UNSIGNED_FLAG;
            (T_TINY, 3, 0, CHARSET_BINARY)
        }
        DataType::UInt16 => {
            flags |= UNSIGNED_FLAG;
            (T_SHORT, 5, 0, CHARSET_BINARY)
        }
        DataType::UInt32 => {
            flags |= UNSIGNED_FLAG;
            (T_LONG, 10, 0, CHARSET_BINARY)
        }
        DataType::UInt64 => {
            flags |= UNSIGNED_FLAG;
            (T_LONGLONG, 20, 0, CHARSET_BINARY)
        }
        DataType::Float16 | DataType::Float32 => (T_FLOAT, 12, 31, CHARSET_BINARY),
        DataType::Float64 => (T_DOUBLE, 22, 31, CHARSET_BINARY),
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => (
            T_NEWDECIMAL,
            *p as u32 + 2,
            (*s).max(0) as u8,
            CHARSET_BINARY,
        ),
        DataType::Date32 | DataType::Date64 => (T_DATE, 10, 0, CHARSET_BINARY),
        DataType::Timestamp(_, _) => {
            let p = match declared {
                Some(ColumnType::DateTime { precision }) => precision,
                _ => 0,
            };
            (
                T_DATETIME,
                19 + if p > 0 { p as u32 + 1 } else { 0 },
                p,
                CHARSET_BINARY,
            )
        }
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            flags |= BINARY_FLAG;
            (T_BLOB, 65535, 0, CHARSET_BINARY)
        }
        _ => {
            let len = declared.and_then(|t| t.max_len()).unwrap_or(65533) as u32 * 3;
            (T_VAR_STRING, len, 0, CHARSET_UTF8)
        }
    };
    if charset == CHARSET_BINARY && ty != T_NULL {
        flags |= BINARY_FLAG;
    }
    ColumnDef {
        schema: String::new(),
        table: String::new(),
        name: field
            .name()
            .split(crate::sql::rewrite::DUPLICATE_NAME_MARK)
            .next()
            .unwrap_or_default()
            .to_string(),
        charset,
        length: len,
        column_type: ty,
        flags,
        decimals,
    }
}

/// Whether a value is NULL; a column of type Null (`SELECT NULL`) has no
/// null buffer, yet every value of it is NULL (it was sent as the text
/// `NULL`).
fn is_null(arr: &ArrayRef, row: usize) -> bool {
    arr.data_type() == &DataType::Null || arr.is_null(row)
}

/// Formats a datetime like MySQL: fraction only when the column declares one.
fn fmt_datetime(dt: &NaiveDateTime, precision: u8) -> String {
    let base = dt.format("%Y-%m-%d %H:%M:%S").to_string();
    let micros = dt.nanosecond() / 1000;
    if precision > 0 {
        let frac = format!("{micros:06}");
        format!("{base}.{}", &frac[..precision.min(6) as usize])
    } else if micros != 0 {
        format!("{base}.{micros:06}")
    } else {
        base
    }
}

/// A DOUBLE as MySQL prints it: the shortest digits that read back the
/// same, in exponent form below 1e-6 and from 1e15 on (`1e300`, `1.5e-7`;
/// `0.000001` stays as it is).
fn fmt_float(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.is_finite() && v != 0.0 && (v.abs() >= 1e15 || v.abs() < 1e-6) {
        format!("{v:e}")
    } else if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        }
    } else {
        format!("{v}")
    }
}

/// One element of an ARRAY / MAP / STRUCT as Doris prints it: strings and
/// datetimes in double quotes, NULL as `null`, nested values alike
/// (`["a", "b"]`, `[1.5, null]`, `{"k":1}`).
fn nested_text(arr: &ArrayRef, i: usize, out: &mut String) {
    use std::fmt::Write;
    if is_null(arr, i) {
        out.push_str("null");
        return;
    }
    let list = |values: ArrayRef, out: &mut String| {
        out.push('[');
        for j in 0..values.len() {
            if j > 0 {
                out.push_str(", ");
            }
            nested_text(&values, j, out);
        }
        out.push(']');
    };
    match arr.data_type() {
        DataType::List(_) => list(arr.as_list::<i32>().value(i), out),
        DataType::LargeList(_) => list(arr.as_list::<i64>().value(i), out),
        DataType::FixedSizeList(_, _) => list(arr.as_fixed_size_list().value(i), out),
        DataType::Struct(fields) => {
            let s = arr.as_struct();
            out.push('{');
            for (j, (f, c)) in fields.iter().zip(s.columns()).enumerate() {
                if j > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "\"{}\":", f.name());
                nested_text(c, i, out);
            }
            out.push('}');
        }
        DataType::Map(_, _) => {
            let m = arr.as_map();
            let entries = m.value(i);
            out.push('{');
            for j in 0..entries.len() {
                if j > 0 {
                    out.push_str(", ");
                }
                nested_text(entries.column(0), j, out);
                out.push(':');
                nested_text(entries.column(1), j, out);
            }
            out.push('}');
        }
        DataType::Boolean => out.push(if arr.as_boolean().value(i) { '1' } else { '0' }),
        DataType::Float64 => out.push_str(&fmt_float(arr.as_primitive::<Float64Type>().value(i))),
        DataType::Float32 => out.push_str(&fmt_float(f64::from(
            arr.as_primitive::<Float32Type>().value(i),
        ))),
        DataType::Timestamp(_, _) => {
            if let Some(dt) = timestamp_at(arr.as_ref(), i) {
                let _ = write!(out, "\"{}\"", fmt_datetime(&dt, 0));
            }
        }
        t => {
            let text = ArrayFormatter::try_new(arr.as_ref(), &FORMAT)
                .map(|f| f.value(i).to_string())
                .unwrap_or_default();
            let quoted = matches!(
                t,
                DataType::Utf8
                    | DataType::LargeUtf8
                    | DataType::Utf8View
                    | DataType::Date32
                    | DataType::Date64
            );
            if quoted {
                let _ = write!(out, "\"{text}\"");
            } else {
                out.push_str(&text);
            }
        }
    }
}

/// Local wall-clock datetimes of a timestamp column (time zone applied).
fn timestamp_at(arr: &dyn Array, i: usize) -> Option<NaiveDateTime> {
    let (v, unit, tz) = match arr.data_type() {
        DataType::Timestamp(TimeUnit::Second, tz) => {
            (arr.as_primitive::<TimestampSecondType>().value(i), 0, tz)
        }
        DataType::Timestamp(TimeUnit::Millisecond, tz) => (
            arr.as_primitive::<TimestampMillisecondType>().value(i),
            1,
            tz,
        ),
        DataType::Timestamp(TimeUnit::Microsecond, tz) => (
            arr.as_primitive::<TimestampMicrosecondType>().value(i),
            2,
            tz,
        ),
        DataType::Timestamp(TimeUnit::Nanosecond, tz) => (
            arr.as_primitive::<TimestampNanosecondType>().value(i),
            3,
            tz,
        ),
        _ => return None,
    };
    let utc = match unit {
        0 => DateTime::from_timestamp(v, 0),
        1 => DateTime::from_timestamp_millis(v),
        2 => DateTime::from_timestamp_micros(v),
        _ => Some(DateTime::from_timestamp_nanos(v)),
    }?;
    match tz {
        Some(tz) => match tethys_common::functions::timezone::parse_tz(tz) {
            Ok(tz) => Some(utc.with_timezone(&tz).naive_local()),
            Err(_) => Some(utc.naive_utc()),
        },
        None => Some(utc.naive_utc()),
    }
}

/// Encodes the rows of a batch, one packet payload per row.
pub struct RowEncoder<'a> {
    batch: &'a RecordBatch,
    precisions: Vec<u8>,
    /// Columns of BITMAP / HLL values, which show as NULL as in Doris.
    objects: Vec<bool>,
    formatters: Vec<Option<ArrayFormatter<'a>>>,
}

const FORMAT: FormatOptions<'static> = FormatOptions::new().with_null("NULL");

impl<'a> RowEncoder<'a> {
    pub fn new(batch: &'a RecordBatch) -> Self {
        let schema = batch.schema();
        let declared: Vec<Option<ColumnType>> = schema
            .fields()
            .iter()
            .map(|f| {
                f.metadata()
                    .get(COLUMN_TYPE_METADATA_KEY)
                    .and_then(|t| ColumnType::parse(t).ok())
            })
            .collect();
        let precisions = declared
            .iter()
            .map(|t| match t {
                Some(ColumnType::DateTime { precision }) => *precision,
                _ => 0,
            })
            .collect();
        let objects = declared
            .iter()
            .map(|t| t.is_some_and(|t| t.is_object()))
            .collect();
        let formatters = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &FORMAT).ok())
            .collect();
        RowEncoder {
            batch,
            precisions,
            objects,
            formatters,
        }
    }

    /// The text a client sees for one value (`None` for NULL).
    pub fn text_value(&self, col: usize, row: usize) -> Option<String> {
        let arr: &ArrayRef = self.batch.column(col);
        if is_null(arr, row) || self.objects[col] {
            return None;
        }
        Some(match arr.data_type() {
            DataType::Boolean => {
                if arr.as_boolean().value(row) {
                    "1".into()
                } else {
                    "0".into()
                }
            }
            DataType::Float16 => fmt_float(arr.as_primitive::<Float16Type>().value(row).to_f64()),
            DataType::Float32 => {
                let v = arr.as_primitive::<Float32Type>().value(row);
                if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e7 {
                    format!("{v:.0}")
                } else {
                    format!("{v}")
                }
            }
            DataType::Float64 => fmt_float(arr.as_primitive::<Float64Type>().value(row)),
            DataType::Timestamp(_, _) => match timestamp_at(arr.as_ref(), row) {
                Some(dt) => fmt_datetime(&dt, self.precisions[col]),
                None => return None,
            },
            DataType::List(_)
            | DataType::LargeList(_)
            | DataType::FixedSizeList(_, _)
            | DataType::Struct(_)
            | DataType::Map(_, _) => {
                let mut out = String::new();
                nested_text(arr, row, &mut out);
                out
            }
            _ => match &self.formatters[col] {
                Some(f) => f.value(row).to_string(),
                None => return None,
            },
        })
    }

    /// A text-protocol row.
    pub fn text_row(&self, row: usize, out: &mut Vec<u8>) {
        out.clear();
        for c in 0..self.batch.num_columns() {
            match self.text_value(c, row) {
                Some(s) => put_lenenc_str(out, s.as_bytes()),
                None => out.push(0xfb),
            }
        }
    }

    /// A binary-protocol row (COM_STMT_EXECUTE results).
    pub fn binary_row(&self, row: usize, out: &mut Vec<u8>) {
        out.clear();
        let n = self.batch.num_columns();
        out.push(0);
        let bitmap_at = out.len();
        out.resize(bitmap_at + (n + 7 + 2) / 8, 0);
        for c in 0..n {
            let arr = self.batch.column(c);
            if is_null(arr, row) || self.objects[c] {
                let bit = c + 2;
                out[bitmap_at + bit / 8] |= 1 << (bit % 8);
                continue;
            }
            match arr.data_type() {
                DataType::Boolean => out.push(arr.as_boolean().value(row) as u8),
                DataType::Int8 => out.push(arr.as_primitive::<Int8Type>().value(row) as u8),
                DataType::UInt8 => out.push(arr.as_primitive::<UInt8Type>().value(row)),
                DataType::Int16 => {
                    out.extend_from_slice(&arr.as_primitive::<Int16Type>().value(row).to_le_bytes())
                }
                DataType::UInt16 => out
                    .extend_from_slice(&arr.as_primitive::<UInt16Type>().value(row).to_le_bytes()),
                DataType::Int32 => {
                    out.extend_from_slice(&arr.as_primitive::<Int32Type>().value(row).to_le_bytes())
                }
                DataType::UInt32 => out
                    .extend_from_slice(&arr.as_primitive::<UInt32Type>().value(row).to_le_bytes()),
                DataType::Int64 => {
                    out.extend_from_slice(&arr.as_primitive::<Int64Type>().value(row).to_le_bytes())
                }
                DataType::UInt64 => out
                    .extend_from_slice(&arr.as_primitive::<UInt64Type>().value(row).to_le_bytes()),
                DataType::Float16 | DataType::Float32 => {
                    let v = match arr.data_type() {
                        DataType::Float16 => arr.as_primitive::<Float16Type>().value(row).to_f32(),
                        _ => arr.as_primitive::<Float32Type>().value(row),
                    };
                    out.extend_from_slice(&v.to_le_bytes())
                }
                DataType::Float64 => out
                    .extend_from_slice(&arr.as_primitive::<Float64Type>().value(row).to_le_bytes()),
                DataType::Date32 | DataType::Date64 => {
                    let d = match arr.data_type() {
                        DataType::Date32 => arr.as_primitive::<Date32Type>().value_as_date(row),
                        _ => arr.as_primitive::<Date64Type>().value_as_date(row),
                    };
                    match d {
                        Some(d) => {
                            out.push(4);
                            out.extend_from_slice(&(d.year() as u16).to_le_bytes());
                            out.push(d.month() as u8);
                            out.push(d.day() as u8);
                        }
                        None => out.push(0),
                    }
                }
                DataType::Timestamp(_, _) => match timestamp_at(arr.as_ref(), row) {
                    Some(dt) => {
                        let micros = dt.nanosecond() / 1000;
                        out.push(if micros > 0 { 11 } else { 7 });
                        out.extend_from_slice(&(dt.year() as u16).to_le_bytes());
                        out.extend_from_slice(&[
                            dt.month() as u8,
                            dt.day() as u8,
                            dt.hour() as u8,
                            dt.minute() as u8,
                            dt.second() as u8,
                        ]);
                        if micros > 0 {
                            out.extend_from_slice(&micros.to_le_bytes());
                        }
                    }
                    None => out.push(0),
                },
                DataType::Decimal128(_, _) | DataType::Decimal256(_, _) => {
                    let s = self.text_value(c, row).unwrap_or_default();
                    put_lenenc_str(out, s.as_bytes());
                }
                _ => {
                    let s = self.text_value(c, row).unwrap_or_default();
                    put_lenenc_str(out, s.as_bytes());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        BooleanArray, Float64Array, Int32Array, StringArray, TimestampMicrosecondArray,
    };
    use std::sync::Arc;

    #[test]
    fn text_rows() {
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            Field::new("a", DataType::Int32, true),
            Field::new("b", DataType::Utf8, true),
            Field::new("c", DataType::Boolean, true),
            Field::new("d", DataType::Float64, true),
            Field::new("e", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(vec![Some(5), None])),
                Arc::new(StringArray::from(vec![Some("héllo"), Some("")])),
                Arc::new(BooleanArray::from(vec![true, false])),
                Arc::new(Float64Array::from(vec![100.0, 0.25])),
                Arc::new(TimestampMicrosecondArray::from(vec![
                    1_785_578_400_000_000,
                    1_785_578_400_500_000,
                ])),
            ],
        )
        .unwrap();
        let enc = RowEncoder::new(&batch);
        let mut out = vec![];
        enc.text_row(0, &mut out);
        let mut r = super::super::proto::Reader::new(&out);
        assert_eq!(r.lenenc_bytes().unwrap(), b"5");
        assert_eq!(r.lenenc_bytes().unwrap(), "héllo".as_bytes());
        assert_eq!(r.lenenc_bytes().unwrap(), b"1");
        assert_eq!(r.lenenc_bytes().unwrap(), b"100");
        assert_eq!(r.lenenc_bytes().unwrap(), b"2026-08-01 10:00:00");
        enc.text_row(1, &mut out);
        assert_eq!(out[0], 0xfb);
        assert!(String::from_utf8_lossy(&out).contains("10:00:00.500000"));
        enc.binary_row(1, &mut out);
        assert_eq!(out[1] & 0b100, 0b100, "null bit of column 0 at offset 2");
    }

    #[test]
    fn arrays_print_as_doris_prints_them() {
        use arrow::array::{ListBuilder, StringBuilder};
        let mut b = ListBuilder::new(StringBuilder::new());
        b.values().append_value("a");
        b.values().append_null();
        b.append(true);
        b.append(true);
        let strings: ArrayRef = Arc::new(b.finish());
        let floats: ArrayRef = Arc::new(arrow::array::ListArray::from_iter_primitive::<
            Float64Type,
            _,
            _,
        >(vec![Some(vec![Some(1.5), Some(4.0)])]));
        let text = |a: &ArrayRef, i| {
            let mut s = String::new();
            super::nested_text(a, i, &mut s);
            s
        };
        assert_eq!(text(&strings, 0), r#"["a", null]"#);
        assert_eq!(text(&strings, 1), "[]");
        assert_eq!(text(&floats, 0), "[1.5, 4]");
    }

    #[test]
    fn doubles_print_as_mysql_prints_them() {
        assert_eq!(fmt_float(1e300), "1e300");
        assert_eq!(fmt_float(1.5e-7), "1.5e-7");
        assert_eq!(fmt_float(0.000001), "0.000001");
        assert_eq!(fmt_float(1e15), "1e15");
        assert_eq!(fmt_float(123456789012345.0), "123456789012345");
        assert_eq!(fmt_float(2.5), "2.5");
        assert_eq!(fmt_float(-1.2345678901234568e20), "-1.2345678901234568e20");
    }

    #[test]
    fn null_columns_are_null() {
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![Field::new(
            "n",
            DataType::Null,
            true,
        )]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(arrow::array::NullArray::new(1))]).unwrap();
        let enc = RowEncoder::new(&batch);
        let mut out = vec![];
        enc.text_row(0, &mut out);
        assert_eq!(out, vec![0xfb]);
        enc.binary_row(0, &mut out);
        assert_eq!(out, vec![0, 0b100]);
    }

    #[test]
    fn column_types() {
        assert_eq!(
            column_def(&Field::new("x", DataType::Decimal128(10, 2), true)).column_type,
            T_NEWDECIMAL
        );
        assert_eq!(
            column_def(&Field::new("x", DataType::Utf8, false)).flags & NOT_NULL_FLAG,
            1
        );
    }
}

//! Doris' (MySQL's) calendar functions: `last_day`, `to_days`, `from_days`,
//! `makedate`, `timestampdiff(unit, a, b)` and `str_to_date(s, format)`.
//!
//! ```sql
//! SELECT timestampdiff(MONTH, '2026-01-31', '2026-02-28'), last_day('2024-02-10'),
//!        str_to_date('2026-08-01 10:20', '%Y-%m-%d %H:%i')
//! ```
//!
//! (the unit of `timestampdiff` is a bare word the FE passes as a string).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Date32Array, Int64Array, TimestampMicrosecondArray};
use arrow::compute::kernels::cast::cast;
use arrow::datatypes::{DataType, Field, FieldRef, Int64Type, TimeUnit};
use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime};
use datafusion::common::{ScalarValue, exec_err};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

/// `CAST(x AS DATETIME(p))` as the FE plans it: the timestamp rounded to
/// `p` fractional digits, half up (DataFusion's cast keeps them all).
pub const ROUND_DATETIME: &str = "tethys_round_datetime";

/// Days from 0000-01-01 as MySQL counts them (`to_days`), minus chrono's count.
const MYSQL_DAYNR_OFFSET: i64 = 365;
/// chrono's day number of 1970-01-01.
const EPOCH_CE: i32 = 719_163;

pub(super) fn udfs() -> Vec<Arc<ScalarUDF>> {
    [
        ("last_day", 1),
        ("to_days", 1),
        ("from_days", 1),
        ("makedate", 2),
        ("timestampdiff", 3),
        ("str_to_date", 2),
        (ROUND_DATETIME, 2),
    ]
    .into_iter()
    .map(|(name, n)| {
        Arc::new(ScalarUDF::from(CalendarFn {
            name,
            signature: Signature::any(n, Volatility::Immutable),
        }))
    })
    .collect()
}

/// A date as Arrow's Date32: days since 1970-01-01.
pub(super) fn date32(d: NaiveDate) -> i32 {
    d.num_days_from_ce() - EPOCH_CE
}

/// Whole `unit`s from `a` to `b` (MySQL's TIMESTAMPDIFF: months and years
/// count only when the day and time have come round).
pub fn timestampdiff(unit: &str, a: NaiveDateTime, b: NaiveDateTime) -> Option<i64> {
    let micros = (b - a).num_microseconds()?;
    let months = || {
        let mut m = (b.year() as i64 - a.year() as i64) * 12 + b.month() as i64 - a.month() as i64;
        let (ra, rb) = ((a.day(), a.time()), (b.day(), b.time()));
        if m > 0 && rb < ra {
            m -= 1;
        } else if m < 0 && rb > ra {
            m += 1;
        }
        m
    };
    Some(match unit.to_ascii_uppercase().as_str() {
        "MICROSECOND" => micros,
        "SECOND" => micros / 1_000_000,
        "MINUTE" => micros / 60_000_000,
        "HOUR" => micros / 3_600_000_000,
        "DAY" => micros / 86_400_000_000,
        "WEEK" => micros / (7 * 86_400_000_000),
        "MONTH" => months(),
        "QUARTER" => months() / 3,
        "YEAR" => months() / 12,
        _ => return None,
    })
}

/// MySQL `str_to_date` specifiers as chrono's; `None` for one chrono cannot read.
fn chrono_format(fmt: &str) -> Option<(String, bool)> {
    let mut out = String::new();
    let mut has_time = false;
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let spec = match chars.next()? {
            'Y' => "%Y",
            'y' => "%y",
            'm' | 'c' => "%m",
            'd' | 'e' => "%d",
            'M' => "%B",
            'b' => "%b",
            'j' => "%j",
            'H' | 'k' => {
                has_time = true;
                "%H"
            }
            'h' | 'I' | 'l' => {
                has_time = true;
                "%I"
            }
            'i' => {
                has_time = true;
                "%M"
            }
            's' | 'S' => {
                has_time = true;
                "%S"
            }
            'f' => {
                has_time = true;
                "%6f"
            }
            'p' => "%p",
            'T' => {
                has_time = true;
                "%H:%M:%S"
            }
            'r' => {
                has_time = true;
                "%I:%M:%S %p"
            }
            '%' => "%%",
            _ => return None,
        };
        out.push_str(spec);
    }
    Some((out, has_time))
}

/// MySQL's `str_to_date`: `None` for text that does not match the format.
pub fn str_to_date(s: &str, fmt: &str) -> Option<NaiveDateTime> {
    let (f, has_time) = chrono_format(fmt)?;
    if has_time {
        NaiveDateTime::parse_from_str(s.trim(), &f).ok()
    } else {
        NaiveDate::parse_from_str(s.trim(), &f)
            .ok()
            .map(|d| d.and_time(NaiveTime::MIN))
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct CalendarFn {
    name: &'static str,
    signature: Signature,
}

impl CalendarFn {
    /// `str_to_date` gives a DATE when its (constant) format has no time.
    fn result_type(&self, format: Option<&ScalarValue>) -> DataType {
        match self.name {
            "to_days" | "timestampdiff" => DataType::Int64,
            ROUND_DATETIME => DataType::Timestamp(TimeUnit::Microsecond, None),
            "str_to_date" => {
                let dated = format
                    .and_then(|f| match f {
                        ScalarValue::Utf8(Some(f)) | ScalarValue::Utf8View(Some(f)) => {
                            chrono_format(f)
                        }
                        _ => None,
                    })
                    .is_some_and(|(_, has_time)| !has_time);
                if dated {
                    DataType::Date32
                } else {
                    DataType::Timestamp(TimeUnit::Microsecond, None)
                }
            }
            _ => DataType::Date32,
        }
    }
}

impl ScalarUDFImpl for CalendarFn {
    named_by_fields!();
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(self.result_type(None))
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let second = args.scalar_arguments.get(1).copied().flatten();
        let field = Field::new(self.name, self.result_type(second), true);
        // A rounded datetime shows the digits it was cast to.
        if self.name == ROUND_DATETIME
            && let Some(ScalarValue::Int64(Some(p))) =
                second.and_then(|v| v.cast_to(&DataType::Int64).ok())
        {
            let ty = crate::types::ColumnType::DateTime {
                precision: p.clamp(0, 6) as u8,
            };
            let md = [(
                crate::schema::COLUMN_TYPE_METADATA_KEY.to_string(),
                ty.sql(),
            )];
            return Ok(Arc::new(field.with_metadata(md.into_iter().collect())));
        }
        Ok(Arc::new(field))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let arrays = super::arrays(&args)?;
        let int = |i: usize| cast(&arrays[i], &DataType::Int64);
        let text = |i: usize| cast(&arrays[i], &DataType::Utf8);
        let out: ArrayRef = match self.name {
            "last_day" => Arc::new(
                super::time::wall_clock(&arrays[0])?
                    .into_iter()
                    .map(|d| {
                        let d = d?.date();
                        let first_next = if d.month() == 12 {
                            NaiveDate::from_ymd_opt(d.year() + 1, 1, 1)
                        } else {
                            NaiveDate::from_ymd_opt(d.year(), d.month() + 1, 1)
                        }?;
                        Some(date32(first_next.pred_opt()?))
                    })
                    .collect::<Date32Array>(),
            ),
            "to_days" => Arc::new(
                super::time::wall_clock(&arrays[0])?
                    .into_iter()
                    .map(|d| Some(d?.date().num_days_from_ce() as i64 + MYSQL_DAYNR_OFFSET))
                    .collect::<Int64Array>(),
            ),
            "from_days" => {
                let days = int(0)?;
                Arc::new(
                    days.as_primitive::<Int64Type>()
                        .iter()
                        .map(|v| {
                            let ce = i32::try_from(v?.checked_sub(MYSQL_DAYNR_OFFSET)?).ok()?;
                            NaiveDate::from_num_days_from_ce_opt(ce).map(date32)
                        })
                        .collect::<Date32Array>(),
                )
            }
            "makedate" => {
                let (y, d) = (int(0)?, int(1)?);
                let (y, d) = (y.as_primitive::<Int64Type>(), d.as_primitive::<Int64Type>());
                Arc::new(
                    (0..n)
                        .map(|i| {
                            if y.is_null(i) || d.is_null(i) || d.value(i) <= 0 {
                                return None;
                            }
                            let jan1 =
                                NaiveDate::from_ymd_opt(i32::try_from(y.value(i)).ok()?, 1, 1)?;
                            let day =
                                jan1.checked_add_days(chrono::Days::new((d.value(i) - 1) as u64))?;
                            (day.year() <= 9999).then(|| date32(day))
                        })
                        .collect::<Date32Array>(),
                )
            }
            "timestampdiff" => {
                let unit = text(0)?;
                let unit = unit.as_string::<i32>();
                let (a, b) = (
                    super::time::wall_clock(&arrays[1])?,
                    super::time::wall_clock(&arrays[2])?,
                );
                Arc::new(
                    (0..n)
                        .map(|i| {
                            if unit.is_null(i) {
                                return None;
                            }
                            timestampdiff(unit.value(i), a[i]?, b[i]?)
                        })
                        .collect::<Int64Array>(),
                )
            }
            "str_to_date" => {
                let (s, f) = (text(0)?, text(1)?);
                let (s, f) = (s.as_string::<i32>(), f.as_string::<i32>());
                let parsed: Vec<Option<NaiveDateTime>> = (0..n)
                    .map(|i| {
                        if s.is_null(i) || f.is_null(i) {
                            return None;
                        }
                        str_to_date(s.value(i), f.value(i))
                    })
                    .collect();
                match args.return_field.data_type() {
                    DataType::Date32 => Arc::new(
                        parsed
                            .into_iter()
                            .map(|d| d.map(|d| date32(d.date())))
                            .collect::<Date32Array>(),
                    ),
                    _ => Arc::new(
                        parsed
                            .into_iter()
                            .map(|d| d.map(|d| d.and_utc().timestamp_micros()))
                            .collect::<TimestampMicrosecondArray>(),
                    ),
                }
            }
            ROUND_DATETIME => {
                let micros = cast(
                    &arrays[0],
                    &DataType::Timestamp(TimeUnit::Microsecond, None),
                )?;
                let p = int(1)?;
                let (micros, p) = (
                    micros.as_primitive::<arrow::datatypes::TimestampMicrosecondType>(),
                    p.as_primitive::<Int64Type>(),
                );
                Arc::new(
                    (0..n)
                        .map(|i| {
                            if micros.is_null(i) || p.is_null(i) {
                                return None;
                            }
                            let unit =
                                10i64.pow(6u32.saturating_sub(p.value(i).clamp(0, 6) as u32));
                            let v = micros.value(i);
                            Some(v.saturating_add(unit / 2).div_euclid(unit) * unit)
                        })
                        .collect::<TimestampMicrosecondArray>(),
                )
            }
            other => return exec_err!("unknown calendar function {other}"),
        };
        Ok(ColumnarValue::Array(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dt(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").expect("datetime")
    }

    #[test]
    fn mysql_calendar_answers() {
        // MySQL's manual: TO_DAYS(950501) = 728779, TIMESTAMPDIFF(MONTH,'2003-02-01','2003-05-01') = 3.
        let d = NaiveDate::from_ymd_opt(1995, 5, 1).expect("date");
        assert_eq!(d.num_days_from_ce() as i64 + MYSQL_DAYNR_OFFSET, 728_779);
        assert_eq!(
            timestampdiff(
                "month",
                dt("2003-02-01 00:00:00"),
                dt("2003-05-01 00:00:00")
            ),
            Some(3)
        );
        assert_eq!(
            timestampdiff(
                "MONTH",
                dt("2026-01-31 00:00:00"),
                dt("2026-02-28 00:00:00")
            ),
            Some(0)
        );
        assert_eq!(
            timestampdiff("YEAR", dt("2002-05-01 00:00:00"), dt("2001-01-01 00:00:00")),
            Some(-1)
        );
        assert_eq!(
            timestampdiff(
                "MINUTE",
                dt("2003-02-01 00:00:00"),
                dt("2003-05-01 12:05:55")
            ),
            Some(128_885)
        );
        assert_eq!(
            timestampdiff(
                "fortnight",
                dt("2003-02-01 00:00:00"),
                dt("2003-05-01 00:00:00")
            ),
            None
        );
        assert_eq!(
            str_to_date("2026-08-01 10:20", "%Y-%m-%d %H:%i"),
            Some(dt("2026-08-01 10:20:00"))
        );
        assert_eq!(
            str_to_date("01,5,2013", "%d,%m,%Y"),
            Some(dt("2013-05-01 00:00:00"))
        );
        assert_eq!(
            str_to_date("August 10 2026", "%M %d %Y"),
            Some(dt("2026-08-10 00:00:00"))
        );
        assert_eq!(str_to_date("not a date", "%Y-%m-%d"), None);
    }
}

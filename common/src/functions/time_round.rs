//! Doris' time-round family: `year_floor`, `quarter_floor` ... `second_floor`
//! and `year_ceil` ... `second_ceil`, each `(t [, period] [, origin])`:
//!
//! ```sql
//! SELECT hour_floor('2023-07-14 10:51:00', 5);   -- 2023-07-14 09:00:00
//! SELECT day_ceil(order_time, 7, '2024-01-01') FROM orders GROUP BY 1;
//! ```
//!
//! `t` is rounded down (up) to a boundary of `period` units counted from
//! `origin` (by default `0001-01-01 00:00:00`); a value on a boundary stays.
//! Weeks are 7 days from the origin, months and years calendar steps. A
//! DATE stays a DATE for day and longer units. `date_floor(t, INTERVAL n
//! unit)` / `date_ceil` are these (the FE rewrites them).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Date32Array, TimestampMicrosecondArray};
use arrow::compute::kernels::cast::cast;
use arrow::datatypes::{DataType, Int64Type, TimeUnit};
use chrono::{Datelike, Months, NaiveDate, NaiveDateTime};
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Unit {
    Year,
    Quarter,
    Month,
    Week,
    Day,
    Hour,
    Minute,
    Second,
}

impl Unit {
    /// Microseconds of one fixed-length unit; None for calendar units.
    fn micros(self) -> Option<i64> {
        Some(match self {
            Unit::Week => 7 * 86_400_000_000,
            Unit::Day => 86_400_000_000,
            Unit::Hour => 3_600_000_000,
            Unit::Minute => 60_000_000,
            Unit::Second => 1_000_000,
            Unit::Year | Unit::Quarter | Unit::Month => return None,
        })
    }
    fn keeps_dates(self) -> bool {
        matches!(
            self,
            Unit::Year | Unit::Quarter | Unit::Month | Unit::Week | Unit::Day
        )
    }
}

pub(super) fn udfs() -> Vec<Arc<ScalarUDF>> {
    let units = [
        ("year", Unit::Year),
        ("quarter", Unit::Quarter),
        ("month", Unit::Month),
        ("week", Unit::Week),
        ("day", Unit::Day),
        ("hour", Unit::Hour),
        ("minute", Unit::Minute),
        ("second", Unit::Second),
    ];
    let mut v = Vec::new();
    for (name, unit) in units {
        for ceil in [false, true] {
            v.push(Arc::new(ScalarUDF::from(TimeRound {
                name: format!("{name}_{}", if ceil { "ceil" } else { "floor" }),
                unit,
                ceil,
                signature: Signature::variadic_any(Volatility::Immutable),
            })));
        }
    }
    v
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TimeRound {
    name: String,
    unit: Unit,
    ceil: bool,
    signature: Signature,
}

/// Doris' default origin, `0001-01-01 00:00:00`.
fn default_origin() -> NaiveDateTime {
    NaiveDate::from_ymd_opt(1, 1, 1)
        .unwrap_or(NaiveDate::MIN)
        .and_time(chrono::NaiveTime::MIN)
}

/// `t` rounded to a boundary of `period` units from `origin`.
fn round(
    t: NaiveDateTime,
    unit: Unit,
    period: i64,
    origin: NaiveDateTime,
    ceil: bool,
) -> Option<NaiveDateTime> {
    if period <= 0 {
        return None;
    }
    let out = match unit.micros() {
        Some(len) => {
            let step = len.checked_mul(period)?;
            let delta = (t - origin).num_microseconds()?;
            let k = delta.div_euclid(step);
            let at = if ceil && delta.rem_euclid(step) != 0 {
                k + 1
            } else {
                k
            };
            origin.checked_add_signed(chrono::TimeDelta::microseconds(at.checked_mul(step)?))?
        }
        None => {
            let per = match unit {
                Unit::Year => 12,
                Unit::Quarter => 3,
                _ => 1,
            } * period;
            let months = |d: NaiveDateTime| i64::from(d.year()) * 12 + i64::from(d.month0());
            let shift = |k: i64| -> Option<NaiveDateTime> {
                let m = Months::new(u32::try_from(k.unsigned_abs()).ok()?);
                if k >= 0 {
                    origin.checked_add_months(m)
                } else {
                    origin.checked_sub_months(m)
                }
            };
            let mut k = (months(t) - months(origin)).div_euclid(per) * per;
            let mut at = shift(k)?;
            if at > t {
                k -= per;
                at = shift(k)?;
            }
            if ceil && at < t {
                at = shift(k + per)?;
            }
            at
        }
    };
    (1..=9999).contains(&out.year()).then_some(out)
}

impl ScalarUDFImpl for TimeRound {
    named_by_fields!();
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        if args.is_empty() || args.len() > 3 {
            return plan_err!(
                "{} takes 1 to 3 arguments: (t [, period] [, origin])",
                self.name
            );
        }
        Ok(match &args[0] {
            DataType::Date32 | DataType::Date64 if self.unit.keeps_dates() => DataType::Date32,
            // A zoned timestamp (`now()`) is rounded on its wall clock, and the
            // answer is a wall-clock DATETIME.
            DataType::Timestamp(_, _) => DataType::Timestamp(TimeUnit::Microsecond, None),
            t if t.is_numeric() => {
                return plan_err!(
                    "{}: the first argument must be a date or datetime, not {t}",
                    self.name
                );
            }
            _ => DataType::Timestamp(TimeUnit::Microsecond, None),
        })
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (constant, arrays) = super::constant_or_arrays(&args)?;
        let n = arrays[0].len();
        let times = super::time::wall_clock(&arrays[0])?;
        // `(t, period)`, `(t, origin)` or `(t, period, origin)`.
        let (period, origin) = match arrays.get(1) {
            Some(a) if a.data_type().is_integer() || a.data_type().is_null() => {
                (Some(cast(a, &DataType::Int64)?), arrays.get(2))
            }
            Some(a) if arrays.len() == 2 => (None, Some(a)),
            Some(_) => return exec_err!("{}: the period must be an integer", self.name),
            None => (None, None),
        };
        let period = period.as_ref().map(|p| p.as_primitive::<Int64Type>());
        let origins = origin.map(super::time::wall_clock).transpose()?;
        let rounded = (0..n).map(|i| {
            let t = times[i]?;
            let p = match period {
                Some(p) if p.is_null(i) => return None,
                Some(p) => p.value(i),
                None => 1,
            };
            let o = match &origins {
                Some(o) => o[i]?,
                None => default_origin(),
            };
            round(t, self.unit, p, o, self.ceil)
        });
        let out: ArrayRef = match args.return_field.data_type() {
            DataType::Date32 => Arc::new(
                rounded
                    .map(|t| t.map(|t| super::calendar::date32(t.date())))
                    .collect::<Date32Array>(),
            ),
            DataType::Timestamp(_, _) => Arc::new(
                rounded
                    .map(|t| t.map(|t| t.and_utc().timestamp_micros()))
                    .collect::<TimestampMicrosecondArray>(),
            ),
            t => return exec_err!("{} cannot return {t}", self.name),
        };
        super::constant_or_array(constant, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dt(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap()
    }

    #[test]
    fn doris_time_round() {
        let o = default_origin();
        let r = |t, u, p, c| round(dt(t), u, p, o, c).map(|x| x.to_string());
        assert_eq!(
            r("2023-07-14 10:51:00", Unit::Hour, 5, false).as_deref(),
            Some("2023-07-14 09:00:00")
        );
        assert_eq!(
            r("0001-01-01 00:00:16", Unit::Second, 5, false).as_deref(),
            Some("0001-01-01 00:00:15")
        );
        assert_eq!(
            r("2023-07-13 22:28:18", Unit::Minute, 5, false).as_deref(),
            Some("2023-07-13 22:25:00")
        );
        assert_eq!(
            r("2023-07-13 22:28:18", Unit::Minute, 5, true).as_deref(),
            Some("2023-07-13 22:30:00")
        );
        assert_eq!(
            r("2023-07-13 22:25:00", Unit::Minute, 5, true).as_deref(),
            Some("2023-07-13 22:25:00")
        );
        assert_eq!(
            r("2023-07-13 22:28:18", Unit::Month, 1, false).as_deref(),
            Some("2023-07-01 00:00:00")
        );
        assert_eq!(
            r("2023-07-13 22:28:18", Unit::Month, 5, true).as_deref(),
            Some("2023-12-01 00:00:00")
        );
        assert_eq!(
            r("2023-07-13 22:28:18", Unit::Year, 1, true).as_deref(),
            Some("2024-01-01 00:00:00")
        );
        assert_eq!(
            r("2023-07-13 00:00:00", Unit::Day, 1, true).as_deref(),
            Some("2023-07-13 00:00:00")
        );
        // 0001-01-01 is a Monday: weeks start on Mondays.
        assert_eq!(
            r("2023-07-13 22:28:18", Unit::Week, 1, false).as_deref(),
            Some("2023-07-10 00:00:00")
        );
        assert_eq!(r("2023-07-13 22:28:18", Unit::Week, 0, false), None);
        // Doris' regression answers (test_date_floor_ceil).
        assert_eq!(
            r("2023-07-14 10:51:00", Unit::Day, 5, false).as_deref(),
            Some("2023-07-10 00:00:00")
        );
        assert_eq!(
            r("2023-07-14 10:51:00", Unit::Month, 5, false).as_deref(),
            Some("2023-07-01 00:00:00")
        );
        assert_eq!(
            r("2023-07-14 10:51:00", Unit::Year, 5, true).as_deref(),
            Some("2026-01-01 00:00:00")
        );
        assert_eq!(
            r("2023-07-14 10:51:00", Unit::Quarter, 1, false).as_deref(),
            Some("2023-07-01 00:00:00")
        );
        let origin = dt("2023-07-13 22:00:00");
        assert_eq!(
            round(dt("2023-07-13 21:59:00"), Unit::Hour, 2, origin, false).map(|x| x.to_string()),
            Some("2023-07-13 20:00:00".into())
        );
    }
}

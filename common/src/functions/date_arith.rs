//! Doris date arithmetic: `date_add` / `adddate` / `date_sub` / `subdate`
//! (an integer of days or an `INTERVAL n unit`) and the unit functions
//! `years_add` ... `seconds_sub`.
//!
//! They follow Doris rather than DataFusion's `date + interval`: adding
//! months clamps to the end of the month (`2024-01-31` plus one month is
//! `2024-02-29`); a DATE stays a DATE for year, month, week and day steps and
//! becomes a DATETIME for hour, minute and second steps (DataFusion would drop
//! the time); a string argument is read as a DATETIME; a result outside
//! `0000-01-01 .. 9999-12-31` is NULL.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Date32Array, TimestampMicrosecondArray};
use arrow::compute::kernels::cast::cast;
use arrow::datatypes::{
    DataType, Date32Type, Field, FieldRef, Int64Type, IntervalMonthDayNanoType, TimeUnit,
    TimestampMicrosecondType,
};
use chrono::{DateTime, Datelike, Months, NaiveDateTime, TimeDelta};
use datafusion::common::{ScalarValue, exec_err, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

/// What the second argument counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Step {
    Years,
    Months,
    Weeks,
    Days,
    Hours,
    Minutes,
    Seconds,
    /// `date_add` and its spellings: an integer of days or an INTERVAL.
    DaysOrInterval,
}

impl Step {
    /// The step as (months, days, microseconds) per unit of the argument.
    fn per_unit(self) -> (i64, i64, i64) {
        match self {
            Step::Years => (12, 0, 0),
            Step::Months => (1, 0, 0),
            Step::Weeks => (0, 7, 0),
            Step::Days | Step::DaysOrInterval => (0, 1, 0),
            Step::Hours => (0, 0, 3_600_000_000),
            Step::Minutes => (0, 0, 60_000_000),
            Step::Seconds => (0, 0, 1_000_000),
        }
    }
}

pub(super) fn udfs() -> Vec<Arc<ScalarUDF>> {
    let mut v = Vec::new();
    for (unit, step) in [
        ("years", Step::Years),
        ("months", Step::Months),
        ("weeks", Step::Weeks),
        ("days", Step::Days),
        ("hours", Step::Hours),
        ("minutes", Step::Minutes),
        ("seconds", Step::Seconds),
    ] {
        v.push(DateArithFn::udf(format!("{unit}_add"), &[], step, 1));
        v.push(DateArithFn::udf(format!("{unit}_sub"), &[], step, -1));
    }
    v.push(DateArithFn::udf(
        "date_add".into(),
        &["adddate"],
        Step::DaysOrInterval,
        1,
    ));
    v.push(DateArithFn::udf(
        "date_sub".into(),
        &["subdate"],
        Step::DaysOrInterval,
        -1,
    ));
    v
}

/// One date arithmetic function: `sign` is 1 to add and -1 to subtract.
#[derive(Debug, PartialEq, Eq, Hash)]
struct DateArithFn {
    name: String,
    aliases: Vec<String>,
    step: Step,
    sign: i64,
    signature: Signature,
}

impl DateArithFn {
    fn udf(name: String, aliases: &[&str], step: Step, sign: i64) -> Arc<ScalarUDF> {
        Arc::new(ScalarUDF::from(DateArithFn {
            name,
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
            step,
            sign,
            signature: Signature::any(2, Volatility::Immutable),
        }))
    }

    /// The type of the result for these argument types; `amount` is the
    /// second argument when it is a constant.
    fn result_type(
        &self,
        value: &DataType,
        by: &DataType,
        amount: Option<&ScalarValue>,
    ) -> Result<DataType> {
        let timed_step = match by {
            DataType::Interval(_) if self.step == Step::DaysOrInterval => match amount {
                // A constant interval of whole days or months keeps a DATE a DATE.
                Some(s) => match s.cast_to(&DataType::Interval(
                    arrow::datatypes::IntervalUnit::MonthDayNano,
                ))? {
                    ScalarValue::IntervalMonthDayNano(Some(v)) => v.nanoseconds != 0,
                    _ => false,
                },
                None => true,
            },
            DataType::Interval(_) => {
                return plan_err!(
                    "{} takes an integer, not an INTERVAL; use date_add",
                    self.name
                );
            }
            t if t.is_integer() || t.is_null() => self.step.per_unit().2 != 0,
            t => {
                return plan_err!(
                    "{}: the second argument must be an integer{}, not {t}",
                    self.name,
                    if self.step == Step::DaysOrInterval {
                        " or an INTERVAL"
                    } else {
                        ""
                    }
                );
            }
        };
        match value {
            DataType::Date32 | DataType::Date64 if !timed_step => Ok(DataType::Date32),
            DataType::Date32 | DataType::Date64 | DataType::Null => {
                Ok(DataType::Timestamp(TimeUnit::Microsecond, None))
            }
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                Ok(DataType::Timestamp(TimeUnit::Microsecond, None))
            }
            DataType::Timestamp(_, tz) => {
                Ok(DataType::Timestamp(TimeUnit::Microsecond, tz.clone()))
            }
            t => plan_err!(
                "{}: the first argument must be a date or datetime, not {t}",
                self.name
            ),
        }
    }
}

impl ScalarUDFImpl for DateArithFn {
    named_by_fields!(with aliases);
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        match args {
            [value, by] => self.result_type(value, by, None),
            _ => plan_err!("{} takes two arguments", self.name),
        }
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let [value, by] = args.arg_fields else {
            return plan_err!("{} takes two arguments", self.name);
        };
        let amount = args.scalar_arguments.get(1).copied().flatten();
        let t = self.result_type(value.data_type(), by.data_type(), amount)?;
        Ok(Arc::new(Field::new(self.name(), t, true)))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (constant, arrays) = super::constant_or_arrays(&args)?;
        let [value, by] = arrays.as_slice() else {
            return exec_err!("{} takes two arguments", self.name);
        };
        // Each row's step as (months, days, microseconds).
        let steps: Vec<Option<(i64, i64, i64)>> = match by.data_type() {
            DataType::Interval(_) => cast(
                &by,
                &DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano),
            )?
            .as_primitive::<IntervalMonthDayNanoType>()
            .iter()
            .map(|v| {
                v.map(|v| {
                    (
                        self.sign * i64::from(v.months),
                        self.sign * i64::from(v.days),
                        self.sign * (v.nanoseconds / 1000),
                    )
                })
            })
            .collect(),
            _ => {
                let (m, d, us) = self.step.per_unit();
                cast(&by, &DataType::Int64)?
                    .as_primitive::<Int64Type>()
                    .iter()
                    .map(|k| {
                        let k = k?.checked_mul(self.sign)?;
                        Some((k.checked_mul(m)?, k.checked_mul(d)?, k.checked_mul(us)?))
                    })
                    .collect()
            }
        };
        let out: ArrayRef = match args.return_field.data_type() {
            DataType::Date32 => {
                let days = cast(&value, &DataType::Date32)?;
                let out: Date32Array = days
                    .as_primitive::<Date32Type>()
                    .iter()
                    .zip(&steps)
                    .map(|(d, s)| {
                        let (m, dd, _) = (*s)?;
                        let date = Date32Type::to_naive_date_opt(d?)?;
                        let shifted = shift(date.and_time(chrono::NaiveTime::MIN), m, dd, 0)?;
                        Some(super::calendar::date32(shifted.date()))
                    })
                    .collect();
                Arc::new(out)
            }
            DataType::Timestamp(_, tz) => {
                let micros = cast(&value, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
                let out: TimestampMicrosecondArray = micros
                    .as_primitive::<TimestampMicrosecondType>()
                    .iter()
                    .zip(&steps)
                    .map(|(t, s)| {
                        let (m, d, us) = (*s)?;
                        let at = DateTime::from_timestamp_micros(t?)?.naive_utc();
                        Some(shift(at, m, d, us)?.and_utc().timestamp_micros())
                    })
                    .collect();
                Arc::new(out.with_timezone_opt(tz.clone()))
            }
            t => return exec_err!("{} cannot return {t}", self.name),
        };
        super::constant_or_array(constant, out)
    }
}

/// `at` moved by months (clamped to the month's last day), then days, then
/// microseconds; None outside Doris' range of years 0 to 9999.
fn shift(at: NaiveDateTime, months: i64, days: i64, micros: i64) -> Option<NaiveDateTime> {
    let m = Months::new(u32::try_from(months.unsigned_abs()).ok()?);
    let at = if months >= 0 {
        at.checked_add_months(m)?
    } else {
        at.checked_sub_months(m)?
    };
    let at = at
        .checked_add_signed(TimeDelta::try_days(days)?)?
        .checked_add_signed(TimeDelta::microseconds(micros))?;
    (0..=9999).contains(&at.year()).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dt(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap()
    }

    #[test]
    fn months_clamp_and_range_ends_are_null() {
        assert_eq!(
            shift(dt("2024-01-31 10:00:00"), 1, 0, 0),
            Some(dt("2024-02-29 10:00:00"))
        );
        assert_eq!(
            shift(dt("2024-03-31 00:00:00"), -1, 0, 0),
            Some(dt("2024-02-29 00:00:00"))
        );
        assert_eq!(
            shift(dt("2024-02-29 00:00:00"), 12, 0, 0),
            Some(dt("2025-02-28 00:00:00"))
        );
        assert_eq!(
            shift(dt("2024-01-01 00:00:00"), 0, -1, 3_600_000_000),
            Some(dt("2023-12-31 01:00:00"))
        );
        assert_eq!(shift(dt("9999-12-31 00:00:00"), 0, 1, 0), None);
        assert_eq!(shift(dt("0000-01-01 00:00:00"), 0, 0, -1), None);
        assert_eq!(shift(dt("2024-01-01 00:00:00"), i64::MAX, 0, 0), None);
        assert_eq!(shift(dt("2024-01-01 00:00:00"), 0, i64::MAX, 0), None);
        assert_eq!(
            crate::functions::calendar::date32(
                chrono::NaiveDate::from_ymd_opt(1970, 1, 2).unwrap()
            ),
            1
        );
    }
}

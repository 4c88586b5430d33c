//! MySQL's week numbering (`calc_week` in MySQL's sql-common), which Doris
//! follows: `week(d, mode)`, `yearweek(d, mode)` and `date_format`'s `%U %u
//! %V %v %X %x`. A mode is three flags: Monday first, weeks counted within
//! the year the week belongs to (1..53, never 0), and whether week 1 is the
//! first week with the first weekday (else the first with 4 or more days).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int32Array};
use arrow::compute::kernels::cast::cast;
use arrow::datatypes::{DataType, Date32Type, Int64Type};
use chrono::{Datelike, NaiveDate};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, Signature, TypeSignature, Volatility,
};

use super::fixed::Fixed;

pub const MONDAY_FIRST: u32 = 1;
pub const WEEK_YEAR: u32 = 2;
pub const FIRST_WEEKDAY: u32 = 4;

fn days_in_year(year: i32) -> i64 {
    if NaiveDate::from_ymd_opt(year, 2, 29).is_some() {
        366
    } else {
        365
    }
}

/// `(year, week)` of `d` under the flags `behaviour`.
pub fn calc_week(d: NaiveDate, behaviour: u32) -> (i32, u32) {
    let monday_first = behaviour & MONDAY_FIRST != 0;
    let mut week_year = behaviour & WEEK_YEAR != 0;
    let first_weekday = behaviour & FIRST_WEEKDAY != 0;
    let daynr = d.num_days_from_ce() as i64;
    let Some(jan1) = NaiveDate::from_ymd_opt(d.year(), 1, 1) else {
        return (d.year(), 0);
    };
    let mut first_daynr = jan1.num_days_from_ce() as i64;
    let mut weekday = if monday_first {
        jan1.weekday().num_days_from_monday()
    } else {
        jan1.weekday().num_days_from_sunday()
    } as i64;
    let mut year = d.year();
    let late_start = |wd: i64| (first_weekday && wd != 0) || (!first_weekday && wd >= 4);
    if d.month() == 1 && (d.day() as i64) <= 7 - weekday {
        if !week_year && late_start(weekday) {
            return (year, 0);
        }
        week_year = true;
        year -= 1;
        let days = days_in_year(year);
        first_daynr -= days;
        weekday = (weekday + 53 * 7 - days) % 7;
    }
    let days = if late_start(weekday) {
        daynr - (first_daynr + (7 - weekday))
    } else {
        daynr - (first_daynr - weekday)
    };
    if week_year && days >= 52 * 7 {
        let wd = (weekday + days_in_year(year)) % 7;
        if (!first_weekday && wd < 4) || (first_weekday && wd == 0) {
            return (year + 1, 1);
        }
    }
    (year, (days / 7 + 1) as u32)
}

/// The flags of `week(d, mode)`'s mode (MySQL's `week_mode`).
pub fn week_mode(mode: i64) -> u32 {
    let mut b = (mode & 7) as u32;
    if b & MONDAY_FIRST == 0 {
        b ^= FIRST_WEEKDAY;
    }
    b
}

pub(super) fn udfs() -> Vec<Arc<ScalarUDF>> {
    ["week", "yearweek"]
        .into_iter()
        .map(|name| {
            Fixed::udf(
                name,
                Signature::one_of(
                    vec![TypeSignature::Any(1), TypeSignature::Any(2)],
                    Volatility::Immutable,
                ),
                DataType::Int32,
                week_fn,
            )
        })
        .collect()
}

/// `week(d[, mode])` and `yearweek(d[, mode])` (mode 0 by default).
fn week_fn(name: &str, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
    let n = args.number_rows;
    let arrays = super::arrays(&args)?;
    let dates = cast(&arrays[0], &DataType::Date32)?;
    let dates = dates.as_primitive::<Date32Type>();
    let modes: Option<ArrayRef> = match arrays.get(1) {
        Some(m) => Some(cast(m, &DataType::Int64)?),
        None => None,
    };
    let modes = modes.as_ref().map(|m| m.as_primitive::<Int64Type>());
    let out: Int32Array = (0..n)
        .map(|i| {
            if dates.is_null(i) || modes.is_some_and(|m| m.is_null(i)) {
                return None;
            }
            let d = dates.value_as_date(i)?;
            let mode = modes.map_or(0, |m| m.value(i));
            Some(if name == "week" {
                calc_week(d, week_mode(mode)).1 as i32
            } else {
                let (y, w) = calc_week(d, week_mode(mode) | WEEK_YEAR);
                y * 100 + w as i32
            })
        })
        .collect();
    Ok(ColumnarValue::Array(Arc::new(out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(y: i32, m: u32, day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, day).expect("date")
    }

    #[test]
    fn mysql_week_modes() {
        // MySQL's manual: WEEK('2008-02-20') = 7, WEEK('2008-02-20', 1) = 8,
        // WEEK('2008-12-31', 1) = 53; YEARWEEK('1987-01-01') = 198652.
        assert_eq!(calc_week(d(2008, 2, 20), week_mode(0)).1, 7);
        assert_eq!(calc_week(d(2008, 2, 20), week_mode(1)).1, 8);
        assert_eq!(calc_week(d(2008, 12, 31), week_mode(1)).1, 53);
        assert_eq!(
            calc_week(d(1987, 1, 1), week_mode(0) | WEEK_YEAR),
            (1986, 52)
        );
        // Mode 3 is ISO 8601.
        assert_eq!(calc_week(d(2021, 1, 1), week_mode(3)), (2020, 53));
        assert_eq!(calc_week(d(2026, 12, 31), week_mode(3)), (2026, 53));
        // January days before the first week are week 0 without WEEK_YEAR.
        assert_eq!(calc_week(d(2022, 1, 1), week_mode(0)).1, 0);
    }
}

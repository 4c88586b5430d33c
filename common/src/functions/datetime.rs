//! MySQL date/time functions: `date_format`, `from_unixtime`, `unix_timestamp`,
//! `datediff`, `year()`-style part extractors, and MySQL spellings of
//! DataFusion's date functions.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int32Array, Int64Array, StringBuilder};
use arrow::compute::kernels::cast::cast;
use arrow::compute::kernels::temporal::{DatePart, date_part};
use arrow::datatypes::{DataType, TimeUnit, TimestampMicrosecondType};
use chrono::{DateTime, Datelike, NaiveDateTime, Timelike, Utc};
use datafusion::common::{ScalarValue, exec_err};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, Signature, TypeSignature, Volatility,
};

use super::fixed::Fixed;
use super::timezone::{from_local, parse_tz, to_local};
use super::week::{FIRST_WEEKDAY, MONDAY_FIRST, WEEK_YEAR};

pub(super) fn udfs() -> Vec<Arc<ScalarUDF>> {
    let mut v: Vec<Arc<ScalarUDF>> = DATE_PARTS
        .iter()
        .map(|(name, _)| {
            Fixed::udf(
                name,
                Signature::any(1, Volatility::Immutable),
                DataType::Int32,
                date_part_fn,
            )
        })
        .collect();
    v.push(Fixed::udf(
        "date_format",
        Signature::any(2, Volatility::Immutable),
        DataType::Utf8,
        date_format,
    ));
    v.push(Fixed::udf(
        "from_unixtime",
        Signature::one_of(
            vec![TypeSignature::Any(1), TypeSignature::Any(2)],
            Volatility::Immutable,
        ),
        DataType::Utf8,
        from_unixtime,
    ));
    v.push(Fixed::udf(
        "unix_timestamp",
        Signature::one_of(
            vec![TypeSignature::Nullary, TypeSignature::Any(1)],
            Volatility::Stable,
        ),
        DataType::Int64,
        unix_timestamp,
    ));
    v.push(Fixed::udf(
        "datediff",
        Signature::any(2, Volatility::Immutable),
        DataType::Int32,
        datediff,
    ));
    let cd = datafusion::functions::datetime::current_date();
    v.push(Arc::new(cd.as_ref().clone().with_aliases(["curdate"])));
    let ct = datafusion::functions::datetime::current_time();
    v.push(Arc::new(ct.as_ref().clone().with_aliases(["curtime"])));
    v
}

/// Casts a date/time/string argument to naive microsecond timestamps.
fn to_micros(arr: &ArrayRef) -> Result<ArrayRef> {
    Ok(cast(
        arr,
        &DataType::Timestamp(TimeUnit::Microsecond, None),
    )?)
}

fn naive(micros: i64) -> Option<NaiveDateTime> {
    DateTime::<Utc>::from_timestamp_micros(micros).map(|d| d.naive_utc())
}

fn session_tz(args: &ScalarFunctionArgs) -> Result<arrow::array::timezone::Tz> {
    let name = args
        .config_options
        .execution
        .time_zone
        .clone()
        .unwrap_or_else(|| "+00:00".into());
    parse_tz(&name).map_err(|e| datafusion::error::DataFusionError::Execution(e.to_string()))
}

/// The calendar field each of `year(x)`, `month(x)`, ... reads.
const DATE_PARTS: [(&str, DatePart); 11] = [
    ("year", DatePart::Year),
    ("month", DatePart::Month),
    ("day", DatePart::Day),
    ("dayofmonth", DatePart::Day),
    ("hour", DatePart::Hour),
    ("minute", DatePart::Minute),
    ("second", DatePart::Second),
    ("quarter", DatePart::Quarter),
    ("dayofweek", DatePart::DayOfWeekSunday1),
    ("dayofyear", DatePart::DayOfYear),
    ("weekofyear", DatePart::WeekISO),
];

/// `year(x)`, `month(x)`, ...: one calendar field of a date or datetime.
fn date_part_fn(name: &str, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
    let Some(&(_, part)) = DATE_PARTS.iter().find(|(n, _)| *n == name) else {
        return exec_err!("{name} is not a calendar field");
    };
    let n = args.number_rows;
    let ts = to_micros(&args.args[0].to_array(n)?)?;
    let out = date_part(ts.as_ref(), part)?;
    Ok(ColumnarValue::Array(cast(&out, &DataType::Int32)?))
}

/// `date_format(datetime, format)` with MySQL format specifiers.
fn date_format(_: &str, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
    let n = args.number_rows;
    let ts = to_micros(&args.args[0].to_array(n)?)?;
    let fmt = cast(&args.args[1].to_array(n)?, &DataType::Utf8)?;
    let ts = ts.as_primitive::<TimestampMicrosecondType>();
    let fmt = fmt.as_string::<i32>();
    let mut b = StringBuilder::with_capacity(n, n * 20);
    for i in 0..n {
        match (ts.is_valid(i), fmt.is_valid(i)) {
            (true, true) => match naive(ts.value(i)) {
                Some(dt) => b.append_value(mysql_format(&dt, fmt.value(i))),
                None => b.append_null(),
            },
            _ => b.append_null(),
        }
    }
    Ok(ColumnarValue::Array(Arc::new(b.finish())))
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

fn week(dt: &NaiveDateTime, behaviour: u32) -> (i32, u32) {
    super::week::calc_week(dt.date(), behaviour)
}

/// `st`, `nd`, `rd`, `th` of a day of the month (`%D`).
fn ordinal_suffix(day: u32) -> &'static str {
    match (day % 10, day % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    }
}

/// Formats a datetime with MySQL's `DATE_FORMAT` specifiers.
pub fn mysql_format(dt: &NaiveDateTime, fmt: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(fmt.len() + 8);
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(s) = chars.next() else {
            break;
        };
        let h12 = match dt.hour() % 12 {
            0 => 12,
            h => h,
        };
        let _ = match s {
            'Y' => write!(out, "{:04}", dt.year()),
            'y' => write!(out, "{:02}", dt.year().rem_euclid(100)),
            'm' => write!(out, "{:02}", dt.month()),
            'c' => write!(out, "{}", dt.month()),
            'd' => write!(out, "{:02}", dt.day()),
            'e' => write!(out, "{}", dt.day()),
            'H' => write!(out, "{:02}", dt.hour()),
            'k' => write!(out, "{}", dt.hour()),
            'h' | 'I' => write!(out, "{h12:02}"),
            'l' => write!(out, "{h12}"),
            'i' => write!(out, "{:02}", dt.minute()),
            's' | 'S' => write!(out, "{:02}", dt.second()),
            'f' => write!(out, "{:06}", dt.nanosecond() / 1000),
            'p' => write!(out, "{}", if dt.hour() < 12 { "AM" } else { "PM" }),
            'M' => write!(out, "{}", MONTHS[dt.month0() as usize]),
            'b' => write!(out, "{}", &MONTHS[dt.month0() as usize][..3]),
            'W' => write!(
                out,
                "{}",
                WEEKDAYS[dt.weekday().num_days_from_monday() as usize]
            ),
            'a' => write!(
                out,
                "{}",
                &WEEKDAYS[dt.weekday().num_days_from_monday() as usize][..3]
            ),
            'j' => write!(out, "{:03}", dt.ordinal()),
            'w' => write!(out, "{}", dt.weekday().num_days_from_sunday()),
            'U' => write!(out, "{:02}", week(dt, FIRST_WEEKDAY).1),
            'u' => write!(out, "{:02}", week(dt, MONDAY_FIRST).1),
            'V' => write!(out, "{:02}", week(dt, WEEK_YEAR | FIRST_WEEKDAY).1),
            'v' => write!(out, "{:02}", week(dt, MONDAY_FIRST | WEEK_YEAR).1),
            'X' => write!(out, "{:04}", week(dt, WEEK_YEAR | FIRST_WEEKDAY).0),
            'x' => write!(out, "{:04}", week(dt, MONDAY_FIRST | WEEK_YEAR).0),
            'D' => write!(out, "{}{}", dt.day(), ordinal_suffix(dt.day())),
            'T' => write!(
                out,
                "{:02}:{:02}:{:02}",
                dt.hour(),
                dt.minute(),
                dt.second()
            ),
            'r' => write!(
                out,
                "{h12:02}:{:02}:{:02} {}",
                dt.minute(),
                dt.second(),
                if dt.hour() < 12 { "AM" } else { "PM" }
            ),
            '%' => write!(out, "%"),
            other => write!(out, "{other}"),
        };
    }
    out
}

/// `from_unixtime(seconds[, format])`: a UNIX time as local time text.
fn from_unixtime(_: &str, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
    let n = args.number_rows;
    let tz = session_tz(&args)?;
    let secs = cast(&args.args[0].to_array(n)?, &DataType::Int64)?;
    let secs = secs.as_primitive::<arrow::datatypes::Int64Type>();
    let fmt = match args.args.get(1) {
        Some(f) => Some(cast(&f.to_array(n)?, &DataType::Utf8)?),
        None => None,
    };
    let mut b = StringBuilder::with_capacity(n, n * 19);
    for i in 0..n {
        if !secs.is_valid(i) {
            b.append_null();
            continue;
        }
        let Some(utc) = DateTime::<Utc>::from_timestamp(secs.value(i), 0) else {
            b.append_null();
            continue;
        };
        let local = to_local(utc, &tz);
        match &fmt {
            Some(f) => {
                let f = f.as_string::<i32>();
                if f.is_valid(i) {
                    b.append_value(mysql_format(&local, f.value(i)))
                } else {
                    b.append_null()
                }
            }
            None => b.append_value(local.format("%Y-%m-%d %H:%M:%S").to_string()),
        }
    }
    Ok(ColumnarValue::Array(Arc::new(b.finish())))
}

/// `unix_timestamp([datetime])`: seconds since the epoch.
fn unix_timestamp(_: &str, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
    let n = args.number_rows;
    if args.args.is_empty() {
        return Ok(ColumnarValue::Scalar(ScalarValue::Int64(Some(
            Utc::now().timestamp(),
        ))));
    }
    let tz = session_tz(&args)?;
    let ts = to_micros(&args.args[0].to_array(n)?)?;
    let ts = ts.as_primitive::<TimestampMicrosecondType>();
    let out: Int64Array = ts
        .iter()
        .map(|v| {
            v.and_then(naive)
                .and_then(|l| from_local(l, &tz))
                .map(|u| u.timestamp())
        })
        .collect();
    Ok(ColumnarValue::Array(Arc::new(out)))
}

/// `datediff(a, b)`: whole days from b to a.
fn datediff(_: &str, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
    let n = args.number_rows;
    if args.args.len() != 2 {
        return exec_err!("datediff takes two arguments");
    }
    let a = cast(&args.args[0].to_array(n)?, &DataType::Date32)?;
    let b = cast(&args.args[1].to_array(n)?, &DataType::Date32)?;
    let a = a.as_primitive::<arrow::datatypes::Date32Type>();
    let b = b.as_primitive::<arrow::datatypes::Date32Type>();
    let out: Int32Array = a
        .iter()
        .zip(b.iter())
        .map(|(x, y)| match (x, y) {
            (Some(x), Some(y)) => Some(x - y),
            _ => None,
        })
        .collect();
    Ok(ColumnarValue::Array(Arc::new(out)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDateTime;

    #[test]
    fn mysql_format_specifiers() {
        let at = |s: &str| s.parse::<NaiveDateTime>().unwrap();
        let dt = at("2026-08-01T13:05:09");
        assert_eq!(
            mysql_format(&dt, "%Y-%m-%d %H:%i:%s"),
            "2026-08-01 13:05:09"
        );
        assert_eq!(mysql_format(&dt, "%Y%m"), "202608");
        assert_eq!(mysql_format(&dt, "%b %e, %l%p %%"), "Aug 1, 1PM %");
        assert_eq!(mysql_format(&dt, "%W %a %j"), "Saturday Sat 213");
        // 2026-08-01 is a Saturday: Sunday-first week 30, Monday-first 31.
        assert_eq!(
            mysql_format(&dt, "%U %u %V %v %X %x %D"),
            "30 31 30 31 2026 2026 1st"
        );
        let jan1 = at("2027-01-01T00:00:00");
        assert_eq!(
            mysql_format(&jan1, "%U %u %V %v %X %x %D"),
            "00 00 52 53 2026 2026 1st"
        );
    }
}

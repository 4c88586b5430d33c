//! MySQL's TIME-valued functions, with TIME as its text (`-838:59:59` to
//! `838:59:59`): Tethys has no TIME column type. Metabase asks every MySQL
//! database for its time zone with
//!
//! ```sql
//! SELECT @@GLOBAL.time_zone, @@system_time_zone,
//!        time_format(timediff(now(), convert_tz(now(), @@GLOBAL.time_zone, '+00:00')), '%H:%i')
//! ```

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray, TimestampMicrosecondArray};
use arrow::compute::kernels::cast::cast;
use arrow::datatypes::{DataType, TimeUnit, TimestampMicrosecondType};
use chrono::{DateTime, NaiveDateTime, Utc};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, Signature, Volatility,
};

use super::fixed::Fixed;
use super::timezone::{from_local, parse_tz, to_local};

pub(super) fn udfs() -> Vec<Arc<ScalarUDF>> {
    vec![
        Fixed::udf(
            "convert_tz",
            Signature::any(3, Volatility::Immutable),
            DataType::Timestamp(TimeUnit::Microsecond, None),
            time_fn,
        ),
        Fixed::udf(
            "timediff",
            Signature::any(2, Volatility::Immutable),
            DataType::Utf8,
            time_fn,
        ),
        Fixed::udf(
            "time_format",
            Signature::any(2, Volatility::Immutable),
            DataType::Utf8,
            time_fn,
        ),
    ]
}

/// Wall-clock datetimes of a date/datetime/string argument: a timestamp
/// with a zone (`now()`) is read in that zone, as MySQL shows it.
pub(super) fn wall_clock(arr: &ArrayRef) -> Result<Vec<Option<NaiveDateTime>>> {
    let zone = match arr.data_type() {
        DataType::Timestamp(_, Some(tz)) => Some(
            parse_tz(tz)
                .map_err(|e| datafusion::error::DataFusionError::Execution(e.to_string()))?,
        ),
        _ => None,
    };
    let micros = cast(arr, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
    let micros = micros.as_primitive::<TimestampMicrosecondType>();
    Ok(micros
        .iter()
        .map(|v| {
            let utc = DateTime::<Utc>::from_timestamp_micros(v?)?;
            Some(match &zone {
                Some(tz) => to_local(utc, tz),
                None => utc.naive_utc(),
            })
        })
        .collect())
}

/// `[-]HH:MM:SS[.ffffff]` of a number of microseconds, clamped to MySQL's range.
pub fn time_text(micros: i64) -> String {
    let max = (838 * 3600 + 59 * 60 + 59) * 1_000_000i64;
    let m = micros.clamp(-max, max);
    let (sign, m) = if m < 0 { ("-", -m) } else { ("", m) };
    let (secs, frac) = (m / 1_000_000, m % 1_000_000);
    let base = format!(
        "{sign}{:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    if frac == 0 {
        base
    } else {
        format!("{base}.{frac:06}")
    }
}

/// MySQL's `time_format(time, format)`: hour, minute, second and
/// fraction specifiers; `None` for a date specifier or a value that is not
/// a time (a datetime's time part is used).
pub fn time_format(time: &str, fmt: &str) -> Option<String> {
    let t = time.trim();
    let t = t.rsplit_once(' ').map_or(t, |(_, clock)| clock);
    let (neg, t) = t.strip_prefix('-').map_or((false, t), |r| (true, r));
    let (clock, frac) = t.split_once('.').unwrap_or((t, "0"));
    let mut parts = clock.split(':').map(|p| p.parse::<u32>().ok());
    let (h, m, s) = (
        parts.next()??,
        parts.next()??,
        parts.next().unwrap_or(Some(0))?,
    );
    let micros: u32 = format!("{frac:0<6}").get(..6)?.parse().ok()?;
    let h12 = if h % 12 == 0 { 12 } else { h % 12 };
    let ampm = if h % 24 < 12 { "AM" } else { "PM" };
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            'H' => out.push_str(&format!("{h:02}")),
            'k' => out.push_str(&h.to_string()),
            'h' | 'I' => out.push_str(&format!("{h12:02}")),
            'l' => out.push_str(&h12.to_string()),
            'i' => out.push_str(&format!("{m:02}")),
            's' | 'S' => out.push_str(&format!("{s:02}")),
            'f' => out.push_str(&format!("{micros:06}")),
            'p' => out.push_str(ampm),
            'r' => out.push_str(&format!("{h12:02}:{m:02}:{s:02} {ampm}")),
            'T' => out.push_str(&format!("{h:02}:{m:02}:{s:02}")),
            '%' => out.push('%'),
            'Y' | 'y' | 'm' | 'c' | 'd' | 'e' | 'D' | 'M' | 'b' | 'W' | 'a' | 'j' | 'U' | 'u'
            | 'V' | 'v' | 'X' | 'x' | 'w' => return None,
            other => out.push(other),
        }
    }
    Some(out)
}

/// `f(row, a, b)` of each row of the text arrays `a` and `b`; NULL where
/// either is NULL.
fn per_text_pair<T>(
    a: &ArrayRef,
    b: &ArrayRef,
    f: impl Fn(usize, &str, &str) -> Option<T>,
) -> Vec<Option<T>> {
    let (a, b) = (a.as_string::<i32>(), b.as_string::<i32>());
    (0..a.len())
        .map(|i| {
            if a.is_null(i) || b.is_null(i) {
                return None;
            }
            f(i, a.value(i), b.value(i))
        })
        .collect()
}

/// `convert_tz(dt, from, to)`, `timediff(a, b)` and `time_format(t, f)`.
fn time_fn(name: &str, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
    let n = args.number_rows;
    let arrays = super::arrays(&args)?;
    let text = |i: usize| cast(&arrays[i], &DataType::Utf8);
    let out: ArrayRef = match name {
        // convert_tz(dt, from, to): NULL for a zone it does not know, as in MySQL.
        "convert_tz" => {
            let dt = wall_clock(&arrays[0])?;
            let micros = per_text_pair(&text(1)?, &text(2)?, |i, from, to| {
                let (f, t) = (parse_tz(from).ok()?, parse_tz(to).ok()?);
                let utc = from_local(dt[i]?, &f)?;
                Some(to_local(utc, &t).and_utc().timestamp_micros())
            });
            Arc::new(TimestampMicrosecondArray::from(micros))
        }
        "timediff" => {
            let (a, b) = (wall_clock(&arrays[0])?, wall_clock(&arrays[1])?);
            Arc::new(
                (0..n)
                    .map(|i| {
                        let d = a[i]? - b[i]?;
                        Some(time_text(d.num_microseconds()?))
                    })
                    .collect::<StringArray>(),
            )
        }
        _ => Arc::new(StringArray::from(per_text_pair(
            &text(0)?,
            &text(1)?,
            |_, t, f| time_format(t, f),
        ))),
    };
    Ok(ColumnarValue::Array(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_values_and_formats() {
        assert_eq!(time_text(0), "00:00:00");
        assert_eq!(time_text(-(8 * 3600) * 1_000_000), "-08:00:00");
        assert_eq!(
            time_text((100 * 3600 + 61) * 1_000_000 + 5),
            "100:01:01.000005"
        );
        assert_eq!(time_text(i64::MAX), "838:59:59");
        assert_eq!(time_format("08:30:00", "%H:%i").as_deref(), Some("08:30"));
        assert_eq!(time_format("-08:00:00", "%H:%i").as_deref(), Some("-08:00"));
        assert_eq!(
            time_format("13:05:09.5", "%r %f").as_deref(),
            Some("01:05:09 PM 500000")
        );
        assert_eq!(
            time_format("2026-08-01 13:05:09", "%T").as_deref(),
            Some("13:05:09")
        );
        assert_eq!(time_format("13:05:09", "%Y"), None);
        assert_eq!(time_format("nonsense", "%H"), None);
    }
}

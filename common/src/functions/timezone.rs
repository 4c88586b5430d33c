//! Session time zones: Doris' `time_zone` variable accepts IANA names
//! (`Asia/Shanghai`), offsets (`+08:00`) and `UTC`.

use std::str::FromStr;

use arrow::array::timezone::Tz;
use chrono::{DateTime, NaiveDateTime, Offset, TimeZone, Utc};

use crate::error::{Result, TethysError};

/// Parses a time zone name the way `SET time_zone` accepts it.
pub fn parse_tz(name: &str) -> Result<Tz> {
    let n = name.trim();
    let n = if n.eq_ignore_ascii_case("utc")
        || n.eq_ignore_ascii_case("gmt")
        || n.eq_ignore_ascii_case("system")
    {
        "+00:00"
    } else {
        n
    };
    Tz::from_str(n).map_err(|_| TethysError::WrongVariableValue("time_zone".into(), name.into()))
}

/// Local wall-clock time in `tz` for a UTC instant.
pub fn to_local(utc: DateTime<Utc>, tz: &Tz) -> NaiveDateTime {
    utc.with_timezone(tz).naive_local()
}

/// The UTC instant of a local wall-clock time in `tz` (earliest if ambiguous).
pub fn from_local(local: NaiveDateTime, tz: &Tz) -> Option<DateTime<Utc>> {
    tz.from_local_datetime(&local)
        .earliest()
        .map(|d| d.with_timezone(&Utc))
}

/// The UTC offset in seconds of `tz` at the given instant.
pub fn offset_seconds(utc: DateTime<Utc>, tz: &Tz) -> i32 {
    utc.with_timezone(tz).offset().fix().local_minus_utc()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones() {
        assert!(parse_tz("Asia/Shanghai").is_ok());
        assert!(parse_tz("+08:00").is_ok());
        assert!(parse_tz("UTC").is_ok());
        assert!(parse_tz("Mars/Base").is_err());
        let tz = parse_tz("+08:00").unwrap();
        let now = Utc::now();
        assert_eq!(offset_seconds(now, &tz), 8 * 3600);
    }
}

//! The type letters of a `query` record, checked against the MySQL column
//! types of the result (the runner uses the strict validator, so
//! `query IT` fails when the first column comes back as DECIMAL).
//!
//! | letter | MySQL column types |
//! |---|---|
//! | `I` | TINY, SHORT, INT24, LONG, LONGLONG, YEAR (integers, BOOLEAN) |
//! | `R` | FLOAT, DOUBLE |
//! | `N` | DECIMAL, NEWDECIMAL |
//! | `D` | DATE, NEWDATE |
//! | `P` | DATETIME, TIMESTAMP (and their fractional forms), TIME |
//! | `T` | everything else: strings, blobs, JSON, NULL, bitmaps |

use mysql_async::consts::ColumnType as My;
use sqllogictest::ColumnType;

/// One column's type letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SltType {
    Integer,
    Float,
    Decimal,
    Date,
    DateTime,
    Text,
}

impl SltType {
    /// The letter a result column of MySQL type `t` must be declared with.
    pub fn of(t: My) -> Self {
        match t {
            My::MYSQL_TYPE_TINY
            | My::MYSQL_TYPE_SHORT
            | My::MYSQL_TYPE_INT24
            | My::MYSQL_TYPE_LONG
            | My::MYSQL_TYPE_LONGLONG
            | My::MYSQL_TYPE_YEAR => Self::Integer,
            My::MYSQL_TYPE_FLOAT | My::MYSQL_TYPE_DOUBLE => Self::Float,
            My::MYSQL_TYPE_DECIMAL | My::MYSQL_TYPE_NEWDECIMAL => Self::Decimal,
            My::MYSQL_TYPE_DATE | My::MYSQL_TYPE_NEWDATE => Self::Date,
            My::MYSQL_TYPE_DATETIME
            | My::MYSQL_TYPE_DATETIME2
            | My::MYSQL_TYPE_TIMESTAMP
            | My::MYSQL_TYPE_TIMESTAMP2
            | My::MYSQL_TYPE_TIME
            | My::MYSQL_TYPE_TIME2 => Self::DateTime,
            _ => Self::Text,
        }
    }
}

impl ColumnType for SltType {
    /// Unknown letters are refused (`None`): a typo is a parse error, not a
    /// column that matches anything.
    fn from_char(value: char) -> Option<Self> {
        Some(match value {
            'I' => Self::Integer,
            'R' => Self::Float,
            'N' => Self::Decimal,
            'D' => Self::Date,
            'P' => Self::DateTime,
            'T' => Self::Text,
            _ => return None,
        })
    }

    fn to_char(&self) -> char {
        match self {
            Self::Integer => 'I',
            Self::Float => 'R',
            Self::Decimal => 'N',
            Self::Date => 'D',
            Self::DateTime => 'P',
            Self::Text => 'T',
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_round_trip_and_unknown_letters_are_refused() {
        for c in ['I', 'R', 'N', 'D', 'P', 'T'] {
            assert_eq!(SltType::from_char(c).map(|t| t.to_char()), Some(c));
        }
        assert_eq!(SltType::from_char('?'), None);
        assert_eq!(SltType::from_char('X'), None);
    }

    #[test]
    fn decimal_is_not_float_and_datetime_is_not_text() {
        assert_eq!(SltType::of(My::MYSQL_TYPE_NEWDECIMAL), SltType::Decimal);
        assert_eq!(SltType::of(My::MYSQL_TYPE_DOUBLE), SltType::Float);
        assert_eq!(SltType::of(My::MYSQL_TYPE_DATETIME), SltType::DateTime);
        assert_eq!(SltType::of(My::MYSQL_TYPE_VAR_STRING), SltType::Text);
    }
}

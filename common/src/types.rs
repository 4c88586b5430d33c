//! Doris column types: parsing their SQL spelling, printing them the way Doris
//! does, and mapping them to Arrow.

use std::fmt;

use arrow::datatypes::{DataType, TimeUnit};

use crate::error::{Result, TethysError};

/// Maximum length of a VARCHAR, as in Doris.
pub const MAX_VARCHAR_LEN: u32 = 65533;

/// A column type as a Doris user writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColumnType {
    Boolean,
    TinyInt,
    SmallInt,
    Int,
    BigInt,
    /// 128-bit signed integer; carried in Arrow as `Decimal128(38, 0)`.
    LargeInt,
    Float,
    Double,
    Decimal {
        precision: u8,
        scale: u8,
    },
    Date,
    /// DATETIME(p), p fractional second digits (0..=6).
    DateTime {
        precision: u8,
    },
    Char(u32),
    Varchar(u32),
    String,
    /// A set of unsigned 64-bit integers (roaring), the value type of
    /// BITMAP_UNION columns; carried in Arrow as `Binary` (see
    /// `functions::bitmap`).
    Bitmap,
    /// A HyperLogLog sketch, the value type of HLL_UNION columns; carried in
    /// Arrow as `Binary` (see `functions::hll`).
    Hll,
}

impl ColumnType {
    /// Parses a type name and its arguments, e.g. `("decimal", [10, 2])`.
    pub fn from_parts(name: &str, args: &[u64]) -> Result<ColumnType> {
        let lname = name.to_ascii_lowercase();
        let bad = |why: &str| {
            TethysError::Analysis(format!("invalid type {}: {why}", name.to_uppercase()))
        };
        let no_args = |t: ColumnType| -> Result<ColumnType> {
            if args.is_empty() {
                Ok(t)
            } else {
                Err(bad("takes no length or precision"))
            }
        };
        match lname.as_str() {
            "boolean" | "bool" => no_args(ColumnType::Boolean),
            // Display widths such as INT(11) are accepted and ignored, as MySQL does.
            "tinyint" => Ok(ColumnType::TinyInt),
            "smallint" => Ok(ColumnType::SmallInt),
            "int" | "integer" => Ok(ColumnType::Int),
            "bigint" => Ok(ColumnType::BigInt),
            "largeint" => Ok(ColumnType::LargeInt),
            "float" => no_args(ColumnType::Float),
            "double" => no_args(ColumnType::Double),
            "decimal" | "decimalv3" | "decimalv2" | "numeric" => {
                let (p, s) = match args {
                    [] => (9, 0),
                    [p] => (*p, 0),
                    [p, s] => (*p, *s),
                    _ => return Err(bad("takes (precision, scale)")),
                };
                if !(1..=38).contains(&p) {
                    return Err(bad("precision must be between 1 and 38"));
                }
                if s > p {
                    return Err(bad("scale must not exceed precision"));
                }
                Ok(ColumnType::Decimal {
                    precision: p as u8,
                    scale: s as u8,
                })
            }
            "date" | "datev2" => no_args(ColumnType::Date),
            "datetime" | "datetimev2" => {
                let p = match args {
                    [] => 0,
                    [p] if *p <= 6 => *p,
                    _ => return Err(bad("precision must be between 0 and 6")),
                };
                Ok(ColumnType::DateTime { precision: p as u8 })
            }
            "char" => {
                let n = match args {
                    [] => 1,
                    [n] if (1..=255).contains(n) => *n,
                    _ => return Err(bad("length must be between 1 and 255")),
                };
                Ok(ColumnType::Char(n as u32))
            }
            "varchar" => {
                let n = match args {
                    [] => MAX_VARCHAR_LEN as u64,
                    [n] if (1..=MAX_VARCHAR_LEN as u64).contains(n) => *n,
                    _ => return Err(bad("length must be between 1 and 65533")),
                };
                Ok(ColumnType::Varchar(n as u32))
            }
            "string" | "text" => no_args(ColumnType::String),
            "bitmap" => no_args(ColumnType::Bitmap),
            "hll" => no_args(ColumnType::Hll),
            _ => Err(TethysError::NotSupported(format!(
                "column type {} is not supported yet",
                name.to_uppercase()
            ))),
        }
    }

    /// Parses the lower-case spelling produced by [`ColumnType::sql`].
    pub fn parse(text: &str) -> Result<ColumnType> {
        let text = text.trim();
        let (name, args) = match text.find('(') {
            Some(i) => {
                let inner = text[i + 1..]
                    .trim_end()
                    .strip_suffix(')')
                    .ok_or_else(|| TethysError::Analysis(format!("malformed type '{text}'")))?;
                let args = inner
                    .split(',')
                    .map(|a| {
                        a.trim()
                            .parse::<u64>()
                            .map_err(|_| TethysError::Analysis(format!("malformed type '{text}'")))
                    })
                    .collect::<Result<Vec<_>>>()?;
                (&text[..i], args)
            }
            None => (text, vec![]),
        };
        ColumnType::from_parts(name.trim(), &args)
    }

    /// The spelling SHOW CREATE TABLE uses (lower case), which re-parses.
    pub fn sql(&self) -> String {
        match self {
            ColumnType::Boolean => "boolean".into(),
            ColumnType::TinyInt => "tinyint".into(),
            ColumnType::SmallInt => "smallint".into(),
            ColumnType::Int => "int".into(),
            ColumnType::BigInt => "bigint".into(),
            ColumnType::LargeInt => "largeint".into(),
            ColumnType::Float => "float".into(),
            ColumnType::Double => "double".into(),
            ColumnType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
            ColumnType::Date => "date".into(),
            ColumnType::DateTime { precision: 0 } => "datetime".into(),
            ColumnType::DateTime { precision } => format!("datetime({precision})"),
            ColumnType::Char(n) => format!("char({n})"),
            ColumnType::Varchar(n) => format!("varchar({n})"),
            ColumnType::String => "text".into(),
            ColumnType::Bitmap => "bitmap".into(),
            ColumnType::Hll => "hll".into(),
        }
    }

    /// The upper-case spelling error messages use (`DECIMAL(10, 2)`).
    pub fn desc(&self) -> String {
        match self {
            ColumnType::Decimal { precision, scale } => format!("DECIMAL({precision}, {scale})"),
            ColumnType::String => "TEXT".into(),
            other => other.sql().to_uppercase(),
        }
    }

    /// Doris' name of the type it stores (`InternalType` of `DESC t ALL`):
    /// dates, datetimes and decimals are Doris' version-2/3 types.
    pub fn internal_name(&self) -> String {
        match self {
            ColumnType::Decimal { precision, scale } => {
                format!("DECIMALV3({precision}, {scale})")
            }
            ColumnType::Date => "DATEV2".into(),
            ColumnType::DateTime { precision } => format!("DATETIMEV2({precision})"),
            other => other.desc(),
        }
    }

    /// The Arrow type that carries values of this column.
    pub fn arrow_type(&self) -> DataType {
        match self {
            ColumnType::Boolean => DataType::Boolean,
            ColumnType::TinyInt => DataType::Int8,
            ColumnType::SmallInt => DataType::Int16,
            ColumnType::Int => DataType::Int32,
            ColumnType::BigInt => DataType::Int64,
            ColumnType::LargeInt => DataType::Decimal128(38, 0),
            ColumnType::Float => DataType::Float32,
            ColumnType::Double => DataType::Float64,
            ColumnType::Decimal { precision, scale } => {
                DataType::Decimal128(*precision, *scale as i8)
            }
            ColumnType::Date => DataType::Date32,
            ColumnType::DateTime { .. } => DataType::Timestamp(TimeUnit::Microsecond, None),
            ColumnType::Char(_) | ColumnType::Varchar(_) | ColumnType::String => DataType::Utf8,
            ColumnType::Bitmap | ColumnType::Hll => DataType::Binary,
        }
    }

    /// Bytes this type contributes to a short-key prefix, `None` when it cannot
    /// be part of one (FLOAT/DOUBLE).
    pub fn fixed_width(&self) -> Option<usize> {
        match self {
            ColumnType::Boolean | ColumnType::TinyInt => Some(1),
            ColumnType::SmallInt => Some(2),
            ColumnType::Int | ColumnType::Date => Some(4),
            ColumnType::BigInt | ColumnType::DateTime { .. } => Some(8),
            ColumnType::LargeInt | ColumnType::Decimal { .. } => Some(16),
            ColumnType::Char(n) => Some(*n as usize),
            ColumnType::Varchar(_) => Some(20),
            ColumnType::Float
            | ColumnType::Double
            | ColumnType::String
            | ColumnType::Bitmap
            | ColumnType::Hll => None,
        }
    }

    /// Whether the type can be a key, partition or bucket column.
    pub fn can_be_key(&self) -> bool {
        !matches!(
            self,
            ColumnType::Float
                | ColumnType::Double
                | ColumnType::String
                | ColumnType::Bitmap
                | ColumnType::Hll
        )
    }

    /// Whether values are opaque objects (BITMAP, HLL): stored and merged,
    /// read only through their functions, never compared or indexed.
    pub fn is_object(&self) -> bool {
        matches!(self, ColumnType::Bitmap | ColumnType::Hll)
    }

    /// Whether SUM accepts the type.
    pub fn is_numeric(&self) -> bool {
        matches!(
            self,
            ColumnType::TinyInt
                | ColumnType::SmallInt
                | ColumnType::Int
                | ColumnType::BigInt
                | ColumnType::LargeInt
                | ColumnType::Float
                | ColumnType::Double
                | ColumnType::Decimal { .. }
        )
    }

    /// Whether the type is a string type.
    pub fn is_string(&self) -> bool {
        matches!(
            self,
            ColumnType::Char(_) | ColumnType::Varchar(_) | ColumnType::String
        )
    }

    /// Maximum byte length of a string value, if bounded.
    pub fn max_len(&self) -> Option<usize> {
        match self {
            ColumnType::Char(n) | ColumnType::Varchar(n) => Some(*n as usize),
            _ => None,
        }
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.sql())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_roundtrip() {
        for t in [
            "boolean",
            "tinyint",
            "int",
            "bigint",
            "largeint",
            "double",
            "decimal(10,2)",
            "date",
            "datetime",
            "datetime(3)",
            "char(5)",
            "varchar(32)",
            "text",
            "bitmap",
            "hll",
        ] {
            assert_eq!(ColumnType::parse(t).unwrap().sql(), t);
        }
        assert_eq!(ColumnType::parse("DECIMAL").unwrap().sql(), "decimal(9,0)");
        assert_eq!(ColumnType::parse("string").unwrap(), ColumnType::String);
        assert!(ColumnType::parse("decimal(50,2)").is_err());
        assert!(ColumnType::parse("geometry").is_err());
    }

    #[test]
    fn desc_spelling() {
        assert_eq!(
            ColumnType::parse("decimal(10,2)").unwrap().desc(),
            "DECIMAL(10, 2)"
        );
        assert_eq!(
            ColumnType::parse("varchar(3)").unwrap().desc(),
            "VARCHAR(3)"
        );
    }
}

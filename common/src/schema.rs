//! Table and tablet schemas: the columns a Doris table declares, and their
//! Arrow and protobuf forms.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};
use serde::{Deserialize, Serialize};
use tethys_proto::{ColumnPb, TabletSchemaPb};

use crate::error::{Result, TethysError};
use crate::types::ColumnType;

/// Arrow field metadata key holding the Doris type of a column, so that the
/// MySQL layer can report e.g. DATETIME precision and VARCHAR length.
pub const COLUMN_TYPE_METADATA_KEY: &str = "tethys.column_type";

/// One column of a table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    /// Doris type, stored in its SQL spelling.
    #[serde(with = "column_type_serde")]
    pub column_type: ColumnType,
    pub nullable: bool,
    pub is_key: bool,
    /// Default value as SQL literal text (`None`: no default, i.e. NULL).
    pub default: Option<String>,
    pub comment: String,
    /// Aggregation type of a value column in an AGGREGATE KEY table
    /// (`REPLACE` for every value column of a merge-on-read UNIQUE table).
    pub aggregation: Option<AggregationType>,
}

/// The key model of a table: what rows with equal keys become.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeysType {
    /// Keys only order the rows; every row is kept.
    #[default]
    Duplicate,
    /// Rows with equal keys are combined column by column by each value
    /// column's aggregation type.
    Aggregate,
    /// The newest row of a key replaces the older ones.
    Unique,
}

impl KeysType {
    /// The key clause keyword, e.g. `DUPLICATE KEY`.
    pub fn sql(&self) -> &'static str {
        match self {
            KeysType::Duplicate => "DUPLICATE KEY",
            KeysType::Aggregate => "AGGREGATE KEY",
            KeysType::Unique => "UNIQUE KEY",
        }
    }

    /// Doris' name of the model (`IndexKeysType` of `DESC t ALL`).
    pub fn doris_name(&self) -> &'static str {
        match self {
            KeysType::Duplicate => "DUP_KEYS",
            KeysType::Aggregate => "AGG_KEYS",
            KeysType::Unique => "UNIQUE_KEYS",
        }
    }

    fn pb(&self) -> tethys_proto::KeysTypePb {
        match self {
            KeysType::Duplicate => tethys_proto::KeysTypePb::KeysTypeDuplicate,
            KeysType::Aggregate => tethys_proto::KeysTypePb::KeysTypeAggregate,
            KeysType::Unique => tethys_proto::KeysTypePb::KeysTypeUnique,
        }
    }

    fn from_pb(k: tethys_proto::KeysTypePb) -> KeysType {
        match k {
            tethys_proto::KeysTypePb::KeysTypeDuplicate => KeysType::Duplicate,
            tethys_proto::KeysTypePb::KeysTypeAggregate => KeysType::Aggregate,
            tethys_proto::KeysTypePb::KeysTypeUnique => KeysType::Unique,
        }
    }
}

/// How a value column of an AGGREGATE KEY table combines rows with equal keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AggregationType {
    Sum,
    Max,
    Min,
    /// The value of the newest row.
    Replace,
    /// The newest non-NULL value.
    ReplaceIfNotNull,
    HllUnion,
    BitmapUnion,
}

impl AggregationType {
    /// The SQL spelling, as in `amount BIGINT SUM`.
    pub fn sql(&self) -> &'static str {
        match self {
            AggregationType::Sum => "SUM",
            AggregationType::Max => "MAX",
            AggregationType::Min => "MIN",
            AggregationType::Replace => "REPLACE",
            AggregationType::ReplaceIfNotNull => "REPLACE_IF_NOT_NULL",
            AggregationType::HllUnion => "HLL_UNION",
            AggregationType::BitmapUnion => "BITMAP_UNION",
        }
    }

    fn pb(&self) -> tethys_proto::AggregationPb {
        use tethys_proto::AggregationPb as A;
        match self {
            AggregationType::Sum => A::AggregationSum,
            AggregationType::Max => A::AggregationMax,
            AggregationType::Min => A::AggregationMin,
            AggregationType::Replace => A::AggregationReplace,
            AggregationType::ReplaceIfNotNull => A::AggregationReplaceIfNotNull,
            AggregationType::HllUnion => A::AggregationHllUnion,
            AggregationType::BitmapUnion => A::AggregationBitmapUnion,
        }
    }

    fn from_pb(a: tethys_proto::AggregationPb) -> Option<AggregationType> {
        use tethys_proto::AggregationPb as A;
        Some(match a {
            A::AggregationNone => return None,
            A::AggregationSum => AggregationType::Sum,
            A::AggregationMax => AggregationType::Max,
            A::AggregationMin => AggregationType::Min,
            A::AggregationReplace => AggregationType::Replace,
            A::AggregationReplaceIfNotNull => AggregationType::ReplaceIfNotNull,
            A::AggregationHllUnion => AggregationType::HllUnion,
            A::AggregationBitmapUnion => AggregationType::BitmapUnion,
        })
    }

    /// Parses the SQL spelling, case-insensitively.
    pub fn parse(s: &str) -> Option<AggregationType> {
        Some(match s.to_ascii_uppercase().as_str() {
            "SUM" => AggregationType::Sum,
            "MAX" => AggregationType::Max,
            "MIN" => AggregationType::Min,
            "REPLACE" => AggregationType::Replace,
            "REPLACE_IF_NOT_NULL" => AggregationType::ReplaceIfNotNull,
            "HLL_UNION" => AggregationType::HllUnion,
            "BITMAP_UNION" => AggregationType::BitmapUnion,
            _ => return None,
        })
    }
}

mod column_type_serde {
    use super::ColumnType;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &ColumnType, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&t.sql())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ColumnType, D::Error> {
        let s = String::deserialize(d)?;
        ColumnType::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl Column {
    /// A column with no default, comment or aggregation.
    pub fn new(
        name: impl Into<String>,
        column_type: ColumnType,
        nullable: bool,
        is_key: bool,
    ) -> Column {
        Column {
            name: name.into(),
            column_type,
            nullable,
            is_key,
            default: None,
            comment: String::new(),
            aggregation: None,
        }
    }

    /// This column with the aggregation type `aggregation`.
    pub fn with_aggregation(mut self, aggregation: Option<AggregationType>) -> Column {
        self.aggregation = aggregation;
        self
    }

    /// The Arrow field of this column. Field names are lower-cased because the
    /// SQL layer normalizes unquoted identifiers, and Doris column names are
    /// case-insensitive.
    pub fn arrow_field(&self) -> Field {
        let mut md = HashMap::new();
        md.insert(COLUMN_TYPE_METADATA_KEY.to_string(), self.column_type.sql());
        Field::new(
            self.name.to_lowercase(),
            self.column_type.arrow_type(),
            self.nullable,
        )
        .with_metadata(md)
    }
}

/// The storage schema of a table (and of each of its tablets).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TableSchema {
    pub columns: Vec<Column>,
    /// The first `num_key_columns` columns are the sort key.
    pub num_key_columns: usize,
    /// Page compression codec: "lz4" or "zstd".
    pub compression: String,
    /// Columns whose pages carry a bloom filter of their values (the
    /// `bloom_filter_columns` table property).
    #[serde(default)]
    pub bloom_filter_columns: Vec<String>,
    /// The key model; tables from before the data models are DUPLICATE.
    #[serde(default)]
    pub keys_type: KeysType,
    /// A UNIQUE table that resolves keys at load time (delete bitmaps)
    /// instead of at read time. Fixed at CREATE TABLE.
    #[serde(default)]
    pub merge_on_write: bool,
    /// The `disable_auto_compaction` table property: backends do not
    /// compact its tablets in the background (manual compaction still runs).
    #[serde(default)]
    pub disable_auto_compaction: bool,
}

impl TableSchema {
    /// Whether reads must merge rows with equal keys across rowsets:
    /// AGGREGATE and merge-on-read UNIQUE tables. Merge-on-write UNIQUE
    /// tables resolve keys when a load is published (delete bitmaps).
    pub fn merges_on_read(&self) -> bool {
        match self.keys_type {
            KeysType::Duplicate => false,
            KeysType::Aggregate => true,
            KeysType::Unique => !self.merge_on_write,
        }
    }

    /// How value column `i` combines rows with equal keys (`None` for key
    /// columns and DUPLICATE tables).
    pub fn merge_rule(&self, i: usize) -> Option<AggregationType> {
        let c = self.columns.get(i)?;
        if c.is_key {
            return None;
        }
        match self.keys_type {
            KeysType::Duplicate => None,
            KeysType::Unique => Some(AggregationType::Replace),
            KeysType::Aggregate => Some(c.aggregation.unwrap_or(AggregationType::Replace)),
        }
    }

    /// A batch of this table's columns with each `DATETIME(p)` value
    /// rounded to `p` fractional digits (half up, as MySQL and Doris store
    /// them: `DATETIME` keeps none). Loads round before routing, so a row
    /// lands in the partition of the value it is stored as.
    pub fn round_datetimes(
        &self,
        batch: arrow::record_batch::RecordBatch,
    ) -> Result<arrow::record_batch::RecordBatch> {
        use arrow::array::AsArray;
        use arrow::datatypes::TimestampMicrosecondType;
        let mut columns = batch.columns().to_vec();
        let mut changed = false;
        for (i, c) in self.columns.iter().enumerate() {
            let ColumnType::DateTime { precision } = c.column_type else {
                continue;
            };
            let Some(arr) = columns
                .get(i)
                .and_then(|a| a.as_primitive_opt::<TimestampMicrosecondType>())
            else {
                continue;
            };
            let unit = 10i64.pow(6u32.saturating_sub(precision as u32));
            if unit == 1 || arr.values().iter().all(|v| v % unit == 0) {
                continue;
            }
            let rounded: arrow::array::PrimitiveArray<TimestampMicrosecondType> =
                arr.unary(|v| v.saturating_add(unit / 2).div_euclid(unit) * unit);
            let rounded = rounded.with_timezone_opt(arr.timezone().map(|t| t.to_string()));
            columns[i] = std::sync::Arc::new(rounded) as arrow::array::ArrayRef;
            changed = true;
        }
        if !changed {
            return Ok(batch);
        }
        Ok(arrow::record_batch::RecordBatch::try_new(
            batch.schema(),
            columns,
        )?)
    }

    /// Arrow schema of the full table.
    pub fn arrow_schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.columns
                .iter()
                .map(|c| c.arrow_field())
                .collect::<Vec<_>>(),
        ))
    }

    /// Whether column `i`'s pages carry bloom filters.
    pub fn has_bloom(&self, i: usize) -> bool {
        self.columns.get(i).is_some_and(|c| {
            self.bloom_filter_columns
                .iter()
                .any(|b| b.eq_ignore_ascii_case(&c.name))
        })
    }

    /// Index of a column by name, case-insensitively.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// The protobuf form sent to backends.
    pub fn to_pb(&self) -> TabletSchemaPb {
        TabletSchemaPb {
            columns: self
                .columns
                .iter()
                .map(|c| ColumnPb {
                    name: c.name.clone(),
                    column_type: c.column_type.sql(),
                    nullable: c.nullable,
                    is_key: c.is_key,
                    aggregation: c
                        .aggregation
                        .map_or(tethys_proto::AggregationPb::AggregationNone, |a| a.pb())
                        .into(),
                })
                .collect(),
            num_key_columns: self.num_key_columns as u32,
            compression: if self.compression.eq_ignore_ascii_case("zstd") {
                tethys_proto::CompressionPb::CompressionZstd
            } else {
                tethys_proto::CompressionPb::CompressionLz4
            }
            .into(),
            bloom_filter_columns: self.bloom_filter_columns.clone(),
            keys_type: self.keys_type.pb().into(),
            merge_on_write: self.merge_on_write,
            disable_auto_compaction: self.disable_auto_compaction,
        }
    }

    /// Rebuilds a schema from its protobuf form; an enum value this build
    /// does not know is an error, never a default.
    pub fn from_pb(pb: &TabletSchemaPb) -> Result<TableSchema> {
        let columns = pb
            .columns
            .iter()
            .map(|c| {
                let aggregation = tethys_proto::AggregationPb::try_from(c.aggregation)
                    .map_err(|_| unknown("aggregation", c.aggregation))?;
                let column_type = ColumnType::parse(&c.column_type)?;
                Ok(Column::new(&c.name, column_type, c.nullable, c.is_key)
                    .with_aggregation(AggregationType::from_pb(aggregation)))
            })
            .collect::<Result<Vec<_>>>()?;
        let num_key_columns = pb.num_key_columns as usize;
        if num_key_columns > columns.len() {
            return Err(TethysError::Corruption(format!(
                "schema declares {num_key_columns} key columns but has {}",
                columns.len()
            )));
        }
        Ok(TableSchema {
            columns,
            num_key_columns,
            compression: match tethys_proto::CompressionPb::try_from(pb.compression) {
                Ok(tethys_proto::CompressionPb::CompressionZstd) => "zstd",
                Ok(tethys_proto::CompressionPb::CompressionLz4) => "lz4",
                Err(_) => return Err(unknown("compression", pb.compression)),
            }
            .into(),
            bloom_filter_columns: pb.bloom_filter_columns.clone(),
            keys_type: KeysType::from_pb(
                tethys_proto::KeysTypePb::try_from(pb.keys_type)
                    .map_err(|_| unknown("keys type", pb.keys_type))?,
            ),
            merge_on_write: pb.merge_on_write,
            disable_auto_compaction: pb.disable_auto_compaction,
        })
    }
}

/// A schema field holding a value this build does not know.
fn unknown(what: &str, value: i32) -> TethysError {
    TethysError::Corruption(format!("tablet schema has unknown {what} {value}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pb_roundtrip() {
        let s = TableSchema {
            columns: vec![
                Column::new(
                    "Amount",
                    ColumnType::parse("decimal(10,2)").unwrap(),
                    true,
                    false,
                )
                .with_aggregation(Some(AggregationType::ReplaceIfNotNull)),
            ],
            num_key_columns: 0,
            compression: "zstd".into(),
            keys_type: KeysType::Aggregate,
            ..Default::default()
        };
        let back = TableSchema::from_pb(&s.to_pb()).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.columns[0].column_type, s.columns[0].column_type);
        assert_eq!(back.compression, "zstd");
        assert_eq!(s.arrow_schema().field(0).name(), "amount");
    }

    #[test]
    fn unknown_wire_enums_are_errors_not_defaults() {
        let mut pb = TableSchema::default().to_pb();
        pb.keys_type = 42;
        let e = TableSchema::from_pb(&pb).unwrap_err();
        assert!(e.to_string().contains("unknown keys type 42"), "{e}");
        let mut pb = TableSchema::default().to_pb();
        pb.compression = 7;
        assert!(TableSchema::from_pb(&pb).is_err());
    }
}

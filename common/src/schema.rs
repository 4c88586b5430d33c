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
    /// Aggregation type of a value column in an AGGREGATE KEY table.
    pub aggregation: Option<String>,
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
}

impl TableSchema {
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
                })
                .collect(),
            num_key_columns: self.num_key_columns as u32,
            compression: self.compression.clone(),
            bloom_filter_columns: self.bloom_filter_columns.clone(),
        }
    }

    /// Rebuilds a schema from its protobuf form.
    pub fn from_pb(pb: &TabletSchemaPb) -> Result<TableSchema> {
        let columns = pb
            .columns
            .iter()
            .map(|c| {
                Ok(Column {
                    name: c.name.clone(),
                    column_type: ColumnType::parse(&c.column_type)?,
                    nullable: c.nullable,
                    is_key: c.is_key,
                    default: None,
                    comment: String::new(),
                    aggregation: None,
                })
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
            compression: if pb.compression.is_empty() {
                "lz4".into()
            } else {
                pb.compression.clone()
            },
            bloom_filter_columns: pb.bloom_filter_columns.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pb_roundtrip() {
        let s = TableSchema {
            columns: vec![Column {
                name: "Amount".into(),
                column_type: ColumnType::parse("decimal(10,2)").unwrap(),
                nullable: true,
                is_key: false,
                default: None,
                comment: String::new(),
                aggregation: None,
            }],
            num_key_columns: 0,
            compression: "zstd".into(),
            bloom_filter_columns: vec![],
        };
        let back = TableSchema::from_pb(&s.to_pb()).unwrap();
        assert_eq!(back.columns[0].column_type, s.columns[0].column_type);
        assert_eq!(back.compression, "zstd");
        assert_eq!(s.arrow_schema().field(0).name(), "amount");
    }
}

//! Writes TPC-H `lineitem.tbl` as Parquet with ZSTD compression at level 3
//! (the level Tethys' ZSTD pages use) with the arrow crate's writer
//! (`parquet::arrow::ArrowWriter`, default properties otherwise) and prints
//! the file's size in bytes: the reference that `benches/storage` compares
//! Tethys' stored bytes with.
//!
//! `cargo run --release -p tethys-be --example parquet_zstd -- lineitem.tbl out.parquet`

use std::fs::File;
use std::io::BufReader;
use std::sync::Arc;

use arrow::csv::ReaderBuilder;
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

/// lineitem's columns with the types TPC-H declares, then the empty field
/// after each line's trailing `|`.
fn schema() -> Schema {
    let dec = DataType::Decimal128(15, 2);
    let col = |name: &str, dt: &DataType| Field::new(name, dt.clone(), false);
    Schema::new(vec![
        col("l_orderkey", &DataType::Int64),
        col("l_partkey", &DataType::Int64),
        col("l_suppkey", &DataType::Int64),
        col("l_linenumber", &DataType::Int32),
        col("l_quantity", &dec),
        col("l_extendedprice", &dec),
        col("l_discount", &dec),
        col("l_tax", &dec),
        col("l_returnflag", &DataType::Utf8),
        col("l_linestatus", &DataType::Utf8),
        col("l_shipdate", &DataType::Date32),
        col("l_commitdate", &DataType::Date32),
        col("l_receiptdate", &DataType::Date32),
        col("l_shipinstruct", &DataType::Utf8),
        col("l_shipmode", &DataType::Utf8),
        col("l_comment", &DataType::Utf8),
        Field::new("end", DataType::Utf8, true),
    ])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, tbl, out] = args.as_slice() else {
        return Err("usage: parquet_zstd <lineitem.tbl> <out.parquet>".into());
    };
    let schema = Arc::new(schema());
    let columns: Vec<usize> = (0..16).collect();
    let reader = ReaderBuilder::new(schema.clone())
        .with_delimiter(b'|')
        .with_header(false)
        .with_projection(columns.clone())
        .build(BufReader::new(File::open(tbl)?))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
        .build();
    let mut writer = ArrowWriter::try_new(
        File::create(out)?,
        Arc::new(schema.project(&columns)?),
        Some(props),
    )?;
    for batch in reader {
        writer.write(&batch?)?;
    }
    writer.close()?;
    println!("{}", std::fs::metadata(out)?.len());
    Ok(())
}

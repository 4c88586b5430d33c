//! Segment files damaged anywhere, as a disk or a bad copy damages them: a
//! byte flipped or the file cut. Opening and reading every page, bloom
//! filter and the short-key index gives an error or exactly the values
//! written, never a panic, never other values, and never takes a second.

use std::sync::{Arc, OnceLock};

use arrow::array::{Decimal128Array, Int64Array, StringArray};
use tethys_common::schema::Column;
use tethys_common::types::ColumnType;

use super::*;

/// A real segment: sorted keys, strings with NULLs and few distinct values
/// (a dictionary page) and a bloom filter, decimals; three pages a column.
struct Clean {
    bytes: Vec<u8>,
    schema: TableSchema,
    batch: RecordBatch,
}

fn clean() -> &'static Clean {
    static CLEAN: OnceLock<Clean> = OnceLock::new();
    CLEAN.get_or_init(|| {
        let col = |n: &str, t: &str, key: bool| {
            Column::new(n, ColumnType::parse(t).expect("type"), !key, key)
        };
        let schema = TableSchema {
            columns: vec![
                col("k", "bigint", true),
                col("s", "varchar(16)", false),
                col("d", "decimal(12,2)", false),
            ],
            num_key_columns: 1,
            compression: "lz4".into(),
            bloom_filter_columns: vec!["s".into()],
            ..Default::default()
        };
        let n = 9000i64;
        let batch = RecordBatch::try_new(
            schema.arrow_schema(),
            vec![
                Arc::new(Int64Array::from((0..n).collect::<Vec<_>>())),
                Arc::new(StringArray::from(
                    (0..n)
                        .map(|i| (i % 7 != 0).then(|| format!("name-{}", i % 40)))
                        .collect::<Vec<_>>(),
                )),
                Arc::new(
                    Decimal128Array::from(
                        (0..n)
                            .map(|i| i128::from(i * 37 % 100_000))
                            .collect::<Vec<_>>(),
                    )
                    .with_precision_and_scale(12, 2)
                    .expect("decimal"),
                ),
            ],
        )
        .expect("batch");
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("clean.dat");
        write_segment(&path, &schema, &batch).expect("write");
        Clean {
            bytes: std::fs::read(&path).expect("read"),
            schema,
            batch,
        }
    })
}

proptest::proptest! {
    #[test]
    fn fuzz_damaged_segments_never_panic(
        at in proptest::prelude::any::<proptest::sample::Index>(),
        flip in 1u8..=255,
        cut in proptest::prelude::any::<bool>(),
    ) {
        let c = clean();
        let mut bytes = c.bytes.clone();
        let i = at.index(bytes.len());
        if cut {
            bytes.truncate(i);
        } else {
            bytes[i] ^= flip;
        }
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("damaged.dat");
        std::fs::write(&path, &bytes).expect("write");
        let started = std::time::Instant::now();
        if let Ok(seg) = Segment::open(&path, &c.schema) {
            let _ = seg.short_key_index();
            for col in 0..c.schema.columns.len() {
                let want = c.batch.column(col);
                let mut first = 0usize;
                for page in 0..seg.num_pages() {
                    let _ = seg.read_bloom(col, page);
                    if let Ok((got, _)) = seg.read_page(col, page, want.data_type()) {
                        let got = arrow::compute::cast(&got, want.data_type()).expect("cast");
                        proptest::prop_assert_eq!(
                            got.to_data(),
                            want.slice(first, got.len()).to_data(),
                            "byte {} ^ {}: column {} page {} reads other values", i, flip, col, page
                        );
                        first += got.len();
                    } else {
                        first += seg.footer().columns[col].pages[page].num_rows as usize;
                    }
                }
            }
        }
        proptest::prop_assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }
}

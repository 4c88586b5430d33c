//! Encode and decode throughput of each page encoding on one page
//! (4064 rows) of data shaped like TPC-H lineitem's columns, and of the
//! in-place sum a pushed-down `sum` takes of integer and decimal pages.
//!
//! `cargo bench -p tethys-be --bench encodings` (criterion prints time per
//! page and rows/s; results in `benches/results/encodings-*.md`).

use std::hint::black_box;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int64Array, StringArray,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tethys_be::storage::bench::Encoding;
use tethys_be::storage::bench::{decode_page, encode_page, sum_page};

const ROWS: usize = 4064;

/// A deterministic pseudo-random sequence.
fn rnd(i: usize) -> u64 {
    (i as u64 ^ 0x5DEE_CE66D).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 17
}

/// (name, page, encodings to measure) for each column shape.
fn pages() -> Vec<(&'static str, ArrayRef, Vec<Encoding>)> {
    let ints = vec![
        Encoding::Plain,
        Encoding::For,
        Encoding::BitShuffle,
        Encoding::Rle,
        Encoding::Delta,
    ];
    vec![
        (
            "orderkey_i64_sorted",
            Arc::new(Int64Array::from_iter_values(
                (0..ROWS).map(|i| 4_000_000 + (i as i64 / 4) * 4),
            )),
            ints.clone(),
        ),
        (
            "price_decimal",
            Arc::new(
                Decimal128Array::from_iter_values(
                    (0..ROWS).map(|i| 90_000 + (rnd(i) % 10_000_000) as i128),
                )
                .with_precision_and_scale(15, 2)
                .unwrap_or_else(|e| panic!("{e}")),
            ),
            ints.clone(),
        ),
        (
            "shipdate_date",
            Arc::new(Date32Array::from_iter_values(
                (0..ROWS).map(|i| 8000 + (rnd(i) % 2500) as i32),
            )),
            ints.clone(),
        ),
        (
            "runs_i64",
            Arc::new(Int64Array::from_iter_values(
                (0..ROWS).map(|i| (i / 400) as i64),
            )),
            ints,
        ),
        (
            "double",
            Arc::new(Float64Array::from_iter_values(
                (0..ROWS).map(|i| (rnd(i) % 100_000) as f64 / 100.0),
            )),
            vec![Encoding::Plain, Encoding::BitShuffle, Encoding::Rle],
        ),
        (
            "bool_runs",
            Arc::new(BooleanArray::from_iter(
                (0..ROWS).map(|i| Some(i % 1000 < 500)),
            )),
            vec![Encoding::Plain, Encoding::Rle],
        ),
        (
            "shipmode_str",
            Arc::new(StringArray::from_iter_values((0..ROWS).map(|i| {
                ["AIR", "MAIL", "SHIP", "TRUCK", "RAIL", "FOB", "REG AIR"][rnd(i) as usize % 7]
            }))),
            vec![Encoding::Plain, Encoding::Dict],
        ),
        (
            "comment_str",
            Arc::new(StringArray::from_iter_values(
                (0..ROWS).map(|i| format!("carefully final deposits {} haggle", rnd(i))),
            )),
            vec![Encoding::Plain],
        ),
    ]
}

fn encodings(c: &mut Criterion) {
    for (name, page, encs) in pages() {
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Elements(ROWS as u64));
        for enc in encs {
            g.bench_function(format!("encode/{}", enc.name()), |b| {
                b.iter(|| encode_page(black_box(page.as_ref()), Some(enc)))
            });
            let (used, raw) = match encode_page(page.as_ref(), Some(enc)) {
                Ok(x) => x,
                Err(e) => panic!("{e}"),
            };
            assert_eq!(used, enc, "{name}");
            let dt = page.data_type().clone();
            g.bench_function(format!("decode/{}", enc.name()), |b| {
                b.iter(|| decode_page(black_box(&raw), &dt))
            });
            // What a pushed-down `sum` does with a page it can sum in place.
            if let Ok(Some(_)) = sum_page(&raw, &dt, ROWS) {
                g.bench_function(format!("sum/{}", enc.name()), |b| {
                    b.iter(|| sum_page(black_box(&raw), &dt, ROWS))
                });
            }
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(1));
    targets = encodings
}
criterion_main!(benches);

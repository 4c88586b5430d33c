//! Merging rows by key: the half of the AGGREGATE and UNIQUE models that
//! runs inside the backend. A load combines equal keys within its batch
//! (`combine_sorted`), reads combine them across rowsets, and compaction
//! rewrites rowsets through the same k-way merge (`KeyMerger`), so the three
//! places can never disagree on what a key's row is.
//!
//! Rows of one key are combined oldest first: sources are given oldest
//! first, and within a source rows keep their order. Key columns take the
//! group's first value (all are equal); value columns follow their
//! [`AggregationType`].

use std::cmp::Ordering;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, ArrowPrimitiveType, AsArray, PrimitiveArray, RecordBatch, UInt32Array,
    make_comparator,
};
use arrow::compute::{SortOptions, interleave, take};
use arrow::datatypes::{
    ArrowNativeTypeOp, DataType, Decimal128Type, Float32Type, Float64Type, Int8Type, Int16Type,
    Int32Type, Int64Type, SchemaRef,
};
use arrow::row::{RowConverter, Rows, SortField};
use tethys_common::functions::object::{ObjectKind, union_groups};
use tethys_common::schema::AggregationType;
use tethys_common::{Result, TethysError};

/// How the columns of a batch merge: which are keys and how each value
/// column combines.
#[derive(Debug, Clone)]
pub struct MergeSpec {
    /// Positions of the key columns in the batch, in key order.
    pub keys: Vec<usize>,
    /// Per batch column: how it combines (`None` for keys).
    pub rules: Vec<Option<AggregationType>>,
    /// False for DUPLICATE tables: rows are ordered by key but never combined.
    pub combine: bool,
}

impl MergeSpec {
    fn key_columns(&self, batch: &RecordBatch) -> Vec<ArrayRef> {
        self.keys.iter().map(|&k| batch.column(k).clone()).collect()
    }

    fn converter(&self, schema: &SchemaRef) -> Result<RowConverter> {
        let fields = self
            .keys
            .iter()
            .map(|&k| SortField::new(schema.field(k).data_type().clone()))
            .collect();
        Ok(RowConverter::new(fields)?)
    }
}

/// Combines the rows of a batch already sorted by key (equal keys in their
/// arrival order) into one row per key.
pub fn combine_sorted(batch: &RecordBatch, spec: &MergeSpec) -> Result<RecordBatch> {
    if !spec.combine || batch.num_rows() < 2 || spec.keys.is_empty() {
        return Ok(batch.clone());
    }
    let parts = arrow::compute::partition(&spec.key_columns(batch))?;
    if parts.len() == batch.num_rows() {
        return Ok(batch.clone());
    }
    let ends: Vec<usize> = parts.ranges().iter().map(|r| r.end).collect();
    combine_groups(batch, &ends, spec)
}

/// One row per group of consecutive rows `[ends[i-1], ends[i])`.
fn combine_groups(batch: &RecordBatch, ends: &[usize], spec: &MergeSpec) -> Result<RecordBatch> {
    let mut columns = Vec::with_capacity(batch.num_columns());
    for (i, col) in batch.columns().iter().enumerate() {
        let rule = spec.rules.get(i).copied().flatten();
        let out = match rule {
            Some(AggregationType::Sum) => sum_groups(col, ends)?,
            Some(AggregationType::BitmapUnion) => union_groups(ObjectKind::Bitmap, col, ends)?,
            Some(AggregationType::HllUnion) => union_groups(ObjectKind::Hll, col, ends)?,
            rule => {
                let idx = pick_groups(col, ends, rule);
                take(col.as_ref(), &idx, None)?
            }
        };
        columns.push(out);
    }
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

/// The row each group keeps for a column that picks one of its values.
fn pick_groups(col: &ArrayRef, ends: &[usize], rule: Option<AggregationType>) -> UInt32Array {
    let mut out = Vec::with_capacity(ends.len());
    let mut start = 0;
    let cmp = match rule {
        Some(AggregationType::Min | AggregationType::Max) => {
            make_comparator(col.as_ref(), col.as_ref(), SortOptions::default()).ok()
        }
        _ => None,
    };
    for &end in ends {
        let pick = match rule {
            // Keys: all equal.
            None => start,
            Some(AggregationType::ReplaceIfNotNull) => (start..end)
                .rev()
                .find(|&i| col.is_valid(i))
                .unwrap_or(end - 1),
            Some(a @ (AggregationType::Min | AggregationType::Max)) => {
                let want = if a == AggregationType::Min {
                    Ordering::Less
                } else {
                    Ordering::Greater
                };
                let mut best: Option<usize> = None;
                for i in start..end {
                    if col.is_null(i) {
                        continue;
                    }
                    best = match (best, &cmp) {
                        (Some(b), Some(c)) if c(i, b) != want => Some(b),
                        _ => Some(i),
                    };
                }
                best.unwrap_or(start)
            }
            // REPLACE (the union types never reach here): newest.
            Some(_) => end - 1,
        };
        out.push(pick as u32);
        start = end;
    }
    UInt32Array::from(out)
}

fn sum_typed<T: ArrowPrimitiveType>(a: &PrimitiveArray<T>, ends: &[usize]) -> ArrayRef
where
    T::Native: ArrowNativeTypeOp,
{
    let mut start = 0;
    let sums: PrimitiveArray<T> = ends
        .iter()
        .map(|&end| {
            let mut acc: Option<T::Native> = None;
            for i in start..end {
                if a.is_valid(i) {
                    let v = a.value(i);
                    acc = Some(acc.map_or(v, |s| s.add_wrapping(v)));
                }
            }
            start = end;
            acc
        })
        .collect();
    Arc::new(sums.with_data_type(a.data_type().clone()))
}

/// SUM per group; NULL where every value of the group is NULL.
fn sum_groups(col: &ArrayRef, ends: &[usize]) -> Result<ArrayRef> {
    Ok(match col.data_type() {
        DataType::Int8 => sum_typed(col.as_primitive::<Int8Type>(), ends),
        DataType::Int16 => sum_typed(col.as_primitive::<Int16Type>(), ends),
        DataType::Int32 => sum_typed(col.as_primitive::<Int32Type>(), ends),
        DataType::Int64 => sum_typed(col.as_primitive::<Int64Type>(), ends),
        DataType::Float32 => sum_typed(col.as_primitive::<Float32Type>(), ends),
        DataType::Float64 => sum_typed(col.as_primitive::<Float64Type>(), ends),
        DataType::Decimal128(_, _) => sum_typed(col.as_primitive::<Decimal128Type>(), ends),
        other => {
            return Err(TethysError::Internal(format!(
                "SUM aggregation over a {other} column"
            )));
        }
    })
}

/// A sorted input of the merge: yields batches sorted by key, oldest data
/// first when several are merged.
pub type BatchSource = Box<dyn FnMut() -> Result<Option<RecordBatch>> + Send>;

/// The head of one source.
struct Cursor {
    next: BatchSource,
    /// Index of the current batch in `KeyMerger::held`.
    slot: usize,
    pos: usize,
    len: usize,
}

/// K-way merge of sorted sources into batches of at most `batch_size` keys
/// (DUPLICATE: rows), combining equal keys by the spec.
pub struct KeyMerger {
    spec: MergeSpec,
    schema: SchemaRef,
    converter: RowConverter,
    cursors: Vec<Cursor>,
    /// Min-heap of live cursor indices by (key, cursor index).
    heap: Vec<usize>,
    /// Batches rows may still be picked from, with their keys in row form.
    held: Vec<(RecordBatch, Rows)>,
    batch_size: usize,
}

impl KeyMerger {
    /// Starts a merge of `sources` (oldest first) of batches in `schema`.
    pub fn new(
        schema: SchemaRef,
        spec: MergeSpec,
        sources: Vec<BatchSource>,
        batch_size: usize,
    ) -> Result<KeyMerger> {
        let converter = spec.converter(&schema)?;
        let mut m = KeyMerger {
            spec,
            schema,
            converter,
            cursors: Vec::with_capacity(sources.len()),
            heap: Vec::with_capacity(sources.len()),
            held: Vec::new(),
            batch_size: batch_size.max(1),
        };
        for next in sources {
            m.cursors.push(Cursor {
                next,
                slot: 0,
                pos: 0,
                len: 0,
            });
            let ci = m.cursors.len() - 1;
            if m.load(ci)? {
                m.heap.push(ci);
                m.sift_up(m.heap.len() - 1);
            }
        }
        Ok(m)
    }

    /// Reads the cursor's next non-empty batch; false at its end.
    fn load(&mut self, ci: usize) -> Result<bool> {
        loop {
            let Some(b) = (self.cursors[ci].next)()? else {
                return Ok(false);
            };
            if b.num_rows() == 0 {
                continue;
            }
            let rows = self.converter.convert_columns(&self.spec.key_columns(&b))?;
            let c = &mut self.cursors[ci];
            c.len = b.num_rows();
            c.pos = 0;
            c.slot = self.held.len();
            self.held.push((b, rows));
            return Ok(true);
        }
    }

    fn key_cmp(&self, a: usize, b: usize) -> Ordering {
        let (ca, cb) = (&self.cursors[a], &self.cursors[b]);
        let ra = self.held[ca.slot].1.row(ca.pos);
        let rb = self.held[cb.slot].1.row(cb.pos);
        ra.cmp(&rb).then(a.cmp(&b))
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let p = (i - 1) / 2;
            if self.key_cmp(self.heap[i], self.heap[p]) == Ordering::Less {
                self.heap.swap(i, p);
                i = p;
            } else {
                break;
            }
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < n && self.key_cmp(self.heap[l], self.heap[m]) == Ordering::Less {
                m = l;
            }
            if r < n && self.key_cmp(self.heap[r], self.heap[m]) == Ordering::Less {
                m = r;
            }
            if m == i {
                break;
            }
            self.heap.swap(i, m);
            i = m;
        }
    }

    /// The next merged batch; `None` when every source is exhausted.
    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        if self.heap.is_empty() {
            return Ok(None);
        }
        let mut picks: Vec<(usize, usize)> = Vec::with_capacity(self.batch_size);
        let mut ends: Vec<usize> = Vec::new();
        // The first row of the group being gathered, as (slot, row).
        let mut group: Option<(usize, usize)> = None;
        while let Some(&ci) = self.heap.first() {
            let (slot, pos) = (self.cursors[ci].slot, self.cursors[ci].pos);
            let same = self.spec.combine
                && group
                    .is_some_and(|(gs, gr)| self.held[gs].1.row(gr) == self.held[slot].1.row(pos));
            if !same {
                if !picks.is_empty() {
                    ends.push(picks.len());
                    if ends.len() >= self.batch_size {
                        break;
                    }
                }
                group = Some((slot, pos));
            }
            picks.push((slot, pos));
            let c = &mut self.cursors[ci];
            c.pos += 1;
            if c.pos == c.len && !self.load(ci)? {
                let last = self.heap.len() - 1;
                self.heap.swap(0, last);
                self.heap.pop();
            }
            if !self.heap.is_empty() {
                self.sift_down(0);
            }
        }
        if ends.last() != Some(&picks.len()) {
            ends.push(picks.len());
        }
        let columns = (0..self.schema.fields().len())
            .map(|c| {
                let arrays: Vec<&dyn Array> = self
                    .held
                    .iter()
                    .map(|(b, _)| b.column(c).as_ref())
                    .collect();
                interleave(&arrays, &picks)
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let merged = RecordBatch::try_new(self.schema.clone(), columns)?;
        self.release();
        if ends.len() == picks.len() {
            return Ok(Some(merged));
        }
        Ok(Some(combine_groups(&merged, &ends, &self.spec)?))
    }

    /// Drops held batches no cursor points into any more.
    fn release(&mut self) {
        let mut kept = Vec::with_capacity(self.cursors.len());
        let held = std::mem::take(&mut self.held);
        let mut remap = vec![usize::MAX; held.len()];
        for c in &self.cursors {
            if c.pos < c.len && remap[c.slot] == usize::MAX {
                remap[c.slot] = kept.len();
                kept.push(c.slot);
            }
        }
        let mut held: Vec<Option<(RecordBatch, Rows)>> = held.into_iter().map(Some).collect();
        self.held = kept.iter().filter_map(|&s| held[s].take()).collect();
        for c in &mut self.cursors {
            if c.pos < c.len {
                c.slot = remap[c.slot];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("v", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
        ]))
    }

    fn batch(k: &[i64], v: &[Option<i64>], s: &[Option<&str>]) -> RecordBatch {
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from(k.to_vec())),
                Arc::new(Int64Array::from(v.to_vec())),
                Arc::new(StringArray::from(s.to_vec())),
            ],
        )
        .unwrap()
    }

    fn spec(v: AggregationType, s: AggregationType) -> MergeSpec {
        MergeSpec {
            keys: vec![0],
            rules: vec![None, Some(v), Some(s)],
            combine: true,
        }
    }

    fn source(batches: Vec<RecordBatch>) -> BatchSource {
        let mut it = batches.into_iter();
        Box::new(move || Ok(it.next()))
    }

    fn rows(b: &RecordBatch) -> Vec<(i64, Option<i64>, Option<String>)> {
        let (k, v, s) = (
            b.column(0).as_primitive::<Int64Type>(),
            b.column(1).as_primitive::<Int64Type>(),
            b.column(2).as_string::<i32>(),
        );
        (0..b.num_rows())
            .map(|i| {
                (
                    k.value(i),
                    v.is_valid(i).then(|| v.value(i)),
                    s.is_valid(i).then(|| s.value(i).to_string()),
                )
            })
            .collect()
    }

    #[test]
    fn sum_and_replace_within_a_batch() {
        let b = batch(
            &[1, 1, 2, 3, 3, 3],
            &[Some(50), Some(30), None, Some(1), None, Some(2)],
            &[Some("new"), Some("paid"), Some("x"), Some("a"), None, None],
        );
        let out =
            combine_sorted(&b, &spec(AggregationType::Sum, AggregationType::Replace)).unwrap();
        assert_eq!(
            rows(&out),
            vec![
                (1, Some(80), Some("paid".into())),
                (2, None, Some("x".into())),
                (3, Some(3), None),
            ]
        );
        let out = combine_sorted(
            &b,
            &spec(AggregationType::Max, AggregationType::ReplaceIfNotNull),
        )
        .unwrap();
        assert_eq!(
            rows(&out),
            vec![
                (1, Some(50), Some("paid".into())),
                (2, None, Some("x".into())),
                (3, Some(2), Some("a".into())),
            ]
        );
        let out = combine_sorted(&b, &spec(AggregationType::Min, AggregationType::Min)).unwrap();
        assert_eq!(
            rows(&out),
            vec![
                (1, Some(30), Some("new".into())),
                (2, None, Some("x".into())),
                (3, Some(1), Some("a".into())),
            ]
        );
    }

    #[test]
    fn merge_across_sources_newest_last_and_groups_span_batches() {
        // Older source: keys 1..=5; newer: 2 and 4 again, split over two batches.
        let old = source(vec![
            batch(&[1, 2, 3], &[Some(1); 3], &[Some("o"); 3]),
            batch(&[4, 5], &[Some(1); 2], &[Some("o"); 2]),
        ]);
        let new = source(vec![
            batch(&[2], &[Some(10)], &[Some("n")]),
            batch(&[4], &[Some(10)], &[Some("n")]),
        ]);
        let mut m = KeyMerger::new(
            schema(),
            spec(AggregationType::Sum, AggregationType::Replace),
            vec![old, new],
            2,
        )
        .unwrap();
        let mut out = vec![];
        while let Some(b) = m.next_batch().unwrap() {
            assert!(b.num_rows() <= 2);
            out.extend(rows(&b));
        }
        let expect: Vec<_> = [
            (1, 1, "o"),
            (2, 11, "n"),
            (3, 1, "o"),
            (4, 11, "n"),
            (5, 1, "o"),
        ]
        .iter()
        .map(|(k, v, s)| (*k, Some(*v), Some(s.to_string())))
        .collect();
        assert_eq!(out, expect);
        // DUPLICATE: every row, in key order, older source first on ties.
        let a = source(vec![batch(&[1, 3], &[Some(1); 2], &[Some("a"); 2])]);
        let b = source(vec![batch(&[1, 2], &[Some(2); 2], &[Some("b"); 2])]);
        let dup = MergeSpec {
            keys: vec![0],
            rules: vec![None; 3],
            combine: false,
        };
        let mut m = KeyMerger::new(schema(), dup, vec![a, b], 3).unwrap();
        let first = rows(&m.next_batch().unwrap().unwrap());
        assert_eq!(
            first.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(),
            vec![(1, Some(1)), (1, Some(2)), (2, Some(2))]
        );
        assert_eq!(rows(&m.next_batch().unwrap().unwrap()).len(), 1);
        assert!(m.next_batch().unwrap().is_none());
    }

    /// The heap merge against sorting everything and
    /// combining: random sources of unique sorted keys, cut into batches at
    /// random, several batch sizes.
    #[test]
    fn merge_matches_sort_and_combine() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..200 {
            let nsources = 1 + next(6) as usize;
            let mut sources = vec![];
            let mut all = vec![];
            for si in 0..nsources {
                let keys: Vec<i64> = (0..60).filter(|_| next(3) == 0).collect();
                let vals: Vec<Option<i64>> =
                    keys.iter().map(|k| Some(si as i64 * 1000 + k)).collect();
                let names: Vec<Option<String>> =
                    keys.iter().map(|k| Some(format!("s{si}k{k}"))).collect();
                let refs: Vec<Option<&str>> = names.iter().map(|n| n.as_deref()).collect();
                let b = batch(&keys, &vals, &refs);
                all.push(b.clone());
                let mut parts = vec![];
                let mut at = 0;
                while at < b.num_rows() {
                    let len = (1 + next(8) as usize).min(b.num_rows() - at);
                    parts.push(b.slice(at, len));
                    at += len;
                }
                sources.push(source(parts));
            }
            let spec = spec(AggregationType::Sum, AggregationType::Replace);
            let size = 1 + next(10) as usize;
            let mut m = KeyMerger::new(schema(), spec.clone(), sources, size).unwrap();
            let mut got = vec![];
            while let Some(b) = m.next_batch().unwrap() {
                assert!(b.num_rows() <= size);
                got.extend(rows(&b));
            }
            let concat = arrow::compute::concat_batches(&schema(), &all).unwrap();
            let order = arrow::compute::lexsort_to_indices(
                &[
                    arrow::compute::SortColumn {
                        values: concat.column(0).clone(),
                        options: None,
                    },
                    arrow::compute::SortColumn {
                        values: Arc::new(UInt32Array::from_iter_values(
                            0..concat.num_rows() as u32,
                        )),
                        options: None,
                    },
                ],
                None,
            )
            .unwrap();
            let sorted = arrow::compute::take_record_batch(&concat, &order).unwrap();
            let want = rows(&combine_sorted(&sorted, &spec).unwrap());
            assert_eq!(got, want, "round {round}");
        }
    }
}

//! Where a row goes: its partition (by the range of the partition column)
//! and its bucket (a stable CRC32C hash of the bucket columns, so the same
//! row maps to the same tablet across restarts and versions).
//!
//! The FE routes INSERT rows and a coordinator BE routes Stream Load rows with
//! the same [`Router`], built the one way from the table's load plan
//! ([`Router::of_plan`]), so a row lands in the same tablet either way.

use std::collections::HashMap;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, UInt32Array};
use arrow::compute::take_record_batch;
use tethys_proto::{Int128Pb, LoadPlanPb};

use crate::{Result, TethysError};
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, TimestampMicrosecondType,
};

/// Partition-column values in the integer form range bounds use.
pub fn partition_keys(arr: &ArrayRef) -> Vec<Option<i128>> {
    let n = arr.len();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if arr.is_null(i) {
            out.push(None);
            continue;
        }
        out.push(Some(match arr.data_type() {
            DataType::Int8 => arr.as_primitive::<Int8Type>().value(i) as i128,
            DataType::Int16 => arr.as_primitive::<Int16Type>().value(i) as i128,
            DataType::Int32 => arr.as_primitive::<Int32Type>().value(i) as i128,
            DataType::Int64 => arr.as_primitive::<Int64Type>().value(i) as i128,
            DataType::Date32 => arr.as_primitive::<Date32Type>().value(i) as i128,
            DataType::Timestamp(_, _) => {
                arr.as_primitive::<TimestampMicrosecondType>().value(i) as i128
            }
            DataType::Decimal128(_, _) => arr.as_primitive::<Decimal128Type>().value(i),
            _ => {
                out.push(None);
                continue;
            }
        }));
    }
    out
}

/// Bucket hash of each row over the given columns.
pub fn bucket_hashes(columns: &[&ArrayRef], rows: usize) -> Vec<u32> {
    let mut h = vec![0u32; rows];
    for arr in columns {
        for (i, hv) in h.iter_mut().enumerate() {
            if arr.is_null(i) {
                *hv = crc32c::crc32c_append(*hv, &[0xff]);
                continue;
            }
            *hv = match arr.data_type() {
                DataType::Int8 => crc32c::crc32c_append(
                    *hv,
                    &(arr.as_primitive::<Int8Type>().value(i) as i64).to_le_bytes(),
                ),
                DataType::Int16 => crc32c::crc32c_append(
                    *hv,
                    &(arr.as_primitive::<Int16Type>().value(i) as i64).to_le_bytes(),
                ),
                DataType::Int32 => crc32c::crc32c_append(
                    *hv,
                    &(arr.as_primitive::<Int32Type>().value(i) as i64).to_le_bytes(),
                ),
                DataType::Int64 => crc32c::crc32c_append(
                    *hv,
                    &arr.as_primitive::<Int64Type>().value(i).to_le_bytes(),
                ),
                DataType::Date32 => crc32c::crc32c_append(
                    *hv,
                    &(arr.as_primitive::<Date32Type>().value(i) as i64).to_le_bytes(),
                ),
                DataType::Timestamp(_, _) => crc32c::crc32c_append(
                    *hv,
                    &arr.as_primitive::<TimestampMicrosecondType>()
                        .value(i)
                        .to_le_bytes(),
                ),
                DataType::Decimal128(_, _) => crc32c::crc32c_append(
                    *hv,
                    &arr.as_primitive::<Decimal128Type>().value(i).to_le_bytes(),
                ),
                DataType::Float32 => crc32c::crc32c_append(
                    *hv,
                    &(arr.as_primitive::<Float32Type>().value(i) as f64)
                        .to_bits()
                        .to_le_bytes(),
                ),
                DataType::Float64 => crc32c::crc32c_append(
                    *hv,
                    &arr.as_primitive::<Float64Type>()
                        .value(i)
                        .to_bits()
                        .to_le_bytes(),
                ),
                DataType::Boolean => crc32c::crc32c_append(*hv, &[arr.as_boolean().value(i) as u8]),
                DataType::Utf8 => {
                    crc32c::crc32c_append(*hv, arr.as_string::<i32>().value(i).as_bytes())
                }
                _ => *hv,
            };
        }
    }
    h
}

/// One partition as the router sees it: `[lower, upper)` in the partition
/// column's integer form (`None`: unbounded), and its tablets in bucket order.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionRoute {
    pub partition_id: i64,
    pub lower: Option<i128>,
    pub upper: Option<i128>,
    /// The tablet of each bucket.
    pub tablets: Vec<TabletRoute>,
}

/// A tablet and the backends of the replicas a load writes.
#[derive(Debug, Clone, PartialEq)]
pub struct TabletRoute {
    pub tablet_id: i64,
    /// Backends of the replicas to write (alive and up to date).
    pub backends: Vec<i64>,
    /// Replicas the tablet has in all; a majority of them must be written.
    pub replica_num: usize,
}

/// How rows pick a bucket.
#[derive(Debug, Clone, PartialEq)]
pub enum BucketRule {
    /// Hash of these column indexes.
    Hash(Vec<usize>),
    /// Batches spread over the buckets in turn.
    Random,
}

/// Rows bound for one tablet.
#[derive(Debug)]
pub struct Routed {
    pub tablet: TabletRoute,
    pub partition_id: i64,
    pub batch: RecordBatch,
}

/// Routed rows, and the rows that fit no partition as (row index, reason).
pub type RouteResult = (Vec<Routed>, Vec<(usize, String)>);

/// Routes rows of a table to tablets.
#[derive(Debug, Clone)]
pub struct Router {
    /// Index of the RANGE partition column; `None` for one unpartitioned partition.
    pub partition_column: Option<usize>,
    pub partitions: Vec<PartitionRoute>,
    pub buckets: BucketRule,
    seq: usize,
}

/// A 128-bit partition bound as the load plan carries it.
pub fn int128_pb(v: i128) -> Int128Pb {
    Int128Pb {
        hi: (v >> 64) as i64,
        lo: v as u64,
    }
}

fn int128_of(v: &Int128Pb) -> i128 {
    ((v.hi as i128) << 64) | v.lo as i128
}

impl Router {
    /// The router of a table's load plan, limited to the named partitions
    /// (a Stream Load `partitions` header) when given.
    pub fn of_plan(plan: &LoadPlanPb, only: Option<&[String]>) -> Result<Router> {
        let named = |name: &str| {
            only.is_none_or(|names| names.iter().any(|n| n.eq_ignore_ascii_case(name)))
        };
        if let Some(unknown) = only.into_iter().flatten().find(|n| {
            !plan
                .partitions
                .iter()
                .any(|p| p.name.eq_ignore_ascii_case(n))
        }) {
            return Err(TethysError::Analysis(format!(
                "unknown partition: {unknown}"
            )));
        }
        let partitions = plan
            .partitions
            .iter()
            .filter(|p| named(&p.name))
            .map(|p| PartitionRoute {
                partition_id: p.partition_id,
                lower: p.lower.as_ref().map(int128_of),
                upper: p.upper.as_ref().map(int128_of),
                tablets: p
                    .tablets
                    .iter()
                    .map(|t| TabletRoute {
                        tablet_id: t.tablet_id,
                        backends: t.backend_ids.clone(),
                        replica_num: t.replica_num as usize,
                    })
                    .collect(),
            })
            .collect();
        let buckets = if plan.random_buckets {
            BucketRule::Random
        } else {
            BucketRule::Hash(plan.hash_columns.iter().map(|c| *c as usize).collect())
        };
        let column = usize::try_from(plan.partition_column).ok();
        Ok(Router::new(column, partitions, buckets))
    }

    fn new(
        partition_column: Option<usize>,
        partitions: Vec<PartitionRoute>,
        buckets: BucketRule,
    ) -> Self {
        Router {
            partition_column,
            partitions,
            buckets,
            seq: 0,
        }
    }

    fn partition_of(&self, key: Option<i128>) -> Option<usize> {
        match self.partition_column {
            None => (!self.partitions.is_empty()).then_some(0),
            Some(_) => {
                let k = key?;
                self.partitions.iter().position(|p| {
                    p.lower.is_none_or(|lo| lo <= k) && p.upper.is_none_or(|hi| k < hi)
                })
            }
        }
    }

    fn reject_reason(&self, batch: &RecordBatch, row: usize) -> String {
        let shown = match self.partition_column {
            Some(ci) => {
                let f = batch.schema().field(ci).name().clone();
                let v = arrow::util::display::array_value_to_string(batch.column(ci), row)
                    .unwrap_or_default();
                format!("{f}={v}")
            }
            None => String::new(),
        };
        format!("no partition for this tuple: {shown}")
    }

    /// The rows of `batch` that fit no partition, as (row index, reason),
    /// without splitting it.
    pub fn unroutable(&self, batch: &RecordBatch) -> Vec<(usize, String)> {
        let keys = match self.partition_column {
            Some(ci) => partition_keys(batch.column(ci)),
            None => vec![None; batch.num_rows()],
        };
        keys.into_iter()
            .enumerate()
            .filter(|(_, k)| self.partition_of(*k).is_none())
            .map(|(row, _)| (row, self.reject_reason(batch, row)))
            .collect()
    }

    /// Splits `batch` by tablet. Rows that fit no partition are returned
    /// separately as (row index, reason).
    pub fn route(&mut self, batch: &RecordBatch) -> Result<RouteResult, arrow::error::ArrowError> {
        let n = batch.num_rows();
        let keys = match self.partition_column {
            Some(ci) => partition_keys(batch.column(ci)),
            None => vec![None; n],
        };
        let buckets: Vec<usize> = match &self.buckets {
            BucketRule::Hash(cols) => {
                let arrays: Vec<&ArrayRef> = cols.iter().map(|c| batch.column(*c)).collect();
                bucket_hashes(&arrays, n)
                    .into_iter()
                    .map(|h| h as usize)
                    .collect()
            }
            BucketRule::Random => {
                self.seq = self.seq.wrapping_add(1);
                vec![self.seq; n]
            }
        };
        let mut groups: HashMap<(usize, usize), Vec<u32>> = HashMap::new();
        let mut rejected = vec![];
        for row in 0..n {
            match self.partition_of(keys[row]) {
                Some(p) => {
                    let nb = self.partitions[p].tablets.len().max(1);
                    groups
                        .entry((p, buckets[row] % nb))
                        .or_default()
                        .push(row as u32);
                }
                None => rejected.push((row, self.reject_reason(batch, row))),
            }
        }
        let mut out = Vec::with_capacity(groups.len());
        for ((p, b), rows) in groups {
            let part = &self.partitions[p];
            let Some(tablet) = part.tablets.get(b) else {
                continue;
            };
            let idx = UInt32Array::from(rows);
            out.push(Routed {
                tablet: tablet.clone(),
                partition_id: part.partition_id,
                batch: take_record_batch(batch, &idx)?,
            });
        }
        Ok((out, rejected))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use std::sync::Arc;

    #[test]
    fn stable_hashes() {
        let a: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 1]));
        let s: ArrayRef = Arc::new(StringArray::from(vec!["x", "y", "x"]));
        let h = bucket_hashes(&[&a, &s], 3);
        assert_eq!(h[0], h[2]);
        assert_ne!(h[0], h[1]);
        // Pinned: changing the hash would move existing rows to other buckets.
        let one: ArrayRef = Arc::new(Int64Array::from(vec![1001]));
        assert_eq!(
            bucket_hashes(&[&one], 1)[0],
            crc32c::crc32c_append(0, &1001i64.to_le_bytes())
        );
    }
}

#[cfg(test)]
mod router_tests {
    use super::*;
    use arrow::array::Int32Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn one(tablet_id: i64) -> TabletRoute {
        TabletRoute {
            tablet_id,
            backends: vec![1],
            replica_num: 1,
        }
    }

    #[test]
    fn routes_by_range_then_hash() {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int32, true)]));
        let batch = RecordBatch::try_new(
            schema,
            vec![Arc::new(Int32Array::from(vec![
                Some(1),
                Some(15),
                Some(30),
                None,
                Some(1),
            ]))],
        )
        .unwrap();
        let parts = vec![
            PartitionRoute {
                partition_id: 1,
                lower: None,
                upper: Some(10),
                tablets: vec![one(100), one(101)],
            },
            PartitionRoute {
                partition_id: 2,
                lower: Some(10),
                upper: Some(20),
                tablets: vec![one(200), one(201)],
            },
        ];
        let mut r = Router::new(Some(0), parts, BucketRule::Hash(vec![0]));
        let (routed, rejected) = r.route(&batch).unwrap();
        assert_eq!(rejected.iter().map(|r| r.0).collect::<Vec<_>>(), vec![2, 3]);
        assert!(rejected[0].1.contains("k=30"));
        let rows: usize = routed.iter().map(|r| r.batch.num_rows()).sum();
        assert_eq!(rows, 3);
        // Equal keys land in the same tablet.
        let with_one: Vec<_> = routed.iter().filter(|r| r.partition_id == 1).collect();
        assert_eq!(with_one.len(), 1);
        assert_eq!(with_one[0].batch.num_rows(), 2);
    }

    #[test]
    fn plan_bounds_keep_all_128_bits() {
        for v in [
            0i128,
            -1,
            1,
            i64::MIN as i128 - 7,
            i128::MAX,
            i128::MIN,
            20_240_101,
        ] {
            assert_eq!(int128_of(&int128_pb(v)), v);
        }
    }

    #[test]
    fn a_plan_limited_to_an_unknown_partition_is_refused() {
        let plan = LoadPlanPb {
            partition_column: -1,
            partitions: vec![tethys_proto::PartitionRoutePb {
                partition_id: 1,
                name: "p1".into(),
                tablets: vec![tethys_proto::TabletRoutePb {
                    tablet_id: 10,
                    backend_ids: vec![1],
                    replica_num: 1,
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let only = vec!["P1".to_string()];
        assert_eq!(
            Router::of_plan(&plan, Some(&only))
                .unwrap()
                .partitions
                .len(),
            1
        );
        let e = Router::of_plan(&plan, Some(&["p2".to_string()])).unwrap_err();
        assert!(e.to_string().contains("unknown partition: p2"), "{e}");
    }
}

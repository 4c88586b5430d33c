//! Zone maps: min, max and null count of a page or a segment, and the
//! `PruningStatistics` view DataFusion's `PruningPredicate` evaluates them with.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, UInt64Array};
use arrow::compute;
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, TimestampMicrosecondType,
};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};
use serde::{Deserialize, Serialize};

/// Strings longer than this get no zone map (a truncated max is not a bound).
const MAX_ZONE_STRING: usize = 512;

/// A bound value as stored in a segment footer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ZoneValue {
    /// Integers, dates (days) and datetimes (microseconds).
    I(i64),
    /// 128-bit decimals (unscaled), as text to survive JSON.
    D(String),
    /// Floating point.
    F(f64),
    /// Strings.
    S(String),
    /// Booleans.
    B(bool),
}

/// min / max / null count of a run of values.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ZoneMap {
    pub min: Option<ZoneValue>,
    pub max: Option<ZoneValue>,
    pub null_count: u64,
}

impl ZoneMap {
    /// Computes the zone map of an array.
    pub fn of(arr: &dyn Array) -> ZoneMap {
        let null_count = arr.logical_null_count() as u64;
        let (min, max) = match arr.data_type() {
            DataType::Int8 => prim::<Int8Type>(arr, |v| ZoneValue::I(v as i64)),
            DataType::Int16 => prim::<Int16Type>(arr, |v| ZoneValue::I(v as i64)),
            DataType::Int32 => prim::<Int32Type>(arr, |v| ZoneValue::I(v as i64)),
            DataType::Int64 => prim::<Int64Type>(arr, ZoneValue::I),
            DataType::Date32 => prim::<Date32Type>(arr, |v| ZoneValue::I(v as i64)),
            DataType::Timestamp(_, _) => prim::<TimestampMicrosecondType>(arr, ZoneValue::I),
            DataType::Decimal128(_, _) => {
                prim::<Decimal128Type>(arr, |v| ZoneValue::D(v.to_string()))
            }
            DataType::Float32 => prim::<Float32Type>(arr, |v| ZoneValue::F(v as f64)),
            DataType::Float64 => prim::<Float64Type>(arr, ZoneValue::F),
            DataType::Boolean => {
                let b = arr.as_boolean();
                (
                    compute::min_boolean(b).map(ZoneValue::B),
                    compute::max_boolean(b).map(ZoneValue::B),
                )
            }
            DataType::Utf8 => {
                let s = arr.as_string::<i32>();
                let min = compute::min_string(s);
                let max = compute::max_string(s);
                match (min, max) {
                    (Some(a), Some(b))
                        if a.len() <= MAX_ZONE_STRING && b.len() <= MAX_ZONE_STRING =>
                    {
                        (
                            Some(ZoneValue::S(a.to_string())),
                            Some(ZoneValue::S(b.to_string())),
                        )
                    }
                    _ => (None, None),
                }
            }
            _ => (None, None),
        };
        ZoneMap {
            min,
            max,
            null_count,
        }
    }

    /// Whether these are the zone map of `rows` rows with values whose
    /// bounds were not kept (strings over 512 bytes, types without bounds):
    /// nothing can be concluded about them, and a zone map covering them
    /// has no bounds either.
    pub fn bounds_unknown(&self, rows: u64) -> bool {
        self.null_count < rows && (self.min.is_none() || self.max.is_none())
    }

    /// Drops the bounds: they no longer hold for every row covered.
    pub fn forget_bounds(&mut self) {
        self.min = None;
        self.max = None;
    }

    /// Widens this zone map to cover `other` (whose bounds must be known,
    /// see [`Self::bounds_unknown`]; an unknown page makes the result
    /// unknown, which the caller records with [`Self::forget_bounds`]).
    pub fn merge(&mut self, other: &ZoneMap) {
        self.null_count += other.null_count;
        self.min = pick_bound(self.min.take(), other.min.clone(), true);
        self.max = pick_bound(self.max.take(), other.max.clone(), false);
    }
}

/// The smaller (`min`) or larger of two bounds of one column; a missing
/// bound (no values) yields the other.
pub fn pick_bound(a: Option<ZoneValue>, b: Option<ZoneValue>, min: bool) -> Option<ZoneValue> {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some(a), Some(b)) => {
            let a_less = match (&a, &b) {
                (ZoneValue::I(x), ZoneValue::I(y)) => x < y,
                (ZoneValue::D(x), ZoneValue::D(y)) => {
                    x.parse::<i128>().unwrap_or(0) < y.parse::<i128>().unwrap_or(0)
                }
                (ZoneValue::F(x), ZoneValue::F(y)) => x.total_cmp(y).is_lt(),
                (ZoneValue::S(x), ZoneValue::S(y)) => x < y,
                (ZoneValue::B(x), ZoneValue::B(y)) => x < y,
                _ => return None,
            };
            if a_less == min { Some(a) } else { Some(b) }
        }
    }
}

fn prim<T: arrow::datatypes::ArrowPrimitiveType>(
    arr: &dyn Array,
    f: impl Fn(T::Native) -> ZoneValue,
) -> (Option<ZoneValue>, Option<ZoneValue>) {
    let p = arr.as_primitive::<T>();
    (compute::min(p).map(&f), compute::max(p).map(&f))
}

/// Converts a stored bound to a scalar of the column's Arrow type.
pub fn to_scalar(v: &Option<ZoneValue>, dt: &DataType) -> ScalarValue {
    let null = || ScalarValue::try_from(dt).unwrap_or(ScalarValue::Null);
    let Some(v) = v else { return null() };
    match (v, dt) {
        (ZoneValue::I(x), DataType::Int8) => ScalarValue::Int8(Some(*x as i8)),
        (ZoneValue::I(x), DataType::Int16) => ScalarValue::Int16(Some(*x as i16)),
        (ZoneValue::I(x), DataType::Int32) => ScalarValue::Int32(Some(*x as i32)),
        (ZoneValue::I(x), DataType::Int64) => ScalarValue::Int64(Some(*x)),
        (ZoneValue::I(x), DataType::Date32) => ScalarValue::Date32(Some(*x as i32)),
        (ZoneValue::I(x), DataType::Timestamp(_, tz)) => {
            ScalarValue::TimestampMicrosecond(Some(*x), tz.clone())
        }
        (ZoneValue::D(x), DataType::Decimal128(p, s)) => match x.parse::<i128>() {
            Ok(v) => ScalarValue::Decimal128(Some(v), *p, *s),
            Err(_) => null(),
        },
        (ZoneValue::F(x), DataType::Float32) => ScalarValue::Float32(Some(*x as f32)),
        (ZoneValue::F(x), DataType::Float64) => ScalarValue::Float64(Some(*x)),
        (ZoneValue::S(x), DataType::Utf8) => ScalarValue::Utf8(Some(x.clone())),
        (ZoneValue::B(x), DataType::Boolean) => ScalarValue::Boolean(Some(*x)),
        _ => null(),
    }
}

/// Zone maps of many containers (pages or segments) for one set of columns,
/// in the shape `PruningPredicate::prune` wants.
pub struct ZoneStats<'a> {
    /// Arrow schema the predicate was built against.
    pub schema: &'a arrow::datatypes::Schema,
    /// `zones[container][column]`, columns in `schema` order.
    pub zones: Vec<Vec<&'a ZoneMap>>,
    /// Rows per container.
    pub rows: Vec<u64>,
}

impl ZoneStats<'_> {
    fn column(&self, c: &Column) -> Option<(usize, &DataType)> {
        let i = self.schema.index_of(c.name()).ok()?;
        Some((i, self.schema.field(i).data_type()))
    }

    fn bounds(&self, c: &Column, min: bool) -> Option<ArrayRef> {
        let (i, dt) = self.column(c)?;
        let vals = self
            .zones
            .iter()
            .map(|z| to_scalar(if min { &z[i].min } else { &z[i].max }, dt));
        ScalarValue::iter_to_array(vals).ok()
    }
}

impl PruningStatistics for ZoneStats<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bounds(column, true)
    }
    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bounds(column, false)
    }
    fn num_containers(&self) -> usize {
        self.zones.len()
    }
    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let (i, _) = self.column(column)?;
        Some(Arc::new(UInt64Array::from(
            self.zones
                .iter()
                .map(|z| z[i].null_count)
                .collect::<Vec<_>>(),
        )))
    }
    fn row_counts(&self) -> Option<ArrayRef> {
        Some(Arc::new(UInt64Array::from(self.rows.clone())))
    }
    fn contained(&self, _column: &Column, _values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, StringArray};

    #[test]
    fn zone_of_arrays() {
        let z = ZoneMap::of(&Int32Array::from(vec![Some(5), None, Some(-2)]));
        assert_eq!(z.min, Some(ZoneValue::I(-2)));
        assert_eq!(z.max, Some(ZoneValue::I(5)));
        assert_eq!(z.null_count, 1);
        let mut s = ZoneMap::of(&StringArray::from(vec!["b", "a"]));
        s.merge(&ZoneMap::of(&StringArray::from(vec!["c"])));
        assert_eq!(s.min, Some(ZoneValue::S("a".into())));
        assert_eq!(s.max, Some(ZoneValue::S("c".into())));
    }
}

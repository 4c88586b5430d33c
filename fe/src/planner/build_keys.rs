//! Build-side join keys, collected as arrays for runtime filters.
//!
//! DataFusion's hash join publishes its build keys to the probe side as a
//! dynamic filter: the key bounds and either an IN list, which it builds
//! with one scalar and one literal expression per key (a fifth of TPC-H
//! q03's CPU at 147 K order keys, before Tethys turned the list into a
//! bitmap anyway), or a lookup into its hash table, which cannot leave the
//! FE. Tethys asks for the lookup form, which only shares the hash table,
//! and collects the keys itself on their way into the join: a
//! [`BuildKeysExec`] over the join's build side evaluates the build key
//! expressions on every batch and hands the arrays to the [`BuildKeys`]
//! shared with the probe side's scans, which turn them into the filter the
//! backends apply (`runtime_filter::current_filter`).

use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use arrow::array::ArrayRef;
use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::Result;
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream, TaskContext};
use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use datafusion::logical_expr::{Accumulator, Operator};
use datafusion::physical_expr::expressions::{BinaryExpr, InListExpr, lit};
use datafusion::physical_expr::{PhysicalExpr, PhysicalExprRef, conjunction};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PlanProperties,
};
use futures::{Stream, StreamExt};
use tethys_common::plan::{BitmapFilterExpr, BloomFilterExpr};

/// Build sides of more rows than this give only key bounds, no key set: the
/// collector stops keeping their keys (memory), and a set that large would
/// filter little anyway.
pub const MAX_COLLECTED_ROWS: usize = 1 << 20;

/// The keys of one hash join's build side, as its build side delivers them.
pub struct BuildKeys {
    /// The join's build-side key expressions (over the build side's schema).
    exprs: Vec<PhysicalExprRef>,
    state: Mutex<State>,
}

struct State {
    /// Per key expression: the arrays seen so far (until there are too many
    /// rows), concatenated into one once the build side is complete.
    arrays: Vec<Vec<ArrayRef>>,
    rows: usize,
    /// Too many rows for a key set: `arrays` are dropped, bounds stay.
    overflow: bool,
    /// Per key expression: running minimum and maximum.
    bounds: Vec<(MinAccumulator, MaxAccumulator)>,
    /// Build-side partitions that have not yet delivered their last batch;
    /// `None` until the build side starts.
    pending: Option<usize>,
}

impl fmt::Debug for BuildKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BuildKeys")
            .field("exprs", &self.exprs)
            .finish()
    }
}

impl BuildKeys {
    /// A collector of `exprs` over a build side of `schema`.
    pub fn try_new(exprs: Vec<PhysicalExprRef>, schema: &Schema) -> Result<Self> {
        let bounds = exprs
            .iter()
            .map(|e| {
                let t = e.data_type(schema)?;
                Ok((MinAccumulator::try_new(&t)?, MaxAccumulator::try_new(&t)?))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(BuildKeys {
            state: Mutex::new(State {
                arrays: vec![vec![]; exprs.len()],
                rows: 0,
                overflow: false,
                bounds,
                pending: None,
            }),
            exprs,
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the keys of one build-side batch.
    fn add(&self, batch: &RecordBatch) -> Result<()> {
        let keys = self
            .exprs
            .iter()
            .map(|e| e.evaluate(batch)?.into_array(batch.num_rows()))
            .collect::<Result<Vec<_>>>()?;
        let mut s = self.state();
        for (k, (min, max)) in keys.iter().zip(s.bounds.iter_mut()) {
            min.update_batch(std::slice::from_ref(k))?;
            max.update_batch(std::slice::from_ref(k))?;
        }
        s.rows += batch.num_rows();
        if s.rows > MAX_COLLECTED_ROWS {
            s.overflow = true;
            s.arrays.iter_mut().for_each(Vec::clear);
        }
        if !s.overflow {
            for (all, k) in s.arrays.iter_mut().zip(keys) {
                all.push(k);
            }
        }
        Ok(())
    }

    /// The build side starts, with `partitions` output partitions.
    fn start(&self, partitions: usize) {
        self.state().pending.get_or_insert(partitions);
    }

    /// One build-side partition delivered its last batch.
    fn finish_partition(&self) {
        if let Some(n) = self.state().pending.as_mut() {
            *n = n.saturating_sub(1);
        }
    }

    /// Whether every build-side partition has delivered all its keys.
    pub fn complete(&self) -> bool {
        self.state().pending == Some(0)
    }

    /// Build-side rows seen.
    pub fn rows(&self) -> usize {
        self.state().rows
    }

    /// `probe[i] >= min_i AND probe[i] <= max_i` for every key with bounds;
    /// `None` when no build row had a non-null key (or before completion).
    pub fn bounds(&self, probe: &[PhysicalExprRef]) -> Option<Arc<dyn PhysicalExpr>> {
        let mut s = self.state();
        if s.pending != Some(0) || probe.len() != self.exprs.len() {
            return None;
        }
        let mut parts = vec![];
        for (p, (min, max)) in probe.iter().zip(s.bounds.iter_mut()) {
            let (Ok(lo), Ok(hi)) = (min.evaluate(), max.evaluate()) else {
                continue;
            };
            if lo.is_null() || hi.is_null() {
                continue;
            }
            let cmp = |op, v: ScalarValue| -> Arc<dyn PhysicalExpr> {
                Arc::new(BinaryExpr::new(p.clone(), op, lit(v)))
            };
            parts.push(cmp(Operator::GtEq, lo));
            parts.push(cmp(Operator::LtEq, hi));
        }
        (!parts.is_empty()).then(|| conjunction(parts))
    }

    /// Whether each `probe[i]` is one of the build side's values of key `i`:
    /// per key, a bitmap when its values are integers in a narrow range, an
    /// IN list of up to `max_in` values, a bloom filter beyond (Doris'
    /// `in_or_bloom`). Keys tested one by one: a probe row passing every
    /// test may still not match a build row on all keys at once, which the
    /// join then drops. `None` before completion, after too many rows, or
    /// when no key has a set a backend can test.
    pub fn membership(
        &self,
        probe: &[PhysicalExprRef],
        probe_schema: &Schema,
        max_in: usize,
    ) -> Option<Arc<dyn PhysicalExpr>> {
        let mut s = self.state();
        if s.pending != Some(0) || s.overflow || probe.len() != self.exprs.len() {
            return None;
        }
        let mut parts = vec![];
        for (p, arrays) in probe.iter().zip(s.arrays.iter_mut()) {
            if arrays.len() > 1 {
                let refs: Vec<&dyn arrow::array::Array> =
                    arrays.iter().map(|a| a.as_ref()).collect();
                match arrow::compute::concat(&refs) {
                    Ok(one) => *arrays = vec![one],
                    Err(e) => {
                        tracing::debug!(error = %e, "runtime filter: build keys not concatenated");
                        continue;
                    }
                }
            }
            let Some(values) = arrays.first() else {
                continue;
            };
            if let Some(m) = key_set(p.clone(), values, probe_schema, max_in) {
                parts.push(m);
            }
        }
        (!parts.is_empty()).then(|| conjunction(parts))
    }
}

/// The cheapest exact-or-bloom test of `expr` being one of `values`: see
/// [`BuildKeys::membership`].
fn key_set(
    expr: PhysicalExprRef,
    values: &ArrayRef,
    schema: &Schema,
    max_in: usize,
) -> Option<Arc<dyn PhysicalExpr>> {
    if let Some(b) = BitmapFilterExpr::build(expr.clone(), values)
        && b.wire_len() <= (64 << 10).max(16 * values.len())
    {
        return Some(Arc::new(b));
    }
    if values.len() <= max_in {
        return match InListExpr::try_new_from_array(expr, values.clone(), false, schema) {
            Ok(l) => Some(Arc::new(l)),
            Err(e) => {
                tracing::debug!(error = %e, "runtime filter: no IN list");
                None
            }
        };
    }
    BloomFilterExpr::build(expr, values).map(|b| Arc::new(b) as Arc<dyn PhysicalExpr>)
}

/// Passes a hash join's build side through unchanged, collecting its keys
/// into a [`BuildKeys`].
#[derive(Debug)]
pub struct BuildKeysExec {
    input: Arc<dyn ExecutionPlan>,
    keys: Arc<BuildKeys>,
}

impl BuildKeysExec {
    pub fn new(input: Arc<dyn ExecutionPlan>, keys: Arc<BuildKeys>) -> Self {
        BuildKeysExec { input, keys }
    }
}

impl DisplayAs for BuildKeysExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "BuildKeysExec: keys=[")?;
        for (i, e) in self.keys.exprs.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{e}")?;
        }
        write!(f, "]")
    }
}

impl ExecutionPlan for BuildKeysExec {
    fn name(&self) -> &'static str {
        "BuildKeysExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    /// No expressions of its own: the keys it takes are its input's columns.
    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let Some(input) = children.pop() else {
            return datafusion::common::internal_err!("BuildKeysExec needs its input");
        };
        // The same collector: the probe scans hold it. Rules rebuild plans
        // around a rewritten node this way; the build side stays the same.
        Ok(Arc::new(BuildKeysExec::new(input, self.keys.clone())))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        self.keys
            .start(self.input.output_partitioning().partition_count());
        Ok(Box::pin(CollectStream {
            input: self.input.execute(partition, context)?,
            keys: self.keys.clone(),
            done: false,
        }))
    }
}

/// One build-side partition's batches, passed on after their keys are taken.
struct CollectStream {
    input: SendableRecordBatchStream,
    keys: Arc<BuildKeys>,
    done: bool,
}

impl Stream for CollectStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let next = ready!(self.input.poll_next_unpin(cx));
        match &next {
            Some(Ok(batch)) => {
                if let Err(e) = self.keys.add(batch) {
                    return Poll::Ready(Some(Err(e)));
                }
            }
            None if !self.done => {
                self.done = true;
                self.keys.finish_partition();
            }
            _ => {}
        }
        Poll::Ready(next)
    }
}

impl RecordBatchStream for CollectStream {
    fn schema(&self) -> SchemaRef {
        self.input.schema()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field};
    use datafusion::physical_expr::expressions::col;

    fn schema() -> Arc<Schema> {
        Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]))
    }

    /// A complete collector over one build-side partition holding `keys`.
    fn collected(keys: Vec<Option<i64>>) -> (BuildKeys, PhysicalExprRef) {
        let schema = schema();
        let k = col("k", &schema).unwrap();
        let c = BuildKeys::try_new(vec![k.clone()], &schema).unwrap();
        c.start(1);
        let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(keys))]).unwrap();
        c.add(&batch).unwrap();
        assert!(
            c.membership(std::slice::from_ref(&k), &batch.schema(), 100)
                .is_none()
        );
        c.finish_partition();
        (c, k)
    }

    #[test]
    fn key_sets_are_bitmaps_in_lists_or_bloom_filters_by_shape_and_size() {
        let schema = schema();
        // Dense integer keys: an exact bitmap whatever their number.
        let (c, k) = collected((0..10).map(Some).collect());
        let f = c.membership(std::slice::from_ref(&k), &schema, 4).unwrap();
        assert!(f.downcast_ref::<BitmapFilterExpr>().is_some(), "{f}");
        // Sparse keys: an IN list up to max_in values, a bloom filter beyond.
        let sparse = || (0..10).map(|i| Some(i * 1_000_000_007)).collect();
        let (c, k) = collected(sparse());
        let f = c
            .membership(std::slice::from_ref(&k), &schema, 100)
            .unwrap();
        assert!(f.downcast_ref::<InListExpr>().is_some(), "{f}");
        let f = c.membership(std::slice::from_ref(&k), &schema, 4).unwrap();
        assert!(f.downcast_ref::<BloomFilterExpr>().is_some(), "{f}");
        let probe = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from(vec![3_000_000_021, 5]))],
        )
        .unwrap();
        let out = f.evaluate(&probe).unwrap().into_array(2).unwrap();
        assert!(
            out.as_boolean().value(0),
            "a build key must pass its bloom filter"
        );
    }

    #[test]
    fn bounds_skip_nulls_and_survive_too_many_rows_for_a_set() {
        let schema = schema();
        let (c, k) = collected(vec![None, Some(7), Some(-2), None]);
        let b = c.bounds(std::slice::from_ref(&k)).unwrap();
        let probe = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from(vec![-3, -2, 7, 8]))],
        )
        .unwrap();
        let out = b.evaluate(&probe).unwrap().into_array(4).unwrap();
        let out: Vec<bool> = out.as_boolean().iter().map(|v| v == Some(true)).collect();
        assert_eq!(out, [false, true, true, false]);
        // Only null keys: no bounds at all (a join on them matches nothing,
        // but `None` only means "no filter", which is always correct).
        let (c, k) = collected(vec![None, None]);
        assert!(c.bounds(std::slice::from_ref(&k)).is_none());
        // More rows than are worth a set: bounds, no set.
        let (c, k) = collected(
            (0..=MAX_COLLECTED_ROWS as i64)
                .map(|i| Some(i * 3))
                .collect(),
        );
        assert!(c.membership(std::slice::from_ref(&k), &schema, 4).is_none());
        assert!(c.bounds(std::slice::from_ref(&k)).is_some());
    }
}

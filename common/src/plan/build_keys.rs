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
//! backends apply (`fe/src/planner/runtime_filter.rs::current_filter`).
//! The same collector gathers a build partition's keys on a backend for a
//! filter across stages (`cross_filters.rs`) and merges the parts on the
//! FE ([`BuildKeys::export`] / [`BuildKeys::absorb`]).

use std::collections::HashMap;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use super::cross_filters::{CrossFilters, Publish};
use super::{BitmapFilterExpr, BloomFilterExpr, BloomKeys, IntKeys};
use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::error::Result;
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream, TaskContext};
use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use datafusion::logical_expr::{Accumulator, Operator};
use datafusion::physical_expr::expressions::{BinaryExpr, InListExpr, lit};
use datafusion::physical_expr::{PhysicalExpr, PhysicalExprRef, conjunction};
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties,
};
use futures::{Stream, StreamExt};

/// Build sides of more rows than this are not kept as key arrays (memory):
/// their keys go into an exact integer set or a bloom filter of bounded
/// size as they arrive ([`LargeKeys`]).
pub const MAX_COLLECTED_ROWS: usize = 1 << 20;

/// Distinct integer keys kept exactly (a roaring bitmap of at most a few
/// bytes each) before they are moved into a bloom filter.
const MAX_EXACT_INT_KEYS: u64 = 8 << 20;

/// A flat bitmap filter may take this many bytes per key (and
/// [`BITMAP_BYTES_ANY_DENSITY`] whatever the keys): denser sets are cheaper
/// to test as bitmaps than with an IN list or a bloom filter. TPC-H SF10
/// q04's 574 K order keys over 60 M values are a 7.5 MB bitmap (13 bytes a
/// key); probing lineitem's 60 M sorted `l_orderkey`s in it instead of in a
/// bloom filter took the query from 1.74 to 1.00 CPU seconds (q21: 5.6 to
/// 3.7); q08's 403 K order keys from `lineitem ⋈ part` (18.6 bytes a key)
/// filtering orders' 15 M rows, from about 1.5 to 1.06. The range limit
/// (`MAX_BITMAP_RANGE`) caps a bitmap at 8 MiB. Re-measured with 16 and 32
/// in `benches/results/tuning-2026-12-04-notes.md`: it cannot bind at SF1
/// (every key range fits the 1 MiB floor); at TPC-H SF10, 16 slows q05 and
/// q08, 32 is within noise of 24.
const BITMAP_BYTES_PER_KEY: usize = 24;

/// A bitmap of up to 1 MiB (a range of 8 Mi values) is kept however few
/// keys it holds: a bit test in a cache-resident array costs a fraction of
/// a bloom filter's hash and block check per probe row. TPC-H q08's 13 K
/// parts of 2 M at SF10 are a 250 KB bitmap; as a bloom filter, hashing
/// and checking 60 M `l_partkey` values took half the query's CPU.
const BITMAP_BYTES_ANY_DENSITY: usize = 1 << 20;

/// The bytes a bitmap of `keys` keys may take.
fn bitmap_budget(keys: usize) -> usize {
    BITMAP_BYTES_ANY_DENSITY.max(BITMAP_BYTES_PER_KEY.saturating_mul(keys))
}

/// The keys of one key expression of a build side too large to keep.
enum LargeKeys {
    /// Integer keys, exactly: a bitmap or an exactly sized bloom filter at
    /// the end.
    Ints(IntKeys),
    /// Other keys, or too many integers: a bloom filter filled as they come.
    Bloom(BloomKeys),
}

impl LargeKeys {
    fn new(t: &DataType) -> Self {
        if IntKeys::accepts(t) {
            LargeKeys::Ints(IntKeys::default())
        } else {
            LargeKeys::Bloom(BloomKeys::default())
        }
    }

    fn insert(&mut self, values: &ArrayRef) {
        match self {
            LargeKeys::Ints(ints) => {
                ints.insert(values);
                if ints.len() > MAX_EXACT_INT_KEYS {
                    let mut bloom = BloomKeys::default();
                    bloom.insert_ints(ints.values());
                    *self = LargeKeys::Bloom(bloom);
                }
            }
            LargeKeys::Bloom(bloom) => bloom.insert(values),
        }
    }

    /// The membership test of `probe` in every key (once all are in), one
    /// of `share` shares of the join's keys.
    fn filter(&mut self, probe: PhysicalExprRef, share: usize) -> Option<Arc<dyn PhysicalExpr>> {
        if let LargeKeys::Ints(ints) = self {
            if ints.unusable() || ints.is_empty() {
                return None;
            }
            let budget = bitmap_budget((ints.len() as usize).saturating_mul(share));
            if let Some(b) = ints.bitmap(probe.clone(), budget) {
                return Some(Arc::new(b));
            }
            let mut bloom = BloomKeys::with_ndv(ints.len());
            bloom.insert_ints(ints.values());
            *self = LargeKeys::Bloom(bloom);
        }
        match self {
            LargeKeys::Bloom(bloom) => bloom
                .expr(probe)
                .map(|b| Arc::new(b) as Arc<dyn PhysicalExpr>),
            LargeKeys::Ints(_) => None,
        }
    }
}

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
    /// Too many rows to keep: `arrays` are dropped and, per key expression,
    /// every key goes into a [`LargeKeys`] instead; bounds stay.
    overflow: Option<Vec<LargeKeys>>,
    /// Per key expression: its type.
    types: Vec<DataType>,
    /// Per key expression: running minimum and maximum.
    bounds: Vec<(MinAccumulator, MaxAccumulator)>,
    /// Build-side partitions that have not yet delivered their last batch;
    /// `None` until the build side starts.
    pending: Option<usize>,
    /// Some part arrived as its bounds only (a merge of parts too large to
    /// send whole): no key set, bounds only.
    bounds_only: bool,
    /// How many collectors split the join's keys by bucket (one task's
    /// filter of a bucket-dealt join: [`BuildKeys::share_key_range`]).
    key_share: usize,
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
        let types = exprs
            .iter()
            .map(|e| e.data_type(schema))
            .collect::<Result<Vec<_>>>()?;
        let bounds = types
            .iter()
            .map(|t| Ok((MinAccumulator::try_new(t)?, MaxAccumulator::try_new(t)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(BuildKeys {
            state: Mutex::new(State {
                arrays: vec![vec![]; exprs.len()],
                rows: 0,
                overflow: None,
                types,
                bounds,
                pending: None,
                bounds_only: false,
                key_share: 1,
            }),
            exprs,
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the keys of one build-side batch.
    pub fn add(&self, batch: &RecordBatch) -> Result<()> {
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
        if s.overflow.is_none() && s.rows > MAX_COLLECTED_ROWS {
            let State { arrays, types, .. } = &mut *s;
            let large = arrays
                .iter_mut()
                .zip(types.iter())
                .map(|(arrays, t)| {
                    let mut large = LargeKeys::new(t);
                    arrays.drain(..).for_each(|a| large.insert(&a));
                    large
                })
                .collect();
            s.overflow = Some(large);
        }
        match s.overflow.as_mut() {
            Some(large) => large.iter_mut().zip(&keys).for_each(|(l, k)| l.insert(k)),
            None => {
                for (all, k) in s.arrays.iter_mut().zip(keys) {
                    all.push(k);
                }
            }
        }
        Ok(())
    }

    /// These keys are one of `collectors` shares of the join's keys, dealt
    /// by bucket over the same range (a task's filter of a colocate or
    /// bucket shuffle join): a bitmap may take the bytes all the shares'
    /// keys would allow it, as the join's one filter would. Without it a
    /// task's third of TPC-H SF10 q04's order keys was too sparse for a
    /// bitmap, and its bloom filter took the query from 0.55 to 1.0 s.
    pub fn share_key_range(&self, collectors: usize) {
        self.state().key_share = collectors.max(1);
    }

    /// The build side starts, with `partitions` output partitions.
    pub fn start(&self, partitions: usize) {
        self.state().pending.get_or_insert(partitions);
    }

    /// One build-side partition delivered its last batch.
    pub fn finish_partition(&self) {
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
    /// `in_or_bloom`); for a build side of more than [`MAX_COLLECTED_ROWS`]
    /// a bitmap or bloom filter of the keys gathered as they came
    /// ([`LargeKeys`]). Keys tested one by one: a probe row passing every
    /// test may still not match a build row on all keys at once, which the
    /// join then drops. `None` before completion or when no key has a set a
    /// backend can test.
    pub fn membership(
        &self,
        probe: &[PhysicalExprRef],
        probe_schema: &Schema,
        max_in: usize,
    ) -> Option<Arc<dyn PhysicalExpr>> {
        let mut s = self.state();
        if s.pending != Some(0) || probe.len() != self.exprs.len() || s.bounds_only {
            return None;
        }
        let mut parts = vec![];
        let share = s.key_share;
        if let Some(large) = s.overflow.as_mut() {
            parts.extend(
                probe
                    .iter()
                    .zip(large)
                    .filter_map(|(p, l)| l.filter(p.clone(), share)),
            );
            return (!parts.is_empty()).then(|| conjunction(parts));
        }
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
            if let Some(m) = key_set(p.clone(), values, probe_schema, max_in, share) {
                parts.push(m);
            }
        }
        (!parts.is_empty()).then(|| conjunction(parts))
    }
}

/// Parts of a filter across stages: exported where a build partition ran,
/// absorbed by the merge node.
impl BuildKeys {
    /// The keys of a complete build side as one batch, a column `k<i>` per
    /// key expression, to send to a merge node: every key, or, when there
    /// were too many to keep ([`MAX_COLLECTED_ROWS`]), only the minimum and
    /// maximum of each (`true`: bounds only).
    pub fn export(&self) -> Result<(RecordBatch, bool)> {
        let s = self.state();
        if s.overflow.is_some() || s.bounds_only {
            drop(s);
            return Ok((self.export_bounds()?, true));
        }
        let mut columns: Vec<ArrayRef> = vec![];
        for (arrays, t) in s.arrays.iter().zip(&s.types) {
            let refs: Vec<&dyn arrow::array::Array> = arrays.iter().map(|a| a.as_ref()).collect();
            columns.push(match refs.is_empty() {
                true => arrow::array::new_empty_array(t),
                false => arrow::compute::concat(&refs)?,
            });
        }
        Ok((RecordBatch::try_new(key_schema(&s.types), columns)?, false))
    }

    /// The minimum and maximum of each key, as two rows of `k<i>` columns
    /// (nulls where no build row had a non-null key).
    pub fn export_bounds(&self) -> Result<RecordBatch> {
        let mut s = self.state();
        let mut columns: Vec<ArrayRef> = vec![];
        for (min, max) in s.bounds.iter_mut() {
            let lo = min.evaluate()?.to_array_of_size(1)?;
            let hi = max.evaluate()?.to_array_of_size(1)?;
            columns.push(arrow::compute::concat(&[lo.as_ref(), hi.as_ref()])?);
        }
        Ok(RecordBatch::try_new(key_schema(&s.types), columns)?)
    }

    /// Takes a part exported by another collector ([`BuildKeys::export`])
    /// as one build-side partition, over `k<i>` columns.
    pub fn absorb(&self, part: &RecordBatch, bounds_only: bool) -> Result<()> {
        self.add(part)?;
        if bounds_only {
            self.state().bounds_only = true;
        }
        self.finish_partition();
        Ok(())
    }

    /// The build key expressions.
    pub fn exprs(&self) -> &[PhysicalExprRef] {
        &self.exprs
    }
}

/// Columns `k0..kn` of `types`, nullable.
fn key_schema(types: &[DataType]) -> SchemaRef {
    let fields: Vec<Field> = types
        .iter()
        .enumerate()
        .map(|(i, t)| Field::new(format!("k{i}"), t.clone(), true))
        .collect();
    Arc::new(Schema::new(fields))
}

/// The cheapest exact-or-bloom test of `expr` being one of `values` (one
/// of `share` shares of the join's keys): see [`BuildKeys::membership`].
fn key_set(
    expr: PhysicalExprRef,
    values: &ArrayRef,
    schema: &Schema,
    max_in: usize,
    share: usize,
) -> Option<Arc<dyn PhysicalExpr>> {
    if let Some(b) = BitmapFilterExpr::build(expr.clone(), values)
        && b.wire_len() <= bitmap_budget(values.len().saturating_mul(share))
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

/// A key collector for each hash join of `plan` that `wanted` accepts and
/// that publishes dynamic filters, under each of those filters' ids (the
/// FE's planner and a backend's stage both start from it).
pub fn join_collectors(
    plan: &Arc<dyn ExecutionPlan>,
    wanted: impl Fn(&HashJoinExec) -> bool,
) -> Result<HashMap<u64, Arc<BuildKeys>>> {
    let mut collectors = HashMap::new();
    plan.apply(|p| {
        if let Some(j) = p.downcast_ref::<HashJoinExec>()
            && wanted(j)
        {
            let ids = join_filter_ids(j);
            if !ids.is_empty() {
                let exprs = j.on().iter().map(|(l, _)| l.clone()).collect();
                let keys = Arc::new(BuildKeys::try_new(exprs, &j.left().schema())?);
                for id in ids {
                    collectors.insert(id, keys.clone());
                }
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(collectors)
}

/// The ids of the dynamic filters `j` publishes.
pub fn join_filter_ids(j: &HashJoinExec) -> Vec<u64> {
    j.dynamic_expressions_produced()
        .iter()
        .filter_map(|d| d.expression_id())
        .collect()
}

/// Where a [`BuildKeysExec`] puts the keys it collects.
#[derive(Debug, Clone)]
pub enum KeysTo {
    /// A collector shared with the probe side's scans, in this process.
    Shared(Arc<BuildKeys>),
    /// The merge node: each build partition publishes its own keys when it
    /// ends, for scans in other stages (`cross_filters.rs`).
    Merge(Publish),
}

/// Passes a hash join's build side through unchanged, collecting its keys
/// ([`KeysTo`]).
#[derive(Debug)]
pub struct BuildKeysExec {
    input: Arc<dyn ExecutionPlan>,
    to: KeysTo,
}

impl BuildKeysExec {
    /// Keys collected into `keys`, which the probe scans hold.
    pub fn new(input: Arc<dyn ExecutionPlan>, keys: Arc<BuildKeys>) -> Self {
        BuildKeysExec {
            input,
            to: KeysTo::Shared(keys),
        }
    }

    /// Keys published to the merge node.
    pub fn publishing(input: Arc<dyn ExecutionPlan>, publish: Publish) -> Self {
        BuildKeysExec {
            input,
            to: KeysTo::Merge(publish),
        }
    }

    pub fn to(&self) -> &KeysTo {
        &self.to
    }

    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    fn exprs(&self) -> &[PhysicalExprRef] {
        match &self.to {
            KeysTo::Shared(keys) => &keys.exprs,
            KeysTo::Merge(p) => &p.keys,
        }
    }
}

impl DisplayAs for BuildKeysExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "BuildKeysExec: ")?;
        if let KeysTo::Merge(p) = &self.to {
            write!(f, "filter={}, parts={}, ", p.filter_id, p.expected_parts)?;
        }
        write!(f, "keys=[")?;
        for (i, e) in self.exprs().iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{e}")?;
        }
        write!(f, "]")
    }
}

impl ExecutionPlan for BuildKeysExec {
    crate::pass_through_exec_plan!("BuildKeysExec");

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let Some(input) = children.pop() else {
            return datafusion::common::internal_err!("BuildKeysExec needs its input");
        };
        // The same collector: the probe scans hold it. Rules rebuild plans
        // around a rewritten node this way; the build side stays the same.
        Ok(Arc::new(BuildKeysExec {
            input,
            to: self.to.clone(),
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context.clone())?;
        let (keys, publish) = match &self.to {
            KeysTo::Shared(keys) => {
                keys.start(self.input.output_partitioning().partition_count());
                (keys.clone(), None)
            }
            KeysTo::Merge(p) => {
                // Without a merge node (a plan run where none is set up) the
                // keys go nowhere: the scans wait their bounded time.
                let Some(cross) = context.session_config().get_extension::<CrossFilters>() else {
                    return Ok(input);
                };
                let keys = BuildKeys::try_new(p.keys.clone(), &self.input.schema())?;
                keys.start(1);
                (Arc::new(keys), Some((p.clone(), cross)))
            }
        };
        Ok(Box::pin(CollectStream {
            input,
            keys,
            publish,
            done: false,
        }))
    }
}

/// One build-side partition's batches, passed on after their keys are
/// taken; the keys are published when the partition ends if they go to
/// the merge node.
struct CollectStream {
    input: SendableRecordBatchStream,
    keys: Arc<BuildKeys>,
    publish: Option<(Publish, Arc<CrossFilters>)>,
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
                if let Some((p, cross)) = &self.publish
                    && let Err(e) = p.send(&self.keys, cross)
                {
                    return Poll::Ready(Some(Err(e)));
                }
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
        // Few keys in a range of up to 8 Mi values (q08's parts): a bitmap,
        // not a bloom filter.
        let (c, k) = collected((0..2000).map(|i| Some(i * 4001)).collect());
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

    /// 100 K keys 400 apart: a 5 MB bitmap, 50 bytes a key, too sparse
    /// alone (a bloom filter); as one of three tasks' shares of a join's
    /// keys over the same range, the bitmap the whole would be.
    #[test]
    fn a_share_of_a_joins_keys_is_as_dense_as_the_whole() {
        let schema = schema();
        let keys = || (0..100_000).map(|i| Some(i * 400)).collect();
        let (c, k) = collected(keys());
        let f = c.membership(std::slice::from_ref(&k), &schema, 4).unwrap();
        assert!(f.downcast_ref::<BloomFilterExpr>().is_some(), "{f}");
        let (c, k) = collected(keys());
        c.share_key_range(3);
        let f = c.membership(std::slice::from_ref(&k), &schema, 4).unwrap();
        assert!(f.downcast_ref::<BitmapFilterExpr>().is_some(), "{f}");
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
    }

    /// A complete collector over more build rows than are kept as arrays,
    /// delivered in batches: `key(i)` for row `i`, as `t`.
    fn large(t: DataType, rows: i64, key: impl Fn(i64) -> i64) -> (BuildKeys, PhysicalExprRef) {
        let schema = Arc::new(Schema::new(vec![Field::new("k", t.clone(), true)]));
        let k = col("k", &schema).unwrap();
        let c = BuildKeys::try_new(vec![k.clone()], &schema).unwrap();
        c.start(1);
        let mut i = 0;
        while i < rows {
            let n = 4064.min(rows - i);
            let keys: ArrayRef = Arc::new(Int64Array::from_iter_values((i..i + n).map(&key)));
            let keys = arrow::compute::cast(&keys, &t).unwrap();
            c.add(&RecordBatch::try_new(schema.clone(), vec![keys]).unwrap())
                .unwrap();
            i += n;
        }
        c.finish_partition();
        (c, k)
    }

    /// Which of `probe` pass `f` (over a column `k` of type `t`).
    fn passing(f: &Arc<dyn PhysicalExpr>, t: &DataType, probe: &[i64]) -> Vec<bool> {
        let schema = Arc::new(Schema::new(vec![Field::new("k", t.clone(), true)]));
        let keys: ArrayRef = Arc::new(Int64Array::from(probe.to_vec()));
        let keys = arrow::compute::cast(&keys, t).unwrap();
        let batch = RecordBatch::try_new(schema, vec![keys]).unwrap();
        let out = f.evaluate(&batch).unwrap().into_array(probe.len()).unwrap();
        out.as_boolean().iter().map(|v| v == Some(true)).collect()
    }

    #[test]
    fn build_sides_too_large_to_keep_still_filter_by_every_key() {
        let total = MAX_COLLECTED_ROWS as i64 + 5000;
        let some_keys = [0, 7, total / 2, total - 1];
        let schema = schema();
        // Sparse integers: a bloom filter sized for the keys there are.
        let key = |i: i64| i * 1_000_003;
        let (c, k) = large(DataType::Int64, total, key);
        let f = c
            .membership(std::slice::from_ref(&k), &schema, 1024)
            .unwrap();
        let bloom = f.downcast_ref::<BloomFilterExpr>().unwrap();
        assert!(
            bloom.to_bytes().unwrap().len() <= 8 + (2 << 20),
            "sized for the keys"
        );
        let probe: Vec<i64> = some_keys.map(key).into_iter().collect();
        assert!(passing(&f, &DataType::Int64, &probe).iter().all(|p| *p));
        let others: Vec<i64> = (0..10_000).map(|j| key(j) + 1).collect();
        let false_pos = passing(&f, &DataType::Int64, &others)
            .iter()
            .filter(|p| **p)
            .count();
        assert!(false_pos < 500, "{false_pos} false positives");
        // A second call (the partitioned join's form) gives a filter too.
        assert!(
            c.membership(std::slice::from_ref(&k), &schema, 1024)
                .is_some()
        );
        assert!(c.bounds(std::slice::from_ref(&k)).is_some());

        // Integers in a range a bitmap covers (one in three, in 32-bit
        // columns): an exact bitmap.
        let (c, k) = large(DataType::Int32, total, |i| i * 3);
        let f = c
            .membership(std::slice::from_ref(&k), &schema, 1024)
            .unwrap();
        assert!(f.downcast_ref::<BitmapFilterExpr>().is_some(), "{f}");
        let probe: Vec<i64> = (0..30_000).collect();
        let pass = passing(&f, &DataType::Int32, &probe);
        assert!(pass.iter().enumerate().all(|(i, p)| *p == (i % 3 == 0)));

        // Strings: a bloom filter filled as they came, then folded.
        let (c, k) = large(DataType::Utf8, total, |i| i * 7);
        let f = c
            .membership(std::slice::from_ref(&k), &schema, 1024)
            .unwrap();
        let bloom = f.downcast_ref::<BloomFilterExpr>().unwrap();
        assert!(bloom.to_bytes().unwrap().len() <= 4 << 20, "folded");
        let probe: Vec<i64> = some_keys.map(|i| i * 7).into_iter().collect();
        assert!(passing(&f, &DataType::Utf8, &probe).iter().all(|p| *p));
    }
}

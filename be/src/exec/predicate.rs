//! Predicate evaluation inside the tablet scan (Doris' vectorized predicate
//! pushdown with late materialization).
//!
//! The fragment's filter is split into conjuncts. For each page that zone
//! maps did not prune:
//! - a conjunct the page's zone maps prove true for every row (e.g.
//!   `l_shipdate <= '1998-09-02'` on a page whose max is earlier, with no
//!   nulls) is not evaluated;
//! - the others run one after another, each over only the rows the previous
//!   ones kept, reading a column the first time a conjunct needs it;
//! - columns no conjunct reads are read only for pages with surviving rows,
//!   and only those rows are taken.
//!
//! Conjuncts are reordered as the scan goes, by what each costs per row over
//! the share of rows it removed so far: a runtime filter that keeps one row
//! in a hundred runs before a date range that keeps them all, and a cheap
//! bitmap test that keeps a fifth runs before a bloom filter test (tens of
//! nanoseconds a row, a cache miss each) that keeps a sixth.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch, UInt32Array};
use arrow::buffer::BooleanBuffer;
use arrow::compute::kernels::boolean::and;
use arrow::compute::{FilterBuilder, FilterPredicate, prep_null_mask_filter, take};
use arrow::datatypes::{Schema, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, Operator};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{BinaryExpr, Column};
use datafusion::physical_expr::split_conjunction;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_optimizer::pruning::{PruningPredicate, PruningPredicateBuilder};
use datafusion::physical_plan::metrics::Count;

use super::zone_test::ZoneTest;
use crate::storage::read::ZoneStats;

/// How often (in evaluated pages) the conjunct order is revised.
const REORDER_EVERY: u64 = 8;

/// One conjunct of the scan predicate.
struct Conjunct {
    /// The conjunct over its own columns only (`columns[i]` is column `i`).
    expr: Arc<dyn PhysicalExpr>,
    /// Its columns, as indices of the scan's output schema.
    columns: Vec<usize>,
    /// Schema of `columns`.
    schema: SchemaRef,
    /// Tells the pages whose zone maps prove the conjunct true for every
    /// row, when it is one [`ZoneTest`] knows.
    zone: Option<ZoneTest>,
    /// Otherwise, prunes the pages where the conjunct's negation holds for
    /// no row, i.e. where (with no nulls) the conjunct holds for every row.
    negation: Option<Arc<PruningPredicate>>,
    /// Whether it calls a volatile function (`rand()`).
    volatile: bool,
    /// The expression as the scan's predicate holds it (before its columns
    /// were renumbered), to tell a runtime filter's conjuncts.
    origin: Arc<dyn PhysicalExpr>,
    /// Counts the rows it removes (a runtime filter's conjunct).
    removed: Option<Count>,
    rows_in: u64,
    rows_out: u64,
    /// Time spent evaluating it, and over how many rows (its cost per row:
    /// a bloom filter test costs tens of times a comparison).
    nanos: u64,
    rows_evaluated: u64,
}

impl Conjunct {
    /// A copy of its expression with fresh counters (tests).
    #[cfg(test)]
    fn clone_stats(&self) -> Conjunct {
        Conjunct {
            expr: self.expr.clone(),
            columns: self.columns.clone(),
            schema: self.schema.clone(),
            zone: self.zone.clone(),
            negation: self.negation.clone(),
            volatile: self.volatile,
            origin: self.origin.clone(),
            removed: None,
            rows_in: 0,
            rows_out: 0,
            nanos: 0,
            rows_evaluated: 0,
        }
    }

    /// Where it belongs in the evaluation order, lowest first: its cost per
    /// row over the share of rows it removes, so that a cheap filter that
    /// removes much runs before a costly one, and one that removes nothing
    /// runs last. Not yet evaluated: first, to be measured.
    fn rank(&self) -> f64 {
        if self.rows_in == 0 || self.rows_evaluated == 0 {
            return 0.0;
        }
        let removed = 1.0 - self.rows_out as f64 / self.rows_in as f64;
        if removed <= 0.0 {
            return f64::INFINITY;
        }
        // A nanosecond floor keeps very cheap conjuncts ordered by what
        // they remove.
        (self.nanos.max(1) as f64 / self.rows_evaluated as f64).max(0.1) / removed
    }
}

/// What one page's evaluation left.
pub enum PageRows {
    /// Every row passes: no filtering needed.
    All,
    /// The rows this filter (over the whole page) keeps pass.
    Filter(FilterPredicate),
    /// These rows (positions in the page, ascending) pass.
    Take(UInt32Array),
    /// No row passes.
    None,
}

impl PageRows {
    /// How many of the page's `rows` rows pass.
    pub fn count(&self, rows: usize) -> usize {
        match self {
            PageRows::All => rows,
            PageRows::Filter(f) => f.count(),
            PageRows::Take(idx) => idx.len(),
            PageRows::None => 0,
        }
    }

    /// The passing rows of `whole`, a column of the page.
    pub fn apply(&self, whole: ArrayRef) -> Result<ArrayRef> {
        Ok(match self {
            PageRows::All => whole,
            PageRows::Filter(f) => f.filter(whole.as_ref())?,
            PageRows::Take(idx) => take(whole.as_ref(), idx, None)?,
            PageRows::None => whole.slice(0, 0),
        })
    }
}

/// The scan predicate, split for per-page evaluation.
pub struct ScanPredicate {
    /// `column = value` and `column IN (values)` conjuncts: output column
    /// and the values' bloom-filter keys, for skipping pages whose bloom
    /// filter holds none of them.
    bloom_probes: Vec<(usize, Vec<Vec<u8>>)>,
    conjuncts: Vec<Conjunct>,
    /// Evaluation order (indices into `conjuncts`).
    order: Vec<usize>,
    pages_evaluated: u64,
}

impl ScanPredicate {
    /// Splits `predicate` (over `schema`, the scan's output) into conjuncts.
    pub fn new(predicate: &Arc<dyn PhysicalExpr>, schema: &SchemaRef) -> Result<ScanPredicate> {
        let mut conjuncts = Vec::new();
        let mut bloom_probes = Vec::new();
        for c in split_conjunction(predicate) {
            if let Some(probe) = bloom_probe(c, schema) {
                bloom_probes.push(probe);
            }
            let mut cols: Vec<usize> = collect_columns(c).iter().map(|c| c.index()).collect();
            cols.sort_unstable();
            cols.dedup();
            let local = Arc::new(Schema::new(
                cols.iter()
                    .map(|&i| schema.field(i).clone())
                    .collect::<Vec<_>>(),
            ));
            let expr = c
                .clone()
                .transform_up(|e| match e.downcast_ref::<Column>() {
                    Some(col) => {
                        let at = cols.binary_search(&col.index()).map_err(|_| {
                            DataFusionError::Internal(format!("column {col} not collected"))
                        })?;
                        Ok(Transformed::yes(
                            Arc::new(Column::new(col.name(), at)) as Arc<dyn PhysicalExpr>
                        ))
                    }
                    None => Ok(Transformed::no(e)),
                })?
                .data;
            let expr = super::like::rewrite_likes(expr)?;
            let zone = ZoneTest::of(c, schema);
            let negation = negate(c).filter(|_| zone.is_none()).and_then(|n| {
                PruningPredicateBuilder::new()
                    .with_file_schema(schema.clone())
                    .build(n)
            });
            conjuncts.push(Conjunct {
                volatile: datafusion::physical_expr_common::physical_expr::is_volatile(&expr),
                origin: c.clone(),
                removed: None,
                expr,
                columns: cols,
                schema: local,
                zone,
                negation,
                rows_in: 0,
                rows_out: 0,
                nanos: 0,
                rows_evaluated: 0,
            });
        }
        let order = (0..conjuncts.len()).collect();
        Ok(ScanPredicate {
            bloom_probes,
            conjuncts,
            order,
            pages_evaluated: 0,
        })
    }

    /// Counts the rows each of `counted` (conjuncts of the predicate this
    /// was made from) removes, in the counter `counter(name)` makes.
    pub fn count_removed(
        &mut self,
        counted: &[(Arc<dyn PhysicalExpr>, String)],
        counter: impl Fn(&str) -> Count,
    ) {
        for conj in &mut self.conjuncts {
            if let Some((_, name)) = counted
                .iter()
                .find(|(e, _)| std::ptr::addr_eq(Arc::as_ptr(e), Arc::as_ptr(&conj.origin)))
            {
                conj.removed = Some(counter(name));
            }
        }
    }

    /// The `column = value` / `column IN (values)` conjuncts as (output
    /// column, bloom keys of the values).
    pub fn bloom_probes(&self) -> &[(usize, Vec<Vec<u8>>)] {
        &self.bloom_probes
    }

    /// For each conjunct and each container of `stats`, whether its zone
    /// maps prove the conjunct true for every row: `proven[conjunct][page]`.
    pub fn proven_true(&self, stats: &ZoneStats<'_>) -> Result<Vec<Vec<bool>>> {
        self.conjuncts
            .iter()
            .map(|c| {
                if let Some(t) = &c.zone {
                    return Ok(stats
                        .zones
                        .iter()
                        .map(|zones| zones.get(t.column()).is_some_and(|z| t.all_match(z)))
                        .collect());
                }
                let Some(neg) = &c.negation else {
                    return Ok(vec![false; stats.zones.len()]);
                };
                let may_fail = neg.prune(stats)?;
                Ok(may_fail
                    .iter()
                    .zip(&stats.zones)
                    .map(|(may_fail, zones)| {
                        !may_fail && c.columns.iter().all(|&i| zones[i].null_count == 0)
                    })
                    .collect())
            })
            .collect()
    }

    /// Evaluates the conjuncts not in `skip` over one page of `rows` rows.
    /// `read(i, None)` returns output column `i` of the page (whole),
    /// `read(i, Some(positions))` only its rows at those page positions
    /// (which it may decode without the others); what was read is left in
    /// `columns`, already reduced to the returned rows.
    ///
    /// Conjuncts run over the rows still alive: while those are dense the
    /// masks of successive conjuncts are ANDed over the full arrays (a
    /// comparison over a whole page costs less than compacting it); once
    /// fewer than a quarter remain, the columns read so far are compacted
    /// and later conjuncts see only the survivors.
    pub fn evaluate(
        &mut self,
        rows: usize,
        skip: impl Fn(usize) -> bool,
        columns: &mut [Option<ArrayRef>],
        mut read: impl FnMut(usize, Option<&UInt32Array>) -> Result<ArrayRef>,
    ) -> Result<PageRows> {
        // Page positions of the rows the arrays in `columns` hold (`None`:
        // all of them), and the survivors among those (`None`: all).
        let mut positions: Option<UInt32Array> = None;
        let mut alive: Option<BooleanArray> = None;
        let mut current = rows;
        let mut alive_count = rows;
        let mut evaluated = false;
        for &ci in &self.order {
            if skip(ci) {
                continue;
            }
            evaluated = true;
            let conj = &mut self.conjuncts[ci];
            for &col in &conj.columns {
                if columns[col].is_none() {
                    columns[col] = Some(read(col, positions.as_ref())?);
                }
            }
            let started = std::time::Instant::now();
            let result = match dictionary_input(conj, columns) {
                // One column stored as a dictionary: evaluate once per
                // distinct value, then look each row's result up by its key.
                Some((values, keys)) => {
                    let batch = RecordBatch::try_new(conj.schema.clone(), vec![values])?;
                    match conj.expr.evaluate(&batch)? {
                        ColumnarValue::Array(per_value) => {
                            ColumnarValue::Array(take(per_value.as_ref(), keys.as_ref(), None)?)
                        }
                        scalar => scalar,
                    }
                }
                None => {
                    let mut arrays = Vec::with_capacity(conj.columns.len());
                    for &col in &conj.columns {
                        let c = columns[col].as_mut().ok_or_else(|| {
                            DataFusionError::Internal("scan column missing after read".into())
                        })?;
                        *c = plain(c, conj.schema.field(arrays.len()).data_type())?;
                        arrays.push(c.clone());
                    }
                    let batch = RecordBatch::try_new_with_options(
                        conj.schema.clone(),
                        arrays,
                        &arrow::array::RecordBatchOptions::new().with_row_count(Some(current)),
                    )?;
                    conj.expr.evaluate(&batch)?
                }
            };
            conj.nanos += started.elapsed().as_nanos() as u64;
            conj.rows_evaluated += current as u64;
            let mask = match result {
                ColumnarValue::Array(a) => {
                    let b = a.as_boolean_opt().ok_or_else(|| {
                        DataFusionError::Internal(format!(
                            "scan predicate {} is not boolean",
                            conj.expr
                        ))
                    })?;
                    if b.null_count() > 0 {
                        prep_null_mask_filter(b)
                    } else {
                        b.clone()
                    }
                }
                ColumnarValue::Scalar(ScalarValue::Boolean(Some(true))) => {
                    conj.rows_in += alive_count as u64;
                    conj.rows_out += alive_count as u64;
                    continue;
                }
                ColumnarValue::Scalar(_) => {
                    BooleanArray::new(BooleanBuffer::new_unset(current), None)
                }
            };
            let mask = match alive.take() {
                Some(prev) => and(&prev, &mask)?,
                None => mask,
            };
            let passed = mask.true_count();
            conj.rows_in += alive_count as u64;
            conj.rows_out += passed as u64;
            if let Some(removed) = &conj.removed {
                removed.add(alive_count - passed);
            }
            if passed == 0 {
                self.page_done(evaluated);
                return Ok(PageRows::None);
            }
            alive_count = passed;
            if passed == current {
                continue;
            }
            if passed * 4 >= current {
                alive = Some(mask);
                continue;
            }
            // Sparse: compact what was read and continue on the survivors.
            let keep = FilterBuilder::new(&mask).optimize().build();
            for c in columns.iter_mut().flatten() {
                *c = keep.filter(c.as_ref())?;
            }
            positions = Some(match &positions {
                Some(idx) => keep.filter(idx)?.as_primitive().clone(),
                None => keep
                    .filter(&UInt32Array::from_iter_values(0..rows as u32))?
                    .as_primitive()
                    .clone(),
            });
            current = passed;
        }
        self.page_done(evaluated);
        let Some(mask) = alive else {
            return Ok(match positions {
                Some(idx) => PageRows::Take(idx),
                None => PageRows::All,
            });
        };
        let keep = FilterBuilder::new(&mask).optimize().build();
        for c in columns.iter_mut().flatten() {
            *c = keep.filter(c.as_ref())?;
        }
        Ok(match positions {
            Some(idx) => PageRows::Take(keep.filter(&idx)?.as_primitive().clone()),
            None => PageRows::Filter(keep),
        })
    }

    /// Revises the evaluation order every few evaluated pages, by
    /// [`Conjunct::rank`].
    fn page_done(&mut self, evaluated: bool) {
        if !evaluated {
            return;
        }
        self.pages_evaluated += 1;
        if self.pages_evaluated.is_multiple_of(REORDER_EVERY) {
            let cs = &self.conjuncts;
            self.order
                .sort_by(|&a, &b| cs[a].rank().total_cmp(&cs[b].rank()));
        }
    }
}

/// A column as its table type: dictionary-encoded pages are expanded.
pub fn plain(a: &ArrayRef, dt: &arrow::datatypes::DataType) -> Result<ArrayRef> {
    if a.data_type() == dt {
        return Ok(a.clone());
    }
    Ok(arrow::compute::cast(a, dt)?)
}

/// For a conjunct over one column whose page is a dictionary with no null
/// rows, the dictionary's values and the rows' keys. Volatile conjuncts
/// (`rand()`) must see every row and are excluded.
fn dictionary_input(conj: &Conjunct, columns: &[Option<ArrayRef>]) -> Option<(ArrayRef, ArrayRef)> {
    let [col] = conj.columns[..] else {
        return None;
    };
    let d = columns.get(col)?.as_ref()?.as_any_dictionary_opt()?;
    if d.keys().null_count() > 0 || conj.volatile {
        return None;
    }
    Some((
        d.values().clone(),
        arrow::array::make_array(d.keys().to_data()),
    ))
}

/// `column = literal`, `literal = column` or `column IN (literals)` as the
/// column and the literals' bloom keys, when the literals have the column's
/// type (any integer width hashes alike).
fn bloom_probe(e: &Arc<dyn PhysicalExpr>, schema: &SchemaRef) -> Option<(usize, Vec<Vec<u8>>)> {
    use datafusion::physical_expr::expressions::{InListExpr, Literal};
    let (col, values): (&Column, Vec<ScalarValue>) = if let Some(b) = e.downcast_ref::<BinaryExpr>()
    {
        if *b.op() != Operator::Eq {
            return None;
        }
        match (
            b.left().downcast_ref::<Column>(),
            b.right().downcast_ref::<Literal>(),
            b.left().downcast_ref::<Literal>(),
            b.right().downcast_ref::<Column>(),
        ) {
            (Some(c), Some(l), _, _) | (_, _, Some(l), Some(c)) => (c, vec![l.value().clone()]),
            _ => return None,
        }
    } else if let Some(l) = e.downcast_ref::<InListExpr>() {
        if l.negated() {
            return None;
        }
        let c = l.expr().downcast_ref::<Column>()?;
        let values = l
            .list()
            .iter()
            .map(|v| v.downcast_ref::<Literal>().map(|l| l.value().clone()))
            .collect::<Option<Vec<_>>>()?;
        (c, values)
    } else {
        return None;
    };
    let col_type = schema.fields().get(col.index())?.data_type();
    let array = ScalarValue::iter_to_array(values).ok()?;
    let same =
        array.data_type() == col_type || (array.data_type().is_integer() && col_type.is_integer());
    if !same {
        return None;
    }
    Some((col.index(), crate::storage::read::bloom_keys(&array)?))
}

/// The negation of a comparison (`a < b` -> `a >= b`), for proving with zone
/// maps that no row fails it; `None` for other expressions.
fn negate(e: &Arc<dyn PhysicalExpr>) -> Option<Arc<dyn PhysicalExpr>> {
    let b = e.downcast_ref::<BinaryExpr>()?;
    let op = match b.op() {
        Operator::Lt => Operator::GtEq,
        Operator::LtEq => Operator::Gt,
        Operator::Gt => Operator::LtEq,
        Operator::GtEq => Operator::Lt,
        Operator::Eq => Operator::NotEq,
        Operator::NotEq => Operator::Eq,
        _ => return None,
    };
    Some(Arc::new(BinaryExpr::new(
        b.left().clone(),
        op,
        b.right().clone(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::read::ZoneMap;
    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field};
    use datafusion::physical_expr::expressions::{binary, col, lit};
    use std::cell::RefCell;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Int64, true),
        ]))
    }

    fn and_of(s: &SchemaRef, parts: Vec<Arc<dyn PhysicalExpr>>) -> Arc<dyn PhysicalExpr> {
        parts
            .into_iter()
            .reduce(|l, r| binary(l, Operator::And, r, s).unwrap())
            .unwrap()
    }

    fn cmp(s: &SchemaRef, c: &str, op: Operator, v: i64) -> Arc<dyn PhysicalExpr> {
        binary(col(c, s).unwrap(), op, lit(v), s).unwrap()
    }

    /// `a <op> v AND b <op> v`.
    fn a_and_b(s: &SchemaRef, a: (Operator, i64), b: (Operator, i64)) -> ScanPredicate {
        let parts = vec![cmp(s, "a", a.0, a.1), cmp(s, "b", b.0, b.1)];
        ScanPredicate::new(&and_of(s, parts), s).unwrap()
    }

    #[test]
    fn zone_maps_prove_conjuncts_true() {
        let s = schema();
        let p = ScanPredicate::new(
            &and_of(
                &s,
                vec![
                    cmp(&s, "a", Operator::LtEq, 10),
                    cmp(&s, "b", Operator::Eq, 1),
                ],
            ),
            &s,
        )
        .unwrap();
        let zone = |min: i64, max: i64, nulls: u64| ZoneMap {
            min: Some(crate::storage::read::ZoneValue::I(min)),
            max: Some(crate::storage::read::ZoneValue::I(max)),
            null_count: nulls,
        };
        let (z0a, z0b) = (zone(0, 5, 0), zone(1, 1, 0));
        let (z1a, z1b) = (zone(0, 50, 0), zone(0, 1, 0));
        let (z2a, z2b) = (zone(0, 5, 3), zone(1, 1, 2));
        let stats = ZoneStats {
            schema: &s,
            zones: vec![vec![&z0a, &z0b], vec![&z1a, &z1b], vec![&z2a, &z2b]],
            rows: vec![10, 10, 10],
        };
        let proven = p.proven_true(&stats).unwrap();
        // Page 0: both hold everywhere; page 1: neither provable; page 2:
        // the bounds hold but nulls fail the predicate.
        assert_eq!(
            proven,
            vec![vec![true, false, false], vec![true, false, false]]
        );
    }

    /// Evaluates one page with columns `a` and `b`, counting reads per
    /// column in `reads`.
    fn eval_counting(
        p: &mut ScanPredicate,
        rows: usize,
        a: &ArrayRef,
        b: &ArrayRef,
        reads: &RefCell<Vec<usize>>,
    ) -> (PageRows, Vec<Option<ArrayRef>>) {
        let mut cols = vec![None, None];
        let r = p
            .evaluate(
                rows,
                |_| false,
                &mut cols,
                |i, at| {
                    reads.borrow_mut()[i] += 1;
                    let whole = if i == 0 { a.clone() } else { b.clone() };
                    Ok(match at {
                        Some(idx) => take(whole.as_ref(), idx, None).unwrap(),
                        None => whole,
                    })
                },
            )
            .unwrap();
        (r, cols)
    }

    #[test]
    fn conjuncts_rank_by_cost_per_row_over_rows_removed() {
        let s = schema();
        let p = a_and_b(&s, (Operator::GtEq, 0), (Operator::Eq, 7));
        let with = |nanos: u64, rows_out: u64| {
            let mut c = p.conjuncts[0].clone_stats();
            (c.nanos, c.rows_evaluated, c.rows_in, c.rows_out) = (nanos, 1000, 1000, rows_out);
            c.rank()
        };
        // A bitmap test (2 ns a row) keeping a fifth before a bloom filter
        // test (30 ns a row) keeping a sixth.
        assert!(with(2_000, 200) < with(30_000, 166));
        // At equal cost, the one removing more first.
        assert!(with(2_000, 10) < with(2_000, 500));
        // Removing nothing: last, however cheap.
        assert_eq!(with(1, 1000), f64::INFINITY);
        // Never evaluated: first, to be measured.
        assert_eq!(p.conjuncts[0].rank(), 0.0);
    }

    #[test]
    fn selective_conjunct_moves_first_and_spares_reads() {
        let s = schema();
        // `a >= 0` keeps everything, `b = 7` one row in a hundred.
        let mut p = a_and_b(&s, (Operator::GtEq, 0), (Operator::Eq, 7));
        let rows = 1000;
        let a: ArrayRef = Arc::new(Int64Array::from_iter_values(0..rows as i64));
        let b: ArrayRef = Arc::new(Int64Array::from_iter(
            (0..rows as i64).map(|i| if i % 100 == 0 { None } else { Some(i % 100) }),
        ));
        let reads = RefCell::new(vec![0usize; 2]);
        for _ in 0..REORDER_EVERY {
            let (r, cols) = eval_counting(&mut p, rows, &a, &b, &reads);
            let PageRows::Take(idx) = r else {
                panic!("expected a sparse selection")
            };
            // Rows 7, 107, ...: b = 7, and the null b rows are dropped.
            assert_eq!(
                idx.values().to_vec(),
                (0..10).map(|i| i * 100 + 7).collect::<Vec<u32>>()
            );
            let got_a = cols[0]
                .as_ref()
                .unwrap()
                .as_primitive::<arrow::datatypes::Int64Type>();
            assert_eq!(
                got_a.values().to_vec(),
                (0..10).map(|i| i * 100 + 7).collect::<Vec<i64>>()
            );
        }
        assert_eq!(p.order, vec![1, 0]);
        // Now `b` runs first; a page where it keeps nothing never reads `a`.
        let before = reads.borrow().clone();
        let none: ArrayRef = Arc::new(Int64Array::from(vec![1i64; rows]));
        let (r, _) = eval_counting(&mut p, rows, &a, &none, &reads);
        assert!(matches!(r, PageRows::None));
        assert_eq!(reads.borrow()[0], before[0]);
        assert_eq!(reads.borrow()[1], before[1] + 1);
        // A conjunct proven true by zone maps is not evaluated at all.
        let mut cols = vec![None, None];
        let r = p
            .evaluate(
                rows,
                |ci| ci == 1,
                &mut cols,
                |i, _| Ok(if i == 0 { a.clone() } else { none.clone() }),
            )
            .unwrap();
        assert!(matches!(r, PageRows::All));
        assert!(cols[1].is_none());
    }

    #[test]
    fn dense_conjuncts_and_their_masks_without_compacting() {
        let s = schema();
        // `a >= 300` keeps 70%, `b < 50` half of those: never below a
        // quarter, so the page ends as one filter over the whole page.
        let mut p = a_and_b(&s, (Operator::GtEq, 300), (Operator::Lt, 50));
        let rows = 1000;
        let a: ArrayRef = Arc::new(Int64Array::from_iter_values(0..rows as i64));
        let b: ArrayRef = Arc::new(Int64Array::from_iter_values(
            (0..rows as i64).map(|i| i % 100),
        ));
        let (r, cols) = eval_counting(&mut p, rows, &a, &b, &RefCell::new(vec![0, 0]));
        assert!(matches!(r, PageRows::Filter(_)));
        assert_eq!(r.count(rows), 350);
        let want: Vec<i64> = (300..1000).filter(|i| i % 100 < 50).collect();
        let got_a = cols[0]
            .as_ref()
            .unwrap()
            .as_primitive::<arrow::datatypes::Int64Type>();
        assert_eq!(got_a.values().to_vec(), want);
        let got_b = cols[1]
            .as_ref()
            .unwrap()
            .as_primitive::<arrow::datatypes::Int64Type>();
        assert_eq!(got_b.len(), 350);
        // An unread column gets the same rows through `apply`.
        let c: ArrayRef = Arc::new(Int64Array::from_iter_values(0..rows as i64));
        let got_c = r.apply(c).unwrap();
        assert_eq!(
            got_c
                .as_primitive::<arrow::datatypes::Int64Type>()
                .values()
                .to_vec(),
            want
        );
    }
}

//! Join order: each tree of inner joins rebuilt so the joins with the
//! smallest estimated results run first.
//!
//! DataFusion joins tables in the order the FROM clause lists them (its
//! cross-join elimination only skips ahead to a table with a join
//! condition). TPC-H q05 lists `customer, orders, lineitem, supplier,
//! nation, region`, so every customer meets every order of the year before
//! `r_name = 'ASIA'` narrows anything. This logical rule flattens a tree of
//! inner joins into its relations and conditions and rebuilds it: trees of
//! up to `DP_MAX_RELATIONS` relations by dynamic programming over subsets
//! (the tree without cross joins with the smallest sum of intermediate
//! result rows), bigger ones by greedy operator ordering (the connected
//! pair with the smallest join first). Bushy trees are allowed. Build and
//! probe sides are chosen afterwards, on the physical plan (`join_order`).
//!
//! Key equalities form equivalence classes (`a = b AND b = c` lets `a`
//! meet `c`, which is how q05 reaches its customers through the region).
//! Estimates: a relation's rows are its table's rows times the
//! `selectivity` of the filters pushed into its scan; a set of relations
//! joins to the product of their rows divided, per class, by all but the
//! smallest of its keys' distinct counts (|X|·|Y| / max(ndv(a), ndv(b))
//! for one pair), each count capped by its relation's rows, and a
//! composite key between two relations by at most the smaller table's
//! rows (`JoinGraph::rows`). The distinct
//! counts come from `ANALYZE`; a key without them is taken to have as many
//! values as the smallest table of its class has rows: a foreign key
//! meeting a primary key, where the bigger side shrinks by what the filters
//! kept of the smaller.
//!
//! `SET disable_join_reorder = true` keeps the FROM order, as in Doris;
//! a tree of more than `max_join_number_of_reorder` relations keeps its
//! order too.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{NullEquality, Result};
use datafusion::datasource::default_table_source::source_as_provider;
use datafusion::logical_expr::utils::{conjunction, split_conjunction_owned};
use datafusion::logical_expr::{
    BinaryExpr, Expr, Join, JoinConstraint, JoinType, LogicalPlan, Operator, Projection,
};
use datafusion::optimizer::optimize_projections::OptimizeProjections;
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

use super::join_order::{FILTER_SELECTIVITY, UNKNOWN_ROWS};
use super::table::OlapTable;

/// Reorders inner join trees of up to `max_relations` relations.
#[derive(Debug)]
pub struct ReorderJoins {
    pub max_relations: usize,
}

impl OptimizerRule for ReorderJoins {
    fn name(&self) -> &str {
        "tethys_reorder_joins"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        None
    }

    /// A rebuilt tree has a projection on top only; column pruning then
    /// runs again, so each join passes on only what is read above it (TPC-H
    /// q09 sent lineitem's side with every join key, 14 columns where 6
    /// are read). Only then: a statement without a reordered tree (an
    /// INSERT of 20,000 VALUES rows) is not walked once more.
    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        let reordered = self.reorder(plan)?;
        if !reordered.transformed {
            return Ok(reordered);
        }
        let pruned = OptimizeProjections::new().rewrite(reordered.data, config)?;
        Ok(Transformed::yes(pruned.data))
    }
}

/// A join tree over relation indexes, left input first.
#[derive(Debug, Clone)]
enum Shape {
    Rel(usize),
    Join(Box<Shape>, Box<Shape>),
}

impl Shape {
    /// The same tree with each join's inputs in a fixed order, so trees
    /// that differ only in build and probe sides compare equal.
    fn canonical(&self) -> String {
        match self {
            Shape::Rel(i) => i.to_string(),
            Shape::Join(l, r) => {
                let (mut a, mut b) = (l.canonical(), r.canonical());
                if a > b {
                    std::mem::swap(&mut a, &mut b);
                }
                format!("({a} {b})")
            }
        }
    }
}

/// One conjunct of the tree's join conditions, with the relations it
/// reads (a bit each).
struct Cond {
    expr: Expr,
    rels: u64,
    /// `a = b` with `a` and `b` on disjoint, non-empty sets of relations:
    /// a hash join key.
    eq: Option<(Expr, u64, Expr, u64)>,
}

/// What the estimates know of one relation.
#[derive(Debug, Clone)]
struct RelEstimate {
    rows: f64,
    /// Rows of the table it reads (its rows when it is not a table scan).
    table_rows: f64,
    /// Distinct values by lower-case column name, from `ANALYZE`.
    ndv: HashMap<String, f64>,
}

impl RelEstimate {
    fn unknown(rows: f64) -> Self {
        RelEstimate {
            rows,
            table_rows: rows,
            ndv: HashMap::new(),
        }
    }
}

impl ReorderJoins {
    fn reorder(&self, plan: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
        if !is_inner_join(&plan) {
            return plan.map_children(|c| self.reorder(c));
        }
        let mut rels = vec![];
        let mut conds = vec![];
        let shape = flatten(plan.clone(), &mut rels, &mut conds);
        let Some((new_shape, conds, classes)) = self.plan_order(&rels, conds) else {
            return self.descend(plan);
        };
        if new_shape.canonical() == shape.canonical() {
            return self.descend(plan);
        }
        let schema = plan.schema().clone();
        let rels = rels
            .into_iter()
            .map(|r| Ok(self.reorder(r)?.data))
            .collect::<Result<Vec<_>>>()?;
        let mut placed = vec![false; conds.len()];
        let (joined, _) = build(&new_shape, &rels, &conds, &classes, &mut placed)?;
        // Conditions without a join to carry them (none, as every
        // condition's relations meet at the root) would be lost: keep the
        // original order rather than risk it.
        if placed.iter().any(|p| !p) {
            return self.descend(plan);
        }
        let columns = schema.columns().into_iter().map(Expr::Column).collect();
        Ok(Transformed::yes(LogicalPlan::Projection(
            Projection::try_new(columns, Arc::new(joined))?,
        )))
    }

    /// Reorders below the relations of an inner join tree that keeps its
    /// order, walking the tree as `flatten` does.
    fn descend(&self, plan: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
        if is_inner_join(&plan) || is_join_projection(&plan) {
            plan.map_children(|c| self.descend(c))
        } else {
            self.reorder(plan)
        }
    }

    /// The order of `rels`, with the conditions classified and their key
    /// classes; `None` when the tree is too small or too large to reorder
    /// or a condition's columns cannot be placed.
    fn plan_order(&self, rels: &[LogicalPlan], conds: Vec<Expr>) -> Option<Planned> {
        if rels.len() < 3 || rels.len() > self.max_relations.min(64) {
            return None;
        }
        let conds = classify(conds, rels)?;
        let classes = key_classes(&conds);
        let est: Vec<RelEstimate> = rels.iter().map(estimate).collect();
        let graph = JoinGraph::new(&classes, &est, &conds);
        let shape = if rels.len() <= DP_MAX_RELATIONS {
            graph.best_order().unwrap_or_else(|| graph.greedy_order())
        } else {
            graph.greedy_order()
        };
        Some((shape, conds, classes))
    }
}

/// A tree's new shape, its classified conditions and their key classes.
type Planned = (Shape, Vec<Cond>, Vec<Vec<(Expr, usize)>>);

/// Trees of up to this many relations are ordered exhaustively (3^n
/// splits: 59 K at 10); bigger ones greedily.
const DP_MAX_RELATIONS: usize = 10;

/// The join conditions of a tree as equivalence classes of keys: after
/// `a = b AND b = c`, `a = c` holds too, so TPC-H q05's `n_nationkey` can
/// meet `c_nationkey` although the query only says `s_nationkey` equals
/// both.
struct JoinGraph {
    /// Estimated rows of each relation (at least 1).
    rows: Vec<f64>,
    /// Rows of the table each relation reads.
    table_rows: Vec<f64>,
    /// Each class: its keys' relation and distinct count (capped by the
    /// relation's rows).
    classes: Vec<Vec<(usize, f64)>>,
    /// Relations of each condition that is not a key equality; each
    /// keeps `FILTER_SELECTIVITY` of the rows of a join that has them all.
    residual: Vec<u64>,
}

impl JoinGraph {
    fn new(keys: &[Vec<(Expr, usize)>], est: &[RelEstimate], conds: &[Cond]) -> Self {
        let mut classes = vec![];
        for class in keys {
            let info: Vec<(usize, (Option<f64>, f64))> = class
                .iter()
                .map(|(e, rel)| (*rel, key_estimate(e, &est[*rel])))
                .collect();
            // A key without statistics has as many values as the smallest
            // table (or known distinct count) of its class: a foreign key
            // meeting a primary key.
            let fallback = info
                .iter()
                .map(|(_, (ndv, table_rows))| ndv.unwrap_or(*table_rows))
                .fold(f64::INFINITY, f64::min);
            classes.push(
                info.into_iter()
                    .map(|(rel, (ndv, _))| {
                        let ndv = ndv.unwrap_or(fallback).min(est[rel].rows).max(1.0);
                        (rel, ndv)
                    })
                    .collect(),
            );
        }
        JoinGraph {
            rows: est.iter().map(|e| e.rows.max(1.0)).collect(),
            table_rows: est.iter().map(|e| e.table_rows.max(1.0)).collect(),
            classes,
            residual: conds
                .iter()
                .filter(|c| !is_key_equality(c))
                .map(|c| c.rels)
                .collect(),
        }
    }

    /// Estimated rows of joining the relations of `set`, adding them in
    /// index order: each multiplies by its rows and divides, per key class
    /// it shares with those before it, by the larger of its key's distinct
    /// count and the smallest of theirs (|X|·|Y| / max(ndv(a), ndv(b)) for
    /// one pair). Classes that link it to the same earlier relation form a
    /// composite key, which divides by at most the smaller table's rows:
    /// lineitem's (partkey, suppkey) meets partsupp's pair once per line
    /// (TPC-H q09), not once per 200 K × 10 K.
    fn rows(&self, set: u64) -> f64 {
        let mut rows = 1.0;
        let mut before = 0u64;
        for r in (0..self.rows.len()).filter(|i| set & (1 << i) != 0) {
            rows *= self.rows[r];
            // Per shared class: its divisor and the earlier relations with
            // a key in it.
            let mut links: Vec<(f64, Vec<usize>)> = vec![];
            for class in &self.classes {
                let mine = class
                    .iter()
                    .filter(|(rel, _)| *rel == r)
                    .map(|(_, d)| *d)
                    .fold(f64::INFINITY, f64::min);
                let earlier: Vec<(usize, f64)> = class
                    .iter()
                    .filter(|(rel, _)| before & (1 << rel) != 0)
                    .copied()
                    .collect();
                if mine.is_infinite() || earlier.is_empty() {
                    continue;
                }
                let theirs = earlier
                    .iter()
                    .map(|(_, d)| *d)
                    .fold(f64::INFINITY, f64::min);
                links.push((
                    mine.max(theirs),
                    earlier.iter().map(|(rel, _)| *rel).collect(),
                ));
            }
            let shared = |q: usize| links.iter().filter(|(_, ps)| ps.contains(&q)).count();
            // Each class counts toward the earlier relation that shares the
            // most classes with `r` (the lowest index on ties).
            let mut by_partner: Vec<(usize, f64, usize)> = vec![];
            for (d, partners) in &links {
                let q = partners
                    .iter()
                    .copied()
                    .fold(None, |best: Option<usize>, q| match best {
                        Some(b) if shared(b) > shared(q) || (shared(b) == shared(q) && b < q) => {
                            Some(b)
                        }
                        _ => Some(q),
                    });
                let Some(q) = q else { continue };
                match by_partner.iter_mut().find(|(p, _, _)| *p == q) {
                    Some((_, product, n)) => {
                        *product *= d;
                        *n += 1;
                    }
                    None => by_partner.push((q, *d, 1)),
                }
            }
            for (q, product, n) in by_partner {
                let d = if n > 1 {
                    product.min(self.table_rows[r].min(self.table_rows[q]))
                } else {
                    product
                };
                rows /= d.max(1.0);
            }
            before |= 1 << r;
        }
        for r in &self.residual {
            if r & !set == 0 && r.count_ones() > 1 {
                rows *= FILTER_SELECTIVITY;
            }
        }
        rows.max(1.0)
    }

    /// Whether a key class joins `a` and `b` (a hash join, not a cross
    /// join).
    fn connected(&self, a: u64, b: u64) -> bool {
        self.classes.iter().any(|c| {
            c.iter().any(|(r, _)| a & (1 << r) != 0) && c.iter().any(|(r, _)| b & (1 << r) != 0)
        })
    }

    fn join(&self, x: (Shape, u64), y: (Shape, u64)) -> (Shape, u64) {
        // The smaller input on the left, DataFusion's build side.
        let (l, r) = if self.rows(x.1) <= self.rows(y.1) {
            (x, y)
        } else {
            (y, x)
        };
        (Shape::Join(Box::new(l.0), Box::new(r.0)), l.1 | r.1)
    }

    /// The tree with the smallest sum of intermediate result rows among
    /// all trees without cross joins (dynamic programming over subsets);
    /// `None` when the relations are not all connected.
    fn best_order(&self) -> Option<Shape> {
        let n = self.rows.len();
        let full = (1u64 << n) - 1;
        let mut best: HashMap<u64, (f64, Shape)> = HashMap::new();
        for i in 0..n {
            best.insert(1 << i, (0.0, Shape::Rel(i)));
        }
        for set in 1..=full {
            if set.count_ones() < 2 {
                continue;
            }
            let low = set & set.wrapping_neg();
            let mut choice: Option<(f64, u64, u64)> = None;
            // Splits whose first part holds the lowest relation, so each
            // unordered pair is seen once.
            let rest = set & !low;
            let mut sub = rest;
            loop {
                let a = low | sub;
                let b = set & !a;
                if b != 0
                    && let (Some((ca, _)), Some((cb, _))) = (best.get(&a), best.get(&b))
                    && self.connected(a, b)
                {
                    let cost = ca + cb;
                    if choice.is_none_or(|(c, _, _)| cost < c) {
                        choice = Some((cost, a, b));
                    }
                }
                if sub == 0 {
                    break;
                }
                sub = (sub - 1) & rest;
            }
            if let Some((cost, a, b)) = choice {
                let (sa, sb) = (best[&a].1.clone(), best[&b].1.clone());
                let (shape, _) = self.join((sa, a), (sb, b));
                best.insert(set, (cost + self.rows(set), shape));
            }
        }
        best.remove(&full).map(|(_, s)| s)
    }

    /// Greedy operator ordering: of the connected pairs of partial
    /// results, the one with the smallest join is joined first; parts no
    /// key connects are cross joined, smallest first.
    fn greedy_order(&self) -> Shape {
        let mut parts: Vec<(Shape, u64)> = (0..self.rows.len())
            .map(|i| (Shape::Rel(i), 1u64 << i))
            .collect();
        while parts.len() > 1 {
            let mut pick: Option<(f64, usize, usize)> = None;
            for i in 0..parts.len() {
                for j in i + 1..parts.len() {
                    let (x, y) = (parts[i].1, parts[j].1);
                    if !self.connected(x, y) {
                        continue;
                    }
                    let rows = self.rows(x | y);
                    if pick.is_none_or(|(r, _, _)| rows < r) {
                        pick = Some((rows, i, j));
                    }
                }
            }
            let (i, j) = match pick {
                Some((_, i, j)) => (i, j),
                None => {
                    let mut by_rows: Vec<usize> = (0..parts.len()).collect();
                    by_rows
                        .sort_by(|&a, &b| self.rows(parts[a].1).total_cmp(&self.rows(parts[b].1)));
                    (by_rows[0].min(by_rows[1]), by_rows[0].max(by_rows[1]))
                }
            };
            let y = parts.remove(j);
            let x = parts.remove(i);
            parts.push(self.join(x, y));
        }
        parts.pop().map_or(Shape::Rel(0), |p| p.0)
    }
}

/// A condition `a = b` between two single relations: part of a key class.
fn is_key_equality(c: &Cond) -> bool {
    c.eq.as_ref()
        .is_some_and(|(_, sa, _, sb)| sa.count_ones() == 1 && sb.count_ones() == 1)
}

/// The key classes of `conds` (union-find over the sides of key
/// equalities): each key with its relation.
fn key_classes(conds: &[Cond]) -> Vec<Vec<(Expr, usize)>> {
    let mut keys: Vec<(Expr, usize)> = vec![];
    let mut parent: Vec<usize> = vec![];
    fn find(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let index = |e: &Expr, set: u64, keys: &mut Vec<(Expr, usize)>, parent: &mut Vec<usize>| {
        keys.iter().position(|(k, _)| k == e).unwrap_or_else(|| {
            keys.push((e.clone(), set.trailing_zeros() as usize));
            parent.push(parent.len());
            keys.len() - 1
        })
    };
    for c in conds.iter().filter(|c| is_key_equality(c)) {
        let Some((a, sa, b, sb)) = &c.eq else {
            continue;
        };
        let ia = index(a, *sa, &mut keys, &mut parent);
        let ib = index(b, *sb, &mut keys, &mut parent);
        let (ra, rb) = (find(&mut parent, ia), find(&mut parent, ib));
        parent[ra] = rb;
    }
    let mut classes: Vec<(usize, Vec<(Expr, usize)>)> = vec![];
    for (i, key) in keys.into_iter().enumerate() {
        let root = find(&mut parent, i);
        match classes.iter_mut().find(|(r, _)| *r == root) {
            Some((_, members)) => members.push(key),
            None => classes.push((root, vec![key])),
        }
    }
    classes.into_iter().map(|(_, m)| m).collect()
}

/// The distinct count of a join key of relation `rel` (when `ANALYZE` has
/// one for a plain column) and the rows of the table it comes from.
fn key_estimate(e: &Expr, rel: &RelEstimate) -> (Option<f64>, f64) {
    let ndv = match e {
        Expr::Column(c) => rel.ndv.get(&c.name.to_lowercase()).copied(),
        _ => None,
    };
    (ndv, rel.table_rows)
}

/// Inner joins this rule reorders: equality conditions that drop NULL
/// keys, written with ON or WHERE.
fn is_inner_join(plan: &LogicalPlan) -> bool {
    matches!(plan, LogicalPlan::Join(j) if is_inner_join_parts(j))
}

/// A projection that only drops columns between two joins of a tree.
fn is_join_projection(plan: &LogicalPlan) -> bool {
    matches!(plan, LogicalPlan::Projection(p) if is_column_projection(p))
}

fn is_column_projection(p: &Projection) -> bool {
    is_inner_join(&p.input) && p.expr.iter().all(|e| matches!(e, Expr::Column(_)))
}

/// Splits an inner join tree into its relations and condition conjuncts,
/// returning its shape.
fn flatten(plan: LogicalPlan, rels: &mut Vec<LogicalPlan>, conds: &mut Vec<Expr>) -> Shape {
    match plan {
        LogicalPlan::Projection(p) if is_column_projection(&p) => {
            flatten(Arc::unwrap_or_clone(p.input), rels, conds)
        }
        LogicalPlan::Join(j) if is_inner_join_parts(&j) => {
            for (l, r) in j.on {
                conds.push(Expr::BinaryExpr(BinaryExpr::new(
                    Box::new(l),
                    Operator::Eq,
                    Box::new(r),
                )));
            }
            if let Some(f) = j.filter {
                conds.extend(split_conjunction_owned(f));
            }
            let l = flatten(Arc::unwrap_or_clone(j.left), rels, conds);
            let r = flatten(Arc::unwrap_or_clone(j.right), rels, conds);
            Shape::Join(Box::new(l), Box::new(r))
        }
        other => {
            rels.push(other);
            Shape::Rel(rels.len() - 1)
        }
    }
}

fn is_inner_join_parts(j: &Join) -> bool {
    j.join_type == JoinType::Inner
        && j.join_constraint == JoinConstraint::On
        && j.null_equality == NullEquality::NullEqualsNothing
        && !j.null_aware
        && !is_opaque(&j.left)
        && !is_opaque(&j.right)
}

/// A join input whose rows and keys the estimates cannot follow: not a
/// table scan (under aliases, filters and projections) nor another join of
/// the tree. A join with one (a decorrelated subquery's aggregate, a semi
/// join, a derived table) bounds the tree: TPC-H q02's
/// `ps_supplycost = min(ps_supplycost)` per part looks, to independent
/// estimates, as selective as a key match although each part's minimum is
/// one of its own costs, so its aggregate is joined where the query put it.
fn is_opaque(plan: &LogicalPlan) -> bool {
    !(is_inner_join(plan) || is_join_projection(plan) || is_scan(plan))
}

fn is_scan(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::TableScan(_) => true,
        LogicalPlan::SubqueryAlias(a) => is_scan(&a.input),
        LogicalPlan::Filter(f) => is_scan(&f.input),
        LogicalPlan::Projection(p) => is_scan(&p.input),
        _ => false,
    }
}

/// The relations each condition reads; `None` when a column belongs to
/// no relation or to more than one.
fn classify(conds: Vec<Expr>, rels: &[LogicalPlan]) -> Option<Vec<Cond>> {
    let rels_of = |e: &Expr| -> Option<u64> {
        let mut set = 0u64;
        for c in e.column_refs() {
            let owners: Vec<usize> = (0..rels.len())
                .filter(|&i| rels[i].schema().has_column(c))
                .collect();
            let [i] = owners.as_slice() else {
                return None;
            };
            set |= 1 << i;
        }
        Some(set)
    };
    conds
        .into_iter()
        .map(|expr| {
            let rels = rels_of(&expr)?;
            let eq = match &expr {
                Expr::BinaryExpr(BinaryExpr {
                    left,
                    op: Operator::Eq,
                    right,
                }) => {
                    let (sl, sr) = (rels_of(left)?, rels_of(right)?);
                    (sl != 0 && sr != 0 && sl & sr == 0)
                        .then(|| (left.as_ref().clone(), sl, right.as_ref().clone(), sr))
                }
                _ => None,
            };
            Some(Cond { expr, rels, eq })
        })
        .collect()
}

/// Builds the join tree of `shape`, each condition on the lowest join that
/// has all of its relations: hash keys where it is `a = b` across the two
/// inputs, the join's filter otherwise.
fn build(
    shape: &Shape,
    rels: &[LogicalPlan],
    conds: &[Cond],
    classes: &[Vec<(Expr, usize)>],
    placed: &mut [bool],
) -> Result<(LogicalPlan, u64)> {
    let (l, r) = match shape {
        Shape::Rel(i) => return Ok((rels[*i].clone(), 1 << i)),
        Shape::Join(l, r) => (l, r),
    };
    let (left, ls) = build(l, rels, conds, classes, placed)?;
    let (right, rs) = build(r, rels, conds, classes, placed)?;
    let mut on = vec![];
    let mut filter = vec![];
    for (k, c) in conds.iter().enumerate() {
        if placed[k] || c.rels & !(ls | rs) != 0 {
            continue;
        }
        placed[k] = true;
        match &c.eq {
            Some((a, sa, b, sb)) if sa & !ls == 0 && sb & !rs == 0 => {
                on.push((a.clone(), b.clone()));
            }
            Some((a, sa, b, sb)) if sa & !rs == 0 && sb & !ls == 0 => {
                on.push((b.clone(), a.clone()));
            }
            _ => filter.push(c.expr.clone()),
        }
    }
    // Keys equal by transitivity join the inputs where no condition
    // says so directly (q05's `n_nationkey = c_nationkey`).
    for class in classes {
        let in_class = |e: &Expr| class.iter().any(|(k, _)| k == e);
        let left_key = class.iter().find(|(_, rel)| ls & (1 << rel) != 0);
        let right_key = class.iter().find(|(_, rel)| rs & (1 << rel) != 0);
        if let (Some((a, _)), Some((b, _))) = (left_key, right_key)
            && !on.iter().any(|(x, _)| in_class(x))
        {
            on.push((a.clone(), b.clone()));
        }
    }
    let join = Join::try_new(
        Arc::new(left),
        Arc::new(right),
        on,
        conjunction(filter),
        JoinType::Inner,
        JoinConstraint::On,
        NullEquality::NullEqualsNothing,
        false,
    )?;
    Ok((LogicalPlan::Join(join), ls | rs))
}

/// Estimated rows of a relation of a tree (a table scan under aliases,
/// filters and projections), its table's rows and column statistics.
fn estimate(plan: &LogicalPlan) -> RelEstimate {
    let child = |i: usize| {
        plan.inputs()
            .get(i)
            .map_or(RelEstimate::unknown(UNKNOWN_ROWS), |c| estimate(c))
    };
    match plan {
        LogicalPlan::TableScan(scan) => source_as_provider(&scan.source)
            .ok()
            .and_then(|p| {
                let t = (p.as_ref() as &dyn std::any::Any).downcast_ref::<OlapTable>()?;
                t.estimate_scan(&scan.filters)
            })
            .map_or(RelEstimate::unknown(UNKNOWN_ROWS), |s| {
                let rows = scan.fetch.map_or(s.rows, |f| s.rows.min(f as f64));
                RelEstimate {
                    rows,
                    table_rows: s.table_rows,
                    ndv: s.ndv,
                }
            }),
        LogicalPlan::SubqueryAlias(_) => child(0),
        LogicalPlan::Projection(p) => {
            let mut e = child(0);
            // Statistics follow the columns passed through unchanged.
            e.ndv.retain(|name, _| {
                p.expr
                    .iter()
                    .any(|x| matches!(x, Expr::Column(c) if c.name.eq_ignore_ascii_case(name)))
            });
            e
        }
        LogicalPlan::Filter(f) => {
            if let LogicalPlan::TableScan(scan) = f.input.as_ref() {
                let mut scan = scan.clone();
                scan.filters
                    .extend(split_conjunction_owned(f.predicate.clone()));
                return estimate(&LogicalPlan::TableScan(scan));
            }
            let e = child(0);
            RelEstimate {
                rows: e.rows * FILTER_SELECTIVITY,
                ..e
            }
        }
        // Not a scan (`is_opaque` keeps such relations out of the trees).
        _ => RelEstimate::unknown(UNKNOWN_ROWS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TPC-H q05 at SF1: region (1 row after its filter), nation,
    /// customer, orders (a year), lineitem, supplier.
    fn q05() -> JoinGraph {
        JoinGraph {
            rows: vec![1.0, 25.0, 150e3, 214e3, 6e6, 10e3],
            table_rows: vec![5.0, 25.0, 150e3, 1.5e6, 6e6, 10e3],
            classes: vec![
                vec![(0, 1.0), (1, 5.0)],
                vec![(1, 25.0), (2, 25.0), (5, 25.0)],
                vec![(2, 150e3), (3, 100e3)],
                vec![(3, 214e3), (4, 1.5e6)],
                vec![(4, 10e3), (5, 10e3)],
            ],
            residual: vec![],
        }
    }

    #[test]
    fn rows_divide_by_all_but_the_smallest_distinct_count() {
        let g = q05();
        // region ⋈ nation ⋈ customer: the fifth of the customers in ASIA.
        assert_eq!(g.rows(0b000111), 30e3);
        // lineitem ⋈ orders: four items per order of the year.
        assert_eq!(g.rows(0b011000), 856e3);
        // customer ⋈ supplier by nation: many to many.
        assert_eq!(g.rows(0b100100), 60e6);
        // All six: two of the nation class's three keys divide.
        assert!((g.rows(0b111111) - 6848.0).abs() < 1.0);
        assert!(g.connected(0b000011, 0b000100));
        assert!(!g.connected(0b000001, 0b000100));
    }

    #[test]
    fn exhaustive_order_reaches_customers_through_the_region() {
        let g = q05();
        let best = g.best_order().expect("connected");
        assert_eq!(best.canonical(), "(((((0 1) 2) 3) 4) 5)");
        // Greedy joins supplier to the region first, then has to build
        // customers ⋈ orders unfiltered.
        assert_eq!(g.greedy_order().canonical(), "(((0 1) 5) ((2 3) 4))");
    }

    #[test]
    fn composite_keys_divide_by_at_most_the_smaller_table() {
        // TPC-H q09: part (a fifth kept), partsupp, lineitem; lineitem's
        // (partkey, suppkey) is partsupp's key.
        let g = JoinGraph {
            rows: vec![40e3, 800e3, 6e6],
            table_rows: vec![200e3, 800e3, 6e6],
            classes: vec![
                vec![(0, 40e3), (1, 200e3), (2, 200e3)],
                vec![(1, 10e3), (2, 10e3)],
            ],
            residual: vec![],
        };
        assert_eq!(g.rows(0b110), 6e6);
        assert_eq!(g.rows(0b111), 1.2e6);
        // Part's filter reaches partsupp first, not after a partsupp ⋈
        // lineitem estimated at 2400 rows.
        assert_eq!(g.best_order().expect("connected").canonical(), "((0 1) 2)");
    }

    #[test]
    fn canonical_shape_ignores_input_sides() {
        let a = Shape::Join(
            Box::new(Shape::Join(
                Box::new(Shape::Rel(0)),
                Box::new(Shape::Rel(1)),
            )),
            Box::new(Shape::Rel(2)),
        );
        let b = Shape::Join(
            Box::new(Shape::Rel(2)),
            Box::new(Shape::Join(
                Box::new(Shape::Rel(1)),
                Box::new(Shape::Rel(0)),
            )),
        );
        let c = Shape::Join(
            Box::new(Shape::Join(
                Box::new(Shape::Rel(0)),
                Box::new(Shape::Rel(2)),
            )),
            Box::new(Shape::Rel(1)),
        );
        assert_eq!(a.canonical(), b.canonical());
        assert_ne!(a.canonical(), c.canonical());
    }
}

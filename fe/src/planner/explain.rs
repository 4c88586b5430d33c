//! EXPLAIN in Doris' shape: the physical plan cut into `PLAN FRAGMENT`s at
//! the FE/BE boundary, nodes numbered bottom-up under Doris' names
//! (`VOlapScanNode`, `VAGGREGATE (update serialize)`, `VHASH JOIN`, ...).

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Literal;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::limit::{GlobalLimitExec, LocalLimitExec};
use datafusion::physical_plan::sorts::sort::SortExec;
use tethys_common::plan::{FragmentProfile, OlapScanExec, ScanFilterExec};

use datafusion_distributed::{DistributedLeafExec, NetworkBoundaryExt, Stage};

use super::remote::{BeFragmentExec, FragmentInfo};

mod counters;
pub use counters::analyze_lines_after_run;
use counters::{SCAN_COUNTERS, counted, exchange_counters, task_profiles};

/// A rendered node.
struct RNode {
    id: usize,
    name: String,
    attrs: Vec<String>,
    children: Vec<RChild>,
}

enum RChild {
    Node(RNode),
    /// An exchange receiving from fragment `n` (with EXPLAIN ANALYZE, what
    /// it received).
    Exchange {
        id: usize,
        fragment: usize,
        attrs: Vec<String>,
    },
}

struct Fragment {
    partition: String,
    /// How its rows go to the exchange it sends to: `UNPARTITIONED` (to
    /// one receiver, or every receiver for a broadcast) or
    /// `HASH_PARTITIONED: keys`.
    sink: String,
    /// Exchange id this fragment sends to (none for fragment 0).
    sink_exchange: Option<usize>,
    root: Option<RNode>,
    /// It holds a colocate join (`HAS_COLO_PLAN_NODE`).
    colocated: bool,
}

struct Builder {
    fragments: Vec<Fragment>,
    /// The fragment being rendered (a stage of a distributed plan).
    current: usize,
    next_id: usize,
    /// Runtime filter number of each join dynamic filter a scan applies,
    /// by the filter's expression id.
    runtime_filters: HashMap<u64, usize>,
    /// `runtime filters:` line of the scan being rendered.
    scan_runtime_filters: Option<String>,
    /// The pushAggOp of the scan being rendered (`None`: NONE).
    scan_push_agg: Option<String>,
    /// EXPLAIN ANALYZE: the plan ran; print its counters.
    analyze: bool,
    /// The backends' counters of the fragment being rendered.
    profile: Option<FragmentProfile>,
    /// ... and per task, when it ran as a stage's tasks.
    instances: Vec<FragmentProfile>,
}

/// The backend operator that runs a pushed-down aggregate with its scan.
const PUSHED_AGG_OP: &str = "TabletAggScanExec";

/// The pushAggOp the scan of a fragment is marked with.
fn scan_push_agg(plan: &Arc<dyn ExecutionPlan>) -> Option<String> {
    if let Some(s) = plan.downcast_ref::<tethys_common::plan::OlapScanExec>() {
        return s.push_agg().map(String::from);
    }
    plan.children().into_iter().find_map(scan_push_agg)
}

/// Join keys as EXPLAIN prints them: `k`, or `(a, b)` for several.
fn keys<'a>(exprs: impl Iterator<Item = &'a Arc<dyn PhysicalExpr>>) -> String {
    let names: Vec<String> = exprs.map(|e| e.to_string()).collect();
    match names.as_slice() {
        [one] => one.clone(),
        _ => format!("({})", names.join(", ")),
    }
}

/// Operators that pass rows through unchanged (a plan shape detail, not a
/// node of their own in Doris' EXPLAIN).
pub(crate) fn transparent(plan: &Arc<dyn ExecutionPlan>) -> bool {
    matches!(
        plan.name(),
        "ProjectionExec"
            | "CoalescePartitionsExec"
            | "RepartitionExec"
            | "CoalesceBatchesExec"
            | "CooperativeExec"
            | "BuildKeysExec"
            | "DistributedExec"
            | "BroadcastExec"
            | "FragmentRootExec"
    )
}

impl Builder {
    fn alloc(&mut self) -> usize {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Renders the part of `plan` inside one fragment; children first so ids
    /// grow bottom-up as in Doris.
    // Over 150 lines on purpose: one arm per plan node, read as one table of Doris' node shapes.
    fn node(
        &mut self,
        plan: &Arc<dyn ExecutionPlan>,
        limit: Option<usize>,
        be: Option<&FragmentInfo>,
    ) -> RChild {
        if let Some(info) = be
            && over_scan(plan)
        {
            return RChild::Node(self.scan_node(info, info.predicates.clone(), limit));
        }
        if transparent(plan) && plan.children().len() == 1 {
            return self.node(plan.children()[0], limit, be);
        }
        if let Some(l) = plan.downcast_ref::<GlobalLimitExec>() {
            return self.node(l.input(), l.fetch().or(limit), be);
        }
        if let Some(l) = plan.downcast_ref::<LocalLimitExec>() {
            return self.node(l.input(), Some(l.fetch()), be);
        }
        if let Some(be) = plan.downcast_ref::<BeFragmentExec>() {
            // The backend part becomes its own fragment behind an exchange.
            let frag_idx = self.fragments.len();
            self.fragments.push(Fragment {
                partition: be.info.distribution.clone(),
                sink: "UNPARTITIONED".into(),
                sink_exchange: None,
                root: None,
                colocated: false,
            });
            self.scan_runtime_filters = self.scan_filters(be.runtime_filters());
            self.scan_push_agg = be.fragments().first().and_then(|(_, p)| scan_push_agg(p));
            self.profile = self.analyze.then(|| be.profile());
            let root = match be.fragments().first() {
                Some((_, p)) => self.be_node(p, &be.info, limit),
                None => self.scan_node(&be.info, vec![], limit),
            };
            self.scan_runtime_filters = None;
            self.scan_push_agg = None;
            self.profile = None;
            let id = self.alloc();
            self.fragments[frag_idx].root = Some(root);
            self.fragments[frag_idx].sink_exchange = Some(id);
            return RChild::Exchange {
                id,
                fragment: frag_idx,
                attrs: vec![],
            };
        }
        if let Some(nb) = plan.as_network_boundary()
            && let Stage::Local(stage) = nb.input_stage()
        {
            let received = match self.analyze {
                true => exchange_counters(plan),
                false => vec![],
            };
            return match self.stage(&stage.plan, limit) {
                RChild::Exchange { id, fragment, .. } => RChild::Exchange {
                    id,
                    fragment,
                    attrs: received,
                },
                node => node,
            };
        }
        if let Some(leaf) = plan.downcast_ref::<DistributedLeafExec>()
            && let Some(scan) = leaf.original().downcast_ref::<BeFragmentExec>()
            && let Some(variant) = leaf.variants().first()
        {
            // One stage's scan, a task per backend: its rows stay in the
            // stage's fragment.
            if self.fragments[self.current].partition.is_empty() {
                self.fragments[self.current].partition = scan.info.distribution.clone();
            }
            self.scan_push_agg = scan_push_agg(variant);
            // Filters of joins in this stage and, through the FE's merge
            // node, of joins in others (`cross_filters.rs`).
            self.scan_runtime_filters = self.scan_filters(scan.runtime_filters());
            if self.analyze {
                // Each task's fragment counters, reported as this leaf's.
                self.instances = task_profiles(plan);
                let mut all = FragmentProfile::default();
                self.instances.iter().for_each(|t| all.merge(t));
                self.profile = Some(all);
            }
            let n = self.be_node(variant, &scan.info, limit);
            self.scan_runtime_filters = None;
            self.scan_push_agg = None;
            self.profile = None;
            self.instances.clear();
            return RChild::Node(n);
        }
        let children: Vec<RChild> = plan
            .children()
            .iter()
            .map(|c| self.node(c, None, be))
            .collect();
        let mut attrs = vec![];
        let name = if let Some(a) = plan.downcast_ref::<AggregateExec>() {
            let out: Vec<String> = a
                .aggr_expr()
                .iter()
                .map(|e| aggregate_sql(e, &aggregate_source(plan)))
                .collect();
            attrs.push(format!("output: {}", out.join(", ")));
            let g: Vec<String> = a
                .group_expr()
                .expr()
                .iter()
                .map(|(_, n)| n.clone())
                .collect();
            if !g.is_empty() {
                attrs.push(format!("group by: {}", g.join(", ")));
            }
            match a.mode() {
                AggregateMode::Partial => "VAGGREGATE (update serialize)",
                AggregateMode::Final | AggregateMode::FinalPartitioned => {
                    "VAGGREGATE (merge finalize)"
                }
                _ => "VAGGREGATE (update finalize)",
            }
            .to_string()
        } else if let Some(j) = plan.downcast_ref::<HashJoinExec>() {
            let dist = match j.partition_mode() {
                PartitionMode::CollectLeft => "BROADCAST",
                _ if super::colocate::is_colocated(j) => {
                    self.fragments[self.current].colocated = true;
                    "COLOCATE"
                }
                _ if super::bucket_shuffle::is_bucket_shuffle(j) => "BUCKET_SHUFFLE",
                _ => "PARTITIONED",
            };
            attrs.push(format!(
                "join op: {} JOIN({dist})[]",
                format!("{:?}", j.join_type()).to_uppercase()
            ));
            for (l, r) in j.on() {
                attrs.push(format!("equal join conjunct: ({l} = {r})"));
            }
            if let Some(f) = j.filter() {
                attrs.push(format!("other join predicates: {}", join_filter_sql(j, f)));
            }
            if let Some(rf) = j
                .dynamic_expressions_produced()
                .iter()
                .filter_map(|d| d.expression_id())
                .find_map(|id| self.runtime_filters.get(&id))
                .copied()
            {
                let build = keys(j.on().iter().map(|(l, _)| l));
                attrs.push(format!(
                    "runtime filters: RF{rf:03}[min_max] <- {build}, RF{:03}[in_or_bloom] <- {build}",
                    rf + 1
                ));
            }
            // The columns a join passes on, when it drops some (Doris
            // prints its output projection the same way); none for a
            // join only counted.
            if j.projection.is_some() {
                let schema = plan.schema();
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                if !names.is_empty() {
                    attrs.push(format!("final projections: {}", names.join(", ")));
                }
            }
            "VHASH JOIN".to_string()
        } else if let Some(s) = plan.downcast_ref::<SortExec>() {
            attrs.push(format!("order by: {}", s.expr()));
            match s.fetch() {
                Some(n) => {
                    attrs.push(format!("limit: {n}"));
                    "VTOP-N".to_string()
                }
                None => "VSORT".to_string(),
            }
        } else if let Some(f) = plan.downcast_ref::<FilterExec>() {
            attrs.push(format!("predicates: {}", f.predicate()));
            "VSELECT".to_string()
        } else {
            match plan.name() {
                "NestedLoopJoinExec" | "CrossJoinExec" => "VNESTED LOOP JOIN".into(),
                "BoundedWindowAggExec" | "WindowAggExec" => "VANALYTIC EVAL".into(),
                "UnionExec" | "PlaceholderRowExec" | "ProjectionExec" => "VUNION".into(),
                "EmptyExec" => "VEMPTYSET".into(),
                "SortPreservingMergeExec" => "VMERGING-EXCHANGE".into(),
                "DataSinkExec" => "OlapTableSink".into(),
                other => other.to_string(),
            }
        };
        if let Some(l) = limit
            && !attrs.iter().any(|a| a.starts_with("limit: "))
        {
            attrs.push(format!("limit: {l}"));
        }
        if self.analyze {
            // Inside a fragment the counters come from the backends; above,
            // from this plan's own operators (per task of its stage).
            // A pushed-down aggregate ran as the scan's storage operator.
            let op = match plan.name() {
                "AggregateExec" if self.scan_push_agg.is_some() => PUSHED_AGG_OP,
                name => name,
            };
            let line = match (&self.profile, be) {
                (Some(p), Some(_)) => {
                    p.get(op, "RowsProduced")
                        .map(|n| match self.instances.len() {
                            0 | 1 => n.to_string(),
                            _ => counted(&self.instances, op, "RowsProduced", 1),
                        })
                }
                _ => {
                    let tasks = task_profiles(plan);
                    (!tasks.is_empty()).then(|| counted(&tasks, plan.name(), "RowsProduced", 1))
                }
            };
            if let Some(line) = line {
                attrs.push(format!("RowsProduced: {line}"));
            }
        }
        let id = self.alloc();
        RChild::Node(RNode {
            id,
            name,
            attrs,
            children,
        })
    }

    /// A stage of a distributed plan, behind the exchange `nb` it sends to:
    /// a fragment of its own.
    fn stage(&mut self, plan: &Arc<dyn ExecutionPlan>, limit: Option<usize>) -> RChild {
        let route = super::bucket_shuffle::route_of(plan);
        let sink =
            match plan.downcast_ref::<datafusion::physical_plan::repartition::RepartitionExec>() {
                // Doris' spelling.
                Some(_) if route.is_some() => format!(
                    "BUCKET_SHFFULE_HASH_PARTITIONED: {}",
                    keys(route.iter().flat_map(|(_, k)| k))
                ),
                Some(r) => match r.partitioning() {
                    datafusion::physical_plan::Partitioning::Hash(k, _) => {
                        format!("HASH_PARTITIONED: {}", keys(k.iter()))
                    }
                    _ => "UNPARTITIONED".into(),
                },
                None => "UNPARTITIONED".into(),
            };
        let frag_idx = self.fragments.len();
        self.fragments.push(Fragment {
            partition: String::new(),
            sink,
            sink_exchange: None,
            root: None,
            colocated: false,
        });
        let outer = std::mem::replace(&mut self.current, frag_idx);
        let root = self.node(plan, limit, None);
        self.current = outer;
        let root = match root {
            RChild::Node(n) => n,
            // A stage that only forwards another's rows.
            RChild::Exchange { id, fragment, .. } => RNode {
                id: self.alloc(),
                name: "VEXCHANGE".into(),
                attrs: vec![format!("from fragment {fragment}, exchange {id}")],
                children: vec![],
            },
        };
        if self.fragments[frag_idx].partition.is_empty() {
            // Rows arrive hashed on the keys of the exchanges it reads.
            let hashed = self.fragments[frag_idx + 1..]
                .iter()
                .find(|f| f.sink.starts_with("HASH_PARTITIONED"))
                .map_or("UNPARTITIONED".to_string(), |f| f.sink.clone());
            self.fragments[frag_idx].partition = hashed;
        }
        let id = self.alloc();
        self.fragments[frag_idx].root = Some(root);
        self.fragments[frag_idx].sink_exchange = Some(id);
        RChild::Exchange {
            id,
            fragment: frag_idx,
            attrs: vec![],
        }
    }

    /// The counters per task, or `all` as the one task's.
    fn instances_or(&self, all: &FragmentProfile) -> Vec<FragmentProfile> {
        match self.instances.is_empty() {
            true => vec![all.clone()],
            false => self.instances.clone(),
        }
    }

    /// Renders a backend fragment: projection/filter fold into the scan.
    fn be_node(
        &mut self,
        plan: &Arc<dyn ExecutionPlan>,
        info: &FragmentInfo,
        limit: Option<usize>,
    ) -> RNode {
        match self.node(plan, limit, Some(info)) {
            RChild::Node(n) => n,
            RChild::Exchange { .. } => self.scan_node(info, vec![], limit),
        }
    }

    /// Numbers the runtime filters a scan applies and renders their line.
    fn scan_filters(&mut self, filters: &[Arc<dyn PhysicalExpr>]) -> Option<String> {
        let mut parts = vec![];
        for f in filters {
            let Some(id) = f.expression_id() else {
                continue;
            };
            let next = 2 * self.runtime_filters.len();
            let rf = *self.runtime_filters.entry(id).or_insert(next);
            let probe = keys(f.children().into_iter());
            parts.push(format!(
                "RF{rf:03}[min_max] -> {probe}, RF{:03}[in_or_bloom] -> {probe}",
                rf + 1
            ));
        }
        (!parts.is_empty()).then(|| format!("runtime filters: {}", parts.join(", ")))
    }

    fn scan_node(
        &mut self,
        info: &FragmentInfo,
        predicates: Vec<String>,
        limit: Option<usize>,
    ) -> RNode {
        let mut attrs = vec![format!(
            "TABLE: {}({}), PREAGGREGATION: ON",
            info.table, info.table_name
        )];
        if !predicates.is_empty() {
            attrs.push(format!("PREDICATES: {}", predicates.join(" AND ")));
        }
        if let Some(rf) = &self.scan_runtime_filters {
            attrs.push(rf.clone());
        }
        attrs.push(format!(
            "partitions={}/{} ({})",
            info.partitions.len(),
            info.total_partitions,
            info.partitions.join(",")
        ));
        attrs.push(format!("tablets={}/{}", info.tablets, info.total_tablets));
        if let Some(l) = limit {
            attrs.push(format!("limit: {l}"));
        }
        attrs.push(format!(
            "pushAggOp={}",
            self.scan_push_agg.as_deref().unwrap_or("NONE")
        ));
        if let Some(p) = &self.profile {
            let pushed = self.scan_push_agg.is_some();
            let scan = p.operators.get(if pushed {
                PUSHED_AGG_OP
            } else {
                "TabletScanExec"
            });
            let op = if pushed {
                PUSHED_AGG_OP
            } else {
                "TabletScanExec"
            };
            for name in SCAN_COUNTERS {
                let v = scan.and_then(|c| c.get(*name)).copied().unwrap_or(0);
                let v = match self.instances.len() {
                    0 | 1 => v.to_string(),
                    _ => counted(&self.instances, op, name, 1),
                };
                attrs.push(format!("{name}: {v}"));
            }
            // Rows each runtime filter removed where the scan tested it,
            // by the filter's probe columns (`RowsFilteredByRF(k)`).
            let by_filter = scan.into_iter().flat_map(|c| c.keys()).filter(|k| {
                k.starts_with(tethys_common::plan::runtime_filters::ROWS_FILTERED_PREFIX)
            });
            for counter in by_filter {
                let v = counted(&self.instances_or(p), op, counter, 1);
                attrs.push(format!("{counter}: {v}"));
            }
            // Rows a pushed-down aggregate took from zone maps and footers.
            if pushed {
                let v = scan.and_then(|c| c.get("RowsStatsAggregated")).copied();
                attrs.push(format!("RowsStatsAggregated: {}", v.unwrap_or(0)));
            }
            // Scans that merge rows by key (AGGREGATE, UNIQUE) also say how
            // many rows merging folded away.
            if let Some(v) = scan.and_then(|c| c.get("MergedRows")) {
                attrs.push(format!("MergedRows: {v}"));
            }
            // ... scans of tables with DELETEs how many rows they hid, and
            // of merge-on-write tables how many superseded rows they skipped.
            for name in ["RowsDelFiltered", "RowsDelByBitmap"] {
                if let Some(v) = scan.and_then(|c| c.get(name)).filter(|v| **v > 0) {
                    attrs.push(format!("{name}: {v}"));
                }
            }
        }
        let id = self.alloc();
        RNode {
            id,
            name: "VOlapScanNode".into(),
            attrs,
            children: vec![],
        }
    }
}

fn render_node(child: &RChild, indent: &str, out: &mut Vec<String>) {
    match child {
        RChild::Exchange { id, attrs, .. } => {
            out.push(format!("{indent}{id}:VEXCHANGE"));
            out.push(format!("{indent}   offset: 0"));
            for a in attrs {
                out.push(format!("{indent}   {a}"));
            }
        }
        RChild::Node(n) => {
            out.push(format!("{indent}{}:{}", n.id, n.name));
            let rail = if n.children.is_empty() { "   " } else { "|  " };
            for a in &n.attrs {
                out.push(format!("{indent}{rail}{a}"));
            }
            if n.children.is_empty() {
                return;
            }
            out.push(format!("{indent}|"));
            // Build sides (DataFusion's left inputs) hang off `|----`, the
            // probe side (the last input) continues below.
            let Some((probe, builds)) = n.children.split_last() else {
                return;
            };
            for c in builds.iter().rev() {
                let mut sub = vec![];
                render_node(c, "", &mut sub);
                for (i, l) in sub.iter().enumerate() {
                    if i == 0 {
                        out.push(format!("{indent}|----{l}"));
                    } else {
                        out.push(format!("{indent}|    {l}"));
                    }
                }
                out.push(format!("{indent}|"));
            }
            render_node(probe, indent, out);
        }
    }
}

/// Renders the plan as Doris-style EXPLAIN lines.
pub fn explain_lines(plan: &Arc<dyn ExecutionPlan>, output_names: &[String]) -> Vec<String> {
    render(plan, output_names, false)
}

/// EXPLAIN ANALYZE: renders a plan that has run, with each scan's backend
/// counters (`RawRowsRead: 6001215`, ...) and the rows each node produced.
pub fn analyze_lines(plan: &Arc<dyn ExecutionPlan>, output_names: &[String]) -> Vec<String> {
    render(plan, output_names, true)
}

fn render(plan: &Arc<dyn ExecutionPlan>, output_names: &[String], analyze: bool) -> Vec<String> {
    let mut b = Builder {
        analyze,
        profile: None,
        instances: vec![],
        fragments: vec![Fragment {
            partition: "UNPARTITIONED".into(),
            sink: "UNPARTITIONED".into(),
            sink_exchange: None,
            root: None,
            colocated: false,
        }],
        current: 0,
        next_id: 0,
        runtime_filters: HashMap::new(),
        scan_runtime_filters: None,
        scan_push_agg: None,
    };
    let root = b.node(plan, None, None);
    let mut out: Vec<String> = vec![];
    for (i, f) in b.fragments.iter().enumerate() {
        out.push(format!("PLAN FRAGMENT {i}"));
        if i == 0 {
            out.push("  OUTPUT EXPRS:".into());
            for n in output_names {
                out.push(format!("    {n}"));
            }
        }
        out.push(format!("  PARTITION: {}", f.partition));
        out.push(String::new());
        out.push(format!("  HAS_COLO_PLAN_NODE: {}", f.colocated));
        out.push(String::new());
        if i == 0 {
            out.push("  VRESULT SINK".into());
            out.push("     MYSQL_PROTOCAL".into());
        } else {
            out.push("  STREAM DATA SINK".into());
            out.push(format!(
                "    EXCHANGE ID: {:02}",
                f.sink_exchange.unwrap_or(0)
            ));
            out.push(format!("    {}", f.sink));
        }
        out.push(String::new());
        let mut lines = vec![];
        if i == 0 {
            render_node(&root, "  ", &mut lines);
        } else if let Some(r) = &f.root {
            render_node(&RChild::Node(clone_shallow(r)), "  ", &mut lines);
        }
        out.extend(lines);
        out.push(String::new());
    }
    out.into_iter()
        .map(|l| l.replace("count(Int64(1))", "count(*)"))
        .collect()
}

fn clone_shallow(n: &RNode) -> RNode {
    RNode {
        id: n.id,
        name: n.name.clone(),
        attrs: n.attrs.clone(),
        children: n
            .children
            .iter()
            .map(|c| match c {
                RChild::Node(x) => RChild::Node(clone_shallow(x)),
                RChild::Exchange {
                    id,
                    fragment,
                    attrs,
                } => RChild::Exchange {
                    id: *id,
                    fragment: *fragment,
                    attrs: attrs.clone(),
                },
            })
            .collect(),
    }
}

/// The plan an aggregate's arguments are evaluated over: the input of its
/// partial phase (for a final phase, found below the exchange).
fn aggregate_source(plan: &Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
    fn partial_below(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
        if let Some(a) = plan.downcast_ref::<AggregateExec>()
            && *a.mode() == AggregateMode::Partial
        {
            return Some(a.input().clone());
        }
        if let Some(be) = plan.downcast_ref::<BeFragmentExec>() {
            return be.fragments().first().and_then(|(_, f)| partial_below(f));
        }
        if transparent(plan) && plan.children().len() == 1 {
            return partial_below(plan.children()[0]);
        }
        None
    }
    match plan.downcast_ref::<AggregateExec>() {
        Some(a) if *a.mode() == AggregateMode::Partial => a.input().clone(),
        Some(a) => partial_below(a.input()).unwrap_or_else(|| a.input().clone()),
        None => plan.clone(),
    }
}

/// `expr` (over `plan`'s output) with the columns that projections below
/// computed replaced by their expressions, so EXPLAIN shows
/// `sum(l_extendedprice * (1 - l_discount))`, not `sum(__common_expr_1)`.
fn inline_projections(
    expr: &Arc<dyn PhysicalExpr>,
    plan: &Arc<dyn ExecutionPlan>,
) -> Arc<dyn PhysicalExpr> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    use datafusion::physical_expr::expressions::Column;
    use datafusion::physical_plan::projection::ProjectionExec;
    if let Some(p) = plan.downcast_ref::<ProjectionExec>() {
        let exprs = p.expr();
        let input = p.input();
        return expr
            .clone()
            .transform_up(|e| match e.downcast_ref::<Column>() {
                Some(c) => match exprs.get(c.index()) {
                    Some(pe) => Ok(Transformed::yes(inline_projections(&pe.expr, input))),
                    None => Ok(Transformed::no(e)),
                },
                None => Ok(Transformed::no(e)),
            })
            .map(|t| t.data)
            .unwrap_or_else(|_| expr.clone());
    }
    if transparent(plan) && plan.children().len() == 1 {
        return inline_projections(expr, plan.children()[0]);
    }
    expr.clone()
}

/// Whether `plan` is the scan, or filters and projections right above it
/// (which EXPLAIN folds into the scan node), a filter a task's plan
/// carries to a backend (`ScanFilterExec`) among them.
pub(crate) fn over_scan(plan: &Arc<dyn ExecutionPlan>) -> bool {
    if plan.downcast_ref::<OlapScanExec>().is_some() {
        return true;
    }
    (matches!(plan.name(), "FilterExec" | "ProjectionExec") || plan.is::<ScanFilterExec>())
        && plan.children().len() == 1
        && over_scan(plan.children()[0])
}

/// An aggregate call as SQL (`sum(amount * (1 - 0.1))`, `count(*)`), from
/// its physical arguments over `source`: DataFusion's own name drops the
/// parentheses of nested arithmetic.
fn aggregate_sql(
    e: &datafusion::physical_expr::aggregate::AggregateFunctionExpr,
    source: &Arc<dyn ExecutionPlan>,
) -> String {
    let name = e.fun().name();
    let args = e.expressions();
    if name == "count" && args.len() == 1 && args[0].downcast_ref::<Literal>().is_some() {
        return "count(*)".into();
    }
    let args: Vec<String> = args
        .iter()
        .map(|a| {
            let a = inline_projections(a, source);
            datafusion::physical_expr_common::physical_expr::fmt_sql(a.as_ref()).to_string()
        })
        .collect();
    let distinct = if e.is_distinct() { "DISTINCT " } else { "" };
    format!("{name}({distinct}{})", args.join(", "))
}

/// A join filter over the join's inputs' columns (`name@index` of the
/// side's schema, as the equal join conjuncts are shown), not over the
/// filter's own intermediate schema.
fn join_filter_sql(
    j: &HashJoinExec,
    f: &datafusion::physical_plan::joins::utils::JoinFilter,
) -> String {
    use datafusion::common::JoinSide;
    use datafusion::common::tree_node::{Transformed, TreeNode};
    use datafusion::physical_expr::expressions::Column;
    let renamed = f.expression().clone().transform_up(|e| {
        let Some(c) = e.downcast_ref::<Column>() else {
            return Ok(Transformed::no(e));
        };
        let Some(ci) = f.column_indices().get(c.index()) else {
            return Ok(Transformed::no(e));
        };
        let schema = match ci.side {
            JoinSide::Left => j.left().schema(),
            JoinSide::Right => j.right().schema(),
            JoinSide::None => return Ok(Transformed::no(e)),
        };
        let name = match schema.fields().get(ci.index) {
            Some(field) => field.name().clone(),
            None => return Ok(Transformed::no(e)),
        };
        Ok(Transformed::yes(
            Arc::new(Column::new(&name, ci.index)) as Arc<dyn PhysicalExpr>
        ))
    });
    match renamed {
        Ok(t) => t.data.to_string(),
        Err(_) => f.expression().to_string(),
    }
}

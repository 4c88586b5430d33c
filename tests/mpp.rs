//! MPP execution across backend processes (issue 37): with three BEs each
//! holding a share of the tablets, joins and aggregations run as stages on
//! the backends with exchanges between them, and answer as the plan that
//! runs them on the FE does (`enable_mpp_execution = false`).

use std::path::PathBuf;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use tethys_sql_tests::cluster::cluster;
use tethys_sql_tests::{query_rows, run_all};

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tethys"))
}

/// Queries whose plans need each kind of exchange: a partitioned and a
/// broadcast join, two-phase and DISTINCT aggregation, a TopN, a window.
const QUERIES: &[&str] = &[
    "SELECT f.g, count(*), sum(f.v), sum(d.w) FROM d.f JOIN d.dim d ON f.k = d.k \
     GROUP BY f.g ORDER BY f.g",
    "SELECT f.g, count(*), sum(f.v) FROM d.f JOIN d.f2 ON f.v = f2.v GROUP BY f.g ORDER BY f.g",
    "SELECT count(DISTINCT v % 1000), count(*) FROM d.f",
    "SELECT k, v FROM d.f ORDER BY v DESC, k LIMIT 7",
    "SELECT g, k, rank() OVER (PARTITION BY g ORDER BY v DESC) r FROM d.f \
     WHERE k < 40 ORDER BY g, k",
    "SELECT g, avg(v), min(v), max(v) FROM d.f WHERE k % 3 = 1 GROUP BY g HAVING count(*) > 10 \
     ORDER BY g",
    // A partitioned join whose runtime filter crosses stages: f's scan sits
    // below the aggregate's exchange, the join's build side is spread over
    // the backends.
    CROSS_STAGE,
    SEMI_ON_GROUPS,
    // Functions of each kind in the backends' stages (a task registers
    // those the plan calls): scalar ones in a scan's filter and above it,
    // Tethys' among them, an aggregate over a window.
    "SELECT g, k, sum(v) OVER (PARTITION BY g ORDER BY k ROWS 1 PRECEDING) s, \
     lpad(cast(k AS VARCHAR), 5, '0') p, bitmap_count(to_bitmap(k)) b FROM d.f \
     WHERE abs(v - 10000) < 40 AND upper(concat('x', cast(g AS VARCHAR))) <> 'X9' \
     ORDER BY g, k",
];

/// A semi join whose build side's rows are emitted (it is partitioned, not
/// broadcast), probed by an aggregation hashed on the join key.
const SEMI_ON_GROUPS: &str = "SELECT k, w FROM d.dim \
     WHERE k IN (SELECT v FROM d.f GROUP BY v HAVING count(*) > 0) ORDER BY k";

const CROSS_STAGE: &str = "SELECT count(*), sum(a.n), sum(a.v) FROM d.f2 \
     JOIN (SELECT v, count(*) n FROM d.f GROUP BY v) a ON f2.v = a.v WHERE f2.k < 1500";

/// The answers of `queries` after the statements `set`.
async fn answers_after(c: &mut Conn, set: &[String], queries: &[&str]) -> Vec<Vec<Vec<String>>> {
    let set: Vec<&str> = set.iter().map(String::as_str).collect();
    run_all(c, &set).await;
    let mut out = vec![];
    for q in queries {
        out.push(query_rows(c, q).await);
    }
    out
}

async fn answers(c: &mut Conn, mpp: bool) -> Vec<Vec<Vec<String>>> {
    answers_after(c, &[format!("SET enable_mpp_execution = {mpp}")], QUERIES).await
}

/// The fragment of `plan` (EXPLAIN's text) holding `node`.
fn fragment_with<'a>(plan: &'a str, node: &str) -> &'a str {
    plan.split("PLAN FRAGMENT")
        .find(|f| f.contains(node))
        .unwrap_or_default()
}

/// The nodes of `plan` (EXPLAIN's text, `3:VHASH JOIN`) named by
/// DataFusion's operator (`...Exec`) rather than as Doris names them.
fn foreign_nodes(plan: &str) -> Vec<&str> {
    plan.lines()
        .filter_map(|l| {
            let l = l.trim_start_matches([' ', '|']);
            let (id, name) = l.split_once(':')?;
            (!id.is_empty() && id.chars().all(|c| c.is_ascii_digit())).then_some(name)
        })
        .filter(|name| {
            name.split_whitespace()
                .next()
                .is_some_and(|n| n.ends_with("Exec"))
        })
        .collect()
}

async fn explain(c: &mut Conn, sql: &str) -> String {
    query_rows(c, &format!("EXPLAIN {sql}"))
        .await
        .into_iter()
        .map(|r| r.join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_and_aggregations_run_over_three_backends() {
    let (_fe, _bes, mut c, ids) = cluster(&binary(), 3, &["--default-replication-num", "1"]).await;
    run_all(
        &mut c,
        &[
            "CREATE TABLE d.f (k INT, g INT, v INT) DUPLICATE KEY(k) \
             DISTRIBUTED BY HASH(k) BUCKETS 6",
            "CREATE TABLE d.f2 (k INT, v INT) DUPLICATE KEY(k) DISTRIBUTED BY HASH(k) BUCKETS 6",
            "CREATE TABLE d.dim (k INT, w INT) DUPLICATE KEY(k) DISTRIBUTED BY HASH(k) BUCKETS 3",
            "INSERT INTO d.f SELECT number, number % 7, (number * 7919) % 20011 \
             FROM numbers(\"number\" = \"20000\")",
            "INSERT INTO d.f2 SELECT number, (number * 31) % 20011 FROM numbers(\"number\" = \"5000\")",
            "INSERT INTO d.dim SELECT number, number * 2 FROM numbers(\"number\" = \"100\")",
        ],
    )
    .await;
    // Every backend holds a share of the fact table's tablets.
    let tablets = query_rows(&mut c, "SHOW TABLETS FROM d.f").await;
    let mut on: Vec<&String> = tablets.iter().map(|r| &r[2]).collect();
    on.sort();
    on.dedup();
    assert_eq!(on.len(), 3, "tablets on every backend {ids:?}: {tablets:?}");

    // Build sides over 1000 rows are hashed, not broadcast.
    run_all(&mut c, &["SET broadcast_row_count_limit = 1000"]).await;
    let on_fe = answers(&mut c, false).await;
    // A stage above exchanges bringing few rows (the partitioned join of
    // f's 20,000 and f2's 5,000) runs as one task, in the FE's own stage.
    let small = answers(&mut c, true).await;
    let join = QUERIES[1];
    let in_one = explain(&mut c, join).await;
    assert!(
        fragment_with(&in_one, "JOIN(PARTITIONED)").contains("VRESULT SINK"),
        "{in_one}"
    );
    run_all(&mut c, &["SET small_stage_row_limit = 0"]).await;
    let over_bes = answers(&mut c, true).await;
    // The semi join runs in its probe side's stage, the aggregation's rows
    // not hashed again on the key they are hashed on.
    let semi = explain(&mut c, SEMI_ON_GROUPS).await;
    assert!(
        fragment_with(&semi, "JOIN(PARTITIONED)").contains("VAGGREGATE (merge finalize)"),
        "{semi}"
    );
    assert_eq!(small, over_bes, "one task answers as several do");
    // EXPLAIN names every node as Doris does, also the filters a task's
    // plan carries to a backend over its scan.
    for q in QUERIES {
        let plan = explain(&mut c, q).await;
        assert_eq!(foreign_nodes(&plan), Vec::<&str>::new(), "{plan}");
    }
    for (q, (a, b)) in QUERIES.iter().zip(on_fe.iter().zip(&over_bes)) {
        assert!(!a.is_empty(), "{q} answers rows");
        assert_eq!(a, b, "{q}: MPP answers as the FE's plan does");
    }
    assert_eq!(
        over_bes[2],
        vec![vec!["1000".to_string(), "20000".to_string()]]
    );
    // The broadcast joins' runtime filters, applied by the scans of their
    // stage on each backend, change no answer.
    run_all(&mut c, &["SET runtime_filter_mode = 'OFF'"]).await;
    assert_eq!(
        answers(&mut c, true).await,
        over_bes,
        "without runtime filters"
    );
    run_all(&mut c, &["SET runtime_filter_mode = 'GLOBAL'"]).await;

    // The plans exchange rows between backends: a fragment per stage, rows
    // hashed on the join or group keys; the FE's plan has one fragment per
    // scan and none hashed.
    let plan = explain(&mut c, join).await;
    assert!(
        !fragment_with(&plan, "JOIN(PARTITIONED)").contains("VRESULT SINK"),
        "{plan}"
    );
    assert!(
        plan.matches("PLAN FRAGMENT").count() > in_one.matches("PLAN FRAGMENT").count(),
        "{plan}"
    );
    assert!(plan.contains("HASH_PARTITIONED: v@"), "{plan}");
    assert!(plan.contains("JOIN(PARTITIONED)"), "{plan}");
    assert!(plan.contains("VAGGREGATE (merge finalize)"), "{plan}");
    assert!(plan.matches("PLAN FRAGMENT").count() >= 4, "{plan}");
    // The cross-stage filter: the join (build side f2) in one fragment, f's
    // scan taking its filter in another.
    let cross = explain(&mut c, CROSS_STAGE).await;
    let fragments: Vec<&str> = cross.split("PLAN FRAGMENT").collect();
    let join_at = fragments
        .iter()
        .position(|f| f.contains("JOIN(PARTITIONED)") && f.contains("[min_max] <- v@"));
    let scan_at = fragments
        .iter()
        .position(|f| f.contains("TABLE: d.f(f)") && f.contains("[min_max] -> v@"));
    assert!(
        join_at.is_some() && scan_at.is_some() && join_at != scan_at,
        "{cross}"
    );
    // A small build side keyed on f's distribution column goes once to the
    // buckets it meets rather than to every backend (Doris prefers bucket
    // shuffle to broadcast); without bucket shuffle joins it is broadcast.
    let small = explain(&mut c, QUERIES[0]).await;
    assert!(small.contains("JOIN(BUCKET_SHUFFLE)"), "{small}");
    run_all(&mut c, &["SET enable_bucket_shuffle_join = false"]).await;
    let small = explain(&mut c, QUERIES[0]).await;
    assert!(small.contains("JOIN(BROADCAST)"), "{small}");
    // dim's rows go from the tasks reading it (on three backends) straight
    // to the join's: no fragment only merges them to broadcast them, also
    // when the join's keys filter f (a build side read whole filters none).
    assert!(!relays(&small), "{small}");
    let filtering = QUERIES[0].replace("GROUP BY", "WHERE d.w < 150 GROUP BY");
    let plan = explain(&mut c, &filtering).await;
    assert!(
        plan.contains("JOIN(BROADCAST)") && plan.contains("[in_or_bloom] -> k@"),
        "{plan}"
    );
    assert!(!relays(&plan), "{plan}");
    // Doris' hints turn either around, with the same answers.
    let shuffled = QUERIES[0].replace("JOIN d.dim", "JOIN [shuffle] d.dim");
    let plan = explain(&mut c, &shuffled).await;
    assert!(
        plan.contains("JOIN(PARTITIONED)") && !plan.contains("BROADCAST"),
        "{plan}"
    );
    assert_eq!(query_rows(&mut c, &shuffled).await, over_bes[0]);
    let broadcast = join.replace("JOIN d.f2", "JOIN [broadcast] d.f2");
    let plan = explain(&mut c, &broadcast).await;
    assert!(
        plan.contains("JOIN(BROADCAST)") && !plan.contains("PARTITIONED)"),
        "{plan}"
    );
    assert_eq!(query_rows(&mut c, &broadcast).await, over_bes[1]);
    counters_of_every_task(&mut c, join, QUERIES[0]).await;
    one_tablet_tables_apart(&mut c).await;
    a_selective_join_leaves_a_small_stage(&mut c).await;
    a_fact_side_keeps_its_stage(&mut c).await;
    run_all(&mut c, &["SET enable_mpp_execution = false"]).await;
    let on_fe_plan = explain(&mut c, join).await;
    assert!(!on_fe_plan.contains("HASH_PARTITIONED: v@"), "{on_fe_plan}");
}

/// A join that keeps few rows (f's 20,000 meeting the 5 of dim's 100 keys
/// a filter leaves) feeds a final aggregation estimated by the join's key
/// statistics, not by its larger side: a small stage, run in the FE's own
/// fragment, with the answers of the plan that spreads it.
async fn a_selective_join_leaves_a_small_stage(c: &mut Conn) {
    let sql = "SELECT f.k, f.v, count(*) FROM d.f JOIN d.dim ON f.k = dim.k \
               WHERE dim.w < 10 GROUP BY f.k, f.v ORDER BY f.k";
    run_all(
        c,
        &[
            "ANALYZE TABLE d.f WITH SYNC",
            "ANALYZE TABLE d.dim WITH SYNC",
            "SET small_stage_row_limit = 1000",
        ],
    )
    .await;
    let plan = explain(c, sql).await;
    assert!(
        fragment_with(&plan, "VAGGREGATE (merge finalize)").contains("VRESULT SINK"),
        "{plan}"
    );
    let small = query_rows(c, sql).await;
    assert_eq!(small.len(), 5, "{small:?}");
    run_all(c, &["SET small_stage_row_limit = 0"]).await;
    let plan = explain(c, sql).await;
    assert!(
        !fragment_with(&plan, "VAGGREGATE (merge finalize)").contains("VRESULT SINK"),
        "{plan}"
    );
    assert_eq!(query_rows(c, sql).await, small);
    run_all(c, &["SET small_stage_row_limit = 65536"]).await;
}

/// f's side, after the join with the one dim row `w < 2` keeps, is
/// estimated at fewer rows (200) than a table of 1,500 it joins next (SSB
/// q3.3's lineorder against `dates`); building it would end f's stage at
/// that join. The small table is broadcast to f's stage instead: both
/// joins beside f's scan, with the answer one process gives.
async fn a_fact_side_keeps_its_stage(c: &mut Conn) {
    run_all(
        c,
        &[
            "CREATE TABLE d.t3 (id INT, name VARCHAR(10)) DUPLICATE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 3",
            "INSERT INTO d.t3 SELECT number, concat('n', number % 5) \
             FROM numbers(\"number\" = \"1500\")",
            "ANALYZE TABLE d.t3 WITH SYNC",
            "SET broadcast_row_count_limit = 10000",
        ],
    )
    .await;
    let sql = "SELECT t3.name, count(*), sum(f.g) FROM d.f JOIN d.dim ON f.k = dim.k \
               JOIN d.t3 ON f.v = t3.id WHERE dim.w < 2 GROUP BY t3.name";
    let plan = explain(c, sql).await;
    let f_stage = fragment_with(&plan, "TABLE: d.f(f)");
    assert_eq!(f_stage.matches("VHASH JOIN").count(), 2, "{plan}");
    assert!(
        f_stage.contains("TABLE: d.f(f)") && !f_stage.contains("TABLE: d.t3"),
        "{plan}"
    );
    let over_bes = query_rows(c, sql).await;
    assert_eq!(over_bes, vec![vec!["n0", "1", "0"]], "{plan}");
    run_all(c, &["SET enable_mpp_execution = false"]).await;
    assert_eq!(query_rows(c, sql).await, over_bes);
    run_all(
        c,
        &[
            "SET enable_mpp_execution = true",
            "SET broadcast_row_count_limit = 1000",
        ],
    )
    .await;
}

/// Two tables of one tablet each, on different backends, joined (as
/// TPC-H's region and nation): the join's stage and its build side's are
/// one task each, which datafusion-distributed would merge into one stage
/// reading both backends. The plan still runs on the backends (a task per
/// backend for each scan), not every join on the FE. And a bucket shuffle
/// into a table of one tablet.
async fn one_tablet_tables_apart(c: &mut Conn) {
    run_all(
        c,
        &[
            "CREATE TABLE d.region (rk INT, name VARCHAR(10)) DUPLICATE KEY(rk) \
             DISTRIBUTED BY HASH(rk) BUCKETS 1",
            "CREATE TABLE d.nation (nk INT, rk INT) DUPLICATE KEY(nk) \
             DISTRIBUTED BY HASH(nk) BUCKETS 1",
            "INSERT INTO d.region VALUES (0, 'a'), (1, 'b'), (2, 'c')",
            "INSERT INTO d.nation SELECT number, number % 3 FROM numbers(\"number\" = \"25\")",
        ],
    )
    .await;
    let on = |rows: Vec<Vec<String>>| rows.into_iter().map(|r| r[2].clone()).collect::<Vec<_>>();
    let (r, n) = (
        on(query_rows(c, "SHOW TABLETS FROM d.region").await),
        on(query_rows(c, "SHOW TABLETS FROM d.nation").await),
    );
    assert_ne!(r, n, "one tablet each, on different backends");
    let sql = "SELECT f.g, count(*), sum(f.v) FROM d.f JOIN d.nation n ON f.k = n.nk \
               JOIN d.region r ON n.rk = r.rk WHERE r.name = 'b' GROUP BY f.g ORDER BY f.g";
    let plan = explain(c, sql).await;
    let head = plan.split("PLAN FRAGMENT").nth(1).unwrap_or_default();
    assert!(
        !head.contains("VHASH JOIN"),
        "joins on the backends: {plan}"
    );
    assert!(plan.contains("TABLE: d.region"), "{plan}");
    let over_bes = query_rows(c, sql).await;
    run_all(c, &["SET enable_mpp_execution = false"]).await;
    assert_eq!(query_rows(c, sql).await, over_bes);
    run_all(c, &["SET enable_mpp_execution = true"]).await;
    assert_eq!(over_bes.len(), 7, "{over_bes:?}");
    // To keep the two stages apart, region's scan takes a task on every
    // backend (two read nothing); nation's keeps its one task, so its
    // rows reach f's three tasks from one, not from three.
    let analyzed = explain(c, &format!("ANALYZE {sql}")).await;
    let (rows, tasks) = counter(&analyzed, "TABLE: d.region", "RawRowsRead");
    assert_eq!((rows, tasks.len()), (3, 3), "{analyzed}");
    let (rows, tasks) = counter(&analyzed, "TABLE: d.nation", "RawRowsRead");
    assert_eq!((rows, tasks.len()), (25, 0), "{analyzed}");

    // A partitioned join keyed on region's distribution column keeps
    // region (one tablet, one backend) in place and routes f's rows, read
    // on three backends, to it: the join's stage runs a task on every
    // backend (those without region's tablet get no rows), as the route
    // addresses them, rather than being planned again without it. Region,
    // filtered, is the build side: it stays with its key collector, whose
    // filter reaches f's scan in another stage.
    let sql = "SELECT r.name, count(*), sum(f.v) FROM d.f JOIN d.region r ON f.g = r.rk \
               WHERE r.name <> 'a' GROUP BY r.name ORDER BY r.name";
    run_all(
        c,
        &[
            "SET enable_bucket_shuffle_join = true",
            "SET broadcast_row_count_limit = 0",
        ],
    )
    .await;
    let plan = explain(c, sql).await;
    assert!(plan.contains("JOIN(BUCKET_SHUFFLE)"), "{plan}");
    assert!(plan.contains("<- rk@") && plan.contains("-> g@"), "{plan}");
    let over_bes = query_rows(c, sql).await;
    run_all(c, &["SET enable_mpp_execution = false"]).await;
    assert_eq!(query_rows(c, sql).await, over_bes);
    run_all(c, &["SET enable_mpp_execution = true"]).await;
    assert_eq!(over_bes.len(), 2, "{over_bes:?}");
}

/// Whether a fragment of `plan` other than the FE's result fragment only
/// passes on what one exchange brings.
fn relays(plan: &str) -> bool {
    plan.split("PLAN FRAGMENT").skip(2).any(|f| {
        let nodes: Vec<&str> = f
            .lines()
            .map(str::trim)
            .filter(|l| {
                l.split_once(':').is_some_and(|(n, rest)| {
                    !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) && rest.starts_with('V')
                })
            })
            .collect();
        matches!(nodes.as_slice(), [only] if only.contains("VEXCHANGE"))
    })
}

/// `name: total [a, b, c]` on a line of `text` after `after`: the total and
/// each task's value.
fn counter(text: &str, after: &str, name: &str) -> (u64, Vec<u64>) {
    let from = text
        .find(after)
        .unwrap_or_else(|| panic!("{after} in {text}"));
    let line = text[from..]
        .lines()
        .find(|l| l.trim_start().starts_with(name))
        .unwrap_or_else(|| panic!("{name} after {after} in {text}"));
    let value = line.split_once(": ").map_or("", |(_, v)| v);
    let (total, each) = value.split_once(" [").unwrap_or((value, "]"));
    let each = each
        .trim_end_matches(']')
        .split(", ")
        .filter(|v| !v.is_empty())
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{line}")))
        .collect();
    (total.parse().unwrap_or_else(|_| panic!("{line}")), each)
}

/// EXPLAIN ANALYZE of plans run over three backends shows each task's
/// counters: a scan's rows per backend, the rows each runtime filter
/// removed, what each exchange received and how long it waited.
async fn counters_of_every_task(c: &mut Conn, partitioned: &str, broadcast: &str) {
    let analyzed = |sql: &str| format!("ANALYZE {sql}");
    let started = std::time::Instant::now();
    let plan = explain(c, &analyzed(partitioned)).await;
    let wall_ms = started.elapsed().as_millis() as u64;
    assert!(plan.contains("JOIN(PARTITIONED)"), "{plan}");
    // f's 20000 rows, read by three tasks, one per backend.
    let (read, each) = counter(&plan, "TABLE: d.f(f)", "RawRowsRead");
    assert_eq!((read, each.len()), (20000, 3), "{plan}");
    assert_eq!(each.iter().sum::<u64>(), read, "{plan}");
    // The join's rows, per task, are the query's.
    let joined = query_rows(c, "SELECT count(*) FROM d.f JOIN d.f2 ON f.v = f2.v").await;
    let (rows, each) = counter(&plan, "VHASH JOIN", "|  RowsProduced");
    assert_eq!(rows.to_string(), joined[0][0], "{plan}");
    assert_eq!(each.len(), 3, "{plan}");
    // Each exchange into the join's stage: rows, bytes and waiting per task.
    let (received, each) = counter(&plan, "VHASH JOIN", "RowsReceived");
    assert!(received > 0 && each.len() == 3, "{plan}");
    let (bytes, _) = counter(&plan, "VHASH JOIN", "BytesReceived");
    assert!(bytes > 0, "{plan}");
    let (messages, each) = counter(&plan, "VHASH JOIN", "MessagesReceived");
    assert!(messages > 0 && each.len() == 3, "{plan}");
    // Each task reads its own backend's producer task in process.
    let (_, each) = counter(&plan, "VHASH JOIN", "LocalReads");
    assert!(each.len() == 3 && each.iter().all(|n| *n >= 1), "{plan}");
    // The longest an instance of each task waited: within the query's
    // wall time (the instances' sum was not).
    let (longest, each) = counter(&plan, "VHASH JOIN", "MaxWaitTimeMs");
    assert_eq!(each.len(), 3, "{plan}");
    assert_eq!(each.iter().max(), Some(&longest), "{plan}");
    assert!(longest <= wall_ms, "{longest} ms of {wall_ms}: {plan}");
    // A filter merged across stages (the FE's merge node): the 1500 keys of
    // f2 kept by its predicate remove most of f's rows where f is read.
    let plan = explain(c, &analyzed(CROSS_STAGE)).await;
    let (filtered, each) = counter(&plan, "TABLE: d.f(f)", "RowsFilteredByRF");
    assert!(filtered > 10000 && each.len() == 3, "{plan}");

    // A broadcast join's filter is applied by its own stage's scans, when
    // profiled too (the tasks' counted leaves must not hide the scan from
    // the join, or it plans no filter and the scans wait for nothing).
    let plan = explain(c, &analyzed(broadcast)).await;
    assert!(plan.contains("JOIN(BROADCAST)"), "{plan}");
    let (filtered, each) = counter(&plan, "TABLE: d.f(f)", "RowsFilteredByRF");
    assert!(filtered > 0 && each.len() == 3, "{plan}");
    // Its bounds skipped the other keys' rows: dim's 100 keys are all read.
    let (kept, _) = counter(&plan, "TABLE: d.f(f)", "RowsProduced");
    assert_eq!(kept, 100, "{plan}");
}

/// Joins of colocated tables, each with the answers of the plans that
/// exchange rows: on the distribution column (plain, outer, and under a
/// join with an aggregate hashed on the same key, which must not take the
/// buckets for DataFusion's hash), over the backends and on the FE.
const COLOCATED: &[&str] = &[
    "SELECT o.p, count(*), sum(l.v) FROM d.o JOIN d.l ON o.k = l.k GROUP BY o.p ORDER BY o.p",
    "SELECT count(*), count(o.k), sum(l.v) FROM d.l LEFT JOIN d.o ON l.k = o.k",
    "SELECT count(*), sum(a.c), sum(l.v) FROM d.o JOIN d.l ON o.k = l.k \
     JOIN (SELECT k, count(*) c FROM d.l GROUP BY k HAVING count(*) > 3) a ON a.k = o.k",
    "SELECT count(*) FROM d.o JOIN d.l ON o.k = l.k WHERE l.v < 100 AND o.p = 2",
];

async fn colocated_answers(c: &mut Conn, mpp: bool, colocate: bool) -> Vec<Vec<Vec<String>>> {
    let set = [
        format!("SET enable_mpp_execution = {mpp}"),
        format!("SET disable_colocate_plan = {}", !colocate),
    ];
    answers_after(c, &set, COLOCATED).await
}

/// Tables of one colocation group keep each bucket on one backend, so a
/// join on their distribution columns runs where the buckets are: no
/// exchange below it, `COLOCATE` in EXPLAIN.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colocated_tables_join_where_their_buckets_are() {
    let (_fe, _bes, mut c, _ids) = cluster(&binary(), 3, &["--default-replication-num", "1"]).await;
    run_all(
        &mut c,
        &[
            "CREATE TABLE d.o (k INT, p INT) DUPLICATE KEY(k) \
             DISTRIBUTED BY HASH(k) BUCKETS 6 PROPERTIES (\"colocate_with\" = \"g\")",
            // Partitions of a member follow the group's placement too.
            "CREATE TABLE d.l (k INT, n INT, v INT) DUPLICATE KEY(k, n) \
             PARTITION BY RANGE(k) (PARTITION p1 VALUES LESS THAN (\"5000\"), \
             PARTITION p2 VALUES LESS THAN (MAXVALUE)) \
             DISTRIBUTED BY HASH(k) BUCKETS 6 PROPERTIES (\"colocate_with\" = \"g\")",
            "INSERT INTO d.o SELECT number, number % 5 FROM numbers(\"number\" = \"10000\")",
            "INSERT INTO d.l SELECT number % 12000, number % 4, number % 997 \
             FROM numbers(\"number\" = \"40000\")",
        ],
    )
    .await;
    let groups = query_rows(&mut c, "SHOW PROC '/colocation_group'").await;
    assert_eq!(groups.len(), 1, "{groups:?}");
    let g = &groups[0];
    assert!(g[1].ends_with("_g"), "{g:?}");
    assert_eq!(g[2].split(", ").count(), 2, "{g:?}");
    assert_eq!(
        (g[3].as_str(), g[5].as_str(), g[6].as_str()),
        ("6", "int", "true")
    );
    // Bucket b of every partition of both tables on one backend, the
    // buckets spread over the three.
    let on = |rows: &[Vec<String>]| rows.iter().map(|r| r[2].clone()).collect::<Vec<_>>();
    let o = on(&query_rows(&mut c, "SHOW TABLETS FROM d.o").await);
    let l = on(&query_rows(&mut c, "SHOW TABLETS FROM d.l").await);
    assert_eq!(l.len(), 12);
    assert_eq!(&l[..6], &o[..]);
    assert_eq!(&l[6..], &o[..]);
    let mut spread = o.clone();
    spread.sort();
    spread.dedup();
    assert_eq!(spread.len(), 3, "{o:?}");

    run_all(&mut c, &["SET broadcast_row_count_limit = 1000"]).await;
    let colocated = colocated_answers(&mut c, true, true).await;
    for (q, a) in COLOCATED.iter().zip(&colocated) {
        assert!(!a.is_empty(), "{q} answers rows");
    }
    // Keys 0..12000 of l, 0..10000 of o: 34000 of 40000 rows match.
    assert_eq!(&colocated[1][0][..2], &["40000", "34000"], "{colocated:?}");
    assert_eq!(colocated_answers(&mut c, true, false).await, colocated);
    assert_eq!(colocated_answers(&mut c, false, true).await, colocated);
    assert_eq!(colocated_answers(&mut c, false, false).await, colocated);
    // Without runtime filters too (on the FE, the colocated join's filter
    // tests every build key: its scans' rows are dealt by bucket, not where
    // DataFusion's routing hash would look for them).
    run_all(&mut c, &["SET runtime_filter_mode = 'OFF'"]).await;
    assert_eq!(colocated_answers(&mut c, true, true).await, colocated);
    run_all(&mut c, &["SET runtime_filter_mode = 'GLOBAL'"]).await;

    run_all(
        &mut c,
        &[
            "SET enable_mpp_execution = true",
            "SET disable_colocate_plan = false",
        ],
    )
    .await;
    let plan = explain(&mut c, COLOCATED[0]).await;
    assert!(plan.contains("JOIN(COLOCATE)"), "{plan}");
    assert!(plan.contains("HAS_COLO_PLAN_NODE: true"), "{plan}");
    // The join and both scans in one fragment: no exchange below the join.
    let fragment = fragment_with(&plan, "JOIN(COLOCATE)");
    assert!(
        fragment.contains("TABLE: d.o(o)") && fragment.contains("TABLE: d.l(l)"),
        "{plan}"
    );
    // The join's runtime filter reaches the probe scan of its own stage
    // through the FE's merge node, with every build key (the backends plan
    // none: their inputs are dealt by bucket, not by DataFusion's hash).
    let analyzed = explain(&mut c, &format!("ANALYZE {}", COLOCATED[3])).await;
    let (filtered, each) = counter(&analyzed, "JOIN(COLOCATE)", "RowsFilteredByRF");
    assert!(filtered > 0 && each.len() == 3, "{analyzed}");
    // A join on other columns exchanges rows as ever.
    let other = explain(&mut c, "SELECT count(*) FROM d.o JOIN d.l ON o.p = l.n").await;
    assert!(!other.contains("COLOCATE"), "{other}");
    assert!(other.contains("HAS_COLO_PLAN_NODE: false"), "{other}");
    run_all(&mut c, &["SET disable_colocate_plan = true"]).await;
    let off = explain(&mut c, COLOCATED[0]).await;
    assert!(!off.contains("COLOCATE"), "{off}");
}

/// A backend killed: the next query finds it gone, is planned again over the
/// others (three replicas of each tablet) and answers in full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_backend_is_left_out_of_the_next_plan() {
    let (_fe, mut bes, mut c, _) = cluster(&binary(), 3, &[]).await;
    run_all(
        &mut c,
        &[
            "CREATE TABLE d.f (k INT, g INT, v INT) DUPLICATE KEY(k) \
             DISTRIBUTED BY HASH(k) BUCKETS 6",
            "INSERT INTO d.f SELECT number, number % 7, number FROM numbers(\"number\" = \"3000\")",
        ],
    )
    .await;
    let q = "SELECT g, count(*), sum(v) FROM d.f GROUP BY g ORDER BY g";
    let before = query_rows(&mut c, q).await;
    assert_eq!(before.len(), 7);
    // Queries share the channels between the processes: ten more open no
    // connection (each opened one from the FE and from each task to every
    // backend it read, and kept it).
    let ports: Vec<u16> = bes.iter().map(|b| b.port).collect();
    let open = established_to(&ports);
    for _ in 0..10 {
        assert_eq!(query_rows(&mut c, q).await, before);
    }
    assert_eq!(established_to(&ports), open, "connections to {ports:?}");
    bes[1].kill();
    // At once, before a heartbeat notices.
    let started = std::time::Instant::now();
    assert_eq!(query_rows(&mut c, q).await, before);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "answered in {:?}",
        started.elapsed()
    );
}

/// TCP connections on this machine established to any of `ports`.
fn established_to(ports: &[u16]) -> usize {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|t| t.lines().skip(1).map(str::to_string).collect::<Vec<_>>())
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let port = f
                .get(2)
                .and_then(|r| r.rsplit(':').next())
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            f.get(3) == Some(&"01") && port.is_some_and(|p| ports.contains(&p))
        })
        .count()
}

/// `exec_mem_limit` holds per query on each backend: a partitioned join
/// whose build side does not fit one limit fails with Doris'
/// MEM_LIMIT_EXCEEDED when the FE joins, and succeeds hashed over three
/// backends, each holding a third of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_too_big_for_one_limit_fits_three() {
    let (_fe, _bes, mut c, _) = cluster(&binary(), 3, &["--default-replication-num", "1"]).await;
    run_all(
        &mut c,
        &[
            "CREATE TABLE d.b (k INT, v INT) DUPLICATE KEY(k) DISTRIBUTED BY HASH(k) BUCKETS 6",
            "INSERT INTO d.b SELECT number, (number * 7919) % 1000003 \
             FROM numbers(\"number\" = \"600000\")",
            // 8 MB: the FE's join of 600,000 rows needs about 16 MB, a
            // third of it on each backend fits (measured: 6 MB does).
            "SET exec_mem_limit = 8000000",
            "SET broadcast_row_count_limit = 1000",
        ],
    )
    .await;
    let join = "SELECT count(*) FROM d.b b1 JOIN d.b b2 ON b1.v = b2.v";
    run_all(&mut c, &["SET enable_mpp_execution = false"]).await;
    let err = c
        .query_drop(join)
        .await
        .expect_err("the FE's join exceeds the limit")
        .to_string();
    assert!(err.contains("MEM_LIMIT_EXCEEDED"), "{err}");
    run_all(&mut c, &["SET enable_mpp_execution = true"]).await;
    assert_eq!(
        query_rows(&mut c, join).await,
        vec![vec!["600000".to_string()]]
    );
}

/// Joins keyed on big's distribution column (with other keys, outer,
/// semi, under an aggregate on the key) and their answers when both sides
/// move and when the FE joins.
const BUCKET_SHUFFLED: &[&str] = &[
    "SELECT count(*), sum(big.v), sum(s.p) FROM d.s JOIN d.big ON s.k = big.k",
    "SELECT s.p, count(*), count(big.k), sum(big.v) FROM d.s LEFT JOIN d.big ON s.k = big.k \
     GROUP BY s.p ORDER BY s.p",
    "SELECT count(*), sum(v) FROM d.big WHERE k IN (SELECT k FROM d.s WHERE p = 1)",
    "SELECT big.k, count(*) c FROM d.s JOIN d.big ON s.k = big.k GROUP BY big.k \
     ORDER BY c DESC, big.k LIMIT 5",
    "SELECT count(*) FROM d.s JOIN d.big ON s.k = big.k AND s.p = big.n",
];

async fn bucket_shuffled_answers(c: &mut Conn, mpp: bool, bucket: bool) -> Vec<Vec<Vec<String>>> {
    let set = [
        format!("SET enable_mpp_execution = {mpp}"),
        format!("SET enable_bucket_shuffle_join = {bucket}"),
    ];
    answers_after(c, &set, BUCKET_SHUFFLED).await
}

/// A join keyed on one table's distribution column leaves that table where
/// it is and sends only the other side, each row to the backend and
/// partition reading its bucket: `BUCKET_SHUFFLE` in EXPLAIN, and the
/// join's stage receives only the other side's rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_on_a_tables_buckets_moves_only_the_other_side() {
    let (_fe, _bes, mut c, _) = cluster(&binary(), 3, &["--default-replication-num", "1"]).await;
    run_all(
        &mut c,
        &[
            "CREATE TABLE d.big (k INT, n INT, v INT) DUPLICATE KEY(k) \
             DISTRIBUTED BY HASH(k) BUCKETS 7",
            "CREATE TABLE d.s (k INT, p INT) DUPLICATE KEY(k) DISTRIBUTED BY HASH(p) BUCKETS 4",
            "INSERT INTO d.big SELECT number % 20000, number % 5, number % 991 \
             FROM numbers(\"number\" = \"60000\")",
            // Even keys (and NULLs): a runtime filter removes big's odd ones
            // row by row, not by page.
            "INSERT INTO d.s SELECT CASE WHEN number % 97 = 0 THEN NULL ELSE number * 2 END, \
             number % 5 FROM numbers(\"number\" = \"10000\")",
            "SET broadcast_row_count_limit = 1000",
            // Stages of a few thousand rows run on the backends too.
            "SET small_stage_row_limit = 0",
        ],
    )
    .await;
    let shuffled = bucket_shuffled_answers(&mut c, true, true).await;
    assert_eq!(&shuffled[0][0][0], "29688", "{shuffled:?}");
    assert_eq!(bucket_shuffled_answers(&mut c, true, false).await, shuffled);
    assert_eq!(bucket_shuffled_answers(&mut c, false, true).await, shuffled);
    run_all(&mut c, &["SET runtime_filter_mode = 'OFF'"]).await;
    assert_eq!(bucket_shuffled_answers(&mut c, true, true).await, shuffled);
    run_all(&mut c, &["SET runtime_filter_mode = 'GLOBAL'"]).await;

    run_all(&mut c, &["SET enable_mpp_execution = true"]).await;
    // A small stage's single task never takes in a stage reading a table
    // (the moving side's key collector passes rows on in the join's stage).
    run_all(&mut c, &["SET small_stage_row_limit = 65536"]).await;
    let plan = explain(&mut c, BUCKET_SHUFFLED[0]).await;
    assert!(plan.contains("JOIN(BUCKET_SHUFFLE)"), "{plan}");
    run_all(&mut c, &["SET small_stage_row_limit = 0"]).await;
    let plan = explain(&mut c, BUCKET_SHUFFLED[0]).await;
    assert!(plan.contains("JOIN(BUCKET_SHUFFLE)"), "{plan}");
    assert!(
        plan.contains("BUCKET_SHFFULE_HASH_PARTITIONED: k@"),
        "{plan}"
    );
    assert!(plan.contains("HAS_COLO_PLAN_NODE: false"), "{plan}");
    // big is read in the join's fragment; s arrives through an exchange.
    let fragment = fragment_with(&plan, "JOIN(BUCKET_SHUFFLE)");
    assert!(
        fragment.contains("TABLE: d.big(big)") && !fragment.contains("TABLE: d.s(s)"),
        "{plan}"
    );
    // Only s's rows reach the join's three tasks; the join's filter
    // (through the merge node) removes big's odd keys where big is read.
    let analyzed = explain(
        &mut c,
        "ANALYZE SELECT count(*) FROM d.s JOIN d.big ON s.k = big.k WHERE s.p < 3",
    )
    .await;
    let (received, each) = counter(&analyzed, "JOIN(BUCKET_SHUFFLE)", "|       RowsReceived");
    assert!(received <= 10000 && each.len() == 3, "{analyzed}");
    let (filtered, each) = counter(&analyzed, "TABLE: d.big(big)", "RowsFilteredByRF");
    assert!(filtered > 25000 && each.len() == 3, "{analyzed}");
    run_all(&mut c, &["SET enable_bucket_shuffle_join = false"]).await;
    let off = explain(&mut c, BUCKET_SHUFFLED[0]).await;
    assert!(off.contains("JOIN(PARTITIONED)"), "{off}");
    both_sides_by_bucket(&mut c).await;
}

/// Both inputs dealt by the join key (TPC-H q09's lineitem side and
/// orders): the side expected to send fewer bytes moves. `wide`, built
/// (6,000 rows), carries five strings a row; big's probe side its key and
/// `v` (8 bytes), so big moves and wide stays where it is read.
async fn both_sides_by_bucket(c: &mut Conn) {
    run_all(
        c,
        &[
            "CREATE TABLE d.wide (k INT, a VARCHAR(40), b VARCHAR(40), c VARCHAR(40), \
             e VARCHAR(40), f VARCHAR(40)) DUPLICATE KEY(k) DISTRIBUTED BY HASH(k) BUCKETS 5",
            "INSERT INTO d.wide SELECT number * 3, concat('a', number), concat('b', number), \
             concat('c', number), concat('e', number), concat('f', number) \
             FROM numbers(\"number\" = \"6000\")",
        ],
    )
    .await;
    let q = [
        "SELECT count(*), max(w.a), max(w.b), max(w.c), max(w.e), max(w.f), sum(big.v) \
              FROM d.wide w JOIN d.big ON w.k = big.k",
    ];
    let on = ["SET enable_bucket_shuffle_join = true".to_string()];
    let shuffled = answers_after(c, &on, &q).await;
    assert_eq!(&shuffled[0][0][0], "18000", "{shuffled:?}");
    let off = ["SET enable_bucket_shuffle_join = false".to_string()];
    assert_eq!(answers_after(c, &off, &q).await, shuffled);
    let fe = ["SET enable_mpp_execution = false".to_string()];
    assert_eq!(answers_after(c, &fe, &q).await, shuffled);
    run_all(
        c,
        &[
            "SET enable_mpp_execution = true",
            "SET enable_bucket_shuffle_join = true",
        ],
    )
    .await;
    let plan = explain(c, q[0]).await;
    let fragment = fragment_with(&plan, "JOIN(BUCKET_SHUFFLE)");
    assert!(
        fragment.contains("TABLE: d.wide(wide)") && !fragment.contains("TABLE: d.big(big)"),
        "{plan}"
    );
}

/// The CPU time the backends have used so far, together.
fn backends_cpu(bes: &[tethys_sql_tests::cluster::BackendProcess]) -> std::time::Duration {
    bes.iter().filter_map(|b| b.cpu_time()).sum()
}

/// Waits until the backends, together, use less than a tenth of a CPU over
/// a second (nothing but heartbeats), for at most `within`; false if they
/// never do.
async fn backends_go_idle(
    bes: &[tethys_sql_tests::cluster::BackendProcess],
    within: std::time::Duration,
) -> bool {
    let started = std::time::Instant::now();
    while started.elapsed() < within {
        let before = backends_cpu(bes);
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        if backends_cpu(bes).saturating_sub(before) < std::time::Duration::from_millis(100) {
            return true;
        }
    }
    false
}

/// KILL QUERY and query_timeout end a query that runs on the backends: the
/// client gets Doris' error at once and the backends stop working on it
/// (their stages end when the FE's stream is dropped), which their CPU time
/// shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_and_timeout_stop_the_query_on_every_backend() {
    use std::time::{Duration, Instant};
    let (fe, bes, mut c, _) = cluster(&binary(), 3, &["--default-replication-num", "1"]).await;
    run_all(
        &mut c,
        &[
            "CREATE TABLE d.b (k INT, g INT) DUPLICATE KEY(k) DISTRIBUTED BY HASH(k) BUCKETS 6",
            "INSERT INTO d.b SELECT number, number % 50 FROM numbers(\"number\" = \"200000\")",
            "SET broadcast_row_count_limit = 1000",
            // Small probe batches (each row meets 4,000): a join notices a
            // cancel between batches.
            "SET batch_size = 256",
        ],
    )
    .await;
    // 800 million joined rows, counted on the backends: minutes of work
    // for a debug build.
    let slow = "SELECT count(*) FROM d.b b1 JOIN d.b b2 ON b1.g = b2.g";
    assert!(
        explain(&mut c, slow).await.contains("JOIN(PARTITIONED)"),
        "the join runs on the backends"
    );
    assert!(backends_go_idle(&bes, Duration::from_secs(30)).await);

    let id = c.id();
    let opts = fe.opts();
    let killer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let mut k = Conn::new(opts).await.expect("killer connects");
        k.query_drop(format!("KILL QUERY {id}"))
            .await
            .expect("kill");
    });
    let started = Instant::now();
    let err = c.query_drop(slow).await.expect_err("killed").to_string();
    assert!(err.contains("1317"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    killer.await.expect("killer");
    assert!(
        backends_go_idle(&bes, Duration::from_secs(15)).await,
        "the backends still work on the killed query"
    );

    run_all(&mut c, &["SET query_timeout = 2"]).await;
    let started = Instant::now();
    let err = c.query_drop(slow).await.expect_err("timed out").to_string();
    assert!(err.contains("3024"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert!(
        backends_go_idle(&bes, Duration::from_secs(15)).await,
        "the backends still work on the timed-out query"
    );
    // The session goes on.
    run_all(&mut c, &["SET query_timeout = 900"]).await;
    assert_eq!(
        query_rows(&mut c, "SELECT count(*) FROM d.b").await,
        vec![vec!["200000".to_string()]]
    );
}

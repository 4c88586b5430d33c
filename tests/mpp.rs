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
];

const CROSS_STAGE: &str = "SELECT count(*), sum(a.n), sum(a.v) FROM d.f2 \
     JOIN (SELECT v, count(*) n FROM d.f GROUP BY v) a ON f2.v = a.v WHERE f2.k < 1500";

async fn answers(c: &mut Conn, mpp: bool) -> Vec<Vec<Vec<String>>> {
    run_all(c, &[&format!("SET enable_mpp_execution = {mpp}")]).await;
    let mut out = vec![];
    for q in QUERIES {
        out.push(query_rows(c, q).await);
    }
    out
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
    let over_bes = answers(&mut c, true).await;
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
    let join = QUERIES[1];
    let plan = explain(&mut c, join).await;
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
    let small = explain(&mut c, QUERIES[0]).await;
    assert!(small.contains("JOIN(BROADCAST)"), "{small}");
    run_all(&mut c, &["SET enable_mpp_execution = false"]).await;
    let on_fe_plan = explain(&mut c, join).await;
    assert!(!on_fe_plan.contains("HASH_PARTITIONED: v@"), "{on_fe_plan}");
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

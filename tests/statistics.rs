//! Column statistics end to end: `ANALYZE TABLE` / `ANALYZE DATABASE`
//! collect them through the MySQL protocol, `SHOW COLUMN STATS` shows them,
//! they survive kill -9 and restart, `DROP STATS` drops them, and the
//! optimizer uses them: a join whose build side the predicate shapes alone
//! get wrong (an equality on a 150-value column against a range covering
//! 90% of a date column) is built on the other side once the table is
//! analyzed, with the same answer. Join trees are reordered by estimated
//! result size, unless `disable_join_reorder` says not to.

use std::path::PathBuf;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use tethys_sql_tests::TethysServer;

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tethys"))
}

async fn rows(c: &mut Conn, sql: &str) -> Vec<Vec<String>> {
    tethys_sql_tests::query_rows(c, sql).await
}

/// The lines of `EXPLAIN sql`.
async fn explain(c: &mut Conn, sql: &str) -> Vec<String> {
    tethys_sql_tests::explain_lines(c, sql).await
}

/// The rows of `other`'s scan node in an EXPLAIN: whether a runtime filter
/// lands on it tells which side of the top join was built.
async fn other_scan_is_filtered(c: &mut Conn, sql: &str) -> bool {
    let plan = explain(c, sql).await;
    let text = plan.join("\n");
    let start = plan
        .iter()
        .position(|l| l.contains("TABLE: st.other(other)"))
        .unwrap_or_else(|| panic!("no scan of other:\n{text}"));
    plan[start..]
        .iter()
        .take_while(|l| !l.trim().is_empty() && !l.contains("PLAN FRAGMENT"))
        .any(|l| l.contains("runtime filters:") && l.contains("->"))
}

const QUERY: &str = "SELECT count(*), sum(f.v) FROM fact f, dim d, other o \
     WHERE f.k = d.k AND d.t = 'type7' AND f.j = o.j AND o.d >= '2020-04-10'";

#[tokio::test]
async fn analyze_feeds_the_optimizer_and_survives_restart() {
    let mut server = TethysServer::start(&binary()).await.expect("start");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    tethys_sql_tests::run_all(
        &mut c,
        &[
        "CREATE DATABASE st",
        "USE st",
        "CREATE TABLE fact (k INT NOT NULL, j INT, v INT) DUPLICATE KEY(k) \
         DISTRIBUTED BY HASH(k) BUCKETS 2",
        "CREATE TABLE dim (k INT NOT NULL, t VARCHAR(20)) DUPLICATE KEY(k) \
         DISTRIBUTED BY HASH(k) BUCKETS 1",
        "CREATE TABLE other (j INT NOT NULL, d DATE, note VARCHAR(10)) DUPLICATE KEY(j) \
         DISTRIBUTED BY HASH(j) BUCKETS 1",
        "INSERT INTO fact SELECT CAST(value AS INT), CAST(value % 3000 AS INT), CAST(value % 7 AS INT) \
         FROM range(30000)",
        "INSERT INTO dim SELECT CAST(value AS INT), concat('type', CAST(value % 150 AS VARCHAR)) \
         FROM range(30000)",
        // 6000 rows over 1000 days from 2020-01-01; every tenth date NULL.
        "INSERT INTO other SELECT CAST(value AS INT), \
         CASE WHEN value % 10 = 9 THEN NULL ELSE CAST('2020-01-01' AS DATE) + CAST(value % 1000 AS INT) END, \
         'n' FROM range(6000)",
        ],
    )
    .await;
    let answer = rows(&mut c, QUERY).await;
    // Shapes alone: `t = 'type7'` keeps a tenth of dim (3000 fact rows),
    // `d >= ..` 40% of other (2400 rows), so other is built and filters
    // fact's scan.
    assert!(!other_scan_is_filtered(&mut c, QUERY).await);
    assert!(rows(&mut c, "SHOW COLUMN STATS other").await.is_empty());

    let r = c
        .query_iter("ANALYZE TABLE other WITH SYNC")
        .await
        .expect("analyze");
    assert!(
        r.info()
            .contains("analyzed 3 columns of 1 tables (6000 rows)"),
        "{}",
        r.info()
    );
    drop(r);
    tethys_sql_tests::run_all(&mut c, &["ANALYZE DATABASE st"]).await;
    let stats = rows(&mut c, "SHOW COLUMN STATS other").await;
    let names: Vec<&str> = stats.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(names, ["j", "d", "note"]);
    let d = &stats[1];
    // column_name, index_name, count, ndv, num_null, data_size,
    // avg_size_byte, min, max, method, type, trigger, query_times, updated_time
    assert_eq!(&d[1..3], ["other", "6000"]);
    let ndv: f64 = d[3].parse().expect("ndv");
    assert!((ndv - 900.0).abs() < 900.0 * 0.05, "ndv {ndv}");
    assert_eq!(&d[4..6], ["600", "21600"]);
    assert_eq!(&d[7..9], ["2020-01-01", "2022-09-25"]);
    assert_eq!(&stats[2][3..8], ["1", "0", "6000", "1.0", "n"]);
    let t = rows(&mut c, "SHOW COLUMN STATS dim (t)").await;
    assert_eq!(t.len(), 1);
    let ndv: f64 = t[0][3].parse().expect("ndv");
    assert!((ndv - 150.0).abs() <= 3.0, "ndv {ndv}");

    // With statistics: dim keeps 1/150 (200 fact rows), other 90% of its
    // non-null dates: fact ⋈ dim is built and filters other's scan.
    assert!(other_scan_is_filtered(&mut c, QUERY).await);
    assert_eq!(rows(&mut c, QUERY).await, answer);

    server.crash_and_restart().await.expect("restart");
    let mut c = Conn::new(server.opts()).await.expect("reconnect");
    c.query_drop("USE st").await.expect("use");
    assert_eq!(rows(&mut c, "SHOW COLUMN STATS other").await.len(), 3);
    assert!(other_scan_is_filtered(&mut c, QUERY).await);
    assert_eq!(rows(&mut c, QUERY).await, answer);

    tethys_sql_tests::run_all(&mut c, &["DROP STATS other (d, note)"]).await;
    assert_eq!(rows(&mut c, "SHOW COLUMN STATS other").await.len(), 1);
    c.query_drop("DROP STATS dim").await.expect("drop all");
    assert!(rows(&mut c, "SHOW COLUMN STATS dim").await.is_empty());
    assert!(!other_scan_is_filtered(&mut c, QUERY).await);

    for (sql, want) in [
        ("ANALYZE TABLE nosuch", "Table [nosuch] does not exist"),
        ("ANALYZE TABLE other (nosuch)", "Unknown column 'nosuch'"),
        ("ANALYZE TABLE other WITH SAMPLE PERCENT 10", "SAMPLE"),
        ("SHOW COLUMN STATS nosuch", "Table [nosuch] does not exist"),
    ] {
        let e = c.query_drop(sql).await.expect_err(sql).to_string();
        assert!(e.contains(want), "{sql}: {e}");
    }
}

/// Statistics are collected without ANALYZE (Doris 2.1's auto analyze):
/// a table with rows and no statistics is analyzed in the background, and
/// again once more than a tenth of its rows changed.
#[tokio::test]
async fn tables_are_analyzed_in_the_background() {
    let server = TethysServer::start_with_args(&binary(), &["--auto-analyze-interval-second", "1"])
        .await
        .expect("start");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    tethys_sql_tests::run_all(
        &mut c,
        &[
        "CREATE DATABASE auto",
        "USE auto",
        "CREATE TABLE t (k INT NOT NULL, v VARCHAR(8)) DUPLICATE KEY(k) \
         DISTRIBUTED BY HASH(k) BUCKETS 2",
        "CREATE TABLE empty_t (k INT NOT NULL) DUPLICATE KEY(k) DISTRIBUTED BY HASH(k) BUCKETS 1",
        "INSERT INTO t SELECT CAST(value AS INT), 'x' FROM range(1000)",
        ],
    )
    .await;
    // Waits up to 60 s for `t`'s statistics to count `rows` rows.
    async fn counted(c: &mut Conn, count: &str) -> Vec<Vec<String>> {
        for _ in 0..600 {
            let stats = rows(c, "SHOW COLUMN STATS t").await;
            if stats.len() == 2 && stats.iter().all(|r| r[2] == count) {
                return stats;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("t was not analyzed at {count} rows");
    }
    let stats = counted(&mut c, "1000").await;
    let ndv: f64 = stats[0][3].parse().expect("ndv");
    assert!((ndv - 1000.0).abs() <= 20.0, "ndv of k: {stats:?}");
    // 5% more rows: still fresh enough.
    tethys_sql_tests::run_all(
        &mut c,
        &["INSERT INTO t SELECT CAST(value AS INT) + 1000, 'y' FROM range(50)"],
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(rows(&mut c, "SHOW COLUMN STATS t").await[0][2], "1000");
    // Past a tenth: analyzed again.
    tethys_sql_tests::run_all(
        &mut c,
        &["INSERT INTO t SELECT CAST(value AS INT) + 2000, 'z' FROM range(500)"],
    )
    .await;
    let stats = counted(&mut c, "1550").await;
    assert_eq!(stats[1][8], "z", "max of v: {stats:?}");
    // A table without rows is left alone.
    assert!(rows(&mut c, "SHOW COLUMN STATS empty_t").await.is_empty());
}

/// The deepest join's condition in an EXPLAIN: the first join that runs.
async fn first_join(c: &mut Conn, sql: &str) -> String {
    let plan = explain(c, sql).await;
    plan.iter()
        .rev()
        .find(|l| l.contains("equal join conjunct:"))
        .unwrap_or_else(|| panic!("no join:\n{}", plan.join("\n")))
        .clone()
}

const STAR: &str = "SELECT count(*), sum(f.v) FROM fact f, da, db, g \
     WHERE f.a = da.k AND f.b = db.k AND da.grp = g.g AND g.name = 'g3'";

/// Inner joins run smallest estimated result first, whatever order the
/// FROM clause gives (`g` keeps one row, so `g ⋈ da` comes before the fact
/// table is touched); `disable_join_reorder` and a
/// `max_join_number_of_reorder` below the relation count keep the FROM
/// order; the answer is the same either way. A dimension a little bigger
/// than the fact side's estimate is still built, so its runtime filter
/// reaches the fact table's scan.
#[tokio::test]
async fn joins_are_reordered_by_estimated_size() {
    let server = TethysServer::start(&binary()).await.expect("start");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    tethys_sql_tests::run_all(
        &mut c,
        &[
        "CREATE DATABASE jo",
        "USE jo",
        "CREATE TABLE fact (k INT NOT NULL, a INT, b INT, v INT) DUPLICATE KEY(k) \
         DISTRIBUTED BY HASH(k) BUCKETS 2",
        "CREATE TABLE da (k INT NOT NULL, grp INT) DUPLICATE KEY(k) DISTRIBUTED BY HASH(k) BUCKETS 1",
        "CREATE TABLE db (k INT NOT NULL, tag VARCHAR(8)) DUPLICATE KEY(k) \
         DISTRIBUTED BY HASH(k) BUCKETS 1",
        "CREATE TABLE g (g INT NOT NULL, name VARCHAR(8)) DUPLICATE KEY(g) \
         DISTRIBUTED BY HASH(g) BUCKETS 1",
        "INSERT INTO fact SELECT CAST(value AS INT), CAST(value % 1000 AS INT), \
         CAST(value % 997 AS INT), CAST(value % 13 AS INT) FROM range(20000)",
        "INSERT INTO da SELECT CAST(value AS INT), CAST(value % 10 AS INT) FROM range(1000)",
        "INSERT INTO db SELECT CAST(value AS INT), 't' FROM range(1000)",
        "INSERT INTO g SELECT CAST(value AS INT), concat('g', CAST(value AS VARCHAR)) FROM range(10)",
        ],
    )
    .await;
    let answer = rows(&mut c, STAR).await;
    assert_eq!(answer, [["2000", "11997"]]);
    let first = first_join(&mut c, STAR).await;
    assert!(first.contains("grp@") && first.contains("g@"), "{first}");
    // Each join of the rebuilt tree passes on only the columns later
    // joins and the aggregate read: `g ⋈ da` da's key alone (the rebuilt
    // tree had dropped the projections between joins, so every column of
    // g and da travelled up, and on several backends over the network).
    let plan = explain(&mut c, STAR).await;
    let projections: Vec<&str> = plan
        .iter()
        .filter_map(|l| l.split_once("final projections: ").map(|(_, p)| p))
        .collect();
    assert_eq!(projections.len(), 3, "{}", plan.join("\n"));
    assert_eq!(projections.last(), Some(&"k"), "{}", plan.join("\n"));

    tethys_sql_tests::run_all(&mut c, &["SET disable_join_reorder = true"]).await;
    let first = first_join(&mut c, STAR).await;
    assert!(first.contains("a@") && first.contains("k@"), "{first}");
    assert_eq!(rows(&mut c, STAR).await, answer);

    tethys_sql_tests::run_all(&mut c, &["SET disable_join_reorder = false"]).await;
    tethys_sql_tests::run_all(&mut c, &["SET max_join_number_of_reorder = 3"]).await;
    let first = first_join(&mut c, STAR).await;
    assert!(first.contains("a@") && first.contains("k@"), "{first}");
    tethys_sql_tests::run_all(&mut c, &["SET max_join_number_of_reorder = 4"]).await;
    let first = first_join(&mut c, STAR).await;
    assert!(first.contains("grp@"), "{first}");
    assert_eq!(rows(&mut c, STAR).await, answer);

    // After `g` (a hundredth) and `da` (a tenth, by `da.grp = 3` inferred
    // from `g.g = 3`), the fact side is estimated at 20 rows, fewer than
    // the 60 of dc's 600 rows `tag = 't1'` keeps; dc is built all the
    // same, so its runtime filter reaches the fact table's scan of 20000
    // rows.
    c.query_drop(
        "CREATE TABLE dc (k INT NOT NULL, tag VARCHAR(8)) DUPLICATE KEY(k) \
         DISTRIBUTED BY HASH(k) BUCKETS 1",
    )
    .await
    .expect("dc");
    tethys_sql_tests::run_all(&mut c, &["INSERT INTO dc SELECT CAST(value AS INT), concat('t', CAST(value % 10 AS VARCHAR)) FROM range(600)"]).await;
    let q = "SELECT count(*), sum(f.v) FROM fact f, da, dc, g \
             WHERE f.a = da.k AND f.b = dc.k AND da.grp = g.g AND g.name = 'g3' AND g.g = 3 \
             AND dc.tag = 't1'";
    assert_eq!(rows(&mut c, q).await, [["120", "717"]]);
    let plan = explain(&mut c, q).await;
    let fact_filters = plan
        .iter()
        .skip_while(|l| !l.contains("TABLE: jo.fact(fact)"))
        .find(|l| l.contains("runtime filters:"))
        .unwrap_or_else(|| panic!("{}", plan.join("\n")));
    assert!(fact_filters.contains("-> b@"), "{}", plan.join("\n"));

    // A whole dimension (no filter) a little bigger than the fact side's
    // estimate (20000 x 0.1 x 0.4 = 800 rows against db's 1000) is probed,
    // not built: its keys would filter nothing (TPC-H q10's customer, then
    // broadcast whole to every backend). The fact side is built, its
    // filter lands on db's scan.
    let q =
        "SELECT count(*), sum(f.v) FROM fact f, db WHERE f.b = db.k AND f.v = 3 AND f.k < 10000";
    let plan = explain(&mut c, q).await;
    let filtered = |table: &str| {
        plan.iter()
            .skip_while(|l| !l.contains(&format!("TABLE: jo.{table}({table})")))
            .take_while(|l| !l.trim().is_empty())
            .any(|l| l.contains("runtime filters:") && l.contains("->"))
    };
    assert!(filtered("db") && !filtered("fact"), "{}", plan.join("\n"));
    assert_eq!(
        rows(&mut c, q).await,
        rows(
            &mut c,
            "SELECT count(*), sum(v) FROM fact WHERE v = 3 AND k < 10000"
        )
        .await
    );
}

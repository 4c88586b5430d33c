//! Group commit against a started Tethys: Stream Loads with the
//! `group_commit` header and INSERTs under `SET group_commit` merge into one
//! transaction per table and interval; async_mode rows become visible after
//! the interval and survive a kill -9 through the WAL; loads with a label
//! bypass group commit.

use std::path::PathBuf;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use tethys_sql_tests::{LoadFixture as Fixture, curl, json_field};

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tethys"))
}

/// A server with `gc.t`, whose group commits come every `interval_ms`.
async fn fixture(interval_ms: u64) -> Fixture {
    let table = format!(
        "CREATE TABLE gc.t (day DATE NOT NULL, id INT NOT NULL, name VARCHAR(8)) \
         DUPLICATE KEY(day, id) PARTITION BY RANGE(day) (PARTITION p1 VALUES LESS THAN ('2026-02-01')) \
         DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES (\"group_commit_interval_ms\" = \"{interval_ms}\")"
    );
    Fixture::start(&binary(), &[], "gc", "t", &["CREATE DATABASE gc", &table]).await
}

/// The visible version of the table's one partition.
async fn visible_version(f: &Fixture) -> i64 {
    let rows: Vec<mysql_async::Row> = f
        .conn()
        .await
        .query("SHOW PARTITIONS FROM gc.t")
        .await
        .expect("partitions");
    rows[0].get::<i64, _>("VisibleVersion").expect("version")
}

#[tokio::test]
async fn stream_load_and_insert_merge_into_group_transactions() {
    let f = fixture(3000).await;
    let a = f.file("a.csv", "2026-01-01,1,a\n2026-01-02,2,b\n");
    let b = f.file("b.csv", "2026-01-03,3,c\n");
    let v0 = visible_version(&f).await;

    // async_mode: answered at once, invisible until the group commits.
    let r1 = f.load(&a, &["column_separator:,", "group_commit:async_mode"]);
    assert_eq!(json_field(&r1, "Status"), "Success", "{r1}");
    assert_eq!(json_field(&r1, "GroupCommit"), true, "{r1}");
    assert!(json_field(&r1, "TwoPhaseCommit").is_null(), "{r1}");
    assert!(json_field(&r1, "BeginTxnTimeMs").is_null(), "{r1}");
    assert_eq!(json_field(&r1, "NumberLoadedRows"), 2);
    let label = json_field(&r1, "Label")
        .as_str()
        .expect("label")
        .to_string();
    assert!(label.starts_with("group_commit_"), "{label}");
    let r2 = f.load(&b, &["column_separator:,", "group_commit:async_mode"]);
    assert_eq!(json_field(&r2, "Status"), "Success", "{r2}");
    assert_eq!(json_field(&r2, "Label"), label.as_str(), "one group: {r2}");
    assert_eq!(json_field(&r2, "TxnId"), json_field(&r1, "TxnId"));
    assert_eq!(f.count().await, 0, "async rows wait for the group commit");
    f.wait_count(3, Duration::from_secs(20)).await;
    // Two loads, one transaction, one version.
    assert_eq!(visible_version(&f).await, v0 + 1);
    let rows: Vec<mysql_async::Row> = f
        .conn()
        .await
        .query(format!("SHOW TRANSACTION FROM gc WHERE label = '{label}'"))
        .await
        .expect("show transaction");
    let status: String = rows[0].get("TransactionStatus").expect("status");
    assert_eq!(status, "VISIBLE");

    // sync_mode: answered once visible.
    let r3 = f.load(&b, &["column_separator:,", "group_commit:sync_mode"]);
    assert_eq!(json_field(&r3, "Status"), "Success", "{r3}");
    assert_eq!(f.count().await, 4);

    // A label bypasses group commit.
    let r4 = f.load(
        &b,
        &["column_separator:,", "group_commit:async_mode", "label:own"],
    );
    assert_eq!(json_field(&r4, "Label"), "own", "{r4}");
    assert_eq!(json_field(&r4, "TwoPhaseCommit"), "false", "{r4}");
    assert_eq!(f.count().await, 5);

    // Bad rows are filtered per load, as without group commit.
    let bad = f.file("bad.csv", "2026-01-04,4,d\n2027-01-01,5,e\nx,y\n");
    let r5 = f.load(
        &bad,
        &[
            "column_separator:,",
            "group_commit:sync_mode",
            "max_filter_ratio:0.9",
        ],
    );
    assert_eq!(json_field(&r5, "Status"), "Success", "{r5}");
    assert_eq!(json_field(&r5, "NumberFilteredRows"), 2, "{r5}");
    let (_, log) = curl(&[json_field(&r5, "ErrorURL").as_str().expect("url")]);
    assert!(log.contains("no partition for this tuple"), "{log}");
    let r6 = f.load(&bad, &["column_separator:,", "group_commit:async_mode"]);
    assert_eq!(json_field(&r6, "Status"), "Fail", "{r6}");
    assert!(
        json_field(&r6, "Message")
            .as_str()
            .is_some_and(|m| m.contains("too many filtered rows")),
        "{r6}"
    );
    let r7 = f.load(&b, &["group_commit:fast_mode"]);
    assert!(
        r7.contains("Header `group_commit` can only be `sync_mode`, `async_mode` or `off_mode`."),
        "{r7}"
    );
    assert_eq!(f.count().await, 6, "the failed load left nothing");

    // INSERT under SET group_commit.
    let mut c = f.conn().await;
    tethys_sql_tests::run_all(&mut c, &["SET group_commit = async_mode"]).await;
    tethys_sql_tests::run_all(
        &mut c,
        &["INSERT INTO gc.t VALUES ('2026-01-05', 6, 'f'), ('2026-01-06', 7, 'g')"],
    )
    .await;
    let info = c.info().to_string();
    assert!(info.contains("'status':'PREPARE'"), "{info}");
    assert!(info.contains("'label':'group_commit_"), "{info}");
    f.wait_count(8, Duration::from_secs(20)).await;
    tethys_sql_tests::run_all(&mut c, &["SET group_commit = sync_mode"]).await;
    tethys_sql_tests::run_all(&mut c, &["INSERT INTO gc.t VALUES ('2026-01-07', 8, 'h')"]).await;
    assert!(c.info().contains("'status':'VISIBLE'"), "{}", c.info());
    assert_eq!(f.count().await, 9);
    // INSERT ... SELECT is a normal load, as in Doris.
    tethys_sql_tests::run_all(
        &mut c,
        &["INSERT INTO gc.t SELECT * FROM gc.t WHERE id = 8"],
    )
    .await;
    assert!(!c.info().contains("group_commit_"), "{}", c.info());
    assert_eq!(f.count().await, 10);
    let err = c
        .query_drop("SET group_commit = fast_mode")
        .await
        .expect_err("bad mode");
    assert!(err.to_string().contains("group_commit"), "{err}");
    // A row that fits no partition fails the INSERT.
    let err = c
        .query_drop("INSERT INTO gc.t VALUES ('2030-01-01', 9, 'x')")
        .await
        .expect_err("no partition");
    assert!(err.to_string().contains("no partition"), "{err}");
}

#[tokio::test]
async fn async_rows_survive_a_crash_through_the_wal() {
    // The interval is far away: only the WAL replay can make the rows visible.
    let mut f = fixture(600_000).await;
    let a = f.file("a.csv", "2026-01-01,1,a\n2026-01-02,2,b\n2026-01-03,3,c\n");
    let r = f.load(&a, &["column_separator:,", "group_commit:async_mode"]);
    assert_eq!(json_field(&r, "Status"), "Success", "{r}");
    let r = f.load(&a, &["column_separator:,", "group_commit:async_mode"]);
    assert_eq!(json_field(&r, "Status"), "Success", "{r}");
    assert_eq!(f.count().await, 0);
    f.server.crash_and_restart().await.expect("restart");
    f.wait_count(6, Duration::from_secs(30)).await;
    // Replayed once: a second restart does not load the rows again.
    f.server.crash_and_restart().await.expect("restart");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(f.count().await, 6);
}

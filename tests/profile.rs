//! Query profiles through the MySQL protocol: `SET enable_profile = true`
//! keeps each query's plan with its counters for `SHOW QUERY PROFILE`.

use std::path::PathBuf;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use tethys_sql_tests::TethysServer;

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tethys"))
}

async fn column(c: &mut Conn, sql: &str, i: usize) -> Vec<String> {
    tethys_sql_tests::query_column(c, sql, i).await
}

#[tokio::test]
async fn enable_profile_keeps_counters_for_show_query_profile() {
    let server = TethysServer::start(&binary()).await.expect("start");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    tethys_sql_tests::run_all(
        &mut c,
        &[
        "CREATE DATABASE prof",
        "USE prof",
        "CREATE TABLE t (id INT NOT NULL, v INT) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 2",
        "INSERT INTO t VALUES (1, 10), (2, 20), (3, 30), (4, 40)",
        ],
    )
    .await;
    // Off by default: nothing is recorded.
    c.query_drop("SELECT count(*) FROM t").await.expect("q");
    assert!(
        column(&mut c, "SHOW QUERY PROFILE \"/\"", 0)
            .await
            .is_empty()
    );

    tethys_sql_tests::run_all(&mut c, &["SET enable_profile = true"]).await;
    let q = "SELECT sum(v) FROM t WHERE v > 15";
    assert_eq!(column(&mut c, q, 0).await, vec!["90"]);
    let ids = column(&mut c, "SHOW QUERY PROFILE \"/\"", 0).await;
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(
        column(&mut c, "SHOW QUERY PROFILE \"/\"", 5).await,
        vec!["FINISHED"]
    );
    assert_eq!(
        column(&mut c, "SHOW QUERY PROFILE \"/\"", 8).await,
        vec!["prof"]
    );
    assert_eq!(column(&mut c, "SHOW QUERY PROFILE \"/\"", 9).await, vec![q]);

    let text = column(&mut c, &format!("SHOW QUERY PROFILE \"/{}\"", ids[0]), 0)
        .await
        .join("\n");
    assert!(text.contains(&format!("Profile ID: {}", ids[0])), "{text}");
    assert!(text.contains("VOlapScanNode"), "{text}");
    // The scan's counters (the row with v = 10 is dropped by zone maps or
    // by the filter, depending on the bucket it hashed to).
    assert!(text.contains("RawRowsRead:"), "{text}");
    assert!(text.contains("RowsProduced: 3"), "{text}");

    // The newest is listed first.
    c.query_drop("SELECT count(*) FROM t").await.expect("q2");
    let list = column(&mut c, "SHOW QUERY PROFILE", 9).await;
    assert_eq!(list, vec!["SELECT count(*) FROM t", q]);

    let err = c
        .query_drop("SHOW QUERY PROFILE \"/no-such-id\"")
        .await
        .expect_err("unknown id");
    assert!(err.to_string().contains("not found"), "{err}");
}

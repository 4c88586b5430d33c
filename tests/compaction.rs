//! Compaction against a started Tethys: 3000 single-row loads into one
//! tablet stay below the version limit with background compaction on and
//! give the right answer; with `disable_auto_compaction` the same loads hit
//! the limit with Doris' error, and `ADMIN COMPACT TABLE` brings the tablet
//! back; answers survive a kill -9 after compaction. The server runs with
//! `--max-tablet-version-num 200` (Doris' 2000 would take 2000 loads to
//! reach without compaction). Merge-on-write under concurrent writers,
//! deletes, compaction and a checking reader: no key is ever visible twice.

use std::path::PathBuf;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use tethys_sql_tests::TethysServer;

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tethys"))
}

async fn count_and_sum(c: &mut Conn, table: &str) -> (i64, i64) {
    c.query_first(format!("SELECT count(*), sum(v) FROM {table}"))
        .await
        .expect("query")
        .expect("row")
}

async fn version_count(c: &mut Conn, table: &str) -> i64 {
    let rows: Vec<mysql_async::Row> = c
        .query(format!("SHOW TABLETS FROM {table}"))
        .await
        .expect("show tablets");
    rows[0].get::<i64, _>("VersionCount").expect("VersionCount")
}

/// 3000 upserts of 500 keys (UNIQUE, background compaction on) and, at the
/// same time, single-row loads into a table without auto compaction until
/// the version limit refuses one.
#[tokio::test]
async fn single_row_loads_with_and_without_compaction() {
    let mut server = TethysServer::start_with_args(&binary(), &["--max-tablet-version-num", "200"])
        .await
        .expect("start");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    c.query_drop("CREATE DATABASE cp").await.expect("db");
    c.query_drop(
        "CREATE TABLE cp.u (k INT NOT NULL, v BIGINT) UNIQUE KEY(k) \
         DISTRIBUTED BY HASH(k) BUCKETS 1",
    )
    .await
    .expect("table u");
    c.query_drop(
        "CREATE TABLE cp.d (k INT NOT NULL, v BIGINT) DUPLICATE KEY(k) \
         DISTRIBUTED BY HASH(k) BUCKETS 1 PROPERTIES (\"disable_auto_compaction\" = \"true\")",
    )
    .await
    .expect("table d");

    let upserts = {
        let opts = server.opts();
        tokio::spawn(async move {
            let mut c = Conn::new(opts).await.expect("connect");
            let mut max_versions = 0;
            for i in 0..3000i64 {
                c.query_drop(format!("INSERT INTO cp.u VALUES ({}, {i})", i % 500))
                    .await
                    .unwrap_or_else(|e| panic!("upsert {i} failed: {e}"));
                if i % 250 == 0 {
                    max_versions = max_versions.max(version_count(&mut c, "cp.u").await);
                }
            }
            max_versions
        })
    };
    let refused = {
        let opts = server.opts();
        tokio::spawn(async move {
            let mut c = Conn::new(opts).await.expect("connect");
            for i in 0..300i64 {
                if let Err(e) = c
                    .query_drop(format!("INSERT INTO cp.d VALUES ({i}, {i})"))
                    .await
                {
                    return (i, e.to_string());
                }
            }
            (300, String::new())
        })
    };
    let max_versions = upserts.await.expect("upserts");
    let (loaded, error) = refused.await.expect("loads");

    // With compaction: every load succeeded, versions stayed far below the
    // limit, the newest value of each key won: for key k, 2500 + k.
    assert!(max_versions < 100, "version count reached {max_versions}");
    assert_eq!(
        count_and_sum(&mut c, "cp.u").await,
        (500, 500 * 2500 + (0..500).sum::<i64>())
    );
    let (v,): (i64,) = c
        .query_first("SELECT v FROM cp.u WHERE k = 7")
        .await
        .expect("query")
        .expect("row");
    assert_eq!(v, 2507);

    // Without: the 201st load is refused with the version limit error.
    assert_eq!(loaded, 200, "refused at load {loaded}: {error}");
    assert!(
        error.contains("E-235") && error.contains("exceed limit: 200"),
        "{error}"
    );
    assert_eq!(version_count(&mut c, "cp.d").await, 200);
    tethys_sql_tests::run_all(
        &mut c,
        &["ADMIN COMPACT TABLE cp.d WHERE type = 'cumulative'"],
    )
    .await;
    assert_eq!(version_count(&mut c, "cp.d").await, 1);
    tethys_sql_tests::run_all(&mut c, &["INSERT INTO cp.d VALUES (-1, -1)"]).await;
    assert_eq!(
        count_and_sum(&mut c, "cp.d").await,
        (201, (0..200).sum::<i64>() - 1)
    );

    // Compacted rowsets and their replaced inputs survive a kill -9.
    drop(c);
    server.crash_and_restart().await.expect("restart");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    assert_eq!(
        count_and_sum(&mut c, "cp.d").await,
        (201, (0..200).sum::<i64>() - 1)
    );
    assert_eq!(count_and_sum(&mut c, "cp.u").await.0, 500);
}

/// Merge-on-write under concurrency: three writers upsert (and one deletes)
/// through INSERT while background compaction runs and a reader checks, at
/// every snapshot, that no key is visible twice; each writer owns the keys
/// of one residue, so the final value of every key is known. The answers
/// survive a kill -9.
#[tokio::test]
async fn concurrent_merge_on_write_upserts_never_show_a_key_twice() {
    let mut server = TethysServer::start(&binary()).await.expect("start");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    c.query_drop("CREATE DATABASE mw").await.expect("db");
    c.query_drop(
        "CREATE TABLE mw.t (k INT NOT NULL, v BIGINT, s VARCHAR(8)) UNIQUE KEY(k) \
         DISTRIBUTED BY HASH(k) BUCKETS 2",
    )
    .await
    .expect("table");
    const WRITERS: i64 = 3;
    const LOADS: i64 = 40;
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let opts = server.opts();
            tokio::spawn(async move {
                let mut c = Conn::new(opts).await.expect("connect");
                // Keys k with k % WRITERS == w; load i writes 15 of them.
                let mut last = std::collections::BTreeMap::new();
                for i in 0..LOADS {
                    let rows: Vec<String> = (0..15)
                        .map(|j| {
                            let k = ((i * 7 + j * 11) % 60) * WRITERS + w;
                            let v = i * 100 + j;
                            last.insert(k, Some(v));
                            format!("({k}, {v}, 's{i}')")
                        })
                        .collect();
                    c.query_drop(format!("INSERT INTO mw.t VALUES {}", rows.join(", ")))
                        .await
                        .unwrap_or_else(|e| panic!("writer {w} load {i}: {e}"));
                    // Writer 0 also deletes by a value condition now and then.
                    if w == 0 && i % 10 == 9 {
                        let cut = i * 100;
                        c.query_drop(format!(
                            "DELETE FROM mw.t WHERE k % {WRITERS} = 0 AND v < {cut}"
                        ))
                        .await
                        .unwrap_or_else(|e| panic!("delete {i}: {e}"));
                        for v in last.values_mut() {
                            if v.is_some_and(|x| x < cut) {
                                *v = None;
                            }
                        }
                    }
                }
                last
            })
        })
        .collect();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (opts, done) = (server.opts(), done.clone());
        tokio::spawn(async move {
            let mut c = Conn::new(opts).await.expect("connect");
            let mut checks = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let (n, distinct, filtered): (i64, i64, i64) = c
                    .query_first(
                        "SELECT count(*), count(DISTINCT k), \
                         (SELECT count(*) FROM mw.t WHERE v >= 0) FROM mw.t",
                    )
                    .await
                    .expect("check query")
                    .expect("row");
                assert_eq!(n, distinct, "a key is visible twice");
                assert_eq!(n, filtered, "a pushed-down filter resurrects rows");
                checks += 1;
            }
            checks
        })
    };
    let mut expected = std::collections::BTreeMap::new();
    for w in writers {
        expected.extend(w.await.expect("writer"));
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.await.expect("reader") > 0);
    let expected: Vec<(i64, i64)> = expected
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect();
    let rows: Vec<(i64, i64)> = c
        .query("SELECT k, v FROM mw.t ORDER BY k")
        .await
        .expect("rows");
    assert_eq!(rows, expected);
    tethys_sql_tests::run_all(&mut c, &["ADMIN COMPACT TABLE mw.t WHERE type = 'full'"]).await;
    let rows: Vec<(i64, i64)> = c
        .query("SELECT k, v FROM mw.t ORDER BY k")
        .await
        .expect("rows after compaction");
    assert_eq!(rows, expected);
    drop(c);
    server.crash_and_restart().await.expect("restart");
    let mut c = Conn::new(server.opts()).await.expect("reconnect");
    let rows: Vec<(i64, i64)> = c
        .query("SELECT k, v FROM mw.t ORDER BY k")
        .await
        .expect("rows after restart");
    assert_eq!(rows, expected);
}

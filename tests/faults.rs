//! Faults nobody can provoke from outside, acted out by debug points
//! (`--enable-debug-points`, `POST /api/debug_point/add/{name}`): a bug that
//! panics one statement, fragment, load or background round ends that piece
//! of work with an error and leaves the server serving, with no state left
//! behind and never a shortened answer; heartbeats missed while the server
//! is busy lose no load.

use std::path::PathBuf;
use std::time::Duration;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use tethys_sql_tests::{
    LoadFixture, TethysServer, assert_load_failed, curl, json_field, query_rows,
};

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tethys"))
}

/// A server with debug points on and an empty table `f.t (id, v)`.
async fn fixture(extra: &[&str]) -> LoadFixture {
    let mut args = vec!["--enable-debug-points"];
    args.extend_from_slice(extra);
    let ddl = "CREATE TABLE f.t (id BIGINT NOT NULL, v INT) DUPLICATE KEY(id) \
               DISTRIBUTED BY HASH(id) BUCKETS 1";
    LoadFixture::start(&binary(), &args, "f", "t", &["CREATE DATABASE f", ddl]).await
}

/// Turns the debug point `name` on (on the BE's HTTP port: FE and BE share
/// the registry of one process) for `times` hits.
fn debug_point(server: &TethysServer, name: &str, times: u32) {
    let url = format!(
        "http://127.0.0.1:{}/api/debug_point/add/{name}?execute={times}",
        server.be_http_port
    );
    let (code, body) = curl(&["-X", "POST", &url]);
    assert_eq!(code, 200, "{body}");
}

async fn processlist_len(c: &mut Conn) -> usize {
    let rows: Vec<mysql_async::Row> = c.query("SHOW PROCESSLIST").await.expect("processlist");
    rows.len()
}

#[tokio::test]
async fn debug_points_need_the_flag() {
    let server = TethysServer::start(&binary()).await.expect("start");
    let url = format!(
        "http://127.0.0.1:{}/api/debug_point/add/BeFragment.panic",
        server.fe_http_port
    );
    let (code, body) = curl(&["-X", "POST", &url]);
    assert_eq!(code, 403, "{body}");
    assert!(
        json_field(&body, "msg")
            .as_str()
            .is_some_and(|m| m.contains("--enable-debug-points")),
        "{body}"
    );
}

/// A fragment that panicked used to end its stream as if it had finished,
/// so the FE answered with the rows sent before the panic as a success
/// (`be/src/service/flight.rs` dropped the sender; the trailer was
/// optional).
#[tokio::test]
async fn a_fragment_stopped_by_a_bug_fails_the_query_never_shortens_it() {
    let f = fixture(&[]).await;
    let mut c = f.conn().await;
    c.query_drop("INSERT INTO f.t (id) SELECT number FROM numbers(\"number\" = \"10000\")")
        .await
        .expect("insert");
    assert_eq!(f.count().await, 10_000);
    debug_point(&f.server, "BeFragment.panic", 1);
    let r: Result<Vec<mysql_async::Row>, _> = c.query("SELECT id FROM f.t").await;
    let e = r.expect_err("a fragment stopped by a bug must fail its query");
    let msg = e.to_string();
    assert!(msg.contains("ERROR 1105"), "{msg}");
    assert!(msg.contains("debug point BeFragment.panic"), "{msg}");
    // The server and the connection go on.
    let all: Vec<mysql_async::Row> = c.query("SELECT id FROM f.t").await.expect("again");
    assert_eq!(all.len(), 10_000);
}

#[tokio::test]
async fn a_command_stopped_by_a_bug_answers_1105_and_the_session_goes_on() {
    let server = TethysServer::start_with_args(&binary(), &["--enable-debug-points"])
        .await
        .expect("start");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    c.query_drop("SET @kept = 7").await.expect("set");
    let before = processlist_len(&mut c).await;
    debug_point(&server, "FeCommand.panic", 1);
    let e = c
        .query_drop("SELECT 1")
        .await
        .expect_err("the command must fail");
    let msg = e.to_string();
    assert!(msg.contains("ERROR 1105"), "{msg}");
    assert!(
        msg.contains("the command stopped by a bug: debug point FeCommand.panic"),
        "{msg}"
    );
    let v: Option<i64> = c.query_first("SELECT @kept").await.expect("session");
    assert_eq!(v, Some(7));
    assert_eq!(processlist_len(&mut c).await, before);
    // Other sessions never noticed.
    let mut other = Conn::new(server.opts()).await.expect("connect");
    let one: Option<i64> = other.query_first("SELECT 1").await.expect("other");
    assert_eq!(one, Some(1));
}

#[tokio::test]
async fn a_load_stopped_by_a_bug_fails_and_frees_its_label() {
    let f = fixture(&[]).await;
    let file = f.file("rows.csv", "1,10\n2,20\n3,30\n");
    let headers = ["label: crash_once", "column_separator: ,"];
    debug_point(&f.server, "BeStreamLoad.panic", 1);
    assert_load_failed(&f.load(&file, &headers), "the load stopped by a bug");
    assert_eq!(f.count().await, 0);
    // Its transaction was aborted: the label is free again.
    let body = f.load(&file, &headers);
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    assert_eq!(f.count().await, 3);
}

/// A periodic round that panicked used to end its task for good: labels
/// were never cleaned again, so a finished load's label stayed taken.
#[tokio::test]
async fn background_rounds_outlive_a_panic() {
    let f = fixture(&[
        "--label-keep-max-second",
        "1",
        "--label-clean-interval-second",
        "1",
    ])
    .await;
    let mut c = f.conn().await;
    debug_point(&f.server, "FeLabelCleaner.panic", 2);
    c.query_drop("INSERT INTO f.t WITH LABEL again (id) VALUES (1)")
        .await
        .expect("first");
    // Rounds every second: two panic, a later one frees the label.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while let Err(e) = c
        .query_drop("INSERT INTO f.t WITH LABEL again (id) VALUES (2)")
        .await
    {
        assert!(e.to_string().contains("already"), "{e}");
        assert!(
            std::time::Instant::now() < deadline,
            "the label was never cleaned: {e}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(f.count().await, 2);
}

/// Heartbeats that get no answer (the servers busy: three debug-build
/// servers at once on two cores) mark the backend not alive. Publish
/// skipped such backends, so an INSERT whose writes had succeeded failed
/// after its commit ("0 of 1 replicas"); it now calls every registered
/// backend holding a replica. A standalone server's own backend, marked
/// so, goes on loading and answering.
#[tokio::test]
async fn loads_and_queries_go_on_while_heartbeats_are_missed() {
    let f = fixture(&[]).await;
    let mut c = f.conn().await;
    let url = format!(
        "http://127.0.0.1:{}/api/debug_point/add/FeHeartbeat.miss?timeout=120",
        f.server.be_http_port
    );
    let (code, body) = curl(&["-X", "POST", &url]);
    assert_eq!(code, 200, "{body}");
    let missed = |rows: &[Vec<String>]| {
        rows.iter()
            .any(|r| r[9] == "false" && r.iter().any(|v| v.contains("FeHeartbeat.miss")))
    };
    // The next heartbeat round (every 5 s) marks the backend.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let rows = query_rows(&mut c, "SHOW BACKENDS").await;
        if missed(&rows) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{rows:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    c.query_drop("INSERT INTO f.t (id) SELECT number FROM numbers(\"number\" = \"1000\")")
        .await
        .expect("the load publishes on the backend that missed its heartbeats");
    assert_eq!(f.count().await, 1000);
    let rows = query_rows(&mut c, "SHOW BACKENDS").await;
    assert!(missed(&rows), "all the while not alive: {rows:?}");
}

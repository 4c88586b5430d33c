//! A cluster of separate processes on loopback: `tethys fe` and `tethys be`,
//! each its own data directory; backends joined with ALTER SYSTEM, followed
//! by heartbeats, and tolerated when dead. Every test stops only the
//! processes it started.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use tethys_sql_tests::cluster::{BackendProcess, FrontendProcess};
use tethys_sql_tests::{curl, query_rows, run_all};

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tethys"))
}

/// SHOW BACKENDS as rows of (column name, value) maps, by host:port.
async fn backends(c: &mut Conn) -> Vec<std::collections::BTreeMap<String, String>> {
    let rows: Vec<mysql_async::Row> = c.query("SHOW BACKENDS").await.expect("SHOW BACKENDS");
    rows.into_iter()
        .map(|r| {
            let names: Vec<String> = r
                .columns_ref()
                .iter()
                .map(|c| c.name_str().to_string())
                .collect();
            names
                .into_iter()
                .enumerate()
                .map(|(i, n)| {
                    let v = match r.as_ref(i) {
                        Some(mysql_async::Value::Bytes(b)) => String::from_utf8_lossy(b).into(),
                        _ => String::new(),
                    };
                    (n, v)
                })
                .collect()
        })
        .collect()
}

/// Waits (20 s at most) until backend `port`'s Alive column reads `alive`.
async fn wait_alive(
    c: &mut Conn,
    port: u16,
    alive: bool,
) -> std::collections::BTreeMap<String, String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let all = backends(c).await;
        if let Some(b) = all.iter().find(|b| b["HeartbeatPort"] == port.to_string())
            && b["Alive"] == alive.to_string()
        {
            return b.clone();
        }
        assert!(
            Instant::now() < deadline,
            "backend {port} never Alive={alive}: {all:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn count(c: &mut Conn, sql: &str) -> i64 {
    c.query_first::<i64, _>(sql)
        .await
        .expect(sql)
        .expect("a row")
}

/// An FE and two BEs as separate processes: the BEs join with ALTER SYSTEM
/// (learning their FE and cluster from its heartbeat), tablets spread over
/// them, loads and queries cross both; a dead BE shows as dead, new tablets
/// avoid it, the FE restarts and serves while it is down, and it is caught
/// up when it returns.
#[tokio::test]
async fn separate_processes_form_a_cluster() {
    let bin = binary();
    let mut fe = FrontendProcess::start(&bin, &["--heartbeat-interval-second", "1"])
        .await
        .expect("fe");
    let be1 = BackendProcess::start(&bin).await.expect("be 1");
    let mut be2 = BackendProcess::start(&bin).await.expect("be 2");
    let mut c = fe.conn().await;
    assert!(backends(&mut c).await.is_empty());
    run_all(&mut c, &["CREATE DATABASE d"]).await;
    let table = "CREATE TABLE d.t (k INT, v VARCHAR(20)) DUPLICATE KEY(k) \
                 DISTRIBUTED BY HASH(k) BUCKETS 4";
    let e = c.query_drop(table).await.expect_err("no backend yet");
    assert!(
        e.to_string().contains("Failed to find enough backend"),
        "{e}"
    );

    run_all(
        &mut c,
        &[&format!(
            r#"ALTER SYSTEM ADD BACKEND "{}", "{}""#,
            be1.address(),
            be2.address()
        )],
    )
    .await;
    let e = c
        .query_drop(format!(r#"ALTER SYSTEM ADD BACKEND "{}""#, be1.address()))
        .await
        .expect_err("twice");
    assert!(e.to_string().contains("Same backend already exists"), "{e}");
    for be in [&be1, &be2] {
        let row = wait_alive(&mut c, be.port, true).await;
        assert_eq!(row.len(), 28, "{row:?}");
        assert_eq!(
            row["HttpPort"],
            be.http_port.to_string(),
            "learnt by heartbeat"
        );
        assert_eq!(row["ErrMsg"], "");
        assert_eq!(row["NodeRole"], "mix");
    }
    let e = c
        .query_drop(format!("{table} PROPERTIES (\"replication_num\" = \"2\")"))
        .await
        .expect_err("replicas");
    assert!(e.to_string().contains("not supported yet"), "{e}");

    // Four tablets, two on each backend.
    run_all(&mut c, &[table]).await;
    let rows = backends(&mut c).await;
    assert!(rows.iter().all(|b| b["TabletNum"] == "2"), "{rows:?}");
    let values: Vec<String> = (0..100).map(|k| format!("({k}, 'v{k}')")).collect();
    run_all(
        &mut c,
        &[&format!("INSERT INTO d.t VALUES {}", values.join(", "))],
    )
    .await;
    // Stream Load through the FE, redirected to an alive backend, which
    // reaches the FE it learnt from the heartbeat.
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("rows.csv");
    let csv: String = (100..150).map(|k| format!("{k},s{k}\n")).collect();
    std::fs::write(&file, csv).expect("write");
    let (code, body) = curl(&[
        "--location-trusted",
        "-u",
        "root:",
        "-H",
        "column_separator:,",
        "-T",
        &file.display().to_string(),
        &format!("http://127.0.0.1:{}/api/d/t/_stream_load", fe.http_port),
    ]);
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"Success\""), "{body}");
    assert_eq!(count(&mut c, "SELECT count(*) FROM d.t").await, 150);
    assert_eq!(
        count(&mut c, "SELECT count(*) FROM d.t WHERE v LIKE 's%'").await,
        50
    );

    // kill -9 one backend: it shows as dead with why; new tablets avoid it.
    be2.kill();
    let dead = wait_alive(&mut c, be2.port, false).await;
    assert!(!dead["ErrMsg"].is_empty(), "{dead:?}");
    assert_eq!(dead["NodeRole"], "");
    run_all(
        &mut c,
        &[
            "CREATE TABLE d.u (k INT) DUPLICATE KEY(k) DISTRIBUTED BY HASH(k) BUCKETS 3",
            "INSERT INTO d.u VALUES (1), (2), (3)",
        ],
    )
    .await;
    assert_eq!(count(&mut c, "SELECT count(*) FROM d.u").await, 3);

    // The FE restarts and serves with that backend still down.
    drop(c);
    fe.kill();
    let started = Instant::now();
    fe.restart().await.expect("fe restart");
    assert!(started.elapsed() < Duration::from_secs(30));
    let mut c = fe.conn().await;
    assert_eq!(count(&mut c, "SELECT count(*) FROM d.u").await, 3);
    wait_alive(&mut c, be2.port, false).await;

    // The backend returns: caught up, the whole table answers again.
    be2.restart().await.expect("be 2 restart");
    wait_alive(&mut c, be2.port, true).await;
    assert_eq!(count(&mut c, "SELECT count(*) FROM d.t").await, 150);
    drop(be1);
}

/// A backend keeps the cluster it joined: another FE's heartbeats are
/// refused, and its SHOW BACKENDS says why.
#[tokio::test]
async fn a_backend_of_another_cluster_is_refused() {
    let bin = binary();
    let fe_a = FrontendProcess::start(&bin, &["--heartbeat-interval-second", "1"])
        .await
        .expect("fe a");
    let fe_b = FrontendProcess::start(&bin, &["--heartbeat-interval-second", "1"])
        .await
        .expect("fe b");
    let be = BackendProcess::start(&bin).await.expect("be");
    let mut a = fe_a.conn().await;
    run_all(
        &mut a,
        &[&format!(r#"ALTER SYSTEM ADD BACKEND "{}""#, be.address())],
    )
    .await;
    wait_alive(&mut a, be.port, true).await;
    let mut b = fe_b.conn().await;
    run_all(
        &mut b,
        &[&format!(r#"ALTER SYSTEM ADD BACKEND "{}""#, be.address())],
    )
    .await;
    let refused = wait_alive(&mut b, be.port, false).await;
    assert!(
        refused["ErrMsg"].contains("belongs to cluster"),
        "{refused:?}"
    );
    // Still the first cluster's.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    wait_alive(&mut a, be.port, true).await;
    let rows = query_rows(&mut b, "SHOW BACKENDS").await;
    assert_eq!(rows.len(), 1);
    // DROP is refused as Doris refuses it; DROPP drops.
    let e = b
        .query_drop(format!(r#"ALTER SYSTEM DROP BACKEND "{}""#, be.address()))
        .await
        .expect_err("drop");
    assert!(e.to_string().contains("use DROPP instead of DROP"), "{e}");
    run_all(
        &mut b,
        &[&format!(r#"ALTER SYSTEM DROPP BACKEND "{}""#, be.address())],
    )
    .await;
    assert!(backends(&mut b).await.is_empty());
    let e = b
        .query_drop(format!(
            r#"ALTER SYSTEM DECOMMISSION BACKEND "{}""#,
            be.address()
        ))
        .await
        .expect_err("decommission");
    assert!(e.to_string().contains("not supported yet"), "{e}");
}

//! Protocol-level tests against a started Tethys: prepared statements and
//! the binary protocol, authentication, COM_INIT_DB, KILL QUERY,
//! query_timeout, multi-statement queries, and the built-in shell.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};
use tethys_sql_tests::TethysServer;

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tethys"))
}

async fn setup(server: &TethysServer) -> Conn {
    let mut c = Conn::new(server.opts()).await.expect("connect");
    c.query_drop("CREATE DATABASE p").await.expect("create db");
    c.query_drop("USE p").await.expect("use");
    c.query_drop(
        "CREATE TABLE t (k INT NOT NULL, name VARCHAR(10), amount DECIMAL(10,2), d DATE, ts DATETIME, f DOUBLE) \
         DUPLICATE KEY(k) DISTRIBUTED BY HASH(k) BUCKETS 2",
    )
    .await
    .expect("create table");
    c.query_drop(
        "INSERT INTO t VALUES (1, 'one', 1.50, '2026-08-01', '2026-08-01 10:20:30', 0.25), \
         (2, NULL, NULL, NULL, NULL, NULL), (3, 'three', 3.00, '2026-08-03', '2026-08-03 00:00:00', 3)",
    )
    .await
    .expect("insert");
    c
}

#[tokio::test]
async fn prepared_statements_use_the_binary_protocol() {
    let server = TethysServer::start(&binary()).await.expect("start");
    let mut c = setup(&server).await;
    // exec = COM_STMT_PREPARE + COM_STMT_EXECUTE, rows in the binary protocol.
    let rows: Vec<Row> = c
        .exec(
            "SELECT k, name, amount, d, ts, f FROM t WHERE k >= ? ORDER BY k",
            (2,),
        )
        .await
        .expect("exec");
    assert_eq!(rows.len(), 2);
    let r0 = rows[0].clone().unwrap();
    assert_eq!(r0[0], Value::Int(2));
    assert_eq!(r0[1], Value::NULL);
    let r1 = rows[1].clone().unwrap();
    assert_eq!(r1[0], Value::Int(3));
    assert_eq!(r1[1], Value::Bytes(b"three".to_vec()));
    assert_eq!(r1[2], Value::Bytes(b"3.00".to_vec()));
    assert_eq!(r1[3], Value::Date(2026, 8, 3, 0, 0, 0, 0));
    assert_eq!(r1[4], Value::Date(2026, 8, 3, 0, 0, 0, 0));
    assert_eq!(r1[5], Value::Double(3.0));
    // String and NULL parameters, reused statement with new values.
    let stmt = c
        .prep("SELECT count(*) FROM t WHERE name = ? OR k = ?")
        .await
        .expect("prep");
    let n: Option<i64> = c.exec_first(&stmt, ("one", 3)).await.expect("exec 1");
    assert_eq!(n, Some(2));
    let n: Option<i64> = c
        .exec_first(&stmt, ("it's", Value::NULL))
        .await
        .expect("exec 2");
    assert_eq!(n, Some(0));
    // A prepared INSERT.
    c.exec_drop(
        "INSERT INTO t (k, name, ts) VALUES (?, ?, ?)",
        (9, "nine", "2026-09-09 09:09:09"),
    )
    .await
    .expect("prepared insert");
    assert_eq!(c.affected_rows(), 1);
    let ts: Option<String> = c
        .query_first("SELECT ts FROM t WHERE k = 9")
        .await
        .expect("read back");
    assert_eq!(ts.as_deref(), Some("2026-09-09 09:09:09"));
    c.close(stmt).await.expect("close");
    // A `?` in a comment or a quoted name is no placeholder (it was
    // counted, and the client then had to send two values).
    let stmt = c
        .prep("SELECT ? /* ? */ + 1 AS `b?` -- what?")
        .await
        .expect("prep");
    assert_eq!(stmt.num_params(), 1);
    let n: Option<i64> = c.exec_first(&stmt, (41,)).await.expect("exec");
    assert_eq!(n, Some(42));
}

#[tokio::test]
async fn authentication_and_init_db() {
    let server = TethysServer::start(&binary()).await.expect("start");
    let mut c = setup(&server).await;
    drop(c.ping().await);
    // Connecting with a database uses the handshake's database field.
    let mut c2 = Conn::new(server.opts().db_name(Some("p")))
        .await
        .expect("connect with db");
    let n: Option<i64> = c2
        .query_first("SELECT count(*) FROM t")
        .await
        .expect("count");
    assert_eq!(n, Some(3));
    // Unknown database at connect.
    let err = Conn::new(server.opts().db_name(Some("nope")))
        .await
        .expect_err("must fail");
    assert!(err.to_string().contains("1049"), "{err}");
    // Wrong password.
    let err = Conn::new(server.opts().pass(Some("wrong")))
        .await
        .expect_err("must fail");
    assert!(err.to_string().contains("1045"), "{err}");
    // Unknown user.
    let err = Conn::new(server.opts().user(Some("mallory")))
        .await
        .expect_err("must fail");
    assert!(err.to_string().contains("Access denied"), "{err}");
    // COM_INIT_DB through the driver.
    c.reset().await.ok();
    tethys_sql_tests::run_all(&mut c, &["USE information_schema"]).await;
    let tables: Vec<String> = c
        .query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'p'")
        .await
        .expect("information_schema");
    assert_eq!(tables, vec!["t".to_string()]);
}

#[tokio::test]
async fn kill_query_and_query_timeout() {
    let server = TethysServer::start(&binary()).await.expect("start");
    let mut c = setup(&server).await;
    // A statement that runs for a long time: counting ten billion generated rows.
    let slow = "SELECT count(*) FROM range(10000000000) WHERE value % 7 = 3";
    let id = c.id();
    let opts = server.opts();
    let killer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut k = Conn::new(opts).await.expect("killer connects");
        k.query_drop(format!("KILL QUERY {id}"))
            .await
            .expect("kill");
    });
    let start = Instant::now();
    let err = c.query_drop(slow).await.expect_err("killed");
    assert!(err.to_string().contains("1317"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(30));
    killer.await.expect("killer");
    // The connection still works.
    let one: Option<i64> = c.query_first("SELECT 1").await.expect("after kill");
    assert_eq!(one, Some(1));
    // query_timeout in seconds.
    c.query_drop("SET query_timeout = 1").await.expect("set");
    let start = Instant::now();
    let err = c.query_drop(slow).await.expect_err("timeout");
    assert!(err.to_string().contains("3024"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(30));
    let procs: Vec<Row> = c.query("SHOW PROCESSLIST").await.expect("processlist");
    assert!(!procs.is_empty());
}

#[tokio::test]
async fn multi_statements_and_errors_keep_the_session() {
    let server = TethysServer::start(&binary()).await.expect("start");
    let mut c = setup(&server).await;
    // Two statements in one COM_QUERY.
    let mut r = c.query_iter("SELECT 1; SELECT 2, 3").await.expect("multi");
    let first: Vec<Row> = r.collect().await.expect("first");
    let second: Vec<Row> = r.collect().await.expect("second");
    drop(r);
    assert_eq!(first.len(), 1);
    assert_eq!(second[0].clone().unwrap().len(), 2);
    // Errors do not break the connection.
    for bad in [
        "SELEC 1",
        "SELECT * FROM nope",
        "SELECT nope FROM t",
        "CREATE TABLE x (a GEOMETRY)",
    ] {
        assert!(c.query_drop(bad).await.is_err(), "{bad} must fail");
    }
    let n: Option<i64> = c
        .query_first("SELECT count(*) FROM t")
        .await
        .expect("still fine");
    assert_eq!(n, Some(3));
}

#[tokio::test]
async fn shell_runs_statements_from_e_and_stdin() {
    let server = TethysServer::start(&binary()).await.expect("start");
    let c = setup(&server).await;
    drop(c);
    let port = server.query_port.to_string();
    let out = std::process::Command::new(binary())
        .args([
            "shell",
            "-P",
            &port,
            "-D",
            "p",
            "-e",
            "SELECT k, name FROM t ORDER BY k; SELECT 42 AS answer",
        ])
        .output()
        .expect("shell -e");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text, "k\tname\n1\tone\n2\tNULL\n3\tthree\nanswer\n42\n");
    // Piped script, with a failing statement: exit status 1, error on stderr.
    let mut child = std::process::Command::new(binary())
        .args(["shell", "-P", &port])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("shell");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(b"USE p;\nSELECT count(*)\n  FROM t;\nSELECT * FROM missing;\n")
            .expect("write");
    }
    let out = child.wait_with_output().expect("wait");
    assert!(!out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "count(*)\n3\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("1146"));
}

fn pending_txn_files(dir: &std::path::Path) -> usize {
    let Ok(tablets) = std::fs::read_dir(dir.join("be/data")) else {
        return 0;
    };
    tablets
        .flatten()
        .filter_map(|t| std::fs::read_dir(t.path()).ok())
        .flat_map(|files| files.flatten())
        .filter(|f| f.file_name().to_string_lossy().starts_with("txn_"))
        .count()
}

#[tokio::test]
async fn crash_during_insert_leaves_nothing_behind() {
    let mut server = TethysServer::start(&binary()).await.expect("start");
    let c = setup(&server).await;
    drop(c);
    let opts = server.opts().db_name(Some("p"));
    let load = tokio::spawn(async move {
        let mut c = Conn::new(opts).await.expect("connect");
        c.query_drop("INSERT INTO t (k, name) SELECT value, 'x' FROM range(500000000)")
            .await
    });
    // Wait until the load has written pending segments on the backend, then kill -9.
    let deadline = Instant::now() + Duration::from_secs(60);
    while pending_txn_files(server.data_dir()) == 0 {
        assert!(Instant::now() < deadline, "the load never wrote a segment");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.crash_and_restart().await.expect("restart");
    assert!(
        load.await.expect("join").is_err(),
        "the client sees the load fail"
    );
    let mut c = Conn::new(server.opts().db_name(Some("p")))
        .await
        .expect("reconnect");
    let n: Option<i64> = c
        .query_first("SELECT count(*) FROM t")
        .await
        .expect("count");
    assert_eq!(n, Some(3), "none of the interrupted load is visible");
    assert_eq!(
        pending_txn_files(server.data_dir()),
        0,
        "its pending rowsets were discarded"
    );
    // The same table still loads.
    tethys_sql_tests::run_all(&mut c, &["INSERT INTO t (k) VALUES (100)"]).await;
    let n: Option<i64> = c
        .query_first("SELECT count(*) FROM t")
        .await
        .expect("count");
    assert_eq!(n, Some(4));
}

#[tokio::test]
async fn orders_tablets_and_show_create_roundtrip() {
    let server = TethysServer::start(&binary()).await.expect("start");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    c.query_drop("CREATE DATABASE demo").await.expect("db");
    c.query_drop("USE demo").await.expect("use");
    c.query_drop(include_str!("../sql-tests/fixtures/orders.sql"))
        .await
        .expect("create");
    c.query_drop(
        "INSERT INTO orders SELECT to_timestamp_seconds(1782864000 + value * 2580), 'r', 'c', value, value, 1.00, 'new' FROM range(3000)",
    )
    .await
    .expect("insert");
    // SHOW TABLETS: 3 partitions x 10 buckets, every tablet at version 2, all rows accounted for.
    let tablets: Vec<Row> = c
        .query("SHOW TABLETS FROM orders")
        .await
        .expect("show tablets");
    assert_eq!(tablets.len(), 30);
    let mut rows = 0i64;
    for t in &tablets {
        let version: String = t.get("Version").expect("Version");
        assert_eq!(version, "2");
        let n: String = t.get("RowCount").expect("RowCount");
        rows += n.parse::<i64>().expect("number");
        let state: String = t.get("State").expect("State");
        assert_eq!(state, "NORMAL");
    }
    assert_eq!(rows, 3000);
    let one: Vec<Row> = c
        .query("SHOW TABLETS FROM orders PARTITION p202608")
        .await
        .expect("one partition");
    assert_eq!(one.len(), 10);
    // Every bucket got rows: the hash spreads order ids.
    assert!(
        one.iter()
            .all(|t| t.get::<String, _>("RowCount").is_some_and(|n| n != "0"))
    );
    // SHOW CREATE TABLE re-parses to the same table.
    let (_, ddl): (String, String) = c
        .query_first("SHOW CREATE TABLE orders")
        .await
        .expect("show create")
        .expect("a row");
    c.query_drop("CREATE DATABASE again").await.expect("db2");
    c.query_drop("USE again").await.expect("use2");
    c.query_drop(ddl.as_str())
        .await
        .expect("re-create from SHOW CREATE TABLE");
    let (_, ddl2): (String, String) = c
        .query_first("SHOW CREATE TABLE orders")
        .await
        .expect("show create 2")
        .expect("a row");
    assert_eq!(ddl, ddl2);
}

/// Garbage on the wire never takes the server down.
#[tokio::test]
async fn malformed_packets_do_not_crash_the_server() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = TethysServer::start(&binary()).await.expect("start");
    let addr = format!("127.0.0.1:{}", server.query_port);
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..40 {
        let mut s = tokio::net::TcpStream::connect(&addr).await.expect("tcp");
        let mut hello = vec![0u8; 256];
        let _ = tokio::time::timeout(Duration::from_secs(5), s.read(&mut hello)).await;
        let len = (rnd() % 300) as usize;
        let mut body: Vec<u8> = (0..len).map(|_| rnd() as u8).collect();
        if round % 4 == 0 {
            // Claim a huge packet and then stop sending.
            body = vec![0xff, 0xff, 0xff, 1, 3];
        }
        let mut pkt = Vec::new();
        if round % 4 != 0 {
            pkt.extend_from_slice(&(body.len() as u32).to_le_bytes()[..3]);
            pkt.push(1);
        }
        pkt.extend_from_slice(&body);
        let _ = s.write_all(&pkt).await;
        let mut sink = vec![0u8; 1024];
        let _ = tokio::time::timeout(Duration::from_millis(100), s.read(&mut sink)).await;
    }
    // Authenticated sessions sending malformed commands get errors, not crashes.
    let mut c = Conn::new(server.opts()).await.expect("connect");
    for bad in [
        "SELECT '\u{0}'",
        "SELECT 1 FROM",
        "CREATE TABLE x (",
        "SET @@ = 1",
        "SHOW TABLETS FROM",
        "KILL 999999",
        "INSERT INTO nowhere VALUES (1)",
        "EXPLAIN",
    ] {
        let _ = c.query_drop(bad).await;
    }
    let one: Option<i64> = c.query_first("SELECT 1").await.expect("still serving");
    assert_eq!(one, Some(1));
}

#[tokio::test]
async fn idle_connections_close_after_wait_timeout() {
    let server = TethysServer::start(&binary()).await.expect("start");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    c.query_drop("SET wait_timeout = 1").await.expect("set");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        c.query_drop("SELECT 1").await.is_err(),
        "the server closed the idle connection"
    );
    let mut c = Conn::new(server.opts()).await.expect("reconnect");
    let one: Option<i64> = c
        .query_first("SELECT 1")
        .await
        .expect("new connection works");
    assert_eq!(one, Some(1));
}

/// A port given twice (or taken by another process) fails the start with
/// an error naming it: the frontend binds every port before serving any.
/// Before, the HTTP server took the port, the MySQL bind failed unseen, and
/// the process kept running, answering MySQL clients with HTTP.
#[test]
fn a_port_given_twice_fails_the_start() {
    // Four distinct free ports: held together, then let go.
    let held: Vec<std::net::TcpListener> = (0..4)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("free port"))
        .collect();
    let port = |i: usize| held[i].local_addr().expect("port").port();
    let (shared, be_http, be, fe_rpc) = (port(0), port(1), port(2), port(3));
    drop(held);
    let data = tempfile::tempdir().expect("tempdir");
    let mut child = std::process::Command::new(binary())
        .arg("standalone")
        .arg("--data-dir")
        .arg(data.path())
        .args(["--query-port", &shared.to_string()])
        .args(["--http-port", &shared.to_string()])
        .args(["--be-http-port", &be_http.to_string()])
        .args(["--be-port", &be.to_string()])
        .args(["--fe-rpc-port", &fe_rpc.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let status = status.expect("the server must exit when a port cannot be bound");
    assert!(!status.success());
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
        .expect("stderr");
    assert!(err.contains(&format!(":{shared}")), "{err}");
}

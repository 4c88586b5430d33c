//! Unusual or hostile input through the real interfaces: each gives a clear
//! error or the right answer, and the server goes on serving.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use tethys_sql_tests::{LoadFixture, TethysServer, assert_load_failed, json_field};

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tethys"))
}

async fn rows(c: &mut Conn, sql: &str) -> usize {
    let r: Vec<mysql_async::Row> = c.query(sql).await.expect(sql);
    r.len()
}

/// `SHOW ... LIKE` used a recursive matcher: 100,000 `%` overflowed the
/// stack and aborted the process; `%a%a...%ab` backtracked exponentially.
#[tokio::test]
async fn show_like_takes_any_pattern() {
    let server = TethysServer::start(&binary()).await.expect("start");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    let all = rows(&mut c, "SHOW VARIABLES").await;
    let many = "%".repeat(100_000);
    assert_eq!(
        rows(&mut c, &format!("SHOW VARIABLES LIKE '{many}'")).await,
        all
    );
    let started = Instant::now();
    let slow = "%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%ab";
    assert_eq!(
        rows(&mut c, &format!("SHOW VARIABLES LIKE '{slow}'")).await,
        0
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(rows(&mut c, "SHOW VARIABLES LIKE 'batch\\_size'").await, 1);
}

/// `SELECT 1+1+...+1` with 2,000 terms overflowed a runtime thread's stack
/// and aborted the process. Expressions nest up to Doris' limit (3000) and
/// past it are refused with Doris' message; long flat lists stay fine.
#[tokio::test]
async fn deep_expressions_are_refused_at_doris_limit_never_crash() {
    let server = TethysServer::start(&binary()).await.expect("start");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    let chain = |n: usize| format!("SELECT {}", vec!["1"; n].join("+"));
    let sum: Vec<i64> = c.query(chain(2500)).await.expect("2,500 terms");
    assert_eq!(sum, vec![2500]);
    for sql in [
        chain(3500),
        chain(200_000),
        format!("SELECT 1 WHERE {}", vec!["1 = 1"; 5000].join(" OR ")),
    ] {
        let err = c.query_drop(&sql).await.expect_err("too deep");
        assert!(
            err.to_string()
                .contains("Exceeded the maximum depth of an expression tree (3000)"),
            "{err}"
        );
    }
    let n: Vec<i64> = c
        .query(format!(
            "SELECT count(*) FROM numbers(\"number\" = \"10\") WHERE number IN ({})",
            (0..50_000)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .await
        .expect("a long IN list");
    assert_eq!(n, vec![10]);
    let one: Vec<i64> = c.query("SELECT 1").await.expect("still serving");
    assert_eq!(one, vec![1]);
}

#[tokio::test]
async fn number_variables_out_of_range_are_refused_by_name() {
    let server = TethysServer::start(&binary()).await.expect("start");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    for (name, value) in [
        ("parallel_pipeline_task_num", "2147483647"),
        ("query_timeout", "9223372036854775807"),
        ("runtime_filter_max_in_num", "-1"),
        ("wait_timeout", "0"),
    ] {
        let e = c
            .query_drop(format!("SET {name} = {value}"))
            .await
            .expect_err(name);
        let msg = e.to_string();
        assert!(msg.contains("ERROR 1231"), "{msg}");
        assert!(
            msg.contains(&format!(
                "Variable '{name}' can't be set to the value of '{value}'"
            )),
            "{msg}"
        );
    }
    let one: Option<i64> = c.query_first("SELECT 1").await.expect("alive");
    assert_eq!(one, Some(1));
}

/// Stream Load headers are UTF-8: `columns: 编号, 金额` and a `where` over a
/// Chinese column used to be read as absent headers (every row loaded,
/// unmapped); a header that is not UTF-8 is refused by name.
#[tokio::test]
async fn stream_load_headers_are_utf8_text() {
    let f = LoadFixture::start(
        &binary(),
        &[],
        "订单库",
        "订单",
        &[
            "CREATE DATABASE 订单库",
            "CREATE TABLE 订单库.订单 (编号 INT NOT NULL, 金额 INT) DUPLICATE KEY(编号) \
             DISTRIBUTED BY HASH(编号) BUCKETS 2",
        ],
    )
    .await;
    // The file's columns are (amount, id): only `columns` puts them right.
    let file = f.file("rows.csv", "10,1\n20,2\n30,3\n");
    let body = f.load(
        &file,
        &[
            "column_separator: ,",
            "columns: 金额, 编号",
            "where: 金额 > 15",
            "label: 标签_1",
        ],
    );
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    assert_eq!(json_field(&body, "Label"), "标签_1", "{body}");
    let got: Vec<(i64, i64)> = f
        .conn()
        .await
        .query("SELECT 编号, 金额 FROM 订单库.订单 ORDER BY 编号")
        .await
        .expect("select");
    assert_eq!(got, vec![(2, 20), (3, 30)]);

    // A header value of Latin-1 bytes.
    use std::os::unix::ffi::OsStrExt;
    let out = std::process::Command::new("curl")
        .args([
            "-s",
            "-u",
            "root:",
            "-T",
            &file,
            "-H",
            "column_separator: ,",
        ])
        .arg("-H")
        .arg(std::ffi::OsStr::from_bytes(b"where: \xe9 > 1"))
        .arg(f.be_url("订单/_stream_load"))
        .output()
        .expect("curl");
    let body = String::from_utf8_lossy(&out.stdout);
    assert_load_failed(&body, "the where header is not UTF-8 text");
    assert_eq!(f.count().await, 2);
}

/// `timeout: 9223372036854775807` panicked the BE after the transaction
/// began (`Instant::now() + timeout`); `timezone` and the like were read
/// as if absent.
#[tokio::test]
async fn load_headers_out_of_range_or_not_acted_on_are_refused() {
    let f = LoadFixture::start(
        &binary(),
        &[],
        "d",
        "t",
        &[
            "CREATE DATABASE d",
            "CREATE TABLE d.t (id INT NOT NULL) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1",
        ],
    )
    .await;
    let file = f.file("rows.csv", "1\n2\n");
    // Doris headers Tethys does not act on are refused, not ignored.
    for h in [
        "timezone: Asia/Tokyo",
        "exec_mem_limit: 100",
        "function_column.sequence_col: id",
        "hidden_columns: __DORIS_DELETE_SIGN__",
    ] {
        let name = h.split(':').next().unwrap_or_default();
        let body = f.load(&file, &[h, "label: same_label"]);
        assert_load_failed(&body, &format!("the {name} header is not supported yet"));
    }
    for t in ["9223372036854775807", "259201", "0", "-3"] {
        let body = f.load(&file, &[&format!("timeout: {t}"), "label: same_label"]);
        assert_load_failed(
            &body,
            &format!("Invalid timeout: {t}. Timeout should be between 1 and 259200 seconds"),
        );
    }
    // No transaction was begun: the label is still free.
    let body = f.load(&file, &["timeout: 259200", "label: same_label"]);
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    assert_eq!(f.count().await, 2);
}

/// A negative parameter stays one value after the operator before it, bound
/// by COM_STMT_EXECUTE or by `EXECUTE ... USING` (`--5` is no comment in
/// MySQL's grammar, so pasted bare it answered 15 too: this guards the
/// binding, the DECIMAL case in tests/wire_framing.rs is the one that
/// failed).
#[tokio::test]
async fn negative_parameters_stay_one_value() {
    let server = TethysServer::start(&binary()).await.expect("start");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    let stmt = c.prep("SELECT 10 -?").await.expect("prepare");
    let v: Option<i64> = c.exec_first(&stmt, (-5i64,)).await.expect("exec");
    assert_eq!(v, Some(15));
    let v: Option<f64> = c.exec_first(&stmt, (-0.5f64,)).await.expect("exec");
    assert_eq!(v, Some(10.5));
    tethys_sql_tests::run_all(&mut c, &["SET @v = -5", "PREPARE s FROM 'SELECT 10 -?'"]).await;
    let v: Option<i64> = c.query_first("EXECUTE s USING @v").await.expect("execute");
    assert_eq!(v, Some(15));
}

/// Prepared statements are bounded in all, as MySQL's
/// `max_prepared_stmt_count` (error 1461), not per connection: a client
/// spreading statements over connections meets the same limit, and a
/// closed statement or connection frees its place.
#[tokio::test]
async fn prepared_statements_are_bounded_server_wide() {
    let server = TethysServer::start_with_args(&binary(), &["--max-prepared-stmt-count", "3"])
        .await
        .expect("start");
    let mut a = Conn::new(server.opts()).await.expect("a");
    let mut b = Conn::new(server.opts()).await.expect("b");
    let first = a.prep("SELECT 1 + ?").await.expect("a 1");
    tethys_sql_tests::run_all(&mut a, &["PREPARE q FROM 'SELECT 2 + ?'"]).await;
    b.prep("SELECT 3 + ?").await.expect("b 1");
    let e = b.prep("SELECT 4 + ?").await.expect_err("a fourth");
    assert!(e.to_string().contains("1461"), "{e}");
    let e = b
        .query_drop("PREPARE r FROM 'SELECT 5'")
        .await
        .expect_err("a fourth by name");
    assert!(e.to_string().contains("1461"), "{e}");
    a.close(first).await.expect("close");
    // COM_STMT_CLOSE has no answer: a round trip makes sure it was read.
    a.ping().await.expect("ping");
    b.prep("SELECT 6 + ?").await.expect("after a close");
    a.disconnect().await.expect("disconnect");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match b.prep("SELECT 7 + ?").await {
            Ok(_) => break,
            Err(e) => {
                assert!(Instant::now() < deadline, "never freed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Connections are bounded in all (`--qe-max-connection`, error 1040) and
/// per user (`--max-user-connections`, error 1203); a closed connection
/// frees its place.
#[tokio::test]
async fn connections_are_bounded() {
    let server = TethysServer::start_with_args(
        &binary(),
        &["--qe-max-connection", "3", "--max-user-connections", "2"],
    )
    .await
    .expect("start");
    let as_user = |user: &str| mysql_async::OptsBuilder::from_opts(server.opts()).user(Some(user));
    let root1 = Conn::new(server.opts()).await.expect("root 1");
    let _root2 = Conn::new(server.opts()).await.expect("root 2");
    let e = Conn::new(server.opts()).await.expect_err("a third root");
    assert!(e.to_string().contains("ERROR 1203"), "{e}");
    assert!(
        e.to_string()
            .contains("User root already has more than 'max_user_connections' active connections"),
        "{e}"
    );
    let _admin = Conn::new(as_user("admin")).await.expect("admin");
    let e = Conn::new(as_user("admin")).await.expect_err("a fourth");
    assert!(e.to_string().contains("ERROR 1040"), "{e}");
    assert!(e.to_string().contains("Too many connections"), "{e}");
    root1.disconnect().await.expect("disconnect");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut again = loop {
        match Conn::new(server.opts()).await {
            Ok(c) => break c,
            Err(e) => {
                assert!(Instant::now() < deadline, "the place was never freed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let one: Option<i64> = again.query_first("SELECT 1").await.expect("query");
    assert_eq!(one, Some(1));
}

/// Before login a packet header claiming 16 MiB made the server allocate
/// it and wait for the bytes; now it is refused at once.
#[tokio::test]
async fn a_huge_packet_before_login_is_refused_at_once() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = TethysServer::start(&binary()).await.expect("start");
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", server.query_port))
        .await
        .expect("tcp");
    let mut greeting = vec![0u8; 4096];
    let n = s.read(&mut greeting).await.expect("greeting");
    assert!(n > 4);
    s.write_all(&[0xff, 0xff, 0xff, 1, b'x'])
        .await
        .expect("write");
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(3), s.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the server waited for the claimed bytes");
    // Others are still served.
    let mut c = Conn::new(server.opts()).await.expect("connect");
    let one: Option<i64> = c.query_first("SELECT 1").await.expect("query");
    assert_eq!(one, Some(1));
}

/// A gzip bomb (a small body that expands past `streaming_load_max_mb`)
/// is refused at the limit, counted on the decompressed bytes; nothing of
/// it is loaded.
#[tokio::test]
async fn a_compression_bomb_is_refused_at_the_limit() {
    let f = LoadFixture::start(
        &binary(),
        &["--streaming-load-max-mb", "8"],
        "d",
        "t",
        &[
            "CREATE DATABASE d",
            "CREATE TABLE d.t (id INT NOT NULL) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1",
        ],
    )
    .await;
    let dir = tempfile::tempdir().expect("tmp");
    let plain = dir.path().join("bomb.csv");
    std::fs::write(&plain, "1\n".repeat(16 << 20)).expect("write");
    let gz = std::process::Command::new("gzip")
        .arg("-k")
        .arg(&plain)
        .status()
        .expect("gzip");
    assert!(gz.success());
    let bomb = format!("{}.gz", plain.display());
    assert!(std::fs::metadata(&bomb).expect("gz").len() < 1 << 20);
    let body = f.load(&bomb, &["compress_type: gz"]);
    assert_load_failed(
        &body,
        "the decompressed body exceeds streaming_load_max_mb (8 MB)",
    );
    assert_eq!(f.count().await, 0);
    let small = f.file("small.csv", "1\n2\n3\n");
    let gz = std::process::Command::new("gzip")
        .arg(&small)
        .status()
        .expect("gzip");
    assert!(gz.success());
    let body = f.load(&format!("{small}.gz"), &["compress_type: gz"]);
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    assert_eq!(f.count().await, 3);
}

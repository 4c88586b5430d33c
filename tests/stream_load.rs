//! Stream Load over HTTP against a started Tethys, with curl as the client
//! (what users script): the FE's 307 redirect, labels, data quality and the
//! error log, two-phase commit (also across a crash), JSON, and a client that
//! disconnects mid-body.

use std::path::PathBuf;
use std::time::Duration;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use tethys_sql_tests::{LoadFixture as Fixture, curl, json_field};

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tethys"))
}

/// The table every test loads: `ld.t`, two range partitions, three buckets.
const DDL: [&str; 2] = [
    "CREATE DATABASE ld",
    "CREATE TABLE ld.t (day DATE NOT NULL, id INT NOT NULL, name VARCHAR(8), amount DECIMAL(10,2)) \
     DUPLICATE KEY(day, id) PARTITION BY RANGE(day) (PARTITION p1 VALUES LESS THAN ('2026-02-01'), \
     PARTITION p2 VALUES LESS THAN ('2026-03-01')) DISTRIBUTED BY HASH(id) BUCKETS 3",
];

async fn fixture_with(args: &[&str]) -> Fixture {
    Fixture::start(&binary(), args, "ld", "t", &DDL).await
}

async fn fixture() -> Fixture {
    fixture_with(&[]).await
}

const GOOD: &str = "2026-01-02,1,alice,10.5\n2026-02-03,2,bob,3\n2026-01-31,3,carol,1.25\n";

#[tokio::test]
async fn labels_redirect_and_visibility() {
    let f = fixture().await;
    let csv = f.file("a.csv", GOOD);
    // The FE answers 307 and points at a backend's HTTP port.
    let (code, _) = curl(&[
        "-u",
        "root:",
        "-T",
        &csv,
        "-o",
        "/dev/null",
        &f.fe_url("t/_stream_load"),
    ]);
    assert_eq!(code, 307);
    let body = f.load(&csv, &["label:l1", "column_separator:,"]);
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    assert_eq!(json_field(&body, "Label"), "l1");
    assert_eq!(json_field(&body, "NumberLoadedRows"), 3);
    assert_eq!(json_field(&body, "NumberTotalRows"), 3);
    assert_eq!(json_field(&body, "TwoPhaseCommit"), "false");
    let txn = json_field(&body, "TxnId").as_i64().expect("txn id");
    for key in [
        "LoadBytes",
        "LoadTimeMs",
        "BeginTxnTimeMs",
        "StreamLoadPutTimeMs",
        "ReadDataTimeMs",
        "WriteDataTimeMs",
        "CommitAndPublishTimeMs",
    ] {
        assert!(json_field(&body, key).is_number(), "{key} in {body}");
    }
    assert_eq!(f.count().await, 3);
    // Retrying with the same label loads nothing.
    let body = f.load(&csv, &["label:l1", "column_separator:,"]);
    assert_eq!(json_field(&body, "Status"), "Label Already Exists");
    assert_eq!(json_field(&body, "ExistingJobStatus"), "VISIBLE");
    assert_eq!(
        json_field(&body, "Message"),
        format!("[LABEL_ALREADY_EXISTS] Label [l1] has already been used, relate to txn [{txn}], status [VISIBLE].").as_str()
    );
    assert_eq!(f.count().await, 3);
    // Directly to the backend works too; no label means a generated one.
    let (code, body) = curl(&[
        "-u",
        "root:",
        "-H",
        "column_separator:,",
        "-T",
        &csv,
        &f.be_url("t/_stream_load"),
    ]);
    assert_eq!(code, 200);
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    assert!(
        json_field(&body, "Label")
            .as_str()
            .is_some_and(|l| !l.is_empty())
    );
    assert_eq!(f.count().await, 6);
    // The history: SHOW STREAM LOAD and SHOW LOAD.
    let mut c = Conn::new(f.server.opts()).await.expect("connect");
    let rows: Vec<mysql_async::Row> = c
        .query("SHOW STREAM LOAD FROM ld WHERE Label = 'l1'")
        .await
        .expect("show stream load");
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].get::<String, _>("Status").as_deref(),
        Some("Success")
    );
    assert_eq!(rows[0].get::<String, _>("Table").as_deref(), Some("t"));
    assert_eq!(rows[0].get::<String, _>("LoadedRows").as_deref(), Some("3"));
    assert_eq!(rows[0].get::<String, _>("User").as_deref(), Some("root"));
    let rows: Vec<mysql_async::Row> = c.query("SHOW LOAD FROM ld").await.expect("show load");
    assert_eq!(rows.len(), 2);
    assert!(
        rows.iter()
            .all(|r| r.get::<String, _>("State").as_deref() == Some("FINISHED"))
    );
    assert!(
        rows.iter()
            .all(|r| r.get::<String, _>("Type").as_deref() == Some("STREAM_LOAD"))
    );
    // Credentials and names are checked.
    let (code, body) = curl(&["-u", "root:wrong", "-T", &csv, &f.fe_url("t/_stream_load")]);
    assert_eq!(code, 401, "{body}");
    let (code, body) = curl(&["-u", "root:wrong", "-T", &csv, &f.be_url("t/_stream_load")]);
    assert_eq!(code, 401, "{body}");
    let (_, body) = curl(&[
        "--location-trusted",
        "-u",
        "root:",
        "-T",
        &csv,
        &f.fe_url("nope/_stream_load"),
    ]);
    assert_eq!(json_field(&body, "Status"), "Fail");
    assert!(body.contains("unknown table"), "{body}");
    let (_, body) = curl(&["-u", "root:", "-T", &csv, &f.be_url("nope/_stream_load")]);
    assert_eq!(json_field(&body, "Status"), "Fail");
    assert!(body.contains("unknown table"), "{body}");
}

#[tokio::test]
async fn data_quality_and_error_log() {
    let f = fixture().await;
    let bad = f.file(
        "b.csv",
        "2026-01-05,4,dan,1\n2026-01-06,5\n2026-05-01,6,x,1\n2026-01-07,7,waytoolongname,1\n",
    );
    // Default max_filter_ratio is 0: the whole load fails, nothing is visible.
    let body = f.load(&bad, &["label:q1", "column_separator:,"]);
    assert_eq!(json_field(&body, "Status"), "Fail");
    assert_eq!(
        json_field(&body, "Message"),
        "[DATA_QUALITY_ERROR]too many filtered rows"
    );
    assert_eq!(json_field(&body, "NumberFilteredRows"), 3);
    let url = json_field(&body, "ErrorURL")
        .as_str()
        .expect("ErrorURL")
        .to_string();
    let (code, log) = curl(&[&url]);
    assert_eq!(code, 200);
    assert!(log.contains("actual column number in csv file is less than schema column number. actual number: 2, schema column number: 4"), "{log}");
    assert!(log.contains("no partition for this tuple"), "{log}");
    assert!(log.contains("too long"), "{log}");
    assert!(log.contains("2026-01-06,5"), "{log}");
    assert_eq!(f.count().await, 0);
    // The aborted load's label can be reused; under the ratio the good rows load.
    let body = f.load(
        &bad,
        &["label:q1", "column_separator:,", "max_filter_ratio:0.8"],
    );
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    assert_eq!(json_field(&body, "NumberLoadedRows"), 1);
    assert_eq!(json_field(&body, "NumberFilteredRows"), 3);
    assert!(json_field(&body, "ErrorURL").is_string());
    assert_eq!(f.count().await, 1);
    // strict_mode turns a failed conversion into a filtered row instead of NULL.
    let conv = f.file("c.csv", "2026-01-08,8,h,notanumber\n");
    let body = f.load(&conv, &["column_separator:,"]);
    assert_eq!(json_field(&body, "NumberLoadedRows"), 1, "{body}");
    let body = f.load(&conv, &["column_separator:,", "strict_mode:true"]);
    assert_eq!(json_field(&body, "Status"), "Fail", "{body}");
    // The partitions header: rows of other partitions are filtered.
    let two = f.file("d.csv", "2026-01-20,20,p1row,1\n2026-02-20,21,p2row,1\n");
    let body = f.load(
        &two,
        &[
            "column_separator:,",
            "partitions:p2",
            "max_filter_ratio:0.5",
        ],
    );
    assert_eq!(json_field(&body, "NumberLoadedRows"), 1, "{body}");
    assert_eq!(json_field(&body, "NumberFilteredRows"), 1, "{body}");
    let body = f.load(&two, &["column_separator:,", "partitions:p9"]);
    assert!(body.contains("unknown partition: p9"), "{body}");
    // enclose / escape: separators and line breaks inside quoted fields are data.
    let quoted = f.file(
        "q.csv",
        "2026-01-21,22,\"a,b\",1\n2026-01-22,23,\"x\ny\",2\n",
    );
    let body = f.load(&quoted, &["column_separator:,", "enclose:\"", "escape:\\"]);
    assert_eq!(json_field(&body, "NumberLoadedRows"), 2, "{body}");
    // Headers not supported yet are refused clearly, and load nothing.
    let body = f.load(&conv, &["column_separator:,", "merge_type:MERGE"]);
    assert_eq!(json_field(&body, "Status"), "Fail");
    assert!(
        json_field(&body, "Message")
            .as_str()
            .is_some_and(|m| m.contains("not supported yet")),
        "{body}"
    );
    assert_eq!(f.count().await, 5);
    let mut c = Conn::new(f.server.opts()).await.expect("connect");
    let names: Vec<String> = c
        .query("SELECT name FROM ld.t WHERE id IN (22, 23) ORDER BY id")
        .await
        .expect("names");
    assert_eq!(names, vec!["a,b".to_string(), "x\ny".to_string()]);
}

#[tokio::test]
async fn two_phase_commit_survives_a_crash() {
    let mut f = fixture().await;
    let csv = f.file("a.csv", GOOD);
    let body = f.load(
        &csv,
        &["label:tpc1", "column_separator:,", "two_phase_commit:true"],
    );
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    assert_eq!(json_field(&body, "TwoPhaseCommit"), "true");
    let txn = json_field(&body, "TxnId").as_i64().expect("txn");
    assert_eq!(f.count().await, 0, "pre-committed data is invisible");
    let body2 = f.load(
        &csv,
        &["label:tpc2", "column_separator:,", "two_phase_commit:true"],
    );
    let txn2 = json_field(&body2, "TxnId").as_i64().expect("txn2");
    // kill -9 and restart: both stay pre-committed.
    f.server.crash_and_restart().await.expect("restart");
    assert_eq!(f.count().await, 0);
    let (_, r) = curl(&[
        "-X",
        "PUT",
        "-u",
        "root:",
        "-H",
        "txn_operation:commit",
        "-H",
        &format!("txn_id:{txn}"),
        &f.fe_url("_stream_load_2pc"),
    ]);
    assert_eq!(json_field(&r, "status"), "Success", "{r}");
    assert_eq!(
        json_field(&r, "msg"),
        format!("transaction [{txn}] commit successfully.").as_str()
    );
    assert_eq!(f.count().await, 3);
    let (_, r) = curl(&[
        "-X",
        "PUT",
        "-u",
        "root:",
        "-H",
        "txn_operation:abort",
        "-H",
        "label:tpc2",
        &f.be_url("t/_stream_load_2pc"),
    ]);
    assert_eq!(json_field(&r, "status"), "Success", "{r}");
    assert_eq!(json_field(&r, "msg"), "label [tpc2] abort successfully.");
    assert_eq!(f.count().await, 3);
    // Operations on finished transactions are refused.
    let (_, r) = curl(&[
        "-X",
        "PUT",
        "-u",
        "root:",
        "-H",
        "txn_operation:commit",
        "-H",
        &format!("txn_id:{txn2}"),
        &f.fe_url("_stream_load_2pc"),
    ]);
    assert_eq!(json_field(&r, "status"), "Fail");
    assert!(r.contains("is already aborted, not pre-committed"), "{r}");
    let (_, r) = curl(&[
        "-X",
        "PUT",
        "-u",
        "root:",
        "-H",
        "txn_operation:merge",
        "-H",
        "txn_id:1",
        &f.fe_url("_stream_load_2pc"),
    ]);
    assert!(
        r.contains("transaction operation should be 'commit' or 'abort'"),
        "{r}"
    );
    let (_, r) = curl(&[
        "-X",
        "PUT",
        "-u",
        "root:",
        "-H",
        "txn_operation:commit",
        "-H",
        "txn_id:abc",
        &f.fe_url("_stream_load_2pc"),
    ]);
    assert!(r.contains("convert txn_id [abc] failed"), "{r}");
}

#[tokio::test]
async fn json_formats_and_columns() {
    let f = fixture().await;
    let arr = f.file(
        "a.json",
        r#"[{"day":"2026-01-10","id":9,"name":"f","amount":1.5},{"day":"2026-01-11","ID":10}]"#,
    );
    let body = f.load(&arr, &["format:json", "strip_outer_array:true"]);
    assert_eq!(json_field(&body, "NumberLoadedRows"), 2, "{body}");
    let body = f.load(&arr, &["format:json"]);
    assert_eq!(json_field(&body, "Status"), "Fail");
    assert!(body.contains("strip_outer_array"), "{body}");
    let lines = f.file(
        "b.json",
        "{\"day\":\"2026-02-12\",\"id\":11,\"name\":\"g\"}\n{\"day\":\"2026-01-13\",\"id\":12}\n",
    );
    let body = f.load(
        &lines,
        &["format:json", "read_json_by_line:true", "columns: id, day"],
    );
    assert_eq!(json_field(&body, "NumberLoadedRows"), 2, "{body}");
    // csv_with_names skips the header line; columns reorders source fields.
    let csv = f.file("c.csv", "id|day\n13|2026-01-14\n");
    let body = f.load(
        &csv,
        &[
            "format:csv_with_names",
            "column_separator:|",
            "columns:id,day",
        ],
    );
    assert_eq!(json_field(&body, "NumberLoadedRows"), 1, "{body}");
    // json_root picks the rows out of an envelope; jsonpaths maps nested
    // fields to the columns named in `columns`, in order.
    let nested = f.file(
        "d.json",
        r#"{"meta": 1, "data": [{"k": 14, "when": {"d": "2026-01-15"}, "who": ["h", "x"]}]}"#,
    );
    let body = f.load(
        &nested,
        &[
            "format:json",
            "strip_outer_array:true",
            "json_root:$.data",
            r#"jsonpaths:["$.k", "$.when.d", "$.who[0]"]"#,
            "columns:id,day,name",
        ],
    );
    assert_eq!(json_field(&body, "NumberLoadedRows"), 1, "{body}");
    let body = f.load(&nested, &["format:json", "jsonpaths:$.k"]);
    assert_eq!(json_field(&body, "Status"), "Fail");
    assert!(body.contains("Invalid jsonpaths"), "{body}");
    let mut c = Conn::new(f.server.opts()).await.expect("connect");
    let rows: Vec<(i32, Option<String>, Option<String>)> = c
        .query("SELECT id, name, CAST(amount AS CHAR) FROM ld.t ORDER BY id")
        .await
        .expect("rows");
    assert_eq!(
        rows,
        vec![
            (9, Some("f".into()), Some("1.50".into())),
            (10, None, None),
            (11, None, None),
            (12, None, None),
            (13, None, None),
            (14, Some("h".into()), None)
        ]
    );
}

#[tokio::test]
async fn client_disconnect_mid_body_leaves_nothing() {
    use tokio::io::AsyncWriteExt;
    let f = fixture().await;
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", f.server.be_http_port))
        .await
        .expect("tcp");
    let head = "PUT /api/ld/t/_stream_load HTTP/1.1\r\nHost: x\r\nAuthorization: Basic cm9vdDo=\r\n\
                label: cut1\r\ncolumn_separator: ,\r\nContent-Length: 10000000\r\n\r\n";
    s.write_all(head.as_bytes()).await.expect("head");
    let rows = "2026-01-02,1,alice,10.5\n".repeat(20_000);
    s.write_all(rows.as_bytes()).await.expect("body");
    s.flush().await.expect("flush");
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(s);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(f.count().await, 0);
    // The label of the failed load is free again.
    let csv = f.file("a.csv", GOOD);
    let body = f.load(&csv, &["label:cut1", "column_separator:,"]);
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    assert_eq!(f.count().await, 3);
}

#[tokio::test]
async fn columns_expressions_and_where() {
    let f = fixture().await;
    let csv = f.file("x.csv", GOOD);
    // The issue's example: a source column `tmp` feeding `amount = tmp * 100`,
    // a text function, and a where filter whose rows count as unselected.
    let body = f.load(
        &csv,
        &[
            "column_separator:,",
            "columns: day, id, tmp_name, tmp, name = upper(tmp_name), amount = tmp * 100",
            "where: id > 1",
        ],
    );
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    assert_eq!(json_field(&body, "NumberTotalRows"), 3);
    assert_eq!(json_field(&body, "NumberLoadedRows"), 2);
    assert_eq!(json_field(&body, "NumberUnselectedRows"), 1);
    assert_eq!(json_field(&body, "NumberFilteredRows"), 0);
    let mut c = Conn::new(f.server.opts()).await.expect("connect");
    let rows: Vec<(i32, String, String)> = c
        .query("SELECT id, name, CAST(amount AS CHAR) FROM ld.t ORDER BY id")
        .await
        .expect("rows");
    assert_eq!(
        rows,
        vec![
            (2, "BOB".into(), "300.00".into()),
            (3, "CAROL".into(), "125.00".into())
        ]
    );
    // Unselected rows do not count against max_filter_ratio; a where that drops
    // everything still succeeds.
    let body = f.load(&csv, &["column_separator:,", "where: id > 100"]);
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    assert_eq!(json_field(&body, "NumberUnselectedRows"), 3);
    // Expressions that do not plan are reported, and the label is not used up.
    let body = f.load(
        &csv,
        &[
            "label:expr1",
            "column_separator:,",
            "columns: day, id, x, y, amount = nosuchfn(y)",
        ],
    );
    assert_eq!(json_field(&body, "Status"), "Fail");
    assert!(body.contains("nosuchfn"), "{body}");
    let body = f.load(&csv, &["label:expr1", "column_separator:,"]);
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    assert_eq!(f.count().await, 5);
    // Header expressions get Doris' functions, as queries do: regexp_replace
    // replaces every match (DataFusion's replaced the first), and a function
    // whose semantics differ is refused by name.
    let body = f.load(
        &csv,
        &[
            "column_separator:,",
            "columns: day, id, tmp_name, tmp, name = regexp_replace(upper(tmp_name), '[AEIOU]', '_'), amount = tmp",
            "where: id = 1",
        ],
    );
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    let mut c = Conn::new(f.server.opts()).await.expect("connect");
    let names: Vec<String> = c
        .query("SELECT name FROM ld.t WHERE name LIKE '%\\_%' ORDER BY name")
        .await
        .expect("names");
    assert_eq!(names, vec!["_L_C_".to_string()]);
    let body = f.load(
        &csv,
        &[
            "column_separator:,",
            "columns: day, id, x, y, name = array_slice(x, 1, 2)",
        ],
    );
    assert_eq!(json_field(&body, "Status"), "Fail");
    assert!(
        body.contains("Function 'array_slice' is not supported"),
        "{body}"
    );
}

#[tokio::test]
async fn compressed_bodies() {
    let f = fixture().await;
    let plain = f.file("p.csv", GOOD);
    let gz = f.dir.path().join("p.csv.gz");
    let out = std::process::Command::new("gzip")
        .args(["-c", &plain])
        .output()
        .expect("gzip");
    std::fs::write(&gz, out.stdout).expect("write gz");
    let body = f.load(
        &gz.to_string_lossy(),
        &["column_separator:,", "compress_type:gz"],
    );
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    assert_eq!(json_field(&body, "NumberLoadedRows"), 3);
    // A body that is not what compress_type says fails and loads nothing.
    let body = f.load(&plain, &["column_separator:,", "compress_type:gz"]);
    assert_eq!(json_field(&body, "Status"), "Fail", "{body}");
    let body = f.load(&plain, &["format:json", "compress_type:gz"]);
    assert!(
        body.contains("compress data of JSON format is not supported."),
        "{body}"
    );
    assert_eq!(f.count().await, 3);
}

#[tokio::test]
async fn labels_expire_after_label_keep_max_second() {
    let f = fixture_with(&[
        "--label-keep-max-second",
        "1",
        "--label-clean-interval-second",
        "1",
    ])
    .await;
    let csv = f.file("a.csv", GOOD);
    let body = f.load(&csv, &["label:short", "column_separator:,"]);
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    let body = f.load(&csv, &["label:short", "column_separator:,"]);
    assert_eq!(
        json_field(&body, "Status"),
        "Label Already Exists",
        "{body}"
    );
    // Once cleaned, the label can be used again.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let body = f.load(&csv, &["label:short", "column_separator:,"]);
        if json_field(&body, "Status") == "Success" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{body}");
    }
    assert_eq!(f.count().await, 6);
}

/// Peak resident memory of a process, kB.
fn vm_hwm_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[tokio::test]
async fn expect_continue_and_a_large_body_stream_in_bounded_memory() {
    let f = fixture().await;
    let csv = f.file("a.csv", GOOD);
    // curl waits for the server's 100 Continue before it sends the body.
    let out = std::process::Command::new("curl")
        .args([
            "-sv",
            "--location-trusted",
            "-u",
            "root:",
            "-H",
            "Expect: 100-continue",
            "-H",
            "column_separator:,",
            "-T",
            &csv,
            &f.fe_url("t/_stream_load"),
        ])
        .output()
        .expect("curl");
    let verbose = String::from_utf8_lossy(&out.stderr);
    assert!(verbose.contains("307"), "{verbose}");
    assert!(verbose.contains("100 Continue"), "{verbose}");
    let body = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(json_field(&body, "NumberLoadedRows"), 3, "{body}");

    // A 256 MB body, generated as it is sent (chunked), passes through the
    // backend without being held: its lines are skipped (skip_lines), the
    // last three load, and the server's peak memory barely moves.
    let pid = f.server.pid().expect("pid");
    let before = vm_hwm_kb(pid);
    let lines = 256 * 1024 * 1024 / 64;
    let pipeline = format!(
        "( yes 'skipped line of sixty-four bytes, padded with dots.............' | head -n {lines}; \
           printf '{good}' ) | curl -s --location-trusted -u root: -H 'column_separator:,' \
           -H 'skip_lines:{lines}' -T - {url}",
        good = GOOD.replace('\n', "\\n"),
        url = f.fe_url("t/_stream_load"),
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &pipeline])
        .output()
        .expect("bash");
    let body = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    assert_eq!(json_field(&body, "NumberLoadedRows"), 3, "{body}");
    assert!(
        json_field(&body, "LoadBytes").as_u64().unwrap_or(0) > 256 * 1024 * 1024,
        "{body}"
    );
    let after = vm_hwm_kb(pid);
    assert!(
        after.saturating_sub(before) < 64 * 1024,
        "peak memory grew from {before} kB to {after} kB for a 256 MB body"
    );
    assert_eq!(f.count().await, 6);
}

/// kill -9 while a large load is being written, at several points (in a
/// debug build the load takes 2-4 s, so the first kills land while it is
/// parsed and written, the last after it committed): after the restart the
/// table holds all of the load or none of it (never part), earlier data is
/// intact, and no temporary segment file is left behind.
#[tokio::test]
async fn kill_during_a_load_leaves_all_or_nothing() {
    let mut f = fixture().await;
    let first = f.file("first.csv", GOOD);
    f.load(&first, &["label:before", "column_separator:,"]);
    assert_eq!(f.count().await, 3);
    let n = 300_000;
    let mut big = String::with_capacity(n * 32);
    for i in 0..n {
        big.push_str(&format!(
            "2026-01-{:02},{},n{},{}.5\n",
            i % 28 + 1,
            i + 10,
            i % 97,
            i % 1000
        ));
    }
    let big = f.file("big.csv", &big);
    let mut expected = 3;
    for (round, delay_ms) in [200u64, 800, 2000, 4000].into_iter().enumerate() {
        let url = f.fe_url("t/_stream_load");
        let label = format!("label:crash{round}");
        let file = big.clone();
        let load = std::thread::spawn(move || {
            curl(&[
                "--location-trusted",
                "-u",
                "root:",
                "-H",
                &label,
                "-H",
                "column_separator:,",
                "-T",
                &file,
                &url,
            ])
        });
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        f.server.crash_and_restart().await.expect("restart");
        let (_, body) = load.join().expect("curl thread");
        let acknowledged =
            body.contains("\"Status\": \"Success\"") || body.contains("\"Status\":\"Success\"");
        let count = f.count().await;
        if acknowledged {
            expected += n as i64;
        }
        assert!(
            count == expected || (!acknowledged && count == expected + n as i64),
            "round {round} ({delay_ms} ms): {count} rows, expected {expected} (acknowledged: {acknowledged}); {body}"
        );
        expected = count;
        let mut tmp = vec![];
        let mut stack = vec![f.server.data_dir().join("be")];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "tmp") {
                    tmp.push(p);
                }
            }
        }
        assert!(
            tmp.is_empty(),
            "round {round}: temporary files left: {tmp:?}"
        );
    }
}

/// Stream Load into AGGREGATE and UNIQUE tables: equal keys in one file
/// combine in file order, and loads combine with each other.
#[tokio::test]
async fn aggregate_and_unique_tables_combine_loaded_rows() {
    let f = fixture().await;
    let mut c = Conn::new(f.server.opts()).await.expect("connect");
    c.query_drop(
        "CREATE TABLE ld.agg (id INT NOT NULL, total DECIMAL(10,2) SUM, last VARCHAR(8) REPLACE, \
         hi INT MAX) AGGREGATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 2",
    )
    .await
    .expect("agg table");
    c.query_drop(
        "CREATE TABLE ld.uniq (id INT NOT NULL, last VARCHAR(8), hi INT) UNIQUE KEY(id) \
         DISTRIBUTED BY HASH(id) BUCKETS 2",
    )
    .await
    .expect("unique table");
    let first = f.file("a.csv", "1,1.50,a,5\n2,2.00,b,1\n1,1.25,c,3\n1,0.25,d,9\n");
    let second = f.file("b.csv", "2,3.00,e,0\n3,1.00,f,7\n");
    for file in [&first, &second] {
        let body = f
            .server
            .stream_load("ld", "agg", file, &["column_separator:,"]);
        assert_eq!(json_field(&body, "Status"), "Success", "{body}");
        let body = f.server.stream_load(
            "ld",
            "uniq",
            file,
            &["column_separator:,", "columns: id, tmp, last, hi"],
        );
        assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    }
    let agg: Vec<(i32, String, String, i32)> = c
        .query("SELECT id, CAST(total AS CHAR), last, hi FROM ld.agg ORDER BY id")
        .await
        .expect("agg rows");
    assert_eq!(
        agg,
        vec![
            (1, "3.00".into(), "d".into(), 9),
            (2, "5.00".into(), "e".into(), 1),
            (3, "1.00".into(), "f".into(), 7),
        ]
    );
    let uniq: Vec<(i32, String, i32)> = c
        .query("SELECT id, last, hi FROM ld.uniq ORDER BY id")
        .await
        .expect("unique rows");
    assert_eq!(
        uniq,
        vec![(1, "d".into(), 9), (2, "e".into(), 0), (3, "f".into(), 7)]
    );
    // merge_type DELETE: the file's keys are deleted (the merge-on-write
    // UNIQUE table; values are ignored, unknown keys are no-ops), and a
    // later load brings a key back.
    let deletes = f.file("d.csv", "1,x,0\n3,y,0\n8,z,0\n");
    let body = f.server.stream_load(
        "ld",
        "uniq",
        &deletes,
        &["column_separator:,", "merge_type: DELETE"],
    );
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    assert_eq!(json_field(&body, "NumberLoadedRows"), 3, "{body}");
    let uniq: Vec<(i32, String, i32)> = c
        .query("SELECT id, last, hi FROM ld.uniq ORDER BY id")
        .await
        .expect("rows after deletes");
    assert_eq!(uniq, vec![(2, "e".into(), 0)]);
    let again = f.file("e.csv", "3,g,4\n");
    let body = f
        .server
        .stream_load("ld", "uniq", &again, &["column_separator:,"]);
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    let uniq: Vec<(i32, String, i32)> = c
        .query("SELECT id, last, hi FROM ld.uniq ORDER BY id")
        .await
        .expect("rows after reload");
    assert_eq!(uniq, vec![(2, "e".into(), 0), (3, "g".into(), 4)]);
    // A delete file needs only the keys, even with NOT NULL value columns.
    c.query_drop(
        "CREATE TABLE ld.nn (id INT NOT NULL, name VARCHAR(8) NOT NULL, d DATE NOT NULL) \
         UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1",
    )
    .await
    .expect("not-null table");
    let full = f.file("nn.csv", "1,a,2026-01-01\n2,b,2026-01-02\n");
    let body = f
        .server
        .stream_load("ld", "nn", &full, &["column_separator:,"]);
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    let keys = f.file("nnk.csv", "1\n");
    let body = f
        .server
        .stream_load("ld", "nn", &keys, &["columns: id", "merge_type: DELETE"]);
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    let left: Vec<(i32, String)> = c
        .query("SELECT id, name FROM ld.nn ORDER BY id")
        .await
        .expect("rows after key-only delete");
    assert_eq!(left, vec![(2, "b".into())]);
    // Other models have no delete bitmaps: a clear error, nothing loaded.
    let body = f.server.stream_load(
        "ld",
        "agg",
        &first,
        &["column_separator:,", "merge_type: DELETE"],
    );
    assert_eq!(json_field(&body, "Status"), "Fail", "{body}");
    assert!(
        json_field(&body, "Message")
            .to_string()
            .contains("merge_on_write"),
        "{body}"
    );
    let body = f.server.stream_load(
        "ld",
        "uniq",
        &deletes,
        &["column_separator:,", "merge_type: MERGE"],
    );
    assert_eq!(json_field(&body, "Status"), "Fail", "{body}");
    assert!(
        json_field(&body, "Message")
            .to_string()
            .contains("not supported yet"),
        "{body}"
    );
    // partial_columns: the columns header's columns change, the others keep
    // the key's values; a new key takes NULL for the nullable rest.
    let partial = f.file("p.csv", "3,40\n5,50\n");
    let body = f.server.stream_load(
        "ld",
        "uniq",
        &partial,
        &[
            "column_separator:,",
            "partial_columns: true",
            "columns: id, hi",
        ],
    );
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    let uniq: Vec<(i32, Option<String>, i32)> = c
        .query("SELECT id, last, hi FROM ld.uniq ORDER BY id")
        .await
        .expect("rows after partial update");
    assert_eq!(
        uniq,
        vec![
            (2, Some("e".into()), 0),
            (3, Some("g".into()), 40),
            (5, None, 50)
        ]
    );
}

#[tokio::test]
async fn bitmap_and_hll_columns_load_through_the_columns_header() {
    let f = fixture().await;
    let mut c = Conn::new(f.server.opts()).await.expect("connect");
    c.query_drop(
        "CREATE TABLE ld.uv (dt DATE NOT NULL, page VARCHAR(8) NOT NULL, pv BIGINT SUM NOT NULL, \
         uv BITMAP BITMAP_UNION NOT NULL, users HLL HLL_UNION NOT NULL) AGGREGATE KEY(dt, page) \
         DISTRIBUTED BY HASH(page) BUCKETS 2",
    )
    .await
    .expect("table");
    // Doris' form: the file's user id feeds pv, the bitmap and the sketch.
    let headers = [
        "column_separator:,",
        "columns: dt, page, user_id, pv = 1, uv = to_bitmap(user_id), users = hll_hash(user_id)",
    ];
    let first = f.file(
        "a.csv",
        "2026-08-01,home,7\n2026-08-01,home,7\n2026-08-01,home,8\n2026-08-01,cart,9\n",
    );
    let second = f.file("b.csv", "2026-08-01,home,10\n2026-08-02,home,7\n");
    for file in [&first, &second] {
        let body = f.server.stream_load("ld", "uv", file, &headers);
        assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    }
    let rows: Vec<(String, String, i64, String, i64, i64)> = c
        .query(
            "SELECT CAST(dt AS CHAR), page, pv, bitmap_to_string(uv), bitmap_count(uv), \
             hll_cardinality(users) FROM ld.uv ORDER BY dt, page",
        )
        .await
        .expect("rows");
    assert_eq!(
        rows,
        vec![
            ("2026-08-01".into(), "cart".into(), 1, "9".into(), 1, 1),
            ("2026-08-01".into(), "home".into(), 4, "7,8,10".into(), 3, 3),
            ("2026-08-02".into(), "home".into(), 1, "7".into(), 1, 1),
        ]
    );
    let (bm, hll): (i64, i64) = c
        .query_first("SELECT bitmap_union_count(uv), hll_union_agg(users) FROM ld.uv")
        .await
        .expect("union")
        .expect("a row");
    assert_eq!((bm, hll), (4, 4));
    // A user id that is not an unsigned integer makes a NULL bitmap, which a
    // NOT NULL column filters; raw text for a BITMAP column is not a bitmap.
    let bad = f.file("c.csv", "2026-08-03,home,-5\n2026-08-03,home,11\n");
    let body = f.server.stream_load(
        "ld",
        "uv",
        &bad,
        &[headers[0], headers[1], "max_filter_ratio: 0.5"],
    );
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    assert_eq!(json_field(&body, "NumberLoadedRows"), 1, "{body}");
    assert_eq!(json_field(&body, "NumberFilteredRows"), 1, "{body}");
    let raw = f.file("d.csv", "2026-08-04,home,1,5,5\n");
    let body = f
        .server
        .stream_load("ld", "uv", &raw, &["column_separator:,"]);
    assert_eq!(json_field(&body, "Status"), "Fail", "{body}");
    let url = json_field(&body, "ErrorURL");
    let url = url.as_str().expect("error url");
    let (_, log) = curl(&["-s", url]);
    assert!(
        log.contains(
            "column_name[uv] is BITMAP: its value must be made in the columns header by to_bitmap()"
        ),
        "{log}"
    );
}

/// `DATETIME(p)` values are stored with `p` fractional digits, rounded half
/// up, by Stream Load as by INSERT; the rounding happens before routing, so
/// 23:59:59.6 on a partition's last day lands in the next partition.
#[tokio::test]
async fn datetime_precision_is_kept_by_stream_load() {
    let f = fixture().await;
    let mut c = Conn::new(f.server.opts()).await.expect("connect");
    c.query_drop(
        "CREATE TABLE ld.ts (id INT NOT NULL, at DATETIME NOT NULL, at3 DATETIME(3)) DUPLICATE KEY(id, at) \
         PARTITION BY RANGE(at) (PARTITION p1 VALUES LESS THAN ('2026-02-01 00:00:00'), \
         PARTITION p2 VALUES LESS THAN ('2026-03-01 00:00:00')) DISTRIBUTED BY HASH(id) BUCKETS 1",
    )
    .await
    .expect("table");
    let file = f.file(
        "ts.csv",
        "1,2026-01-02 10:00:00.4,2026-01-02 10:00:00.1234\n2,2026-01-31 23:59:59.6,2026-01-31 23:59:59.9996\n",
    );
    let body = f
        .server
        .stream_load("ld", "ts", &file, &["column_separator:,"]);
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    let rows: Vec<(i32, String, String)> = c
        .query(
            "SELECT id, date_format(at, '%Y-%m-%d %H:%i:%s.%f'), date_format(at3, '%Y-%m-%d %H:%i:%s.%f') \
             FROM ld.ts ORDER BY id",
        )
        .await
        .expect("select");
    assert_eq!(
        rows,
        vec![
            (
                1,
                "2026-01-02 10:00:00.000000".into(),
                "2026-01-02 10:00:00.123000".into()
            ),
            (
                2,
                "2026-02-01 00:00:00.000000".into(),
                "2026-02-01 00:00:00.000000".into()
            ),
        ]
    );
    let in_p2: Option<i64> = c
        .query_first("SELECT count(*) FROM ld.ts PARTITION (p2)")
        .await
        .expect("partition count");
    assert_eq!(in_p2, Some(1));
}

/// `line_delimiter`, `trim_double_quotes` and `comment` have Doris' effect:
/// lines end where the header says, outer quotes go, the comment comes back.
#[tokio::test]
async fn line_delimiter_trim_double_quotes_and_comment() {
    let f = fixture().await;
    let csv = f.file(
        "quoted.csv",
        "2026-01-02,41,\"quoted\",1|2026-01-03,42,plain,2|",
    );
    let body = f.load(
        &csv,
        &[
            "column_separator:,",
            "line_delimiter:|",
            "trim_double_quotes:true",
            "comment:nightly",
        ],
    );
    assert_eq!(json_field(&body, "Status"), "Success", "{body}");
    assert_eq!(json_field(&body, "NumberLoadedRows"), 2, "{body}");
    assert_eq!(json_field(&body, "Comment"), "nightly", "{body}");
    let names: Vec<String> = f
        .conn()
        .await
        .query("SELECT name FROM ld.t WHERE id IN (41, 42) ORDER BY id")
        .await
        .expect("names");
    assert_eq!(names, vec!["quoted".to_string(), "plain".to_string()]);
}

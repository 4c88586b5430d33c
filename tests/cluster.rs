//! A cluster of separate processes on loopback: `tethys fe` and `tethys be`,
//! each its own data directory; backends joined with ALTER SYSTEM, followed
//! by heartbeats, and tolerated when dead. Every test stops only the
//! processes it started.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use tethys_sql_tests::cluster::{BackendProcess, FrontendProcess, backends, cluster, wait_alive};
use tethys_sql_tests::{curl, query_rows, run_all};

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tethys"))
}

/// Stream Loads `csv` (k,v lines) into d.`table` through the FE; the
/// answer's body.
fn stream_load(fe: &FrontendProcess, table: &str, csv: String) -> String {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("rows.csv");
    std::fs::write(&file, csv).expect("write");
    let (code, body) = curl(&[
        "--location-trusted",
        "-u",
        "root:",
        "-H",
        "column_separator:,",
        "-T",
        &file.display().to_string(),
        &format!(
            "http://127.0.0.1:{}/api/d/{table}/_stream_load",
            fe.http_port
        ),
    ]);
    assert_eq!(code, 200, "{body}");
    body
}

/// Loads keys 0..100 into d.t by INSERT and 100..150 by Stream Load
/// through the FE (redirected to an alive backend, which reaches the FE it
/// learnt from the heartbeat).
async fn load_150_rows(c: &mut Conn, fe: &FrontendProcess) {
    let values: Vec<String> = (0..100).map(|k| format!("({k}, 'v{k}')")).collect();
    run_all(
        c,
        &[&format!("INSERT INTO d.t VALUES {}", values.join(", "))],
    )
    .await;
    let body = stream_load(fe, "t", (100..150).map(|k| format!("{k},s{k}\n")).collect());
    assert!(body.contains("\"Success\""), "{body}");
    assert_eq!(count(c, "SELECT count(*) FROM d.t").await, 150);
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
    // `tethys fe` defaults to Doris' 3 replicas: two backends are too few.
    let e = c.query_drop(table).await.expect_err("3 replicas");
    assert!(
        e.to_string()
            .contains("Create 3 replicas, but only 2 backend(s) are available"),
        "{e}"
    );
    let table = format!("{table} PROPERTIES (\"replication_num\" = \"1\")");
    let table = table.as_str();

    // Four tablets, two on each backend.
    run_all(&mut c, &[table]).await;
    let rows = backends(&mut c).await;
    assert!(rows.iter().all(|b| b["TabletNum"] == "2"), "{rows:?}");
    load_150_rows(&mut c, &fe).await;
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
            "CREATE TABLE d.u (k INT) DUPLICATE KEY(k) DISTRIBUTED BY HASH(k) BUCKETS 3 \
             PROPERTIES (\"replication_num\" = \"1\")",
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
    // d.u's 3 tablets all went to be1 while be2 was down: the tablet
    // scheduler moves replicas until the two differ by at most one.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n: Vec<i64> = backends(&mut c)
            .await
            .iter()
            .map(|b| b["TabletNum"].parse().expect("TabletNum"))
            .collect();
        if n.iter().sum::<i64>() == 7 && n.iter().max() <= n.iter().min().map(|m| m + 1).as_ref() {
            break;
        }
        assert!(Instant::now() < deadline, "never balanced: {n:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(count(&mut c, "SELECT count(*) FROM d.t").await, 150);
    assert_eq!(count(&mut c, "SELECT count(*) FROM d.u").await, 3);
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
        refused["ErrMsg"].contains("another cluster's token"),
        "{refused:?}"
    );
    // Calls without the token, or with another, are refused too.
    let pool = tethys_common::backend_client::BackendPool::default();
    let info = tethys_common::backend_client::BackendInfo {
        id: 1,
        host: "127.0.0.1".into(),
        rpc_port: be.port,
        http_port: be.http_port,
    };
    let stats = tethys_proto::TabletStatsRequest { tablet_ids: vec![] };
    let e = pool
        .get(&info)
        .expect("client")
        .tablet_stats(stats.clone())
        .await
        .expect_err("no token");
    assert!(e.to_string().contains("no cluster token"), "{e}");
    pool.token().set("0123456789abcdef").expect("token");
    let e = pool
        .get(&info)
        .expect("client")
        .tablet_stats(stats)
        .await
        .expect_err("wrong token");
    assert!(e.to_string().contains("another cluster's token"), "{e}");
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
    assert!(e.to_string().contains("backend does not exist"), "{e}");
}

/// SHOW TABLETS as (TabletId, BackendId, Version, LstFailedVersion, State).
async fn replicas(c: &mut Conn, table: &str) -> Vec<(String, String, i64, i64, String)> {
    query_rows(c, &format!("SHOW TABLETS FROM {table}"))
        .await
        .into_iter()
        .map(|r| {
            (
                r[0].clone(),
                r[2].clone(),
                r[4].parse().expect("version"),
                r[6].parse().expect("failed version"),
                r[11].clone(),
            )
        })
        .collect()
}

/// Three backends, tablets with three replicas: loads write all three and
/// commit on two; a dead backend's replicas miss versions and are never
/// read; answers stay whole while any replica that has every version is up,
/// and a load acknowledged by two of three survives losing one of the two.
#[tokio::test]
async fn three_replicas_survive_a_dead_backend() {
    let (fe, mut bes, mut c, _) = cluster(&binary(), 3, &[]).await;
    // No replication_num: `tethys fe`'s default of 3.
    run_all(
        &mut c,
        &["CREATE TABLE d.t (k INT, v VARCHAR(20)) UNIQUE KEY(k) \
             DISTRIBUTED BY HASH(k) BUCKETS 4"],
    )
    .await;
    let created = query_rows(&mut c, "SHOW CREATE TABLE d.t").await;
    assert!(
        created[0][1].contains("\"replication_allocation\" = \"tag.location.default: 3\""),
        "{created:?}"
    );
    let reps = replicas(&mut c, "d.t").await;
    assert_eq!(reps.len(), 12, "{reps:?}");
    for tablet in reps.chunks(3) {
        let mut on: Vec<&String> = tablet.iter().map(|r| &r.1).collect();
        on.sort();
        on.dedup();
        assert_eq!(on.len(), 3, "replicas on distinct backends: {tablet:?}");
    }
    let rows = backends(&mut c).await;
    assert!(rows.iter().all(|b| b["TabletNum"] == "4"), "{rows:?}");

    load_150_rows(&mut c, &fe).await;
    assert!(
        replicas(&mut c, "d.t")
            .await
            .iter()
            .all(|r| r.2 == 3 && r.3 == -1)
    );

    // One backend dies: loads commit on the other two; its replicas miss
    // the versions.
    let dead = bes.remove(2);
    let dead_id = {
        let rows = backends(&mut c).await;
        rows.iter()
            .find(|b| b["HeartbeatPort"] == dead.port.to_string())
            .expect("dead backend's row")["BackendId"]
            .clone()
    };
    let mut dead = dead;
    dead.kill();
    // At once, before any heartbeat notices: a fragment sent to the dead
    // backend fails before its first row and the query runs again on the
    // other replicas; a load's writes to it fail and it commits on two.
    for _ in 0..3 {
        assert_eq!(count(&mut c, "SELECT count(*) FROM d.t").await, 150);
    }
    run_all(&mut c, &["INSERT INTO d.t VALUES (150, 'x')"]).await;
    wait_alive(&mut c, dead.port, false).await;
    let status = query_rows(&mut c, "ADMIN SHOW REPLICA STATUS FROM d.t").await;
    assert_eq!(status.len(), 4, "one dead replica per tablet: {status:?}");
    assert!(
        status.iter().all(|r| r[2] == dead_id && r[12] == "DEAD"),
        "{status:?}"
    );
    let ok = query_rows(
        &mut c,
        "ADMIN SHOW REPLICA STATUS FROM d.t WHERE STATUS = 'OK'",
    )
    .await;
    assert_eq!(ok.len(), 8, "{ok:?}");
    run_all(&mut c, &["ADMIN REPAIR TABLE d.t"]).await;
    run_all(
        &mut c,
        &[
            "INSERT INTO d.t VALUES (151, 'x'), (152, 'x')",
            "UPDATE d.t SET v = 'u' WHERE k < 10",
            "DELETE FROM d.t WHERE k >= 140 AND k < 145",
        ],
    )
    .await;
    let body = stream_load(
        &fe,
        "t",
        (200..230).map(|k| format!("{k},z{k}\n")).collect(),
    );
    assert!(body.contains("\"Success\""), "{body}");
    let expect = 150 + 3 - 5 + 30;
    assert_eq!(count(&mut c, "SELECT count(*) FROM d.t").await, expect);
    assert_eq!(
        count(&mut c, "SELECT count(*) FROM d.t WHERE v = 'u'").await,
        10
    );
    for r in replicas(&mut c, "d.t").await {
        if r.1 == dead_id {
            assert_eq!(r.2, 3, "the dead replica stays at its version: {r:?}");
            assert!(r.3 > 3, "and records what it missed: {r:?}");
        } else {
            assert!(r.2 > 3 && r.3 == -1, "{r:?}");
        }
    }

    // Lose one of the two replicas that acknowledged those loads: the other
    // answers them all.
    bes[1].kill();
    wait_alive(&mut c, bes[1].port, false).await;
    assert_eq!(count(&mut c, "SELECT count(*) FROM d.t").await, expect);
    assert_eq!(
        count(&mut c, "SELECT count(*) FROM d.t WHERE k >= 200").await,
        30
    );
    // Only one replica of each tablet is current and alive: a load cannot
    // reach a majority and fails, naming why; nothing of it shows.
    let e = c
        .query_drop("INSERT INTO d.t VALUES (300, 'n')")
        .await
        .expect_err("no majority");
    assert!(
        e.to_string().contains("majority (2) of its 3 replicas"),
        "{e}"
    );
    assert_eq!(count(&mut c, "SELECT count(*) FROM d.t").await, expect);

    // The first dead backend comes back behind: never read while behind,
    // the tablet scheduler clones the versions it missed onto it.
    dead.restart().await.expect("restart");
    wait_alive(&mut c, dead.port, true).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert_eq!(count(&mut c, "SELECT count(*) FROM d.t").await, expect);
        let reps = replicas(&mut c, "d.t").await;
        let top = reps.iter().map(|r| r.2).max().unwrap_or(0);
        if reps.iter().filter(|r| r.1 == dead_id).all(|r| r.2 == top) {
            break;
        }
        assert!(Instant::now() < deadline, "never caught up: {reps:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // The one that served alone goes too: the caught-up replicas answer
    // everything, the merge-on-write updates included.
    bes[0].kill();
    wait_alive(&mut c, bes[0].port, false).await;
    assert_eq!(count(&mut c, "SELECT count(*) FROM d.t").await, expect);
    assert_eq!(
        count(&mut c, "SELECT count(*) FROM d.t WHERE v = 'u'").await,
        10
    );
}

/// A data directory written before replicas (`tests/fixtures/`: by the
/// release build of 3841786, standalone: a partitioned DUPLICATE table, a
/// merge-on-write UNIQUE table, INSERT, UPDATE, DELETE, a labelled Stream
/// Load) opens unchanged: same answers, one replica per tablet at its
/// partition's version, the label still taken, and new loads go on.
#[tokio::test]
async fn a_data_directory_from_before_replicas_opens() {
    let data = tempfile::tempdir().expect("tmp");
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/datadir-3841786.tar.gz"
    );
    let out = std::process::Command::new("tar")
        .args(["-xzf", fixture, "-C"])
        .arg(data.path())
        .output()
        .expect("tar");
    assert!(out.status.success(), "{out:?}");
    // The fixture's labels were written 2026-12-05: kept for a century, not
    // the default 12 hours, so that the label check below holds whenever
    // it runs (it failed once they had expired).
    let server = tethys_sql_tests::TethysServer::start_on(
        &binary(),
        data,
        &["--label-keep-max-second", "3153600000"],
    )
    .await
    .expect("start on the old data directory");
    let mut c = Conn::new(server.opts()).await.expect("connect");
    assert_eq!(count(&mut c, "SELECT count(*) FROM legacy.events").await, 3);
    assert_eq!(
        query_rows(&mut c, "SELECT id, name FROM legacy.users ORDER BY id").await,
        [
            ["1", "ann"],
            ["2", "bo"],
            ["3", "cy"],
            ["10", "x"],
            ["11", "y"]
        ]
        .map(|r| r.map(String::from).to_vec())
        .to_vec()
    );
    let reps = replicas(&mut c, "legacy.users").await;
    assert_eq!(reps.len(), 2, "{reps:?}");
    assert!(
        reps.iter()
            .all(|r| r.2 == 4 && r.3 == -1 && r.4 == "NORMAL"),
        "{reps:?}"
    );
    let body = server.stream_load("legacy", "users", "/dev/null", &["label:legacy_1"]);
    assert!(body.contains("Label Already Exists"), "{body}");
    run_all(
        &mut c,
        &[
            "INSERT INTO legacy.users VALUES (4, 'di')",
            "INSERT INTO legacy.events VALUES ('2024-07-01', 9, 'z')",
        ],
    )
    .await;
    assert_eq!(count(&mut c, "SELECT count(*) FROM legacy.users").await, 6);
    assert_eq!(count(&mut c, "SELECT count(*) FROM legacy.events").await, 4);
    assert!(
        replicas(&mut c, "legacy.users")
            .await
            .iter()
            .all(|r| r.2 == 5)
    );
}

/// Polls SHOW TABLETS FROM d.t (60 s at most) until `ok` holds of it.
async fn wait_replicas(
    c: &mut Conn,
    what: &str,
    ok: impl Fn(&[(String, String, i64, i64, String)]) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let reps = replicas(c, "d.t").await;
        if ok(&reps) {
            return;
        }
        assert!(Instant::now() < deadline, "never {what}: {reps:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// d.t holds keys 0..150, the first 10 updated to 'u'.
async fn check_updated_150(c: &mut Conn) {
    assert_eq!(count(c, "SELECT count(*) FROM d.t").await, 150);
    assert_eq!(count(c, "SELECT count(*) FROM d.t WHERE v = 'u'").await, 10);
    assert_eq!(
        count(c, "SELECT sum(k) FROM d.t").await,
        (0..150).sum::<i64>()
    );
}

/// Replicas per tablet on the backends `on`, holding at least `version`.
fn current_on(
    reps: &[(String, String, i64, i64, String)],
    on: &[String],
    version: i64,
) -> std::collections::BTreeMap<String, usize> {
    let mut n = std::collections::BTreeMap::new();
    for r in reps {
        let e = n.entry(r.0.clone()).or_insert(0);
        if on.contains(&r.1) && r.2 >= version && r.4 == "NORMAL" {
            *e += 1;
        }
    }
    n
}

/// The tablet scheduler: a backend dead past the repair delay has its
/// replicas cloned onto the others (merge-on-write bitmaps and all); when
/// it returns, its replicas are surplus and dropped; DECOMMISSION moves a
/// backend's replicas away and then drops it; the clones answer queries.
#[tokio::test]
async fn replicas_are_repaired_moved_and_dropped() {
    let (fe, mut bes, mut c, ids) =
        cluster(&binary(), 4, &["--tablet-repair-delay-second", "2"]).await;
    run_all(
        &mut c,
        &["CREATE TABLE d.t (k INT, v VARCHAR(20)) UNIQUE KEY(k) \
           DISTRIBUTED BY HASH(k) BUCKETS 4 PROPERTIES (\"replication_num\" = \"3\")"],
    )
    .await;
    load_150_rows(&mut c, &fe).await;
    run_all(&mut c, &["UPDATE d.t SET v = 'u' WHERE k < 10"]).await;
    check_updated_150(&mut c).await;

    // A dies; after the delay each tablet has 3 current replicas on B, C, D.
    bes[0].kill();
    wait_alive(&mut c, bes[0].port, false).await;
    let others = ids[1..].to_vec();
    wait_replicas(&mut c, "repaired", |r| {
        current_on(r, &others, 4).values().all(|n| *n == 3)
    })
    .await;
    check_updated_150(&mut c).await;

    // A returns with its replicas: each tablet has one too many, and the
    // surplus goes (from A or from where the clones went).
    bes[0].restart().await.expect("restart a");
    wait_alive(&mut c, bes[0].port, true).await;
    wait_replicas(&mut c, "surplus dropped", |r| {
        r.len() == 12 && current_on(r, &ids, 4).values().all(|n| *n == 3)
    })
    .await;
    run_all(&mut c, &["INSERT INTO d.t VALUES (1000, 'n')"]).await;
    run_all(&mut c, &["DELETE FROM d.t WHERE k = 1000"]).await;

    // DECOMMISSION B: its replicas move (to A), then it is dropped.
    run_all(
        &mut c,
        &[&format!(
            r#"ALTER SYSTEM DECOMMISSION BACKEND "{}""#,
            bes[1].address()
        )],
    )
    .await;
    let proc = query_rows(&mut c, "SHOW PROC '/backends'").await;
    assert_eq!(proc.len(), 4, "{proc:?}");
    let b_row = backends(&mut c)
        .await
        .into_iter()
        .find(|b| b["BackendId"] == ids[1]);
    assert!(
        b_row.is_none_or(|b| b["SystemDecommissioned"] == "true"),
        "decommissioning shows"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while backends(&mut c)
        .await
        .iter()
        .any(|b| b["BackendId"] == ids[1])
    {
        assert!(Instant::now() < deadline, "B never dropped");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let remaining = vec![ids[0].clone(), ids[2].clone(), ids[3].clone()];
    wait_replicas(&mut c, "moved off B", |r| {
        r.len() == 12 && current_on(r, &remaining, 4).values().all(|n| *n == 3)
    })
    .await;
    // Kill C: A's clones and D answer every tablet.
    bes[2].kill();
    wait_alive(&mut c, bes[2].port, false).await;
    check_updated_150(&mut c).await;
}

/// Waits (20 s at most) until SHOW TRANSACTION shows label `label` of
/// database d in `state`.
async fn wait_txn(c: &mut Conn, label: &str, state: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let sql = format!("SHOW TRANSACTION FROM d WHERE LABEL = '{label}'");
    loop {
        let rows = query_rows(c, &sql).await;
        if rows.iter().any(|r| r.iter().any(|v| v == state)) {
            return;
        }
        assert!(Instant::now() < deadline, "{label} never {state}: {rows:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A backend that restarts had its open loads end with it: the FE aborts
/// their transactions when a heartbeat finds the new start time, so their
/// labels are free again (they would be taken until the load's timeout).
#[tokio::test]
async fn a_restarted_backend_has_its_open_loads_aborted() {
    let (_fe, mut bes, mut c, _) = cluster(&binary(), 1, &["--default-replication-num", "1"]).await;
    run_all(
        &mut c,
        &["CREATE TABLE d.t (k INT, v VARCHAR(20)) DUPLICATE KEY(k) DISTRIBUTED BY HASH(k) BUCKETS 2"],
    )
    .await;
    // A Stream Load straight to the BE whose body never ends.
    let url = format!("http://127.0.0.1:{}/api/d/t/_stream_load", bes[0].http_port);
    let mut load = std::process::Command::new("curl")
        .args([
            "-s",
            "-u",
            "root:",
            "-H",
            "label:open_1",
            "-H",
            "column_separator:,",
        ])
        .args(["-T", "-", &url])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("curl");
    {
        use std::io::Write;
        let stdin = load.stdin.as_mut().expect("stdin");
        stdin.write_all(b"1,a\n2,b\n").expect("write");
        stdin.flush().expect("flush");
    }
    wait_txn(&mut c, "open_1", "PREPARE").await;
    bes[0].kill();
    let _ = load.kill();
    let _ = load.wait();
    bes[0].restart().await.expect("restart");
    wait_alive(&mut c, bes[0].port, true).await;
    wait_txn(&mut c, "open_1", "ABORTED").await;
    let (code, body) = curl(&[
        "-u",
        "root:",
        "-H",
        "label:open_1",
        "-H",
        "column_separator:,",
        "-T",
        "/dev/stdin",
        &url,
    ]);
    assert_eq!(code, 200, "{body}");
    assert!(!body.contains("Label Already Exists"), "{body}");
}

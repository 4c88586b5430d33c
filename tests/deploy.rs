//! Deployment as a user starts it: `docker-compose.yml` (Docker is not on
//! the test machines: the file is read and checked), the image's
//! entrypoint script running a cluster with the built binary, and
//! `tethys playground`. Each test stops only the processes it started.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};
use tethys_sql_tests::{free_ports, query_rows, run_all};

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tethys"))
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// Child processes, stopped when dropped: SIGTERM first (a playground
/// stops its own processes then), SIGKILL after 5 s.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while c.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn opts(port: u16) -> OptsBuilder {
    OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some("root"))
        .prefer_socket(false)
}

/// A connection to the FE on `port`, waiting (60 s at most) for it.
async fn connect(port: u16) -> Conn {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Ok(c)) = tokio::time::timeout(Duration::from_secs(5), Conn::new(opts(port))).await
        {
            return c;
        }
        assert!(Instant::now() < deadline, "no FE on port {port}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits (30 s at most) until SHOW BACKENDS lists `n` backends, all alive.
async fn wait_backends(c: &mut Conn, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let rows = query_rows(c, "SHOW BACKENDS").await;
        if rows.len() == n && rows.iter().all(|r| r[9] == "true") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "backends never all alive: {rows:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The compose file runs one FE (9030 and 8030 published) and three BEs
/// from the image the Dockerfile builds, and registers the three.
#[test]
fn the_compose_file_describes_one_fe_and_three_backends() {
    let check = r#"
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
s = c["services"]
assert set(s) == {"fe", "be1", "be2", "be3", "register"}, sorted(s)
for name, svc in s.items():
    assert svc["image"] == "tethys:latest" and svc["build"] == ".", name
assert s["fe"]["command"] == ["fe"]
assert {"9030:9030", "8030:8030"} <= set(s["fe"]["ports"]), s["fe"]["ports"]
for b in ("be1", "be2", "be3"):
    assert s[b]["command"] == ["be"] and s[b]["hostname"] == b, b
    assert s[b]["volumes"] == [b + "-data:/data"], s[b]
r = s["register"]
assert r["command"] == ["register"] and r["restart"] == "no"
assert r["environment"]["FE_HOST"] == "fe" == s["fe"]["environment"]["FE_HOST"]
assert r["environment"]["BACKENDS"] == "be1:9060,be2:9060,be3:9060"
assert set(r["depends_on"]) == {"fe", "be1", "be2", "be3"}
print("ok")
"#;
    let out = Command::new("python3")
        .args(["-c", check])
        .arg(repo("docker-compose.yml"))
        .output()
        .expect("python3 with PyYAML (scripts/install-test-deps)");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dockerfile = std::fs::read_to_string(repo("Dockerfile")).expect("Dockerfile");
    assert!(dockerfile.contains("cargo build --release --locked --bin tethys"));
    assert!(dockerfile.contains("COPY docker/entrypoint.sh /usr/local/bin/entrypoint.sh"));
    assert!(dockerfile.contains(r#"ENTRYPOINT ["/usr/local/bin/entrypoint.sh"]"#));
}

/// The image's entrypoint, with the built binary: an FE and two BEs in the
/// roles the compose file gives them, registered by `register` (again: no
/// harm).
#[tokio::test]
async fn the_entrypoint_script_runs_a_cluster() {
    let data = tempfile::tempdir().expect("tmp");
    let [q, h, r, b1, h1, b2, h2] = free_ports::<7>().expect("ports");
    let script = repo("docker/entrypoint.sh");
    let run = |role: &str, dir: &str, args: &[String]| {
        Command::new(&script)
            .arg(role)
            .args(args)
            .env("TETHYS_BIN", binary())
            .env("TETHYS_DATA", data.path().join(dir))
            .env("FE_HOST", "127.0.0.1")
            .stdout(Stdio::null())
            .spawn()
            .expect("entrypoint.sh")
    };
    let s = |p: u16| p.to_string();
    let mut children = Children(vec![]);
    children.0.push(run(
        "fe",
        "fe",
        &[
            "--query-port".into(),
            s(q),
            "--http-port".into(),
            s(h),
            "--rpc-port".into(),
            s(r),
            "--heartbeat-interval-second".into(),
            "1".into(),
            "--auto-analyze-interval-second".into(),
            "0".into(),
        ],
    ));
    for (dir, port, http) in [("be1", b1, h1), ("be2", b2, h2)] {
        children.0.push(run(
            "be",
            dir,
            &["--port".into(), s(port), "--http-port".into(), s(http)],
        ));
    }
    let mut c = connect(q).await;
    let register = || {
        let out = Command::new(&script)
            .arg("register")
            .env("TETHYS_BIN", binary())
            .env("FE_HOST", "127.0.0.1")
            .env("FE_QUERY_PORT", s(q))
            .env("BACKENDS", format!("127.0.0.1:{b1},127.0.0.1:{b2}"))
            .output()
            .expect("register");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert!(register().contains(&format!("added backend 127.0.0.1:{b2}")));
    assert!(register().contains("was added before"));
    wait_backends(&mut c, 2).await;
    // `tethys fe` defaults to 3 replicas; two backends hold 2.
    run_all(
        &mut c,
        &[
            "CREATE DATABASE d",
            "CREATE TABLE d.t (k INT) DUPLICATE KEY(k) DISTRIBUTED BY HASH(k) BUCKETS 2 \
             PROPERTIES (\"replication_num\" = \"2\")",
            "INSERT INTO d.t VALUES (1), (2), (3)",
        ],
    )
    .await;
    let n: Option<i64> = c
        .query_first("SELECT count(*) FROM d.t")
        .await
        .expect("count");
    assert_eq!(n, Some(3));
}

/// `tethys playground --backends 2`: an FE and two BEs as processes of
/// their own, added; tables get 2 replicas; SIGTERM stops them all.
#[tokio::test]
async fn the_playground_starts_a_cluster_and_stops_it() {
    let data = tempfile::tempdir().expect("tmp");
    // A block of ports from a random base below Linux's ephemeral range
    // (32768 on), so no port the OS hands another test's server can be in
    // it; all free now.
    let base = loop {
        let b = 20_000 + (rand_u16() % 12_000);
        if (b..b + 16).all(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok()) {
            break b;
        }
    };
    let mut pg = Children(vec![
        Command::new(binary())
            .args(["playground", "--backends", "2", "--base-port"])
            .arg(base.to_string())
            .arg("--data-dir")
            .arg(data.path())
            .stdout(Stdio::null())
            .spawn()
            .expect("playground"),
    ]);
    let mut c = connect(base).await;
    wait_backends(&mut c, 2).await;
    run_all(
        &mut c,
        &[
            "CREATE DATABASE d",
            "CREATE TABLE d.t (k INT) DUPLICATE KEY(k) DISTRIBUTED BY HASH(k) BUCKETS 2",
            "INSERT INTO d.t VALUES (1), (2)",
        ],
    )
    .await;
    let created = query_rows(&mut c, "SHOW CREATE TABLE d.t").await;
    assert!(
        created[0][1].contains("tag.location.default: 2"),
        "{created:?}"
    );
    drop(c);
    let pid = pg.0[0].id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while pg.0[0].try_wait().ok().flatten().is_none() {
        assert!(Instant::now() < deadline, "the playground did not stop");
        std::thread::sleep(Duration::from_millis(100));
    }
    pg.0.clear();
    // Its processes are gone: the ports are free again.
    let deadline = Instant::now() + Duration::from_secs(10);
    for p in [base, base + 10, base + 12] {
        while std::net::TcpStream::connect(("127.0.0.1", p)).is_ok() {
            assert!(Instant::now() < deadline, "port {p} still served");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn rand_u16() -> u16 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    (t ^ std::process::id()) as u16
}

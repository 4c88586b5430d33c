//! Every MySQL client a user connects with, each against its own Tethys:
//! the `mysql` shell, PyMySQL, mysql-connector-python (pure Python and C
//! extension), SQLAlchemy, MariaDB Connector/J, Node's mysql2 and ODBC
//! (MariaDB Connector/ODBC through unixODBC). Each probe creates a table
//! of every Doris type (`tests/clients/all_types.sql`), reads every value
//! back with its type, runs a statement with parameters and reads the
//! metadata its tools ask for. `.ci/run` installs the clients.

use std::path::PathBuf;
use std::process::Command;

use tethys_sql_tests::TethysServer;

fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// Runs `program` with the arguments `args` makes of a fresh server's
/// port, and fails with its output unless it succeeds.
async fn run_probe(
    what: &str,
    program: &str,
    args: impl FnOnce(String) -> Vec<String>,
    env: &[(&str, String)],
) {
    let server = TethysServer::start(&PathBuf::from(env!("CARGO_BIN_EXE_tethys")))
        .await
        .expect("start");
    let mut cmd = Command::new(program);
    cmd.args(args(server.query_port.to_string()));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .unwrap_or_else(|e| panic!("{program} must be installed (see .ci/run): {e}"));
    assert!(
        out.status.success(),
        "{what} probe failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `program args... PORT SQL_FILE`.
async fn probe(what: &str, program: &str, args: &[&str], env: &[(&str, String)]) {
    let sql = clients_dir()
        .join("all_types.sql")
        .to_string_lossy()
        .to_string();
    let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    run_probe(
        what,
        program,
        |port| {
            all.extend([port, sql]);
            all
        },
        env,
    )
    .await;
}

/// `python3 python_probe.py PORT CLIENT`.
async fn python(client: &str) {
    let script = clients_dir()
        .join("python_probe.py")
        .to_string_lossy()
        .to_string();
    let client = client.to_string();
    run_probe("python", "python3", |port| vec![script, port, client], &[]).await;
}

#[tokio::test]
async fn pymysql() {
    python("pymysql").await;
}

#[tokio::test]
async fn mysql_connector_python_pure() {
    python("connector-pure").await;
}

#[tokio::test]
async fn mysql_connector_python_c_extension() {
    python("connector-c").await;
}

#[tokio::test]
async fn sqlalchemy_inspect_core_and_orm() {
    python("sqlalchemy").await;
}

#[tokio::test]
async fn mysql_shell() {
    let script = clients_dir().join("mysql_cli_probe.sh");
    probe("mysql", "bash", &[&script.to_string_lossy()], &[]).await;
}

#[tokio::test]
async fn mariadb_connector_j() {
    let script = clients_dir().join("JdbcProbe.java");
    probe(
        "jdbc",
        "java",
        &[
            "-cp",
            "/usr/share/java/mariadb-java-client.jar",
            &script.to_string_lossy(),
        ],
        &[],
    )
    .await;
}

#[tokio::test]
async fn odbc_isql() {
    let script = clients_dir().join("odbc_probe.sh");
    probe("odbc", "bash", &[&script.to_string_lossy()], &[]).await;
}

#[tokio::test]
async fn node_mysql2() {
    // mysql2 at the version package-lock.json pins, installed outside the tree.
    let dir = tempfile::tempdir().expect("tempdir");
    for f in ["package.json", "package-lock.json"] {
        std::fs::copy(clients_dir().join("node").join(f), dir.path().join(f)).expect("copy");
    }
    let install = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--silent"])
        .current_dir(dir.path())
        .output()
        .expect("npm must be installed (see .ci/run)");
    assert!(
        install.status.success(),
        "npm ci: {}",
        String::from_utf8_lossy(&install.stderr)
    );
    let script = clients_dir().join("node/probe.js");
    let modules = dir
        .path()
        .join("node_modules")
        .to_string_lossy()
        .to_string();
    probe(
        "node",
        "node",
        &[&script.to_string_lossy()],
        &[("NODE_PATH", modules)],
    )
    .await;
}

//! PyMySQL and mysql-connector-python against a started Tethys
//! (`tests/clients.py`). `.ci/run` installs both drivers first.

use std::path::PathBuf;

use tethys_sql_tests::TethysServer;

#[tokio::test]
async fn pymysql_and_mysql_connector_python() {
    let server = TethysServer::start(&PathBuf::from(env!("CARGO_BIN_EXE_tethys")))
        .await
        .expect("start");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients.py");
    let out = tokio::process::Command::new("python3")
        .arg(&script)
        .arg(server.query_port.to_string())
        .output()
        .await
        .expect("python3 must be installed (see .ci/run)");
    assert!(
        out.status.success(),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

//! End-to-end SQL test harness.
//!
//! [`TethysServer`] starts the real `tethys standalone` binary on free ports
//! with a temporary data directory; [`MySqlDb`] is a sqllogictest `AsyncDB`
//! that talks to it through one `mysql_async` connection using the text
//! protocol, exactly like a user's client. The pseudo statement
//! `__restart__` kills the server with SIGKILL and starts it again on the
//! same data directory, to test durability.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder, Value};
use sqllogictest::{AsyncDB, DBOutput};
use tokio::sync::Mutex;

pub mod cluster;
mod column_type;
mod fixture;

pub use column_type::SltType;
pub use fixture::LoadFixture;
/// Re-exported so test binaries use the same version.
pub use sqllogictest;

/// Errors of the harness.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("{0}")]
    MySql(#[from] mysql_async::Error),
    #[error("harness: {0}")]
    Setup(String),
}

/// `N` distinct free ports: all bound at once, then let go. (Binding and
/// letting go one at a time can hand out the same port twice; a server
/// given one port for MySQL and HTTP answered MySQL clients with HTTP.)
pub fn free_ports<const N: usize>() -> Result<[u16; N], HarnessError> {
    let setup = |e: std::io::Error| HarnessError::Setup(e.to_string());
    let listeners = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").map_err(setup))
        .collect::<Result<Vec<_>, _>>()?;
    let mut ports = [0u16; N];
    for (p, l) in ports.iter_mut().zip(&listeners) {
        *p = l.local_addr().map_err(setup)?.port();
    }
    Ok(ports)
}

/// A running `tethys standalone` process.
pub struct TethysServer {
    binary: PathBuf,
    data: tempfile::TempDir,
    /// MySQL port.
    pub query_port: u16,
    ports: [u16; 4],
    /// BE HTTP port (Stream Load).
    pub be_http_port: u16,
    /// FE HTTP port.
    pub fe_http_port: u16,
    /// Extra command-line flags of `tethys standalone`.
    extra_args: Vec<String>,
    child: Option<Child>,
}

impl TethysServer {
    /// Starts the binary at `binary` on free ports with a fresh data directory.
    pub async fn start(binary: &Path) -> Result<TethysServer, HarnessError> {
        Self::start_with_args(binary, &[]).await
    }

    /// Like [`TethysServer::start`], with extra flags for `tethys standalone`.
    pub async fn start_with_args(
        binary: &Path,
        extra_args: &[&str],
    ) -> Result<TethysServer, HarnessError> {
        // Free ports are picked by binding to port 0 and letting go; another
        // test may grab one in between, so a failed start is retried on new ports.
        let mut last = None;
        for _ in 0..5 {
            match Self::start_once(binary, extra_args).await {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| HarnessError::Setup("could not start tethys".into())))
    }

    async fn start_once(binary: &Path, extra_args: &[&str]) -> Result<TethysServer, HarnessError> {
        let data = tempfile::tempdir().map_err(|e| HarnessError::Setup(e.to_string()))?;
        Self::start_on(binary, data, extra_args).await
    }

    /// Starts the binary on `data`, an existing data directory (say, one an
    /// earlier version wrote), on free ports.
    pub async fn start_on(
        binary: &Path,
        data: tempfile::TempDir,
        extra_args: &[&str],
    ) -> Result<TethysServer, HarnessError> {
        let mut s = TethysServer {
            binary: binary.to_path_buf(),
            data,
            query_port: 0,
            ports: [0; 4],
            be_http_port: 0,
            fe_http_port: 0,
            extra_args: extra_args.iter().map(|a| a.to_string()).collect(),
            child: None,
        };
        let [query, ports @ ..] = free_ports::<5>()?;
        s.query_port = query;
        s.ports = ports;
        s.fe_http_port = s.ports[0];
        s.be_http_port = s.ports[1];
        s.spawn().await?;
        Ok(s)
    }

    /// Stream-loads `file` into `db`.`table` through the FE (curl following
    /// the 307 with `--location-trusted`, as users do), with extra `-H`
    /// headers; returns the response body. Panics unless HTTP 200.
    pub fn stream_load(&self, db: &str, table: &str, file: &str, headers: &[&str]) -> String {
        let mut args: Vec<String> = vec!["--location-trusted".into(), "-u".into(), "root:".into()];
        for h in headers {
            args.push("-H".into());
            args.push(h.to_string());
        }
        args.extend([
            "-T".into(),
            file.into(),
            format!(
                "http://127.0.0.1:{}/api/{db}/{table}/_stream_load",
                self.fe_http_port
            ),
        ]);
        let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let (code, body) = curl(&refs);
        assert_eq!(code, 200, "{body}");
        body
    }

    /// The server's process id (to read its memory use in /proc).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        self.data.path()
    }

    async fn spawn(&mut self) -> Result<(), HarnessError> {
        let child = Command::new(&self.binary)
            .arg("standalone")
            .arg("--data-dir")
            .arg(self.data.path())
            .arg("--query-port")
            .arg(self.query_port.to_string())
            .arg("--http-port")
            .arg(self.ports[0].to_string())
            .arg("--be-http-port")
            .arg(self.ports[1].to_string())
            .arg("--be-port")
            .arg(self.ports[2].to_string())
            .arg("--fe-rpc-port")
            .arg(self.ports[3].to_string())
            // Statistics collected in the background would change plans
            // (and EXPLAIN output) while a test runs: off unless asked for.
            .args(
                (!self
                    .extra_args
                    .iter()
                    .any(|a| a == "--auto-analyze-interval-second"))
                .then_some(["--auto-analyze-interval-second", "0"])
                .into_iter()
                .flatten(),
            )
            .args(&self.extra_args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                HarnessError::Setup(format!("cannot start {}: {e}", self.binary.display()))
            })?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            // Bounded: a port that is not (or not only) ours may accept the
            // connection and never greet.
            if let Ok(Ok(c)) =
                tokio::time::timeout(Duration::from_secs(5), Conn::new(self.opts())).await
            {
                let _ = c.disconnect().await;
                // Make sure it was our server that answered (a port taken by
                // another test's server would let a failed start look alive).
                tokio::time::sleep(Duration::from_millis(200)).await;
                if let Some(ch) = self.child.as_mut()
                    && let Ok(Some(status)) = ch.try_wait()
                {
                    return Err(HarnessError::Setup(format!(
                        "tethys exited at start: {status}"
                    )));
                }
                return Ok(());
            }
            if let Some(ch) = self.child.as_mut()
                && let Ok(Some(status)) = ch.try_wait()
            {
                return Err(HarnessError::Setup(format!(
                    "tethys exited at start: {status}"
                )));
            }
            if Instant::now() > deadline {
                return Err(HarnessError::Setup(
                    "tethys did not accept connections within 60 s".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Connection options for this server.
    pub fn opts(&self) -> OptsBuilder {
        OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.query_port)
            .user(Some("root"))
            .prefer_socket(false)
    }

    /// Kills the server with SIGKILL (no clean shutdown) and starts it again.
    pub async fn crash_and_restart(&mut self) -> Result<(), HarnessError> {
        self.kill();
        let mut result = self.spawn().await;
        for _ in 0..4 {
            if result.is_ok() {
                break;
            }
            // A port was taken meanwhile: restart on new ports, same data.
            self.kill();
            let [query, ports @ ..] = free_ports::<5>()?;
            self.query_port = query;
            self.ports = ports;
            self.fe_http_port = self.ports[0];
            self.be_http_port = self.ports[1];
            result = self.spawn().await;
        }
        result
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for TethysServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A sqllogictest database over one MySQL connection.
pub struct MySqlDb {
    server: Arc<Mutex<TethysServer>>,
    conn: Option<Conn>,
    database: Option<String>,
}

impl MySqlDb {
    /// Connects to `server`.
    pub async fn connect(server: Arc<Mutex<TethysServer>>) -> Result<MySqlDb, HarnessError> {
        let opts = server.lock().await.opts();
        let conn = Conn::new(opts).await?;
        Ok(MySqlDb {
            server,
            conn: Some(conn),
            database: None,
        })
    }

    fn conn(&mut self) -> Result<&mut Conn, HarnessError> {
        self.conn
            .as_mut()
            .ok_or_else(|| HarnessError::Setup("not connected".into()))
    }
}

/// The rows of `sql` as text (`NULL` for NULL), for tests that check
/// answers or EXPLAIN lines directly; panics, naming the statement, when it
/// fails.
pub async fn query_rows(c: &mut Conn, sql: &str) -> Vec<Vec<String>> {
    let out: Vec<mysql_async::Row> = c.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    out.into_iter()
        .map(|r| {
            (0..r.len())
                .map(|i| match r.as_ref(i) {
                    Some(Value::NULL) | None => "NULL".to_string(),
                    Some(Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
                    Some(v) => format!("{v:?}"),
                })
                .collect()
        })
        .collect()
}

/// Runs each statement on `c`; panics naming the statement that fails.
pub async fn run_all(c: &mut Conn, statements: &[&str]) {
    for s in statements {
        c.query_drop(*s)
            .await
            .unwrap_or_else(|e| panic!("{s}: {e}"));
    }
}

/// The rows of `sql`, each row's values joined by `sep`.
pub async fn query_lines(c: &mut Conn, sql: &str, sep: &str) -> Vec<String> {
    query_rows(c, sql)
        .await
        .into_iter()
        .map(|r| r.join(sep))
        .collect()
}

/// The lines of `EXPLAIN sql`.
pub async fn explain_lines(c: &mut Conn, sql: &str) -> Vec<String> {
    query_lines(c, &format!("EXPLAIN {sql}"), "").await
}

/// Column `i` of the rows of `sql`.
pub async fn query_column(c: &mut Conn, sql: &str, i: usize) -> Vec<String> {
    query_rows(c, sql)
        .await
        .into_iter()
        .map(|mut r| r.swap_remove(i))
        .collect()
}

fn text(v: &Value) -> String {
    match v {
        Value::NULL => "NULL".into(),
        Value::Bytes(b) if b.is_empty() => "(empty)".into(),
        Value::Bytes(b) => String::from_utf8_lossy(b).to_string(),
        other => other.as_sql(true).trim_matches('\'').to_string(),
    }
}

#[async_trait]
impl AsyncDB for MySqlDb {
    type Error = HarnessError;
    type ColumnType = SltType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<Self::ColumnType>, Self::Error> {
        if sql.trim() == "__restart__" {
            if let Some(c) = self.conn.take() {
                drop(c);
            }
            let opts = {
                let mut s = self.server.lock().await;
                s.crash_and_restart().await?;
                s.opts()
            };
            self.conn = Some(Conn::new(opts.db_name(self.database.clone())).await?);
            return Ok(DBOutput::StatementComplete(0));
        }
        let conn = self.conn()?;
        let mut result = conn.query_iter(sql).await?;
        let columns = result.columns();
        let types: Vec<SltType> = columns
            .as_ref()
            .map(|cs| cs.iter().map(|c| SltType::of(c.column_type())).collect())
            .unwrap_or_default();
        let rows: Vec<mysql_async::Row> = result.collect().await?;
        drop(result);
        let affected = self.conn()?.affected_rows();
        let lower = sql.trim_start().to_ascii_lowercase();
        if let Some(db) = lower.strip_prefix("use ") {
            self.database = Some(
                sql.trim()[4..]
                    .trim()
                    .trim_end_matches(';')
                    .trim_matches('`')
                    .to_string(),
            );
            let _ = db;
        }
        if types.is_empty() {
            return Ok(DBOutput::StatementComplete(affected));
        }
        Ok(DBOutput::Rows {
            types,
            rows: rows
                .into_iter()
                .map(|r| r.unwrap().iter().map(text).collect())
                .collect(),
        })
    }

    async fn shutdown(&mut self) {
        if let Some(c) = self.conn.take() {
            let _ = c.disconnect().await;
        }
    }

    fn engine_name(&self) -> &str {
        "tethys"
    }

    async fn sleep(dur: Duration) {
        tokio::time::sleep(dur).await;
    }
}

/// Runs curl (what users script loads with); returns (HTTP code, body).
/// Panics when curl is missing: `.ci/run` installs it.
pub fn curl(args: &[&str]) -> (u16, String) {
    let out = std::process::Command::new("curl")
        .args(["-s", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("curl must be installed (see .ci/run): {e}"));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or((&text, "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// Asserts a Stream Load answered `Status: Fail` with `part` in its message.
pub fn assert_load_failed(body: &str, part: &str) {
    assert_eq!(json_field(body, "Status"), "Fail", "{body}");
    let msg = json_field(body, "Message");
    assert!(
        msg.as_str().is_some_and(|m| m.contains(part)),
        "expected a message with {part:?}: {body}"
    );
}

/// A field of a JSON response body (`Null` when absent); panics on non-JSON.
pub fn json_field(body: &str, name: &str) -> serde_json::Value {
    let v: serde_json::Value =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    v.get(name).cloned().unwrap_or(serde_json::Value::Null)
}

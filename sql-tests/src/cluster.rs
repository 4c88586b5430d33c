//! Separate `tethys fe` and `tethys be` processes on loopback, for the
//! cluster tests: each its own data directory and free ports, stopped (with
//! SIGKILL) when dropped or told to, restarted on the same ports and data.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};

use crate::{HarnessError, free_ports, run_all};

/// One `tethys fe` or `tethys be` process.
struct Process {
    binary: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
}

impl Process {
    fn spawn(&mut self) -> Result<(), HarnessError> {
        let child = Command::new(&self.binary)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                HarnessError::Setup(format!("cannot start {}: {e}", self.binary.display()))
            })?;
        self.child = Some(child);
        Ok(())
    }

    fn exited(&mut self) -> Option<String> {
        let c = self.child.as_mut()?;
        match c.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            _ => None,
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A running `tethys be`.
pub struct BackendProcess {
    /// Its data directory, removed when this is dropped.
    _data: tempfile::TempDir,
    pub port: u16,
    pub http_port: u16,
    process: Process,
}

impl BackendProcess {
    /// Starts a backend on free ports with a fresh data directory; returns
    /// once its gRPC port accepts connections. Free ports are picked by
    /// binding to port 0 and letting go; another test's connection may take
    /// one in between (a BE of tests/mpp.rs exited with "Address already
    /// in use" in CI), so a failed start is retried on new ports, as
    /// `TethysServer::start` does.
    pub async fn start(binary: &Path) -> Result<BackendProcess, HarnessError> {
        let mut last = None;
        for _ in 0..5 {
            match Self::start_once(binary).await {
                Ok(be) => return Ok(be),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| HarnessError::Setup("could not start tethys be".into())))
    }

    async fn start_once(binary: &Path) -> Result<BackendProcess, HarnessError> {
        let data = tempfile::tempdir().map_err(|e| HarnessError::Setup(e.to_string()))?;
        let [port, http_port] = free_ports::<2>()?;
        let args = [
            "be".to_string(),
            "--data-dir".into(),
            data.path().display().to_string(),
            "--port".into(),
            port.to_string(),
            "--http-port".into(),
            http_port.to_string(),
        ];
        let mut be = BackendProcess {
            _data: data,
            port,
            http_port,
            process: Process {
                binary: binary.to_path_buf(),
                args: args.to_vec(),
                child: None,
            },
        };
        be.restart().await?;
        Ok(be)
    }

    /// `"127.0.0.1:port"`, as ALTER SYSTEM ADD BACKEND names it.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// kill -9.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// CPU time the process has used so far (user and system), from
    /// `/proc/<pid>/stat`; `None` when it is not running or not on Linux.
    pub fn cpu_time(&self) -> Option<Duration> {
        let pid = self.process.child.as_ref()?.id();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the command name (which may hold spaces): state is
        // field 3, utime and stime fields 14 and 15, in clock ticks.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        // Clock ticks a second (USER_HZ, 100 on Linux unless `getconf` says).
        let hz = Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .unwrap_or(100);
        Some(Duration::from_millis(ticks * 1000 / hz.max(1)))
    }

    /// Starts it again on the same ports and data.
    pub async fn restart(&mut self) -> Result<(), HarnessError> {
        self.process.kill();
        self.process.spawn()?;
        let port = self.port;
        wait_until("tethys be", &mut self.process, || async move {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        })
        .await
    }
}

/// A running `tethys fe`.
pub struct FrontendProcess {
    /// Its data directory, removed when this is dropped.
    _data: tempfile::TempDir,
    pub query_port: u16,
    pub http_port: u16,
    pub rpc_port: u16,
    process: Process,
}

impl FrontendProcess {
    /// Starts a frontend on free ports with a fresh data directory and
    /// `extra` flags; returns once it accepts MySQL connections.
    pub async fn start(binary: &Path, extra: &[&str]) -> Result<FrontendProcess, HarnessError> {
        let data = tempfile::tempdir().map_err(|e| HarnessError::Setup(e.to_string()))?;
        let [query_port, http_port, rpc_port] = free_ports::<3>()?;
        let mut args = vec![
            "fe".to_string(),
            "--data-dir".into(),
            data.path().display().to_string(),
            "--query-port".into(),
            query_port.to_string(),
            "--http-port".into(),
            http_port.to_string(),
            "--rpc-port".into(),
            rpc_port.to_string(),
            "--auto-analyze-interval-second".into(),
            "0".into(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        let mut fe = FrontendProcess {
            _data: data,
            query_port,
            http_port,
            rpc_port,
            process: Process {
                binary: binary.to_path_buf(),
                args,
                child: None,
            },
        };
        fe.restart().await?;
        Ok(fe)
    }

    pub fn opts(&self) -> OptsBuilder {
        OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.query_port)
            .user(Some("root"))
            .prefer_socket(false)
    }

    pub async fn conn(&self) -> Conn {
        Conn::new(self.opts()).await.expect("connect to the FE")
    }

    /// kill -9.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Starts it again on the same ports and data.
    pub async fn restart(&mut self) -> Result<(), HarnessError> {
        self.process.kill();
        self.process.spawn()?;
        let opts = self.opts();
        wait_until("tethys fe", &mut self.process, || {
            let opts = opts.clone();
            async move {
                match tokio::time::timeout(Duration::from_secs(5), Conn::new(opts)).await {
                    Ok(Ok(c)) => {
                        let _ = c.disconnect().await;
                        true
                    }
                    _ => false,
                }
            }
        })
        .await
    }
}

/// Polls `up` until it holds (60 s at most), failing early if the process
/// exits.
async fn wait_until<F, Fut>(what: &str, p: &mut Process, mut up: F) -> Result<(), HarnessError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = p.exited() {
            return Err(HarnessError::Setup(format!(
                "{what} exited at start: {status}"
            )));
        }
        if up().await {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(HarnessError::Setup(format!(
                "{what} did not start within 60 s"
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// SHOW BACKENDS as rows of (column name, value) maps, by host:port.
pub async fn backends(c: &mut Conn) -> Vec<std::collections::BTreeMap<String, String>> {
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
pub async fn wait_alive(
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

/// An FE (heartbeats every second, `flags` beside) and `n` backends added
/// to it, all alive, with a database `d`; the backends' ids.
pub async fn cluster(
    binary: &Path,
    n: usize,
    flags: &[&str],
) -> (FrontendProcess, Vec<BackendProcess>, Conn, Vec<String>) {
    let mut args = vec!["--heartbeat-interval-second", "1"];
    args.extend(flags);
    let fe = FrontendProcess::start(binary, &args).await.expect("fe");
    let mut bes = vec![];
    for _ in 0..n {
        bes.push(BackendProcess::start(binary).await.expect("be"));
    }
    let mut c = fe.conn().await;
    let addrs: Vec<String> = bes.iter().map(|b| format!("\"{}\"", b.address())).collect();
    run_all(
        &mut c,
        &[
            &format!("ALTER SYSTEM ADD BACKEND {}", addrs.join(", ")),
            "CREATE DATABASE d",
        ],
    )
    .await;
    let mut ids = vec![];
    for be in &bes {
        ids.push(wait_alive(&mut c, be.port, true).await["BackendId"].clone());
    }
    (fe, bes, c, ids)
}

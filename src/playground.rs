//! `tethys playground --backends 3`: a cluster on this machine in one
//! command. It starts `tethys fe` and N `tethys be` as separate processes of
//! this binary (each its own data directory under `--data-dir`), adds the
//! backends with `ALTER SYSTEM ADD BACKEND`, prints how to connect, and
//! stops them all on Ctrl-C (or when one of them exits). Ports are fixed
//! (the FE's defaults, backend i on 9060+i and 8040+i, or from
//! `--base-port`), so running it again reopens the same cluster. The
//! backends share this machine's memory: each gets 1/N of the caches a
//! backend alone would take (three BEs with the defaults held 60% of the
//! memory in page caches, and TPC-H SF10 beside DuckDB ran out of it).

use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};

/// `tethys playground`.
#[derive(Args, Clone, Debug)]
pub struct PlaygroundArgs {
    /// Backends to start.
    #[arg(long, default_value_t = 3)]
    pub backends: usize,
    /// Where the processes keep their data (`fe/`, `be1/`, `be2/`, ...).
    #[arg(long, default_value = "./tethys-playground")]
    pub data_dir: PathBuf,
    /// Ports from here on instead of Doris' defaults: the FE's MySQL port at
    /// base, its HTTP port base+1, RPC base+2; backend i at base+10+2i (RPC)
    /// and base+11+2i (HTTP).
    #[arg(long)]
    pub base_port: Option<u16>,
    /// Replicas of a table naming none (default: 3, or the backends if fewer).
    #[arg(long)]
    pub default_replication_num: Option<usize>,
    /// Seconds a backend is dead before its replicas are made again on
    /// others (short, to watch repair happen).
    #[arg(long, default_value_t = 30)]
    pub tablet_repair_delay_second: u64,
}

/// The cache sizes of each of `n` backends on this machine: 1/n of a lone
/// backend's defaults.
fn shared_caches(n: usize) -> Vec<String> {
    let mb = |bytes: usize| ((bytes / n.max(1)) >> 20).to_string();
    vec![
        "--storage-page-cache-mb".into(),
        mb(tethys_be::storage::default_page_cache_bytes()),
        "--pk-index-cache-mb".into(),
        mb(tethys_be::storage::default_key_index_cache_bytes()),
    ]
}

/// The ports of the FE (query, http, rpc) and of backend `i` (rpc, http).
struct Ports {
    base: Option<u16>,
}

impl Ports {
    fn fe(&self) -> (u16, u16, u16) {
        match self.base {
            Some(b) => (b, b + 1, b + 2),
            None => (9030, 8030, 9020),
        }
    }

    fn be(&self, i: u16) -> (u16, u16) {
        match self.base {
            Some(b) => (b + 10 + 2 * i, b + 11 + 2 * i),
            None => (9060 + i, 8040 + i),
        }
    }
}

/// The started processes, killed when dropped.
struct Processes(Vec<(String, Child)>);

impl Drop for Processes {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Processes {
    /// The first process that exited, with its status.
    fn exited(&mut self) -> Option<String> {
        self.0.iter_mut().find_map(|(name, c)| match c.try_wait() {
            Ok(Some(st)) => Some(format!("{name} exited ({st})")),
            _ => None,
        })
    }
}

pub async fn run(args: PlaygroundArgs) -> ExitCode {
    match start(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("playground: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn start(args: &PlaygroundArgs) -> Result<(), String> {
    if args.backends == 0 {
        return Err("--backends must be at least 1".into());
    }
    let me = std::env::current_exe().map_err(|e| format!("finding this binary: {e}"))?;
    let ports = Ports {
        base: args.base_port,
    };
    let replicas = args.default_replication_num.unwrap_or(args.backends.min(3));
    let (query, http, rpc) = ports.fe();
    let dir = |name: &str| args.data_dir.join(name).display().to_string();
    let mut procs = Processes(vec![]);
    let mut spawn = |name: String, argv: Vec<String>| -> Result<(), String> {
        let child = Command::new(&me)
            .args(&argv)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting {name}: {e}"))?;
        procs.0.push((name, child));
        Ok(())
    };
    let mut backends = vec![];
    for i in 0..args.backends as u16 {
        let (be_rpc, be_http) = ports.be(i);
        let name = format!("be{}", i + 1);
        let mut argv = vec![
            "be".into(),
            "--data-dir".into(),
            dir(&name),
            "--port".into(),
            be_rpc.to_string(),
            "--http-port".into(),
            be_http.to_string(),
        ];
        argv.extend(shared_caches(args.backends));
        spawn(name.clone(), argv)?;
        backends.push(format!("127.0.0.1:{be_rpc}"));
    }
    spawn(
        "fe".into(),
        vec![
            "fe".into(),
            "--data-dir".into(),
            dir("fe"),
            "--query-port".into(),
            query.to_string(),
            "--http-port".into(),
            http.to_string(),
            "--rpc-port".into(),
            rpc.to_string(),
            "--default-replication-num".into(),
            replicas.to_string(),
            "--tablet-repair-delay-second".into(),
            args.tablet_repair_delay_second.to_string(),
        ],
    )?;
    let mut conn = connect(query, &mut procs).await?;
    for be in &backends {
        match conn
            .query_drop(format!("ALTER SYSTEM ADD BACKEND \"{be}\""))
            .await
        {
            Ok(()) => {}
            Err(e) if e.to_string().contains("Same backend already exists") => {}
            Err(e) => return Err(format!("adding backend {be}: {e}")),
        }
    }
    let _ = conn.disconnect().await;
    println!(
        "Tethys playground: 1 FE and {} BEs as separate processes (data in {}).\n  \
         connect: mysql -h127.0.0.1 -P{query} -uroot   or   tethys shell -P{query}\n  \
         Stream Load: curl --location-trusted -u root: -T file http://127.0.0.1:{http}/api/db/table/_stream_load\n  \
         new tables get {replicas} replicas; kill a BE (SHOW BACKENDS names their ports) and queries go on.\n  \
         Ctrl-C stops them all.",
        args.backends,
        args.data_dir.display()
    );
    // One signal future for the whole wait: a signal between two polls is
    // not lost.
    let stop = crate::shutdown_signal();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => {
                println!("stopping the playground");
                return Ok(());
            }
            _ = tokio::time::sleep(Duration::from_millis(500)) => {
                if let Some(why) = procs.exited() {
                    return Err(format!("{why}; stopping the others"));
                }
            }
        }
    }
}

/// Waits (60 s at most) until the FE takes MySQL connections.
async fn connect(port: u16, procs: &mut Processes) -> Result<Conn, String> {
    let opts = OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some("root"))
        .prefer_socket(false);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(why) = procs.exited() {
            return Err(why);
        }
        if let Ok(Ok(c)) =
            tokio::time::timeout(Duration::from_secs(5), Conn::new(opts.clone())).await
        {
            return Ok(c);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the FE did not take connections on port {port} within 60 s"
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_split_the_caches_of_one() {
        let mb = |argv: &[String], flag: &str| -> usize {
            let at = argv.iter().position(|a| a == flag).unwrap();
            argv[at + 1].parse().unwrap()
        };
        let one = shared_caches(1);
        let three = shared_caches(3);
        let page = mb(&one, "--storage-page-cache-mb");
        assert_eq!(page, tethys_be::storage::default_page_cache_bytes() >> 20);
        assert!(mb(&three, "--storage-page-cache-mb") * 3 <= page);
        assert!(
            mb(&three, "--pk-index-cache-mb") * 3 <= mb(&one, "--pk-index-cache-mb"),
            "{three:?}"
        );
    }
}

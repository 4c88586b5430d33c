//! The `tethys` command: `tethys standalone` (the default) runs a frontend and
//! a backend in one process; `tethys shell` is the built-in MySQL-protocol SQL
//! shell.

mod shell;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use tethys_common::config::ports;

/// mimalloc serves the many short-lived page and batch buffers of a query
/// far faster than glibc malloc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc v3's option enum (libmimalloc-sys
/// only names the older options; `purge_delay_option_is_the_one_meant`
/// checks the index against the option's unique default).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long memory a query freed stays with the process before mimalloc
/// returns it to the OS. At mimalloc's default (1 s) the next query's hash
/// tables and batches fault the memory back in, and the kernel zeroing
/// those fresh huge pages took 9% of the CPU of the TPC-H queries run back
/// to back; at 10 s it is 2%, and an idle server still gives memory back.
/// `MIMALLOC_PURGE_DELAY` in the environment overrides it.
const PURGE_DELAY_MS: std::ffi::c_long = 10_000;

/// Applies [`PURGE_DELAY_MS`] unless the environment chose a delay.
#[allow(unsafe_code)]
fn tune_allocator() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: `mi_option_set` takes an option index and a value and
        // only stores the value; mimalloc reads options atomically.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    }
}

#[derive(Parser)]
#[command(
    name = "tethys",
    version,
    about = "Tethys: a columnar MPP OLAP database in the Apache Doris mould"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run a frontend and a backend in one process (the default).
    Standalone(StandaloneArgs),
    /// The MySQL-protocol SQL shell.
    Shell(shell::ShellArgs),
}

#[derive(Args, Clone)]
struct StandaloneArgs {
    /// Where metadata and tablets live.
    #[arg(long, default_value = "./tethys-data")]
    data_dir: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// MySQL protocol port.
    #[arg(long, default_value_t = ports::QUERY)]
    query_port: u16,
    /// FE HTTP port.
    #[arg(long, default_value_t = ports::FE_HTTP)]
    http_port: u16,
    /// BE HTTP port.
    #[arg(long, default_value_t = ports::BE_HTTP)]
    be_http_port: u16,
    /// BE gRPC port (control plane and Arrow Flight).
    #[arg(long, default_value_t = ports::BE_RPC)]
    be_port: u16,
    /// FE gRPC port (what backends call, e.g. to run a Stream Load transaction).
    #[arg(long, default_value_t = ports::FE_RPC)]
    fe_rpc_port: u16,
    /// Fragment execution threads on the BE (0: one per core).
    #[arg(long, default_value_t = 0)]
    exec_threads: usize,
    /// How long finished loads keep their labels, seconds (Doris'
    /// `label_keep_max_second` for stream loads and INSERTs).
    #[arg(long, default_value_t = tethys_fe::server::LABEL_KEEP_MAX_SECS)]
    label_keep_max_second: i64,
    /// How often expired labels are cleaned, seconds.
    #[arg(long, default_value_t = tethys_fe::server::LABEL_CLEAN_INTERVAL_SECS)]
    label_clean_interval_second: u64,
    /// How often tables are checked for missing or stale column statistics
    /// (more than a tenth of their rows changed) and analyzed, seconds
    /// (Doris' auto analyze); 0 turns it off.
    #[arg(long, default_value_t = tethys_fe::server::AUTO_ANALYZE_INTERVAL_SECS)]
    auto_analyze_interval_second: u64,
    /// Memory for decoded column pages, MB (Doris' storage page cache;
    /// default 20% of the machine's memory, 0 turns it off).
    #[arg(long)]
    storage_page_cache_mb: Option<usize>,
    /// Memory for the primary-key indexes merge-on-write UNIQUE tables look
    /// keys up in at publish, MB (Doris' `pk_storage_page_cache_limit`;
    /// default 10% of the machine's memory, 0 reads keys from disk each time).
    #[arg(long)]
    pk_index_cache_mb: Option<usize>,
    /// Turns off background compaction on the BE (Doris' be.conf
    /// `disable_auto_compaction`); `ADMIN COMPACT TABLE` still works.
    #[arg(long)]
    disable_auto_compaction: bool,
    /// Background compaction threads on the BE.
    #[arg(long, default_value_t = 1)]
    compaction_threads: usize,
    /// Versions (rowsets) a tablet may hold before loads into it are
    /// refused (Doris' be.conf `max_tablet_version_num`).
    #[arg(long, default_value_t = tethys_be::storage::MAX_TABLET_VERSION_NUM)]
    max_tablet_version_num: usize,
    /// Lets tests turn debug points on over HTTP
    /// (`POST /api/debug_point/add/{name}`; Doris' `enable_debug_points`).
    /// Never on a server that holds data you care about.
    #[arg(long)]
    enable_debug_points: bool,
    /// MySQL connections the FE holds at most (Doris' fe.conf
    /// `qe_max_connection`); beyond, error 1040.
    #[arg(long, default_value_t = tethys_fe::frontend::MAX_CONNECTIONS)]
    qe_max_connection: usize,
    /// MySQL connections one user holds at most (Doris' user property
    /// `max_user_connections`); beyond, error 1203.
    #[arg(long, default_value_t = tethys_fe::frontend::MAX_USER_CONNECTIONS)]
    max_user_connections: usize,
    /// Prepared statements all connections hold at most, COM_STMT_PREPARE's
    /// and SQL `PREPARE`'s (MySQL's `max_prepared_stmt_count`); beyond,
    /// error 1461.
    #[arg(long, default_value_t = tethys_fe::frontend::MAX_PREPARED_STMTS)]
    max_prepared_stmt_count: usize,
    /// Largest Stream Load body, MB, counted both as it arrives and as it
    /// decompresses (Doris' be.conf `streaming_load_max_mb`).
    #[arg(long, default_value_t = tethys_be::load::MAX_BODY_MB)]
    streaming_load_max_mb: u64,
}

impl Default for StandaloneArgs {
    fn default() -> Self {
        StandaloneArgs {
            data_dir: PathBuf::from("./tethys-data"),
            host: IpAddr::from([127, 0, 0, 1]),
            query_port: ports::QUERY,
            http_port: ports::FE_HTTP,
            be_http_port: ports::BE_HTTP,
            be_port: ports::BE_RPC,
            fe_rpc_port: ports::FE_RPC,
            exec_threads: 0,
            label_keep_max_second: tethys_fe::server::LABEL_KEEP_MAX_SECS,
            label_clean_interval_second: tethys_fe::server::LABEL_CLEAN_INTERVAL_SECS,
            auto_analyze_interval_second: tethys_fe::server::AUTO_ANALYZE_INTERVAL_SECS,
            storage_page_cache_mb: None,
            pk_index_cache_mb: None,
            disable_auto_compaction: false,
            compaction_threads: 1,
            max_tablet_version_num: tethys_be::storage::MAX_TABLET_VERSION_NUM,
            enable_debug_points: false,
            qe_max_connection: tethys_fe::frontend::MAX_CONNECTIONS,
            max_user_connections: tethys_fe::frontend::MAX_USER_CONNECTIONS,
            max_prepared_stmt_count: tethys_fe::frontend::MAX_PREPARED_STMTS,
            streaming_load_max_mb: tethys_be::load::MAX_BODY_MB,
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {},
                    _ = term.recv() => {},
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

async fn standalone(args: StandaloneArgs) -> Result<(), tethys_common::TethysError> {
    if args.enable_debug_points {
        tethys_common::debug_point::enable();
    }
    let be_cfg = tethys_be::BackendConfig {
        root: args.data_dir.join("be"),
        rpc_addr: SocketAddr::new(args.host, args.be_port),
        http_addr: SocketAddr::new(args.host, args.be_http_port),
        exec_threads: args.exec_threads,
        fe_rpc_url: Some(format!("http://{}:{}", args.host, args.fe_rpc_port)),
        page_cache_bytes: args
            .storage_page_cache_mb
            .map(|mb| mb << 20)
            .unwrap_or_else(tethys_be::storage::default_page_cache_bytes),
        key_index_cache_bytes: args
            .pk_index_cache_mb
            .map(|mb| mb << 20)
            .unwrap_or_else(tethys_be::storage::default_key_index_cache_bytes),
        compaction: tethys_be::storage::CompactionConfig {
            auto: !args.disable_auto_compaction,
            threads: args.compaction_threads,
            ..Default::default()
        },
        max_tablet_versions: args.max_tablet_version_num,
        max_body_bytes: args.streaming_load_max_mb.saturating_mul(1 << 20),
    };
    let backend = tethys_be::Backend::open(&be_cfg)?;
    // Listening before the FE opens: the FE's first calls reach the BE.
    let be_listeners = tethys_be::bind(&be_cfg).await?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut be_stop = stop_rx.clone();
    let be_task = tokio::spawn(tethys_be::serve(
        backend.clone(),
        be_listeners,
        async move {
            let _ = be_stop.wait_for(|v| *v).await;
        },
    ));
    let fe_cfg = tethys_fe::FrontendConfig {
        meta_dir: args.data_dir.join("fe").join("meta"),
        query_addr: SocketAddr::new(args.host, args.query_port),
        http_addr: SocketAddr::new(args.host, args.http_port),
        rpc_addr: SocketAddr::new(args.host, args.fe_rpc_port),
        backends: vec![(args.host.to_string(), args.be_port, args.be_http_port)],
        label_keep_max_secs: args.label_keep_max_second,
        label_clean_interval_secs: args.label_clean_interval_second,
        auto_analyze_interval_secs: args.auto_analyze_interval_second,
        max_connections: args.qe_max_connection,
        max_user_connections: args.max_user_connections,
        max_prepared_stmt_count: args.max_prepared_stmt_count,
    };
    let fe = tethys_fe::open(&fe_cfg).await?;
    let mut fe_stop = stop_rx.clone();
    let fe_task = tokio::spawn(tethys_fe::serve(fe, fe_cfg, async move {
        let _ = fe_stop.wait_for(|v| *v).await;
    }));
    println!(
        "Tethys {} is running (FE + BE, data in {}).\n  connect: mysql -h{} -P{} -uroot   or   tethys shell -P{}\n  FE http: {}:{}   BE http: {}:{}",
        env!("CARGO_PKG_VERSION"),
        args.data_dir.display(),
        args.host,
        args.query_port,
        args.query_port,
        args.host,
        args.http_port,
        args.host,
        args.be_http_port
    );
    tokio::select! {
        _ = shutdown_signal() => {
            println!("shutting down");
        }
        r = fe_task => {
            r.map_err(|e| tethys_common::TethysError::Internal(e.to_string()))??;
        }
    }
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), be_task).await;
    Ok(())
}

fn main() -> ExitCode {
    tune_allocator();
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(tethys_common::config::RUNTIME_STACK_BYTES)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match cli
        .command
        .unwrap_or(Command::Standalone(StandaloneArgs::default()))
    {
        Command::Standalone(args) => {
            tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env()
                        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
                )
                .init();
            match rt.block_on(standalone(args)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("tethys: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Shell(args) => rt.block_on(shell::run(args)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Index 15 is the option defaulting to 1000 (ms): in mimalloc v3 only
    /// `purge_delay` does. Fails if a mimalloc update renumbers the enum.
    #[test]
    #[allow(unsafe_code)]
    fn purge_delay_option_is_the_one_meant() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // SAFETY: reads one option value.
        let default = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(default, 1000);
    }
}

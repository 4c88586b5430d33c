//! The `tethys` command: `tethys standalone` (the default) runs a frontend and
//! a backend in one process; `tethys fe` and `tethys be` run them as separate
//! processes (backends join with `ALTER SYSTEM ADD BACKEND`); `tethys
//! playground` starts an FE and N BEs as local processes; `tethys shell`
//! is the built-in MySQL-protocol SQL shell.

mod args;
mod playground;
mod shell;

use std::process::ExitCode;

use args::{BeArgs, FeArgs, FePorts, StandaloneArgs};
use clap::{Parser, Subcommand};

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
    /// Run a frontend alone.
    Fe(FeArgs),
    /// Run a backend alone; a frontend adds it with
    /// `ALTER SYSTEM ADD BACKEND "host:port"`.
    Be(BeArgs),
    /// An FE and N BEs as separate local processes, the backends added:
    /// replication and failover in one command.
    Playground(playground::PlaygroundArgs),
    /// The MySQL-protocol SQL shell.
    Shell(shell::ShellArgs),
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

type Stop = tokio::sync::watch::Receiver<bool>;

async fn stopped(mut stop: Stop) {
    let _ = stop.wait_for(|v| *v).await;
}

/// Opens and starts serving a backend; its task ends when `stop` turns.
async fn start_be(
    cfg: &tethys_be::BackendConfig,
    stop: Stop,
) -> Result<tokio::task::JoinHandle<tethys_common::Result<()>>, tethys_common::TethysError> {
    let backend = tethys_be::Backend::open(cfg)?;
    // Listening before any FE calls: its first heartbeat reaches the BE.
    let listeners = tethys_be::bind(cfg).await?;
    Ok(tokio::spawn(tethys_be::serve(
        backend,
        listeners,
        stopped(stop),
    )))
}

/// Waits for Ctrl-C / SIGTERM or the end of `main_task`, then stops
/// everything and gives `rest` up to 5 s to finish.
async fn run_until_stopped(
    main_task: tokio::task::JoinHandle<tethys_common::Result<()>>,
    rest: Option<tokio::task::JoinHandle<tethys_common::Result<()>>>,
    stop_tx: tokio::sync::watch::Sender<bool>,
) -> Result<(), tethys_common::TethysError> {
    let internal = |e: tokio::task::JoinError| tethys_common::TethysError::Internal(e.to_string());
    tokio::select! {
        _ = shutdown_signal() => {
            println!("shutting down");
        }
        r = main_task => {
            let _ = stop_tx.send(true);
            r.map_err(internal)??;
            return Ok(());
        }
    }
    let _ = stop_tx.send(true);
    if let Some(t) = rest {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), t).await;
    }
    Ok(())
}

async fn standalone(args: StandaloneArgs) -> Result<(), tethys_common::TethysError> {
    if args.enable_debug_points {
        tethys_common::debug_point::enable();
    }
    let fe_url = format!("http://{}:{}", args.host, args.fe_rpc_port);
    let be_cfg = args.be.config(
        &args.data_dir,
        args.host,
        (args.be_port, args.be_http_port),
        Some(fe_url),
    );
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let be_task = start_be(&be_cfg, stop_rx.clone()).await?;
    let fe_cfg = args.fe.config(
        &args.data_dir,
        FePorts {
            host: args.host,
            query: args.query_port,
            http: args.http_port,
            rpc: args.fe_rpc_port,
        },
        vec![(args.host.to_string(), args.be_port, args.be_http_port)],
    );
    let fe = tethys_fe::open(&fe_cfg).await?;
    let fe_task = tokio::spawn(tethys_fe::serve(fe, fe_cfg, stopped(stop_rx)));
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
    run_until_stopped(fe_task, Some(be_task), stop_tx).await
}

async fn frontend(args: FeArgs) -> Result<(), tethys_common::TethysError> {
    if args.enable_debug_points {
        tethys_common::debug_point::enable();
    }
    let mut cfg = args.fe.config(
        &args.data_dir,
        FePorts {
            host: args.host,
            query: args.query_port,
            http: args.http_port,
            rpc: args.rpc_port,
        },
        vec![],
    );
    cfg.default_replication_num = args.default_replication_num;
    cfg.advertise_host = args.advertise_host.clone();
    let fe = tethys_fe::open(&cfg).await?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(tethys_fe::serve(fe, cfg, stopped(stop_rx)));
    println!(
        "Tethys {} frontend is running (metadata in {}).\n  connect: mysql -h{} -P{} -uroot\n  add a backend: ALTER SYSTEM ADD BACKEND \"host:9060\";",
        env!("CARGO_PKG_VERSION"),
        args.data_dir.display(),
        args.host,
        args.query_port,
    );
    run_until_stopped(task, None, stop_tx).await
}

async fn backend(args: BeArgs) -> Result<(), tethys_common::TethysError> {
    if args.enable_debug_points {
        tethys_common::debug_point::enable();
    }
    let cfg = args
        .be
        .config(&args.data_dir, args.host, (args.port, args.http_port), None);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = start_be(&cfg, stop_rx).await?;
    println!(
        "Tethys {} backend is running (tablets in {}), at {}:{} (http {}); a frontend adds it with\n  ALTER SYSTEM ADD BACKEND \"{}:{}\";",
        env!("CARGO_PKG_VERSION"),
        cfg.root.display(),
        args.host,
        args.port,
        args.http_port,
        args.host,
        args.port,
    );
    run_until_stopped(task, None, stop_tx).await
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
    let command = match cli.command {
        Some(c) => c,
        // No subcommand: standalone with every default.
        None => match Cli::try_parse_from(["tethys", "standalone"]) {
            Ok(Cli {
                command: Some(c), ..
            }) => c,
            _ => return ExitCode::FAILURE,
        },
    };
    let served = match command {
        Command::Shell(args) => return rt.block_on(shell::run(args)),
        Command::Playground(args) => return rt.block_on(playground::run(args)),
        Command::Standalone(args) => {
            init_tracing();
            rt.block_on(standalone(args))
        }
        Command::Fe(args) => {
            init_tracing();
            rt.block_on(frontend(args))
        }
        Command::Be(args) => {
            init_tracing();
            rt.block_on(backend(args))
        }
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tethys: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr: stdout is the shell's and the playground's output,
/// and a process started by the playground or a test keeps its stderr.
fn init_tracing() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
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

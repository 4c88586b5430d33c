//! Starting a frontend: open the catalog, register backends, finish what a
//! crash interrupted, then serve MySQL clients and HTTP.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tethys_common::{Result, TethysError};

mod connection;
mod http;
mod mysql;
mod rpc;

use crate::catalog::{BackendInfo, Catalog, EditOp};
use crate::frontend::Frontend;

/// How long finished load transactions (and their labels) are kept, as
/// Doris' `streaming_label_keep_max_second`.
pub const LABEL_KEEP_MAX_SECS: i64 = 43_200;
/// How often old labels are cleaned (and expired transactions aborted).
pub const LABEL_CLEAN_INTERVAL_SECS: u64 = 60;

/// Default period of automatic statistics collection, seconds (Doris'
/// `auto_check_statistics_in_minutes` of 5).
pub const AUTO_ANALYZE_INTERVAL_SECS: u64 = 300;

/// How to start a frontend.
#[derive(Debug, Clone)]
pub struct FrontendConfig {
    /// Metadata directory (image + edit log).
    pub meta_dir: PathBuf,
    pub query_addr: SocketAddr,
    pub http_addr: SocketAddr,
    /// gRPC address of the FrontendService (backends call it).
    pub rpc_addr: SocketAddr,
    /// Backends to register at start (host, rpc port, http port).
    pub backends: Vec<(String, u16, u16)>,
    /// How long finished loads keep their labels, seconds.
    pub label_keep_max_secs: i64,
    /// How often expired labels are cleaned, seconds.
    pub label_clean_interval_secs: u64,
    /// How often tables are checked for missing or stale column statistics
    /// and analyzed (Doris' auto analyze), seconds; 0 turns it off.
    pub auto_analyze_interval_secs: u64,
    /// MySQL connections in all, and of one user.
    pub max_connections: usize,
    pub max_user_connections: usize,
    /// Prepared statements in all (MySQL's `max_prepared_stmt_count`).
    pub max_prepared_stmt_count: usize,
    /// How often every backend is heartbeated, seconds (Doris: 5).
    pub heartbeat_interval_secs: u64,
    /// Replicas of a new table's tablets when it names none.
    pub default_replication_num: usize,
    /// How long a backend is dead before its replicas are made again
    /// elsewhere, seconds (Doris' `tablet_repair_delay_factor_second`).
    pub tablet_repair_delay_secs: u64,
    /// The name backends reach this FE by, when not its listen address.
    pub advertise_host: Option<String>,
}

/// Doris' heartbeat period, seconds.
pub const HEARTBEAT_INTERVAL_SECS: u64 = 5;

/// Opens the catalog and brings backends in line with it.
pub async fn open(cfg: &FrontendConfig) -> Result<Arc<Frontend>> {
    let catalog = Arc::new(Catalog::open(&cfg.meta_dir)?);
    for (host, rpc, http) in &cfg.backends {
        catalog.mutate(|state, ids| {
            if let Some(b) = state
                .backends
                .values()
                .find(|b| &b.host == host && b.rpc_port == *rpc && b.http_port == *http)
            {
                return Ok((EditOp::AddBackend { backend: b.clone() }, ()));
            }
            // A standalone restart on new ports keeps the backend's id.
            let id = match state.backends.keys().next() {
                Some(id) if state.backends.len() == 1 && cfg.backends.len() == 1 => *id,
                _ => ids.alloc(),
            };
            Ok((
                EditOp::AddBackend {
                    backend: BackendInfo {
                        id,
                        host: host.clone(),
                        rpc_port: *rpc,
                        http_port: *http,
                    },
                },
                (),
            ))
        })?;
    }
    let (id, token) = {
        let s = catalog.read();
        (s.cluster_id, s.cluster_token.clone())
    };
    if id == 0 || token.is_empty() {
        // Positive and below 2^62: readable, and never 0 ("none").
        let cluster_id = if id == 0 {
            (rand::random::<u64>() >> 2) as i64 | 1
        } else {
            id
        };
        let token = tethys_common::token::Token::generate();
        catalog.mutate(|_, _| Ok((EditOp::InitCluster { cluster_id, token }, ())))?;
    }
    let fe = Frontend::new(catalog);
    fe.backends
        .pool()
        .token()
        .set(&fe.catalog.read().cluster_token)?;
    // One heartbeat round before anything else asks a backend: it tells
    // each backend its cluster and FE, finds which are alive and catches
    // those up (tablets, transactions). A dead one is caught up when it
    // comes back (`heartbeat.rs`); the FE starts anyway.
    fe.backends.set_heartbeater(heartbeater(cfg, &fe));
    crate::executor::heartbeat_round(&fe).await;
    fe.txn.recover().await?;
    let limits = &fe.limits;
    limits
        .max_connections
        .store(cfg.max_connections, std::sync::atomic::Ordering::Relaxed);
    limits.max_user_connections.store(
        cfg.max_user_connections,
        std::sync::atomic::Ordering::Relaxed,
    );
    limits.max_prepared_stmts.store(
        cfg.max_prepared_stmt_count,
        std::sync::atomic::Ordering::Relaxed,
    );
    fe.default_replication_num.store(
        cfg.default_replication_num.max(1),
        std::sync::atomic::Ordering::Relaxed,
    );
    Ok(fe)
}

/// This FE as its heartbeats name it: where its RPC service listens (the
/// backends call it for the loads they coordinate) and its cluster.
fn heartbeater(cfg: &FrontendConfig, fe: &Frontend) -> crate::backends::Heartbeater {
    let ip = cfg.rpc_addr.ip();
    // `--advertise-host` names the FE for other hosts; else the address it
    // listens on (loopback when that is every interface).
    let host = match &cfg.advertise_host {
        Some(h) => h.clone(),
        None if ip.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.to_string(),
        None => ip.to_string(),
    };
    crate::backends::Heartbeater {
        fe_host: host,
        fe_rpc_port: cfg.rpc_addr.port(),
        cluster_id: fe.catalog.read().cluster_id,
        token: fe.catalog.read().cluster_token.clone(),
    }
}

/// Runs `round` after `first` and then every `every` (a round that
/// overruns delays the next), until `stop` turns true. A round stopped by a
/// panic is logged and the next one runs on time: the task never dies.
fn spawn_periodic<F, Fut>(
    what: &'static str,
    first: Duration,
    every: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
    mut round: F,
) where
    F: FnMut() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + first, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                r = stop.changed() => {
                    if r.is_err() || *stop.borrow() {
                        return;
                    }
                    continue;
                }
            }
            // A panic is logged by `contain`; the next round runs on time.
            let _ = tethys_common::panic::contain(what, round()).await;
        }
    });
}

/// Serves MySQL and HTTP until `shutdown` resolves.
pub async fn serve(
    fe: Arc<Frontend>,
    cfg: FrontendConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = tx.send(true);
    });
    let mut rx1 = rx.clone();
    let mut rx2 = rx.clone();
    let rx3 = rx.clone();
    let rx5 = rx.clone();
    let rx6 = rx.clone();
    let rx7 = rx.clone();
    let mut rx4 = rx;
    let beat_fe = fe.clone();
    let every = Duration::from_secs(cfg.heartbeat_interval_secs.max(1));
    spawn_periodic("the heartbeat", every, every, rx6, move || {
        let fe = beat_fe.clone();
        async move { crate::executor::heartbeat_round(&fe).await }
    });
    // The tablet scheduler: its own task, so long clones never delay a
    // heartbeat.
    let sched_fe = fe.clone();
    let delay = Duration::from_secs(cfg.tablet_repair_delay_secs);
    spawn_periodic("the tablet scheduler", every, every, rx7, move || {
        let fe = sched_fe.clone();
        async move {
            let r = crate::tablet_scheduler::round(&fe, delay).await;
            if r != Default::default() {
                tracing::info!("tablet scheduler: {r:?}");
            }
        }
    });
    if cfg.auto_analyze_interval_secs > 0 {
        let fe = fe.clone();
        let every = Duration::from_secs(cfg.auto_analyze_interval_secs);
        // The first round one period after start, not at once.
        spawn_periodic("automatic ANALYZE", every, every, rx5, move || {
            let fe = fe.clone();
            async move {
                crate::executor::auto_analyze(&fe).await;
            }
        });
    }
    let cleaner_fe = fe.clone();
    let (label_keep, label_clean) = (cfg.label_keep_max_secs, cfg.label_clean_interval_secs);
    let every = Duration::from_secs(label_clean.max(1));
    spawn_periodic("the label cleaner", Duration::ZERO, every, rx3, move || {
        let fe = cleaner_fe.clone();
        async move {
            tethys_common::debug_point::panic_if_hit("FeLabelCleaner.panic");
            if let Err(e) = fe.txn.clean_labels(label_keep) {
                tracing::warn!("label cleaning failed: {e}");
            }
            if let Err(e) = fe.txn.republish().await {
                tracing::warn!("republishing committed transactions failed: {e}");
            }
            if let Err(e) = fe.txn.abort_expired().await {
                tracing::warn!("aborting expired transactions failed: {e}");
            }
        }
    });
    // Every port is bound before any is served, so a port that is taken
    // (or given twice) fails the start instead of leaving a server that
    // answers on some ports only.
    let mysql_listener = mysql::bind(cfg.query_addr).await?;
    let http_listener = tokio::net::TcpListener::bind(cfg.http_addr)
        .await
        .map_err(|e| TethysError::io(format!("binding the FE http port {}", cfg.http_addr), e))?;
    let app = http::router(fe.clone());
    let rpc_listener = tokio::net::TcpListener::bind(cfg.rpc_addr)
        .await
        .map_err(|e| TethysError::io(format!("binding the FE rpc port {}", cfg.rpc_addr), e))?;
    let rpc = tonic::transport::Server::builder()
        .add_service(tonic::service::interceptor::InterceptedService::new(
            tethys_proto::frontend_service_server::FrontendServiceServer::new(
                rpc::FrontendRpc::new(fe.clone()),
            )
            // Runtime filter parts and merged filters (bounded where made).
            .max_decoding_message_size(tethys_common::plan::cross_filters::MAX_MESSAGE)
            .max_encoding_message_size(tethys_common::plan::cross_filters::MAX_MESSAGE),
            // Backends' calls carry the cluster token.
            fe.backends.pool().token().checker(),
        ))
        .serve_with_incoming_shutdown(
            tethys_common::net::nodelay_incoming(rpc_listener),
            async move {
                let _ = rx4.wait_for(|v| *v).await;
            },
        );
    let http = axum::serve(http_listener, app).with_graceful_shutdown(async move {
        let _ = rx2.wait_for(|v| *v).await;
    });
    let mysql = mysql::serve_listener(fe, mysql_listener, async move {
        let _ = rx1.wait_for(|v| *v).await;
    });
    // The first server to fail ends the others: no half-running frontend.
    tokio::try_join!(
        mysql,
        async { http.await.map_err(|e| TethysError::io("FE http server", e)) },
        async {
            rpc.await
                .map_err(|e| TethysError::Internal(format!("FE rpc server: {e}")))
        },
    )?;
    Ok(())
}

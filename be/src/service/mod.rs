//! The backend's network face: the `BackendService` control plane and the
//! Arrow Flight data plane on one gRPC port, plus the BE HTTP port.

mod flight;
mod http;
mod rpc;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_flight::flight_service_server::FlightServiceServer;
use tethys_common::{Result, TethysError};
use tethys_proto::backend_service_server::BackendServiceServer;
use tokio::net::TcpListener;

use crate::exec::FragmentExecutor;
use crate::storage::StorageEngine;

/// How to start a backend.
#[derive(Debug, Clone)]
pub struct BackendConfig {
    /// Storage root (tablets live under `<root>/data`).
    pub root: PathBuf,
    /// gRPC address (control plane and Arrow Flight).
    pub rpc_addr: SocketAddr,
    /// HTTP address.
    pub http_addr: SocketAddr,
    /// Worker threads of the fragment execution pool (0: number of cores).
    pub exec_threads: usize,
    /// The FE's gRPC address (`http://host:port`), for loads this BE coordinates.
    pub fe_rpc_url: Option<String>,
    /// Bytes of decoded pages the storage page cache keeps (0: off).
    pub page_cache_bytes: usize,
    /// Bytes of merge-on-write primary-key indexes kept in memory (0: off).
    pub key_index_cache_bytes: usize,
    /// Background compaction settings.
    pub compaction: crate::storage::engine::CompactionConfig,
    /// Versions a tablet may hold before loads are refused.
    pub max_tablet_versions: usize,
}

/// A running backend's shared state.
pub struct Backend {
    pub engine: Arc<StorageEngine>,
    pub executor: Arc<FragmentExecutor>,
    /// Storage root (error logs live under it too).
    pub root: std::path::PathBuf,
    /// The HTTP address, as other hosts reach it (for error log URLs).
    pub http_addr: SocketAddr,
    /// Clients of the backends this one writes to when coordinating a load.
    pub pool: tethys_common::backend_client::BackendPool,
    /// Open group commits, by table.
    pub group_commits: crate::load::group_commit::GroupCommits,
    fe_channel: Option<tonic::transport::Channel>,
    exec_runtime: Option<tokio::runtime::Runtime>,
    started_ms: i64,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend").finish_non_exhaustive()
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(rt) = self.exec_runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Backend {
    /// Opens the storage and builds the execution pool.
    pub fn open(cfg: &BackendConfig) -> Result<Arc<Backend>> {
        let engine = Arc::new(
            StorageEngine::open(&cfg.root)?
                .with_page_cache(cfg.page_cache_bytes)
                .with_key_index_cache(cfg.key_index_cache_bytes)
                .with_compaction(cfg.compaction)
                .with_max_tablet_versions(cfg.max_tablet_versions),
        );
        engine.start_compaction();
        let executor = Arc::new(FragmentExecutor::new(engine.clone())?);
        let threads = if cfg.exec_threads == 0 {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2)
        } else {
            cfg.exec_threads
        };
        let exec_runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("be-exec")
            .enable_all()
            .build()
            .map_err(|e| TethysError::io("starting the BE execution pool", e))?;
        let fe_channel = match &cfg.fe_rpc_url {
            Some(url) => Some(
                tonic::transport::Endpoint::from_shared(url.clone())
                    .map_err(|e| TethysError::Analysis(format!("bad FE address {url}: {e}")))?
                    .connect_timeout(std::time::Duration::from_secs(5))
                    .connect_lazy(),
            ),
            None => None,
        };
        Ok(Arc::new(Backend {
            engine,
            executor,
            root: cfg.root.clone(),
            http_addr: cfg.http_addr,
            pool: Default::default(),
            group_commits: Default::default(),
            fe_channel,
            exec_runtime: Some(exec_runtime),
            started_ms: chrono::Utc::now().timestamp_millis(),
        }))
    }

    /// A client of the FE service, when this backend knows its FE.
    pub fn frontend(
        &self,
    ) -> Option<
        tethys_proto::frontend_service_client::FrontendServiceClient<tonic::transport::Channel>,
    > {
        self.fe_channel
            .clone()
            .map(tethys_proto::frontend_service_client::FrontendServiceClient::new)
    }

    fn exec_handle(&self) -> Result<tokio::runtime::Handle> {
        self.exec_runtime
            .as_ref()
            .map(|r| r.handle().clone())
            .ok_or_else(|| TethysError::Internal("backend is shutting down".into()))
    }
}

/// A backend's RPC and HTTP ports, bound and listening.
///
/// Binding is a step of its own so that a process hosting an FE too can
/// have the BE's ports accepting connections (queued in the backlog)
/// before the FE first calls the BE, and can report a port that is taken
/// before anything else starts.
pub struct BoundListeners {
    rpc: TcpListener,
    http: TcpListener,
}

/// Binds the backend's RPC and HTTP ports of `cfg`.
pub async fn bind(cfg: &BackendConfig) -> Result<BoundListeners> {
    let rpc = TcpListener::bind(cfg.rpc_addr)
        .await
        .map_err(|e| TethysError::io(format!("binding BE rpc port {}", cfg.rpc_addr), e))?;
    let http = TcpListener::bind(cfg.http_addr)
        .await
        .map_err(|e| TethysError::io(format!("binding BE http port {}", cfg.http_addr), e))?;
    Ok(BoundListeners { rpc, http })
}

/// Serves a backend on its bound ports until `shutdown` resolves.
pub async fn serve(
    backend: Arc<Backend>,
    listeners: BoundListeners,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let BoundListeners {
        rpc: rpc_listener,
        http: http_listener,
    } = listeners;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let mut rx1 = stop_rx.clone();
    let mut rx2 = stop_rx;
    let grpc = tonic::transport::Server::builder()
        .add_service(BackendServiceServer::new(rpc::BackendRpc::new(
            backend.clone(),
        )))
        .add_service(
            FlightServiceServer::new(flight::BackendFlight::new(backend.clone()))
                .max_decoding_message_size(256 << 20)
                .max_encoding_message_size(256 << 20),
        )
        .serve_with_incoming_shutdown(
            tethys_common::net::nodelay_incoming(rpc_listener),
            async move {
                let _ = rx1.wait_for(|v| *v).await;
            },
        );
    let http = axum::serve(http_listener, http::router(backend.clone())).with_graceful_shutdown(
        async move {
            let _ = rx2.wait_for(|v| *v).await;
        },
    );
    // Group commits a crash left in their WALs are committed once the FE answers.
    crate::load::group_commit::replay_wals(backend.clone());
    let (a, b) = tokio::join!(grpc, http);
    a.map_err(|e| TethysError::Backend(format!("BE rpc server: {e}")))?;
    b.map_err(|e| TethysError::io("BE http server", e))?;
    Ok(())
}

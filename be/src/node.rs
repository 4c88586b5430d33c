//! One backend node: its storage engine, its fragment executor and the
//! context its loads run in, opened from a [`BackendConfig`]. The service
//! layer (`service/`) puts it on the network; below it, execution
//! ([`crate::exec`]) and loads ([`crate::load`]) never see the node, only the
//! parts they are given.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tethys_common::{Result, TethysError};

use crate::exec::FragmentExecutor;
use crate::load::LoadContext;
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
    pub compaction: crate::storage::CompactionConfig,
    /// Versions a tablet may hold before loads are refused.
    pub max_tablet_versions: usize,
    /// Bytes a Stream Load body may hold, compressed and decompressed
    /// (Doris' `streaming_load_max_mb`).
    pub max_body_bytes: u64,
}

/// A running backend's shared state.
pub struct Backend {
    pub engine: Arc<StorageEngine>,
    pub executor: Arc<FragmentExecutor>,
    /// What loads coordinated here need of this backend.
    pub loads: Arc<LoadContext>,
    exec_runtime: Option<tokio::runtime::Runtime>,
    pub(crate) started_ms: i64,
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
        crate::load::wal::check_all(&cfg.root)?;
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
            .thread_stack_size(tethys_common::config::RUNTIME_STACK_BYTES)
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
            loads: Arc::new(
                LoadContext::new(cfg.root.clone(), cfg.http_addr, fe_channel)
                    .with_max_body_bytes(cfg.max_body_bytes),
            ),
            exec_runtime: Some(exec_runtime),
            started_ms: chrono::Utc::now().timestamp_millis(),
        }))
    }

    pub(crate) fn exec_handle(&self) -> Result<tokio::runtime::Handle> {
        self.exec_runtime
            .as_ref()
            .map(|r| r.handle().clone())
            .ok_or_else(|| TethysError::Internal("backend is shutting down".into()))
    }
}

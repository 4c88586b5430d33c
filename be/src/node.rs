//! One backend node: its storage engine, its fragment executor and the
//! context its loads run in, opened from a [`BackendConfig`]. The service
//! layer (`service/`) puts it on the network; below it, execution
//! ([`crate::exec`]) and loads ([`crate::load`]) never see the node, only the
//! parts they are given.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tethys_common::{Result, TethysError};

use crate::cluster::Membership;
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
    /// The FE's gRPC address (`http://host:port`), for loads this BE
    /// coordinates: given in one process (standalone); a `tethys be`
    /// learns it from the FE's heartbeats.
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
    /// The cluster this backend joined (`cluster.rs`).
    pub membership: Membership,
    /// Cancellation of the queries whose stages run here.
    pub cancels: Arc<crate::exec::cancel::QueryCancels>,
    /// Where the HTTP service listens (the FE learns it by heartbeat).
    pub http_port: u16,
    pub(crate) root: PathBuf,
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
        std::fs::create_dir_all(&cfg.root)
            .map_err(|e| TethysError::io(format!("creating {}", cfg.root.display()), e))?;
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
        let loads = LoadContext::new(cfg.root.clone(), cfg.http_addr)
            .with_max_body_bytes(cfg.max_body_bytes);
        // One token: the services check it, the pool's and FE client's
        // calls carry it.
        let membership = Membership::open(&cfg.root, loads.pool.token().clone())?;
        if let Some(url) = &cfg.fe_rpc_url {
            loads.set_frontend(url)?;
        }
        Ok(Arc::new(Backend {
            engine,
            executor,
            loads: Arc::new(loads),
            membership,
            cancels: Default::default(),
            http_port: cfg.http_addr.port(),
            root: cfg.root.clone(),
            exec_runtime: Some(exec_runtime),
            started_ms: chrono::Utc::now().timestamp_millis(),
        }))
    }

    /// Bytes in all and available of the data directory's file system
    /// (0, 0 when it cannot be asked).
    pub(crate) fn disk_capacity(&self) -> (i64, i64) {
        match rustix::fs::statvfs(&self.root) {
            Ok(s) => {
                let unit = s.f_frsize.max(1);
                let bytes =
                    |blocks: u64| i64::try_from(blocks.saturating_mul(unit)).unwrap_or(i64::MAX);
                (bytes(s.f_blocks), bytes(s.f_bavail))
            }
            Err(_) => (0, 0),
        }
    }

    pub(crate) fn exec_handle(&self) -> Result<tokio::runtime::Handle> {
        self.exec_runtime
            .as_ref()
            .map(|r| r.handle().clone())
            .ok_or_else(|| TethysError::Internal("backend is shutting down".into()))
    }
}

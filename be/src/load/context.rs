//! What a load needs of the backend it runs on: where its error logs and
//! group-commit WALs live, how other hosts reach this one, the clients of the
//! backends it ships rows to, its frontend, and the open group commits.
//! The node (`node.rs`) builds one and the service hands it to the load
//! handlers; loads never see the rest of the backend.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tethys_common::backend_client::BackendPool;
use tethys_common::{Result, TethysError};
use tethys_proto::frontend_service_client::FrontendServiceClient;
use tonic::transport::Channel;

use super::group_commit::GroupCommits;

/// A client of the FE's `FrontendService`, its calls carrying the cluster
/// token.
pub type FrontendClient = FrontendServiceClient<
    tonic::service::interceptor::InterceptedService<Channel, tethys_common::token::Token>,
>;

/// The backend as loads see it.
#[derive(Debug)]
pub struct LoadContext {
    /// Storage root: error logs and group-commit WALs live under it.
    pub root: PathBuf,
    /// The HTTP address, as other hosts reach it (for error log URLs).
    pub http_addr: SocketAddr,
    /// Clients of the backends a load coordinated here ships rows to.
    pub pool: Arc<BackendPool>,
    /// Open group commits, by table.
    pub group_commits: GroupCommits,
    /// Bytes a body may hold, compressed and decompressed.
    pub max_body_bytes: u64,
    /// The FE's address and a channel to it: given at start (standalone)
    /// or learnt from the FE's heartbeats.
    fe: Mutex<Option<(String, Channel)>>,
    /// This backend's id, as the FE's heartbeats name it (0: not yet).
    backend_id: std::sync::atomic::AtomicI64,
}

impl LoadContext {
    pub fn new(root: PathBuf, http_addr: SocketAddr) -> Self {
        LoadContext {
            root,
            http_addr,
            pool: Default::default(),
            group_commits: Default::default(),
            max_body_bytes: super::decompress::MAX_BODY_BYTES,
            fe: Mutex::new(None),
            backend_id: Default::default(),
        }
    }

    /// Where the FE's RPC service listens (`http://host:port`); a new
    /// address replaces the old one (an FE that moved).
    pub fn set_frontend(&self, url: &str) -> Result<()> {
        let mut fe = self.fe.lock().unwrap_or_else(|p| p.into_inner());
        if fe.as_ref().is_some_and(|(u, _)| u == url) {
            return Ok(());
        }
        let channel = tonic::transport::Endpoint::from_shared(url.to_string())
            .map_err(|e| TethysError::Analysis(format!("bad FE address {url}: {e}")))?
            .connect_timeout(std::time::Duration::from_secs(5))
            .connect_lazy();
        *fe = Some((url.to_string(), channel));
        Ok(())
    }

    /// Records this backend's id (from a heartbeat).
    pub fn set_backend_id(&self, id: i64) {
        self.backend_id
            .store(id, std::sync::atomic::Ordering::Relaxed);
    }

    /// This backend's id (0 before the first heartbeat).
    pub fn backend_id(&self) -> i64 {
        self.backend_id.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bounds a load's body to `bytes`, compressed and decompressed.
    pub fn with_max_body_bytes(mut self, bytes: u64) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// A client of the FE service, when this backend knows its FE.
    pub fn frontend(&self) -> Option<FrontendClient> {
        let fe = self.fe.lock().unwrap_or_else(|p| p.into_inner());
        fe.as_ref().map(|(_, c)| {
            FrontendServiceClient::with_interceptor(c.clone(), self.pool.token().clone())
        })
    }

    /// The FE client, or the error a load reports without one.
    pub fn require_frontend(&self) -> Result<FrontendClient> {
        self.frontend()
            .ok_or_else(|| TethysError::Internal("this backend does not know its frontend".into()))
    }
}

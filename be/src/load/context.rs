//! What a load needs of the backend it runs on: where its error logs and
//! group-commit WALs live, how other hosts reach this one, the clients of the
//! backends it ships rows to, its frontend, and the open group commits.
//! The node (`node.rs`) builds one and the service hands it to the load
//! handlers; loads never see the rest of the backend.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tethys_common::backend_client::BackendPool;
use tethys_common::{Result, TethysError};
use tethys_proto::frontend_service_client::FrontendServiceClient;
use tonic::transport::Channel;

use super::group_commit::GroupCommits;

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
    fe_channel: Option<Channel>,
}

impl LoadContext {
    pub fn new(root: PathBuf, http_addr: SocketAddr, fe_channel: Option<Channel>) -> Self {
        LoadContext {
            root,
            http_addr,
            pool: Default::default(),
            group_commits: Default::default(),
            max_body_bytes: super::decompress::MAX_BODY_BYTES,
            fe_channel,
        }
    }

    /// Bounds a load's body to `bytes`, compressed and decompressed.
    pub fn with_max_body_bytes(mut self, bytes: u64) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// A client of the FE service, when this backend knows its FE.
    pub fn frontend(&self) -> Option<FrontendServiceClient<Channel>> {
        self.fe_channel.clone().map(FrontendServiceClient::new)
    }

    /// The FE client, or the error a load reports without one.
    pub fn require_frontend(&self) -> Result<FrontendServiceClient<Channel>> {
        self.frontend()
            .ok_or_else(|| TethysError::Internal("this backend does not know its frontend".into()))
    }
}

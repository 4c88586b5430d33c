//! The gRPC channels datafusion-distributed's calls go over (the FE's to
//! the tasks of a query's stages, a task's to the stages it reads): one per
//! backend for the life of the process, shared by every query.
//!
//! datafusion-distributed's own resolver keeps channels per `RuntimeEnv`,
//! and every statement on the FE and every task on a BE has its own (its
//! memory pool): each query opened a TCP connection and an HTTP/2 session
//! from the FE to each backend and from each task to each backend it
//! read, and kept them until 256 runtimes later (ten queries on three BEs:
//! 12 -> 96 connections, `tests/mpp.rs`). Query times did not measurably
//! move with it (benches/results/ssb-sf1-be3-2026-12-06-132749-notes.md).
//!
//! Invariant: one shared connection must not let one query stall another.
//! HTTP/2 bounds what a receiver buffers per stream and per connection;
//! data a consumer has not read yet (a join's probe side, a slow client)
//! holds both. The connection window is therefore as large as HTTP/2
//! allows, so only the stream window ([`STREAM_WINDOW`], hyper's default)
//! bounds what an unread stream holds, and a stalled stream never takes the
//! window the others need.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use datafusion::error::DataFusionError;
use datafusion_distributed::grpc::{BoxCloneSyncChannel, create_worker_client};
use datafusion_distributed::{ChannelResolver, WorkerChannel};
use tonic::transport::{Channel, Endpoint};
use url::Url;

/// What one stream may hold unread, bytes (hyper's default).
pub const STREAM_WINDOW: u32 = 2 << 20;

/// The connection's window: HTTP/2's largest, so it never binds.
const CONNECTION_WINDOW: u32 = (1 << 31) - 1;

/// Channels to workers by URL, connected on first use and reconnected by
/// tonic when a backend comes back; clones share them (a process makes one
/// and gives each session a clone).
#[derive(Clone, Debug, Default)]
pub struct WorkerChannels(Arc<Mutex<HashMap<Url, Channel>>>);

impl WorkerChannels {
    /// The channel to `url`, made once.
    pub fn channel(&self, url: &Url) -> Result<Channel, DataFusionError> {
        let mut channels = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = channels.get(url) {
            return Ok(c.clone());
        }
        let channel = Endpoint::from_shared(url.to_string())
            .map_err(|e| DataFusionError::Configuration(format!("worker address {url}: {e}")))?
            .connect_timeout(Duration::from_secs(5))
            .tcp_nodelay(true)
            .initial_stream_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .connect_lazy();
        channels.insert(url.clone(), channel.clone());
        Ok(channel)
    }

    /// How many workers there are channels to.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[async_trait::async_trait]
impl ChannelResolver for WorkerChannels {
    async fn get_worker_client_for_url(
        &self,
        url: &Url,
    ) -> Result<Box<dyn WorkerChannel>, DataFusionError> {
        let channel = self.channel(url)?;
        Ok(create_worker_client(BoxCloneSyncChannel::new(channel)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_worker_gets_one_channel_however_often_asked() {
        let channels = WorkerChannels::default();
        let a = Url::parse("http://127.0.0.1:1").unwrap();
        let b = Url::parse("http://127.0.0.1:2").unwrap();
        for _ in 0..3 {
            for url in [&a, &b] {
                channels.get_worker_client_for_url(url).await.unwrap();
            }
        }
        assert_eq!(channels.len(), 2);
    }
}

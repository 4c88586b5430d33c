//! Clients of backends (used by the FE, and by a BE coordinating a load):
//! the `BackendService` control plane and the Arrow Flight data plane, over
//! lazily connected gRPC channels.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::{Result, TethysError};
use arrow::array::RecordBatch;
use arrow_flight::FlightDescriptor;
use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_client::FlightServiceClient;
use futures::{StreamExt, TryStreamExt};
use prost::Message;
use tethys_proto::backend_service_client::BackendServiceClient;
use tethys_proto::{
    ExecFragmentRequest, GroupCommitWriteRequest, GroupCommitWriteResponse, WriteRequest,
    WriteResponse,
};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

use crate::token::Token;

/// A channel that adds the cluster token to every call.
type Authed = InterceptedService<Channel, Token>;

/// The `BackendService` calls, one typed method each with one error
/// mapping ([`BackendClient::err`]): the only way the FE asks a backend
/// for anything but fragment rows and writes.
macro_rules! control_calls {
    ($($(#[$doc:meta])* $name:ident($req:ident) -> $resp:ident;)*) => {
        impl BackendClient {
            $(
                $(#[$doc])*
                pub async fn $name(&self, req: tethys_proto::$req) -> Result<tethys_proto::$resp> {
                    Ok(self.rpc().$name(req).await.map_err(|s| self.err(s))?.into_inner())
                }
            )*
        }
    };
}

control_calls! {
    /// Whether the backend is alive, with its disk use.
    heartbeat(HeartbeatRequest) -> HeartbeatResponse;
    /// Creates tablets (idempotent).
    create_tablets(CreateTabletsRequest) -> CreateTabletsResponse;
    /// Drops tablets.
    drop_tablets(DropTabletsRequest) -> DropTabletsResponse;
    /// Makes a committed transaction's rowsets visible.
    publish_version(PublishVersionRequest) -> PublishVersionResponse;
    /// Drops a transaction's unpublished rowsets.
    abort_txn(AbortTxnRequest) -> AbortTxnResponse;
    /// The transactions the backend holds unpublished rowsets of.
    pending_txns(PendingTxnsRequest) -> PendingTxnsResponse;
    /// Row counts and sizes of tablets.
    tablet_stats(TabletStatsRequest) -> TabletStatsResponse;
    /// Compacts tablets now.
    compact(CompactRequest) -> CompactResponse;
    /// Writes a DELETE's predicate rowset.
    write_delete(WriteDeleteRequest) -> WriteDeleteResponse;
    /// Copies a tablet from another backend.
    clone_tablet(CloneTabletRequest) -> CloneTabletResponse;
    /// Snapshots a tablet for a clone.
    make_snapshot(MakeSnapshotRequest) -> MakeSnapshotResponse;
    /// A chunk of a snapshot's file.
    read_snapshot(ReadSnapshotRequest) -> ReadSnapshotResponse;
    /// Drops a snapshot.
    release_snapshot(ReleaseSnapshotRequest) -> ReleaseSnapshotResponse;
    /// Stops what remains of an ended query's stages.
    cancel_query(CancelQueryRequest) -> CancelQueryResponse;
}

/// Flight descriptor path of a group-commit write.
pub const GROUP_COMMIT_PATH: &str = "group_commit";

/// Where a backend listens.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BackendInfo {
    pub id: i64,
    pub host: String,
    pub rpc_port: u16,
    pub http_port: u16,
}

impl BackendInfo {
    pub fn rpc_url(&self) -> String {
        format!("http://{}:{}", self.host, self.rpc_port)
    }
}

const MAX_MESSAGE: usize = 256 << 20;

/// Clients of one backend.
#[derive(Debug, Clone)]
pub struct BackendClient {
    pub info: BackendInfo,
    channel: Channel,
    token: Token,
    suspects: Suspects,
}

/// Backends a call found unreachable, and when: the FE stops choosing them
/// before the next heartbeat says so (which clears them if they answer).
type Suspects = Arc<Mutex<HashMap<i64, std::time::Instant>>>;

impl BackendClient {
    fn new(info: BackendInfo, token: Token, suspects: Suspects) -> Result<Self> {
        let channel = Endpoint::from_shared(info.rpc_url())
            .map_err(|e| {
                TethysError::Backend(format!("bad backend address {}: {e}", info.rpc_url()))
            })?
            .connect_timeout(std::time::Duration::from_secs(5))
            .tcp_nodelay(true)
            .connect_lazy();
        Ok(BackendClient {
            info,
            channel,
            token,
            suspects,
        })
    }

    /// The control-plane client; callers use the typed calls below.
    fn rpc(&self) -> BackendServiceClient<Authed> {
        BackendServiceClient::with_interceptor(self.channel.clone(), self.token.clone())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    fn flight(&self) -> FlightServiceClient<Authed> {
        FlightServiceClient::with_interceptor(self.channel.clone(), self.token.clone())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    /// Runs one partition of a fragment and streams its batches; the
    /// fragment's counters, which follow its last batch, go to `on_profile`.
    /// They are the stream's end marker: a stream that ends without them
    /// (the backend stopped mid-fragment) ends in an error, never as a
    /// shorter answer.
    pub async fn execute_fragment(
        &self,
        req: ExecFragmentRequest,
        on_profile: impl Fn(crate::plan::FragmentProfile) + Send + 'static,
    ) -> Result<FlightRecordBatchStream> {
        let ticket = arrow_flight::Ticket {
            ticket: req.encode_to_vec().into(),
        };
        let resp = self
            .flight()
            .do_get(ticket)
            .await
            .map_err(|s| self.err(s))?;
        let ended = Arc::new(AtomicBool::new(false));
        let seen_end = ended.clone();
        let addr = format!(
            "backend {} at {}:{}",
            self.info.id, self.info.host, self.info.rpc_port
        );
        let unfinished = futures::stream::once(async move {
            (!ended.load(Ordering::Acquire)).then(|| {
                Err(FlightError::ExternalError(Box::new(TethysError::Backend(
                    format!("the fragment's stream from {addr} ended before the fragment finished"),
                ))))
            })
        })
        .filter_map(futures::future::ready);
        let stream = resp
            .into_inner()
            .map_err(FlightError::from)
            .try_filter(move |data| {
                let profile = data
                    .data_header
                    .is_empty()
                    .then(|| crate::plan::FragmentProfile::decode(&data.app_metadata))
                    .flatten();
                let is_profile = profile.is_some();
                if let Some(p) = profile {
                    seen_end.store(true, Ordering::Release);
                    on_profile(p);
                }
                futures::future::ready(!is_profile)
            })
            .chain(unfinished);
        Ok(FlightRecordBatchStream::new_from_flight_data(stream))
    }

    /// Sends rows of a transaction to one tablet; `rows` says what they are
    /// (`WriteRequest::delete_rows`, `partial_columns`; the ids are ignored).
    pub async fn write(
        &self,
        txn_id: i64,
        tablet_id: i64,
        batches: Vec<RecordBatch>,
        rows: &WriteRequest,
    ) -> Result<WriteResponse> {
        let desc = FlightDescriptor::new_cmd(
            WriteRequest {
                txn_id,
                tablet_id,
                ..rows.clone()
            }
            .encode_to_vec(),
        );
        let meta = self.put(desc, batches).await?;
        WriteResponse::decode(meta)
            .map_err(|e| TethysError::Backend(format!("bad write response: {e}")))
    }

    /// Sends the rows of an INSERT to the backend's group commit of the table.
    pub async fn group_commit_write(
        &self,
        req: GroupCommitWriteRequest,
        batches: Vec<RecordBatch>,
    ) -> Result<GroupCommitWriteResponse> {
        let mut desc = FlightDescriptor::new_cmd(req.encode_to_vec());
        desc.path = vec![GROUP_COMMIT_PATH.to_string()];
        let meta = self.put(desc, batches).await?;
        GroupCommitWriteResponse::decode(meta)
            .map_err(|e| TethysError::Backend(format!("bad group commit response: {e}")))
    }

    /// A Flight DoPut of `batches`; returns the result's app metadata.
    async fn put(
        &self,
        desc: FlightDescriptor,
        batches: Vec<RecordBatch>,
    ) -> Result<prost::bytes::Bytes> {
        let input = futures::stream::iter(batches.into_iter().map(Ok));
        let data = FlightDataEncoderBuilder::new()
            .with_flight_descriptor(Some(desc))
            .build(input)
            .filter_map(|r| async move { r.ok() });
        let resp = self.flight().do_put(data).await.map_err(|s| self.err(s))?;
        let mut results = resp.into_inner();
        let first = results
            .message()
            .await
            .map_err(|s| self.err(s))?
            .ok_or_else(|| TethysError::Backend("write returned no result".into()))?;
        Ok(first.app_metadata)
    }

    /// Wraps a backend status with the backend's address.
    pub fn err(&self, s: tonic::Status) -> TethysError {
        match s.code() {
            tonic::Code::Cancelled => TethysError::Cancelled,
            tonic::Code::DataLoss => {
                TethysError::Corruption(format!("({}) {}", self.info.host, s.message()))
            }
            tonic::Code::Unavailable => {
                self.suspects
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(self.info.id, std::time::Instant::now());
                self.unavailable(&s)
            }
            _ => TethysError::Backend(format!("({}) {}", self.info.host, s.message())),
        }
    }

    fn unavailable(&self, s: &tonic::Status) -> TethysError {
        TethysError::Backend(format!(
            "backend {} at {}:{} is unavailable: {}",
            self.info.id,
            self.info.host,
            self.info.rpc_port,
            s.message()
        ))
    }
}

/// All backend clients, by backend id; their calls carry `token`.
#[derive(Debug, Default)]
pub struct BackendPool {
    clients: Mutex<HashMap<i64, Arc<BackendClient>>>,
    token: Token,
    suspects: Suspects,
}

impl BackendPool {
    /// The cluster token this pool's calls carry (set it once known).
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// Whether a call found backend `id` unreachable since it last
    /// answered a heartbeat.
    pub fn is_suspect(&self, id: i64) -> bool {
        self.suspects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&id)
    }

    /// Whether a call found some backend unreachable after `t`.
    pub fn suspected_since(&self, t: std::time::Instant) -> bool {
        self.suspects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .any(|at| *at >= t)
    }

    /// Backend `id` answered (a heartbeat): no longer suspect.
    pub fn clear_suspect(&self, id: i64) {
        self.suspects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }

    /// The client of a backend, connecting lazily.
    pub fn get(&self, info: &BackendInfo) -> Result<Arc<BackendClient>> {
        let mut m = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = m.get(&info.id)
            && c.info == *info
        {
            return Ok(c.clone());
        }
        let c = Arc::new(BackendClient::new(
            info.clone(),
            self.token.clone(),
            self.suspects.clone(),
        )?);
        m.insert(info.id, c.clone());
        Ok(c)
    }
}

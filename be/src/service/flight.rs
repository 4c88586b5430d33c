//! Arrow Flight data plane of a backend.
//!
//! * `DoGet(ticket = ExecFragmentRequest)`: run one partition of a fragment and
//!   stream its batches. The fragment runs on the backend's execution pool;
//!   dropping the stream (client gone, query cancelled) stops it.
//! * `DoPut(descriptor.cmd = WriteRequest)`: append the streamed batches to a
//!   tablet's pending rowset of a transaction, one segment per flush.

use std::pin::Pin;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::FlightService;
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use futures::{Stream, StreamExt, TryStreamExt};
use prost::Message;
use tethys_common::backend_client::GROUP_COMMIT_PATH;
use tethys_common::config::SEGMENT_FLUSH_ROWS;
use tethys_common::plan::FragmentProfile;
use tethys_common::{TethysError, debug_point};
use tethys_proto::{
    ExecFragmentRequest, GroupCommitWriteRequest, GroupCommitWriteResponse, TxnStatus,
    WriteRequest, WriteResponse,
};

use crate::load::{GroupLoad, GroupMode};
use tethys_common::ship::refuse_unroutable;
use tonic::{Request, Response, Status, Streaming};

use crate::node::Backend;
use crate::storage::WriteKind;

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

pub struct BackendFlight {
    backend: Arc<Backend>,
}

impl BackendFlight {
    pub fn new(backend: Arc<Backend>) -> Self {
        BackendFlight { backend }
    }
}

fn to_flight_err(e: impl Into<TethysError>) -> FlightError {
    FlightError::Tonic(Box::new(Status::from(e.into())))
}

async fn flush(
    backend: &Arc<Backend>,
    wr: &WriteRequest,
    batches: Vec<RecordBatch>,
) -> Result<u64, Status> {
    let b = backend.clone();
    let wr = wr.clone();
    tokio::task::spawn_blocking(move || {
        let kind = if wr.delete_rows {
            WriteKind::Deletes
        } else if !wr.partial_columns.is_empty() {
            let given = wr.partial_columns.iter().map(|&c| c as usize).collect();
            WriteKind::Partial(given, wr.partial_strict)
        } else {
            WriteKind::Rows
        };
        b.engine.write_kind(wr.txn_id, wr.tablet_id, &batches, kind)
    })
    .await
    .map_err(|e| Status::internal(format!("write task failed: {e}")))?
    .map_err(Status::from)
}

/// The rows of an INSERT under `SET group_commit`: already in the table's
/// schema and checked by the FE; rows that fit no partition fail the INSERT,
/// as in strict mode.
async fn group_commit_put(
    backend: &Arc<Backend>,
    req: GroupCommitWriteRequest,
    mut batches: FlightRecordBatchStream,
) -> tethys_common::Result<GroupCommitWriteResponse> {
    let mode = match req.mode() {
        GroupMode::Unspecified => {
            return Err(TethysError::Analysis(
                "a group commit write needs sync_mode or async_mode".into(),
            ));
        }
        m => m,
    };
    let plan = req.plan.unwrap_or_default();
    let mut group = GroupLoad::join(&backend.loads, &plan, None).await?;
    let mut rows = 0i64;
    while let Some(b) = batches.next().await {
        let b = b.map_err(|e| TethysError::Backend(format!("receiving INSERT rows: {e}")))?;
        refuse_unroutable(&group.append(&b).await?)?;
        rows += b.num_rows() as i64;
    }
    let (txn_id, label) = group.txn();
    let label = label.to_string();
    let timeout = std::time::Duration::from_secs(req.timeout_secs.max(1) as u64);
    group.finish(mode, timeout).await?;
    let status = match mode {
        GroupMode::Sync => TxnStatus::Visible,
        _ => TxnStatus::Prepare,
    };
    Ok(GroupCommitWriteResponse {
        txn_id,
        label,
        status: status.into(),
        rows,
    })
}

#[tonic::async_trait]
impl FlightService for BackendFlight {
    type HandshakeStream = BoxStream<HandshakeResponse>;
    type ListFlightsStream = BoxStream<FlightInfo>;
    type DoGetStream = BoxStream<FlightData>;
    type DoPutStream = BoxStream<PutResult>;
    type DoExchangeStream = BoxStream<FlightData>;
    type DoActionStream = BoxStream<arrow_flight::Result>;
    type ListActionsStream = BoxStream<ActionType>;

    async fn do_get(
        &self,
        request: Request<Ticket>,
    ) -> Result<Response<Self::DoGetStream>, Status> {
        let req = ExecFragmentRequest::decode(request.into_inner().ticket)
            .map_err(|e| Status::invalid_argument(format!("bad fragment ticket: {e}")))?;
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<RecordBatch, FlightError>>(2);
        let backend = self.backend.clone();
        let handle = backend.exec_handle().map_err(Status::from)?;
        // The fragment's counters follow its last batch, as one message
        // with no Arrow data and the profile in `app_metadata`: the end
        // marker without which the FE takes the stream as broken.
        let (profile_tx, profile_rx) = tokio::sync::oneshot::channel::<FragmentProfile>();
        handle.spawn(async move {
            let run = async {
                let (plan, mut stream) = match backend.executor.execute(&req) {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = tx.send(Err(to_flight_err(e))).await;
                        return;
                    }
                };
                let mut sent = 0usize;
                while let Some(item) = stream.next().await {
                    if sent == 1 {
                        debug_point::panic_if_hit("BeFragment.panic");
                    }
                    let item = item.map_err(to_flight_err);
                    let stop = item.is_err();
                    if tx.send(item).await.is_err() || stop {
                        return;
                    }
                    sent += 1;
                }
                drop(stream);
                let _ = profile_tx.send(FragmentProfile::of_plan(&plan));
            };
            if let Err(e) = tethys_common::panic::contain("the fragment", run).await {
                let _ = tx.send(Err(to_flight_err(e))).await;
            }
        });
        let batches = tokio_stream::wrappers::ReceiverStream::new(rx);
        let flight = FlightDataEncoderBuilder::new()
            .build(batches)
            .map_err(Status::from);
        let profile = futures::stream::once(profile_rx).filter_map(|p| async move {
            p.ok().map(|p| {
                Ok(FlightData {
                    app_metadata: p.encode().into(),
                    ..Default::default()
                })
            })
        });
        Ok(Response::new(Box::pin(flight.chain(profile))))
    }

    async fn do_put(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        let mut input = request.into_inner();
        let first = input
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("empty write stream"))?;
        let desc: FlightDescriptor = first
            .flight_descriptor
            .clone()
            .ok_or_else(|| Status::invalid_argument("write stream without a descriptor"))?;
        if desc.path.first().map(String::as_str) == Some(GROUP_COMMIT_PATH) {
            let req = GroupCommitWriteRequest::decode(desc.cmd)
                .map_err(|e| Status::invalid_argument(format!("bad group commit request: {e}")))?;
            let data = futures::stream::once(async move { Ok(first) })
                .chain(input)
                .map_err(FlightError::from);
            let batches = FlightRecordBatchStream::new_from_flight_data(data);
            let r = group_commit_put(&self.backend, req, batches)
                .await
                .map_err(Status::from)?;
            let result = PutResult {
                app_metadata: r.encode_to_vec().into(),
            };
            return Ok(Response::new(Box::pin(futures::stream::once(async move {
                Ok(result)
            }))));
        }
        let wr = WriteRequest::decode(desc.cmd)
            .map_err(|e| Status::invalid_argument(format!("bad write request: {e}")))?;
        let data = futures::stream::once(async move { Ok(first) })
            .chain(input)
            .map_err(FlightError::from);
        let mut batches = FlightRecordBatchStream::new_from_flight_data(data);
        let mut buf = Vec::new();
        let (mut buffered, mut rows, mut bytes) = (0usize, 0i64, 0i64);
        while let Some(b) = batches.next().await {
            let b = b.map_err(Status::from)?;
            buffered += b.num_rows();
            rows += b.num_rows() as i64;
            buf.push(b);
            if buffered >= SEGMENT_FLUSH_ROWS {
                bytes += flush(&self.backend, &wr, std::mem::take(&mut buf)).await? as i64;
                buffered = 0;
            }
        }
        if !buf.is_empty() {
            bytes += flush(&self.backend, &wr, buf).await? as i64;
        }
        let result = PutResult {
            app_metadata: WriteResponse { rows, bytes }.encode_to_vec().into(),
        };
        Ok(Response::new(Box::pin(futures::stream::once(async move {
            Ok(result)
        }))))
    }

    async fn handshake(
        &self,
        _request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        Err(Status::unimplemented("handshake is not used by Tethys"))
    }

    async fn list_flights(
        &self,
        _request: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        Err(Status::unimplemented("list_flights is not used by Tethys"))
    }

    async fn get_flight_info(
        &self,
        _request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        Err(Status::unimplemented(
            "get_flight_info is not used by Tethys",
        ))
    }

    async fn poll_flight_info(
        &self,
        _request: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        Err(Status::unimplemented(
            "poll_flight_info is not used by Tethys",
        ))
    }

    async fn get_schema(
        &self,
        _request: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        Err(Status::unimplemented("get_schema is not used by Tethys"))
    }

    async fn do_exchange(
        &self,
        _request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        Err(Status::unimplemented(
            "do_exchange is not used by Tethys yet",
        ))
    }

    async fn do_action(
        &self,
        _request: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        Err(Status::unimplemented("do_action is not used by Tethys"))
    }

    async fn list_actions(
        &self,
        _request: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        Err(Status::unimplemented("list_actions is not used by Tethys"))
    }
}

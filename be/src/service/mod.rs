//! The backend's network face: the `BackendService` control plane and the
//! Arrow Flight data plane on one gRPC port, plus the BE HTTP port. Each
//! call is decoded here and handed to the node ([`crate::node::Backend`]).

mod flight;
mod http;
mod rpc;
pub(crate) mod worker;

use std::sync::Arc;

use arrow_flight::flight_service_server::FlightServiceServer;
use tethys_common::{Result, TethysError};
use tethys_proto::backend_service_server::BackendServiceServer;
use tokio::net::TcpListener;
use tonic::service::interceptor::InterceptedService;

use crate::node::{Backend, BackendConfig};

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
    // Every call must carry the cluster's token once the backend joined.
    let checked = backend.membership.token().checker();
    let grpc = tonic::transport::Server::builder()
        .add_service(InterceptedService::new(
            BackendServiceServer::new(rpc::BackendRpc::new(backend.clone())),
            checked.clone(),
        ))
        .add_service(InterceptedService::new(
            worker::worker(
                backend.engine.clone(),
                backend.loads.clone(),
                backend.cancels.clone(),
            )
            .into_worker_server()
            .max_decoding_message_size(2 * worker::MAX_MESSAGE)
            .max_encoding_message_size(2 * worker::MAX_MESSAGE),
            checked.clone(),
        ))
        .add_service(InterceptedService::new(
            FlightServiceServer::new(flight::BackendFlight::new(backend.clone()))
                .max_decoding_message_size(256 << 20)
                .max_encoding_message_size(256 << 20),
            checked,
        ))
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
    crate::load::group_commit::replay_wals(backend.loads.clone());
    let (a, b) = tokio::join!(grpc, http);
    a.map_err(|e| TethysError::Backend(format!("BE rpc server: {e}")))?;
    b.map_err(|e| TethysError::io("BE http server", e))?;
    Ok(())
}

//! The MySQL port: binds it and accepts clients, one task per connection
//! ([`super::connection`]).

use std::net::SocketAddr;
use std::sync::Arc;

use tethys_common::{Result, TethysError};
use tokio::net::TcpListener;

use crate::frontend::Frontend;

/// Binds the MySQL port (the frontend binds every port before serving any).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| TethysError::io(format!("binding the MySQL port {addr}"), e))
}

/// Accepts MySQL clients on an already bound listener.
pub async fn serve_listener(
    fe: Arc<Frontend>,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<()> {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            r = listener.accept() => {
                let (stream, peer) = match r {
                    Ok(x) => x,
                    Err(e) => {
                        tracing::warn!("accept failed: {e}");
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let fe = fe.clone();
                tokio::spawn(async move { super::connection::serve(fe, stream, peer).await });
            }
        }
    }
}

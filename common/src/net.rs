//! Accepting gRPC connections with `TCP_NODELAY`.
//!
//! tonic ignores its own `tcp_nodelay` setting when it is given a stream of
//! accepted connections, and without it the small request/response frames
//! of a fragment or an RPC wait out the peer's delayed ACK (about 40 ms per
//! round trip on Linux).

use futures::{Stream, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_stream::wrappers::TcpListenerStream;

/// The connections accepted on `listener`, each with `TCP_NODELAY` set.
pub fn nodelay_incoming(listener: TcpListener) -> impl Stream<Item = std::io::Result<TcpStream>> {
    TcpListenerStream::new(listener).map(|conn| {
        let conn = conn?;
        conn.set_nodelay(true)?;
        Ok(conn)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn accepted_connections_do_not_wait_for_delayed_acks() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut incoming = Box::pin(nodelay_incoming(listener));
        let _client = TcpStream::connect(addr).await.unwrap();
        let accepted = incoming.next().await.unwrap().unwrap();
        assert!(accepted.nodelay().unwrap());
    }
}

//! The cluster token: a secret the FE makes with the cluster and gives each
//! backend in its heartbeats. Every FE -> BE, BE -> BE and BE -> FE call
//! carries it (`x-tethys-token`, added by [`Token`] as a client
//! interceptor), and every service checks it ([`Token::check`] as a server
//! interceptor): a process of another cluster, or anything else that
//! reaches the port, is refused. A backend that has joined no cluster yet
//! holds no token and takes calls (it holds no cluster's data); its first
//! heartbeat makes it join.

use std::sync::{Arc, RwLock};

use tonic::metadata::AsciiMetadataValue;
use tonic::service::Interceptor;
use tonic::{Request, Status};

/// Metadata key of the token.
pub const TOKEN_KEY: &str = "x-tethys-token";

/// The token this process sends and expects (empty: none yet).
#[derive(Debug, Clone, Default)]
pub struct Token(Arc<RwLock<Option<AsciiMetadataValue>>>);

impl Token {
    /// A random token for a new cluster: 32 hex digits.
    pub fn generate() -> String {
        format!(
            "{:016x}{:016x}",
            rand::random::<u64>(),
            rand::random::<u64>()
        )
    }

    /// Sets the token (from the catalog, or a heartbeat). A token that is no
    /// valid metadata value is refused.
    pub fn set(&self, token: &str) -> crate::Result<()> {
        let v = AsciiMetadataValue::try_from(token)
            .map_err(|_| crate::TethysError::Internal(format!("'{token}' is no cluster token")))?;
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = (!token.is_empty()).then_some(v);
        Ok(())
    }

    fn current(&self) -> Option<AsciiMetadataValue> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether a token is set.
    pub fn is_set(&self) -> bool {
        self.current().is_some()
    }

    /// A server's check: the call must carry this token (any call passes
    /// while none is set).
    pub fn check(&self, req: Request<()>) -> Result<Request<()>, Status> {
        let Some(want) = self.current() else {
            return Ok(req);
        };
        match req.metadata().get(TOKEN_KEY) {
            Some(got) if got == want => Ok(req),
            Some(_) => Err(Status::unauthenticated(
                "the call carries another cluster's token: this process belongs to another cluster",
            )),
            None => Err(Status::unauthenticated(
                "the call carries no cluster token: only the processes of this cluster may call",
            )),
        }
    }

    /// The server interceptor of [`Token::check`].
    pub fn checker(&self) -> impl Interceptor + Clone + use<> {
        let me = self.clone();
        move |req: Request<()>| me.check(req)
    }
}

/// The client interceptor: adds the token to every call.
impl Interceptor for Token {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(v) = self.current() {
            req.metadata_mut().insert(TOKEN_KEY, v);
        }
        Ok(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_need_the_token_once_one_is_set() {
        let server = Token::default();
        let mut client = Token::default();
        // Neither has one: calls pass.
        server
            .check(client.call(Request::new(())).unwrap())
            .unwrap();
        server.set("abc123").unwrap();
        let e = server
            .check(client.call(Request::new(())).unwrap())
            .unwrap_err();
        assert!(e.message().contains("no cluster token"), "{e}");
        client.set("other").unwrap();
        let e = server
            .check(client.call(Request::new(())).unwrap())
            .unwrap_err();
        assert!(e.message().contains("another cluster"), "{e}");
        client.set("abc123").unwrap();
        server
            .check(client.call(Request::new(())).unwrap())
            .unwrap();
        assert_eq!(Token::generate().len(), 32);
        assert!(server.set("bad\ntoken").is_err());
    }
}

//! Spike for issue 37: the alive backends as datafusion-distributed
//! workers (each serves a `Worker` on its gRPC port, `be/src/service/
//! worker.rs`), and a session set up to cut its plans into stages for
//! them, every call carrying the cluster token.

use std::sync::Arc;

use datafusion::error::DataFusionError;
use datafusion::execution::SessionStateBuilder;
use datafusion_distributed::{DistributedExt, WorkerResolver};
use tethys_common::plan::TethysCodec;
use tonic::codegen::http::{HeaderMap, HeaderValue};
use url::Url;

use super::Backends;

/// The alive backends' worker URLs (their gRPC ports).
#[derive(Clone)]
pub struct BackendWorkers(pub Arc<Backends>);

impl WorkerResolver for BackendWorkers {
    fn get_urls(&self) -> Result<Vec<Url>, DataFusionError> {
        self.0
            .alive()
            .iter()
            .map(|b| Url::parse(&b.rpc_url()).map_err(|e| DataFusionError::External(Box::new(e))))
            .collect()
    }
}

/// `builder`, distributing its plans over the alive backends: stages go to
/// their workers, our plan nodes through our codec, with the cluster token.
pub fn distributed(
    builder: SessionStateBuilder,
    backends: Arc<Backends>,
    token: &str,
) -> Result<SessionStateBuilder, DataFusionError> {
    let mut headers = HeaderMap::new();
    let value = HeaderValue::from_str(token)
        .map_err(|e| DataFusionError::External(Box::new(e)))?;
    headers.insert(tethys_common::token::TOKEN_KEY, value);
    builder
        .with_distributed_worker_resolver(BackendWorkers(backends))
        .with_distributed_user_codec(TethysCodec)
        .with_distributed_passthrough_headers(headers)
}

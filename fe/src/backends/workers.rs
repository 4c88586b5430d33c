//! The alive backends as datafusion-distributed workers: each serves a
//! `Worker` on its gRPC port (`be/src/service/worker.rs`); the planner
//! (`planner/distribute.rs`) caps a stage's tasks at their number.

use std::sync::Arc;

use datafusion::error::DataFusionError;
use datafusion_distributed::WorkerResolver;
use url::Url;

use super::Backends;

/// The alive backends' worker URLs (their gRPC ports), in id order.
#[derive(Clone)]
pub struct BackendWorkers(pub Arc<Backends>);

impl WorkerResolver for BackendWorkers {
    fn get_urls(&self) -> Result<Vec<Url>, DataFusionError> {
        let mut alive = self.0.alive();
        alive.sort_by_key(|b| b.id);
        alive
            .iter()
            .map(|b| Url::parse(&b.rpc_url()).map_err(|e| DataFusionError::External(Box::new(e))))
            .collect()
    }
}

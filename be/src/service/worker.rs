//! Spike for issue 37: datafusion-distributed's `Worker` on the BE's gRPC
//! port, behind the cluster token like every other service here. Each
//! query's session gets the Tethys functions and our plan codec, so a stage
//! holding our nodes decodes here as a fragment does.

use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;
use datafusion_distributed::{DistributedExt, Worker, WorkerQueryContext};
use tethys_common::plan::TethysCodec;

/// The worker this BE serves stages with.
pub fn worker() -> Worker {
    Worker::from_session_builder(|ctx: WorkerQueryContext| async move {
        let state = ctx.builder.with_distributed_user_codec(TethysCodec).build();
        let mut sc = SessionContext::new_with_state(state);
        tethys_common::functions::register_all(&mut sc)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        Ok(sc.state())
    })
}

//! Fragment execution on a backend: decode the DataFusion plan the FE sent,
//! bind its scan leaves to local tablets, and run it on the backend's
//! fixed-size worker pool.

mod agg_scan;
mod bind;
pub mod cancel;
mod key_range;
mod like;
mod merge_scan;
mod predicate;
pub mod runtime_filter;
mod scan;
mod segment_scan;
mod stage_keys;
mod zone_test;

use std::sync::Arc;

use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_proto::bytes::physical_plan_from_bytes_with_extension_codec;
use tethys_common::plan::TethysCodec;
use tethys_common::{Result, TethysError};
use tethys_proto::ExecFragmentRequest;

pub use agg_scan::TabletAggScanExec;
pub use bind::bind_scans;
pub use scan::TabletScanExec;
pub use stage_keys::{CollectingRootExec, collect_build_keys};

use crate::storage::StorageEngine;

/// Runs plan fragments against this backend's storage.
pub struct FragmentExecutor {
    engine: Arc<StorageEngine>,
    base: SessionContext,
}

impl std::fmt::Debug for FragmentExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FragmentExecutor").finish_non_exhaustive()
    }
}

impl FragmentExecutor {
    /// An executor over `engine` with the Tethys functions registered.
    pub fn new(engine: Arc<StorageEngine>) -> Result<FragmentExecutor> {
        let mut base = SessionContext::new_with_config(SessionConfig::new());
        tethys_common::functions::register_all(&mut base)?;
        Ok(FragmentExecutor { engine, base })
    }

    /// Decodes and binds a fragment, and starts its output partition; the
    /// bound plan is returned too, for its counters once the stream is done.
    pub fn execute(
        &self,
        req: &ExecFragmentRequest,
    ) -> Result<(Arc<dyn ExecutionPlan>, SendableRecordBatchStream)> {
        let state = self.base.state();
        let mut cfg = state.config().clone();
        if req.batch_size > 0 {
            cfg = cfg.with_batch_size(req.batch_size as usize);
        }
        if !req.time_zone.is_empty() {
            cfg.options_mut().execution.time_zone = Some(req.time_zone.clone());
        }
        let mut task = TaskContext::from(&state).with_session_config(cfg);
        if req.mem_limit > 0 {
            let runtime = datafusion::execution::runtime_env::RuntimeEnvBuilder::new()
                .with_memory_limit(req.mem_limit as usize, 1.0)
                .build_arc()?;
            task = task.with_runtime(runtime);
        }
        let task = Arc::new(task);
        let plan = physical_plan_from_bytes_with_extension_codec(&req.plan, &task, &TethysCodec)
            .map_err(|e| {
                TethysError::Internal(format!(
                    "cannot decode fragment of query {}: {e}",
                    req.query_id
                ))
            })?;
        let plan = bind::bind_scans(plan, &self.engine)?;
        // DECIMAL arithmetic that cannot overflow runs unchecked.
        let plan = tethys_common::plan::exact_decimal_arithmetic(plan)?;
        let partitions = plan.properties().partitioning.partition_count();
        if req.partition as usize >= partitions {
            return Err(TethysError::Internal(format!(
                "fragment has {partitions} partitions, asked for {}",
                req.partition
            )));
        }
        let stream = plan.execute(req.partition as usize, task)?;
        Ok((plan, stream))
    }
}

//! datafusion-proto extension codec for Tethys' own plan nodes.

use std::sync::Arc;

use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use prost::Message;
use tethys_proto::OlapScanNodePb;

use super::OlapScanExec;

/// Tag byte of an encoded [`OlapScanExec`].
const TAG_OLAP_SCAN: u8 = 1;

/// Encodes and decodes Tethys plan nodes inside datafusion-proto plans.
#[derive(Debug, Default, Clone)]
pub struct TethysCodec;

impl PhysicalExtensionCodec for TethysCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        _inputs: &[Arc<dyn ExecutionPlan>],
        _ctx: &TaskContext,
        _proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        match buf.split_first() {
            Some((&TAG_OLAP_SCAN, rest)) => {
                let node = OlapScanNodePb::decode(rest)
                    .map_err(|e| DataFusionError::Internal(format!("bad OlapScan node: {e}")))?;
                Ok(Arc::new(OlapScanExec::try_new(node)?))
            }
            _ => Err(DataFusionError::Internal(
                "unknown Tethys plan node in fragment".into(),
            )),
        }
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        _proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        if let Some(scan) = node.downcast_ref::<OlapScanExec>() {
            buf.push(TAG_OLAP_SCAN);
            scan.node()
                .encode(buf)
                .map_err(|e| DataFusionError::Internal(format!("encode OlapScan node: {e}")))?;
            Ok(())
        } else {
            Err(DataFusionError::NotImplemented(format!(
                "cannot send plan node {} to a backend",
                node.name()
            )))
        }
    }
}

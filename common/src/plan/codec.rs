//! datafusion-proto extension codec for Tethys' own plan nodes.

use std::sync::Arc;

use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr_common::physical_expr::proto_decode::PhysicalExprDecodeCtx;
use datafusion::physical_expr_common::physical_expr::proto_encode::PhysicalExprEncodeCtx;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::physical_plan::from_proto::parse_physical_expr;
use datafusion_proto::physical_plan::to_proto::serialize_physical_expr;
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use prost::Message;
use tethys_proto::{OlapScanNodePb, RuntimeFilterSinkPb};

use super::build_keys::{BuildKeysExec, KeysTo};
use super::cross_filters::Publish;
use super::{BitmapFilterExpr, BloomFilterExpr, FragmentRootExec, OlapScanExec, ScanFilterExec};

/// Tag byte of an encoded [`OlapScanExec`].
const TAG_OLAP_SCAN: u8 = 1;
/// Tag byte of an encoded [`BloomFilterExpr`].
const TAG_BLOOM_FILTER: u8 = 2;
/// Tag byte of an encoded [`BitmapFilterExpr`].
const TAG_BITMAP_FILTER: u8 = 3;
/// Tag byte of an encoded [`BuildKeysExec`] publishing to the merge node.
const TAG_RUNTIME_FILTER_SINK: u8 = 4;
/// Tag byte of a [`FragmentRootExec`] (a profiled query's fragment).
const TAG_FRAGMENT_ROOT: u8 = 5;
/// Tag byte of a [`ScanFilterExec`]: its predicate, a datafusion-proto
/// expression.
const TAG_SCAN_FILTER: u8 = 6;

/// Encodes and decodes Tethys plan nodes inside datafusion-proto plans.
#[derive(Debug, Default, Clone)]
pub struct TethysCodec;

impl PhysicalExtensionCodec for TethysCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        _proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        match buf.split_first() {
            Some((&TAG_OLAP_SCAN, rest)) => {
                let node = OlapScanNodePb::decode(rest)
                    .map_err(|e| DataFusionError::Internal(format!("bad OlapScan node: {e}")))?;
                Ok(Arc::new(OlapScanExec::try_new(node)?))
            }
            Some((&TAG_RUNTIME_FILTER_SINK, rest)) => {
                let node = RuntimeFilterSinkPb::decode(rest).map_err(|e| {
                    DataFusionError::Internal(format!("bad runtime filter sink: {e}"))
                })?;
                let [input] = inputs else {
                    return Err(DataFusionError::Internal(
                        "a runtime filter sink has one input".into(),
                    ));
                };
                let schema = input.schema();
                let keys = node
                    .keys
                    .iter()
                    .map(|k| {
                        let e = datafusion_proto::protobuf::PhysicalExprNode::decode(k.as_slice())
                            .map_err(|e| {
                                DataFusionError::Internal(format!("bad runtime filter key: {e}"))
                            })?;
                        parse_physical_expr(&e, ctx, &schema, self)
                    })
                    .collect::<Result<Vec<_>>>()?;
                let publish = Publish {
                    filter_id: node.filter_id,
                    keys,
                    expected_parts: node.expected_parts,
                    max_in: node.max_in,
                    in_task: node.in_task,
                    key_share: node.key_share,
                };
                Ok(Arc::new(BuildKeysExec::publishing(input.clone(), publish)))
            }
            Some((&TAG_SCAN_FILTER, rest)) => {
                let [input] = inputs else {
                    return Err(DataFusionError::Internal(
                        "a scan filter has one input".into(),
                    ));
                };
                let e = datafusion_proto::protobuf::PhysicalExprNode::decode(rest)
                    .map_err(|e| DataFusionError::Internal(format!("bad scan filter: {e}")))?;
                let predicate = parse_physical_expr(&e, ctx, &input.schema(), self)?;
                Ok(Arc::new(ScanFilterExec::try_new(input.clone(), predicate)?))
            }
            Some((&TAG_FRAGMENT_ROOT, [])) => match inputs {
                [input] => Ok(Arc::new(FragmentRootExec::new(input.clone()))),
                _ => Err(DataFusionError::Internal(
                    "a fragment root has one input".into(),
                )),
            },
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
        } else if let Some(KeysTo::Merge(sink)) =
            node.downcast_ref::<BuildKeysExec>().map(|b| b.to())
        {
            let keys = sink
                .keys
                .iter()
                .map(|k| Ok(serialize_physical_expr(k, self)?.encode_to_vec()))
                .collect::<Result<Vec<_>>>()?;
            buf.push(TAG_RUNTIME_FILTER_SINK);
            RuntimeFilterSinkPb {
                filter_id: sink.filter_id,
                keys,
                expected_parts: sink.expected_parts,
                max_in: sink.max_in,
                in_task: sink.in_task,
                key_share: sink.key_share,
            }
            .encode(buf)
            .map_err(|e| DataFusionError::Internal(format!("encode runtime filter sink: {e}")))?;
            Ok(())
        } else if let Some(filter) = node.downcast_ref::<ScanFilterExec>() {
            buf.push(TAG_SCAN_FILTER);
            serialize_physical_expr(filter.predicate(), self)?
                .encode(buf)
                .map_err(|e| DataFusionError::Internal(format!("encode scan filter: {e}")))?;
            Ok(())
        } else if node.is::<FragmentRootExec>() {
            buf.push(TAG_FRAGMENT_ROOT);
            Ok(())
        } else {
            Err(DataFusionError::NotImplemented(format!(
                "cannot send plan node {} to a backend",
                node.name()
            )))
        }
    }

    fn try_decode_expr(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn PhysicalExpr>],
        _ctx: &PhysicalExprDecodeCtx<'_>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        match (buf.split_first(), inputs) {
            (Some((&TAG_BLOOM_FILTER, rest)), [key]) => {
                Ok(Arc::new(BloomFilterExpr::from_bytes(key.clone(), rest)?))
            }
            (Some((&TAG_BITMAP_FILTER, rest)), [key]) => {
                Ok(Arc::new(BitmapFilterExpr::from_bytes(key.clone(), rest)?))
            }
            _ => Err(DataFusionError::Internal(
                "unknown Tethys expression in fragment".into(),
            )),
        }
    }

    fn try_encode_expr(
        &self,
        node: &Arc<dyn PhysicalExpr>,
        buf: &mut Vec<u8>,
        _ctx: &PhysicalExprEncodeCtx<'_>,
    ) -> Result<()> {
        if let Some(bloom) = node.downcast_ref::<BloomFilterExpr>() {
            buf.push(TAG_BLOOM_FILTER);
            buf.extend(bloom.to_bytes()?);
            Ok(())
        } else if let Some(bitmap) = node.downcast_ref::<BitmapFilterExpr>() {
            buf.push(TAG_BITMAP_FILTER);
            buf.extend(bitmap.to_bytes());
            Ok(())
        } else {
            Err(DataFusionError::NotImplemented(format!(
                "cannot send expression {node} to a backend"
            )))
        }
    }
}

//! The wire form of plan fragments.
//!
//! The FE plans a query with DataFusion and cuts it into fragments; the part
//! that runs on a backend is a DataFusion physical plan whose leaf is an
//! [`OlapScanExec`]. It travels as datafusion-proto bytes encoded with
//! [`TethysCodec`]; the BE decodes it and binds each `OlapScanExec` to its
//! local tablets.

mod bitmap;
mod bloom;
mod bucket_route;
pub mod build_keys;
mod codec;
pub mod cross_filters;
mod exact_decimal;
pub mod filter_merge;
mod node_impl;
mod olap_scan;
mod profile;
mod push_agg;
pub mod runtime_filters;
mod scan_filter;

pub use bitmap::{BitmapFilterExpr, IntKeys, MAX_BITMAP_RANGE};
pub use bloom::{BLOOM_FPP, BloomFilterExpr, BloomKeys, map_keys as bloom_key_bytes};
pub use bucket_route::{BUCKET_ROUTE, BucketRoute, bucket_route_udf};
pub use codec::TethysCodec;
pub use exact_decimal::{ExactDecimalExpr, exact_decimal_arithmetic, exact_decimal_expr};
pub use olap_scan::{OlapScanExec, map_scans, scan_tablets};
pub use profile::{
    CountedLeafExec, FragmentProfile, FragmentRootExec, PROFILE_MAGIC, counted_leaves,
    without_fragment_roots,
};
pub use push_agg::{
    PushedAgg, PushedAggKind, op_name as push_agg_op_name, pushable as pushable_agg,
};
pub use scan_filter::ScanFilterExec;

//! Tethys backend (BE): tablet storage and plan-fragment execution.
//!
//! A BE stores tablets as versioned rowsets of columnar segments
//! ([`storage`]), runs the DataFusion plan fragments the FE sends it
//! ([`exec`]), and speaks only the gRPC / Arrow Flight services of
//! `tethys-proto` ([`service`]). It never sees SQL.

pub mod exec;
pub mod load;
pub mod service;
pub mod storage;

pub use service::{Backend, BackendConfig, BoundListeners, bind, serve};

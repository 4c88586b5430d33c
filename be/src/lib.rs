//! Tethys backend (BE): tablet storage and plan-fragment execution.
//!
//! A BE stores tablets as versioned rowsets of columnar segments
//! ([`storage`]), runs the DataFusion plan fragments the FE sends it
//! ([`exec`]), and speaks only the gRPC / Arrow Flight services of
//! `tethys-proto` ([`service`]). It never sees SQL.
//!
//! Layers, each importing only those below it:
//! `service` -> `node` -> `cluster` | `exec` | `load` -> `storage`.

pub mod clone;
pub mod cluster;
pub mod exec;
pub mod load;
pub mod node;
pub mod service;
pub mod storage;

pub use node::{Backend, BackendConfig};
pub use service::{BoundListeners, bind, serve};

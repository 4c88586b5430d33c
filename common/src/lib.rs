//! Types, errors, configuration and DataFusion extensions shared by the Tethys
//! frontend (FE) and backend (BE).
//!
//! Everything here is knowledge both sides must agree on: the Doris column types
//! and how they map to Arrow, the error vocabulary (and its MySQL / gRPC codes),
//! the MySQL-compatible scalar functions, and the wire form of plan fragments.

pub mod backend_client;
pub mod config;
pub mod debug_point;
pub mod delete;
pub mod error;
pub mod framing;
pub mod fsutil;
pub mod functions;
pub mod http_auth;
pub mod http_common;
pub mod like;
pub mod net;
pub mod panic;
pub mod plan;
pub mod replicas;
pub mod routing;
pub mod schema;
pub mod ship;
pub mod task_headers;
pub mod token;
pub mod types;
pub mod worker_channels;

pub use error::{Result, TethysError};

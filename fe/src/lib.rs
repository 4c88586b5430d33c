//! Tethys frontend (FE): the MySQL protocol server, the catalog and its edit
//! log, Doris SQL parsing, planning on DataFusion, fragment scheduling to
//! backends, and load transactions.

pub mod analyze;
pub mod auth;
pub mod catalog;
pub mod ddl;
pub mod dml;
pub mod executor;
pub mod frontend;
pub mod http;
pub mod load_plan;
pub mod metadata;
pub mod mysql;
pub mod planner;
pub mod prepared;
pub mod profile;
pub mod rpc;
pub mod server;
pub mod session;
pub mod set_var;
pub mod show;
pub mod sql;
pub mod txn;

pub use server::{FrontendConfig, open, serve};

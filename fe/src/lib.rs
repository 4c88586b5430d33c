//! Tethys frontend (FE): the MySQL protocol server, the catalog and its edit
//! log, Doris SQL parsing, planning on DataFusion, fragment scheduling to
//! backends, and load transactions.

pub mod auth;
pub mod backends;
pub mod catalog;
pub mod executor;
pub mod frontend;
pub mod load_plan;
pub mod metadata;
pub mod mysql;
pub mod planner;
pub mod profile;
pub mod server;
pub mod session;
pub mod sql;
pub mod tablet_scheduler;
pub mod txn;

pub use server::{FrontendConfig, open, serve};

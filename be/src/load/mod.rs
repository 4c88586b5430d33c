//! Stream Load on a backend: the HTTP endpoint a client (or the FE's 307
//! redirect) sends a CSV or JSON body to. This backend coordinates the load:
//! it begins the transaction on the FE, parses and converts rows as they
//! stream in, routes them to tablets (on any backend) and finishes the
//! transaction, answering with Doris' response JSON.

mod convert;
mod decompress;
pub mod group_commit;
mod handler;
mod options;
mod parse;
pub mod wal;
mod writer;

pub use handler::{error_log, stream_load, stream_load_2pc};
pub use writer::router_of;

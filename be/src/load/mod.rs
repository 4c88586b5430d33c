//! Stream Load on a backend: the HTTP endpoint a client (or the FE's 307
//! redirect) sends a CSV or JSON body to. This backend coordinates the load:
//! it begins the transaction on the FE, parses and converts rows as they
//! stream in, hands them to the one write path (`tethys_common::ship`), which
//! routes them to tablets on any backend, and finishes the
//! transaction, answering with Doris' response JSON.

mod context;
mod convert;
mod decompress;
pub mod group_commit;
mod handler;
mod options;
mod parse;
pub mod wal;

pub use context::{FrontendClient, LoadContext};
pub use decompress::MAX_BODY_MB;
pub use group_commit::{GroupLoad, GroupMode};
pub use handler::{error_log, stream_load, stream_load_2pc};

//! gRPC service definitions and messages of the FE <-> BE boundary.
//!
//! Everything the frontend and a backend say to each other is defined in
//! `proto/backend.proto`; this crate only compiles it.

#![allow(clippy::all)]

/// Version 1 of the Tethys FE/BE protocol.
pub mod v1 {
    tonic::include_proto!("tethys.v1");
}

pub use v1::*;

impl TxnStatus {
    /// Doris' name of the state (`VISIBLE`, `PRECOMMITTED`, ...), as SHOW
    /// TRANSACTION and the Stream Load response spell it.
    pub fn doris_name(self) -> &'static str {
        match self {
            TxnStatus::Unspecified => "UNKNOWN",
            TxnStatus::Prepare => "PREPARE",
            TxnStatus::Precommitted => "PRECOMMITTED",
            TxnStatus::Committed => "COMMITTED",
            TxnStatus::Visible => "VISIBLE",
            TxnStatus::Aborted => "ABORTED",
        }
    }
}

impl GroupCommitMode {
    /// The `group_commit` header or session variable: `off_mode` (or
    /// empty) is `None`; `Err` for anything but `sync_mode`, `async_mode`
    /// and `off_mode`, with the value.
    pub fn parse(value: &str) -> Result<Option<GroupCommitMode>, String> {
        match value.trim().to_ascii_lowercase().as_str() {
            "off_mode" | "" => Ok(None),
            "sync_mode" => Ok(Some(GroupCommitMode::Sync)),
            "async_mode" => Ok(Some(GroupCommitMode::Async)),
            _ => Err(value.to_string()),
        }
    }
}

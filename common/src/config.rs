//! Engine-wide constants and defaults that the FE and BE must agree on.

/// Rows per vectorized batch, Doris' default `batch_size`.
/// Stack of every runtime thread (the FE's and the BE's execution pool).
/// Expressions up to Doris' depth limit (`fe/src/sql/depth.rs`) go through
/// recursive rewrites, planning, plan decoding and evaluation: 2 MiB held
/// about 1,500 levels on the FE and fewer on a BE. Untouched stack costs
/// address space, not memory.
pub const RUNTIME_STACK_BYTES: usize = 64 << 20;

pub const DEFAULT_BATCH_SIZE: usize = 4064;

/// Rows per storage page; every column of a segment is paged on the same row
/// boundaries, so a page zone map prunes the same rows in every column.
pub const ROWS_PER_PAGE: usize = 4064;

/// Rows buffered per tablet before a load writes a segment.
pub const SEGMENT_FLUSH_ROWS: usize = 1 << 18;

/// Group commit: a table's group is committed this long after its first row
/// (table property `group_commit_interval_ms`, Doris' default).
pub const GROUP_COMMIT_INTERVAL_MS: i64 = 10_000;

/// Group commit: ... or once this many bytes are in it (table property
/// `group_commit_data_bytes`).
pub const GROUP_COMMIT_DATA_BYTES: i64 = 64 << 20;

/// The version a new partition (and its tablets) starts at, as in Doris.
pub const INITIAL_VERSION: i64 = 1;

/// MySQL server version sent in the handshake; Doris 2.x reports 5.7.99.
pub const MYSQL_SERVER_VERSION: &str = "5.7.99";

/// What `@@version_comment` reports.
pub const VERSION_COMMENT: &str = concat!("Tethys version tethys-", env!("CARGO_PKG_VERSION"));

/// Default ports, matching Doris.
pub mod ports {
    /// FE MySQL protocol port.
    pub const QUERY: u16 = 9030;
    /// FE HTTP port.
    pub const FE_HTTP: u16 = 8030;
    /// BE HTTP port (stream load, error logs).
    pub const BE_HTTP: u16 = 8040;
    /// FE gRPC port (what backends call).
    pub const FE_RPC: u16 = 9020;
    /// BE gRPC port (control plane and Arrow Flight data plane).
    pub const BE_RPC: u16 = 9060;
}

/// The longest a load may run, seconds (Doris' FE config
/// `max_stream_load_timeout_second`), and a load's timeout when it names
/// none (`stream_load_default_timeout_second`, 3 days in Doris 2.1).
pub const MAX_LOAD_TIMEOUT_SECS: i64 = 259_200;

/// A load's `timeout` in seconds, refused outside 1 to
/// [`MAX_LOAD_TIMEOUT_SECS`] with Doris' message.
pub fn checked_load_timeout(secs: i64) -> crate::Result<i64> {
    if (1..=MAX_LOAD_TIMEOUT_SECS).contains(&secs) {
        Ok(secs)
    } else {
        Err(crate::TethysError::Analysis(format!(
            "Invalid timeout: {secs}. Timeout should be between 1 and \
             {MAX_LOAD_TIMEOUT_SECS} seconds"
        )))
    }
}

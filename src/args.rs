//! The command line of `tethys standalone`, `tethys fe` and `tethys be`:
//! each role's options once ([`FeOptions`], [`BeOptions`]), the ports and
//! directories per command, and the configs they make.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use clap::Args;
use tethys_common::config::ports;

/// A frontend's options beyond its ports.
#[derive(Args, Clone, Debug)]
pub struct FeOptions {
    /// How long finished loads keep their labels, seconds (Doris'
    /// `label_keep_max_second` for stream loads and INSERTs).
    #[arg(long, default_value_t = tethys_fe::server::LABEL_KEEP_MAX_SECS)]
    pub label_keep_max_second: i64,
    /// How often expired labels are cleaned, seconds.
    #[arg(long, default_value_t = tethys_fe::server::LABEL_CLEAN_INTERVAL_SECS)]
    pub label_clean_interval_second: u64,
    /// How often tables are checked for missing or stale column statistics
    /// (more than a tenth of their rows changed) and analyzed, seconds
    /// (Doris' auto analyze); 0 turns it off.
    #[arg(long, default_value_t = tethys_fe::server::AUTO_ANALYZE_INTERVAL_SECS)]
    pub auto_analyze_interval_second: u64,
    /// MySQL connections the FE holds at most (Doris' fe.conf
    /// `qe_max_connection`); beyond, error 1040.
    #[arg(long, default_value_t = tethys_fe::frontend::MAX_CONNECTIONS)]
    pub qe_max_connection: usize,
    /// MySQL connections one user holds at most (Doris' user property
    /// `max_user_connections`); beyond, error 1203.
    #[arg(long, default_value_t = tethys_fe::frontend::MAX_USER_CONNECTIONS)]
    pub max_user_connections: usize,
    /// Prepared statements all connections hold at most, COM_STMT_PREPARE's
    /// and SQL `PREPARE`'s (MySQL's `max_prepared_stmt_count`); beyond,
    /// error 1461.
    #[arg(long, default_value_t = tethys_fe::frontend::MAX_PREPARED_STMTS)]
    pub max_prepared_stmt_count: usize,
    /// How often the FE heartbeats every backend, seconds (Doris' 5).
    #[arg(long, default_value_t = tethys_fe::server::HEARTBEAT_INTERVAL_SECS)]
    pub heartbeat_interval_second: u64,
    /// How long a backend is dead before the tablet scheduler makes its
    /// replicas again on others, seconds (Doris'
    /// `tablet_repair_delay_factor_second`).
    #[arg(long, default_value_t = tethys_fe::tablet_scheduler::TABLET_REPAIR_DELAY_SECS)]
    pub tablet_repair_delay_second: u64,
}

/// A backend's options beyond its ports.
#[derive(Args, Clone, Debug)]
pub struct BeOptions {
    /// Fragment execution threads on the BE (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub exec_threads: usize,
    /// Memory for decoded column pages, MB (Doris' storage page cache;
    /// default 20% of the machine's memory, 0 turns it off).
    #[arg(long)]
    pub storage_page_cache_mb: Option<usize>,
    /// Memory for the primary-key indexes merge-on-write UNIQUE tables look
    /// keys up in at publish, MB (Doris' `pk_storage_page_cache_limit`;
    /// default 10% of the machine's memory, 0 reads keys from disk each time).
    #[arg(long)]
    pub pk_index_cache_mb: Option<usize>,
    /// Turns off background compaction on the BE (Doris' be.conf
    /// `disable_auto_compaction`); `ADMIN COMPACT TABLE` still works.
    #[arg(long)]
    pub disable_auto_compaction: bool,
    /// Background compaction threads on the BE.
    #[arg(long, default_value_t = 1)]
    pub compaction_threads: usize,
    /// Versions (rowsets) a tablet may hold before loads into it are
    /// refused (Doris' be.conf `max_tablet_version_num`).
    #[arg(long, default_value_t = tethys_be::storage::MAX_TABLET_VERSION_NUM)]
    pub max_tablet_version_num: usize,
    /// Largest Stream Load body, MB, counted both as it arrives and as it
    /// decompresses (Doris' be.conf `streaming_load_max_mb`).
    #[arg(long, default_value_t = tethys_be::load::MAX_BODY_MB)]
    pub streaming_load_max_mb: u64,
}

/// `tethys standalone`: a frontend and a backend in one process.
#[derive(Args, Clone, Debug)]
pub struct StandaloneArgs {
    /// Where metadata (`fe/`) and tablets (`be/`) live.
    #[arg(long, default_value = "./tethys-data")]
    pub data_dir: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// MySQL protocol port.
    #[arg(long, default_value_t = ports::QUERY)]
    pub query_port: u16,
    /// FE HTTP port.
    #[arg(long, default_value_t = ports::FE_HTTP)]
    pub http_port: u16,
    /// BE HTTP port.
    #[arg(long, default_value_t = ports::BE_HTTP)]
    pub be_http_port: u16,
    /// BE gRPC port (control plane and Arrow Flight).
    #[arg(long, default_value_t = ports::BE_RPC)]
    pub be_port: u16,
    /// FE gRPC port (what backends call, e.g. to run a Stream Load transaction).
    #[arg(long, default_value_t = ports::FE_RPC)]
    pub fe_rpc_port: u16,
    /// Lets tests turn debug points on over HTTP
    /// (`POST /api/debug_point/add/{name}`; Doris' `enable_debug_points`).
    /// Never on a server that holds data you care about.
    #[arg(long)]
    pub enable_debug_points: bool,
    #[command(flatten)]
    pub fe: FeOptions,
    #[command(flatten)]
    pub be: BeOptions,
}

/// `tethys fe`: a frontend alone; backends join with
/// `ALTER SYSTEM ADD BACKEND "host:port"`.
#[derive(Args, Clone, Debug)]
pub struct FeArgs {
    /// Where metadata lives (`fe/meta` under it, as in standalone).
    #[arg(long, default_value = "./tethys-data")]
    pub data_dir: PathBuf,
    /// Address to listen on; the backends reach the FE at it.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// MySQL protocol port.
    #[arg(long, default_value_t = ports::QUERY)]
    pub query_port: u16,
    /// HTTP port (Stream Load is redirected from it to a backend).
    #[arg(long, default_value_t = ports::FE_HTTP)]
    pub http_port: u16,
    /// gRPC port the backends call.
    #[arg(long, default_value_t = ports::FE_RPC)]
    pub rpc_port: u16,
    /// The name (or address) backends reach this FE by, which its
    /// heartbeats tell them; default: `--host` (loopback when 0.0.0.0).
    #[arg(long)]
    pub advertise_host: Option<String>,
    /// Replicas of each tablet of a table whose CREATE TABLE names none
    /// (Doris' 3; standalone has one backend and uses 1).
    #[arg(long, default_value_t = 3)]
    pub default_replication_num: usize,
    /// As for standalone.
    #[arg(long)]
    pub enable_debug_points: bool,
    #[command(flatten)]
    pub fe: FeOptions,
}

/// `tethys be`: a backend alone. It learns its FE from the FE's first
/// heartbeat, so it takes no FE address.
#[derive(Args, Clone, Debug)]
pub struct BeArgs {
    /// Where tablets live (`be/` under it, as in standalone).
    #[arg(long, default_value = "./tethys-data")]
    pub data_dir: PathBuf,
    /// Address to listen on; the FE and other backends reach it there.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// gRPC port: heartbeats, the backend service and Arrow Flight.
    #[arg(long, default_value_t = ports::BE_RPC)]
    pub port: u16,
    /// HTTP port (Stream Load, error logs).
    #[arg(long, default_value_t = ports::BE_HTTP)]
    pub http_port: u16,
    /// As for standalone.
    #[arg(long)]
    pub enable_debug_points: bool,
    #[command(flatten)]
    pub be: BeOptions,
}

/// Where a frontend's ports are.
pub struct FePorts {
    pub host: IpAddr,
    pub query: u16,
    pub http: u16,
    pub rpc: u16,
}

impl FeOptions {
    /// The config of a frontend with metadata under `data_dir`, registering
    /// `backends` (host, rpc port, http port) at start.
    pub fn config(
        &self,
        data_dir: &Path,
        at: FePorts,
        backends: Vec<(String, u16, u16)>,
    ) -> tethys_fe::FrontendConfig {
        tethys_fe::FrontendConfig {
            meta_dir: data_dir.join("fe").join("meta"),
            query_addr: SocketAddr::new(at.host, at.query),
            http_addr: SocketAddr::new(at.host, at.http),
            rpc_addr: SocketAddr::new(at.host, at.rpc),
            backends,
            label_keep_max_secs: self.label_keep_max_second,
            label_clean_interval_secs: self.label_clean_interval_second,
            auto_analyze_interval_secs: self.auto_analyze_interval_second,
            max_connections: self.qe_max_connection,
            max_user_connections: self.max_user_connections,
            max_prepared_stmt_count: self.max_prepared_stmt_count,
            heartbeat_interval_secs: self.heartbeat_interval_second,
            default_replication_num: 1,
            tablet_repair_delay_secs: self.tablet_repair_delay_second,
            advertise_host: None,
        }
    }
}

impl BeOptions {
    /// The config of a backend with tablets under `data_dir`, listening on
    /// `host` at `rpc` and `http`, told its FE (`fe_rpc_url`) or not.
    pub fn config(
        &self,
        data_dir: &Path,
        host: IpAddr,
        (rpc, http): (u16, u16),
        fe_rpc_url: Option<String>,
    ) -> tethys_be::BackendConfig {
        tethys_be::BackendConfig {
            root: data_dir.join("be"),
            rpc_addr: SocketAddr::new(host, rpc),
            http_addr: SocketAddr::new(host, http),
            exec_threads: self.exec_threads,
            fe_rpc_url,
            page_cache_bytes: self
                .storage_page_cache_mb
                .map(|mb| mb << 20)
                .unwrap_or_else(tethys_be::storage::default_page_cache_bytes),
            key_index_cache_bytes: self
                .pk_index_cache_mb
                .map(|mb| mb << 20)
                .unwrap_or_else(tethys_be::storage::default_key_index_cache_bytes),
            compaction: tethys_be::storage::CompactionConfig {
                auto: !self.disable_auto_compaction,
                threads: self.compaction_threads,
                ..Default::default()
            },
            max_tablet_versions: self.max_tablet_version_num,
            max_body_bytes: self.streaming_load_max_mb.saturating_mul(1 << 20),
        }
    }
}

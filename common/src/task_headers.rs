//! The headers every task of a distributed query carries from the FE
//! (`fe/src/planner/distribute.rs`) to the BEs' workers
//! (`be/src/service/worker.rs`), beside the cluster token: the statement's
//! settings a task's session takes. One definition of the wire contract.

/// `batch_size`: rows per batch.
pub const BATCH_SIZE: &str = "x-tethys-batch-size";
/// `time_zone`, as an offset name.
pub const TIME_ZONE: &str = "x-tethys-time-zone";
/// `exec_mem_limit` in bytes (0: unbounded).
pub const MEM_LIMIT: &str = "x-tethys-mem-limit";
/// The query's id: its tasks on one backend share one memory pool.
pub const QUERY_ID: &str = "x-tethys-query-id";
/// `runtime_filter_wait_time_ms`; absent: `runtime_filter_mode` OFF.
pub const RUNTIME_FILTER_WAIT_MS: &str = "x-tethys-runtime-filter-wait-ms";
/// `runtime_filter_max_in_num`: build keys tested as an IN list at most.
pub const RUNTIME_FILTER_MAX_IN: &str = "x-tethys-runtime-filter-max-in";
/// Present when the query collects per-task counters (EXPLAIN ANALYZE,
/// `enable_profile`): the worker reports them in the coordinator's shape.
pub const PROFILE: &str = "x-tethys-profile";
/// The functions the query's plan calls, comma separated: a task's session
/// registers those alone (absent: every function).
pub const FUNCTIONS: &str = "x-tethys-functions";

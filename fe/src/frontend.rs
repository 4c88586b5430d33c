//! The frontend's shared state: catalog, backend connections, transaction
//! manager and the registry of client connections (for KILL and
//! SHOW PROCESSLIST).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::backends::Backends;
use crate::catalog::Catalog;
use crate::txn::TxnManager;

/// One client connection as other connections see it.
#[derive(Debug)]
pub struct ConnHandle {
    pub id: u32,
    pub user: String,
    pub host: String,
    pub db: Mutex<Option<String>>,
    pub info: Mutex<(String, Instant)>,
    kill: tokio::sync::watch::Sender<u64>,
    pub killed: AtomicBool,
}

impl ConnHandle {
    /// A receiver that changes when the running statement is killed.
    pub fn kill_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.kill.subscribe()
    }

    /// Cancels the running statement (and, if `connection`, the connection).
    pub fn kill(&self, connection: bool) {
        if connection {
            self.killed.store(true, Ordering::SeqCst);
        }
        self.kill.send_modify(|v| *v += 1);
    }

    pub fn set_command(&self, sql: &str) {
        *self.info.lock().unwrap_or_else(|p| p.into_inner()) = (sql.to_string(), Instant::now());
    }
}

/// Shared FE state.
#[derive(Debug)]
pub struct Frontend {
    pub catalog: Arc<Catalog>,
    /// The backends: the only way to call them.
    pub backends: Arc<Backends>,
    pub txn: TxnManager,
    /// Recent query profiles (`SET enable_profile = true`).
    pub profiles: Arc<crate::profile::ProfileStore>,
    conns: Mutex<BTreeMap<u32, Arc<ConnHandle>>>,
    next_conn: AtomicU32,
    query_seq: AtomicU64,
    /// Connections accepted since start (`SHOW STATUS`' Connections).
    pub connections: AtomicU64,
    /// Statements executed since start (`SHOW STATUS`' Queries).
    pub queries: AtomicU64,
    /// When this FE started (`SHOW STATUS`' Uptime).
    pub started: Instant,
    pub limits: ConnLimits,
    /// Replicas of a table's tablets when CREATE TABLE names none
    /// (`tethys fe --default-replication-num`, Doris' 3; standalone 1).
    pub default_replication_num: AtomicUsize,
    /// Tables `ADMIN REPAIR TABLE` put first in the tablet scheduler.
    repair_first: Mutex<BTreeSet<i64>>,
    /// The merge node of runtime filters across backends.
    pub filter_merge: Arc<tethys_common::plan::filter_merge::FilterMergeNode>,
}

/// How many connections and prepared statements clients may hold.
#[derive(Debug)]
pub struct ConnLimits {
    /// Connections in all (Doris' fe.conf `qe_max_connection`).
    pub max_connections: AtomicUsize,
    /// Connections of one user (Doris' user property `max_user_connections`).
    pub max_user_connections: AtomicUsize,
    /// Prepared statements in all (MySQL's `max_prepared_stmt_count`).
    pub max_prepared_stmts: AtomicUsize,
    /// Prepared statements every session holds now.
    pub prepared_in_use: Arc<AtomicUsize>,
}

/// Doris' `qe_max_connection`.
pub const MAX_CONNECTIONS: usize = 1024;
/// Doris' default `max_user_connections`.
pub const MAX_USER_CONNECTIONS: usize = 100;
/// MySQL's default `max_prepared_stmt_count`.
pub const MAX_PREPARED_STMTS: usize = 16_382;

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            max_connections: AtomicUsize::new(MAX_CONNECTIONS),
            max_user_connections: AtomicUsize::new(MAX_USER_CONNECTIONS),
            max_prepared_stmts: AtomicUsize::new(MAX_PREPARED_STMTS),
            prepared_in_use: Default::default(),
        }
    }
}

impl Frontend {
    /// Tables whose tablets the tablet scheduler looks at first.
    pub fn repair_first(&self) -> BTreeSet<i64> {
        self.repair_first
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// `ADMIN REPAIR TABLE`: puts a table first.
    pub fn repair_table_first(&self, table_id: i64) {
        self.repair_first
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(table_id);
    }

    pub fn new(catalog: Arc<Catalog>) -> Arc<Frontend> {
        let backends = Arc::new(Backends::new(catalog.clone()));
        Arc::new(Frontend {
            txn: TxnManager::new(catalog.clone(), backends.clone()),
            catalog,
            backends,
            profiles: Default::default(),
            conns: Mutex::new(BTreeMap::new()),
            next_conn: AtomicU32::new(1),
            query_seq: AtomicU64::new(1),
            started: Instant::now(),
            queries: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            limits: ConnLimits::default(),
            default_replication_num: AtomicUsize::new(1),
            repair_first: Default::default(),
            filter_merge: Default::default(),
        })
    }

    /// The `SET GLOBAL` values: what a new session starts from.
    pub fn global_variables(&self) -> crate::session::Variables {
        crate::session::Variables::with_values(self.catalog.read().globals.clone())
    }

    /// A new query id.
    pub fn next_query_id(&self) -> String {
        format!(
            "{:x}-{:x}",
            chrono::Utc::now().timestamp_millis(),
            self.query_seq.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Reserves a connection id before authentication.
    pub fn reserve_conn_id(&self) -> u32 {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers a connection under a reserved id, unless the server or
    /// the user holds as many connections as the limits allow.
    pub fn register_conn_with_id(
        &self,
        id: u32,
        user: &str,
        host: &str,
    ) -> tethys_common::Result<Arc<ConnHandle>> {
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        if conns.len() >= self.limits.max_connections.load(Ordering::Relaxed) {
            return Err(tethys_common::TethysError::TooManyConnections);
        }
        let of_user = conns.values().filter(|c| c.user == user).count();
        if of_user >= self.limits.max_user_connections.load(Ordering::Relaxed) {
            return Err(tethys_common::TethysError::TooManyUserConnections(
                user.to_string(),
            ));
        }
        let (kill, _) = tokio::sync::watch::channel(0);
        self.connections.fetch_add(1, Ordering::Relaxed);
        let h = Arc::new(ConnHandle {
            id,
            user: user.to_string(),
            host: host.to_string(),
            db: Mutex::new(None),
            info: Mutex::new((String::new(), Instant::now())),
            kill,
            killed: AtomicBool::new(false),
        });
        conns.insert(id, h.clone());
        Ok(h)
    }

    pub fn unregister_conn(&self, id: u32) {
        self.conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }

    pub fn conn(&self, id: u32) -> Option<Arc<ConnHandle>> {
        self.conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .cloned()
    }

    pub fn conns(&self) -> Vec<Arc<ConnHandle>> {
        self.conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }
}

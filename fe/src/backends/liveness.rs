//! Which backends are alive. The FE heartbeats every registered backend
//! (Doris: every 5 s; `--heartbeat-interval-second`), concurrently and each
//! within a bound, so one dead backend never holds up the others:
//!
//! ```sql
//! SHOW BACKENDS;  -- Alive, LastHeartbeat, ErrMsg, TabletNum, ... as of the last round
//! ```
//!
//! A heartbeat also tells a backend where its FE is and which cluster it
//! belongs to (`be/src/cluster.rs`); the answer carries what SHOW BACKENDS
//! shows and the backend's start time, so a restart is seen. New tablets go
//! only to alive backends (`executor/ddl/tablets.rs::Placement`).

use std::time::Duration;

use tethys_common::backend_client::BackendInfo;
use tethys_proto::{HeartbeatRequest, HeartbeatResponse};

use super::Backends;

/// What the last heartbeats said of one backend.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BackendStatus {
    pub alive: bool,
    /// When it last answered (ms since the epoch; 0: never).
    pub last_heartbeat_ms: i64,
    /// When it started, as it last said (0: unknown).
    pub last_start_ms: i64,
    /// Why the last heartbeat failed (empty when it answered).
    pub err_msg: String,
    /// Heartbeats failed in a row.
    pub failures: u64,
    /// Since when heartbeats fail (ms since the epoch; 0 while alive).
    pub dead_since_ms: i64,
    pub tablet_count: i64,
    pub data_used_bytes: i64,
    pub disk_total_bytes: i64,
    pub disk_avail_bytes: i64,
    pub version: String,
    pub http_port: u16,
    pub cpu_cores: u32,
}

/// Who is heartbeating: where the FE's RPC service listens and its cluster.
#[derive(Debug, Clone)]
pub struct Heartbeater {
    pub fe_host: String,
    pub fe_rpc_port: u16,
    pub cluster_id: i64,
    pub token: String,
}

/// What one heartbeat round changed for a backend.
#[derive(Debug, Clone)]
pub struct Beat {
    pub backend: BackendInfo,
    /// It answered, and the round before it had not (or this is the first).
    pub came_alive: bool,
    /// It answered with another start time than before: it restarted.
    pub restarted: bool,
}

impl Backends {
    /// Who this FE's heartbeats say it is.
    pub fn set_heartbeater(&self, me: Heartbeater) {
        *self.me.lock().unwrap_or_else(|p| p.into_inner()) = Some(me);
    }

    pub fn heartbeater(&self) -> Option<Heartbeater> {
        self.me.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// What the last heartbeats said of backend `id`.
    pub fn status(&self, id: i64) -> BackendStatus {
        let s = self.status.lock().unwrap_or_else(|p| p.into_inner());
        s.get(&id).cloned().unwrap_or_default()
    }

    /// The registered backends that answered their last heartbeat and that
    /// no call found unreachable since.
    pub fn alive(&self) -> Vec<BackendInfo> {
        let s = self.status.lock().unwrap_or_else(|p| p.into_inner());
        self.registered()
            .into_iter()
            .filter(|b| s.get(&b.id).is_some_and(|st| st.alive) && !self.pool().is_suspect(b.id))
            .collect()
    }

    /// Ids of [`Backends::alive`].
    pub fn alive_ids(&self) -> Vec<i64> {
        self.alive().into_iter().map(|b| b.id).collect()
    }

    /// Calls every alive backend once (an empty tablet stats call, `timeout`
    /// each, all at once): one that cannot be reached becomes suspect, as
    /// after any call that finds it so. For a query that failed inside an
    /// exchange between backends, whose calls are not the FE's own.
    pub async fn probe(&self, timeout: Duration) {
        let calls = self.alive().into_iter().map(|b| async move {
            let Ok(client) = self.client(&b) else {
                return;
            };
            let call = client.tablet_stats(tethys_proto::TabletStatsRequest::default());
            // An unreachable backend answers Unavailable, which marks it.
            let _ = tokio::time::timeout(timeout, call).await;
        });
        futures::future::join_all(calls).await;
    }

    /// Heartbeats every registered backend at once, each answer awaited at
    /// most `timeout`; records what each said and returns what changed.
    pub async fn heartbeat_all(&self, me: &Heartbeater, timeout: Duration) -> Vec<Beat> {
        let backends = self.registered();
        let calls = backends.iter().map(|b| async move {
            let req = HeartbeatRequest {
                backend_id: b.id,
                fe_host: me.fe_host.clone(),
                fe_rpc_port: u32::from(me.fe_rpc_port),
                cluster_id: me.cluster_id,
                token: me.token.clone(),
            };
            // Debug point: heartbeats that get no answer (a busy server's).
            let answer = match self.client(b) {
                Ok(_) if tethys_common::debug_point::hit("FeHeartbeat.miss") => {
                    Err("debug point FeHeartbeat.miss".to_string())
                }
                Ok(c) => match tokio::time::timeout(timeout, c.heartbeat(req)).await {
                    Ok(r) => r.map_err(|e| e.to_string()),
                    Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
                },
                Err(e) => Err(e.to_string()),
            };
            (b.clone(), answer)
        });
        let answers = futures::future::join_all(calls).await;
        let now = chrono::Utc::now().timestamp_millis();
        let mut status = self.status.lock().unwrap_or_else(|p| p.into_inner());
        status.retain(|id, _| backends.iter().any(|b| b.id == *id));
        let mut beats = vec![];
        for (b, answer) in answers {
            let st = status.entry(b.id).or_default();
            match answer {
                Ok(h) => {
                    let beat = Beat {
                        backend: b,
                        came_alive: !st.alive,
                        restarted: st.last_start_ms != 0 && st.last_start_ms != h.start_time_ms,
                    };
                    record(st, &h, now);
                    self.pool().clear_suspect(beat.backend.id);
                    beats.push(beat);
                }
                Err(why) => {
                    if st.alive || st.dead_since_ms == 0 {
                        st.dead_since_ms = now;
                    }
                    st.alive = false;
                    st.err_msg = why;
                    st.failures += 1;
                }
            }
        }
        beats
    }
}

fn record(st: &mut BackendStatus, h: &HeartbeatResponse, now: i64) {
    *st = BackendStatus {
        alive: true,
        last_heartbeat_ms: now,
        last_start_ms: h.start_time_ms,
        err_msg: String::new(),
        failures: 0,
        dead_since_ms: 0,
        tablet_count: h.tablet_count,
        data_used_bytes: h.data_used_bytes,
        disk_total_bytes: h.disk_total_bytes,
        disk_avail_bytes: h.disk_avail_bytes,
        version: h.version.clone(),
        http_port: u16::try_from(h.http_port).unwrap_or(0),
        cpu_cores: h.cpu_cores,
    };
}

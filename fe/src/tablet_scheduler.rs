//! The tablet scheduler: keeps every tablet at its `replication_num`
//! healthy replicas, as Doris' tablet checker and scheduler do.
//!
//! ```sql
//! -- 3 BEs, replication_num 3; kill -9 one BE, wait out the repair delay:
//! SHOW TABLETS FROM t;  -- each tablet: 3 healthy replicas on the others
//! ```
//!
//! One round (every heartbeat interval, after the heartbeats) looks at each
//! tablet, in the order `ADMIN REPAIR TABLE` asked first:
//! 1. *surplus*: with `replication_num` healthy replicas (holding the
//!    visible version on alive, not decommissioned backends), the others on
//!    alive backends are dropped (a returning BE whose replicas were
//!    replaced; a decommissioned BE's, once moved);
//! 2. *behind*: a replica on an alive backend that lacks versions (a write
//!    or publish it missed) is cloned in place from a healthy one;
//! 3. *missing*: fewer replicas than `replication_num` on backends that are
//!    alive, or dead for less than the repair delay (Doris'
//!    `tablet_repair_delay_factor_second`, 60 s), and not decommissioned:
//!    a new replica is cloned onto the alive backend holding the fewest;
//! 4. *balance*, when nothing needed the above: while the fullest backend
//!    holds more than one replica more than the emptiest (a backend joined),
//!    replicas are cloned from it to the emptiest, a few a round; rule 1
//!    drops them from the fullest next round.
//!
//! A clone copies a healthy replica's files (the BE's `clone.rs`); the
//! replica's version is what it copied, and transactions that began before
//! are not published to it (`Replica::since_txn`): they may not have
//! written it. Clones run a few at a time; a round ends when its clones do.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tethys_common::Result;
use tethys_proto::{BackendAddrPb, CloneTabletRequest, DropTabletsRequest};

use crate::catalog::{BackendInfo, CatalogState, EditOp, Replica, TabletRef, colocation};
use crate::frontend::Frontend;

/// Doris' `tablet_repair_delay_factor_second`.
pub const TABLET_REPAIR_DELAY_SECS: u64 = 60;

/// Clones in flight at once.
const CLONES_IN_FLIGHT: usize = 4;

/// Replicas a round moves to balance backends.
const REBALANCE_PER_ROUND: usize = 8;

/// What one round did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Round {
    pub cloned: usize,
    pub added: usize,
    pub dropped: usize,
    pub failed: usize,
}

/// One change the round decided for a tablet.
#[derive(Debug, Clone)]
enum Task {
    /// Copy `tablet` from `source` onto `target` at `version` or later;
    /// `new`: the target holds no replica yet.
    Clone {
        tablet: i64,
        source: BackendInfo,
        target: BackendInfo,
        version: i64,
        new: bool,
    },
    Drop {
        tablet: i64,
        backend: BackendInfo,
    },
}

/// The liveness a round decides with.
struct View {
    alive: BTreeSet<i64>,
    /// Dead for longer than the repair delay (or gone from the catalog).
    gone: BTreeSet<i64>,
    decommissioned: BTreeSet<i64>,
    backends: BTreeMap<i64, BackendInfo>,
}

impl View {
    fn healthy(&self, r: &Replica, visible: i64) -> bool {
        self.alive.contains(&r.backend_id)
            && !self.decommissioned.contains(&r.backend_id)
            && r.version >= visible
    }

    /// A replica that counts towards `replication_num` while it may still
    /// come back or catch up.
    fn usable(&self, r: &Replica) -> bool {
        !self.gone.contains(&r.backend_id) && !self.decommissioned.contains(&r.backend_id)
    }
}

/// Runs one round: decides per tablet, then runs the clones and drops.
pub async fn round(fe: &Arc<Frontend>, repair_delay: Duration) -> Round {
    let view = view(fe, repair_delay);
    let tasks = {
        let state = fe.catalog.read();
        plan(&state, &view, &fe.repair_first())
    };
    let mut done = Round::default();
    let results: Vec<(Task, Result<i64>)> = futures::stream::iter(tasks)
        .map(|task| async move {
            let r = run(fe, &task).await;
            (task, r)
        })
        .buffer_unordered(CLONES_IN_FLIGHT)
        .collect()
        .await;
    if let Err(e) = crate::executor::finish_decommissions(fe) {
        tracing::warn!("tablet scheduler: {e}");
    }
    for (task, r) in results {
        match (&task, r) {
            (Task::Clone { new, .. }, Ok(_)) => {
                if *new {
                    done.added += 1;
                } else {
                    done.cloned += 1;
                }
            }
            (Task::Drop { .. }, Ok(_)) => done.dropped += 1,
            (_, Err(e)) => {
                done.failed += 1;
                tracing::warn!("tablet scheduler: {task:?}: {e}");
            }
        }
    }
    done
}

fn view(fe: &Arc<Frontend>, repair_delay: Duration) -> View {
    let state = fe.catalog.read();
    let now = chrono::Utc::now().timestamp_millis();
    let delay_ms = repair_delay.as_millis() as i64;
    let mut alive = BTreeSet::new();
    let mut gone = BTreeSet::new();
    for id in state.backends.keys() {
        let st = fe.backends.status(*id);
        if st.alive {
            alive.insert(*id);
        } else if st.dead_since_ms > 0 && now - st.dead_since_ms >= delay_ms {
            gone.insert(*id);
        }
    }
    View {
        alive,
        gone,
        decommissioned: state.decommissioned.clone(),
        backends: state.backends.clone(),
    }
}

/// The tasks of one round, tablets of the tables in `first` first.
fn plan(state: &CatalogState, view: &View, first: &BTreeSet<i64>) -> Vec<Task> {
    let held = state.replicas_per_backend();
    let mut load: BTreeMap<i64, usize> = view
        .alive
        .iter()
        .filter(|b| !view.decommissioned.contains(b))
        .map(|b| (*b, held.get(b).copied().unwrap_or(0)))
        .collect();
    let mut tablets: Vec<(bool, usize, i64, &TabletRef)> = vec![];
    // Balancing moves no tablet of a colocation group: its buckets stay on
    // the group's backends. Repairs still move them, which leaves the group
    // unstable (its joins exchange data): Tethys does not yet move a group's
    // replicas back into line as Doris' colocate balancer does.
    let mut movable: Vec<(bool, usize, i64, &TabletRef)> = vec![];
    for d in state.databases.values() {
        for t in d.tables.values() {
            let colocated = t.properties.contains_key(colocation::COLOCATE_WITH);
            for p in &t.partitions {
                for tablet in &p.tablets {
                    let want = t.replication_num();
                    let entry = (!first.contains(&t.id), want, p.visible_version, tablet);
                    tablets.push(entry);
                    if !colocated {
                        movable.push(entry);
                    }
                }
            }
        }
    }
    tablets.sort_by_key(|(later, ..)| *later);
    let mut tasks = vec![];
    for (_, want, visible, tablet) in &tablets {
        plan_tablet(tablet, *want, *visible, view, &mut load, &mut tasks);
    }
    if tasks.is_empty() {
        rebalance(&movable, view, &mut load, &mut tasks);
    }
    tasks
}

/// Moves a round's share of replicas from the backend holding the most to
/// the one holding the fewest while they differ by more than one (a backend
/// joined, or one came back empty): a new replica cloned onto the emptier
/// one; the next round drops the surplus from the fuller one (surplus keeps
/// the least loaded). Only when nothing needs repair.
fn rebalance(
    tablets: &[(bool, usize, i64, &TabletRef)],
    view: &View,
    load: &mut BTreeMap<i64, usize>,
    tasks: &mut Vec<Task>,
) {
    for _ in 0..REBALANCE_PER_ROUND {
        let (Some((&low, &nl)), Some((&high, &nh))) = (
            load.iter().min_by_key(|(b, n)| (**n, **b)),
            load.iter().max_by_key(|(b, n)| (**n, -**b)),
        ) else {
            return;
        };
        if nh <= nl + 1 {
            return;
        }
        let moved = tablets.iter().find(|(_, _, visible, t)| {
            t.replica_on(low).is_none()
                && t.replica_on(high)
                    .is_some_and(|r| view.healthy(r, *visible))
                && !tasks.iter().any(|task| adds(task, t.id, low))
        });
        let (Some((_, _, visible, t)), Some(source), Some(target)) =
            (moved, view.backends.get(&high), view.backends.get(&low))
        else {
            return;
        };
        tasks.push(Task::Clone {
            tablet: t.id,
            source: source.clone(),
            target: target.clone(),
            version: *visible,
            new: true,
        });
        *load.entry(low).or_default() += 1;
        *load.entry(high).or_default() -= 1;
    }
}

/// The tasks for one tablet (see the module doc for the order).
fn plan_tablet(
    tablet: &TabletRef,
    want: usize,
    visible: i64,
    view: &View,
    load: &mut BTreeMap<i64, usize>,
    tasks: &mut Vec<Task>,
) {
    let healthy: Vec<&Replica> = tablet
        .replicas
        .iter()
        .filter(|r| view.healthy(r, visible))
        .collect();
    let Some(source) = healthy
        .first()
        .and_then(|r| view.backends.get(&r.backend_id))
    else {
        // Nothing to copy from: wait for a backend holding every version.
        return;
    };
    let backend = |id: i64| view.backends.get(&id).cloned();
    if healthy.len() >= want {
        // Keep the replicas on the backends holding the fewest.
        let mut by_load: Vec<(usize, i64)> = healthy
            .iter()
            .map(|r| (load.get(&r.backend_id).copied().unwrap_or(0), r.backend_id))
            .collect();
        by_load.sort_unstable();
        let keep: BTreeSet<i64> = by_load.iter().take(want).map(|(_, b)| *b).collect();
        for r in &tablet.replicas {
            if !keep.contains(&r.backend_id)
                && view.alive.contains(&r.backend_id)
                && let Some(b) = backend(r.backend_id)
            {
                if let Some(n) = load.get_mut(&r.backend_id) {
                    *n = n.saturating_sub(1);
                }
                tasks.push(Task::Drop {
                    tablet: tablet.id,
                    backend: b,
                });
            }
        }
        return;
    }
    for r in &tablet.replicas {
        if view.alive.contains(&r.backend_id)
            && !view.decommissioned.contains(&r.backend_id)
            && r.version < visible
            && let Some(b) = backend(r.backend_id)
        {
            tasks.push(Task::Clone {
                tablet: tablet.id,
                source: source.clone(),
                target: b,
                version: visible,
                new: false,
            });
        }
    }
    let usable = tablet.replicas.iter().filter(|r| view.usable(r)).count();
    for _ in usable..want {
        let Some((&target, n)) = load
            .iter_mut()
            .filter(|(b, _)| tablet.replica_on(**b).is_none())
            .filter(|(b, _)| !tasks.iter().any(|t| adds(t, tablet.id, **b)))
            .min_by_key(|(b, n)| (**n, **b))
        else {
            return;
        };
        *n += 1;
        if let Some(b) = backend(target) {
            tasks.push(Task::Clone {
                tablet: tablet.id,
                source: source.clone(),
                target: b,
                version: visible,
                new: true,
            });
        }
    }
}

/// Whether `task` adds a replica of `tablet` on `backend`.
fn adds(task: &Task, tablet: i64, backend: i64) -> bool {
    matches!(task, Task::Clone { tablet: t, target, new: true, .. } if *t == tablet && target.id == backend)
}

/// Runs one task and records it; a clone returns the version copied.
async fn run(fe: &Arc<Frontend>, task: &Task) -> Result<i64> {
    match task {
        Task::Clone {
            tablet,
            source,
            target,
            version,
            new,
        } => {
            let req = CloneTabletRequest {
                tablet_id: *tablet,
                source: Some(BackendAddrPb {
                    id: source.id,
                    host: source.host.clone(),
                    rpc_port: u32::from(source.rpc_port),
                    http_port: u32::from(source.http_port),
                }),
                version: *version,
            };
            let copied = fe.backends.client(target)?.clone_tablet(req).await?.version;
            let (tablet, backend, new) = (*tablet, target.id, *new);
            fe.catalog.mutate(|_, ids| {
                let since_txn = ids.alloc();
                let op = if new {
                    let mut replica = Replica::new(ids.alloc(), backend, copied);
                    replica.since_txn = since_txn;
                    EditOp::AddReplica {
                        tablet_id: tablet,
                        replica,
                    }
                } else {
                    EditOp::ReplicaCaughtUp {
                        tablet_id: tablet,
                        backend_id: backend,
                        version: copied,
                        since_txn,
                    }
                };
                Ok((op, ()))
            })?;
            Ok(copied)
        }
        Task::Drop { tablet, backend } => {
            let (tablet, id) = (*tablet, backend.id);
            fe.catalog.mutate(|_, _| {
                Ok((
                    EditOp::DropReplica {
                        tablet_id: tablet,
                        backend_id: id,
                    },
                    (),
                ))
            })?;
            // Out of the catalog first: no read or load picks it meanwhile.
            fe.backends
                .client(backend)?
                .drop_tablets(DropTabletsRequest {
                    tablet_ids: vec![tablet],
                })
                .await?;
            Ok(0)
        }
    }
}

//! Load transactions: begin (label checked) -> rows written to every replica
//! of each tablet as pending rowsets -> commit (versions assigned, logged,
//! with the replicas whose writes failed) -> publish on the replicas that
//! have the data -> VISIBLE once a majority of each tablet's replicas
//! published, the others recorded as behind; or ABORTED, with the pending
//! rowsets discarded.
//!
//! A commit is durable once its edit-log record is written; publishing is
//! idempotent and is redone after a restart for transactions that were
//! committed but not yet visible. Transactions still PREPARE at a restart are
//! aborted, so an INSERT that never committed leaves nothing behind.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tethys_common::{Result, TethysError};
use tethys_proto::{AbortTxnRequest, PendingTxnsRequest, PublishVersionRequest, TabletVersion};

use crate::backends::Backends;
use crate::catalog::{Catalog, CatalogState, EditOp, PartitionVersion, TxnRecord, TxnState};

/// (tablet id, backend id) pairs: replicas.
pub type ReplicaKeys = Vec<(i64, i64)>;

/// How long a publish waits for one backend.
const PUBLISH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Coordinates load transactions.
#[derive(Debug)]
pub struct TxnManager {
    catalog: Arc<Catalog>,
    backends: Arc<Backends>,
    /// Serializes commit + publish so versions are published in order.
    publish_lock: tokio::sync::Mutex<()>,
}

impl TxnManager {
    pub fn new(catalog: Arc<Catalog>, backends: Arc<Backends>) -> Self {
        TxnManager {
            catalog,
            backends,
            publish_lock: tokio::sync::Mutex::new(()),
        }
    }

    /// Begins a transaction in `db`; a label already used by a transaction
    /// that was not aborted is refused.
    pub fn begin(&self, db: &str, label: Option<String>, source: &str) -> Result<TxnRecord> {
        self.begin_with_timeout(db, label, source, 0, 0)
    }

    /// Begins a transaction that is aborted if still open after `timeout_ms`;
    /// `coordinator`: the backend running it (0: the FE).
    pub fn begin_with_timeout(
        &self,
        db: &str,
        label: Option<String>,
        source: &str,
        timeout_ms: i64,
        coordinator: i64,
    ) -> Result<TxnRecord> {
        self.catalog.mutate(|state, ids| {
            let id = ids.alloc();
            let prefix = match source {
                "INSERT_STREAMING" => "insert",
                "FRONTEND" => "delete",
                _ => "stream_load",
            };
            let label = label.unwrap_or_else(|| format!("{prefix}_{:x}{:08x}", now_ms(), id));
            if let Some(t) = state
                .txns
                .values()
                .find(|t| t.db == db && t.label == label && t.state != TxnState::Aborted)
            {
                return Err(TethysError::LabelAlreadyExists {
                    label: label.clone(),
                    txn_id: t.id,
                    status: t.state.to_pb(),
                });
            }
            let txn = TxnRecord {
                id,
                label,
                db: db.to_string(),
                state: TxnState::Prepare,
                source: source.to_string(),
                versions: vec![],
                prepare_time: now_ms(),
                commit_time: 0,
                finish_time: 0,
                reason: String::new(),
                touched: vec![],
                timeout_ms,
                stats: None,
                failed_replicas: vec![],
                coordinator,
            };
            Ok((EditOp::BeginTxn { txn: txn.clone() }, txn))
        })
    }

    /// Commits and publishes a transaction that wrote to the given
    /// (table id, partition id) pairs; `written`: the (tablet id, backend
    /// id) replicas that took its rows.
    pub async fn commit_and_publish(
        &self,
        txn_id: i64,
        touched: &BTreeSet<(i64, i64)>,
        written: &[(i64, i64)],
    ) -> Result<()> {
        self.commit(txn_id, touched, |state| unwritten(state, touched, written))
            .await
    }

    /// Commits (with `failed` giving the replicas that miss its versions)
    /// and publishes.
    async fn commit(
        &self,
        txn_id: i64,
        touched: &BTreeSet<(i64, i64)>,
        failed: impl FnOnce(&CatalogState) -> ReplicaKeys,
    ) -> Result<()> {
        let _g = self.publish_lock.lock().await;
        self.catalog.mutate(|state, _| {
            let txn = state
                .txns
                .get(&txn_id)
                .ok_or_else(|| TethysError::Internal(format!("transaction {txn_id} not found")))?;
            if !matches!(txn.state, TxnState::Prepare | TxnState::Precommitted) {
                return Err(already(txn_id, txn.state, ""));
            }
            let mut versions = vec![];
            for (table_id, partition_id) in touched {
                let p = state
                    .databases
                    .values()
                    .flat_map(|d| d.tables.values())
                    .find(|t| t.id == *table_id)
                    .and_then(|t| t.partitions.iter().find(|p| p.id == *partition_id))
                    .ok_or_else(|| {
                        TethysError::Analysis(format!(
                            "partition {partition_id} was dropped while the load was running"
                        ))
                    })?;
                versions.push(PartitionVersion {
                    table_id: *table_id,
                    partition_id: *partition_id,
                    version: p.committed_version + 1,
                });
            }
            Ok((
                EditOp::CommitTxn {
                    txn_id,
                    versions,
                    time: now_ms(),
                    failed: failed(state),
                },
                (),
            ))
        })?;
        self.publish(txn_id).await
    }

    /// Records what a load did (kept with its transaction).
    pub fn record_stats(&self, txn_id: i64, stats: crate::catalog::LoadStats) -> Result<()> {
        self.catalog
            .mutate(|_, _| Ok((EditOp::LoadStats { txn_id, stats }, ())))
    }

    /// Pre-commits a load (two-phase commit): durable, invisible, waiting for
    /// a commit or abort.
    pub fn precommit(
        &self,
        txn_id: i64,
        touched: &BTreeSet<(i64, i64)>,
        written: &[(i64, i64)],
    ) -> Result<()> {
        self.catalog.mutate(|state, _| {
            let txn = state.txns.get(&txn_id).ok_or_else(|| {
                TethysError::Analysis(format!("transaction [{txn_id}] not found"))
            })?;
            if txn.state != TxnState::Prepare {
                return Err(already(txn_id, txn.state, ""));
            }
            Ok((
                EditOp::PrecommitTxn {
                    txn_id,
                    touched: touched.iter().copied().collect(),
                    time: now_ms(),
                    failed: unwritten(state, touched, written),
                },
                (),
            ))
        })
    }

    /// Commits a pre-committed load.
    pub async fn commit_precommitted(&self, txn_id: i64) -> Result<()> {
        let (touched, failed): (BTreeSet<(i64, i64)>, ReplicaKeys) = {
            let s = self.catalog.read();
            let t = s.txns.get(&txn_id).ok_or_else(|| {
                TethysError::Analysis(format!("transaction [{txn_id}] not found"))
            })?;
            if t.state != TxnState::Precommitted {
                return Err(already(txn_id, t.state, ", not pre-committed."));
            }
            (
                t.touched.iter().copied().collect(),
                t.failed_replicas.clone(),
            )
        };
        self.commit(txn_id, &touched, |_| failed).await
    }

    /// Publishes a committed transaction on the replicas that wrote it and
    /// hold every version before, then makes it visible once a majority of
    /// each tablet's replicas have it. Every registered backend holding one
    /// is called, whatever its last heartbeat said: a heartbeat missed while
    /// the servers were busy left a committed INSERT invisible ("0 of 1
    /// replicas published"; tests/faults.rs acts it out); a dead one fails
    /// its call (or its publish timeout). The
    /// replicas that did not publish are recorded as behind.
    async fn publish(&self, txn_id: i64) -> Result<()> {
        let (plan, tablets) = self.publish_plan(txn_id)?;
        let calls = plan.into_values().map(|(be, tablets)| async move {
            let r = match self.backends.client(&be) {
                Ok(client) => {
                    let req = PublishVersionRequest { txn_id, tablets };
                    match tokio::time::timeout(PUBLISH_TIMEOUT, client.publish_version(req)).await {
                        Ok(r) => r.map(|_| ()),
                        Err(_) => Err(TethysError::Backend(format!(
                            "no answer within {} s",
                            PUBLISH_TIMEOUT.as_secs()
                        ))),
                    }
                }
                Err(e) => Err(e),
            };
            (be.id, r)
        });
        let mut done = BTreeSet::new();
        let mut errors = vec![];
        for (be, r) in futures::future::join_all(calls).await {
            match r {
                Ok(()) => {
                    done.insert(be);
                }
                Err(e) => errors.push(format!("backend {be}: {e}")),
            }
        }
        let mut missed = vec![];
        for (tablet_id, (all, sent)) in &tablets {
            let got = sent.iter().filter(|b| done.contains(b)).count();
            let all_n = all.len();
            if got < tethys_common::replicas::quorum(all_n) {
                return Err(TethysError::Backend(format!(
                    "transaction {txn_id} is committed but only {got} of {all_n} replicas of tablet \
                     {tablet_id} published it ({}); it becomes visible when a majority has",
                    if errors.is_empty() {
                        "the others are on dead backends or behind".to_string()
                    } else {
                        errors.join("; ")
                    }
                )));
            }
            missed.extend(
                all.iter()
                    .filter(|b| !done.contains(b) || !sent.contains(b))
                    .map(|b| (*tablet_id, *b)),
            );
        }
        self.catalog.mutate(|_, _| {
            Ok((
                EditOp::VisibleTxn {
                    txn_id,
                    time: now_ms(),
                    missed,
                },
                (),
            ))
        })
    }

    /// Per backend, the tablet versions a publish of `txn_id` sends it; and
    /// per tablet, the backends of all its replicas and of those it is sent
    /// to: whose write did not fail, holding the version before, on a
    /// registered backend (heartbeat or not).
    #[allow(clippy::type_complexity)]
    fn publish_plan(
        &self,
        txn_id: i64,
    ) -> Result<(
        BTreeMap<i64, (crate::catalog::BackendInfo, Vec<TabletVersion>)>,
        BTreeMap<i64, (Vec<i64>, Vec<i64>)>,
    )> {
        let state = self.catalog.read();
        let txn = state
            .txns
            .get(&txn_id)
            .ok_or_else(|| TethysError::Internal(format!("transaction {txn_id} not found")))?;
        let mut plan: BTreeMap<i64, (crate::catalog::BackendInfo, Vec<TabletVersion>)> =
            BTreeMap::new();
        let mut tablets: BTreeMap<i64, (Vec<i64>, Vec<i64>)> = BTreeMap::new();
        for v in &txn.versions {
            let part = state
                .table_by_id(v.table_id)
                .and_then(|t| t.partitions.iter().find(|p| p.id == v.partition_id));
            let Some(part) = part else { continue };
            for tab in &part.tablets {
                let (all, to) = tablets.entry(tab.id).or_default();
                *all = tab.backend_ids().collect();
                for r in &tab.replicas {
                    if txn.failed_replicas.contains(&(tab.id, r.backend_id))
                        || txn_id < r.since_txn
                        || r.version < v.version - 1
                    {
                        continue;
                    }
                    let Some(be) = state.backends.get(&r.backend_id) else {
                        continue;
                    };
                    to.push(be.id);
                    plan.entry(be.id)
                        .or_insert_with(|| (be.clone(), vec![]))
                        .1
                        .push(TabletVersion {
                            tablet_id: tab.id,
                            version: v.version,
                            bucket: 0,
                        });
                }
            }
        }
        Ok((plan, tablets))
    }

    /// Aborts a transaction and discards its data on every backend.
    pub async fn abort(&self, txn_id: i64, reason: &str) -> Result<()> {
        let backends = self.backends.alive();
        self.catalog.mutate(|state, _| {
            if let Some(t) = state.txns.get(&txn_id)
                && matches!(t.state, TxnState::Committed | TxnState::Visible)
            {
                return Err(already(txn_id, t.state, ", not pre-committed."));
            }
            Ok((
                EditOp::AbortTxn {
                    txn_id,
                    reason: reason.to_string(),
                    time: now_ms(),
                },
                (),
            ))
        })?;
        for be in backends {
            if let Ok(c) = self.backends.client(&be) {
                // Best effort: a backend that misses this (or is dead now)
                // aborts it when it is next reconciled.
                let _ = c.abort_txn(AbortTxnRequest { txn_id }).await;
            }
        }
        Ok(())
    }

    /// Aborts the open (PREPARE) transactions backend `backend_id`
    /// coordinated: it restarted, so their loads ended with it.
    pub async fn abort_coordinated_by(&self, backend_id: i64) -> Result<usize> {
        let ids = self.txn_ids(|t| t.state == TxnState::Prepare && t.coordinator == backend_id);
        for id in &ids {
            self.abort(
                *id,
                &format!("backend {backend_id}, which ran the load, restarted"),
            )
            .await?;
        }
        Ok(ids.len())
    }

    /// The ids of the transactions that `pred` picks.
    fn txn_ids(&self, pred: impl Fn(&TxnRecord) -> bool) -> Vec<i64> {
        let catalog = self.catalog.read();
        catalog
            .txns
            .values()
            .filter(|t| pred(t))
            .map(|t| t.id)
            .collect()
    }

    /// Aborts transactions that outlived their timeout (an unfinished
    /// two-phase commit, a load whose coordinator vanished).
    pub async fn abort_expired(&self) -> Result<usize> {
        let now = now_ms();
        let ids = self.txn_ids(|t| {
            matches!(t.state, TxnState::Prepare | TxnState::Precommitted)
                && t.timeout_ms > 0
                && t.prepare_time.saturating_add(t.timeout_ms) < now
        });
        for id in &ids {
            self.abort(*id, "transaction timed out").await?;
        }
        Ok(ids.len())
    }

    /// Publishes committed transactions whose publish failed earlier (a
    /// backend was unreachable); returns how many became visible.
    pub async fn republish(&self) -> Result<usize> {
        let ids = self.txn_ids(|t| t.state == TxnState::Committed);
        let mut n = 0;
        for id in ids {
            let _g = self.publish_lock.lock().await;
            if self.publish(id).await.is_ok() {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Forgets finished transactions older than `keep_secs` (Doris'
    /// `streaming_label_keep_max_second`); their labels become reusable.
    pub fn clean_labels(&self, keep_secs: i64) -> Result<usize> {
        let cutoff = now_ms().saturating_sub(keep_secs.saturating_mul(1000));
        let ids = self.txn_ids(|t| {
            matches!(t.state, TxnState::Visible | TxnState::Aborted) && t.finish_time < cutoff
        });
        if ids.is_empty() {
            return Ok(0);
        }
        let n = ids.len();
        self.catalog
            .mutate(|_, _| Ok((EditOp::RemoveTxns { ids }, ())))?;
        Ok(n)
    }

    /// At startup: finish what a crash interrupted. A backend that cannot
    /// be reached now is left for later: what it must publish is published
    /// by the periodic republish; its pending data of finished transactions
    /// is aborted whenever a heartbeat finds it back
    /// ([`TxnManager::reconcile`], also for every alive backend at start).
    pub async fn recover(&self) -> Result<()> {
        let (prepare, committed): (Vec<i64>, Vec<i64>) = {
            let s = self.catalog.read();
            (
                s.txns
                    .values()
                    .filter(|t| t.state == TxnState::Prepare)
                    .map(|t| t.id)
                    .collect(),
                s.txns
                    .values()
                    .filter(|t| t.state == TxnState::Committed)
                    .map(|t| t.id)
                    .collect(),
            )
        };
        for id in prepare {
            self.abort(id, "aborted at FE restart: the load never committed")
                .await?;
        }
        for id in committed {
            if let Err(e) = self.publish(id).await {
                tracing::warn!("{e}");
            }
        }
        Ok(())
    }

    /// Aborts the pending data backend `be` holds of transactions that are
    /// not going anywhere (aborted, or forgotten while it was away).
    pub async fn reconcile(&self, be: &crate::catalog::BackendInfo) -> Result<()> {
        let c = self.backends.client(be)?;
        let pending = c.pending_txns(PendingTxnsRequest {}).await?.txn_ids;
        for id in pending {
            let state = self.catalog.read().txns.get(&id).map(|t| t.state);
            if !matches!(
                state,
                Some(TxnState::Prepare) | Some(TxnState::Committed) | Some(TxnState::Precommitted)
            ) {
                c.abort_txn(AbortTxnRequest { txn_id: id }).await?;
            }
        }
        Ok(())
    }
}

/// The replicas that miss a load's versions: those of each tablet it wrote
/// (in the `touched` (table id, partition id) partitions) that are not among
/// `written` (tablet id, backend id). A tablet it did not write gets an empty
/// version on every replica.
fn unwritten(
    state: &CatalogState,
    touched: &BTreeSet<(i64, i64)>,
    written: &[(i64, i64)],
) -> ReplicaKeys {
    let wrote: BTreeSet<(i64, i64)> = written.iter().copied().collect();
    let tablets: BTreeSet<i64> = written.iter().map(|(t, _)| *t).collect();
    let mut out = vec![];
    for (table_id, partition_id) in touched {
        let Some(p) = state
            .table_by_id(*table_id)
            .and_then(|t| t.partitions.iter().find(|p| p.id == *partition_id))
        else {
            continue;
        };
        for t in p.tablets.iter().filter(|t| tablets.contains(&t.id)) {
            out.extend(
                t.backend_ids()
                    .filter(|b| !wrote.contains(&(t.id, *b)))
                    .map(|b| (t.id, b)),
            );
        }
    }
    out
}

/// The error for a transaction already past the step asked of it.
pub(crate) fn already(txn_id: i64, state: TxnState, rest: &str) -> TethysError {
    TethysError::Analysis(format!(
        "transaction [{txn_id}] is already {}{rest}",
        state.name().to_lowercase()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn labels_are_unique_until_aborted_or_cleaned() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Arc::new(Catalog::open(dir.path()).unwrap());
        let m = TxnManager::new(catalog.clone(), Arc::new(Backends::new(catalog.clone())));
        let t1 = m
            .begin("db", Some("l1".into()), "INSERT_STREAMING")
            .unwrap();
        let err = m
            .begin("db", Some("l1".into()), "INSERT_STREAMING")
            .unwrap_err()
            .to_string();
        assert!(err.contains("Label [l1] has already been used"), "{err}");
        assert!(err.contains("status [PREPARE]"), "{err}");
        // Another database may use the same label.
        m.begin("other", Some("l1".into()), "INSERT_STREAMING")
            .unwrap();
        // An aborted label can be reused.
        m.abort(t1.id, "test").await.unwrap();
        let t2 = m
            .begin("db", Some("l1".into()), "INSERT_STREAMING")
            .unwrap();
        assert_ne!(t1.id, t2.id);
        // Generated labels are unique.
        let a = m.begin("db", None, "INSERT_STREAMING").unwrap();
        let b = m.begin("db", None, "INSERT_STREAMING").unwrap();
        assert_ne!(a.label, b.label);
        // Cleaning forgets only finished transactions.
        assert_eq!(m.clean_labels(-1).unwrap(), 1);
        assert!(!catalog.read().txns.contains_key(&t1.id));
        assert!(catalog.read().txns.contains_key(&t2.id));
        // State survives a restart of the catalog.
        drop(m);
        let catalog2 = Catalog::open(dir.path());
        drop(catalog);
        let catalog2 = catalog2.unwrap();
        assert_eq!(
            catalog2.read().txns.get(&t2.id).map(|t| t.state),
            Some(TxnState::Prepare)
        );
    }
}

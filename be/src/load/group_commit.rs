//! Group commit: many small loads of a table share one transaction.
//!
//! A backend keeps at most one open *group* per table. A load in
//! `sync_mode` or `async_mode` (Stream Load header or `SET group_commit` for
//! INSERT) converts its rows as usual and appends them to the group's
//! write-ahead log ([`super::wal`]); when the load's body is complete its
//! rows are marked done and fsynced. `async_mode` answers right then;
//! `sync_mode` waits until the group is visible.
//!
//! The group is committed `group_commit_interval_ms` after it opened, or
//! sooner once its WAL holds `group_commit_data_bytes`: new loads go to a new
//! group, the loads still writing to the old one finish, and the WAL is read
//! back, routed to tablets and committed as one transaction (one new version
//! per touched tablet). The WAL is deleted once the transaction is visible.
//! A commit that fails is retried with a new transaction under the same
//! label; after a crash the WALs left behind are replayed the same way, so
//! acknowledged rows are neither lost nor loaded twice.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow::array::RecordBatch;
use tethys_common::{Result, TethysError};
use tethys_proto::{
    BeginGroupCommitRequest, FinishLoadRequest, LoadAction, LoadPlanPb, LoadStatsPb, TxnStatus,
};
use tokio::sync::{Notify, OwnedRwLockReadGuard, RwLock, watch};

use tethys_common::routing::Router;
use tethys_common::ship::RowShipper;

use super::LoadContext;
use super::wal::{self, WalHeader, WalReader, WalWriter};

/// How a load joins a group (`sync_mode` / `async_mode`).
pub use tethys_proto::GroupCommitMode as GroupMode;

/// The outcome of a group: `None` while open or committing.
type Outcome = Option<std::result::Result<(), String>>;

/// The open groups of a backend, by table id.
#[derive(Debug, Default)]
pub struct GroupCommits {
    groups: tokio::sync::Mutex<HashMap<i64, Arc<Group>>>,
    next_request: AtomicU64,
}

/// One group: a transaction, its WAL and the loads writing to it.
#[derive(Debug)]
struct Group {
    /// `group_commit_<hex>_<hex>`.
    label: String,
    /// The transaction the group began with (reported to its loads).
    txn_id: i64,
    table_id: i64,
    plan: LoadPlanPb,
    wal: Arc<Mutex<WalWriter>>,
    /// Loads hold it shared while they write; the committer takes it
    /// exclusively and marks the group sealed.
    gate: Arc<RwLock<bool>>,
    full: Notify,
    outcome: watch::Sender<Outcome>,
}

/// A load's place in a group; keeps the group open until it finishes.
struct Member {
    group: Arc<Group>,
    request: u64,
    _gate: OwnedRwLockReadGuard<bool>,
}

fn lock(w: &Mutex<WalWriter>) -> std::sync::MutexGuard<'_, WalWriter> {
    w.lock().unwrap_or_else(|p| p.into_inner())
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| TethysError::Internal(format!("WAL task failed: {e}")))?
}

impl Member {
    /// Appends rows (in the table's schema) to the group's WAL.
    async fn append(&self, batch: RecordBatch) -> Result<()> {
        let wal = self.group.wal.clone();
        let req = self.request;
        blocking(move || lock(&wal).data(req, &batch)).await
    }

    /// Marks this load's rows complete and durable, and leaves the group.
    /// The receiver tells when the group is visible (or failed for good).
    async fn finish(self) -> Result<watch::Receiver<Outcome>> {
        let wal = self.group.wal.clone();
        let req = self.request;
        let bytes = blocking(move || {
            let mut w = lock(&wal);
            w.done(req)?;
            w.sync()?;
            Ok(w.bytes())
        })
        .await?;
        if bytes as i64 >= self.group.plan.group_commit_data_bytes {
            self.group.full.notify_one();
        }
        Ok(self.group.outcome.subscribe())
    }
}

/// One load's rows going into its table's group commit: a Stream Load with
/// the `group_commit` header or an INSERT under `SET group_commit`. Rows that
/// fit no partition are found here; the group routes the rest to tablets
/// when it commits.
pub struct GroupLoad {
    member: Member,
    router: Router,
}

impl GroupLoad {
    /// Joins the open group of the plan's table, the rows limited to the
    /// named partitions when given.
    pub async fn join(
        ctx: &Arc<LoadContext>,
        plan: &LoadPlanPb,
        only: Option<&[String]>,
    ) -> Result<GroupLoad> {
        let router = Router::of_plan(plan, only)?;
        let member = ctx.group_commits.join(ctx, plan).await?;
        Ok(GroupLoad { member, router })
    }

    /// The transaction and label of the group.
    pub fn txn(&self) -> (i64, &str) {
        (self.member.group.txn_id, &self.member.group.label)
    }

    /// Appends the rows of `batch` that fit a partition; returns the others
    /// as (row index, reason).
    pub async fn append(&mut self, batch: &RecordBatch) -> Result<Vec<(usize, String)>> {
        let rejected = self.router.unroutable(batch);
        let kept = if rejected.is_empty() {
            batch.clone()
        } else {
            let mut keep = vec![true; batch.num_rows()];
            for (row, _) in &rejected {
                keep[*row] = false;
            }
            arrow::compute::filter_record_batch(batch, &arrow::array::BooleanArray::from(keep))?
        };
        if kept.num_rows() > 0 {
            self.member.append(kept).await?;
        }
        Ok(rejected)
    }

    /// Marks the load's rows complete and durable; in `sync_mode` waits up
    /// to `timeout` for the group to be visible. A load dropped without
    /// finishing leaves rows that replay and commit ignore.
    pub async fn finish(self, mode: GroupMode, timeout: Duration) -> Result<()> {
        let rx = self.member.finish().await?;
        if mode == GroupMode::Sync {
            wait_visible(rx, timeout)
                .await
                .map_err(TethysError::Backend)?;
        }
        Ok(())
    }
}

/// Waits for a group's outcome.
async fn wait_visible(
    mut rx: watch::Receiver<Outcome>,
    timeout: Duration,
) -> std::result::Result<(), String> {
    match tokio::time::timeout(timeout, rx.wait_for(|o| o.is_some())).await {
        Ok(Ok(o)) => o.clone().unwrap_or(Ok(())),
        Ok(Err(_)) => Err("the group commit was dropped (backend shutting down)".into()),
        Err(_) => Err(format!(
            "the group commit did not become visible within {} s; the rows are in the \
             write-ahead log and will still be committed",
            timeout.as_secs()
        )),
    }
}

fn random_hex() -> String {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_i64(chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default());
    format!("{:016x}", h.finish())
}

fn unavailable(what: &str, s: tonic::Status) -> TethysError {
    TethysError::Backend(format!("{what}: {}", s.message()))
}

impl GroupCommits {
    /// Joins the open group of the plan's table, opening one if needed.
    async fn join(&self, be: &Arc<LoadContext>, plan: &LoadPlanPb) -> Result<Member> {
        loop {
            let group = {
                let mut groups = self.groups.lock().await;
                match groups.get(&plan.table_id) {
                    Some(g) => g.clone(),
                    None => {
                        let g = open_group(be, plan).await?;
                        groups.insert(plan.table_id, g.clone());
                        g
                    }
                }
            };
            let gate = group.gate.clone().read_owned().await;
            if *gate {
                // Sealed between the lookup and now: the next lookup opens a new group.
                continue;
            }
            return Ok(Member {
                group,
                request: self.next_request.fetch_add(1, Ordering::Relaxed) + 1,
                _gate: gate,
            });
        }
    }

    async fn forget(&self, g: &Arc<Group>) {
        let mut groups = self.groups.lock().await;
        if groups.get(&g.table_id).is_some_and(|x| Arc::ptr_eq(x, g)) {
            groups.remove(&g.table_id);
        }
    }
}

/// Begins a group's transaction and creates its WAL.
async fn open_group(be: &Arc<LoadContext>, plan: &LoadPlanPb) -> Result<Arc<Group>> {
    let mut fe = be.require_frontend()?;
    let label = format!("group_commit_{}_{}", random_hex(), random_hex());
    let r = fe
        .begin_group_commit(BeginGroupCommitRequest {
            db: plan.db.clone(),
            table: plan.table.clone(),
            label: label.clone(),
            previous_txn_id: 0,
        })
        .await
        .map_err(|s| unavailable("beginning the group commit transaction failed", s))?
        .into_inner();
    if r.label_exists {
        return Err(TethysError::Internal(format!(
            "group commit label {label} is taken"
        )));
    }
    let txn_plan = r.plan.unwrap_or_default();
    let header = WalHeader {
        db: plan.db.clone(),
        table: plan.table.clone(),
        table_id: plan.table_id,
        label: label.clone(),
        txn_id: r.txn_id,
    };
    let root = be.root.clone();
    let writer = blocking(move || WalWriter::create(&root, &header)).await?;
    let interval = Duration::from_millis(txn_plan.group_commit_interval_ms.max(1) as u64);
    let group = Arc::new(Group {
        label,
        txn_id: r.txn_id,
        table_id: plan.table_id,
        plan: txn_plan,
        wal: Arc::new(Mutex::new(writer)),
        gate: Arc::new(RwLock::new(false)),
        full: Notify::new(),
        outcome: watch::channel(None).0,
    });
    tokio::spawn(run_group(be.clone(), group.clone(), interval));
    Ok(group)
}

/// Waits for the group's trigger, seals it and commits it.
async fn run_group(be: Arc<LoadContext>, g: Arc<Group>, interval: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(interval) => {}
        _ = g.full.notified() => {}
    }
    be.group_commits.forget(&g).await;
    *g.gate.write().await = true;
    let path = lock(&g.wal).path().to_path_buf();
    // A bug stopping the commit fails the group (its WAL stays for the
    // replay at the next start) rather than leaving its loads waiting.
    let commit = commit_with_retries(&be, &path, Some((g.txn_id, g.plan.clone())));
    let result = tethys_common::panic::contain("the group commit", commit)
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
    if let Err(e) = &result {
        tracing::error!("group commit {} failed for good: {e}", g.label);
    }
    g.outcome.send_replace(Some(result));
}

/// Why one attempt to commit a WAL failed.
enum Failure {
    /// Worth another attempt (a backend or the FE unreachable, a conflict).
    Retry(TethysError),
    /// The rows can go nowhere (the table is gone).
    Fatal(String),
}

impl From<TethysError> for Failure {
    fn from(e: TethysError) -> Self {
        Failure::Retry(e)
    }
}

/// Commits a WAL, retrying with backoff until it is visible or cannot be.
pub async fn commit_with_retries(
    be: &Arc<LoadContext>,
    path: &Path,
    mut txn: Option<(i64, LoadPlanPb)>,
) -> std::result::Result<(), String> {
    let mut backoff = Duration::from_millis(200);
    loop {
        match commit_once(be, path, txn.take()).await {
            Ok(()) => return Ok(()),
            Err(Failure::Fatal(msg)) => {
                let _ = wal::remove(path);
                return Err(msg);
            }
            Err(Failure::Retry(e)) => {
                tracing::warn!(
                    "group commit of {} failed, retrying in {:?}: {e}",
                    path.display(),
                    backoff
                );
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        }
    }
}

async fn abort(be: &LoadContext, txn_id: i64, reason: &str) {
    if let Some(mut fe) = be.frontend() {
        let _ = fe
            .finish_load(FinishLoadRequest {
                txn_id,
                action: LoadAction::Abort.into(),
                reason: reason.to_string(),
                ..Default::default()
            })
            .await;
    }
}

/// One attempt: (re)begin the transaction unless given, write the WAL's
/// rows to tablets, commit, delete the WAL.
async fn commit_once(
    be: &Arc<LoadContext>,
    path: &Path,
    txn: Option<(i64, LoadPlanPb)>,
) -> std::result::Result<(), Failure> {
    let p = path.to_path_buf();
    let (reader, summary) = blocking(move || WalReader::open(&p)).await?;
    let header = summary.header;
    let mut fe = be
        .frontend()
        .ok_or_else(|| Failure::Fatal("this backend does not know its frontend".into()))?;
    let (txn_id, plan) = match txn {
        Some(t) => t,
        None => {
            let r = fe
                .begin_group_commit(BeginGroupCommitRequest {
                    db: header.db.clone(),
                    table: header.table.clone(),
                    label: header.label.clone(),
                    previous_txn_id: header.txn_id,
                })
                .await;
            let r = match r {
                Ok(r) => r.into_inner(),
                Err(s) if s.code() == tonic::Code::NotFound => {
                    return Err(Failure::Fatal(format!(
                        "group commit {} dropped: {}",
                        header.label,
                        s.message()
                    )));
                }
                Err(s) => return Err(unavailable("re-beginning a group commit failed", s).into()),
            };
            if r.label_exists {
                if matches!(
                    r.existing_status(),
                    TxnStatus::Visible | TxnStatus::Committed
                ) {
                    // Committed before a crash took the WAL's deletion with it.
                    wal::remove(path)?;
                    return Ok(());
                }
                return Err(TethysError::Internal(format!(
                    "label {} is held by transaction {} in state {}",
                    header.label,
                    r.existing_txn_id,
                    r.existing_status().doris_name()
                ))
                .into());
            }
            let p = path.to_path_buf();
            let h = WalHeader {
                txn_id: r.txn_id,
                ..header.clone()
            };
            blocking(move || {
                let mut w = WalWriter::reopen(&p)?;
                w.header(&h)?;
                w.sync()
            })
            .await?;
            (r.txn_id, r.plan.unwrap_or_default())
        }
    };
    match write_and_commit(be, &mut fe, reader, summary.done, txn_id, &plan).await {
        Ok(()) => {
            wal::remove(path)?;
            Ok(())
        }
        Err(e) => {
            abort(be, txn_id, &e.to_string()).await;
            Err(e.into())
        }
    }
}

async fn next_batch(reader: &mut Option<WalReader>) -> Result<Option<RecordBatch>> {
    let Some(mut r) = reader.take() else {
        return Ok(None);
    };
    let (r, b) = tokio::task::spawn_blocking(move || {
        let b = r.next_batch();
        (r, b)
    })
    .await
    .map_err(|e| TethysError::Internal(format!("WAL task failed: {e}")))?;
    *reader = Some(r);
    b
}

async fn write_and_commit(
    be: &Arc<LoadContext>,
    fe: &mut crate::load::context::FrontendClient,
    reader: WalReader,
    done: usize,
    txn_id: i64,
    plan: &LoadPlanPb,
) -> Result<()> {
    let finish = |action: LoadAction, writer: &RowShipper, stats: LoadStatsPb| FinishLoadRequest {
        txn_id,
        action: action.into(),
        reason: String::new(),
        table_id: plan.table_id,
        touched_partitions: writer.touched.iter().copied().collect(),
        stats: Some(stats),
        written_replicas: writer.writes.written_pb(),
    };
    let ncols = plan.schema.as_ref().map(|s| s.columns.len()).unwrap_or(0);
    let router = Router::of_plan(plan, None)?;
    let mut writer = RowShipper::new(be.pool.clone(), txn_id, plan, router, Default::default());
    let mut total = 0u64;
    let mut filtered = 0u64;
    let mut slot = Some(reader);
    while let Some(batch) = next_batch(&mut slot).await? {
        if batch.num_columns() != ncols {
            return Err(TethysError::Corruption(format!(
                "a group commit WAL batch has {} columns, the table {} has {ncols}",
                batch.num_columns(),
                plan.table
            )));
        }
        total += batch.num_rows() as u64;
        filtered += writer.add(&batch).await?.len() as u64;
    }
    writer.finish().await?;
    let stats = LoadStatsPb {
        table: plan.table.clone(),
        total_rows: total as i64,
        loaded_rows: writer.loaded as i64,
        filtered_rows: filtered as i64,
        message: "OK".into(),
        comment: format!("group commit of {done} loads"),
        ..Default::default()
    };
    let action = if writer.loaded == 0 {
        LoadAction::Abort
    } else {
        LoadAction::Commit
    };
    fe.finish_load(finish(action, &writer, stats))
        .await
        .map_err(|s| unavailable("committing the group commit failed", s))?;
    Ok(())
}

/// Replays the WALs a previous run left behind (after a crash), one by one,
/// in the background.
pub fn replay_wals(be: Arc<LoadContext>) {
    let paths: Vec<PathBuf> = match wal::list(&be.root) {
        Ok(p) => p,
        Err(e) => {
            tracing::error!("listing group commit WALs failed: {e}");
            return;
        }
    };
    if paths.is_empty() {
        return;
    }
    tokio::spawn(async move {
        for p in paths {
            tracing::info!("replaying group commit WAL {}", p.display());
            if let Err(e) = commit_with_retries(&be, &p, None).await {
                tracing::error!("replaying {} failed: {e}", p.display());
            }
        }
    });
}

//! `FrontendService`: what backends ask of the FE. A coordinator BE running a
//! Stream Load begins the load transaction here (label checked, plan
//! returned), and finishes it (commit, pre-commit or abort); two-phase commit
//! operations arrive here too.

use std::collections::BTreeSet;
use std::sync::Arc;

use tethys_common::TethysError;
use tethys_proto::frontend_service_server::FrontendService;
use tethys_proto::*;
use tonic::{Request, Response, Status};

use crate::catalog::{Table, TxnState};
use crate::frontend::Frontend;

pub struct FrontendRpc {
    fe: Arc<Frontend>,
}

impl FrontendRpc {
    pub fn new(fe: Arc<Frontend>) -> Self {
        FrontendRpc { fe }
    }
}

fn status(e: TethysError) -> Status {
    Status::from(e)
}

fn authenticate(user: &str, password: &str) -> Result<(), Status> {
    if crate::auth::check_password(user, password) {
        Ok(())
    } else {
        Err(Status::unauthenticated(format!(
            "Access denied for user '{user}' (using password: {})",
            if password.is_empty() { "NO" } else { "YES" }
        )))
    }
}

/// The answer to a begin whose label is taken: nothing was begun.
fn label_taken(e: &TethysError) -> Option<BeginLoadResponse> {
    let TethysError::LabelAlreadyExists {
        label,
        txn_id,
        status,
    } = e
    else {
        return None;
    };
    Some(BeginLoadResponse {
        label: label.clone(),
        label_exists: true,
        existing_status: (*status).into(),
        existing_txn_id: *txn_id,
        message: e.to_string(),
        ..Default::default()
    })
}

/// A load's table, the backends (all, and the ids of the alive ones) and
/// the database it is in.
type LoadTarget = (
    Table,
    Vec<crate::catalog::BackendInfo>,
    std::collections::BTreeSet<i64>,
    String,
);

/// The plan of a load into `target`, with its `columns` and `where` headers
/// compiled in.
fn load_plan(
    (table, backends, alive, db): &LoadTarget,
    columns: &str,
    where_expr: &str,
) -> Result<tethys_proto::LoadPlanPb, Status> {
    let mut plan = crate::load_plan::load_plan(db, table, backends, alive);
    crate::load_plan::compile(&mut plan, table, columns, where_expr).map_err(status)?;
    Ok(plan)
}

impl FrontendRpc {
    /// A table of a load, the backends, and the database's own spelling.
    fn resolve(&self, db: &str, table: &str) -> Result<LoadTarget, Status> {
        let alive = self.fe.backends.alive_ids().into_iter().collect();
        let s = self.fe.catalog.read();
        let (d, t) = s.find_table(db, table).map_err(|e| match e {
            TethysError::UnknownDatabase(_) => {
                Status::not_found(format!("unknown database, database={db}"))
            }
            _ => Status::not_found(format!("unknown table, table={table}")),
        })?;
        Ok((
            t.clone(),
            s.backends.values().cloned().collect(),
            alive,
            d.name.clone(),
        ))
    }

    /// Begins a load's transaction (`timeout_ms` 0: none) and answers with
    /// its plan; a label already used answers with that label's transaction.
    async fn begin(
        &self,
        target: &LoadTarget,
        label: Option<String>,
        timeout_ms: i64,
        columns: &str,
        where_expr: &str,
        coordinator: i64,
    ) -> Result<Response<BeginLoadResponse>, Status> {
        let db = &target.3;
        let txn = match self.fe.txn.begin_with_timeout(
            db,
            label,
            "BACKEND_STREAMING",
            timeout_ms,
            coordinator,
        ) {
            Ok(txn) => txn,
            Err(e) => return label_taken(&e).map(Response::new).ok_or_else(|| status(e)),
        };
        let plan = match load_plan(target, columns, where_expr) {
            Ok(plan) => plan,
            Err(s) => {
                let _ = self.fe.txn.abort(txn.id, s.message()).await;
                return Err(s);
            }
        };
        Ok(Response::new(BeginLoadResponse {
            txn_id: txn.id,
            label: txn.label,
            plan: Some(plan),
            ..Default::default()
        }))
    }
}

#[tonic::async_trait]
impl FrontendService for FrontendRpc {
    async fn begin_load(
        &self,
        req: Request<BeginLoadRequest>,
    ) -> Result<Response<BeginLoadResponse>, Status> {
        let r = req.into_inner();
        authenticate(&r.user, &r.password)?;
        let target = self.resolve(&r.db, &r.table)?;
        if r.plan_only {
            // Group commit: the rows join the backend's group transaction.
            return Ok(Response::new(BeginLoadResponse {
                plan: Some(load_plan(&target, &r.columns, &r.where_expr)?),
                ..Default::default()
            }));
        }
        let label = (!r.label.is_empty()).then(|| r.label.clone());
        let max = tethys_common::config::MAX_LOAD_TIMEOUT_SECS;
        let timeout = match r.timeout_secs {
            t if t <= 0 => max,
            t => tethys_common::config::checked_load_timeout(t).map_err(status)?,
        };
        self.begin(
            &target,
            label,
            timeout * 1000,
            &r.columns,
            &r.where_expr,
            r.coordinator,
        )
        .await
    }

    async fn begin_group_commit(
        &self,
        req: Request<BeginGroupCommitRequest>,
    ) -> Result<Response<BeginLoadResponse>, Status> {
        let r = req.into_inner();
        if !r.label.starts_with("group_commit_") {
            return Err(Status::invalid_argument(format!(
                "not a group commit label: {}",
                r.label
            )));
        }
        let target = self.resolve(&r.db, &r.table)?;
        if r.previous_txn_id > 0 {
            let open = matches!(
                self.fe
                    .catalog
                    .read()
                    .txns
                    .get(&r.previous_txn_id)
                    .map(|t| t.state),
                Some(TxnState::Prepare)
            );
            if open {
                self.fe
                    .txn
                    .abort(r.previous_txn_id, "group commit is retried")
                    .await
                    .map_err(status)?;
            }
        }
        // No timeout: the backend commits or aborts the group itself, and an
        // FE restart aborts what is left open (the backend then replays its WAL).
        self.begin(&target, Some(r.label), 0, "", "", 0).await
    }

    async fn finish_load(
        &self,
        req: Request<FinishLoadRequest>,
    ) -> Result<Response<FinishLoadResponse>, Status> {
        let r = req.into_inner();
        if let Some(st) = &r.stats {
            let stats = crate::catalog::LoadStats {
                table: st.table.clone(),
                total_rows: st.total_rows,
                loaded_rows: st.loaded_rows,
                filtered_rows: st.filtered_rows,
                unselected_rows: st.unselected_rows,
                load_bytes: st.load_bytes,
                message: st.message.clone(),
                error_url: st.error_url.clone(),
                user: st.user.clone(),
                comment: st.comment.clone(),
            };
            self.fe.txn.record_stats(r.txn_id, stats).map_err(status)?;
        }
        let touched: BTreeSet<(i64, i64)> = r
            .touched_partitions
            .iter()
            .map(|p| (r.table_id, *p))
            .collect();
        let written: Vec<(i64, i64)> = r
            .written_replicas
            .iter()
            .map(|f| (f.tablet_id, f.backend_id))
            .collect();
        let state = match r.action() {
            LoadAction::Commit => match self
                .fe
                .txn
                .commit_and_publish(r.txn_id, &touched, &written)
                .await
            {
                Ok(()) => TxnState::Visible,
                Err(e) => {
                    let state = self.fe.catalog.read().txns.get(&r.txn_id).map(|t| t.state);
                    if state == Some(TxnState::Committed) {
                        // Durable; the publish is retried in the background.
                        tracing::warn!("{e}");
                        TxnState::Committed
                    } else {
                        return Err(status(e));
                    }
                }
            },
            LoadAction::Precommit => {
                self.fe
                    .txn
                    .precommit(r.txn_id, &touched, &written)
                    .map_err(status)?;
                TxnState::Precommitted
            }
            LoadAction::Abort => {
                self.fe
                    .txn
                    .abort(r.txn_id, &r.reason)
                    .await
                    .map_err(status)?;
                TxnState::Aborted
            }
            LoadAction::Unspecified => {
                return Err(Status::invalid_argument(
                    "a load's finish names no action (COMMIT, PRECOMMIT or ABORT)",
                ));
            }
        };
        Ok(Response::new(FinishLoadResponse {
            status: state.to_pb().into(),
        }))
    }

    async fn publish_runtime_filter(
        &self,
        req: Request<PublishRuntimeFilterRequest>,
    ) -> Result<Response<PublishRuntimeFilterResponse>, Status> {
        self.fe
            .filter_merge
            .publish(&req.into_inner())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        Ok(Response::new(PublishRuntimeFilterResponse {}))
    }

    async fn await_runtime_filter(
        &self,
        req: Request<AwaitRuntimeFilterRequest>,
    ) -> Result<Response<AwaitRuntimeFilterResponse>, Status> {
        let r = req.into_inner();
        let wait = std::time::Duration::from_millis(r.wait_ms);
        Ok(Response::new(
            self.fe
                .filter_merge
                .fetch(&r.query_id, r.filter_id, wait)
                .await,
        ))
    }

    async fn txn_operation(
        &self,
        req: Request<TxnOperationRequest>,
    ) -> Result<Response<TxnOperationResponse>, Status> {
        let r = req.into_inner();
        authenticate(&r.user, &r.password)?;
        let op = r.operation();
        if !matches!(op, LoadAction::Commit | LoadAction::Abort) {
            return Err(Status::invalid_argument(
                "transaction operation should be 'commit' or 'abort'",
            ));
        }
        let (txn_id, state) = {
            let s = self.fe.catalog.read();
            let db = s
                .database(&r.db)
                .map(|d| d.name.clone())
                .ok_or_else(|| Status::not_found(format!("unknown database, database={}", r.db)))?;
            let found = if r.txn_id > 0 {
                s.txns.get(&r.txn_id).filter(|t| t.db == db)
            } else {
                s.txns
                    .values()
                    .filter(|t| t.db == db && t.label == r.label)
                    .max_by_key(|t| t.id)
            };
            let t = found.ok_or_else(|| {
                if r.txn_id > 0 {
                    Status::not_found(format!("transaction [{}] not found", r.txn_id))
                } else {
                    Status::not_found(format!("label [{}] not found", r.label))
                }
            })?;
            (t.id, t.state)
        };
        if state != TxnState::Precommitted {
            let e = crate::txn::already(txn_id, state, ", not pre-committed.");
            return Err(Status::failed_precondition(e.to_string()));
        }
        if op == LoadAction::Commit {
            self.fe
                .txn
                .commit_precommitted(txn_id)
                .await
                .map_err(status)?;
        } else {
            self.fe
                .txn
                .abort(txn_id, "aborted by two-phase commit")
                .await
                .map_err(status)?;
        }
        let who = if r.txn_id > 0 {
            format!("transaction [{txn_id}]")
        } else {
            format!("label [{}]", r.label)
        };
        Ok(Response::new(TxnOperationResponse {
            message: format!(
                "{who} {} successfully.",
                if op == LoadAction::Commit {
                    "commit"
                } else {
                    "abort"
                }
            ),
        }))
    }
}

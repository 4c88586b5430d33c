//! The HTTP handlers: `PUT /api/{db}/{table}/_stream_load`,
//! `PUT /api/{db}[/{table}]/_stream_load_2pc` and
//! `GET /api/_load_error_log?file=...`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::RecordBatch;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tethys_common::config::ROWS_PER_PAGE;
use tethys_common::routing::Router;
use tethys_common::schema::TableSchema;
use tethys_common::ship::RowShipper;
use tethys_common::{Result, TethysError};
use tethys_proto::{BeginLoadRequest, FinishLoadRequest, LoadAction, LoadPlanPb, LoadStatsPb};

use super::LoadContext;
use super::convert::{Converter, SourceSpec};
use super::group_commit::{GroupLoad, GroupMode};
use super::options::LoadOptions;
use super::parse::{BadRow, RowBlock, RowSink, RowSplitter};

use super::decompress::PlainBody;
/// Bad rows kept in an error log.
const MAX_ERROR_LOG_ROWS: usize = 1000;

/// The Stream Load response, with Doris' field names in Doris' order.
#[derive(Debug, Default, Serialize)]
pub struct LoadResponse {
    #[serde(rename = "TxnId")]
    txn_id: i64,
    #[serde(rename = "Label")]
    label: String,
    #[serde(rename = "Comment")]
    comment: String,
    #[serde(rename = "TwoPhaseCommit", skip_serializing_if = "Option::is_none")]
    two_phase_commit: Option<String>,
    #[serde(rename = "GroupCommit", skip_serializing_if = "Option::is_none")]
    group_commit: Option<bool>,
    #[serde(rename = "Status")]
    status: String,
    #[serde(rename = "ExistingJobStatus", skip_serializing_if = "Option::is_none")]
    existing_job_status: Option<String>,
    #[serde(rename = "Message")]
    message: String,
    #[serde(rename = "NumberTotalRows")]
    total_rows: u64,
    #[serde(rename = "NumberLoadedRows")]
    loaded_rows: u64,
    #[serde(rename = "NumberFilteredRows")]
    filtered_rows: u64,
    #[serde(rename = "NumberUnselectedRows")]
    unselected_rows: u64,
    #[serde(rename = "LoadBytes")]
    load_bytes: u64,
    #[serde(rename = "LoadTimeMs")]
    load_time_ms: u64,
    #[serde(rename = "BeginTxnTimeMs", skip_serializing_if = "Option::is_none")]
    begin_txn_ms: Option<u64>,
    #[serde(rename = "StreamLoadPutTimeMs")]
    put_ms: u64,
    #[serde(rename = "ReadDataTimeMs")]
    read_ms: u64,
    #[serde(rename = "WriteDataTimeMs")]
    write_ms: u64,
    #[serde(
        rename = "CommitAndPublishTimeMs",
        skip_serializing_if = "Option::is_none"
    )]
    commit_ms: Option<u64>,
    #[serde(rename = "ErrorURL", skip_serializing_if = "Option::is_none")]
    error_url: Option<String>,
}

fn json(status: StatusCode, body: &impl Serialize) -> Response {
    let text = serde_json::to_string_pretty(body).unwrap_or_else(|_| "{}".into());
    (status, [("content-type", "application/json")], text).into_response()
}

fn unauthorized(msg: &str) -> Response {
    json(
        StatusCode::UNAUTHORIZED,
        &serde_json::json!({"status": "FAILED", "msg": msg, "Status": "Fail", "Message": msg}),
    )
}

/// Where a load's converted rows go.
enum Sink {
    /// Straight to tablets, in the load's own transaction.
    Tablets(Box<RowShipper>),
    /// Into the table's group commit.
    Group(GroupLoad),
}

/// State of one running load.
struct Load {
    sink: Sink,
    converter: Converter,
    loaded: u64,
    total: u64,
    errors: Vec<(String, String)>,
    error_count: u64,
    unselected: u64,
}

/// A row of a converted batch as text, for the error log.
fn row_text(batch: &RecordBatch, row: usize) -> String {
    (0..batch.num_columns())
        .map(|c| {
            arrow::util::display::array_value_to_string(batch.column(c), row).unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(",")
}

impl Load {
    fn record_errors(&mut self, errs: Vec<(String, String)>) {
        self.error_count += errs.len() as u64;
        self.total += errs.len() as u64;
        for e in errs {
            if self.errors.len() < MAX_ERROR_LOG_ROWS {
                self.errors.push(e);
            }
        }
    }

    async fn process(&mut self, rows: &RowBlock) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let conv = self.converter.convert(rows)?;
        let good = conv.batch.num_rows() as u64;
        self.total += good + conv.unselected as u64;
        self.unselected += conv.unselected as u64;
        self.record_errors(conv.errors);
        let rejected = match &mut self.sink {
            Sink::Tablets(w) => w.add(&conv.batch).await?,
            Sink::Group(g) => g.append(&conv.batch).await?,
        };
        self.loaded += good - rejected.len() as u64;
        if !rejected.is_empty() {
            // Rows that fit no partition are filtered, not loaded.
            self.total -= rejected.len() as u64;
            let errs = rejected
                .into_iter()
                .map(|(row, reason)| (reason, row_text(&conv.batch, row)))
                .collect();
            self.record_errors(errs);
        }
        Ok(())
    }
}

/// The statistics of a load, as the FE keeps them.
fn stats_of(resp: &LoadResponse, table: &str, user: &str) -> LoadStatsPb {
    LoadStatsPb {
        table: table.to_string(),
        total_rows: resp.total_rows as i64,
        loaded_rows: resp.loaded_rows as i64,
        filtered_rows: resp.filtered_rows as i64,
        unselected_rows: resp.unselected_rows as i64,
        load_bytes: resp.load_bytes as i64,
        message: resp.message.clone(),
        error_url: resp.error_url.clone().unwrap_or_default(),
        user: user.to_string(),
        comment: resp.comment.clone(),
    }
}

/// Writes the error log of a load; returns its file name.
fn write_error_log(
    be: &LoadContext,
    txn_id: i64,
    errors: &[(String, String)],
    more: u64,
) -> Option<String> {
    let dir = be.root.join("error_log");
    std::fs::create_dir_all(&dir).ok()?;
    let name = format!(
        "error_log_{txn_id}_{:x}",
        chrono::Utc::now().timestamp_millis()
    );
    let mut text = String::new();
    for (reason, raw) in errors {
        text.push_str(&format!("Reason: {reason}. src line [{raw}]; \n"));
    }
    if more > 0 {
        text.push_str(&format!("... {more} more error rows not shown\n"));
    }
    std::fs::write(dir.join(&name), text).ok()?;
    Some(name)
}

/// The Message of a failed load.
fn failure_message(e: &TethysError) -> String {
    match e {
        TethysError::DataQuality(m) => format!("[DATA_QUALITY_ERROR]{m}"),
        TethysError::Timeout(_) => {
            "[TIMEOUT]the load ran longer than its timeout and was cancelled".into()
        }
        TethysError::NotSupported(m) | TethysError::Analysis(m) => format!("[ANALYSIS_ERROR]{m}"),
        other => format!("[INTERNAL_ERROR]{other}"),
    }
}

/// The load's timeout (given or Doris' default, 3 days; never longer).
fn load_timeout(opts: &LoadOptions) -> std::time::Duration {
    let max = tethys_common::config::MAX_LOAD_TIMEOUT_SECS;
    let secs = if opts.timeout_secs > 0 {
        opts.timeout_secs.min(max)
    } else {
        max
    };
    std::time::Duration::from_secs(secs as u64)
}

/// `PUT /api/{db}/{table}/_stream_load`.
pub async fn stream_load(
    State(be): State<Arc<LoadContext>>,
    Path((db, table)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let start = Instant::now();
    let Some((user, password)) = tethys_common::http_auth::basic_auth(&headers) else {
        return unauthorized("no valid Basic authorization");
    };
    let mut resp = LoadResponse {
        txn_id: -1,
        two_phase_commit: Some("false".into()),
        status: "Fail".into(),
        ..Default::default()
    };
    let opts = match LoadOptions::from_headers(&headers) {
        Ok(o) => o,
        Err(e) => {
            resp.message = format!("[ANALYSIS_ERROR]{e}");
            return json(StatusCode::OK, &resp);
        }
    };
    resp.label = opts.label.clone();
    resp.comment = opts.comment.clone();
    resp.two_phase_commit = Some(opts.two_phase_commit.to_string());
    let Some(mut fe) = be.frontend() else {
        resp.message = "[INTERNAL_ERROR]this backend does not know its frontend".into();
        return json(StatusCode::OK, &resp);
    };
    // Loads with a label or two-phase commit bypass group commit, as in Doris.
    let group_mode = opts
        .group_commit
        .filter(|_| opts.label.is_empty() && !opts.two_phase_commit);
    let t = Instant::now();
    let begun = fe
        .begin_load(BeginLoadRequest {
            user: user.clone(),
            password,
            db: db.clone(),
            table: table.clone(),
            label: opts.label.clone(),
            two_phase_commit: opts.two_phase_commit,
            timeout_secs: opts.timeout_secs,
            columns: opts.columns.clone().unwrap_or_default(),
            where_expr: opts.where_expr.clone().unwrap_or_default(),
            plan_only: group_mode.is_some(),
            coordinator: be.backend_id(),
        })
        .await;
    let begin_ms = t.elapsed().as_millis() as u64;
    let begun = match begun {
        Ok(r) => r.into_inner(),
        Err(s) if s.code() == tonic::Code::Unauthenticated => return unauthorized(s.message()),
        Err(s) => {
            resp.message = format!(
                "[ANALYSIS_ERROR]TStatus: errCode = 2, detailMessage = {}",
                s.message()
            );
            return json(StatusCode::OK, &resp);
        }
    };
    if let Some(mode) = group_mode {
        resp.two_phase_commit = None;
        resp.group_commit = Some(true);
        let plan = begun.plan.unwrap_or_default();
        group_load(&be, &opts, &plan, mode, body, &mut resp).await;
        resp.load_time_ms = start.elapsed().as_millis() as u64;
        return json(StatusCode::OK, &resp);
    }
    resp.begin_txn_ms = Some(begin_ms);
    resp.label = begun.label.clone();
    if begun.label_exists {
        resp.status = "Label Already Exists".into();
        resp.existing_job_status = Some(begun.existing_status().doris_name().to_string());
        resp.message = begun.message.clone();
        return json(StatusCode::OK, &resp);
    }
    resp.txn_id = begun.txn_id;
    let plan = begun.plan.unwrap_or_default();
    let outcome = match Router::of_plan(&plan, opts.partitions.as_deref()) {
        Ok(router) => {
            let rows = tethys_proto::WriteRequest {
                delete_rows: opts.delete_rows,
                ..Default::default()
            };
            let shipper = RowShipper::new(be.pool.clone(), begun.txn_id, &plan, router, rows);
            // A bug stopping the load aborts its transaction like any error.
            let load = run_load(
                &be,
                &opts,
                &plan,
                Sink::Tablets(Box::new(shipper)),
                body,
                &mut resp,
            );
            tethys_common::panic::contain("the load", load)
                .await
                .and_then(|r| r)
        }
        Err(e) => Err(e),
    };
    let who = Who {
        table: &table,
        user: &user,
    };
    finish(
        &mut fe,
        &opts,
        begun.txn_id,
        &plan,
        outcome,
        &who,
        &mut resp,
    )
    .await;
    resp.load_time_ms = start.elapsed().as_millis() as u64;
    json(StatusCode::OK, &resp)
}

/// Whose load it is, for the statistics the FE keeps.
struct Who<'a> {
    table: &'a str,
    user: &'a str,
}

/// Commits (or pre-commits) a load whose rows are written, or aborts it,
/// filling the response's status and message.
async fn finish(
    fe: &mut crate::load::context::FrontendClient,
    opts: &LoadOptions,
    txn_id: i64,
    plan: &LoadPlanPb,
    outcome: Result<Sink>,
    who: &Who<'_>,
    resp: &mut LoadResponse,
) {
    let fe_for_abort = fe.clone();
    let abort = |reason: String, stats: LoadStatsPb| {
        let mut fe = fe_for_abort.clone();
        async move {
            let _ = fe
                .finish_load(FinishLoadRequest {
                    txn_id,
                    action: LoadAction::Abort.into(),
                    reason,
                    stats: Some(stats),
                    ..Default::default()
                })
                .await;
        }
    };
    match outcome {
        Err(e) => {
            resp.status = "Fail".into();
            resp.message = failure_message(&e);
            abort(e.to_string(), stats_of(resp, who.table, who.user)).await;
        }
        Ok(Sink::Group(..)) => {
            resp.message = "[INTERNAL_ERROR]a load without group commit joined a group".into();
            abort(resp.message.clone(), stats_of(resp, who.table, who.user)).await;
        }
        Ok(Sink::Tablets(writer)) => {
            let t = Instant::now();
            let action = if opts.two_phase_commit {
                LoadAction::Precommit
            } else {
                LoadAction::Commit
            };
            let r = fe
                .finish_load(FinishLoadRequest {
                    txn_id,
                    action: action.into(),
                    reason: String::new(),
                    table_id: plan.table_id,
                    touched_partitions: writer.touched.iter().copied().collect(),
                    stats: Some(LoadStatsPb {
                        message: "OK".into(),
                        ..stats_of(resp, who.table, who.user)
                    }),
                    written_replicas: writer.writes.written_pb(),
                })
                .await;
            resp.commit_ms = Some(t.elapsed().as_millis() as u64);
            match r {
                Ok(r) if r.get_ref().status() == tethys_proto::TxnStatus::Committed => {
                    // Committed (durable, will become visible) but the
                    // publish did not finish: Doris' Publish Timeout.
                    resp.status = "Publish Timeout".into();
                    resp.message =
                        "transaction commit successfully, BUT data will be visible later".into();
                }
                Ok(_) => {
                    resp.status = "Success".into();
                    resp.message = "OK".into();
                }
                Err(s) => {
                    resp.status = "Fail".into();
                    resp.message = format!("[INTERNAL_ERROR]{}", s.message());
                    abort(s.message().to_string(), stats_of(resp, who.table, who.user)).await;
                }
            }
        }
    }
}

/// A group-commit load: rows go to the table's group on this backend.
async fn group_load(
    be: &Arc<LoadContext>,
    opts: &LoadOptions,
    plan: &LoadPlanPb,
    mode: GroupMode,
    body: Body,
    resp: &mut LoadResponse,
) {
    let t = Instant::now();
    let group = match GroupLoad::join(be, plan, opts.partitions.as_deref()).await {
        Ok(g) => g,
        Err(e) => {
            resp.message = failure_message(&e);
            return;
        }
    };
    resp.put_ms = t.elapsed().as_millis() as u64;
    let (txn_id, label) = group.txn();
    resp.txn_id = txn_id;
    resp.label = label.to_string();
    let group = match run_load(be, opts, plan, Sink::Group(group), body, resp).await {
        Ok(Sink::Group(g)) => g,
        Ok(Sink::Tablets(_)) => {
            resp.message = "[INTERNAL_ERROR]a group commit load wrote to tablets".into();
            return;
        }
        Err(e) => {
            // The rows appended so far are never marked done: replay and
            // commit ignore them.
            resp.message = failure_message(&e);
            return;
        }
    };
    let t = Instant::now();
    let finished = group.finish(mode, load_timeout(opts)).await;
    resp.write_ms += t.elapsed().as_millis() as u64;
    if let Err(e) = finished {
        resp.message = failure_message(&e);
        return;
    }
    resp.status = "Success".into();
    resp.message = "OK".into();
}

/// The converter of a load's rows into the table's columns, and the
/// names of the source columns: as the FE compiled them from the `columns`
/// header, or the table's own columns.
fn converter_of(opts: &LoadOptions, plan: &LoadPlanPb) -> Result<(Converter, Vec<String>)> {
    let schema = TableSchema::from_pb(&plan.schema.clone().unwrap_or_default())?;
    let (names, types) = if plan.source_columns.is_empty() {
        (
            schema.columns.iter().map(|c| c.name.clone()).collect(),
            vec![],
        )
    } else {
        (plan.source_columns.clone(), plan.source_types.clone())
    };
    let spec = SourceSpec {
        names: names.clone(),
        types,
        column_exprs: plan.column_exprs.clone(),
        where_expr: plan.where_expr.clone(),
    };
    let defaults: Vec<Option<String>> = plan
        .defaults
        .iter()
        .zip(plan.has_default.iter())
        .map(|(d, has)| {
            (*has && d != "CURRENT_TIMESTAMP" && d != "CURRENT_DATE").then(|| d.clone())
        })
        .collect();
    let converter = Converter::new(
        schema,
        &spec,
        defaults,
        opts.strict_mode,
        opts.partial_columns,
        opts.delete_rows,
    )?;
    Ok((converter, names))
}

/// Reads, converts and writes the body; returns the sink, ready to be
/// committed, or the reason the load must be aborted.
async fn run_load(
    be: &Arc<LoadContext>,
    opts: &LoadOptions,
    plan: &LoadPlanPb,
    sink: Sink,
    body: Body,
    resp: &mut LoadResponse,
) -> Result<Sink> {
    tethys_common::debug_point::panic_if_hit("BeStreamLoad.panic");
    let (converter, names) = converter_of(opts, plan)?;
    let mut sink = sink;
    if opts.partial_columns
        && let Sink::Tablets(w) = &mut sink
    {
        w.rows.partial_columns = converter.partial_columns();
        w.rows.partial_strict = opts.strict_mode;
    }
    let mut load = Load {
        sink,
        converter,
        loaded: 0,
        total: 0,
        errors: vec![],
        error_count: 0,
        unselected: 0,
    };
    let read_start = Instant::now();
    let limit = be.max_body_bytes;
    let mut body = PlainBody::new(body.into_data_stream(), opts.compress, limit).await;
    let read = load.read_body(opts, names, &mut body).await;
    let read_ms = read_start.elapsed().as_millis() as u64;
    if let Err(e) = read {
        // Let writes already sent finish before the caller aborts, so none
        // lands after the abort.
        if let Sink::Tablets(w) = &mut load.sink {
            w.drain().await;
        }
        return Err(e);
    }
    let write_ms = match &mut load.sink {
        Sink::Tablets(w) => {
            if let Err(e) = w.finish().await {
                w.drain().await;
                return Err(e);
            }
            w.write_ms
        }
        Sink::Group(..) => 0,
    };
    resp.read_ms = read_ms;
    resp.write_ms = write_ms;
    resp.load_bytes = body.arrived;
    resp.total_rows = load.total;
    resp.loaded_rows = load.loaded;
    resp.filtered_rows = load.error_count;
    resp.unselected_rows = load.unselected;
    if load.error_count > 0 {
        let more = load.error_count - load.errors.len() as u64;
        let id = resp.txn_id.max(0);
        if let Some(name) = write_error_log(be, id, &load.errors, more) {
            resp.error_url = Some(format!(
                "http://{}/api/_load_error_log?file={name}",
                be.http_addr
            ));
        }
    }
    let denominator = (load.total - load.unselected).max(1) as f64;
    if load.error_count as f64 / denominator > opts.max_filter_ratio {
        resp.loaded_rows = 0;
        return Err(TethysError::DataQuality("too many filtered rows".into()));
    }
    Ok(load.sink)
}

impl Load {
    /// Streams the body through decompression, row splitting and
    /// conversion into the sink, within the load's timeout.
    async fn read_body(
        &mut self,
        opts: &LoadOptions,
        names: Vec<String>,
        body: &mut PlainBody,
    ) -> Result<()> {
        let mut splitter = RowSplitter::new(opts.clone(), names);
        let timeout = load_timeout(opts);
        let deadline = tokio::time::Instant::now() + timeout;
        let mut block = RowBlock::default();
        let mut bad: Vec<BadRow> = vec![];
        loop {
            let next = tokio::time::timeout_at(deadline, body.next())
                .await
                .map_err(|_| TethysError::Timeout(timeout.as_secs()));
            let mut out = RowSink {
                block: &mut block,
                bad: &mut bad,
            };
            let ended = match next?? {
                Some(chunk) => {
                    splitter.feed(&chunk, &mut out)?;
                    false
                }
                None => {
                    splitter.finish(&mut out)?;
                    true
                }
            };
            if !bad.is_empty() {
                self.record_errors(std::mem::take(&mut bad));
            }
            if block.len() >= ROWS_PER_PAGE || ended {
                self.process(&block).await?;
                block.clear();
            }
            if ended {
                return Ok(());
            }
        }
    }
}

/// Query of `GET /api/_load_error_log`.
#[derive(Debug, serde::Deserialize)]
pub struct ErrorLogQuery {
    file: String,
}

/// `GET /api/_load_error_log?file=...`: the bad rows of a load.
pub async fn error_log(
    State(be): State<Arc<LoadContext>>,
    Query(q): Query<ErrorLogQuery>,
) -> Response {
    let ok_name = !q.file.is_empty()
        && q.file
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !ok_name {
        return (StatusCode::BAD_REQUEST, "invalid error log file name").into_response();
    }
    match tokio::fs::read_to_string(be.root.join("error_log").join(&q.file)).await {
        Ok(text) => (
            StatusCode::OK,
            [("content-type", "text/plain; charset=utf-8")],
            text,
        )
            .into_response(),
        Err(_) => (StatusCode::NOT_FOUND, "error log not found").into_response(),
    }
}

/// `PUT /api/{db}[/{table}]/_stream_load_2pc`: commit or abort a pre-committed load.
pub async fn stream_load_2pc(
    State(be): State<Arc<LoadContext>>,
    Path(params): Path<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let Some((user, password)) = tethys_common::http_auth::basic_auth(&headers) else {
        return unauthorized("no valid Basic authorization");
    };
    let db = params.get("db").cloned().unwrap_or_default();
    let request = tethys_common::http_auth::two_phase_request(&headers, user, password, db);
    let outcome = match (request, be.frontend()) {
        (_, None) => Err("this backend does not know its frontend".to_string()),
        (Err(msg), _) => Err(msg),
        (Ok(req), Some(mut fe)) => match fe.txn_operation(req).await {
            Ok(r) => Ok(r.into_inner().message),
            Err(s) if s.code() == tonic::Code::Unauthenticated => return unauthorized(s.message()),
            Err(s) => Err(s.message().to_string()),
        },
    };
    json(
        StatusCode::OK,
        &tethys_common::http_auth::two_phase_answer(outcome),
    )
}

//! The HTTP handlers: `PUT /api/{db}/{table}/_stream_load`,
//! `PUT /api/{db}[/{table}]/_stream_load_2pc` and
//! `GET /api/_load_error_log?file=...`.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::RecordBatch;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::Serialize;
use tethys_common::backend_client::BackendInfo;
use tethys_common::config::{ROWS_PER_PAGE, SEGMENT_FLUSH_ROWS};
use tethys_common::routing::{BucketRule, PartitionRoute, Router};
use tethys_common::schema::TableSchema;
use tethys_common::{Result, TethysError};
use tethys_proto::{BeginLoadRequest, FinishLoadRequest, LoadPlanPb, LoadStatsPb};

use super::convert::{Converter, SourceSpec};
use super::options::LoadOptions;
use super::parse::{RowSplitter, SourceRow};
use crate::service::Backend;

/// Largest body accepted (Doris' `streaming_load_max_mb`, 10 GB).
const MAX_BODY_BYTES: u64 = 10 << 30;
/// Bad rows kept in an error log.
const MAX_ERROR_LOG_ROWS: usize = 1000;
/// Rows buffered across tablets before the largest buffers are written.
const MAX_BUFFERED_ROWS: usize = 1 << 20;

/// The Stream Load response, with Doris' field names in Doris' order.
#[derive(Debug, Default, Serialize)]
pub struct LoadResponse {
    #[serde(rename = "TxnId")]
    txn_id: i64,
    #[serde(rename = "Label")]
    label: String,
    #[serde(rename = "Comment")]
    comment: String,
    #[serde(rename = "TwoPhaseCommit")]
    two_phase_commit: String,
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
    #[serde(rename = "BeginTxnTimeMs")]
    begin_txn_ms: u64,
    #[serde(rename = "StreamLoadPutTimeMs")]
    put_ms: u64,
    #[serde(rename = "ReadDataTimeMs")]
    read_ms: u64,
    #[serde(rename = "WriteDataTimeMs")]
    write_ms: u64,
    #[serde(rename = "CommitAndPublishTimeMs")]
    commit_ms: u64,
    #[serde(rename = "ErrorURL", skip_serializing_if = "Option::is_none")]
    error_url: Option<String>,
}

fn json(status: StatusCode, body: &impl Serialize) -> Response {
    let text = serde_json::to_string_pretty(body).unwrap_or_else(|_| "{}".into());
    (status, [("content-type", "application/json")], text).into_response()
}

/// The user and password of a request's basic authorization.
pub fn basic_auth(h: &HeaderMap) -> Option<(String, String)> {
    let v = h.get("authorization")?.to_str().ok()?;
    tethys_common::http_auth::decode_basic_auth(v)
}

fn unauthorized(msg: &str) -> Response {
    json(
        StatusCode::UNAUTHORIZED,
        &serde_json::json!({"status": "FAILED", "msg": msg, "Status": "Fail", "Message": msg}),
    )
}

fn router_of(plan: &LoadPlanPb, only: Option<&Vec<String>>) -> Result<Router> {
    let parse = |s: &Option<String>| s.as_ref().and_then(|v| v.parse::<i128>().ok());
    if let Some(names) = only {
        for n in names {
            if !plan
                .partitions
                .iter()
                .any(|p| p.name.eq_ignore_ascii_case(n))
            {
                return Err(TethysError::Analysis(format!("unknown partition: {n}")));
            }
        }
    }
    let partitions = plan
        .partitions
        .iter()
        .filter(|p| only.is_none_or(|names| names.iter().any(|n| n.eq_ignore_ascii_case(&p.name))))
        .map(|p| PartitionRoute {
            partition_id: p.partition_id,
            lower: parse(&p.lower),
            upper: parse(&p.upper),
            tablets: p
                .tablet_ids
                .iter()
                .copied()
                .zip(p.backend_ids.iter().copied())
                .collect(),
        })
        .collect();
    let buckets = if plan.random_buckets {
        BucketRule::Random
    } else {
        BucketRule::Hash(plan.hash_columns.iter().map(|c| *c as usize).collect())
    };
    let pc = (plan.partition_column >= 0).then_some(plan.partition_column as usize);
    Ok(Router::new(pc, partitions, buckets))
}

/// State of one running load.
struct Load<'a> {
    be: &'a Arc<Backend>,
    txn_id: i64,
    backends: HashMap<i64, BackendInfo>,
    router: Router,
    converter: Converter,
    buffers: HashMap<i64, (Vec<RecordBatch>, usize, i64)>,
    buffered: usize,
    touched: BTreeSet<i64>,
    loaded: u64,
    total: u64,
    errors: Vec<(String, String)>,
    error_count: u64,
    unselected: u64,
    write_ms: u64,
}

impl Load<'_> {
    fn record_errors(&mut self, errs: Vec<(String, String)>) {
        self.error_count += errs.len() as u64;
        self.total += errs.len() as u64;
        for e in errs {
            if self.errors.len() < MAX_ERROR_LOG_ROWS {
                self.errors.push(e);
            }
        }
    }

    async fn process(&mut self, rows: Vec<SourceRow>) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let conv = self.converter.convert(&rows)?;
        let good = conv.batch.num_rows() as u64;
        self.total += good + conv.unselected as u64;
        self.unselected += conv.unselected as u64;
        self.record_errors(conv.errors);
        let (routed, rejected) = self.router.route(&conv.batch)?;
        if !rejected.is_empty() {
            // Rows that fit no partition are filtered, not loaded.
            self.total -= rejected.len() as u64;
            let errs = rejected
                .into_iter()
                .map(|(row, reason)| {
                    let raw = (0..conv.batch.num_columns())
                        .map(|c| {
                            arrow::util::display::array_value_to_string(conv.batch.column(c), row)
                                .unwrap_or_default()
                        })
                        .collect::<Vec<_>>()
                        .join(",");
                    (reason, raw)
                })
                .collect();
            self.record_errors(errs);
        }
        for r in routed {
            self.touched.insert(r.partition_id);
            self.loaded += r.batch.num_rows() as u64;
            let e = self
                .buffers
                .entry(r.tablet_id)
                .or_insert_with(|| (vec![], 0, r.backend_id));
            e.1 += r.batch.num_rows();
            self.buffered += r.batch.num_rows();
            e.0.push(r.batch);
            if e.1 >= SEGMENT_FLUSH_ROWS {
                self.flush(r.tablet_id).await?;
            }
        }
        while self.buffered > MAX_BUFFERED_ROWS {
            let Some((&tid, _)) = self.buffers.iter().max_by_key(|(_, v)| v.1) else {
                break;
            };
            self.flush(tid).await?;
        }
        Ok(())
    }

    async fn flush(&mut self, tablet_id: i64) -> Result<()> {
        let Some((batches, n, backend_id)) = self.buffers.remove(&tablet_id) else {
            return Ok(());
        };
        self.buffered -= n;
        let info = self.backends.get(&backend_id).ok_or_else(|| {
            TethysError::Internal(format!("backend {backend_id} is not in the load plan"))
        })?;
        let t = Instant::now();
        self.be
            .pool
            .get(info)?
            .write(self.txn_id, tablet_id, batches)
            .await?;
        self.write_ms += t.elapsed().as_millis() as u64;
        Ok(())
    }

    async fn flush_all(&mut self) -> Result<()> {
        let ids: Vec<i64> = self.buffers.keys().copied().collect();
        for id in ids {
            self.flush(id).await?;
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
    be: &Backend,
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

/// `PUT /api/{db}/{table}/_stream_load`.
pub async fn stream_load(
    State(be): State<Arc<Backend>>,
    Path((db, table)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let start = Instant::now();
    let Some((user, password)) = basic_auth(&headers) else {
        return unauthorized("no valid Basic authorization");
    };
    let mut resp = LoadResponse {
        txn_id: -1,
        two_phase_commit: "false".into(),
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
    resp.two_phase_commit = opts.two_phase_commit.to_string();
    let Some(mut fe) = be.frontend() else {
        resp.message = "[INTERNAL_ERROR]this backend does not know its frontend".into();
        return json(StatusCode::OK, &resp);
    };
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
        })
        .await;
    resp.begin_txn_ms = t.elapsed().as_millis() as u64;
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
    resp.label = begun.label.clone();
    if begun.label_exists {
        resp.status = "Label Already Exists".into();
        resp.existing_job_status = Some(begun.existing_status.clone());
        resp.message = begun.message.clone();
        return json(StatusCode::OK, &resp);
    }
    resp.txn_id = begun.txn_id;
    let plan = begun.plan.unwrap_or_default();
    let outcome = run_load(&be, &opts, &plan, begun.txn_id, body, &mut resp).await;
    let fe_for_abort = fe.clone();
    let abort = |reason: String, stats: LoadStatsPb| {
        let mut fe = fe_for_abort.clone();
        let txn_id = begun.txn_id;
        async move {
            let _ = fe
                .finish_load(FinishLoadRequest {
                    txn_id,
                    action: "ABORT".into(),
                    reason,
                    stats: Some(stats),
                    ..Default::default()
                })
                .await;
        }
    };
    match outcome {
        Err(e) => {
            let reason = e.to_string();
            resp.status = "Fail".into();
            resp.message = match e {
                TethysError::DataQuality(m) => format!("[DATA_QUALITY_ERROR]{m}"),
                TethysError::Timeout(_) => {
                    "[TIMEOUT]the load ran longer than its timeout and was cancelled".into()
                }
                TethysError::NotSupported(m) | TethysError::Analysis(m) => {
                    format!("[ANALYSIS_ERROR]{m}")
                }
                other => format!("[INTERNAL_ERROR]{other}"),
            };
            abort(reason, stats_of(&resp, &table, &user)).await;
        }
        Ok(touched) => {
            let t = Instant::now();
            let action = if opts.two_phase_commit {
                "PRECOMMIT"
            } else {
                "COMMIT"
            };
            let r = fe
                .finish_load(FinishLoadRequest {
                    txn_id: begun.txn_id,
                    action: action.into(),
                    reason: String::new(),
                    table_id: plan.table_id,
                    touched_partitions: touched,
                    stats: Some(LoadStatsPb {
                        message: "OK".into(),
                        ..stats_of(&resp, &table, &user)
                    }),
                })
                .await;
            resp.commit_ms = t.elapsed().as_millis() as u64;
            match r {
                Ok(_) => {
                    resp.status = "Success".into();
                    resp.message = "OK".into();
                }
                Err(s) => {
                    resp.status = "Fail".into();
                    resp.message = format!("[INTERNAL_ERROR]{}", s.message());
                    abort(s.message().to_string(), stats_of(&resp, &table, &user)).await;
                }
            }
        }
    }
    resp.load_time_ms = start.elapsed().as_millis() as u64;
    json(StatusCode::OK, &resp)
}

/// Reads, converts and writes the body; returns the touched partitions, or
/// the reason the load must be aborted.
async fn run_load(
    be: &Arc<Backend>,
    opts: &LoadOptions,
    plan: &LoadPlanPb,
    txn_id: i64,
    body: Body,
    resp: &mut LoadResponse,
) -> Result<Vec<i64>> {
    let schema = TableSchema::from_pb(&plan.schema.clone().unwrap_or_default())?;
    // Source columns: as the FE compiled them from the columns header, or the
    // table's own columns.
    let spec = if plan.source_columns.is_empty() {
        SourceSpec {
            names: schema.columns.iter().map(|c| c.name.clone()).collect(),
            types: vec![],
            column_exprs: plan.column_exprs.clone(),
            where_expr: plan.where_expr.clone(),
        }
    } else {
        SourceSpec {
            names: plan.source_columns.clone(),
            types: plan.source_types.clone(),
            column_exprs: plan.column_exprs.clone(),
            where_expr: plan.where_expr.clone(),
        }
    };
    let names = spec.names.clone();
    let defaults: Vec<Option<String>> = plan
        .defaults
        .iter()
        .zip(plan.has_default.iter())
        .map(|(d, has)| {
            (*has && d != "CURRENT_TIMESTAMP" && d != "CURRENT_DATE").then(|| d.clone())
        })
        .collect();
    let converter = Converter::new(schema, &spec, defaults, opts.strict_mode)?;
    let mut load = Load {
        be,
        txn_id,
        backends: plan
            .backends
            .iter()
            .map(|b| {
                (
                    b.id,
                    BackendInfo {
                        id: b.id,
                        host: b.host.clone(),
                        rpc_port: b.rpc_port as u16,
                        http_port: b.http_port as u16,
                    },
                )
            })
            .collect(),
        router: router_of(plan, opts.partitions.as_ref())?,
        converter,
        buffers: HashMap::new(),
        buffered: 0,
        touched: BTreeSet::new(),
        loaded: 0,
        total: 0,
        errors: vec![],
        error_count: 0,
        unselected: 0,
        write_ms: 0,
    };
    let mut splitter = RowSplitter::new(opts.clone(), names);
    let timeout = std::time::Duration::from_secs(if opts.timeout_secs > 0 {
        opts.timeout_secs as u64
    } else {
        259_200
    });
    let deadline = tokio::time::Instant::now() + timeout;
    let read_start = Instant::now();
    let mut stream = body.into_data_stream();
    let mut pending: Vec<SourceRow> = Vec::with_capacity(ROWS_PER_PAGE);
    let mut decompressor = opts.compress.map(super::decompress::Decompressor::new);
    let mut bytes = 0u64;
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next())
            .await
            .map_err(|_| TethysError::Timeout(timeout.as_secs()))?;
        let (parsed, ended) = match next {
            Some(Ok(chunk)) => {
                bytes += chunk.len() as u64;
                if bytes > MAX_BODY_BYTES {
                    return Err(TethysError::DataQuality(format!(
                        "body exceed max size: {MAX_BODY_BYTES}, data: {bytes}"
                    )));
                }
                let mut parsed = vec![];
                match decompressor.as_mut() {
                    Some(d) => {
                        for plain in d.push(chunk).await? {
                            parsed.extend(splitter.feed(&plain)?);
                        }
                    }
                    None => parsed.extend(splitter.feed(&chunk)?),
                }
                (parsed, false)
            }
            Some(Err(e)) => {
                return Err(TethysError::Backend(format!(
                    "reading the request body failed (client gone?): {e}"
                )));
            }
            None => {
                let mut parsed = vec![];
                if let Some(d) = decompressor.take() {
                    for plain in d.finish().await? {
                        parsed.extend(splitter.feed(&plain)?);
                    }
                }
                parsed.extend(splitter.finish()?);
                (parsed, true)
            }
        };
        for p in parsed {
            match p {
                Ok(r) => pending.push(r),
                Err(e) => load.record_errors(vec![e]),
            }
            if pending.len() >= ROWS_PER_PAGE {
                load.process(std::mem::take(&mut pending)).await?;
            }
        }
        if ended {
            break;
        }
    }
    load.process(pending).await?;
    load.flush_all().await?;
    let elapsed = read_start.elapsed().as_millis() as u64;
    resp.read_ms = elapsed - load.write_ms.min(elapsed);
    resp.write_ms = load.write_ms;
    resp.load_bytes = bytes;
    resp.total_rows = load.total;
    resp.loaded_rows = load.loaded;
    resp.filtered_rows = load.error_count;
    resp.unselected_rows = load.unselected;
    if load.error_count > 0 {
        let more = load.error_count - load.errors.len() as u64;
        if let Some(name) = write_error_log(be, txn_id, &load.errors, more) {
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
    Ok(load.touched.into_iter().collect())
}

/// Query of `GET /api/_load_error_log`.
#[derive(Debug, serde::Deserialize)]
pub struct ErrorLogQuery {
    file: String,
}

/// `GET /api/_load_error_log?file=...`: the bad rows of a load.
pub async fn error_log(State(be): State<Arc<Backend>>, Query(q): Query<ErrorLogQuery>) -> Response {
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
    State(be): State<Arc<Backend>>,
    Path(params): Path<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let Some((user, password)) = basic_auth(&headers) else {
        return unauthorized("no valid Basic authorization");
    };
    let Some(mut fe) = be.frontend() else {
        return json(
            StatusCode::OK,
            &serde_json::json!({"status": "Fail", "msg": "this backend does not know its frontend"}),
        );
    };
    let h = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(|s| s.trim().to_string())
    };
    let db = params.get("db").cloned().unwrap_or_default();
    let req = match tethys_common::http_auth::two_phase_request(h, user, password, db) {
        Ok(r) => r,
        Err(msg) => {
            return json(
                StatusCode::OK,
                &serde_json::json!({"status": "Fail", "msg": msg}),
            );
        }
    };
    match fe.txn_operation(req).await {
        Ok(r) => json(
            StatusCode::OK,
            &serde_json::json!({"status": "Success", "msg": r.into_inner().message}),
        ),
        Err(s) if s.code() == tonic::Code::Unauthenticated => unauthorized(s.message()),
        Err(s) => json(
            StatusCode::OK,
            &serde_json::json!({"status": "Fail", "msg": s.message()}),
        ),
    }
}

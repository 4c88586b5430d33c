//! The FE HTTP port (8030 by default): Stream Load entry (authenticated, then
//! redirected with 307 to a backend chosen round-robin), two-phase commit,
//! health.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use tethys_proto::frontend_service_server::FrontendService;

use crate::frontend::Frontend;

#[derive(Clone)]
struct HttpState {
    fe: Arc<Frontend>,
    next_be: Arc<AtomicUsize>,
}

/// The FE HTTP routes.
pub fn router(fe: Arc<Frontend>) -> Router {
    let state = HttpState {
        fe,
        next_be: Arc::new(AtomicUsize::new(0)),
    };
    Router::new()
        .route(
            "/api/health",
            get(|| async { axum::Json(serde_json::json!({"status": "OK", "msg": "success"})) }),
        )
        .route("/api/{db}/{table}/_stream_load", put(redirect_load))
        .route("/api/{db}/_stream_load_2pc", put(two_phase))
        .route("/api/{db}/{table}/_stream_load_2pc", put(two_phase))
        .merge(tethys_common::http_common::debug_point_routes())
        .layer(axum::middleware::from_fn(
            tethys_common::http_common::contain_panics,
        ))
        .with_state(state)
}

fn json(status: StatusCode, v: serde_json::Value) -> Response {
    (
        status,
        [("content-type", "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn denied(msg: &str) -> Response {
    json(
        StatusCode::UNAUTHORIZED,
        serde_json::json!({"status": "FAILED", "msg": msg, "Status": "Fail", "Message": msg}),
    )
}

/// Checks basic authorization; the error is the message for a 401.
fn auth(headers: &HeaderMap) -> Result<(String, String), String> {
    let (u, p) = tethys_common::http_auth::basic_auth(headers)
        .ok_or_else(|| "no valid Basic authorization".to_string())?;
    if !crate::auth::check_password(&u, &p) {
        return Err(format!(
            "Access denied for user '{u}' (using password: {})",
            if p.is_empty() { "NO" } else { "YES" }
        ));
    }
    Ok((u, p))
}

/// `PUT /api/{db}/{table}/_stream_load` on the FE: check, then redirect the
/// client to a backend that coordinates the load. The FE never reads the body.
async fn redirect_load(
    State(st): State<HttpState>,
    Path((db, table)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    if let Err(m) = auth(&headers) {
        return denied(&m);
    }
    let fail = |msg: String| {
        json(
            StatusCode::OK,
            serde_json::json!({"Status": "Fail", "Message": msg, "status": "FAILED", "msg": msg}),
        )
    };
    let backends: Vec<_> = {
        let s = st.fe.catalog.read();
        let Some(d) = s.database(&db) else {
            return fail(format!("unknown database, database={db}"));
        };
        if d.table(&table).is_none() {
            return fail(format!("unknown table, table={table}"));
        }
        drop(s);
        // An alive backend whose HTTP port is known (a backend added by
        // ALTER SYSTEM learns it at its first heartbeat).
        st.fe
            .backends
            .alive()
            .into_iter()
            .filter(|b| b.http_port != 0)
            .collect()
    };
    if backends.is_empty() {
        return fail("No backend is alive to coordinate the load".into());
    }
    let be = &backends[st.next_be.fetch_add(1, Ordering::Relaxed) % backends.len()];
    let mut location = format!(
        "http://{}:{}/api/{db}/{table}/_stream_load",
        be.host, be.http_port
    );
    if let Some(q) = query {
        location.push('?');
        location.push_str(&q);
    }
    (
        StatusCode::TEMPORARY_REDIRECT,
        [(header::LOCATION, location)],
    )
        .into_response()
}

/// `PUT /api/{db}[/{table}]/_stream_load_2pc` on the FE.
async fn two_phase(
    State(st): State<HttpState>,
    Path(params): Path<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let (user, password) = match auth(&headers) {
        Ok(x) => x,
        Err(m) => return denied(&m),
    };
    let db = params.get("db").cloned().unwrap_or_default();
    let outcome = match tethys_common::http_auth::two_phase_request(&headers, user, password, db) {
        Err(msg) => Err(msg),
        Ok(req) => super::rpc::FrontendRpc::new(st.fe.clone())
            .txn_operation(tonic::Request::new(req))
            .await
            .map(|r| r.into_inner().message)
            .map_err(|s| s.message().to_string()),
    };
    json(
        StatusCode::OK,
        tethys_common::http_auth::two_phase_answer(outcome),
    )
}

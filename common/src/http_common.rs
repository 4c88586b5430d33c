//! What the FE's and a BE's HTTP ports serve alike: the debug point API
//! (see [`crate::debug_point`]) and the answer to a request whose handler
//! was stopped by a bug.

use std::collections::HashMap;

use axum::Router;
use axum::extract::{Path, Query, Request};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::post;

/// `POST /api/debug_point/{add,remove}/{name}` and `/api/debug_point/clear`.
pub fn debug_point_routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    async fn add(Path(name): Path<String>, Query(q): Query<HashMap<String, String>>) -> Response {
        answer(crate::debug_point::http_action("add", Some(&name), &q))
    }
    async fn remove(Path(name): Path<String>) -> Response {
        answer(crate::debug_point::http_action(
            "remove",
            Some(&name),
            &HashMap::new(),
        ))
    }
    async fn clear() -> Response {
        answer(crate::debug_point::http_action(
            "clear",
            None,
            &HashMap::new(),
        ))
    }
    Router::new()
        .route("/api/debug_point/add/{name}", post(add))
        .route("/api/debug_point/remove/{name}", post(remove))
        .route("/api/debug_point/clear", post(clear))
}

fn answer((status, body): (u16, serde_json::Value)) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(body)).into_response()
}

/// Middleware: a handler stopped by a panic answers 500 with the reason in
/// Stream Load's shape (`Status: Fail`) rather than a dropped connection.
pub async fn contain_panics(req: Request, next: Next) -> Response {
    match crate::panic::contain("the HTTP request", next.run(req)).await {
        Ok(r) => r,
        Err(e) => {
            let msg = e.to_string();
            let body = serde_json::json!({
                "Status": "Fail", "Message": msg, "status": "FAILED", "msg": msg,
            });
            (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(body)).into_response()
        }
    }
}

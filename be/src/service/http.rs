//! The BE HTTP port (8040 by default): Stream Load, two-phase commit, load
//! error logs, health.

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, put};

use super::Backend;

pub fn router(backend: Arc<Backend>) -> Router {
    let loads = Router::new()
        .route(
            "/api/{db}/{table}/_stream_load",
            put(crate::load::stream_load),
        )
        .route(
            "/api/{db}/_stream_load_2pc",
            put(crate::load::stream_load_2pc),
        )
        .route(
            "/api/{db}/{table}/_stream_load_2pc",
            put(crate::load::stream_load_2pc),
        )
        .route("/api/_load_error_log", get(crate::load::error_log))
        .layer(DefaultBodyLimit::disable())
        .with_state(backend.clone());
    Router::new().merge(loads).route(
        "/api/health",
        get(move || {
            let b = backend.clone();
            async move {
                let (tablets, bytes) = b.engine.totals();
                axum::Json(serde_json::json!({
                    "status": "OK",
                    "msg": "To Be Added",
                    "tablet_count": tablets,
                    "data_used_bytes": bytes,
                }))
            }
        }),
    )
}

//! The BE HTTP port (8040 by default). Stream Load lands here in a later
//! issue; today it answers health checks.

use std::sync::Arc;

use axum::Router;
use axum::routing::get;

use super::Backend;

pub fn router(backend: Arc<Backend>) -> Router {
    Router::new().route(
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

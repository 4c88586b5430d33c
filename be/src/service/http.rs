//! The BE HTTP port (8040 by default): Stream Load, two-phase commit, load
//! error logs, a tablet's compaction status, health.

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, put};

use crate::node::Backend;

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
        .with_state(backend.loads.clone());
    let compaction = Router::new()
        .route("/api/compaction/show", get(compaction_show))
        .with_state(backend.clone());
    Router::new()
        .merge(loads)
        .merge(compaction)
        .merge(tethys_common::http_common::debug_point_routes())
        .route(
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
        .layer(axum::middleware::from_fn(
            tethys_common::http_common::contain_panics,
        ))
}

#[derive(serde::Deserialize)]
struct TabletParam {
    tablet_id: i64,
}

/// `GET /api/compaction/show?tablet_id=N`: the tablet's rowsets, cumulative
/// point and compaction score, in the shape of Doris' endpoint (the
/// `CompactionStatus` URL of `SHOW TABLETS`).
async fn compaction_show(
    axum::extract::State(b): axum::extract::State<Arc<Backend>>,
    axum::extract::Query(q): axum::extract::Query<TabletParam>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let t = match b.engine.tablet(q.tablet_id) {
        Ok(t) => t,
        Err(e) => {
            return (
                axum::http::StatusCode::NOT_FOUND,
                axum::Json(serde_json::json!({"status": "Fail", "msg": e.to_string()})),
            )
                .into_response();
        }
    };
    let m = t.meta();
    let describe = |r: &crate::storage::RowsetMeta| {
        format!(
            "[{}-{}] {} DATA {} {} {}",
            r.start_version,
            r.end_version,
            r.segments.len(),
            if r.sorted_run {
                "NONOVERLAPPING"
            } else {
                "OVERLAPPING"
            },
            r.rowset_id,
            r.data_size
        )
    };
    let mut body = serde_json::json!({
        "cumulative policy type": "SIZE_BASED",
        "cumulative point": m.cumulative_point,
        "compaction score": t.compaction_score(),
        "version": m.version,
        "rowsets": m.rowsets.iter().map(describe).collect::<Vec<_>>(),
        "stale_rowsets": t.stale_rowsets().iter().map(|s| describe(&s.rowset)).collect::<Vec<_>>(),
    });
    // Merge-on-write tables: rows of each rowset later loads superseded.
    if m.schema.merge_on_write {
        body["delete_bitmap_rows"] = m
            .rowsets
            .iter()
            .filter(|r| !r.segments.is_empty())
            .map(|r| {
                (
                    r.rowset_id.clone(),
                    t.deleted_row_count(&r.rowset_id).into(),
                )
            })
            .collect::<serde_json::Map<String, serde_json::Value>>()
            .into();
    }
    axum::Json(body).into_response()
}

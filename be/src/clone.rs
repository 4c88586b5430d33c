//! The target side of a clone the FE's tablet scheduler orders
//! (`CloneTablet`): this backend asks the source for a snapshot of the
//! tablet, reads its files in chunks into a staging directory (checking
//! each one's size; the segment and bitmap formats carry their own
//! checksums, verified when read), installs them (`storage/clone.rs`) and
//! releases the snapshot, whatever happened.
//!
//! A BE dead past `--tablet-repair-delay-second`: each of its replicas gets
//! a new one elsewhere, cloned from a healthy peer, tablet by tablet.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use tethys_common::backend_client::{BackendClient, BackendInfo, BackendPool};
use tethys_common::{Result, TethysError};
use tethys_proto::{
    CloneTabletRequest, CloneTabletResponse, MakeSnapshotRequest, ReadSnapshotRequest,
    ReleaseSnapshotRequest,
};

use crate::storage::{StorageEngine, TabletMeta};

/// Bytes asked of the source per read.
const CHUNK: u32 = 4 << 20;

/// Copies `req.tablet_id` from `req.source` onto this backend.
pub async fn clone_tablet(
    engine: Arc<StorageEngine>,
    pool: &BackendPool,
    req: CloneTabletRequest,
) -> Result<CloneTabletResponse> {
    let src = req
        .source
        .clone()
        .ok_or_else(|| TethysError::Backend("a clone needs its source backend".into()))?;
    let source = pool.get(&BackendInfo {
        id: src.id,
        host: src.host,
        rpc_port: src.rpc_port as u16,
        http_port: src.http_port as u16,
    })?;
    let snap = source
        .make_snapshot(MakeSnapshotRequest {
            tablet_id: req.tablet_id,
        })
        .await?;
    let id = snap.snapshot_id.clone();
    let result = fetch_and_install(engine, &source, req, snap).await;
    let _ = source
        .release_snapshot(ReleaseSnapshotRequest { snapshot_id: id })
        .await;
    result
}

async fn fetch_and_install(
    engine: Arc<StorageEngine>,
    source: &BackendClient,
    req: CloneTabletRequest,
    snap: tethys_proto::MakeSnapshotResponse,
) -> Result<CloneTabletResponse> {
    let meta: TabletMeta = serde_json::from_slice(&snap.meta).map_err(|e| {
        TethysError::Corruption(format!(
            "the meta of tablet {}'s snapshot from backend {}: {e}",
            req.tablet_id, source.info.id
        ))
    })?;
    if meta.tablet_id != req.tablet_id || meta.version < req.version {
        return Err(TethysError::Backend(format!(
            "backend {} has tablet {} at version {}, the clone needs tablet {} at {}",
            source.info.id, meta.tablet_id, meta.version, req.tablet_id, req.version
        )));
    }
    let named = StorageEngine::snapshot_files(&meta);
    let staged = engine.clone_staging(req.tablet_id)?;
    let mut bytes = 0u64;
    let fetched = async {
        for f in &snap.files {
            if !named.contains(&f.name) {
                return Err(TethysError::Corruption(format!(
                    "snapshot {} lists {}, which its meta does not name",
                    snap.snapshot_id, f.name
                )));
            }
            fetch_file(source, &snap.snapshot_id, f, &staged).await?;
            bytes += f.size;
        }
        Ok(())
    }
    .await;
    let installed = match fetched {
        Ok(()) => {
            let (engine, staged) = (engine.clone(), staged.clone());
            tokio::task::spawn_blocking(move || engine.install_clone(meta, &staged))
                .await
                .map_err(|e| TethysError::Internal(format!("installing a clone: {e}")))?
        }
        Err(e) => Err(e),
    };
    let _ = std::fs::remove_dir_all(&staged);
    Ok(CloneTabletResponse {
        version: installed?,
        bytes,
        files: snap.files.len() as u32,
    })
}

/// Reads one snapshot file into `staged`, fsynced; its size must match.
async fn fetch_file(
    source: &BackendClient,
    snapshot: &str,
    f: &tethys_proto::SnapshotFilePb,
    staged: &Path,
) -> Result<()> {
    let path = staged.join(crate::storage::plain_name(&f.name)?);
    let what = || format!("writing {}", path.display());
    let mut out = std::fs::File::create(&path).map_err(|e| TethysError::io(what(), e))?;
    let mut offset = 0u64;
    while offset < f.size {
        let chunk = source
            .read_snapshot(ReadSnapshotRequest {
                snapshot_id: snapshot.to_string(),
                file: f.name.clone(),
                offset,
                length: CHUNK,
            })
            .await?
            .data;
        if chunk.is_empty() {
            break;
        }
        out.write_all(&chunk)
            .map_err(|e| TethysError::io(what(), e))?;
        offset += chunk.len() as u64;
    }
    if offset != f.size {
        return Err(TethysError::Corruption(format!(
            "snapshot {snapshot}'s {} has {offset} bytes, {} were announced",
            f.name, f.size
        )));
    }
    out.sync_all().map_err(|e| TethysError::io(what(), e))
}

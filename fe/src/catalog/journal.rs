//! The FE edit log: every catalog change is appended (length + CRC32C +
//! JSON) and fsynced before it is applied or acknowledged. On start the last
//! image is loaded and the log replayed; a torn final record (a crash in the
//! middle of an append, never acknowledged) is cut off. Every
//! `CHECKPOINT_EVERY` records the state is written as a new image and the log
//! starts over.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tethys_common::fsutil::{ensure_dir, sync_dir, write_atomic};
use tethys_common::{Result, TethysError};

use super::model::*;

const IMAGE_MAGIC: &[u8; 4] = b"TIM1";
const CHECKPOINT_EVERY: u64 = 10_000;

/// One catalog change.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum EditOp {
    CreateDatabase {
        db: Database,
    },
    DropDatabase {
        name: String,
    },
    CreateTable {
        db: String,
        table: Table,
    },
    DropTable {
        db: String,
        table: String,
    },
    AddPartition {
        db: String,
        table: String,
        partition: Partition,
    },
    DropPartition {
        db: String,
        table: String,
        partition: String,
    },
    ReplacePartitions {
        db: String,
        table: String,
        partitions: Vec<Partition>,
    },
    SetTableProperties {
        db: String,
        table: String,
        properties: Vec<(String, String)>,
    },
    /// `ANALYZE TABLE`'s results replace the named columns' statistics.
    SetColumnStats {
        db: String,
        table: String,
        stats: Vec<(String, ColumnStats)>,
    },
    /// `DROP STATS`: the named columns' statistics, or all when empty.
    DropColumnStats {
        db: String,
        table: String,
        columns: Vec<String>,
    },
    AddBackend {
        backend: BackendInfo,
    },
    BeginTxn {
        txn: TxnRecord,
    },
    PrecommitTxn {
        txn_id: i64,
        touched: Vec<(i64, i64)>,
        time: i64,
    },
    CommitTxn {
        txn_id: i64,
        versions: Vec<PartitionVersion>,
        time: i64,
    },
    VisibleTxn {
        txn_id: i64,
        time: i64,
    },
    AbortTxn {
        txn_id: i64,
        reason: String,
        time: i64,
    },
    LoadStats {
        txn_id: i64,
        stats: LoadStats,
    },
    RemoveTxns {
        ids: Vec<i64>,
    },
    /// `SET GLOBAL name = value` (the value already validated).
    SetGlobalVariable {
        name: String,
        value: String,
    },
}

#[derive(Debug, Serialize, Deserialize)]
struct Record {
    seq: u64,
    next_id: i64,
    op: EditOp,
}

#[derive(Debug, Serialize, Deserialize)]
struct Image {
    seq: u64,
    state: CatalogState,
}

/// Applies one change to the state. Fails only on a log that contradicts
/// itself (which is corruption).
// Over 150 lines on purpose: one arm per EditOp, the whole replay contract in one place.
pub fn apply(state: &mut CatalogState, op: &EditOp) -> Result<()> {
    let missing =
        |what: String| TethysError::Corruption(format!("edit log refers to missing {what}"));
    match op {
        EditOp::CreateDatabase { db } => {
            state.databases.insert(db.name.clone(), db.clone());
        }
        EditOp::SetGlobalVariable { name, value } => {
            state.globals.insert(name.clone(), value.clone());
        }
        EditOp::DropDatabase { name } => {
            state.databases.remove(name);
            // Labels belong to the database (Doris keys them by database
            // id): a new database of the same name starts with none taken.
            state.txns.retain(|_, t| t.db != *name);
        }
        EditOp::CreateTable { db, table } => {
            let d = state
                .databases
                .get_mut(db)
                .ok_or_else(|| missing(format!("database {db}")))?;
            d.tables.insert(table.name.clone(), table.clone());
        }
        EditOp::DropTable { db, table } => {
            let d = state
                .databases
                .get_mut(db)
                .ok_or_else(|| missing(format!("database {db}")))?;
            d.tables.remove(table);
        }
        EditOp::SetTableProperties {
            db,
            table,
            properties,
        } => {
            let t = table_mut(state, db, table)?;
            for (k, v) in properties {
                t.properties.insert(k.clone(), v.clone());
            }
        }
        EditOp::SetColumnStats { db, table, stats } => {
            let t = table_mut(state, db, table)?;
            for (c, st) in stats {
                t.column_stats.insert(c.clone(), st.clone());
            }
        }
        EditOp::DropColumnStats { db, table, columns } => {
            let t = table_mut(state, db, table)?;
            if columns.is_empty() {
                t.column_stats.clear();
            } else {
                t.column_stats
                    .retain(|c, _| !columns.iter().any(|d| d.eq_ignore_ascii_case(c)));
            }
        }
        EditOp::AddPartition {
            db,
            table,
            partition,
        } => {
            let t = table_mut(state, db, table)?;
            t.partitions.push(partition.clone());
            t.partitions.sort_by_key(|p| p.range.map(|r| r.0));
        }
        EditOp::DropPartition {
            db,
            table,
            partition,
        } => {
            let t = table_mut(state, db, table)?;
            t.partitions.retain(|p| &p.name != partition);
        }
        EditOp::ReplacePartitions {
            db,
            table,
            partitions,
        } => {
            let t = table_mut(state, db, table)?;
            t.partitions = partitions.clone();
        }
        EditOp::AddBackend { backend } => {
            state.backends.insert(backend.id, backend.clone());
        }
        EditOp::BeginTxn { txn } => {
            state.txns.insert(txn.id, txn.clone());
        }
        EditOp::PrecommitTxn {
            txn_id,
            touched,
            time,
        } => {
            let t = state
                .txns
                .get_mut(txn_id)
                .ok_or_else(|| missing(format!("txn {txn_id}")))?;
            t.state = TxnState::Precommitted;
            t.touched = touched.clone();
            t.commit_time = *time;
        }
        EditOp::CommitTxn {
            txn_id,
            versions,
            time,
        } => {
            for v in versions {
                if let Some(t) = state.table_by_id_mut(v.table_id)
                    && let Some(p) = t.partitions.iter_mut().find(|p| p.id == v.partition_id)
                {
                    p.committed_version = p.committed_version.max(v.version);
                }
            }
            let t = state
                .txns
                .get_mut(txn_id)
                .ok_or_else(|| missing(format!("txn {txn_id}")))?;
            t.state = TxnState::Committed;
            t.versions = versions.clone();
            t.commit_time = *time;
        }
        EditOp::VisibleTxn { txn_id, time } => {
            let versions = state
                .txns
                .get(txn_id)
                .ok_or_else(|| missing(format!("txn {txn_id}")))?
                .versions
                .clone();
            for v in &versions {
                // A partition dropped since the commit simply has nothing to show.
                if let Some(t) = state.table_by_id_mut(v.table_id)
                    && let Some(p) = t.partitions.iter_mut().find(|p| p.id == v.partition_id)
                {
                    p.visible_version = p.visible_version.max(v.version);
                    p.visible_version_time = *time;
                }
            }
            if let Some(t) = state.txns.get_mut(txn_id) {
                t.state = TxnState::Visible;
                t.finish_time = *time;
            }
        }
        EditOp::AbortTxn {
            txn_id,
            reason,
            time,
        } => {
            if let Some(t) = state.txns.get_mut(txn_id) {
                t.state = TxnState::Aborted;
                t.reason = reason.clone();
                t.finish_time = *time;
            }
        }
        EditOp::LoadStats { txn_id, stats } => {
            if let Some(t) = state.txns.get_mut(txn_id) {
                t.stats = Some(stats.clone());
            }
        }
        EditOp::RemoveTxns { ids } => {
            for id in ids {
                state.txns.remove(id);
            }
        }
    }
    Ok(())
}

fn table_mut<'a>(state: &'a mut CatalogState, db: &str, table: &str) -> Result<&'a mut Table> {
    state
        .databases
        .get_mut(db)
        .and_then(|d| d.tables.get_mut(table))
        .ok_or_else(|| {
            TethysError::Corruption(format!("edit log refers to missing table {db}.{table}"))
        })
}

/// The append side of the edit log.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    file: File,
    seq: u64,
    since_checkpoint: u64,
}

fn journal_path(dir: &Path) -> PathBuf {
    dir.join("journal.log")
}

fn image_path(dir: &Path) -> PathBuf {
    dir.join("image.bin")
}

impl Journal {
    /// Loads the image, replays the log, and opens the log for appends.
    pub fn open(dir: &Path) -> Result<(Journal, CatalogState)> {
        ensure_dir(dir)?;
        let (mut state, mut seq) = match std::fs::read(image_path(dir)) {
            Ok(bytes) => {
                if bytes.len() < 8 || &bytes[..4] != IMAGE_MAGIC {
                    return Err(TethysError::Corruption("FE image: bad magic".into()));
                }
                let crc = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
                if crc32c::crc32c(&bytes[8..]) != crc {
                    return Err(TethysError::Corruption(
                        "FE image: checksum mismatch".into(),
                    ));
                }
                let img: Image = serde_json::from_slice(&bytes[8..])
                    .map_err(|e| TethysError::Corruption(format!("FE image: {e}")))?;
                (img.state, img.seq)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (CatalogState::default(), 0),
            Err(e) => return Err(TethysError::io("reading the FE image", e)),
        };
        let jpath = journal_path(dir);
        let mut bytes = Vec::new();
        if let Ok(mut f) = File::open(&jpath) {
            f.read_to_end(&mut bytes)
                .map_err(|e| TethysError::io("reading the FE edit log", e))?;
        }
        let mut pos = 0usize;
        let mut replayed = 0u64;
        while pos + 8 <= bytes.len() {
            let len =
                u32::from_le_bytes([bytes[pos], bytes[pos + 1], bytes[pos + 2], bytes[pos + 3]])
                    as usize;
            let crc = u32::from_le_bytes([
                bytes[pos + 4],
                bytes[pos + 5],
                bytes[pos + 6],
                bytes[pos + 7],
            ]);
            let end = pos + 8 + len;
            if end > bytes.len() || crc32c::crc32c(&bytes[pos + 8..end]) != crc {
                if end >= bytes.len() {
                    break; // torn tail: the append never completed
                }
                return Err(TethysError::Corruption(format!(
                    "FE edit log record at byte {pos} fails its checksum"
                )));
            }
            let rec: Record = serde_json::from_slice(&bytes[pos + 8..end]).map_err(|e| {
                TethysError::Corruption(format!("FE edit log record at byte {pos}: {e}"))
            })?;
            if rec.seq > seq {
                apply(&mut state, &rec.op)?;
                state.next_id = state.next_id.max(rec.next_id);
                seq = rec.seq;
                replayed += 1;
            }
            pos = end;
        }
        if pos < bytes.len() {
            // Cut the torn tail so new appends follow the last good record.
            let f = OpenOptions::new()
                .write(true)
                .open(&jpath)
                .map_err(|e| TethysError::io("opening the FE edit log", e))?;
            f.set_len(pos as u64)
                .map_err(|e| TethysError::io("truncating the FE edit log", e))?;
            f.sync_all()
                .map_err(|e| TethysError::io("syncing the FE edit log", e))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&jpath)
            .map_err(|e| TethysError::io("opening the FE edit log", e))?;
        sync_dir(dir)?;
        Ok((
            Journal {
                dir: dir.to_path_buf(),
                file,
                seq,
                since_checkpoint: replayed,
            },
            state,
        ))
    }

    /// Appends and fsyncs one change.
    pub fn append(&mut self, op: &EditOp, next_id: i64) -> Result<()> {
        let rec = Record {
            seq: self.seq + 1,
            next_id,
            op: op.clone(),
        };
        let json = serde_json::to_vec(&rec).map_err(|e| TethysError::Internal(e.to_string()))?;
        let mut frame = Vec::with_capacity(json.len() + 8);
        frame.extend_from_slice(&(json.len() as u32).to_le_bytes());
        frame.extend_from_slice(&crc32c::crc32c(&json).to_le_bytes());
        frame.extend_from_slice(&json);
        self.file
            .write_all(&frame)
            .map_err(|e| TethysError::io("appending to the FE edit log", e))?;
        self.file
            .sync_data()
            .map_err(|e| TethysError::io("syncing the FE edit log", e))?;
        self.seq += 1;
        self.since_checkpoint += 1;
        Ok(())
    }

    /// Whether enough has been logged since the last image.
    pub fn wants_checkpoint(&self) -> bool {
        self.since_checkpoint >= CHECKPOINT_EVERY
    }

    /// Writes `state` as the new image and starts an empty log.
    pub fn checkpoint(&mut self, state: &CatalogState) -> Result<()> {
        let img = Image {
            seq: self.seq,
            state: state.clone(),
        };
        let json = serde_json::to_vec(&img).map_err(|e| TethysError::Internal(e.to_string()))?;
        let mut bytes = Vec::with_capacity(json.len() + 8);
        bytes.extend_from_slice(IMAGE_MAGIC);
        bytes.extend_from_slice(&crc32c::crc32c(&json).to_le_bytes());
        bytes.extend_from_slice(&json);
        write_atomic(&image_path(&self.dir), &bytes)?;
        write_atomic(&journal_path(&self.dir), &[])?;
        self.file = OpenOptions::new()
            .append(true)
            .open(journal_path(&self.dir))
            .map_err(|e| TethysError::io("reopening the FE edit log", e))?;
        self.since_checkpoint = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// An edit log or image damaged anywhere (a byte flipped, or cut)
        /// opens to a catalog or a corruption error, never a panic.
        #[test]
        fn damaged_metadata_never_panics(
            image in proptest::prelude::any::<bool>(),
            at in proptest::prelude::any::<proptest::sample::Index>(),
            flip in 1u8..=255,
            cut in proptest::prelude::any::<bool>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            {
                let (mut j, mut state) = Journal::open(dir.path()).unwrap();
                for i in 0..4 {
                    let op = EditOp::SetGlobalVariable {
                        name: format!("v{i}"),
                        value: "x".repeat(i * 7),
                    };
                    apply(&mut state, &op).unwrap();
                    j.append(&op, 1).unwrap();
                    if image && i == 1 {
                        j.checkpoint(&state).unwrap();
                    }
                }
            }
            let path = if image { image_path(dir.path()) } else { journal_path(dir.path()) };
            let mut bytes = std::fs::read(&path).unwrap();
            if bytes.is_empty() {
                return Ok(());
            }
            let i = at.index(bytes.len());
            if cut {
                bytes.truncate(i);
            } else {
                bytes[i] ^= flip;
            }
            std::fs::write(&path, &bytes).unwrap();
            let _ = Journal::open(dir.path());
        }
    }
}

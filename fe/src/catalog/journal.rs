//! The FE edit log: every catalog change is appended (length, CRC32C of
//! the JSON, CRC32C of that header, the JSON: `LogFormat`) and fsynced before
//! it is applied or acknowledged. On start the last image is loaded and the
//! log replayed; a file that ends inside a record (a crash in the middle of
//! an append, never acknowledged) is cut there, while a record that fails a
//! checksum is damage: the FE refuses to start and names the file. Every
//! `CHECKPOINT_EVERY` records the state is written as a new image and the log
//! starts over.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tethys_common::framing;
use tethys_common::fsutil::{ensure_dir, write_atomic};
use tethys_common::{Result, TethysError};

use super::model::*;

const IMAGE_MAGIC: &[u8; 4] = b"TIM1";
/// The first bytes of an edit log in format 2 (`LogFormat::V2`).
const LOG_MAGIC: &[u8; 4] = b"TJL2";
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
    /// `ALTER SYSTEM ADD BACKEND`, or a known backend's ports changed.
    AddBackend {
        backend: BackendInfo,
    },
    /// `ALTER SYSTEM DROPP BACKEND`.
    DropBackend {
        id: i64,
    },
    /// `ALTER SYSTEM DECOMMISSION BACKEND`: its replicas move away, then
    /// it is dropped.
    DecommissionBackend {
        id: i64,
    },
    /// The tablet scheduler made a replica (a clone on a new backend).
    AddReplica {
        tablet_id: i64,
        replica: Replica,
    },
    /// The tablet scheduler dropped a surplus replica.
    DropReplica {
        tablet_id: i64,
        backend_id: i64,
    },
    /// A clone brought a replica up to `version`; transactions with ids
    /// below `since_txn` are not published to it.
    ReplicaCaughtUp {
        tablet_id: i64,
        backend_id: i64,
        version: i64,
        since_txn: i64,
    },
    /// The cluster's id, picked when the FE first opens.
    InitCluster {
        cluster_id: i64,
        #[serde(default)]
        token: String,
    },
    BeginTxn {
        txn: TxnRecord,
    },
    PrecommitTxn {
        txn_id: i64,
        touched: Vec<(i64, i64)>,
        time: i64,
        /// (tablet, backend) replicas whose writes failed.
        #[serde(default)]
        failed: Vec<(i64, i64)>,
    },
    CommitTxn {
        txn_id: i64,
        versions: Vec<PartitionVersion>,
        time: i64,
        #[serde(default)]
        failed: Vec<(i64, i64)>,
    },
    /// The transaction's versions are visible; `missed`: the (tablet,
    /// backend) replicas that did not get them (a failed write or publish).
    VisibleTxn {
        txn_id: i64,
        time: i64,
        #[serde(default)]
        missed: Vec<(i64, i64)>,
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
        EditOp::DecommissionBackend { id } => {
            state.decommissioned.insert(*id);
        }
        EditOp::AddReplica { tablet_id, replica } => {
            if let Some(t) = state.tablet_mut(*tablet_id)
                && t.replica_on(replica.backend_id).is_none()
            {
                t.replicas.push(replica.clone());
            }
        }
        EditOp::DropReplica {
            tablet_id,
            backend_id,
        } => {
            if let Some(t) = state.tablet_mut(*tablet_id) {
                t.replicas.retain(|r| r.backend_id != *backend_id);
            }
        }
        EditOp::ReplicaCaughtUp {
            tablet_id,
            backend_id,
            version,
            since_txn,
        } => {
            if let Some(r) = state
                .tablet_mut(*tablet_id)
                .and_then(|t| t.replicas.iter_mut().find(|r| r.backend_id == *backend_id))
            {
                r.version = r.version.max(*version);
                r.last_success_version = r.version;
                r.since_txn = *since_txn;
            }
        }
        EditOp::DropBackend { id } => {
            state.backends.remove(id);
            state.decommissioned.remove(id);
            // Its replicas go with it (DROPP: their data is given up; the
            // tablet scheduler puts new ones elsewhere).
            for t in state.tablets_mut() {
                t.replicas.retain(|r| r.backend_id != *id);
            }
        }
        EditOp::InitCluster { cluster_id, token } => {
            state.cluster_id = *cluster_id;
            if !token.is_empty() {
                state.cluster_token = token.clone();
            }
        }
        EditOp::BeginTxn { txn } => {
            state.txns.insert(txn.id, txn.clone());
        }
        EditOp::PrecommitTxn {
            txn_id,
            touched,
            time,
            failed,
        } => {
            let t = state
                .txns
                .get_mut(txn_id)
                .ok_or_else(|| missing(format!("txn {txn_id}")))?;
            t.state = TxnState::Precommitted;
            t.touched = touched.clone();
            t.commit_time = *time;
            t.failed_replicas = failed.clone();
        }
        EditOp::CommitTxn {
            txn_id,
            versions,
            time,
            failed,
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
            t.failed_replicas = failed.clone();
        }
        EditOp::VisibleTxn {
            txn_id,
            time,
            missed,
        } => {
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
                    for t in &mut p.tablets {
                        for r in &mut t.replicas {
                            r.published(v.version, missed.contains(&(t.id, r.backend_id)));
                        }
                    }
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
        let ipath = image_path(dir);
        let (mut state, mut seq) = match std::fs::read(&ipath) {
            Ok(bytes) => {
                let img = read_image(&bytes).map_err(|why| {
                    TethysError::Corruption(format!(
                        "the FE image {} is damaged: {why}",
                        ipath.display()
                    ))
                })?;
                (img.state, img.seq)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (CatalogState::default(), 0),
            Err(e) => return Err(TethysError::io(format!("reading {}", ipath.display()), e)),
        };
        let jpath = journal_path(dir);
        let mut bytes = Vec::new();
        if let Ok(mut f) = File::open(&jpath) {
            f.read_to_end(&mut bytes)
                .map_err(|e| TethysError::io(format!("reading {}", jpath.display()), e))?;
        }
        let damaged = |pos: usize, why: &str| {
            TethysError::Corruption(format!(
                "the FE edit log {} is damaged: the record at byte {pos} {why}",
                jpath.display()
            ))
        };
        let log = read_log(&bytes).map_err(|(pos, why)| damaged(pos, &why))?;
        let mut replayed = 0u64;
        for (pos, payload) in &log.records {
            let rec: Record = serde_json::from_slice(payload)
                .map_err(|e| damaged(*pos, &format!("does not parse: {e}")))?;
            if rec.seq > seq {
                apply(&mut state, &rec.op)?;
                state.next_id = state.next_id.max(rec.next_id);
                seq = rec.seq;
                replayed += 1;
            }
        }
        if log.format == LogFormat::V2 && log.valid < bytes.len() {
            // Cut the torn tail so new appends follow the last good record.
            let f = OpenOptions::new()
                .write(true)
                .open(&jpath)
                .map_err(|e| TethysError::io(format!("opening {}", jpath.display()), e))?;
            f.set_len(log.valid as u64)
                .map_err(|e| TethysError::io(format!("truncating {}", jpath.display()), e))?;
            f.sync_all()
                .map_err(|e| TethysError::io(format!("syncing {}", jpath.display()), e))?;
        }
        if log.format == LogFormat::V2 && !bytes.is_empty() {
            let file = OpenOptions::new()
                .append(true)
                .open(&jpath)
                .map_err(|e| TethysError::io(format!("opening {}", jpath.display()), e))?;
            let journal = Journal {
                dir: dir.to_path_buf(),
                file,
                seq,
                since_checkpoint: replayed,
            };
            return Ok((journal, state));
        }
        // No log yet, or one written before format 2: the state becomes an
        // image and the log starts over in format 2.
        let file = write_checkpoint(dir, seq, &state)?;
        let journal = Journal {
            dir: dir.to_path_buf(),
            file,
            seq,
            since_checkpoint: 0,
        };
        Ok((journal, state))
    }

    /// Appends and fsyncs one change.
    pub fn append(&mut self, op: &EditOp, next_id: i64) -> Result<()> {
        let rec = Record {
            seq: self.seq + 1,
            next_id,
            op: op.clone(),
        };
        let json = serde_json::to_vec(&rec).map_err(|e| TethysError::Internal(e.to_string()))?;
        let frame = framing::frame(&json)
            .ok_or_else(|| TethysError::Internal("an edit log record over 4 GiB".into()))?;
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
        self.file = write_checkpoint(&self.dir, self.seq, state)?;
        self.since_checkpoint = 0;
        Ok(())
    }
}

/// Writes `state` (as of record `seq`) as the image, then an empty log;
/// returns the log opened for appends.
fn write_checkpoint(dir: &Path, seq: u64, state: &CatalogState) -> Result<File> {
    let img = Image {
        seq,
        state: state.clone(),
    };
    let json = serde_json::to_vec(&img).map_err(|e| TethysError::Internal(e.to_string()))?;
    let mut bytes = Vec::with_capacity(json.len() + 8);
    bytes.extend_from_slice(IMAGE_MAGIC);
    bytes.extend_from_slice(&crc32c::crc32c(&json).to_le_bytes());
    bytes.extend_from_slice(&json);
    write_atomic(&image_path(dir), &bytes)?;
    write_atomic(&journal_path(dir), LOG_MAGIC)?;
    OpenOptions::new()
        .append(true)
        .open(journal_path(dir))
        .map_err(|e| TethysError::io("reopening the FE edit log", e))
}

/// The image's bytes as its state, or why they are not one.
fn read_image(bytes: &[u8]) -> std::result::Result<Image, String> {
    if bytes.len() < 8 || &bytes[..4] != IMAGE_MAGIC {
        return Err("bad magic".into());
    }
    if crc32c::crc32c(&bytes[8..]) != u32_at(bytes, 4) {
        return Err("checksum mismatch".into());
    }
    serde_json::from_slice(&bytes[8..]).map_err(|e| e.to_string())
}

/// The framing of the edit log's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LogFormat {
    /// Before 2026-12-05: `u32 length | u32 crc32c(payload) | payload`, no
    /// file header. A bad checksum in the last record could not be told from
    /// a torn append, so it was taken as one (a flipped bit there lost an
    /// acknowledged change); such a log is read once and rewritten as an
    /// image.
    V1,
    /// `LOG_MAGIC`, then `tethys_common::framing` records: a header with
    /// its own checksum, so only a file that ends inside a record (a torn
    /// append) is cut; a bad checksum anywhere is damage.
    V2,
}

/// What `read_log` found.
struct LogRecords {
    format: LogFormat,
    /// (offset, payload) of every whole record, in order.
    records: Vec<(usize, Vec<u8>)>,
    /// Bytes up to the end of the last whole record.
    valid: usize,
}

/// Largest record the log holds (one change; an image holds the state).
const MAX_RECORD: usize = 1 << 30;

/// Splits the log into records; `Err((offset, why))` for a damaged record.
fn read_log(bytes: &[u8]) -> std::result::Result<LogRecords, (usize, String)> {
    if let Some(rest) = bytes.strip_prefix(LOG_MAGIC) {
        let start = LOG_MAGIC.len();
        let mut r = framing::FrameReader::new(rest, MAX_RECORD);
        let mut records = Vec::new();
        loop {
            let at = start + r.offset() as usize;
            match r.next_record() {
                Ok(Some(payload)) => records.push((at, payload)),
                Ok(None) => break,
                Err(d) => return Err((start + d.offset as usize, d.why)),
            }
        }
        let valid = start + r.offset() as usize;
        return Ok(LogRecords {
            format: LogFormat::V2,
            records,
            valid,
        });
    }
    let mut records = Vec::new();
    let mut pos = 0;
    while pos + 8 <= bytes.len() {
        let len = u32_at(bytes, pos) as usize;
        let end = pos + 8 + len;
        if end > bytes.len() {
            break; // format 1 reads a length past the end as a torn tail
        }
        if crc32c::crc32c(&bytes[pos + 8..end]) != u32_at(bytes, pos + 4) {
            if end == bytes.len() {
                break; // format 1 cannot tell this from a torn append
            }
            return Err((pos, "fails its checksum".into()));
        }
        records.push((pos, bytes[pos + 8..end].to_vec()));
        pos = end;
    }
    if records.is_empty() && !bytes.is_empty() {
        // Not even one whole record: the format 2 magic damaged, most likely.
        return Err((
            0,
            "starts with neither the format 2 header nor a whole record".into(),
        ));
    }
    Ok(LogRecords {
        format: LogFormat::V1,
        records,
        valid: pos,
    })
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(i: usize) -> EditOp {
        EditOp::SetGlobalVariable {
            name: format!("v{i}"),
            value: "x".repeat(i * 7),
        }
    }

    /// A log of `n` changes (an image after the second when `image`).
    fn write_log(dir: &Path, n: usize, image: bool) {
        let (mut j, mut state) = Journal::open(dir).unwrap();
        for i in 0..n {
            apply(&mut state, &set(i)).unwrap();
            j.append(&set(i), 1).unwrap();
            if image && i == 1 {
                j.checkpoint(&state).unwrap();
            }
        }
    }

    fn globals(state: &CatalogState) -> usize {
        state.globals.len()
    }

    #[test]
    fn a_flip_in_the_last_record_is_damage_not_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        write_log(dir.path(), 3, false);
        let path = journal_path(dir.path());
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 3;
        bytes[last] ^= 0x20;
        std::fs::write(&path, &bytes).unwrap();
        let err = Journal::open(dir.path()).unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("fails its checksum"), "{err}");
    }

    #[test]
    fn a_torn_append_is_cut_and_the_log_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        write_log(dir.path(), 3, false);
        let path = journal_path(dir.path());
        let len = std::fs::metadata(&path).unwrap().len();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(len - 5).unwrap();
        drop(f);
        let (mut j, state) = Journal::open(dir.path()).unwrap();
        assert_eq!(globals(&state), 2);
        j.append(&set(7), 1).unwrap();
        drop(j);
        let (_, state) = Journal::open(dir.path()).unwrap();
        assert_eq!(globals(&state), 3);
    }

    #[test]
    fn a_format_1_log_opens_and_is_rewritten_in_format_2() {
        let dir = tempfile::tempdir().unwrap();
        let mut v1 = Vec::new();
        for i in 0..3 {
            let rec = Record {
                seq: i as u64 + 1,
                next_id: 1,
                op: set(i),
            };
            let json = serde_json::to_vec(&rec).unwrap();
            v1.extend_from_slice(&(json.len() as u32).to_le_bytes());
            v1.extend_from_slice(&crc32c::crc32c(&json).to_le_bytes());
            v1.extend_from_slice(&json);
        }
        std::fs::write(journal_path(dir.path()), &v1).unwrap();
        let (_, state) = Journal::open(dir.path()).unwrap();
        assert_eq!(globals(&state), 3);
        assert_eq!(std::fs::read(journal_path(dir.path())).unwrap(), LOG_MAGIC);
        let (_, again) = Journal::open(dir.path()).unwrap();
        assert_eq!(globals(&again), 3);
    }

    /// The files of a meta directory after 4 changes (an image after the
    /// second when `image`), written once per test process: what the fuzz
    /// target damages.
    type Files = Vec<(String, Vec<u8>)>;

    fn meta_files(image: bool) -> &'static [(String, Vec<u8>)] {
        static FILES: std::sync::OnceLock<[Files; 2]> = std::sync::OnceLock::new();
        let all = FILES.get_or_init(|| {
            [false, true].map(|image| {
                let dir = tempfile::tempdir().unwrap();
                write_log(dir.path(), 4, image);
                ["image.bin", "journal.log"]
                    .into_iter()
                    .filter_map(|n| Some((n.to_string(), std::fs::read(dir.path().join(n)).ok()?)))
                    .collect()
            })
        });
        &all[usize::from(image)]
    }

    proptest::proptest! {
        /// An edit log or image with a byte flipped anywhere is refused with
        /// an error naming the file; one cut anywhere opens to the changes
        /// it still holds whole (a torn append) or, for the image, is
        /// refused. Never a panic, never a changed catalog.
        #[test]
        fn fuzz_damaged_metadata_is_refused_or_a_prefix(
            image in proptest::prelude::any::<bool>(),
            at in proptest::prelude::any::<proptest::sample::Index>(),
            flip in 1u8..=255,
            cut in proptest::prelude::any::<bool>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            for (name, bytes) in meta_files(image) {
                std::fs::write(dir.path().join(name), bytes).unwrap();
            }
            let path = if image { image_path(dir.path()) } else { journal_path(dir.path()) };
            let mut bytes = std::fs::read(&path).unwrap();
            let i = at.index(bytes.len());
            if cut {
                bytes.truncate(i);
            } else {
                bytes[i] ^= flip;
            }
            std::fs::write(&path, &bytes).unwrap();
            match Journal::open(dir.path()) {
                Ok((_, state)) => {
                    proptest::prop_assert!(cut && !image, "damage went unnoticed");
                    proptest::prop_assert!(globals(&state) <= 4);
                }
                Err(e) => {
                    let e = e.to_string();
                    proptest::prop_assert!(e.contains(&path.display().to_string()), "{}", e);
                }
            }
        }
    }
}

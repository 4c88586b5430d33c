//! The write-ahead log of a group commit: what async_mode loads were
//! promised, kept on disk until the group's transaction is visible.
//!
//! One file per group, `<root>/wal/<table_id>/<label>.wal`: the magic
//! `TWL2`, then `tethys_common::framing` records (a checksummed header, then
//! the payload), each payload a kind byte and its data:
//! * `HEADER` (JSON [`WalHeader`]): the group's table and label, and the
//!   transaction currently carrying it (appended again when a retry begins a
//!   new transaction; the last one counts);
//! * `DATA` (u64 request id + an Arrow IPC stream of one batch in the table's
//!   schema);
//! * `DONE` (u64 request id): the request finished and was acknowledged.
//!   Data of a request without `DONE` (a load that failed or was cut off) is
//!   ignored on replay.
//!
//! A file that ends inside a frame (a crash in the middle of an append,
//! never acknowledged) ends the log there; a frame that fails a checksum is
//! damage: the WAL is refused with an error naming it (`WalReader::open`),
//! and the backend does not start until it is dealt with (`check_all`), as
//! replaying less than it holds would lose acknowledged rows without a word.
//! Files written before the magic (format 1: `[u32 length][u32 CRC32C of
//! kind + payload][u8 kind][payload]`) are still read.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use serde::{Deserialize, Serialize};
use tethys_common::framing;
use tethys_common::fsutil::{ensure_dir, sync_dir};
use tethys_common::{Result, TethysError};

const HEADER: u8 = 1;
const DATA: u8 = 2;
const DONE: u8 = 3;
/// Largest frame a reader accepts (a corrupt length is not an allocation).
const MAX_FRAME: usize = 1 << 30;
/// The first bytes of a WAL in format 2.
const MAGIC: &[u8; 4] = b"TWL2";

/// Which group a WAL belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WalHeader {
    pub db: String,
    pub table: String,
    pub table_id: i64,
    pub label: String,
    pub txn_id: i64,
}

/// The directory of a table's WALs.
pub fn table_dir(root: &Path, table_id: i64) -> PathBuf {
    root.join("wal").join(table_id.to_string())
}

/// Every WAL file under `root`.
pub fn list(root: &Path) -> Result<Vec<PathBuf>> {
    let mut out = vec![];
    let dir = root.join("wal");
    let Ok(tables) = std::fs::read_dir(&dir) else {
        return Ok(out);
    };
    for t in tables {
        let t = t.map_err(|e| TethysError::io(format!("listing {}", dir.display()), e))?;
        let Ok(files) = std::fs::read_dir(t.path()) else {
            continue;
        };
        for f in files {
            let f = f.map_err(|e| TethysError::io("listing a WAL directory", e))?;
            let p = f.path();
            if p.extension().is_some_and(|e| e == "wal") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Reads every WAL under `root` through: the first damaged one is the
/// error. A backend runs this before it serves, so acknowledged rows are
/// never replayed short (the replay itself runs later, once the FE answers).
pub fn check_all(root: &Path) -> Result<()> {
    for path in list(root)? {
        let mut frames = Frames::open(&path)?;
        while frames.next()?.is_some() {}
    }
    Ok(())
}

/// An open WAL, appended to by the group's loads.
#[derive(Debug)]
pub struct WalWriter {
    path: PathBuf,
    file: File,
    bytes: u64,
    /// Format 1 for a WAL an older version left (a retry appends to it).
    v1: bool,
}

fn frame(v1: bool, kind: u8, payload: &[u8]) -> Result<Vec<u8>> {
    if !v1 {
        let mut body = Vec::with_capacity(payload.len() + 1);
        body.push(kind);
        body.extend_from_slice(payload);
        return framing::frame(&body)
            .ok_or_else(|| TethysError::Internal("a WAL frame over 4 GiB".into()));
    }
    let mut crc = crc32c::crc32c(&[kind]);
    crc = crc32c::crc32c_append(crc, payload);
    let mut out = Vec::with_capacity(payload.len() + 9);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    out.push(kind);
    out.extend_from_slice(payload);
    Ok(out)
}

/// Encodes one batch as an Arrow IPC stream.
fn encode_batch(batch: &RecordBatch) -> Result<Vec<u8>> {
    let mut w = StreamWriter::try_new(Vec::new(), &batch.schema())?;
    w.write(batch)?;
    w.finish()?;
    Ok(w.into_inner()?)
}

impl WalWriter {
    /// Creates a new WAL (durably, header included).
    pub fn create(root: &Path, header: &WalHeader) -> Result<WalWriter> {
        let dir = table_dir(root, header.table_id);
        ensure_dir(&dir)?;
        let path = dir.join(format!("{}.wal", header.label));
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| TethysError::io(format!("creating WAL {}", path.display()), e))?;
        let mut w = WalWriter {
            path,
            file,
            bytes: 0,
            v1: false,
        };
        w.file
            .write_all(MAGIC)
            .map_err(|e| TethysError::io(format!("writing WAL {}", w.path.display()), e))?;
        w.header(header)?;
        w.sync()?;
        sync_dir(&dir)?;
        Ok(w)
    }

    /// Reopens an existing WAL to append (a retry's new header), cutting a
    /// torn final frame first so the next one follows a whole frame.
    pub fn reopen(path: &Path) -> Result<WalWriter> {
        let mut frames = Frames::open(path)?;
        while frames.next()?.is_some() {}
        let (v1, valid) = (frames.v1(), frames.valid());
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| TethysError::io(format!("opening WAL {}", path.display()), e))?;
        if let Some(valid) = valid {
            file.set_len(valid)
                .map_err(|e| TethysError::io(format!("cutting WAL {}", path.display()), e))?;
        }
        let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(WalWriter {
            path: path.to_path_buf(),
            file,
            bytes,
            v1,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    fn append(&mut self, kind: u8, payload: &[u8]) -> Result<()> {
        let f = frame(self.v1, kind, payload)?;
        self.file
            .write_all(&f)
            .map_err(|e| TethysError::io(format!("appending to WAL {}", self.path.display()), e))?;
        self.bytes += f.len() as u64;
        Ok(())
    }

    /// Appends a header (the transaction now carrying the group).
    pub fn header(&mut self, h: &WalHeader) -> Result<()> {
        let payload = serde_json::to_vec(h)
            .map_err(|e| TethysError::Internal(format!("encoding a WAL header: {e}")))?;
        self.append(HEADER, &payload)
    }

    /// Appends one batch of a request.
    pub fn data(&mut self, request: u64, batch: &RecordBatch) -> Result<()> {
        let mut payload = request.to_le_bytes().to_vec();
        payload.extend_from_slice(&encode_batch(batch)?);
        self.append(DATA, &payload)
    }

    /// Marks a request complete.
    pub fn done(&mut self, request: u64) -> Result<()> {
        self.append(DONE, &request.to_le_bytes())
    }

    /// Makes everything appended so far durable.
    pub fn sync(&mut self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| TethysError::io(format!("syncing WAL {}", self.path.display()), e))
    }
}

/// Reads a WAL: the last header, and the data of completed requests.
pub struct WalReader {
    frames: Frames,
    done: HashSet<u64>,
}

/// What a WAL holds before its data is read.
pub struct WalSummary {
    pub header: WalHeader,
    /// Requests marked done.
    pub done: usize,
}

/// Format 1's frame: `None` at the end, at a torn frame and, as format 1
/// read it, at a frame that fails its checksum.
fn read_frame_v1(r: &mut impl Read) -> Option<(u8, Vec<u8>)> {
    let mut head = [0u8; 9];
    r.read_exact(&mut head).ok()?;
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    let kind = head[8];
    if len > MAX_FRAME {
        return None;
    }
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload).ok()?;
    let actual = crc32c::crc32c_append(crc32c::crc32c(&[kind]), &payload);
    (actual == crc).then_some((kind, payload))
}

/// The frames of one WAL file, in either format.
struct Frames {
    path: PathBuf,
    inner: FramesOf,
    /// Frames read so far.
    read: usize,
}

enum FramesOf {
    V1(BufReader<File>),
    V2(framing::FrameReader<BufReader<File>>),
}

impl Frames {
    fn open(path: &Path) -> Result<Frames> {
        let mut r = File::open(path)
            .map(BufReader::new)
            .map_err(|e| TethysError::io(format!("opening WAL {}", path.display()), e))?;
        let mut magic = [0u8; 4];
        let n = r
            .read(&mut magic)
            .map_err(|e| TethysError::io(format!("reading WAL {}", path.display()), e))?;
        let inner = if n == 4 && &magic == MAGIC {
            FramesOf::V2(framing::FrameReader::new(r, MAX_FRAME + 1))
        } else {
            // Format 1 starts with its first frame: read it from the start.
            let mut r = r.into_inner();
            std::io::Seek::rewind(&mut r)
                .map_err(|e| TethysError::io(format!("reading WAL {}", path.display()), e))?;
            FramesOf::V1(BufReader::new(r))
        };
        Ok(Frames {
            path: path.to_path_buf(),
            inner,
            read: 0,
        })
    }

    /// The next (kind, payload); `None` at the end or a torn tail.
    fn next(&mut self) -> Result<Option<(u8, Vec<u8>)>> {
        let frame = self.next_frame()?;
        if frame.is_some() {
            self.read += 1;
        }
        Ok(frame)
    }

    fn next_frame(&mut self) -> Result<Option<(u8, Vec<u8>)>> {
        match &mut self.inner {
            FramesOf::V1(r) => match read_frame_v1(r) {
                // Every WAL starts with a whole header frame: a file that
                // holds none has its format 2 magic damaged.
                None if self.read == 0 => Err(self.damaged(
                    0,
                    "is neither the format 2 magic nor a whole format 1 frame",
                )),
                frame => Ok(frame),
            },
            FramesOf::V2(r) => match r.next_record() {
                Ok(Some(mut body)) if !body.is_empty() => {
                    let kind = body.remove(0);
                    Ok(Some((kind, body)))
                }
                Ok(Some(_)) => {
                    let at = r.offset() + MAGIC.len() as u64;
                    Err(self.damaged(at, "is empty"))
                }
                Ok(None) => Ok(None),
                Err(d) => Err(self.damaged(d.offset + MAGIC.len() as u64, &d.why)),
            },
        }
    }

    fn damaged(&self, offset: u64, why: &str) -> TethysError {
        TethysError::Corruption(format!(
            "the group commit WAL {} is damaged: the frame at byte {} {why}; its rows \
             were acknowledged and cannot be replayed. Move the file out of the wal \
             directory to start without them",
            self.path.display(),
            offset
        ))
    }

    fn v1(&self) -> bool {
        matches!(self.inner, FramesOf::V1(_))
    }

    /// Bytes of whole frames (format 2 only).
    fn valid(&self) -> Option<u64> {
        match &self.inner {
            FramesOf::V1(_) => None,
            FramesOf::V2(r) => Some(r.offset() + MAGIC.len() as u64),
        }
    }
}

impl WalReader {
    /// Scans a WAL for its header and completed requests; the data is then
    /// read in a second pass (DONE markers follow their data, and a group's
    /// WAL is small and was just written, so it is mostly in the page cache).
    pub fn open(path: &Path) -> Result<(WalReader, WalSummary)> {
        let mut frames = Frames::open(path)?;
        let mut header = None;
        let mut done = HashSet::new();
        while let Some((kind, payload)) = frames.next()? {
            match kind {
                HEADER => {
                    header = Some(serde_json::from_slice::<WalHeader>(&payload).map_err(|e| {
                        TethysError::Corruption(format!(
                            "WAL {} has a bad header: {e}",
                            path.display()
                        ))
                    })?)
                }
                DONE if payload.len() == 8 => {
                    done.insert(u64::from_le_bytes(
                        payload[..8].try_into().unwrap_or_default(),
                    ));
                }
                _ => {}
            }
        }
        let header = header.ok_or_else(|| {
            TethysError::Corruption(format!("WAL {} has no header", path.display()))
        })?;
        let summary = WalSummary {
            header,
            done: done.len(),
        };
        Ok((
            WalReader {
                frames: Frames::open(path)?,
                done,
            },
            summary,
        ))
    }

    /// The next batch of a completed request, `None` at the end.
    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        while let Some((kind, payload)) = self.frames.next()? {
            if kind != DATA || payload.len() < 8 {
                continue;
            }
            let request = u64::from_le_bytes(payload[..8].try_into().unwrap_or_default());
            if !self.done.contains(&request) {
                continue;
            }
            let mut reader = StreamReader::try_new(&payload[8..], None).map_err(|e| {
                TethysError::Corruption(format!(
                    "WAL {} holds an unreadable batch: {e}",
                    self.frames.path.display()
                ))
            })?;
            if let Some(b) = reader.next() {
                return Ok(Some(b.map_err(|e| {
                    TethysError::Corruption(format!(
                        "WAL {} holds an unreadable batch: {e}",
                        self.frames.path.display()
                    ))
                })?));
            }
        }
        Ok(None)
    }
}

/// Removes a WAL once its group is visible (or known to be).
pub fn remove(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(TethysError::io(
            format!("removing WAL {}", path.display()),
            e,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int32Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn batch(v: Vec<i32>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int32, true)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int32Array::from(v))]).unwrap()
    }

    #[test]
    fn replays_only_completed_requests_and_survives_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let h = WalHeader {
            db: "d".into(),
            table: "t".into(),
            table_id: 7,
            label: "group_commit_1_2".into(),
            txn_id: 10,
        };
        let mut w = WalWriter::create(dir.path(), &h).unwrap();
        w.data(1, &batch(vec![1, 2])).unwrap();
        w.data(2, &batch(vec![3])).unwrap();
        w.data(1, &batch(vec![4])).unwrap();
        w.done(1).unwrap();
        w.header(&WalHeader {
            txn_id: 11,
            ..h.clone()
        })
        .unwrap();
        w.sync().unwrap();
        let path = w.path().to_path_buf();
        drop(w);
        // A torn frame at the end.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[200, 0, 0, 0, 1, 2]).unwrap();
        drop(f);
        assert_eq!(list(dir.path()).unwrap(), vec![path.clone()]);
        let (mut r, s) = WalReader::open(&path).unwrap();
        assert_eq!(s.header.txn_id, 11);
        assert_eq!(s.done, 1);
        let mut rows = vec![];
        while let Some(b) = r.next_batch().unwrap() {
            let a = b.column(0).as_any().downcast_ref::<Int32Array>().unwrap();
            rows.extend(a.values().iter().copied());
        }
        assert_eq!(rows, vec![1, 2, 4]);
        // A retry reopens it: the torn frame is cut, the new header follows.
        let mut w = WalWriter::reopen(&path).unwrap();
        w.header(&WalHeader {
            txn_id: 12,
            ..h.clone()
        })
        .unwrap();
        drop(w);
        let (_, s) = WalReader::open(&path).unwrap();
        assert_eq!(s.header.txn_id, 12);
        check_all(dir.path()).unwrap();
        remove(&path).unwrap();
        assert!(list(dir.path()).unwrap().is_empty());
    }

    #[test]
    fn a_damaged_frame_is_an_error_naming_the_wal_never_fewer_rows() {
        let dir = tempfile::tempdir().unwrap();
        let h = WalHeader {
            db: "d".into(),
            table: "t".into(),
            table_id: 7,
            label: "group_commit_3_4".into(),
            txn_id: 10,
        };
        let mut w = WalWriter::create(dir.path(), &h).unwrap();
        w.data(1, &batch(vec![1, 2, 3])).unwrap();
        w.done(1).unwrap();
        w.sync().unwrap();
        let path = w.path().to_path_buf();
        drop(w);
        let clean = std::fs::read(&path).unwrap();
        for at in 0..clean.len() {
            let mut bytes = clean.clone();
            bytes[at] ^= 0x10;
            std::fs::write(&path, &bytes).unwrap();
            let err = check_all(dir.path()).unwrap_err().to_string();
            assert!(
                err.contains(&path.display().to_string()),
                "byte {at}: {err}"
            );
            assert!(WalReader::open(&path).is_err(), "byte {at}");
        }
    }
}

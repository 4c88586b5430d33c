//! Which cluster this backend belongs to, and where its frontend is.
//!
//! ```sql
//! ALTER SYSTEM ADD BACKEND "10.0.0.7:9060";  -- on the FE
//! ```
//!
//! A BE starts knowing neither: the FE's first heartbeat says who the FE is
//! (the BE then reaches it for the loads it coordinates) and which cluster
//! it runs. The BE keeps that cluster id in its data directory
//! (`<root>/cluster_id`, one checksummed record) from the first heartbeat on
//! and refuses the heartbeats of any other cluster, so a data directory is
//! never taken over by a second FE by mistake (Doris' BE does the same with
//! its `cluster_id` file).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tethys_common::framing::{FrameReader, frame};
use tethys_common::token::Token;
use tethys_common::{Result, TethysError};

/// The cluster a backend has joined, kept on disk with its token.
#[derive(Debug)]
pub struct Membership {
    path: PathBuf,
    cluster_id: Mutex<Option<i64>>,
    /// The cluster's token: the backend's services check it and its calls
    /// carry it (the same object as its backend pool's).
    token: Token,
}

impl Membership {
    /// Reads `<root>/cluster_id` (none yet: not joined). A damaged file is
    /// an error naming it, not a backend that joins any cluster.
    pub fn open(root: &Path, token: Token) -> Result<Membership> {
        let path = root.join("cluster_id");
        let cluster_id = match std::fs::read(&path) {
            Ok(bytes) => {
                let (id, t) = read_id(&bytes).map_err(|why| {
                    TethysError::Corruption(format!("{} is damaged: {why}", path.display()))
                })?;
                token.set(&t)?;
                Some(id)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(TethysError::io(format!("reading {}", path.display()), e)),
        };
        Ok(Membership {
            path,
            cluster_id: Mutex::new(cluster_id),
            token,
        })
    }

    /// The token the backend's services check.
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// The cluster joined, if any.
    pub fn cluster_id(&self) -> Option<i64> {
        *self.cluster_id.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Joins cluster `id` with its `token` (kept on disk before this
    /// returns), or refuses because this backend's data belongs to another
    /// cluster. A backend that joined before tokens takes its cluster's.
    pub fn join(&self, id: i64, token: &str) -> Result<()> {
        let mut joined = self.cluster_id.lock().unwrap_or_else(|p| p.into_inner());
        match *joined {
            Some(mine) if mine == id && (self.token.is_set() || token.is_empty()) => Ok(()),
            Some(mine) if mine == id => self.keep(id, token),
            Some(mine) => Err(TethysError::WrongCluster(format!(
                "this backend belongs to cluster {mine} (its data directory {} says so), \
                 not to cluster {id}; give it an empty data directory to join another cluster",
                self.path.parent().unwrap_or(&self.path).display()
            ))),
            None => {
                self.keep(id, token)?;
                *joined = Some(id);
                Ok(())
            }
        }
    }

    /// Writes the cluster id and token (fsynced) and takes the token.
    fn keep(&self, id: i64, token: &str) -> Result<()> {
        let mut payload = id.to_le_bytes().to_vec();
        payload.extend_from_slice(token.as_bytes());
        let record =
            frame(&payload).ok_or_else(|| TethysError::Internal("cluster id record".into()))?;
        tethys_common::fsutil::write_atomic(&self.path, &record)?;
        self.token.set(token)
    }
}

/// The cluster id and token of the file's record (no token: a file written
/// before tokens).
fn read_id(bytes: &[u8]) -> std::result::Result<(i64, String), String> {
    let mut r = FrameReader::new(bytes, 64);
    let payload = r
        .next_record()
        .map_err(|d| d.why)?
        .ok_or_else(|| "the file is cut short".to_string())?;
    let (id, token) = payload
        .split_at_checked(8)
        .ok_or_else(|| format!("a cluster id of {} bytes", payload.len()))?;
    let id: [u8; 8] = id
        .try_into()
        .map_err(|_| "a cluster id of 8 bytes".to_string())?;
    let token =
        String::from_utf8(token.to_vec()).map_err(|_| "a token that is no text".to_string())?;
    Ok((i64::from_le_bytes(id), token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backend_joins_one_cluster_and_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let m = Membership::open(dir.path(), Token::default()).unwrap();
        assert_eq!(m.cluster_id(), None);
        assert!(!m.token().is_set());
        m.join(42, "tok").unwrap();
        m.join(42, "tok").unwrap();
        assert!(m.token().is_set());
        let again = Membership::open(dir.path(), Token::default()).unwrap();
        assert_eq!(again.cluster_id(), Some(42));
        assert!(again.token().is_set(), "the token is kept");
        let e = again.join(7, "x").unwrap_err().to_string();
        assert!(e.contains("belongs to cluster 42"), "{e}");
        // A damaged file is refused naming it.
        let path = dir.path().join("cluster_id");
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let e = Membership::open(dir.path(), Token::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("cluster_id"), "{e}");
    }
}

//! Replica writes and Doris' quorum: a load writes every replica of each
//! tablet it touches and commits when a majority of each tablet's replicas
//! wrote it. The replicas written are named to the FE, which gives the
//! others no version of that load (they would otherwise publish an empty
//! version and answer without the rows) and marks them for repair.
//!
//! `INSERT INTO t VALUES ...` with replication_num 3 and one BE dead: two of
//! three replicas write, the load commits, the third replica is behind.

use std::collections::BTreeMap;

use tethys_proto::ReplicaPb;

use crate::{Result, TethysError};

/// Replicas that must have a version for it to become visible: a majority.
pub fn quorum(replica_num: usize) -> usize {
    replica_num / 2 + 1
}

/// What became of one load's replica writes.
#[derive(Debug, Default, Clone)]
pub struct ReplicaWrites {
    /// (tablet id, backend id) -> why its write failed.
    failed: BTreeMap<(i64, i64), String>,
    /// (tablet id, backend id) of the replicas that took every write sent.
    ok: std::collections::BTreeSet<(i64, i64)>,
}

impl ReplicaWrites {
    /// Records that a replica's write failed; later writes skip it.
    pub fn fail(&mut self, tablet_id: i64, backend_id: i64, why: String) {
        self.failed.entry((tablet_id, backend_id)).or_insert(why);
    }

    /// Records that a replica took a write.
    pub fn succeed(&mut self, tablet_id: i64, backend_id: i64) {
        self.ok.insert((tablet_id, backend_id));
    }

    pub fn is_failed(&self, tablet_id: i64, backend_id: i64) -> bool {
        self.failed.contains_key(&(tablet_id, backend_id))
    }

    /// Failed replicas of `tablet_id`.
    pub fn failures(&self, tablet_id: i64) -> usize {
        self.failed
            .range((tablet_id, i64::MIN)..=(tablet_id, i64::MAX))
            .count()
    }

    /// Fails once a majority of `replica_num` replicas of `tablet_id` can no
    /// longer be written: too few of them are among `backends` (the ones
    /// the load writes) without a failure.
    pub fn check(&self, tablet_id: i64, backends: &[i64], replica_num: usize) -> Result<()> {
        let ok = backends
            .iter()
            .filter(|b| !self.is_failed(tablet_id, **b))
            .count();
        if ok >= quorum(replica_num) {
            return Ok(());
        }
        let why = self
            .failed
            .range((tablet_id, i64::MIN)..=(tablet_id, i64::MAX))
            .map(|((_, b), e)| format!("backend {b}: {e}"))
            .collect::<Vec<_>>()
            .join("; ");
        if replica_num == 1
            && let Some(e) = self
                .failed
                .range((tablet_id, i64::MIN)..=(tablet_id, i64::MAX))
                .map(|(_, e)| e)
                .next()
        {
            // One replica: its own error says it best.
            return Err(TethysError::Backend(e.clone()));
        }
        let unwritable = replica_num.saturating_sub(backends.len());
        Err(TethysError::Backend(format!(
            "tablet {tablet_id} cannot be written to a majority ({}) of its {replica_num} replicas{}{}{why}",
            quorum(replica_num),
            if unwritable > 0 {
                format!(" ({unwritable} on dead or lagging backends)")
            } else {
                String::new()
            },
            if why.is_empty() { "" } else { ": " }
        )))
    }

    /// (tablet id, backend id) of the replicas written without a failure.
    pub fn written(&self) -> Vec<(i64, i64)> {
        self.ok
            .iter()
            .filter(|k| !self.failed.contains_key(k))
            .copied()
            .collect()
    }

    /// The replicas written, as the FE is told of them.
    pub fn written_pb(&self) -> Vec<ReplicaPb> {
        self.written()
            .into_iter()
            .map(|(t, b)| ReplicaPb {
                tablet_id: t,
                backend_id: b,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_majority_commits() {
        assert_eq!(quorum(1), 1);
        assert_eq!(quorum(2), 2);
        assert_eq!(quorum(3), 2);
        assert_eq!(quorum(5), 3);
        let mut w = ReplicaWrites::default();
        w.check(7, &[1, 2, 3], 3).unwrap();
        w.fail(7, 3, "connection refused".into());
        w.check(7, &[1, 2, 3], 3).unwrap();
        // A replica the load could not even try counts as missing.
        let e = w.check(7, &[1, 3], 3).unwrap_err().to_string();
        assert!(
            e.contains("majority (2) of its 3 replicas (1 on dead"),
            "{e}"
        );
        assert!(e.contains("backend 3: connection refused"), "{e}");
        w.fail(7, 2, "timeout".into());
        assert!(w.check(7, &[1, 2, 3], 3).is_err());
        // Other tablets are not affected.
        w.check(8, &[1, 2, 3], 3).unwrap();
        assert_eq!(w.failures(7), 2);
        w.succeed(7, 1);
        w.succeed(7, 2);
        w.succeed(8, 1);
        assert_eq!(w.written(), vec![(7, 1), (8, 1)]);
    }
}

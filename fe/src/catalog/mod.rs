//! The FE catalog: databases, tables, partitions, tablets, backends and
//! transactions, kept in memory and made durable through the edit log.

pub mod colocation;
pub mod journal;
pub mod model;

use std::path::Path;
use std::sync::{Mutex, RwLock, RwLockReadGuard};

use tethys_common::Result;

pub use journal::EditOp;
pub use model::*;

/// Hands out catalog ids (databases, tables, partitions, tablets, txns).
#[derive(Debug)]
pub struct IdGen {
    next: i64,
}

impl IdGen {
    pub fn alloc(&mut self) -> i64 {
        let v = self.next;
        self.next += 1;
        v
    }
}

/// The catalog with its edit log.
#[derive(Debug)]
pub struct Catalog {
    state: RwLock<CatalogState>,
    journal: Mutex<journal::Journal>,
}

/// Ids start here, like Doris' ids start in the ten-thousands.
const FIRST_ID: i64 = 10_000;

impl Catalog {
    /// Opens the catalog stored in `dir`.
    pub fn open(dir: &Path) -> Result<Catalog> {
        let (journal, mut state) = journal::Journal::open(dir)?;
        state.next_id = state.next_id.max(FIRST_ID);
        state.replicas_in_step();
        Ok(Catalog {
            state: RwLock::new(state),
            journal: Mutex::new(journal),
        })
    }

    /// A consistent read view.
    pub fn read(&self) -> RwLockReadGuard<'_, CatalogState> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Validates and performs one change: `f` sees the current state, returns
    /// the change to log; it is logged durably, then applied. Changes are
    /// serialized, so what `f` validated still holds when it is applied.
    pub fn mutate<R>(
        &self,
        f: impl FnOnce(&CatalogState, &mut IdGen) -> Result<(EditOp, R)>,
    ) -> Result<R> {
        let mut journal = self.journal.lock().unwrap_or_else(|p| p.into_inner());
        let (op, r, next) = {
            let state = self.read();
            let mut ids = IdGen {
                next: state.next_id,
            };
            let (op, r) = f(&state, &mut ids)?;
            (op, r, ids.next)
        };
        journal.append(&op, next)?;
        let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
        journal::apply(&mut state, &op)?;
        state.next_id = state.next_id.max(next);
        if journal.wants_checkpoint() {
            journal.checkpoint(&state)?;
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn create_db(c: &Catalog, name: &str) {
        c.mutate(|_, ids| {
            Ok((
                EditOp::CreateDatabase {
                    db: Database {
                        id: ids.alloc(),
                        name: name.into(),
                        tables: BTreeMap::new(),
                        create_time: 0,
                    },
                },
                (),
            ))
        })
        .unwrap();
    }

    #[test]
    fn replay_and_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        {
            let c = Catalog::open(dir.path()).unwrap();
            create_db(&c, "a");
            create_db(&c, "b");
        }
        // Simulate a crash in the middle of an append.
        let jp = dir.path().join("journal.log");
        let mut bytes = std::fs::read(&jp).unwrap();
        bytes.extend_from_slice(&[200, 0, 0, 0, 1, 2, 3, 4, b'{']);
        std::fs::write(&jp, &bytes).unwrap();
        let c = Catalog::open(dir.path()).unwrap();
        assert_eq!(c.read().databases.len(), 2);
        let id_b = c.read().databases["b"].id;
        create_db(&c, "c");
        assert!(c.read().databases["c"].id > id_b);
        drop(c);
        let c = Catalog::open(dir.path()).unwrap();
        assert_eq!(c.read().databases.len(), 3);
        // Checkpoint then reopen.
        {
            let mut j = c.journal.lock().unwrap();
            j.checkpoint(&c.read()).unwrap();
        }
        drop(c);
        let c = Catalog::open(dir.path()).unwrap();
        assert_eq!(c.read().databases.len(), 3);
    }
}

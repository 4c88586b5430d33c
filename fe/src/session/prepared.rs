//! The prepared statements a session holds, COM_STMT_PREPARE's by id and
//! SQL `PREPARE`'s by name, counted against one server-wide limit as
//! MySQL's `max_prepared_stmt_count` is: a client that prepares without
//! closing fails with error 1461 however many connections it spreads over.
//!
//! ```sql
//! PREPARE q FROM 'SELECT ?';  -- one of at most max_prepared_stmt_count
//! ```
//!
//! The count is released when a statement is closed or deallocated and,
//! for the rest, when the session ends however it ends (`Drop`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tethys_common::{Result, TethysError};

use crate::sql::params::Prepared;

/// One session's prepared statements.
#[derive(Debug, Default)]
pub struct PreparedStatements {
    by_id: HashMap<u32, Prepared>,
    by_name: BTreeMap<String, Prepared>,
    next_id: u32,
    /// Statements held by every session sharing this counter.
    in_use: Arc<AtomicUsize>,
}

impl PreparedStatements {
    /// Statements counted in `in_use` (the server's).
    pub fn counted_in(in_use: Arc<AtomicUsize>) -> Self {
        PreparedStatements {
            by_id: HashMap::new(),
            by_name: BTreeMap::new(),
            next_id: 0,
            in_use,
        }
    }

    /// Takes one of the `max` the counter allows, or error 1461.
    fn reserve(&self, max: usize) -> Result<()> {
        self.in_use
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .map(|_| ())
            .map_err(|_| TethysError::TooManyPreparedStatements(max))
    }

    fn release(&self, n: usize) {
        let _ = self
            .in_use
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                Some(v.saturating_sub(n))
            });
    }

    /// Keeps a COM_STMT_PREPARE statement; its id.
    pub fn add(&mut self, p: Prepared, max: usize) -> Result<u32> {
        self.reserve(max)?;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        while self.by_id.contains_key(&self.next_id) {
            self.next_id = self.next_id.wrapping_add(1).max(1);
        }
        self.by_id.insert(self.next_id, p);
        Ok(self.next_id)
    }

    pub fn get_mut(&mut self, id: u32) -> Option<&mut Prepared> {
        self.by_id.get_mut(&id)
    }

    /// COM_STMT_CLOSE.
    pub fn close(&mut self, id: u32) {
        if self.by_id.remove(&id).is_some() {
            self.release(1);
        }
    }

    /// `PREPARE name FROM ...`: a name prepared again is replaced.
    pub fn set_named(&mut self, name: &str, p: Prepared, max: usize) -> Result<()> {
        let key = name.to_ascii_lowercase();
        if !self.by_name.contains_key(&key) {
            self.reserve(max)?;
        }
        self.by_name.insert(key, p);
        Ok(())
    }

    pub fn named(&self, name: &str) -> Option<&Prepared> {
        self.by_name.get(&name.to_ascii_lowercase())
    }

    /// `DEALLOCATE PREPARE name`; false if there is none of that name.
    pub fn deallocate(&mut self, name: &str) -> bool {
        let found = self.by_name.remove(&name.to_ascii_lowercase()).is_some();
        if found {
            self.release(1);
        }
        found
    }

    /// Statements this session holds.
    pub fn len(&self) -> usize {
        self.by_id.len() + self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for PreparedStatements {
    fn drop(&mut self) {
        self.release(self.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_shared_and_released() {
        let shared = Arc::new(AtomicUsize::new(0));
        let mut a = PreparedStatements::counted_in(shared.clone());
        let mut b = PreparedStatements::counted_in(shared.clone());
        let p = || Prepared::new("SELECT ?").unwrap();
        let id = a.add(p(), 3).unwrap();
        a.set_named("Q", p(), 3).unwrap();
        a.set_named("q", p(), 3).unwrap(); // replaced, not counted twice
        b.add(p(), 3).unwrap();
        assert!(matches!(
            b.set_named("r", p(), 3),
            Err(TethysError::TooManyPreparedStatements(3))
        ));
        a.close(id);
        a.close(id);
        b.set_named("r", p(), 3).unwrap();
        assert_eq!(shared.load(Ordering::Acquire), 3);
        assert!(b.deallocate("R"));
        assert!(!b.deallocate("r"));
        drop(a);
        assert_eq!(shared.load(Ordering::Acquire), 1);
        drop(b);
        assert_eq!(shared.load(Ordering::Acquire), 0);
    }
}

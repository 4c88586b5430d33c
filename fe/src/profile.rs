//! Query profiles (`SET enable_profile = true`, `SHOW QUERY PROFILE`).
//!
//! With profiling on, a query's physical plan is kept while its rows stream
//! to the client; when the stream ends (or fails, or the client goes away)
//! the plan is rendered with every node's counters, as `EXPLAIN ANALYZE`
//! prints them, and stored with the query's summary. The FE keeps the most
//! recent `MAX_PROFILES`, as Doris keeps `max_query_profile_num`.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Profiles kept (Doris' `max_query_profile_num` default).
pub const MAX_PROFILES: usize = 100;

/// Column names of `SHOW QUERY PROFILE "/"` (Doris 2.1's profile list).
pub const LIST_COLUMNS: [&str; 10] = [
    "Profile ID",
    "Task Type",
    "Start Time",
    "End Time",
    "Total",
    "Task State",
    "User",
    "Default Catalog",
    "Default Db",
    "Sql Statement",
];

/// One finished query's profile.
#[derive(Debug, Clone)]
pub struct QueryProfile {
    pub id: String,
    pub start: chrono::DateTime<chrono::Local>,
    pub end: chrono::DateTime<chrono::Local>,
    pub state: String,
    pub user: String,
    pub db: String,
    pub sql: String,
    /// The plan with its counters (`EXPLAIN ANALYZE`'s lines).
    pub plan: Vec<String>,
}

impl QueryProfile {
    /// Its row of the profile list.
    pub fn list_row(&self) -> Vec<String> {
        vec![
            self.id.clone(),
            "QUERY".into(),
            self.start.format("%Y-%m-%d %H:%M:%S").to_string(),
            self.end.format("%Y-%m-%d %H:%M:%S").to_string(),
            total(self.end - self.start),
            self.state.clone(),
            self.user.clone(),
            "internal".into(),
            self.db.clone(),
            self.sql.clone(),
        ]
    }

    /// The whole profile as lines: the summary, then the plan.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec!["Summary:".to_string()];
        for (k, v) in LIST_COLUMNS.iter().zip(self.list_row()) {
            out.push(format!("   - {k}: {v}"));
        }
        out.push("Execution Profile:".into());
        out.extend(self.plan.iter().cloned());
        out
    }
}

/// Doris' duration form: `1sec234ms`, `56ms`.
fn total(d: chrono::TimeDelta) -> String {
    let ms = d.num_milliseconds().max(0);
    if ms >= 1000 {
        format!("{}sec{}ms", ms / 1000, ms % 1000)
    } else {
        format!("{ms}ms")
    }
}

/// The recent profiles, newest last.
#[derive(Debug, Default)]
pub struct ProfileStore {
    inner: Mutex<VecDeque<QueryProfile>>,
}

impl ProfileStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<QueryProfile>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn add(&self, p: QueryProfile) {
        let mut g = self.lock();
        while g.len() >= MAX_PROFILES {
            g.pop_front();
        }
        g.push_back(p);
    }

    /// All kept profiles, newest first (as Doris lists them).
    pub fn list(&self) -> Vec<QueryProfile> {
        self.lock().iter().rev().cloned().collect()
    }

    pub fn get(&self, id: &str) -> Option<QueryProfile> {
        self.lock().iter().find(|p| p.id == id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(id: &str) -> QueryProfile {
        let t = chrono::Local::now();
        QueryProfile {
            id: id.into(),
            start: t,
            end: t + chrono::TimeDelta::milliseconds(1234),
            state: "FINISHED".into(),
            user: "root".into(),
            db: "d".into(),
            sql: "select 1".into(),
            plan: vec!["PLAN FRAGMENT 0".into()],
        }
    }

    #[test]
    fn keeps_the_newest_and_lists_them_first() {
        let s = ProfileStore::default();
        for i in 0..MAX_PROFILES + 5 {
            s.add(profile(&i.to_string()));
        }
        let l = s.list();
        assert_eq!(l.len(), MAX_PROFILES);
        assert_eq!(l[0].id, (MAX_PROFILES + 4).to_string());
        assert!(s.get("0").is_none() && s.get("5").is_some());
        let row = l[0].list_row();
        assert_eq!(row[4], "1sec234ms");
        assert_eq!(row.len(), LIST_COLUMNS.len());
        assert!(l[0].lines().contains(&"PLAN FRAGMENT 0".to_string()));
    }
}

//! Session state tracking (`CLIENT_SESSION_TRACK`): an OK packet tells the
//! client which tracked system variables and which default schema the
//! statement changed. MariaDB Connector/J connects with
//!
//! ```sql
//! set ... session_track_schema=1, session_track_system_variables='auto_increment_increment,...'
//! ```
//!
//! and keeps its view of the session (the current database, the
//! character set) from these reports.

use crate::mysql::proto::{put_lenenc_int, put_lenenc_str};
use crate::session::{Session, Variables};

/// `SESSION_TRACK_SYSTEM_VARIABLES`, `SESSION_TRACK_SCHEMA`, `SESSION_TRACK_STATE_CHANGE`.
const SYSTEM_VARIABLES: u8 = 0;
const SCHEMA: u8 = 1;
const STATE_CHANGE: u8 = 2;

/// The session as a statement found it.
pub struct Before {
    vars: Variables,
    database: Option<String>,
}

impl Before {
    pub fn of(session: &Session) -> Before {
        Before {
            vars: session.vars.clone(),
            database: session.database.clone(),
        }
    }

    /// The session state information of an OK packet for what changed
    /// since, as the session's tracking variables ask; empty if nothing
    /// tracked changed.
    pub fn changes(&self, session: &Session) -> Vec<u8> {
        let vars = &session.vars;
        let on = |name: &str| {
            vars.get(name)
                .is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("on"))
        };
        let tracked = vars
            .get("session_track_system_variables")
            .unwrap_or_default();
        let tracked: Vec<&str> = tracked
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let mut out = Vec::new();
        for (name, value, _, _) in vars.all() {
            let wanted = tracked
                .iter()
                .any(|t| *t == "*" || t.eq_ignore_ascii_case(&name));
            if wanted && self.vars.get(&name).as_deref() != Some(value.as_str()) {
                let mut data = Vec::new();
                put_lenenc_str(&mut data, name.as_bytes());
                put_lenenc_str(&mut data, value.as_bytes());
                entry(&mut out, SYSTEM_VARIABLES, &data);
            }
        }
        if on("session_track_schema") && self.database != session.database {
            let mut data = Vec::new();
            put_lenenc_str(
                &mut data,
                session.database.as_deref().unwrap_or("").as_bytes(),
            );
            entry(&mut out, SCHEMA, &data);
        }
        if !out.is_empty() && on("session_track_state_change") {
            let mut data = Vec::new();
            put_lenenc_str(&mut data, b"1");
            entry(&mut out, STATE_CHANGE, &data);
        }
        out
    }
}

fn entry(out: &mut Vec<u8>, kind: u8, data: &[u8]) {
    out.push(kind);
    put_lenenc_int(out, data.len() as u64);
    out.extend_from_slice(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_tracked_variables_and_the_schema() {
        let mut s = Session::new(1, "root".into(), "127.0.0.1".into());
        let before = Before::of(&s);
        assert!(before.changes(&s).is_empty());
        s.vars.set("time_zone", "+08:00").unwrap();
        s.vars.set("batch_size", "100").unwrap(); // not tracked by default
        s.database = Some("d".into());
        let mut want = vec![SYSTEM_VARIABLES, 17, 9];
        want.extend_from_slice(b"time_zone");
        want.push(6);
        want.extend_from_slice(b"+08:00");
        want.extend_from_slice(&[SCHEMA, 2, 1, b'd']);
        assert_eq!(before.changes(&s), want);
        s.vars.set("session_track_schema", "OFF").unwrap();
        s.vars.set("session_track_system_variables", "").unwrap();
        assert!(before.changes(&s).is_empty());
    }
}

//! Debug points, as Doris has them: named places in the code that act out
//! a fault (a panic, an error) once a test has turned them on, so tests can
//! prove that a fault nobody can provoke from outside is contained.
//!
//! ```text
//! tethys standalone --enable-debug-points ...
//! curl -X POST 'http://127.0.0.1:8040/api/debug_point/add/BeFragment.panic?execute=1'
//! ```
//!
//! Points work only in a process started with `--enable-debug-points`
//! (Doris' `enable_debug_points` in fe.conf / be.conf); without it the HTTP
//! API refuses and [`hit`] is one relaxed atomic load. `execute=N` turns a
//! point off after N hits, `timeout=S` after S seconds. The FE and the BE
//! of one process share the registry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

static ENABLED: AtomicBool = AtomicBool::new(false);
static POINTS: LazyLock<Mutex<HashMap<String, Point>>> = LazyLock::new(Default::default);

#[derive(Debug, Clone, Copy)]
struct Point {
    /// Hits left before the point turns off (`None`: no limit).
    hits_left: Option<u64>,
    expires: Option<Instant>,
}

/// Lets debug points be turned on (at startup, from the command line).
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

fn points() -> std::sync::MutexGuard<'static, HashMap<String, Point>> {
    POINTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether the point `name` is on; a hit counts against its `execute` limit.
pub fn hit(name: &str) -> bool {
    if !ENABLED.load(Ordering::Relaxed) {
        return false;
    }
    let mut points = points();
    let Some(p) = points.get_mut(name) else {
        return false;
    };
    if p.expires.is_some_and(|at| Instant::now() >= at) {
        points.remove(name);
        return false;
    }
    if let Some(n) = &mut p.hits_left {
        *n -= 1;
        if *n == 0 {
            points.remove(name);
        }
    }
    true
}

/// Panics with the point's name when it is on: the fault a point in a
/// place that must survive panics acts out.
pub fn panic_if_hit(name: &str) {
    if hit(name) {
        panic!("debug point {name}");
    }
}

/// Serves the HTTP API: `POST /api/debug_point/{add|remove}/{name}` and
/// `POST /api/debug_point/clear`, with `execute` and `timeout` parameters
/// for `add`. Answers Doris' `{"msg": .., "code": ..}` and its HTTP status.
pub fn http_action(
    action: &str,
    name: Option<&str>,
    params: &HashMap<String, String>,
) -> (u16, serde_json::Value) {
    let answer = |code: u16, msg: String| {
        let body = serde_json::json!({"msg": msg, "code": if code == 200 { 0 } else { 1 }});
        (code, body)
    };
    if !ENABLED.load(Ordering::Relaxed) {
        return answer(
            403,
            "debug points are disabled: start the server with --enable-debug-points".into(),
        );
    }
    let number = |key: &str| -> Result<Option<u64>, String> {
        match params.get(key) {
            None => Ok(None),
            Some(v) => match v.trim().parse::<u64>() {
                Ok(n) if n > 0 => Ok(Some(n)),
                _ => Err(format!("invalid {key} [{v}]: a whole number above 0")),
            },
        }
    };
    match (action, name) {
        ("add", Some(name)) if !name.is_empty() => {
            let (hits_left, timeout) = match (number("execute"), number("timeout")) {
                (Ok(e), Ok(t)) => (e, t),
                (Err(m), _) | (_, Err(m)) => return answer(400, m),
            };
            let expires = timeout.map(|s| Instant::now() + Duration::from_secs(s.min(86_400)));
            points().insert(name.to_string(), Point { hits_left, expires });
            answer(200, "OK".into())
        }
        ("remove", Some(name)) => {
            points().remove(name);
            answer(200, "OK".into())
        }
        ("clear", None) => {
            points().clear();
            answer(200, "OK".into())
        }
        _ => answer(400, format!("unknown debug point action {action}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_count_their_hits_and_refuse_when_disabled() {
        let none = HashMap::new();
        assert_eq!(http_action("add", Some("T.a"), &none).0, 403);
        assert!(!hit("T.a"));
        enable();
        let once: HashMap<String, String> = [("execute".to_string(), "2".to_string())].into();
        assert_eq!(http_action("add", Some("T.a"), &once).0, 200);
        assert!(hit("T.a"));
        assert!(hit("T.a"));
        assert!(!hit("T.a"));
        let bad: HashMap<String, String> = [("timeout".to_string(), "x".to_string())].into();
        assert_eq!(http_action("add", Some("T.b"), &bad).0, 400);
        assert_eq!(http_action("add", Some("T.c"), &none).0, 200);
        assert!(hit("T.c") && hit("T.c"));
        assert_eq!(http_action("remove", Some("T.c"), &none).0, 200);
        assert!(!hit("T.c"));
    }
}

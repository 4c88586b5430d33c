//! `ALTER SYSTEM`, as Doris spells it for backends:
//!
//! ```sql
//! ALTER SYSTEM ADD BACKEND "10.0.0.7:9060", "10.0.0.8:9060";
//! ALTER SYSTEM DROPP BACKEND "10.0.0.7:9060";        -- DROP is refused, as in Doris
//! ALTER SYSTEM DECOMMISSION BACKEND "10.0.0.7:9060";
//! ```

use tethys_common::{Result, TethysError};

use super::ast::{AlterSystem, BackendAction, Statement};
use crate::sql::tokens::Tokens;

/// After `ALTER`: `SYSTEM <action> BACKEND "host:port"[, ...]`.
pub(super) fn parse_alter_system(t: &mut Tokens) -> Result<Statement> {
    t.expect_kw("system")?;
    let action = if t.eat_kw("add") {
        BackendAction::Add
    } else if t.eat_kw("dropp") {
        BackendAction::Drop { force: true }
    } else if t.eat_kw("drop") {
        BackendAction::Drop { force: false }
    } else if t.eat_kw("decommission") {
        BackendAction::Decommission
    } else {
        return Err(TethysError::NotSupported(
            "ALTER SYSTEM takes ADD, DROP, DROPP or DECOMMISSION BACKEND; frontends, brokers \
             and other ALTER SYSTEM clauses are not supported"
                .into(),
        ));
    };
    if !t.eat_kw("backend") {
        return Err(TethysError::NotSupported(
            "ALTER SYSTEM ... FOLLOWER / OBSERVER / BROKER: Tethys runs one frontend".into(),
        ));
    }
    let mut backends = vec![host_port(&t.string()?)?];
    while t.eat(&datafusion::sql::sqlparser::tokenizer::Token::Comma) {
        backends.push(host_port(&t.string()?)?);
    }
    t.finish()?;
    Ok(Statement::AlterSystem(AlterSystem { action, backends }))
}

/// `host:port` (a bracketed IPv6 host too), as Doris checks it.
fn host_port(s: &str) -> Result<(String, u16)> {
    let bad = || {
        TethysError::Analysis(format!(
            "Invalid host port format: {s}; expected \"host:heartbeat_port\""
        ))
    };
    let (host, port) = s.trim().rsplit_once(':').ok_or_else(bad)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port: u16 = port.parse().map_err(|_| bad())?;
    if host.is_empty() || port == 0 {
        return Err(bad());
    }
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::parse;

    #[test]
    fn backends_are_named_host_colon_port() {
        let s = parse(r#"ALTER SYSTEM ADD BACKEND "127.0.0.1:9060", '[::1]:9061'"#).unwrap();
        let Statement::AlterSystem(a) = s else {
            panic!("{s:?}")
        };
        assert_eq!(a.action, BackendAction::Add);
        assert_eq!(
            a.backends,
            vec![("127.0.0.1".into(), 9060), ("::1".into(), 9061)]
        );
        assert!(matches!(
            parse(r#"alter system dropp backend "h:1""#),
            Ok(Statement::AlterSystem(AlterSystem {
                action: BackendAction::Drop { force: true },
                ..
            }))
        ));
        assert!(parse(r#"ALTER SYSTEM ADD BACKEND "h""#).is_err());
        assert!(parse(r#"ALTER SYSTEM ADD BACKEND "h:x""#).is_err());
        assert!(parse(r#"ALTER SYSTEM ADD FOLLOWER "h:9010""#).is_err());
    }
}
